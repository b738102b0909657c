"""Tolerant JSON extraction from LLM replies (code fences, prose around, trailing commas)."""

from __future__ import annotations

import json
import re
from typing import Any

from kb.core.errors import LLMError

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _balanced(text: str, start: int) -> str | None:
    opener = text[start]
    closer = "}" if opener == "{" else "]"
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def parse_json_reply(text: str) -> Any:
    """Parse the first JSON object/array in ``text``; raise ``LLMError`` if there is none."""
    candidates: list[str] = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    pos = 0
    while pos < len(text):  # every balanced block, objects and arrays, in order
        ch = text[pos]
        if ch in "{[":
            block = _balanced(text, pos)
            if block:
                candidates.append(block)
                if ch == "{":
                    pos += len(block)
                    continue
        pos += 1
    objects = [c for c in candidates if c.startswith("{")]
    candidates = [candidates[0], *objects, *[c for c in candidates[1:] if not c.startswith("{")]]
    for cand in candidates:
        for variant in (cand, _TRAILING_COMMA.sub(r"\1", cand), cand.replace("None", "null")):
            try:
                return json.loads(variant)
            except (json.JSONDecodeError, ValueError):
                continue
    raise LLMError(f"reply is not JSON: {text[:120]!r}")
