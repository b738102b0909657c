"""Foundations: settings, database pool and migrator, errors, logging, types, text and language helpers,
vocabulary, the period parser, collections, the embedder record, the LLM call store, process lifecycle and the
model providers.

Nothing here imports ``ingest``, ``router`` or the application (the rest of ``kb``); ``tests/test_layers.py``
checks it.
"""
