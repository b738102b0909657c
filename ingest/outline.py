"""A document read as an outline — headings with levels, paragraphs, table rows — and its tree.

Word and HTML readers (``ingest.docx_read``, ``ingest.html_read``) produce an :class:`Outline`. Its
text rendering has exactly one line per block: ``## Heading``, a paragraph on one line, ``- item``,
a table row as ``cell | cell | cell``. The tree is built on that rendering by the Markdown tree
builder with the headings given (no Markdown parsing, so a paragraph that starts with ``#`` or
``---`` stays a paragraph), and its unit is ``"paragraph"``: paragraph *n* of a citation is line *n*
of the rendering, i.e. the *n*-th heading, paragraph, list item or table row of the document.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import msgspec

from ingest.markdown_tree import tree_from_headings
from kb.core.errors import IngestError
from kb.core.settings import IngestSettings
from kb.core.types import DocumentTree

UNIT = "paragraph"
MAX_HEADING_LEVEL = 6
_SPACE = re.compile(r"\s+")


class Block(msgspec.Struct, frozen=True):
    """One unit of a document: a heading (``level`` 0 for a document-title style, 1–6) or body text."""

    text: str
    level: int | None = None  # None: body text (paragraph, list item, table row)

    @property
    def is_heading(self) -> bool:
        return self.level is not None


class Outline(msgspec.Struct, frozen=True):
    """A Word or HTML document as blocks in reading order, with metadata from its properties."""

    blocks: tuple[Block, ...]
    properties: dict[str, Any] = {}  # title, author, company, keywords, created, year … (front-matter keys)
    warnings: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [("#" * max(1, b.level) + " " + b.text) if b.level is not None else b.text for b in self.blocks]

    def render(self) -> str:
        """The text rendering: one line per block (the citation unit)."""
        return "\n".join(self.lines())


def one_line(text: str) -> str:
    """Whitespace (tabs, line breaks, non-breaking spaces) collapsed to single spaces."""
    return _SPACE.sub(" ", text.replace("\u00a0", " ")).strip()


def table_row(cells: list[str]) -> str:
    """A table row as one unit: its non-empty cells joined with ``" | "``."""
    return " | ".join(c for c in (one_line(c) for c in cells) if c)


def make_outline(blocks: list[Block], properties: dict[str, Any], *, warnings: list[str] | None = None,
                 what: str = "document") -> Outline:
    """The outline of ``blocks``; raises ``IngestError`` when no block holds readable text."""
    kept = [b for b in blocks if b.text]
    if not any(any(ch.isalnum() for ch in b.text) for b in kept):
        raise IngestError(f"no readable text in the {what}")
    clean = {k: one_line(v) if isinstance(v, str) else v for k, v in properties.items()}
    clean = {k: v for k, v in clean.items() if v not in (None, "", [], {})}
    return Outline(blocks=tuple(kept), properties=clean, warnings=tuple(warnings or ()))


def outline_tree(outline: Outline, settings: IngestSettings, *, title: str, mode: str) -> DocumentTree:
    """The outline's heading tree in paragraph units (see module doc)."""
    headings = [(i, b.level, b.text) for i, b in enumerate(outline.blocks) if b.level is not None]
    warnings = list(outline.warnings)
    if not headings:
        warnings.append(f"no headings found in the {mode} document; it is a single node")
    return tree_from_headings(outline.lines(), headings, settings, title=outline.properties.get("title") or title,
                              mode=mode, unit=UNIT, warnings=warnings)


def keyword_list(raw: str | None) -> list[str]:
    """``"a, b; c"`` → ``["a", "b", "c"]``."""
    return [k for k in (one_line(p) for p in re.split(r"[,;]", raw or "")) if k]


def date_fields(created: dt.datetime | dt.date | str | None,
                modified: dt.datetime | dt.date | str | None) -> dict[str, Any]:
    """``created``/``modified`` as ISO dates and ``year`` (the year it was created, else modified)."""
    out: dict[str, Any] = {}
    for key, value in (("created", created), ("modified", modified)):
        day = _as_date(value)
        if day is not None:
            out[key] = day.isoformat()
            out.setdefault("year", day.year)
    return out


def _as_date(value: dt.datetime | dt.date | str | None) -> dt.date | None:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and (m := re.match(r"\s*((?:19|20)\d{2})-(\d{2})-(\d{2})", value)):
        try:
            return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return None
    return None
