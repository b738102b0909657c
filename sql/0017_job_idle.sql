-- The time a job stood finished (cancelled or done with failures) before a file of it was retried: left out of its
-- pages/s and time left, which count the time it was working (issue 40 item 4).
ALTER TABLE ingest_jobs ADD COLUMN IF NOT EXISTS idle_seconds double precision NOT NULL DEFAULT 0;
