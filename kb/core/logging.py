"""structlog configuration: JSON lines or a pretty console, one call at start-up; secrets redacted."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

SECRET_KEYS = frozenset({"authorization", "proxy-authorization", "api_key", "x-api-key", "admin_token",
                         "api_token", "password", "token", "secret", "cookie"})
_SECRET_TEXT = re.compile(
    r"(?i)(\b(?:bearer|basic)\s+|\b(?:api_key|admin_token|api_token|password|token)['\"]?\s*[:=]\s*['\"]?)"
    r"[^\s'\",)}\]]+"
)


def _stderr_logger(*_: object) -> structlog.PrintLogger:
    """A logger on the *current* ``sys.stderr`` (it may be swapped, e.g. by test capture)."""
    return structlog.PrintLogger(sys.stderr)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SECRET_TEXT.sub(r"\1***", value)
    if isinstance(value, dict):
        return {k: "***" if str(k).lower() in SECRET_KEYS else _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v) for v in value)
    return value


def redact(_: object, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Processor: secret fields become ``***``; bearer tokens and ``token=…`` in text (tracebacks too) are masked."""
    for key, value in event.items():
        event[key] = "***" if key.lower() in SECRET_KEYS and value else _scrub(value)
    return event


REQUESTS = {"info": False}  # whether http.request lines log at info (JSON logs) or debug (the console)


def requests_at_info() -> bool:
    """Request log lines are access logs in JSON (info) and detail on a person's console (debug)."""
    return REQUESTS["info"]


def configure_logging(fmt: str = "console", level: str = "info") -> None:
    """Configure structlog and route stdlib logging through it. On the console, ``http.request`` lines log at
    debug level (``KB_LOG_LEVEL=debug`` shows them); in JSON, at info."""
    lvl = getattr(logging, level.upper(), logging.INFO)
    REQUESTS["info"] = fmt == "json"
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,  # a plain traceback: never the frames' local variables
        redact,
    ]
    if fmt == "json":
        renderer: structlog.types.Processor = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(),
                                                 exception_formatter=structlog.dev.plain_traceback)
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
