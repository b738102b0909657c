-- What shaped a stored document besides its bytes (ingest/fingerprint.py): the hashes of its chunking and tree
-- settings, embedder, LLM model and given metadata. NULL for documents stored before: counted as unchanged.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS ingest_key jsonb;
-- A job asked to re-process its files even when nothing changed (`kb ingest --force`, `force` in the API).
ALTER TABLE ingest_jobs ADD COLUMN IF NOT EXISTS force boolean NOT NULL DEFAULT false;
