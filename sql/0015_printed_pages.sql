-- The page number each page of a PDF document prints (issue 37, the first seconds after a start): physical page
-- (1-based, as a JSON key) → its printed label, for the pages that print one. Written at ingest (read from the
-- same bytes as the tree) or, for a document ingested before, by the first query that cites it
-- (ingest.page_labels); NULL until then. Citations show it as "printed N".
ALTER TABLE documents ADD COLUMN IF NOT EXISTS printed_pages jsonb;
