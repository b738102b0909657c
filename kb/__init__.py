"""kb: multi-document knowledge-base server with a document router.

Bottom layer (foundations): settings, errors, logging, db, providers, types.
Top layer: ``kb.api`` (litestar controllers), ``kb.app`` and ``kb.cli``.
"""

__version__ = "0.1.0"
