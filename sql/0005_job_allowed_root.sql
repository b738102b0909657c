-- The folder a job's files must really lie in (KB_INGEST_ROOT or the uploads folder); the worker checks
-- it again on the opened file. NULL = no confinement (a job an operator started from the CLI).
ALTER TABLE ingest_jobs ADD COLUMN allowed_root text;
