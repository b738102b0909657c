"""Front matter: a ``--- … ---`` block of YAML-ish ``key: value`` lines at the top of a Markdown or text file,
split off the body (the tree builders) and read as metadata (the format readers)."""

from __future__ import annotations

import csv
import datetime as dt
import re
from typing import Any

import structlog

log = structlog.get_logger("ingest.front_matter")

_FM_OPEN = re.compile(r"\A\ufeff?---[ \t]*\r?\n")
_FM_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.M)


def split_front_matter(text: str) -> tuple[str | None, str, int]:
    """Split ``--- ... ---`` front matter off the top: (raw block or None, body, lines removed)."""
    m = _FM_OPEN.match(text)
    if not m:
        return None, text, 0
    close = _FM_CLOSE.search(text, m.end())
    if close is None:
        return None, text, 0
    raw = text[m.end() : close.start()]
    rest_start = close.end()
    if text.startswith("\r\n", rest_start):
        rest_start += 2
    elif text.startswith("\n", rest_start):
        rest_start += 1
    removed = text[:rest_start].count("\n")
    return raw, text[rest_start:], removed


def _scalar(raw: str) -> Any:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    low = value.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if low in ("null", "~", ""):
        return None
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if re.fullmatch(r"-?\d+\.\d*", value):
        return float(value)
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1].strip()
        return [] if not inner else [_scalar(p) for p in next(csv.reader([inner], skipinitialspace=True))]
    return value


def _simple_yaml(raw: str) -> dict[str, Any]:
    """``key: value`` lines, quoted strings, numbers, booleans, ``[a, b]`` and ``- item`` lists."""
    out: dict[str, Any] = {}
    last_key: str | None = None
    for line in raw.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.match(r"^\s+-\s+(.*)$", line) or re.match(r"^-\s+(.*)$", line)
        if item and last_key is not None:
            if not isinstance(out.get(last_key), list):
                out[last_key] = []
            out[last_key].append(_scalar(item.group(1)))
            continue
        m = re.match(r"^([A-Za-z0-9_][\w .-]*?)\s*:\s*(.*)$", line)
        if m:
            last_key = m.group(1).strip()
            out[last_key] = _scalar(m.group(2)) if m.group(2).strip() else None
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    return value


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Parse YAML-ish front matter at the top of ``text``; returns (metadata, text without it)."""
    raw, body, _ = split_front_matter(text)
    if raw is None:
        return {}, text
    data: Any = None
    try:
        import yaml  # optional: present in most environments, never required
    except ImportError:
        yaml = None  # type: ignore[assignment]
    if yaml is not None:
        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            log.warning("ingest.front_matter_yaml_error", error=str(exc).splitlines()[0])
            data = None
    if not isinstance(data, dict):
        data = _simple_yaml(raw)
    return {str(k): _jsonable(v) for k, v in data.items() if v is not None}, body
