-- LLM calls spent on each ingested file (tree building, summaries, description): the job status reports
-- them per 100 pages.
ALTER TABLE ingest_job_items ADD COLUMN llm_calls integer NOT NULL DEFAULT 0;
