"""Visual lines: a band of spans made one line of text (spaces and table cells from the gaps).

Also the line records kept per page (:class:`LineInfo` for the layout, :class:`_PageRecord` for
margins and headings) and the text helpers :func:`clean_text` and :func:`_letters`.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass

import msgspec

from ingest.pdf_read.spans import _Span


class LineInfo(msgspec.Struct, frozen=True):
    """One visual line: text, left x and font size in points, mostly bold or not."""

    text: str
    x: float
    size: float
    bold: bool


def clean_text(text: str) -> str:
    """Normalise unicode spaces/ligatures and collapse whitespace on one line."""
    t = unicodedata.normalize("NFKC", text)
    return " ".join(t.split())


@dataclass
class _Line:
    text: str = ""
    x0: float = 0.0
    x1: float = 0.0
    y0: float = 0.0
    yc: float = 0.0
    size: float = 0.0
    bold: bool = False
    cells: int = 1


def _make_line(spans: list[_Span]) -> _Line:
    spans = sorted(spans, key=lambda s: s.x0)
    parts: list[str] = []
    cells = 1
    prev: _Span | None = None
    for s in spans:
        if prev is not None:
            gap = s.x0 - prev.x1
            em = max(prev.size, s.size, 1.0)
            if gap > 1.5 * em:
                cells += 1
                parts.append(" ")
            elif gap > 0.15 * em and not prev.text.endswith(" ") and not s.text.startswith(" "):
                parts.append(" ")
        parts.append(s.text)
        prev = s
    text = clean_text("".join(parts))
    chars = [(len(s.text.strip()), s) for s in spans]
    total = sum(n for n, _ in chars) or 1
    size_weight: Counter[float] = Counter()
    for n, s in chars:
        size_weight[s.size] += n
    bold_chars = sum(n for n, s in chars if s.bold)
    return _Line(
        text=text,
        x0=spans[0].x0,
        x1=max(s.x1 for s in spans),
        y0=min(s.y0 for s in spans),
        yc=sum(s.yc for s in spans) / len(spans),
        size=max(size_weight.items(), key=lambda kv: (kv[1], kv[0]))[0],
        bold=bold_chars / total >= 0.7,
        cells=cells,
    )


_NOT_LETTER = bytes(c for c in range(128) if not chr(c).isalpha())


def _letters(text: str) -> int:
    """How many of ``text``'s characters are letters (``str.isalpha``)."""
    if text.isascii():  # the same count, without a call per character
        return len(text.encode().translate(None, _NOT_LETTER))
    return sum(map(str.isalpha, text))


@dataclass
class _PageRecord:
    """What is kept of a page once its text is taken: edge lines and heading-like lines only."""

    height: float
    width: float
    n_lines: int
    kept: dict[int, _Line]
    local_body: float  # the page's dominant font size
