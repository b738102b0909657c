"""The chunks of a document section as they are stored (text, pages, heading path, table context), for people
checking what was indexed."""

from __future__ import annotations

import asyncpg
import msgspec

from ingest import store
from kb.core.errors import NotFoundError

MAX_CHUNKS = 500


class StoredChunk(msgspec.Struct, frozen=True):
    id: int
    node_id: str
    ordinal: int
    page: int | None  # first physical page (PDF) or line / paragraph of a text source
    page_end: int | None
    heading_path: str
    context: str  # the table title and header a chunk starting inside a table is embedded with
    text: str
    token_count: int


class SectionChunks(msgspec.Struct, frozen=True):
    document_id: int
    node_id: str
    title: str
    chunks: list[StoredChunk]
    truncated: bool  # more than MAX_CHUNKS


async def section_chunks(pool: asyncpg.Pool, doc_id: int, node_id: str) -> SectionChunks:
    """The stored chunks of section ``node_id`` of document ``doc_id`` and its subsections, in reading order."""
    title = await store.node_title(pool, doc_id, node_id)
    if title is None:
        raise NotFoundError(f"document {doc_id} has no section {node_id!r}")
    rows = await store.section_chunk_rows(pool, doc_id, node_id, MAX_CHUNKS + 1)
    chunks = [StoredChunk(**dict(r)) for r in rows[:MAX_CHUNKS]]
    return SectionChunks(document_id=doc_id, node_id=node_id, title=title, chunks=chunks,
                         truncated=len(rows) > MAX_CHUNKS)
