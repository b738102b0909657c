"""Shared, frozen data types passed between layers (no behaviour, no I/O)."""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import msgspec


class PageText(msgspec.Struct, frozen=True, dict=True):
    """One physical PDF page (1-based ``number``) or one text unit."""

    number: int
    text: str

    @functools.cached_property
    def tokens(self) -> int:
        """The page's cl100k tokens, counted when first asked for (a tree asks for those of few pages)."""
        from kb.core.text import count_tokens

        return count_tokens(self.text)


class TreeNode(msgspec.Struct, frozen=True):
    """One node of a document tree, as stored.

    ``start``/``end`` are 1-based physical pages for PDFs, 1-based line numbers for
    Markdown/text, 1-based paragraphs for Word/HTML (``unit``: page | line | paragraph).
    ``path`` is the list of titles from the root.
    """

    node_id: str
    parent_id: str | None
    ordinal: int
    level: int
    title: str
    start: int
    end: int
    text: str
    summary: str
    path: tuple[str, ...]
    is_leaf: bool
    unit: str = "page"
    statements: tuple[str, ...] = ()  # financial statement kinds on its pages (ingest.statements)


class ChunkDraft(msgspec.Struct, frozen=True):
    """A chunk of a leaf node before it is stored."""

    node_id: str
    ordinal: int
    text: str
    page: int | None
    token_count: int
    heading_path: str
    page_end: int | None = None  # where the text ends, when it runs over a page break
    statement: str = ""  # the financial statement kind of its page ("cash_flow"), else ""
    context: str = ""  # a chunk starting inside a table: the table's title and column header (embedded with it)


class DocumentTree(msgspec.Struct, frozen=True):
    """Result of tree building for one file."""

    nodes: tuple[TreeNode, ...]
    page_count: int
    source_mode: str  # "outline" | "toc_pages" | "toc_no_pages" | "no_toc" | "markdown" | "text" | "docx" | "html"
    unit: str = "page"
    warnings: tuple[str, ...] = ()
    llm_calls: int = 0


class ChatUsage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


class LLMUsage(msgspec.Struct, frozen=True):
    """What a unit of work (a query, a document) spent on the LLM: calls, failed calls, tokens, cache hits."""

    calls: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0


class ChatResult(msgspec.Struct, frozen=True):
    """One completed chat call. ``data`` holds parsed JSON for JSON-schema calls."""

    text: str
    data: Any = None
    model: str = ""
    usage: ChatUsage = ChatUsage()
    duration_ms: float = 0.0


class FactDraft(msgspec.Struct, frozen=True):
    """One financial statement line item in one period column, read at ingest (``ingest.facts``).

    ``value`` is in base units (``printed`` × ``scale``; per-share figures unscaled); ``months`` is 0 for a
    balance at ``period_end`` and the period's length otherwise; ``page`` (PDF) or ``line`` (text) locate the
    printed ``source`` line for citation; ``concept`` is "" for a line outside ``kb.core.measures.CONCEPTS``.
    """

    statement: str
    line_item: str
    concept: str
    period_end: dt.date
    months: int
    period_label: str
    value: float
    printed: str
    scale: float
    unit: str
    page: int | None
    line: int | None
    node_id: str
    source: str
    column: int
