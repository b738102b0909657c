-- The collection's own printed statement lines outside the vocabulary (issue 35): one row per line as a
-- question would name it (kb.core.vocab.line_key: "交易性金融资产", "accrued liabilities"), with the vector of
-- that name from the recorded embedder, so that a question's measure is matched to them by meaning
-- (router.meaning) through the HNSW index — bounded however many reports the collection holds. Filled at
-- ingest and by `kb facts` (ingest.lines); `kb reembed` clears the vectors and fills them with the new embedder.
-- A line whose documents were all deleted stays: it then matches no stored fact, and is answered as not found.
CREATE TABLE IF NOT EXISTS line_labels (
    collection_id bigint NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    label         text NOT NULL,
    printed       text NOT NULL,
    embedding     vector({{EMBEDDING_DIM}}),
    PRIMARY KEY (collection_id, label)
);
CREATE INDEX IF NOT EXISTS line_labels_embedding_hnsw ON line_labels USING hnsw (embedding vector_cosine_ops);
