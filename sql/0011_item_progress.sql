-- Where a file being ingested is: its stage (reading, tree, summaries, embedding, storing) and how far
-- (pages, or chunks embedded), written by the worker as it goes; the web UI shows it live.
ALTER TABLE ingest_job_items ADD COLUMN stage text;
ALTER TABLE ingest_job_items ADD COLUMN stage_done integer NOT NULL DEFAULT 0;
ALTER TABLE ingest_job_items ADD COLUMN stage_total integer NOT NULL DEFAULT 0;
