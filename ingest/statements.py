"""Financial statement pages (issue: tables as first-class evidence): which pages hold a primary statement
(income statement, balance sheet, cash flow statement, comprehensive income, equity), recognised at ingest.

A page is a statement page when one of its first ``TITLE_LINES`` lines is a statement title
(``kb.core.vocab.statement_title``: "Consolidated Statements of Cash Flows", not a contents entry with a page
number) and at least ``MIN_NUMERIC_SHARE`` of its lines carry figures (the statement table, not the
auditor's letter that names the statements). A statement running over several pages marks the pages
that follow it while they stay numeric and start no other title (``MAX_CONTINUATION`` at most).
Chunks on a statement page carry its kind; a node carries the kinds of its chunks, and a node titled as
a statement (Word/HTML/Markdown headings) marks all its chunks. A wrong mark costs ranking weight only:
the router adds statement evidence, it never drops other evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import msgspec

from kb.core.types import ChunkDraft, DocumentTree, PageText
from kb.core.vocab import statement_title

TITLE_LINES = 6
"""The statement title stands among a page's first lines (after a running header, the company name)."""
MIN_NUMERIC_SHARE = 0.3
"""Share of a page's lines that carry a figure for it to be a statement table."""
MAX_CONTINUATION = 2
"""Pages after a titled statement page that continue it (a balance sheet over two pages)."""
_FIGURE = re.compile(
    r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # 1,577
    r"|(?<![\w.])\d+\.\d+"  # 12.5
    r"|\(\s?\$?\s?\d[\d,.]*\s?\)"  # (412)
    r"|(?:\s\$?\s?\(?\d[\d,.]*\)?%?){2,}\s*$"  # a row ending in two or more figure columns: "62 49"
)


_DIGIT = re.compile(r"\d")


def _numeric_share(lines: Sequence[str]) -> float:
    """The share of ``lines`` holding a figure (every ``_FIGURE`` holds a digit: a line without one is not tried)."""
    return sum(1 for ln in lines if _DIGIT.search(ln) and _FIGURE.search(ln)) / max(1, len(lines))


def page_statement(text: str) -> str:
    """The statement kind a page's title announces, when the page is a statement table; else ""."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if len(lines) < 8:
        return ""
    kind = next((k for line in lines[:TITLE_LINES] if (k := statement_title(line))), "")
    return kind if kind and _numeric_share(lines) >= MIN_NUMERIC_SHARE else ""  # the title first: few pages have one


def statement_pages(pages: Sequence[PageText]) -> dict[int, str]:
    """page number → statement kind, for the statement pages of a PDF (continuation pages included)."""
    out: dict[int, str] = {}
    current, run = "", 0
    for page in pages:
        kind = page_statement(page.text)
        if kind:
            current, run = kind, 0
            out[page.number] = kind
            continue
        lines = [ln for ln in page.text.split("\n") if ln.strip()]
        titled = any(statement_title(ln.strip()) or ln.strip().lower().startswith("notes to") for ln in lines[:TITLE_LINES])
        if current and run < MAX_CONTINUATION and not titled and len(lines) >= 8 \
                and _numeric_share(lines) >= MIN_NUMERIC_SHARE:
            run += 1
            out[page.number] = current
        else:
            current, run = "", 0
    return out


def mark_statements(tree: DocumentTree, chunks: Sequence[ChunkDraft],
                    pages: Mapping[int, str]) -> tuple[DocumentTree, list[ChunkDraft]]:
    """Chunks on a statement page (or in a node titled as a statement) carry its kind; nodes the kinds of
    their chunks."""
    titled = {n.node_id: kind for n in tree.nodes if (kind := statement_title(n.title))}
    marked: list[ChunkDraft] = []
    kinds: dict[str, set[str]] = {}
    for c in chunks:
        kind = pages.get(c.page, "") if c.page is not None else ""
        kind = kind or titled.get(c.node_id, "")
        if kind:
            c = msgspec.structs.replace(c, statement=kind)
            kinds.setdefault(c.node_id, set()).add(kind)
        marked.append(c)
    if not kinds:
        return tree, marked
    nodes = tuple(msgspec.structs.replace(n, statements=tuple(sorted(kinds[n.node_id])))
                  if n.node_id in kinds else n for n in tree.nodes)
    return msgspec.structs.replace(tree, nodes=nodes), marked
