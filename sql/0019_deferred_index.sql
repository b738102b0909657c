-- The chunks' vector index while a bulk ingest holds it back (ingest.bulk_index): a job that will add more
-- chunks than the table holds drops the HNSW index, fills the table and builds the index once when it ends —
-- pgvector builds a graph in memory about four times cheaper than it inserts the same rows one by one. The
-- definition is kept here (as the catalog gave it) so that whoever finds the job ended, or its process gone,
-- builds it again: a crash never leaves the index missing for good.
CREATE TABLE deferred_indexes (
    indexname text PRIMARY KEY,
    indexdef  text NOT NULL,
    job_id    bigint,         -- the ingest job holding it back; NULL: the process named by holder
    holder    text NOT NULL,  -- host:pid of the process that dropped it
    since     timestamptz NOT NULL DEFAULT now()
);
