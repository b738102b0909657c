-- Full-text search indexes the application's tokens (kb.text.tokenize: words of every script with their
-- accents, Chinese segmented, kana/Hangul bigrams, English plurals folded), the same tokens BM25 reads, instead
-- of Postgres' English parser and stemmer. ``tokens`` is written with each chunk; chunks stored before this
-- migration have none until the re-tokenising backfill (ingest.reindex: run at start, or ``kb reindex``) fills
-- them in, without re-embedding. ``text_index_state.tokenizer`` records which tokenizer version the stored
-- tokens come from: a new version re-tokenises everything at the next start.
ALTER TABLE chunks ADD COLUMN tokens text[];
ALTER TABLE chunks DROP COLUMN tsv;  -- and its index chunks_tsv_gin
ALTER TABLE chunks ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (array_to_tsvector(coalesce(tokens, '{}'::text[]))) STORED;
CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);
-- chunks still to tokenise: the start-up check reads this (empty) index instead of scanning every chunk
CREATE INDEX chunks_tokens_missing_idx ON chunks (id) WHERE tokens IS NULL;
DELETE FROM lexeme_df;  -- recounted from the new tokens by the backfill

CREATE TABLE text_index_state (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),
    tokenizer text NOT NULL DEFAULT ''
);
INSERT INTO text_index_state DEFAULT VALUES;
