"""structlog configuration: JSON lines or a pretty console, one call at start-up."""

from __future__ import annotations

import logging
import sys

import structlog


def _stderr_logger(*_: object) -> structlog.PrintLogger:
    """A logger on the *current* ``sys.stderr`` (it may be swapped, e.g. by test capture)."""
    return structlog.PrintLogger(sys.stderr)


def configure_logging(fmt: str = "console", level: str = "info") -> None:
    """Configure structlog and route stdlib logging through it."""
    lvl = getattr(logging, level.upper(), logging.INFO)
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        renderer: structlog.types.Processor = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=sys.stderr, format="%(name)s %(message)s")
    for noisy in ("pgserver", "sentence_transformers", "httpx", "transformers", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
