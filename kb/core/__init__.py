"""Foundations: settings, database pool and migrator, errors, logging, types, text and language helpers,
vocabulary, the period parser, collections, the embedder record, the LLM call store, process lifecycle and the
model providers.

Nothing here imports ``ingest``, ``router`` or the application (the rest of ``kb``); ``tests/test_layers.py``
checks it.
"""

import sys

if "pymupdf" not in sys.modules:
    # pymupdf 2.0 imports its layout analyser (pymupdf-layout, one of its dependencies) when it is imported, which
    # loads an ONNX model into every process that reads a PDF — parser processes included: half a second of CPU
    # and about 55 MB each. Nothing here asks for page layout analysis (``Page.get_layout``), so that import is
    # declined (pymupdf goes on without it when it cannot be imported).
    sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[assignment]
