-- Financial statement pages (income statement, balance sheet, cash flow statement, …) recognised at ingest:
-- each chunk on such a page carries its kind, each node the kinds of its chunks. Documents ingested before
-- this migration carry none until they are ingested again.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS statement text NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS statements text[] NOT NULL DEFAULT '{}';
CREATE INDEX IF NOT EXISTS chunks_statement ON chunks (document_id, statement) WHERE statement <> '';
