"""Ingest library: files → PageIndex-style trees, summaries, metadata, chunks and embeddings in Postgres."""

import kb.core  # noqa: F401  # before any reader imports pymupdf (kb.core declines its layout analyser)
