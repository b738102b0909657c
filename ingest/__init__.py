"""Ingest library: files → PageIndex-style trees, summaries, metadata, chunks and embeddings in Postgres."""
