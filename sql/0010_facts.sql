-- Financial facts (issue 21): one row per statement line item and period column, read at ingest
-- (ingest.facts). value is in base units (printed × scale; per-share figures unscaled); months is 0 for a
-- balance at period_end; page (PDF) or line (text) locate the printed source line. concept is '' for a
-- line outside the vocabulary (kb.vocab.CONCEPTS). Documents ingested before this migration have none until
-- `kb facts --collection NAME` (or a new ingest) reads them.
CREATE TABLE IF NOT EXISTS facts (
    id            bigserial PRIMARY KEY,
    document_id   bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    collection_id bigint NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    ordinal       integer NOT NULL,
    statement     text NOT NULL,
    line_item     text NOT NULL,
    concept       text NOT NULL DEFAULT '',
    period_end    date NOT NULL,
    months        smallint NOT NULL DEFAULT 0,
    period_label  text NOT NULL DEFAULT '',
    value         double precision NOT NULL,
    printed       text NOT NULL,
    scale         double precision NOT NULL DEFAULT 1,
    unit          text NOT NULL DEFAULT '',
    page          integer,
    line          integer,
    node_id       text NOT NULL DEFAULT '',
    source        text NOT NULL DEFAULT '',
    col           smallint NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS facts_document ON facts (document_id, ordinal);
CREATE INDEX IF NOT EXISTS facts_concept ON facts (collection_id, concept, period_end) WHERE concept <> '';
