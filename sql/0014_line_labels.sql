-- The collection's own printed statement lines outside the vocabulary (issue 35): one row per line as a
-- question would name it (kb.core.vocab.line_key: "交易性金融资产", "accrued liabilities"), with the vector of
-- that name from the recorded embedder, so that a question's measure is matched to them by meaning
-- (router.meaning) through the HNSW index — bounded however many reports the collection holds. Filled at
-- ingest and by `kb facts` (ingest.lines, which also drops names no stored fact prints any more); `kb reembed`
-- clears the vectors and fills them with the new embedder. The vector column takes the type and dimension the
-- stored chunk vectors have (vector or halfvec: KB_VECTOR_TYPE), so adding it retypes nothing.
DO $$
DECLARE
    typ text := (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                 WHERE a.attrelid = 'chunks'::regclass AND a.attname = 'embedding' AND NOT a.attisdropped);
    ops text;
BEGIN
    ops := CASE WHEN typ LIKE 'halfvec%' THEN 'halfvec_cosine_ops' ELSE 'vector_cosine_ops' END;
    EXECUTE format('CREATE TABLE IF NOT EXISTS line_labels (
        collection_id bigint NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
        label         text NOT NULL,
        printed       text NOT NULL,
        embedding     %s,
        PRIMARY KEY (collection_id, label))', typ);
    EXECUTE format('CREATE INDEX IF NOT EXISTS line_labels_embedding_hnsw ON line_labels USING hnsw (embedding %s)',
                   ops);
END $$;
