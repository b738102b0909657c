-- Ingest hardening (issue 25): a file that replaced an earlier version of its document is reported as
-- 'replaced'; upload jobs are marked so that uploads a job did not keep are removed; a document being
-- deleted in batches is marked 'deleting' (queries and listings no longer see it).
ALTER TABLE ingest_job_items DROP CONSTRAINT IF EXISTS ingest_job_items_status_check;
ALTER TABLE ingest_job_items ADD CONSTRAINT ingest_job_items_status_check
    CHECK (status IN ('pending', 'running', 'ok', 'replaced', 'skipped', 'failed', 'unsupported', 'cancelled'));
ALTER TABLE ingest_jobs ADD COLUMN upload boolean NOT NULL DEFAULT false;
CREATE INDEX ingest_job_items_job_idx ON ingest_job_items (job_id, id);
CREATE INDEX documents_deleting_idx ON documents (updated_at) WHERE status = 'deleting';
