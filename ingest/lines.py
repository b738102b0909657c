"""The collection's own printed lines, named and embedded: every statement line outside the vocabulary
(``kb.core.measures.CONCEPTS``) that a document's facts hold is stored once per collection under the name a
question would use (``kb.core.vocab.line_key``), with the vector of that name, so that a question's measure can
be matched to the collection's lines by meaning (``router.meaning``) — through an index, however many reports
the collection holds. Run after a document's facts are stored, by ``kb facts`` and after ``kb reembed``.
"""

from __future__ import annotations

import asyncpg
import msgspec
import structlog

from ingest import store
from ingest.embedding import CachedEmbedder
from kb.core.vocab import line_key

log = structlog.get_logger("ingest.lines")

BATCH = 512
"""Line names embedded and stored per step."""
MIN_NAME = 3
"""Shorter names (after ``line_key``) are not stored: "a", "其他" name nothing a question could ask for."""


class LinesIndexed(msgspec.Struct, frozen=True):
    """What ``index_lines`` did: printed lines read, names added, vectors stored; ``stale`` when a re-embed
    moved the stored vectors past the caller's embedder (nothing more was written)."""

    lines: int
    embedded: int
    stale: bool = False


def line_names(printed: list[str]) -> dict[str, str]:
    """Name → the line as first printed, for printed lines (names shorter than ``MIN_NAME`` left out)."""
    out: dict[str, str] = {}
    for p in printed:
        key = line_key(p)
        if len(key) >= MIN_NAME:
            out.setdefault(key, p.strip())
    return out


async def index_lines(pool: asyncpg.Pool, embedder: CachedEmbedder, collection_id: int, *,
                      doc_id: int | None = None, generation: int | None = None) -> LinesIndexed:
    """Store the names of the printed lines of a collection (or one of its documents) it lacks — over the whole
    collection, dropping those no stored fact prints any more — and embed every name without a vector."""
    names = line_names(await store.printed_lines(pool, collection_id, doc_id))
    if doc_id is None:  # the whole collection read: names no stored fact prints any more are dropped
        await store.prune_line_labels(pool, collection_id, list(names))
    await store.add_line_labels(pool, collection_id, names)
    embedded, last = 0, None
    while (labels := await store.unembedded_labels(pool, collection_id, BATCH)) and labels != last:
        last = labels  # the same batch again: its vectors were not stored (not expected; never loop on it)
        vectors = await embedder.embed(labels)
        if not await store.set_label_vectors(pool, collection_id, labels, list(vectors), generation):
            log.warning("ingest.lines_stale", collection_id=collection_id)
            return LinesIndexed(len(names), embedded, stale=True)
        embedded += len(labels)
    if embedded:
        log.info("ingest.lines_indexed", collection_id=collection_id, doc_id=doc_id, lines=len(names),
                 embedded=embedded)
    return LinesIndexed(len(names), embedded)
