"""The page number a PDF page prints, next to its physical number (citations count physical pages: "p. 3"
may be the page that prints "2" after a cover).

From the PDF's page labels when it has them, else a bare number in the page's header or footer lines
("2", "Page 2", "2 | Annual report", "ii"); ``None`` when the page prints none. Read at ingest and stored with
the document (``documents.printed_pages``); a document ingested before has them read from its source by the
first query that cites it, once however many ask at the same time, and stored."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, TypeVar

import asyncpg
import msgspec

from ingest import store
from ingest.printed import PRINTED, edge_number, printed_labels
from ingest.render import SourceDoc, load_source, read_source
from kb.core.errors import KBError
from kb.core.singleflight import SingleFlight

__all__ = ["PRINTED", "edge_number", "labels_of", "printed_labels", "with_printed_pages"]

CACHE_DOCS = 64  # documents whose labels are kept in the process (by content hash)
_cache: OrderedDict[str, dict[int, str]] = OrderedDict()
_reading: SingleFlight[str, dict[int, str]] = SingleFlight()  # by content hash: one read from the source at a time


async def labels_of(pool: asyncpg.Pool, doc_id: int) -> dict[int, str]:
    """The printed labels of PDF document ``doc_id``: kept in the process by content, else stored with the
    document, else read from its source (once per content at a time) and stored; {} for a source that cannot be
    read."""
    doc = await load_source(pool, doc_id)
    if not doc.is_pdf:
        return {}
    if doc.sha256 in _cache:
        _cache.move_to_end(doc.sha256)
        return _cache[doc.sha256]
    stored = await store.stored_printed_pages(pool, doc_id)
    if stored is not None:
        return _keep(doc.sha256, stored)
    return await _reading.run(doc.sha256, lambda: _read_and_store(pool, doc))


async def _read_and_store(pool: asyncpg.Pool, doc: SourceDoc) -> dict[int, str]:
    """Read a document's labels from its source and store them; {} (not stored) when the source cannot be read."""
    try:
        labels = await asyncio.to_thread(lambda: printed_labels(read_source(doc)))
    except (KBError, RuntimeError, ValueError):  # moved or changed source, or a PDF pymupdf cannot reopen
        return {}
    await store.store_printed_pages(pool, doc.doc_id, doc.sha256, labels)
    return _keep(doc.sha256, labels)


def _keep(sha256: str, labels: dict[int, str]) -> dict[int, str]:
    _cache[sha256] = labels
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
