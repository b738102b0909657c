"""Collections and documents in Postgres: reading, listing, deleting, and the atomic document write."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
import numpy as np
import structlog

from kb.core.collections import get_collection
from kb.core.db import LONG_STATEMENT_S
from kb.core.errors import IngestError, NotFoundError
from kb.core.text import index_tokens
from kb.core.types import ChunkDraft, DocumentTree, FactDraft

log = structlog.get_logger("ingest.store")

SQL_LIST_DOCUMENTS = """
SELECT id, name, source_path, sha256, file_type, metadata, title, description, page_count, tree_mode,
       node_count, chunk_count, warnings, status, created_at, updated_at
FROM documents WHERE collection_id = $1 AND status <> 'deleting' ORDER BY name LIMIT $2 OFFSET $3"""
SQL_LIST_DOCUMENTS_BY_ID = """
SELECT id, name, source_path, sha256, file_type, metadata, title, description, page_count, tree_mode,
       node_count, chunk_count, warnings, status, created_at, updated_at
FROM documents WHERE collection_id = $1 AND id = ANY($4::bigint[]) AND status <> 'deleting'
ORDER BY name LIMIT $2 OFFSET $3"""
SQL_GET_DOCUMENT = """
SELECT d.id, d.name, d.source_path, d.sha256, d.file_type, d.metadata, d.title, d.description, d.page_count,
       d.tree_mode, d.node_count, d.chunk_count, d.warnings, d.status, d.created_at, d.updated_at,
       c.name AS collection
FROM documents d JOIN collections c ON c.id = d.collection_id WHERE d.id = $1"""
SQL_DOCUMENT_NODES = """
SELECT node_id, parent_id, ordinal, level, title, start_index, end_index, unit, is_leaf, summary, statements
FROM nodes WHERE document_id = $1 ORDER BY ordinal"""
SQL_GET_NODE = """
SELECT node_id, parent_id, title, path, start_index, end_index, unit, is_leaf, summary, text
FROM nodes WHERE document_id = $1 AND node_id = $2"""
SQL_NODE_CHILDREN = "SELECT node_id, title FROM nodes WHERE document_id = $1 AND parent_id = $2 ORDER BY ordinal"
DELETING = "deleting"
DELETE_BATCH_ROWS = 2000  # rows per statement when a document is deleted
SQL_DOC_FOR_DELETE = "SELECT status, source_path, chunk_count FROM documents WHERE id = $1 FOR UPDATE"
SQL_MARK_DELETING = """
UPDATE documents SET status = 'deleting', name = '.deleting/' || id || '/' || name, sha256 = 'deleting/' || id,
       updated_at = now()
WHERE id = $1"""
SQL_TOUCH_DELETING = "UPDATE documents SET updated_at = now() WHERE id = $1 AND status = 'deleting'"
SQL_DELETE_CHUNKS_BATCH = """
DELETE FROM chunks WHERE id IN (SELECT id FROM chunks WHERE document_id = $1 LIMIT $2)"""
SQL_DELETE_NODES_BATCH = """
DELETE FROM nodes WHERE document_id = $1
  AND node_id IN (SELECT node_id FROM nodes WHERE document_id = $1 LIMIT $2)"""
SQL_DELETE_FACTS_BATCH = """
DELETE FROM facts WHERE ctid IN (SELECT ctid FROM facts WHERE document_id = $1 LIMIT $2)"""
SQL_DELETE_DELETING = "DELETE FROM documents WHERE id = $1 AND status = 'deleting'"
SQL_STALLED_DELETES = """
SELECT id, source_path, chunk_count FROM documents
WHERE status = 'deleting' AND updated_at < now() - make_interval(secs => $1)"""
SQL_DOC_BY_NAME = "SELECT id FROM documents WHERE collection_id = $1 AND name = $2"
SQL_DOC_COLLECTION_NOLOCK = "SELECT collection_id FROM documents WHERE id = $1"
SQL_LEXEMES_ADD = """
INSERT INTO lexeme_df (collection_id, lexeme, df)
SELECT $1, s.lx, 1 FROM (
    SELECT DISTINCT unnest(tsvector_to_array(tsv)) AS lx FROM chunks WHERE document_id = $2
) s ORDER BY s.lx
ON CONFLICT (collection_id, lexeme) DO UPDATE SET df = lexeme_df.df + 1"""
SQL_LEXEMES_REMOVE = """
UPDATE lexeme_df l SET df = l.df - 1
FROM (SELECT DISTINCT unnest(tsvector_to_array(tsv)) AS lx FROM chunks WHERE document_id = $2 ORDER BY 1) s
WHERE l.collection_id = $1 AND l.lexeme = s.lx"""
SQL_FIND_SAME = """
SELECT id, name, sha256 FROM documents WHERE collection_id = $1 AND (name = $2 OR sha256 = $3)"""
SQL_LOCK_NAME = "SELECT pg_advisory_xact_lock(hashtextextended($1, 42))"
SQL_LOCK_LEXEMES = "SELECT pg_advisory_xact_lock(hashtextextended('lexeme_df/' || ($1::bigint)::text, 42))"
SQL_DELETE_BY_NAME = "DELETE FROM documents WHERE collection_id = $1 AND name = $2"
SQL_DOC_BY_SHA = "SELECT id, name FROM documents WHERE collection_id = $1 AND sha256 = $2"
SQL_REPOINT_ITEMS = "UPDATE ingest_job_items SET document_id = $2 WHERE document_id = $1"
UNIQUE_CONTENT = "documents_collection_sha256_key"
SQL_INSERT_DOCUMENT = """
INSERT INTO documents (collection_id, name, source_path, sha256, file_type, metadata, title, description,
                       description_embedding, page_count, tree_mode, node_count, chunk_count, warnings)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id"""
SQL_JOB_FOR_WRITE = "SELECT status FROM ingest_jobs WHERE id = $1 FOR SHARE"
SQL_EMBEDDER_GENERATION = "SELECT generation FROM embedder_state FOR SHARE"
NODE_COLUMNS = ("document_id", "node_id", "parent_id", "ordinal", "level", "title", "start_index", "end_index",
                "unit", "is_leaf", "summary", "text", "path", "embedding", "statements")
FACT_COLUMNS = ("document_id", "collection_id", "ordinal", "statement", "line_item", "concept", "period_end",
                "months", "period_label", "value", "printed", "scale", "unit", "page", "line", "node_id", "source",
                "col")
SQL_DELETE_FACTS = "DELETE FROM facts WHERE document_id = $1"
SQL_DOCUMENT_FACTS = """
SELECT ordinal, statement, line_item, concept, period_end, months, period_label, value, printed, scale, unit,
       page, line, node_id, source, col AS column
FROM facts WHERE document_id = $1 AND ($2::text IS NULL OR concept = $2) ORDER BY ordinal"""
CHUNK_COLUMNS = ("document_id", "collection_id", "node_id", "ordinal", "text", "page", "token_count",
                 "heading_path", "embedding", "page_end", "statement", "context", "tokens")


class DocumentInfo(msgspec.Struct, frozen=True):
    id: int
    name: str
    source_path: str
    sha256: str
    file_type: str
    metadata: dict[str, Any]
    title: str
    description: str
    page_count: int
    tree_mode: str
    node_count: int
    chunk_count: int
    warnings: list[str]
    status: str
    created_at: datetime
    updated_at: datetime
    collection: str | None = None


class NodeInfo(msgspec.Struct, frozen=True):
    """A tree node as the API lists it: ``kb.core.types.TreeNode`` without text and path, its range under the
    wire names ``start_index``/``end_index`` (PageIndex's)."""

    node_id: str
    parent_id: str | None
    ordinal: int
    level: int
    title: str
    start_index: int
    end_index: int
    unit: str
    is_leaf: bool
    summary: str
    statements: list[str] = []  # financial statements on its pages ("income", "balance", "cash_flow", …)


class NodeText(msgspec.Struct, frozen=True):
    """One node with its text, its title path and its children (id, title) for navigation."""

    node_id: str
    parent_id: str | None
    title: str
    path: list[str]
    start_index: int
    end_index: int
    unit: str
    is_leaf: bool
    summary: str
    text: str
    children: list[tuple[str, str]]


class NewDocument(msgspec.Struct, frozen=True):
    """Everything the atomic write needs for one document."""

    collection_id: int
    name: str
    source_path: str
    sha256: str
    file_type: str
    metadata: dict[str, Any]
    title: str
    description: str
    description_embedding: np.ndarray | None
    tree: DocumentTree
    node_embeddings: np.ndarray
    chunks: Sequence[ChunkDraft]
    chunk_embeddings: np.ndarray
    embedder_generation: int | None = None  # when set, the write is refused if `kb reembed` ran since
    facts: Sequence[FactDraft] = ()  # statement line items per period (ingest.facts)
    job_id: int | None = None  # when set, the write is refused (JobCancelledError) once that job is cancelled


def _doc(row: asyncpg.Record) -> DocumentInfo:
    data = dict(row)
    meta = data.get("metadata")
    data["metadata"] = json.loads(meta) if isinstance(meta, str) else (meta or {})
    data["warnings"] = list(data.get("warnings") or [])
    return DocumentInfo(**data)


async def list_documents(pool: asyncpg.Pool, collection: str, *, limit: int = 1000, offset: int = 0,
                         ids: Sequence[int] | None = None) -> list[DocumentInfo]:
    """Documents of a collection by name; with ``ids``, only those (e.g. the matches of a metadata filter)."""
    coll = await get_collection(pool, collection)
    if ids is not None:
        return [_doc(r) for r in await pool.fetch(SQL_LIST_DOCUMENTS_BY_ID, coll.id, limit, offset, list(ids))]
    return [_doc(r) for r in await pool.fetch(SQL_LIST_DOCUMENTS, coll.id, limit, offset)]


async def get_document(pool: asyncpg.Pool, doc_id: int) -> tuple[DocumentInfo, list[NodeInfo]]:
    row = await pool.fetchrow(SQL_GET_DOCUMENT, doc_id)
    if row is None:
        raise NotFoundError(f"document {doc_id} does not exist")
    nodes = [NodeInfo(**dict(r)) for r in await pool.fetch(SQL_DOCUMENT_NODES, doc_id)]
    return _doc(row), nodes


async def get_node(pool: asyncpg.Pool, doc_id: int, node_id: str) -> NodeText:
    """One node of a document with its full text; ``NotFoundError`` names what is missing."""
    row = await pool.fetchrow(SQL_GET_NODE, doc_id, node_id)
    if row is None:
        if await pool.fetchval(SQL_DOC_COLLECTION_NOLOCK, doc_id) is None:
            raise NotFoundError(f"document {doc_id} does not exist")
        raise NotFoundError(f"document {doc_id} has no node {node_id!r}")
    kids = [(r["node_id"], r["title"]) for r in await pool.fetch(SQL_NODE_CHILDREN, doc_id, node_id)]
    return NodeText(**{**dict(row), "path": list(row["path"])}, children=kids)


class Deleting(msgspec.Struct, frozen=True):
    """A document being deleted: out of listings, lexeme counts and name/content checks; rows left to go."""

    id: int
    source_path: str
    chunks: int


async def start_delete(pool: asyncpg.Pool, doc_id: int) -> Deleting:
    """Take a document out of the collection in one short transaction (lexeme counts, name and content freed
    for a re-ingest, listings); its rows are removed by :func:`finish_delete`. A second call for a document
    already being deleted returns it again."""
    async with pool.acquire() as conn, conn.transaction():
        collection_id = await conn.fetchval(SQL_DOC_COLLECTION_NOLOCK, doc_id)
        if collection_id is None:
            raise NotFoundError(f"document {doc_id} does not exist")
        # the lexeme lock first, like the writer: one lexeme writer per collection, no lock cycles
        await conn.execute(SQL_LOCK_LEXEMES, collection_id)
        row = await conn.fetchrow(SQL_DOC_FOR_DELETE, doc_id)
        if row is None:
            raise NotFoundError(f"document {doc_id} does not exist")
        if row["status"] != DELETING:
            await conn.execute(SQL_LEXEMES_REMOVE, collection_id, doc_id, timeout=LONG_STATEMENT_S)
            await conn.execute(SQL_MARK_DELETING, doc_id)
    log.info("store.document_deleting", doc_id=doc_id, chunks=row["chunk_count"])
    return Deleting(id=doc_id, source_path=row["source_path"], chunks=row["chunk_count"])


async def finish_delete(pool: asyncpg.Pool, doc_id: int, *, batch: int = DELETE_BATCH_ROWS,
                        on_progress: Callable[[int], object] | None = None) -> int:
    """Remove a document taken out by :func:`start_delete`, ``batch`` rows per statement (each its own short
    transaction, so a large document never holds locks or a statement long); ``on_progress(rows)`` after each.
    Resumable: a delete interrupted half-way is finished by calling it again. Returns the rows removed."""
    removed = 0
    for sql in (SQL_DELETE_CHUNKS_BATCH, SQL_DELETE_NODES_BATCH, SQL_DELETE_FACTS_BATCH):
        while True:
            n = int((await pool.execute(sql, doc_id, batch)).rsplit(" ", 1)[-1])
            if not n:
                break
            removed += n
            await pool.execute(SQL_TOUCH_DELETING, doc_id)
            if on_progress is not None:
                on_progress(removed)
    await pool.execute(SQL_DELETE_DELETING, doc_id)
    log.info("store.document_deleted", doc_id=doc_id, rows=removed)
    return removed


async def delete_document(pool: asyncpg.Pool, doc_id: int) -> Deleting:
    """Delete a document with its nodes, chunks, facts and lexeme counts (:func:`start_delete`, then
    :func:`finish_delete` in batches)."""
    deleting = await start_delete(pool, doc_id)
    await finish_delete(pool, doc_id)
    return deleting


async def stalled_deletes(pool: asyncpg.Pool, idle_s: float) -> list[Deleting]:
    """Documents left half-deleted (their deleter stopped): no batch for ``idle_s``."""
    return [Deleting(id=r["id"], source_path=r["source_path"], chunks=r["chunk_count"])
            for r in await pool.fetch(SQL_STALLED_DELETES, idle_s)]


async def find_existing(pool: asyncpg.Pool, collection_id: int, name: str, sha256: str) -> tuple[str, int] | None:
    """('same', id) when identical content is already stored under any name; ('changed', id) for the name."""
    rows = await pool.fetch(SQL_FIND_SAME, collection_id, name, sha256)
    for r in rows:
        if r["sha256"] == sha256:
            return ("same", r["id"])
    for r in rows:
        if r["name"] == name:
            return ("changed", r["id"])
    return None


class JobCancelledError(IngestError):
    """The document's ingest job was cancelled before its write: nothing was stored."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} was cancelled before this file was stored; nothing was stored")


class DuplicateContentError(IngestError):
    """The same content is already stored in the collection (under another name)."""

    def __init__(self, doc_id: int, name: str) -> None:
        super().__init__(f"same content as document {doc_id} ({name!r}) already in the collection")
        self.doc_id = doc_id


async def write_document(pool: asyncpg.Pool, doc: NewDocument) -> int:
    """Replace-or-insert one document with its nodes and chunks in ONE transaction.

    A collection holds each content once: the unique (collection, sha256) index decides between two
    concurrent writers, and the loser gets :class:`DuplicateContentError`. Job items that pointed at a
    replaced version now point at the new one.
    """
    try:
        return await _write_document(pool, doc)
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name != UNIQUE_CONTENT:
            raise
        row = await pool.fetchrow(SQL_DOC_BY_SHA, doc.collection_id, doc.sha256)
        if row is None:  # the other copy was deleted meanwhile: try once more
            return await _write_document(pool, doc)
        raise DuplicateContentError(row["id"], row["name"]) from exc


async def _write_document(pool: asyncpg.Pool, doc: NewDocument) -> int:
    tree = doc.tree
    async with pool.acquire() as conn, conn.transaction():
        if doc.job_id is not None:  # held to commit: a cancel either sees this document stored or stops it
            if await conn.fetchval(SQL_JOB_FOR_WRITE, doc.job_id) == "cancelled":
                raise JobCancelledError(doc.job_id)
        if doc.embedder_generation is not None:  # before any table lock, like the re-embed swap
            generation = await conn.fetchval(SQL_EMBEDDER_GENERATION)
            if generation is not None and generation != doc.embedder_generation:
                raise IngestError("the stored vectors were re-embedded ('kb reembed') after this process started; "
                                  "restart it with the new embedder settings")
        await conn.execute(SQL_LOCK_NAME, f"{doc.collection_id}/{doc.name}")
        old_id = await conn.fetchval(SQL_DOC_BY_NAME, doc.collection_id, doc.name)
        await conn.execute(SQL_LOCK_LEXEMES, doc.collection_id)  # held to commit: lexeme counts never race
        if old_id is not None:
            await conn.execute(SQL_LEXEMES_REMOVE, doc.collection_id, old_id, timeout=LONG_STATEMENT_S)
            await conn.execute(SQL_DELETE_BY_NAME, doc.collection_id, doc.name, timeout=LONG_STATEMENT_S)
        doc_id = await conn.fetchval(
            SQL_INSERT_DOCUMENT, doc.collection_id, doc.name, doc.source_path, doc.sha256, doc.file_type,
            json.dumps(doc.metadata, default=str), doc.title, doc.description, doc.description_embedding,
            tree.page_count, tree.source_mode, len(tree.nodes), len(doc.chunks), list(tree.warnings),
        )
        await conn.copy_records_to_table(
            "nodes",
            columns=NODE_COLUMNS,
            timeout=LONG_STATEMENT_S,
            records=[
                (doc_id, n.node_id, n.parent_id, n.ordinal, n.level, n.title, n.start, n.end, n.unit, n.is_leaf,
                 n.summary, n.text, list(n.path), doc.node_embeddings[i], list(n.statements))
                for i, n in enumerate(tree.nodes)
            ],
        )
        if doc.chunks:
            await conn.copy_records_to_table(
                "chunks",
                columns=CHUNK_COLUMNS,
                timeout=LONG_STATEMENT_S,
                records=[
                    (doc_id, doc.collection_id, c.node_id, c.ordinal, c.text, c.page, c.token_count,
                     c.heading_path, doc.chunk_embeddings[i], c.page_end, c.statement, c.context,
                     index_tokens(c.heading_path, c.text))
                    for i, c in enumerate(doc.chunks)
                ],
            )
            await conn.execute(SQL_LEXEMES_ADD, doc.collection_id, doc_id, timeout=LONG_STATEMENT_S)
        await _copy_facts(conn, doc_id, doc.collection_id, doc.facts)
        if old_id is not None:
            await conn.execute(SQL_REPOINT_ITEMS, old_id, doc_id)
    return int(doc_id)


async def _copy_facts(conn: asyncpg.Connection, doc_id: int, collection_id: int, facts: Sequence[FactDraft]) -> None:
    if facts:
        await conn.copy_records_to_table(
            "facts", columns=FACT_COLUMNS, timeout=LONG_STATEMENT_S,
            records=[(doc_id, collection_id, i, f.statement, f.line_item, f.concept,
                      f.period_end, f.months, f.period_label, f.value, f.printed, f.scale,
                      f.unit, f.page, f.line, f.node_id, f.source, f.column) for i, f in enumerate(facts)],
        )


async def replace_facts(pool: asyncpg.Pool, doc_id: int, collection_id: int, facts: Sequence[FactDraft]) -> None:
    """A document's facts replaced in one transaction (``kb facts`` re-reading stored documents)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(SQL_DELETE_FACTS, doc_id)
        await _copy_facts(conn, doc_id, collection_id, facts)


class FactRow(FactDraft, frozen=True):
    """A stored fact as the API lists it: ``kb.core.types.FactDraft`` with its place in the document's facts."""

    ordinal: int


async def document_facts(pool: asyncpg.Pool, doc_id: int, concept: str | None = None) -> list[FactRow]:
    """A document's facts in reading order (``NotFoundError`` for an unknown document)."""
    if await pool.fetchval(SQL_DOC_COLLECTION_NOLOCK, doc_id) is None:
        raise NotFoundError(f"document {doc_id} does not exist")
    return [FactRow(**dict(r)) for r in await pool.fetch(SQL_DOCUMENT_FACTS, doc_id, concept)]
