"""The page number a PDF page prints, next to its physical number (citations count physical pages: "p. 3"
may be the page that prints "2" after a cover).

From the PDF's page labels when it has them, else a bare number in the page's header or footer lines
("2", "Page 2", "2 | Annual report", "ii"); ``None`` when the page prints none."""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, TypeVar

import asyncpg
import msgspec
import pymupdf

from ingest.render import load_source, read_source
from kb.core.errors import KBError

EDGE = 0.1  # header / footer: the top and bottom tenth of the page
_NUMBER = r"(\d{1,4}|[ivxlcdm]{1,7})"
PRINTED = (
    re.compile(rf"^(?:page|p\.)?\s*{_NUMBER}(?:\s*(?:of|/)\s*\d+)?$", re.I),
    re.compile(rf"^{_NUMBER}\s*[|·•–—-]\s+\S", re.I),
    re.compile(rf"\S\s+[|·•–—-]\s*{_NUMBER}$", re.I),
)
CACHE_DOCS = 64  # documents whose labels are kept (by content hash)
_cache: OrderedDict[str, dict[int, str]] = OrderedDict()


def _is_year(text: str) -> bool:
    return text.isdigit() and len(text) == 4 and text[:2] in {"19", "20"}


def edge_number(page: pymupdf.Page) -> str | None:
    """A page number printed in the header or footer lines of ``page`` (footer first), or None."""
    height = page.rect.height or 1.0
    lines: list[tuple[float, str]] = []
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            y0, y1 = line["bbox"][1], line["bbox"][3]
            if y1 <= EDGE * height or y0 >= (1 - EDGE) * height:
                text = "".join(s["text"] for s in line["spans"]).strip()
                lines.append((-y0, text))  # bottom lines first
    for _, text in sorted(lines):
        for pattern in PRINTED:
            m = pattern.search(text)
            if m and not _is_year(m.group(1)):
                return m.group(1)
    return None


def printed_labels(data: bytes) -> dict[int, str]:
    """Physical page (1-based) → the number it prints, for the pages that print one."""
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        if doc.get_page_labels():
            return {p.number + 1: label for p in doc if (label := p.get_label())}
        return {p.number + 1: n for p in doc if (n := edge_number(p)) is not None}


async def labels_of(pool: asyncpg.Pool, doc_id: int) -> dict[int, str]:
    """The printed labels of PDF document ``doc_id`` (cached by content); {} for a source that cannot be read."""
    doc = await load_source(pool, doc_id)
    if not doc.is_pdf:
        return {}
    if doc.sha256 in _cache:
        _cache.move_to_end(doc.sha256)
        return _cache[doc.sha256]
    try:
        labels = await asyncio.to_thread(lambda: printed_labels(read_source(doc)))
    except (KBError, RuntimeError, ValueError):  # moved or changed source, or a PDF pymupdf cannot reopen
        return {}
    _cache[doc.sha256] = labels
    while len(_cache) > CACHE_DOCS:
        _cache.popitem(last=False)
    return labels


class _PageCitation(Protocol):
    doc_id: int
    unit: str
    pages: tuple[int, int]


C = TypeVar("C", bound=_PageCitation)


async def with_printed_pages(pool: asyncpg.Pool, citations: Sequence[C]) -> list[C]:
    """``citations`` with ``printed_page`` set on those of a PDF page that prints its number."""
    out = []
    for c in citations:
        if c.unit == "page":
            label = (await labels_of(pool, c.doc_id)).get(c.pages[0])
            if label is not None:
                c = msgspec.structs.replace(c, printed_page=label)  # type: ignore[arg-type]
        out.append(c)
    return out
