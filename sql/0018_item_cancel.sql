-- One file of a job cancelled while it is being ingested (issue 40 item 4): its worker sees the flag at its next
-- poll, stops the file (its parser process killed) and records it cancelled; the job's other files go on.
ALTER TABLE ingest_job_items ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false;
