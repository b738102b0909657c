-- The page on which a chunk's text ends (a chunk may run over a page break); NULL = same as page.
ALTER TABLE chunks ADD COLUMN page_end integer;
