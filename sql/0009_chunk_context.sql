-- A chunk that starts inside a table keeps the table's title and column header (embedded with the chunk).
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS context text NOT NULL DEFAULT '';
