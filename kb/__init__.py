"""kb: multi-document knowledge-base server with a document router.

Bottom layer (foundations): settings, errors, logging, db, providers, types, text.
Middle layer: the libraries ``ingest`` and ``router`` (they import foundations only).
Top layer: ``kb.runtime`` (the composition root: pool, providers, query pipeline, ingest context),
``kb.api`` (litestar controllers, given the runtime by dependency injection), ``kb.app`` (the ASGI
application), ``kb.cli``, ``kb.mcp_server`` and ``kb.bench``. ``tests/test_layers.py`` checks the imports.
"""

__version__ = "0.1.0"
