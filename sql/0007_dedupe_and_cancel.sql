-- Content-level dedupe as a constraint (it holds under concurrent writers), and job cancellation.

-- Exact duplicates (same content twice in a collection, from a race of two writers) keep their oldest
-- copy; document frequencies are recounted only when something was removed.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM documents GROUP BY collection_id, sha256 HAVING count(*) > 1) THEN
        UPDATE ingest_job_items i SET document_id = keep.id
        FROM documents d
        JOIN LATERAL (SELECT min(e.id) AS id FROM documents e
                      WHERE e.collection_id = d.collection_id AND e.sha256 = d.sha256) keep ON true
        WHERE i.document_id = d.id AND keep.id <> d.id;
        DELETE FROM documents d USING documents e
        WHERE d.collection_id = e.collection_id AND d.sha256 = e.sha256 AND d.id > e.id;
        DELETE FROM lexeme_df;
        INSERT INTO lexeme_df (collection_id, lexeme, df)
        SELECT d.collection_id, s.lx, count(*)
        FROM documents d
        CROSS JOIN LATERAL (
            SELECT DISTINCT unnest(tsvector_to_array(c.tsv)) AS lx FROM chunks c WHERE c.document_id = d.id
        ) s
        GROUP BY d.collection_id, s.lx;
    END IF;
END $$;
CREATE UNIQUE INDEX documents_collection_sha256_key ON documents (collection_id, sha256);
DROP INDEX IF EXISTS documents_sha_idx;  -- the unique index serves its lookups

ALTER TABLE ingest_jobs DROP CONSTRAINT IF EXISTS ingest_jobs_status_check;
ALTER TABLE ingest_jobs ADD CONSTRAINT ingest_jobs_status_check
    CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled'));
ALTER TABLE ingest_job_items DROP CONSTRAINT IF EXISTS ingest_job_items_status_check;
ALTER TABLE ingest_job_items ADD CONSTRAINT ingest_job_items_status_check
    CHECK (status IN ('pending', 'running', 'ok', 'skipped', 'failed', 'unsupported', 'cancelled'));
