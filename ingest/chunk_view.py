"""The chunks of a document section as they are stored (text, pages, heading path, table context), for people
checking what was indexed."""

from __future__ import annotations

import asyncpg
import msgspec

from kb.core.errors import NotFoundError

MAX_CHUNKS = 500
SQL_NODE = "SELECT title FROM nodes WHERE document_id = $1 AND node_id = $2"
SQL_SECTION_CHUNKS = """
WITH RECURSIVE section AS (
    SELECT node_id FROM nodes WHERE document_id = $1 AND node_id = $2
    UNION ALL
    SELECT n.node_id FROM nodes n JOIN section s ON n.parent_id = s.node_id WHERE n.document_id = $1
)
SELECT c.id, c.node_id, c.ordinal, c.page, c.page_end, c.heading_path, c.context, c.text, c.token_count
FROM chunks c JOIN nodes n ON n.document_id = c.document_id AND n.node_id = c.node_id
WHERE c.document_id = $1 AND c.node_id IN (SELECT node_id FROM section)
ORDER BY n.ordinal, c.ordinal LIMIT $3"""


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
    title = await pool.fetchval(SQL_NODE, doc_id, node_id)
    if title is None:
        raise NotFoundError(f"document {doc_id} has no section {node_id!r}")
    rows = await pool.fetch(SQL_SECTION_CHUNKS, doc_id, node_id, MAX_CHUNKS + 1)
    chunks = [StoredChunk(**dict(r)) for r in rows[:MAX_CHUNKS]]
    return SectionChunks(document_id=doc_id, node_id=node_id, title=title, chunks=chunks,
                         truncated=len(rows) > MAX_CHUNKS)
