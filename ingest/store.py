"""Every statement the ingest library runs, in one home, each named constant beside the function that runs it.

Collections and documents (reading, listing, deleting, the atomic document write, facts), the source pages
and lines a citation points at, ingest jobs and their files, the embedding cache, re-embedding (staging and
the one-transaction swap, ``KB_VECTOR_TYPE`` conversion) and re-indexing (full-text tokens, lexeme counts).
The other ``ingest`` modules hold no SQL: they call the functions here. A function that runs inside a
transaction takes the connection its caller opened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
import numpy as np
import structlog

from kb.core.collections import get_collection
from kb.core.db import LONG_STATEMENT_S
from kb.core.embedder_record import SQL_COLUMN_DIM
from kb.core.errors import IngestError, NotFoundError
from kb.core.text import index_tokens
from kb.core.types import ChunkDraft, DocumentTree, FactDraft

log = structlog.get_logger("ingest.store")


# ---- locks

SQL_ADVISORY_LOCK = "SELECT pg_advisory_lock($1)"


async def advisory_lock(conn: asyncpg.Connection, key: int) -> None:
    """Take the session advisory lock ``key`` (waits for its holder; released by :func:`advisory_unlock`)."""
    await conn.execute(SQL_ADVISORY_LOCK, key, timeout=LONG_STATEMENT_S)


SQL_TRY_ADVISORY_LOCK = "SELECT pg_try_advisory_lock($1)"


async def try_advisory_lock(conn: asyncpg.Connection, key: int) -> bool:
    """Take the session advisory lock ``key`` if no other session holds it; whether it was taken."""
    return await conn.fetchval(SQL_TRY_ADVISORY_LOCK, key)


SQL_ADVISORY_UNLOCK = "SELECT pg_advisory_unlock($1)"


async def advisory_unlock(conn: asyncpg.Connection, key: int) -> None:
    """Release the session advisory lock ``key`` taken on ``conn``."""
    await conn.execute(SQL_ADVISORY_UNLOCK, key)


SQL_LOCK_LEXEMES = "SELECT pg_advisory_xact_lock(hashtextextended('lexeme_df/' || ($1::bigint)::text, 42))"


async def lock_lexemes(conn: asyncpg.Connection, collection_id: int) -> None:
    """The lexeme-count lock of a collection, held to the end of the caller's transaction: one lexeme writer per
    collection (document writes, deletes and recounts take it before any row lock, so no lock cycles)."""
    await conn.execute(SQL_LOCK_LEXEMES, collection_id)


# ---- documents and chunks

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
SQL_DOC_COLLECTION_NOLOCK = "SELECT collection_id FROM documents WHERE id = $1"


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


def _doc(row: asyncpg.Record) -> DocumentInfo:
    data = dict(row)
    meta = data.get("metadata")
    data["metadata"] = json_dict(meta) or {}
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


SQL_NODE_TITLE = "SELECT title FROM nodes WHERE document_id = $1 AND node_id = $2"


async def node_title(pool: asyncpg.Pool, doc_id: int, node_id: str) -> str | None:
    """The title of node ``node_id`` of document ``doc_id``; None when there is no such node."""
    return await pool.fetchval(SQL_NODE_TITLE, doc_id, node_id)


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


async def section_chunk_rows(pool: asyncpg.Pool, doc_id: int, node_id: str, limit: int) -> list[asyncpg.Record]:
    """The stored chunks of section ``node_id`` and its subsections in reading order, at most ``limit``:
    id, node_id, ordinal, page, page_end, heading_path, context, text, token_count."""
    return await pool.fetch(SQL_SECTION_CHUNKS, doc_id, node_id, limit)


# ---- deleting documents

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
SQL_LEXEMES_REMOVE = """
UPDATE lexeme_df l SET df = l.df - 1
FROM (SELECT DISTINCT unnest(tsvector_to_array(tsv)) AS lx FROM chunks WHERE document_id = $2 ORDER BY 1) s
WHERE l.collection_id = $1 AND l.lexeme = s.lx"""


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
        await lock_lexemes(conn, collection_id)
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


# ---- writing documents

SQL_FIND_SAME = """
SELECT id, name, sha256, ingest_key FROM documents WHERE collection_id = $1 AND (name = $2 OR sha256 = $3)"""


class Existing(msgspec.Struct, frozen=True):
    """A stored document a file meets: ``same`` content (under any name) or a ``changed`` one under its name,
    with the fingerprint it was ingested with (``ingest.fingerprint``; None before fingerprints)."""

    kind: str  # same | changed
    doc_id: int
    ingest_key: dict[str, str] | None = None
    name: str = ""


async def find_existing(pool: asyncpg.Pool, collection_id: int, name: str, sha256: str) -> Existing | None:
    """The stored document with identical content (under any name, its own name first), else the one under the
    name with other content; None when neither."""
    rows = sorted(await pool.fetch(SQL_FIND_SAME, collection_id, name, sha256), key=lambda r: r["name"] != name)
    for r in rows:
        if r["sha256"] == sha256:
            return Existing("same", r["id"], json_dict(r["ingest_key"]), r["name"])
    for r in rows:
        if r["name"] == name:
            return Existing("changed", r["id"], json_dict(r["ingest_key"]), r["name"])
    return None


def json_dict(value: Any) -> dict[str, Any] | None:
    """A jsonb column's value as a dict (asyncpg hands jsonb over as text), None for NULL."""
    if value is None:
        return None
    return json.loads(value) if isinstance(value, str) else dict(value)


SQL_SOURCES_BY_NAME = """
SELECT name, source_path FROM documents WHERE collection_id = $1 AND name = ANY($2::text[])"""


async def sources_by_name(pool: asyncpg.Pool, collection_id: int, names: Sequence[str]) -> dict[str, str]:
    """The source path of each stored document of the collection named in ``names``."""
    rows = await pool.fetch(SQL_SOURCES_BY_NAME, collection_id, list(names))
    return {r["name"]: r["source_path"] for r in rows}


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
    item_id: int | None = None  # … and once this file of the job is (a file cancelled on its own)
    printed_pages: dict[int, str] | None = None  # a PDF's printed page labels (ingest.printed); None: not read
    ingest_key: dict[str, str] | None = None  # what shaped it besides its bytes (ingest.fingerprint)


class JobCancelledError(IngestError):
    """The document's ingest job was cancelled before its write: nothing was stored."""

    def __init__(self, job_id: int, *, alone: bool = False) -> None:
        super().__init__("this file was cancelled before it was stored; nothing was stored" if alone
                         else f"job {job_id} was cancelled before this file was stored; nothing was stored")


class DuplicateContentError(IngestError):
    """The same content is already stored in the collection (under another name)."""

    def __init__(self, doc_id: int, name: str) -> None:
        super().__init__(f"same content as document {doc_id} ({name!r}) already in the collection")
        self.doc_id = doc_id


UNIQUE_CONTENT = "documents_collection_sha256_key"
SQL_DOC_BY_SHA = "SELECT id, name FROM documents WHERE collection_id = $1 AND sha256 = $2"


async def write_document(pool: asyncpg.Pool, doc: NewDocument,
                         progress: Callable[[int, int], object] | None = None) -> int:
    """Replace-or-insert one document with its nodes and chunks in ONE transaction.

    A collection holds each content once: the unique (collection, sha256) index decides between two
    concurrent writers, and the loser gets :class:`DuplicateContentError`. Job items that pointed at a
    replaced version now point at the new one. ``progress(chunks written, chunks)`` hears the chunks go in,
    ``STORE_STEP`` at a time (all committed together at the end).
    """
    try:
        return await _write_document(pool, doc, progress)
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name != UNIQUE_CONTENT:
            raise
        row = await pool.fetchrow(SQL_DOC_BY_SHA, doc.collection_id, doc.sha256)
        if row is None:  # the other copy was deleted meanwhile: try once more
            return await _write_document(pool, doc, progress)
        raise DuplicateContentError(row["id"], row["name"]) from exc


SQL_JOB_FOR_WRITE = "SELECT status FROM ingest_jobs WHERE id = $1 FOR SHARE"
SQL_ITEM_FOR_WRITE = "SELECT cancel_requested FROM ingest_job_items WHERE id = $1 FOR SHARE"
SQL_EMBEDDER_GENERATION = "SELECT generation FROM embedder_state FOR SHARE"
SQL_LOCK_NAME = "SELECT pg_advisory_xact_lock(hashtextextended($1, 42))"
SQL_DOC_BY_NAME = "SELECT id FROM documents WHERE collection_id = $1 AND name = $2"
SQL_DELETE_BY_NAME = "DELETE FROM documents WHERE collection_id = $1 AND name = $2"
SQL_INSERT_DOCUMENT = """
INSERT INTO documents (collection_id, name, source_path, sha256, file_type, metadata, title, description,
                       description_embedding, page_count, tree_mode, node_count, chunk_count, warnings,
                       printed_pages, ingest_key)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, $15::jsonb, $16::jsonb) RETURNING id"""
NODE_COLUMNS = ("document_id", "node_id", "parent_id", "ordinal", "level", "title", "start_index", "end_index",
                "unit", "is_leaf", "summary", "text", "path", "embedding", "statements")
CHUNK_COLUMNS = ("document_id", "collection_id", "node_id", "ordinal", "text", "page", "token_count",
                 "heading_path", "embedding", "page_end", "statement", "context", "tokens")
SQL_LEXEMES_ADD = """
INSERT INTO lexeme_df (collection_id, lexeme, df)
SELECT $1, s.lx, 1 FROM (
    SELECT DISTINCT unnest(tsvector_to_array(tsv)) AS lx FROM chunks WHERE document_id = $2
) s ORDER BY s.lx
ON CONFLICT (collection_id, lexeme) DO UPDATE SET df = lexeme_df.df + 1"""
SQL_REPOINT_ITEMS = "UPDATE ingest_job_items SET document_id = $2 WHERE document_id = $1"


STORE_STEP = 1000  # chunks per COPY of one document's write: its progress moves between them (≈ 2 s apart)


async def _write_document(pool: asyncpg.Pool, doc: NewDocument,
                          progress: Callable[[int, int], object] | None = None) -> int:
    tree = doc.tree
    told = progress or (lambda done, total: None)
    async with pool.acquire() as conn, conn.transaction():
        if doc.job_id is not None:  # held to commit: a cancel either sees this document stored or stops it
            if await conn.fetchval(SQL_JOB_FOR_WRITE, doc.job_id) == "cancelled":
                raise JobCancelledError(doc.job_id)
            if doc.item_id is not None and await conn.fetchval(SQL_ITEM_FOR_WRITE, doc.item_id):
                raise JobCancelledError(doc.job_id, alone=True)
        if doc.embedder_generation is not None:  # before any table lock, like the re-embed swap
            generation = await conn.fetchval(SQL_EMBEDDER_GENERATION)
            if generation is not None and generation != doc.embedder_generation:
                raise IngestError("the stored vectors were re-embedded ('kb reembed') after this process started; "
                                  "restart it with the new embedder settings")
        await conn.execute(SQL_LOCK_NAME, f"{doc.collection_id}/{doc.name}")
        old_id = await conn.fetchval(SQL_DOC_BY_NAME, doc.collection_id, doc.name)
        await lock_lexemes(conn, doc.collection_id)  # held to commit: lexeme counts never race
        if old_id is not None:
            await conn.execute(SQL_LEXEMES_REMOVE, doc.collection_id, old_id, timeout=LONG_STATEMENT_S)
            await conn.execute(SQL_DELETE_BY_NAME, doc.collection_id, doc.name, timeout=LONG_STATEMENT_S)
        doc_id = await conn.fetchval(
            SQL_INSERT_DOCUMENT, doc.collection_id, doc.name, doc.source_path, doc.sha256, doc.file_type,
            json.dumps(doc.metadata, default=str), doc.title, doc.description, doc.description_embedding,
            tree.page_count, tree.source_mode, len(tree.nodes), len(doc.chunks), list(tree.warnings),
            printed_pages_json(doc.printed_pages), json.dumps(doc.ingest_key) if doc.ingest_key is not None else None,
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
            for at in range(0, len(doc.chunks), STORE_STEP):
                told(at, len(doc.chunks))
                await conn.copy_records_to_table(
                    "chunks",
                    columns=CHUNK_COLUMNS,
                    timeout=LONG_STATEMENT_S,
                    records=[
                        (doc_id, doc.collection_id, c.node_id, c.ordinal, c.text, c.page, c.token_count,
                         c.heading_path, doc.chunk_embeddings[i], c.page_end, c.statement, c.context,
                         index_tokens(c.heading_path, c.text))
                        for i, c in enumerate(doc.chunks[at : at + STORE_STEP], start=at)
                    ],
                )
            told(len(doc.chunks), len(doc.chunks))
            await conn.execute(SQL_LEXEMES_ADD, doc.collection_id, doc_id, timeout=LONG_STATEMENT_S)
        await _copy_facts(conn, doc_id, doc.collection_id, doc.facts)
        if old_id is not None:
            await conn.execute(SQL_REPOINT_ITEMS, old_id, doc_id)
    return int(doc_id)


# ---- facts

FACT_COLUMNS = ("document_id", "collection_id", "ordinal", "statement", "line_item", "concept", "period_end",
                "months", "period_label", "value", "printed", "scale", "unit", "page", "line", "node_id", "source",
                "col")


async def _copy_facts(conn: asyncpg.Connection, doc_id: int, collection_id: int, facts: Sequence[FactDraft]) -> None:
    if facts:
        await conn.copy_records_to_table(
            "facts", columns=FACT_COLUMNS, timeout=LONG_STATEMENT_S,
            records=[(doc_id, collection_id, i, f.statement, f.line_item, f.concept,
                      f.period_end, f.months, f.period_label, f.value, f.printed, f.scale,
                      f.unit, f.page, f.line, f.node_id, f.source, f.column) for i, f in enumerate(facts)],
        )


SQL_DELETE_FACTS = "DELETE FROM facts WHERE document_id = $1"


async def replace_facts(pool: asyncpg.Pool, doc_id: int, collection_id: int, facts: Sequence[FactDraft]) -> None:
    """A document's facts replaced in one transaction (``kb facts`` re-reading stored documents)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(SQL_DELETE_FACTS, doc_id)
        await _copy_facts(conn, doc_id, collection_id, facts)


# ---- printed lines outside the vocabulary, named and embedded (ingest.lines)

SQL_UNLABELLED_LINES = """
SELECT DISTINCT f.line_item FROM facts f
WHERE f.collection_id = $1 AND f.concept = '' AND ($2::bigint IS NULL OR f.document_id = $2)"""
SQL_ADD_LINE_LABELS = """
INSERT INTO line_labels (collection_id, label, printed)
SELECT $1, k.label, k.printed FROM unnest($2::text[], $3::text[]) AS k(label, printed)
ON CONFLICT (collection_id, label) DO NOTHING"""
SQL_UNEMBEDDED_LABELS = """
SELECT label FROM line_labels WHERE collection_id = $1 AND embedding IS NULL ORDER BY label LIMIT $2"""
SQL_SET_LABEL_VECTOR = """
UPDATE line_labels SET embedding = $3 WHERE collection_id = $1 AND label = $2 AND embedding IS NULL"""
SQL_LABEL_COLLECTIONS = "SELECT DISTINCT collection_id FROM line_labels WHERE embedding IS NULL"
SQL_PRUNE_LABELS = "DELETE FROM line_labels WHERE collection_id = $1 AND NOT (label = ANY($2::text[]))"
SQL_CLEAR_LABEL_VECTORS = "UPDATE line_labels SET embedding = NULL WHERE embedding IS NOT NULL"


async def printed_lines(pool: asyncpg.Pool, collection_id: int, doc_id: int | None = None) -> list[str]:
    """The distinct printed line items outside the vocabulary of a collection (or of one of its documents)."""
    return [r["line_item"] for r in await pool.fetch(SQL_UNLABELLED_LINES, collection_id, doc_id,
                                                     timeout=LONG_STATEMENT_S)]


async def add_line_labels(pool: asyncpg.Pool, collection_id: int, labels: Mapping[str, str]) -> None:
    """Store line names (name → the line as first printed) the collection does not hold yet, without vectors."""
    if labels:
        await pool.execute(SQL_ADD_LINE_LABELS, collection_id, list(labels), list(labels.values()),
                           timeout=LONG_STATEMENT_S)


async def prune_line_labels(pool: asyncpg.Pool, collection_id: int, keep: Sequence[str]) -> None:
    """Drop the collection's line names that are not in ``keep`` (no stored fact prints them any more)."""
    await pool.execute(SQL_PRUNE_LABELS, collection_id, list(keep), timeout=LONG_STATEMENT_S)


async def unembedded_labels(pool: asyncpg.Pool, collection_id: int, limit: int) -> list[str]:
    """Up to ``limit`` line names of the collection that have no vector yet."""
    return [r["label"] for r in await pool.fetch(SQL_UNEMBEDDED_LABELS, collection_id, limit)]


async def set_label_vectors(pool: asyncpg.Pool, collection_id: int, labels: Sequence[str],
                            vectors: Sequence[np.ndarray], generation: int | None) -> bool:
    """Store the vectors of line names; refused (False, nothing written) when ``kb reembed`` moved the stored
    vectors past ``generation`` since the caller's embedder was checked."""
    async with pool.acquire() as conn, conn.transaction():
        if generation is not None and await conn.fetchval(SQL_EMBEDDER_GENERATION) not in (None, generation):
            return False
        await conn.executemany(SQL_SET_LABEL_VECTOR, [(collection_id, label, np.asarray(v, dtype=np.float32))
                                                       for label, v in zip(labels, vectors, strict=True)])
    return True


async def collections_with_unembedded_labels(pool: asyncpg.Pool) -> list[int]:
    return [int(r["collection_id"]) for r in await pool.fetch(SQL_LABEL_COLLECTIONS, timeout=LONG_STATEMENT_S)]


async def clear_label_vectors(conn: asyncpg.Connection) -> None:
    """Every line name's vector dropped (the re-embed swap: they are filled again with the new embedder)."""
    await conn.execute(SQL_CLEAR_LABEL_VECTORS, timeout=LONG_STATEMENT_S)


class FactRow(FactDraft, frozen=True):
    """A stored fact as the API lists it: ``kb.core.types.FactDraft`` with its place in the document's facts."""

    ordinal: int


SQL_DOCUMENT_FACTS = """
SELECT ordinal, statement, line_item, concept, period_end, months, period_label, value, printed, scale, unit,
       page, line, node_id, source, col AS column
FROM facts WHERE document_id = $1 AND ($2::text IS NULL OR concept = $2) ORDER BY ordinal"""


async def document_facts(pool: asyncpg.Pool, doc_id: int, concept: str | None = None) -> list[FactRow]:
    """A document's facts in reading order (``NotFoundError`` for an unknown document)."""
    if await pool.fetchval(SQL_DOC_COLLECTION_NOLOCK, doc_id) is None:
        raise NotFoundError(f"document {doc_id} does not exist")
    return [FactRow(**dict(r)) for r in await pool.fetch(SQL_DOCUMENT_FACTS, doc_id, concept)]


# ---- pages (the source pages and lines a citation points at)

SQL_DOCUMENT_SOURCE = """
SELECT d.id, d.name, d.source_path, d.sha256, d.file_type, d.page_count,
       (SELECT j.allowed_root FROM ingest_job_items i JOIN ingest_jobs j ON j.id = i.job_id
         WHERE i.document_id = d.id ORDER BY i.id DESC LIMIT 1) AS allowed_root
  FROM documents d WHERE d.id = $1
"""


async def document_source(pool: asyncpg.Pool, doc_id: int) -> asyncpg.Record | None:
    """Where a document's source file is (id, name, source_path, sha256, file_type, page_count, and the
    ``allowed_root`` of the latest job that ingested it); None for an unknown document."""
    return await pool.fetchrow(SQL_DOCUMENT_SOURCE, doc_id)


SQL_PRINTED_PAGES = "SELECT printed_pages FROM documents WHERE id = $1"
SQL_STORE_PRINTED_PAGES = "UPDATE documents SET printed_pages = $3::jsonb WHERE id = $1 AND sha256 = $2"


def printed_pages_json(labels: Mapping[int, str] | None) -> str | None:
    """Printed page labels as stored (JSON object, physical page as key); None stays NULL (not read yet)."""
    return None if labels is None else json.dumps({str(k): v for k, v in sorted(labels.items())})


async def stored_printed_pages(pool: asyncpg.Pool, doc_id: int) -> dict[int, str] | None:
    """The printed page labels stored with a document; None when they were never read."""
    data = json_dict(await pool.fetchval(SQL_PRINTED_PAGES, doc_id))
    return {int(k): str(v) for k, v in data.items()} if data is not None else None


async def store_printed_pages(pool: asyncpg.Pool, doc_id: int, sha256: str, labels: Mapping[int, str]) -> None:
    """Store a document's printed page labels (unless it was replaced by other content meanwhile)."""
    await pool.execute(SQL_STORE_PRINTED_PAGES, doc_id, sha256, printed_pages_json(labels))


SQL_CHUNK_REF = "SELECT id, document_id, text, page, COALESCE(page_end, page) AS page_end FROM chunks WHERE id = $1"


async def chunk_ref(pool: asyncpg.Pool, chunk_id: int) -> asyncpg.Record | None:
    """A chunk's id, document_id, text, page and page_end (its page when it has no end); None when unknown."""
    return await pool.fetchrow(SQL_CHUNK_REF, chunk_id)


SQL_NODE_OF_CHUNK = """
SELECT n.start_index, n.end_index FROM chunks c
  JOIN nodes n ON n.document_id = c.document_id AND n.node_id = c.node_id WHERE c.id = $1
"""


async def chunk_node_range(pool: asyncpg.Pool, chunk_id: int) -> asyncpg.Record | None:
    """The start_index and end_index of the node that holds a chunk; None when there is none."""
    return await pool.fetchrow(SQL_NODE_OF_CHUNK, chunk_id)


# ---- jobs

JOB_FINISHED = frozenset({"done", "failed", "cancelled"})  # job states no worker changes any more

SQL_MAYBE_FINISH_JOB = """
UPDATE ingest_jobs j SET status = 'done', finished_at = now()
WHERE j.id = $1 AND j.status NOT IN ('done', 'cancelled')
  AND NOT EXISTS (SELECT 1 FROM ingest_job_items i WHERE i.job_id = j.id AND i.status IN ('pending', 'running'))"""


async def maybe_finish_job(conn: asyncpg.Connection | asyncpg.Pool, job_id: int) -> None:
    """Mark a job done once none of its files is pending or running (a cancelled job stays cancelled)."""
    await conn.execute(SQL_MAYBE_FINISH_JOB, job_id)


SQL_CREATE_JOB = """
INSERT INTO ingest_jobs (collection_id, root_path, recursive, metadata_path, allowed_root, upload, force)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id"""
SQL_ADD_ITEM = """
INSERT INTO ingest_job_items (job_id, path, name, status, error, finished_at)
VALUES ($1, $2, $3, $4, $5, CASE WHEN $4 = 'pending' THEN NULL ELSE now() END)"""


async def insert_job(pool: asyncpg.Pool, *, collection_id: int, root_path: str, recursive: bool,
                     metadata_path: str | None, allowed_root: str | None, upload: bool,
                     items: Sequence[tuple[str, str, str, str | None]], force: bool = False) -> int:
    """A job with its items (path, document name, status, error) in one transaction; a job with no pending
    file is done at once. Returns the job id."""
    async with pool.acquire() as conn, conn.transaction():
        job_id = await conn.fetchval(SQL_CREATE_JOB, collection_id, root_path, recursive, metadata_path,
                                     allowed_root, upload, force)
        await conn.executemany(SQL_ADD_ITEM, [(job_id, *r) for r in items])
        await maybe_finish_job(conn, job_id)
    return int(job_id)


SQL_GET_JOB = """
SELECT j.id, c.name AS collection, j.root_path, j.recursive, j.status, j.error, j.created_at, j.started_at,
       j.finished_at, j.idle_seconds
FROM ingest_jobs j JOIN collections c ON c.id = j.collection_id WHERE j.id = $1"""


async def job_row(pool: asyncpg.Pool, job_id: int) -> asyncpg.Record | None:
    """A job's id, collection name, root_path, recursive, status, error and times; None for an unknown job."""
    return await pool.fetchrow(SQL_GET_JOB, job_id)


SQL_JOB_ITEMS = """
SELECT name, path, status, error, document_id, pages, chunks, seconds, attempts, llm_calls,
       CASE WHEN status = 'running' THEN stage END AS stage, stage_done, stage_total, id
FROM ingest_job_items WHERE job_id = $1 ORDER BY id"""
SQL_JOB_ITEMS_PAGE = SQL_JOB_ITEMS + " LIMIT $2 OFFSET $3"


async def job_items(pool: asyncpg.Pool, job_id: int, *, limit: int | None = None,
                    offset: int = 0) -> list[asyncpg.Record]:
    """A job's files in file order: all of them, or ``limit`` (None: no limit) from ``offset``."""
    if limit is None and not offset:
        return await pool.fetch(SQL_JOB_ITEMS, job_id)
    return await pool.fetch(SQL_JOB_ITEMS_PAGE, job_id, limit, offset)


SQL_JOB_TOTALS = """
SELECT status, count(*) AS files, sum(pages) AS pages, sum(chunks) AS chunks, sum(coalesce(seconds, 0)) AS seconds,
       sum(llm_calls) AS llm_calls
FROM ingest_job_items WHERE job_id = $1 GROUP BY status"""


async def job_totals(pool: asyncpg.Pool, job_id: int) -> list[asyncpg.Record]:
    """Per item status of a job: files, pages, chunks, seconds and llm_calls."""
    return await pool.fetch(SQL_JOB_TOTALS, job_id)


SQL_LIST_JOBS = "SELECT id FROM ingest_jobs ORDER BY id DESC LIMIT $1 OFFSET $2"


async def job_ids(pool: asyncpg.Pool, limit: int, offset: int) -> list[int]:
    """Job ids, the newest first (``limit`` from ``offset``)."""
    return [r["id"] for r in await pool.fetch(SQL_LIST_JOBS, limit, offset)]


SQL_COUNT_JOBS = "SELECT count(*) FROM ingest_jobs"


async def count_ingest_jobs(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval(SQL_COUNT_JOBS))


SQL_JOB_STATE = "SELECT status FROM ingest_jobs WHERE id = $1"


async def job_state(conn: asyncpg.Connection | asyncpg.Pool, job_id: int) -> str | None:
    """A job's status; None for an unknown job."""
    return await conn.fetchval(SQL_JOB_STATE, job_id)


SQL_CANCEL_JOB = """
WITH j AS (UPDATE ingest_jobs SET status = 'cancelled', finished_at = now()
           WHERE id = $1 AND status IN ('queued', 'running') RETURNING id)
UPDATE ingest_job_items i SET status = 'cancelled', error = 'cancelled before it was ingested', finished_at = now()
FROM j WHERE i.job_id = j.id AND i.status = 'pending'
RETURNING i.id"""


async def cancel_job_rows(conn: asyncpg.Connection, job_id: int) -> list[int]:
    """Mark a queued or running job cancelled and its pending files with it; the ids of those files."""
    return [r["id"] for r in await conn.fetch(SQL_CANCEL_JOB, job_id)]


SQL_RETRY_ITEM = """
UPDATE ingest_job_items SET status = 'pending', error = NULL, worker = NULL, heartbeat_at = NULL, attempts = 0,
       finished_at = NULL, stage = NULL, cancel_requested = false
WHERE id = $2 AND job_id = $1 AND status IN ('failed', 'cancelled') RETURNING id"""


async def requeue_item(conn: asyncpg.Connection, job_id: int, item_id: int) -> int | None:
    """Queue a failed or cancelled file of a job again (attempts reset); its id, or None when it is not one."""
    return await conn.fetchval(SQL_RETRY_ITEM, job_id, item_id)


SQL_REOPEN_JOB = """
UPDATE ingest_jobs SET status = CASE WHEN started_at IS NULL THEN 'queued' ELSE 'running' END, finished_at = NULL,
       error = NULL,
       idle_seconds = idle_seconds + CASE WHEN started_at IS NULL THEN 0
                                          ELSE coalesce(extract(epoch FROM now() - finished_at), 0) END
WHERE id = $1"""


async def reopen_job(conn: asyncpg.Connection, job_id: int) -> None:
    """A job back to queued (never started) or running, its end and error cleared; the time it stood finished
    is added to its idle seconds (not counted in its pages/s)."""
    await conn.execute(SQL_REOPEN_JOB, job_id)


SQL_ITEM_UPLOAD = """
SELECT i.path FROM ingest_job_items i JOIN ingest_jobs j ON j.id = i.job_id
WHERE i.id = $2 AND i.job_id = $1 AND j.upload"""


async def item_upload_path(conn: asyncpg.Connection, job_id: int, item_id: int) -> str | None:
    """The file of a job item when its job is an upload; None otherwise."""
    return await conn.fetchval(SQL_ITEM_UPLOAD, job_id, item_id)


SQL_REMOVE_ITEM = """
DELETE FROM ingest_job_items WHERE id = $2 AND job_id = $1 AND status NOT IN ('pending', 'running') RETURNING id"""


async def delete_finished_item(conn: asyncpg.Connection, job_id: int, item_id: int) -> int | None:
    """Remove a job item that is neither pending nor running; its id, or None when nothing was removed."""
    return await conn.fetchval(SQL_REMOVE_ITEM, job_id, item_id)


SQL_ITEM_STATUS = "SELECT status FROM ingest_job_items WHERE id = $2 AND job_id = $1"


async def item_status(conn: asyncpg.Connection, job_id: int, item_id: int) -> str | None:
    """The status of a job item; None when the job has no such item."""
    return await conn.fetchval(SQL_ITEM_STATUS, job_id, item_id)


SQL_FROM_UPLOAD = """
SELECT EXISTS (SELECT 1 FROM ingest_job_items i JOIN ingest_jobs j ON j.id = i.job_id WHERE j.upload AND i.path = $1)"""


async def is_uploaded_file(pool: asyncpg.Pool, path: str) -> bool:
    """Whether ``path`` is the file of an upload job's item (not a file of a folder ingest)."""
    return await pool.fetchval(SQL_FROM_UPLOAD, path)


SQL_KEPT = "SELECT EXISTS (SELECT 1 FROM documents WHERE source_path = $1)"


async def is_document_source(pool: asyncpg.Pool, path: str) -> bool:
    """Whether a stored document keeps ``path`` as its source file."""
    return await pool.fetchval(SQL_KEPT, path)


# ---- job workers (claim, heartbeat, progress, outcome)

SQL_PENDING_WORK = """
SELECT count(*) FROM ingest_job_items WHERE status = 'pending'
   OR (status = 'running' AND heartbeat_at < now() - make_interval(secs => $1))"""


async def pending_work(pool: asyncpg.Pool, stale_s: float) -> int:
    """Files a worker could claim: pending, or running without a heartbeat for ``stale_s``."""
    return int(await pool.fetchval(SQL_PENDING_WORK, stale_s))


SQL_GIVE_UP = """
UPDATE ingest_job_items SET
       status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'failed' END, finished_at = now(),
       error = CASE WHEN cancel_requested THEN 'cancelled while it was being ingested (nothing was stored)'
                    ELSE 'gave up after ' || attempts || ' attempts: the worker died while processing this file' END
WHERE status = 'running' AND heartbeat_at < now() - make_interval(secs => $1)
  AND (attempts >= $2 OR cancel_requested)
RETURNING job_id"""


async def give_up_items(pool: asyncpg.Pool, stale_s: float, max_attempts: int) -> list[int]:
    """Fail the files whose worker died ``max_attempts`` times (no heartbeat for ``stale_s``), and cancel those
    cancelled while their worker died; their job ids."""
    return [r["job_id"] for r in await pool.fetch(SQL_GIVE_UP, stale_s, max_attempts)]


SQL_CLAIM = """
WITH next AS (
    SELECT i.id FROM ingest_job_items i
    WHERE (i.status = 'pending'
       OR (i.status = 'running' AND i.heartbeat_at < now() - make_interval(secs => $2)))
      AND i.attempts < $3 AND NOT i.cancel_requested
      AND NOT EXISTS (SELECT 1 FROM ingest_jobs j WHERE j.id = i.job_id AND j.status = 'cancelled')
    ORDER BY i.job_id, i.id
    FOR UPDATE SKIP LOCKED LIMIT 1
)
UPDATE ingest_job_items i SET status = 'running', worker = $1, heartbeat_at = now(), attempts = i.attempts + 1
FROM next WHERE i.id = next.id
RETURNING i.id, i.job_id, i.path, i.name, i.attempts"""


async def claim_item(pool: asyncpg.Pool, worker: str, stale_s: float, max_attempts: int) -> asyncpg.Record | None:
    """Claim the next file for ``worker`` (FOR UPDATE SKIP LOCKED): pending, or running without a heartbeat for
    ``stale_s``, with attempts left, of a job not cancelled. Its id, job_id, path, name, attempts; or None."""
    return await pool.fetchrow(SQL_CLAIM, worker, stale_s, max_attempts)


SQL_JOB_FOR_ITEM = """
SELECT j.id, j.collection_id, j.root_path, j.metadata_path, j.allowed_root, j.status, j.upload, j.force
FROM ingest_jobs j WHERE j.id = $1"""


async def job_for_item(pool: asyncpg.Pool, job_id: int) -> asyncpg.Record | None:
    """What a worker needs of a claimed file's job: collection_id, root_path, metadata_path, allowed_root,
    status, upload, force."""
    return await pool.fetchrow(SQL_JOB_FOR_ITEM, job_id)


# once per job, not per file: a job already running (or cancelled meanwhile) is not written, so workers
# claiming its files one after another never queue on its row lock
SQL_JOB_RUNNING = """
UPDATE ingest_jobs SET status = 'running', started_at = coalesce(started_at, now())
WHERE id = $1 AND status NOT IN ('running', 'cancelled')"""


async def mark_job_running(pool: asyncpg.Pool, job_id: int) -> None:
    """Mark a job running (its start kept) unless it already runs or was cancelled."""
    await pool.execute(SQL_JOB_RUNNING, job_id)


SQL_HEARTBEAT = """
UPDATE ingest_job_items i SET heartbeat_at = now() WHERE i.id = $1 AND i.worker = $2
RETURNING CASE WHEN i.cancel_requested THEN 'cancelled'
               ELSE (SELECT j.status FROM ingest_jobs j WHERE j.id = i.job_id) END"""


async def heartbeat_item(pool: asyncpg.Pool, item_id: int, worker: str) -> str | None:
    """Beat for a file ``worker`` holds; its job's status, ``cancelled`` too when the file alone was cancelled
    (None when the worker no longer holds it)."""
    return await pool.fetchval(SQL_HEARTBEAT, item_id, worker)


SQL_ITEM_CANCELLED = """
SELECT i.cancel_requested OR j.status = 'cancelled'
FROM ingest_job_items i JOIN ingest_jobs j ON j.id = i.job_id WHERE i.id = $1"""


async def item_cancelled(pool: asyncpg.Pool, item_id: int) -> bool:
    """Whether a file being ingested was cancelled, alone or with its job."""
    return bool(await pool.fetchval(SQL_ITEM_CANCELLED, item_id))


SQL_CANCEL_ITEM = """
UPDATE ingest_job_items SET
    status = CASE WHEN status = 'pending' THEN 'cancelled' ELSE status END,
    error = CASE WHEN status = 'pending' THEN 'cancelled before it was ingested' ELSE error END,
    finished_at = CASE WHEN status = 'pending' THEN now() ELSE finished_at END,
    cancel_requested = (status = 'running')
WHERE id = $2 AND job_id = $1 AND status IN ('pending', 'running')
RETURNING status"""


async def cancel_item(conn: asyncpg.Connection, job_id: int, item_id: int) -> str | None:
    """Cancel one file of a job: a pending one now (``cancelled``); a running one is flagged for its worker, which
    stops it within seconds (``running``). None when the file is in neither state."""
    return await conn.fetchval(SQL_CANCEL_ITEM, job_id, item_id)


SQL_PROGRESS = """
UPDATE ingest_job_items SET stage = $3, stage_done = $4, stage_total = $5 WHERE id = $1 AND worker = $2"""


async def write_item_progress(pool: asyncpg.Pool, item_id: int, worker: str, stage: str, done: int,
                              total: int) -> None:
    """The stage of a file ``worker`` holds, with ``done`` of ``total``."""
    await pool.execute(SQL_PROGRESS, item_id, worker, stage, done, total)


SQL_HAND_BACK = """
UPDATE ingest_job_items SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'pending' END,
       error = CASE WHEN cancel_requested THEN 'cancelled before it was ingested' ELSE error END,
       finished_at = CASE WHEN cancel_requested THEN now() ELSE finished_at END,
       worker = NULL, heartbeat_at = NULL, attempts = greatest(attempts - 1, 0)
WHERE id = $1 AND worker = $2 AND status = 'running'"""


async def hand_back_item(pool: asyncpg.Pool, item_id: int, worker: str) -> None:
    """A file ``worker`` holds back to pending, without counting the attempt (cancelled, when it was cancelled
    meanwhile)."""
    await pool.execute(SQL_HAND_BACK, item_id, worker)


SQL_FINISH_ITEM = """
UPDATE ingest_job_items SET status = $2, error = $3, document_id = $4, pages = $5, chunks = $6, seconds = $7,
       llm_calls = $9, finished_at = now() WHERE id = $1 AND worker = $8"""


async def finish_item(pool: asyncpg.Pool, item_id: int, status: str, error: str | None, document_id: int | None,
                      pages: int, chunks: int, seconds: float, worker: str, llm_calls: int) -> None:
    """Record the outcome of a file ``worker`` holds."""
    await pool.execute(SQL_FINISH_ITEM, item_id, status, error, document_id, pages, chunks, seconds, worker,
                       llm_calls)


# ---- embedding cache

SQL_CACHE_LOOKUP = "SELECT sha256, embedding FROM embedding_cache WHERE model = $1 AND sha256 = ANY($2::text[])"


async def cached_embeddings(pool: asyncpg.Pool, model: str, shas: Sequence[str]) -> list[asyncpg.Record]:
    """The cached (sha256, embedding) of ``model`` for those of ``shas`` it holds."""
    return await pool.fetch(SQL_CACHE_LOOKUP, model, shas)


SQL_CACHE_STORE = """
INSERT INTO embedding_cache (model, sha256, embedding) VALUES ($1, $2, $3)
ON CONFLICT (model, sha256) DO UPDATE SET embedding = EXCLUDED.embedding"""


async def store_embeddings(pool: asyncpg.Pool, rows: Sequence[tuple[str, str, np.ndarray]]) -> None:
    """Cache (model, sha256, embedding) rows, replacing what was cached for them."""
    async with pool.acquire() as conn:
        await conn.executemany(SQL_CACHE_STORE, rows)


# ---- re-embedding: staging (keyset pages of rows not staged yet for the target (model_id $3, dimension $4))

SQL_PENDING_CHUNKS = """
SELECT c.id, d.title, d.metadata, c.heading_path, c.text, c.context
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.id > $1 AND ($2::bigint IS NULL OR c.collection_id = $2)
  AND NOT EXISTS (SELECT 1 FROM reembed_chunks s WHERE s.model_id = $3 AND s.dimension = $4 AND s.chunk_id = c.id)
ORDER BY c.id LIMIT $5"""


async def pending_reembed_chunks(db: asyncpg.Connection | asyncpg.Pool, after: tuple[int], collection_id: int | None,
                                 model_id: str, dimension: int, limit: int) -> list[asyncpg.Record]:
    """Chunks after id ``after`` (of a collection, or all) not staged for the target yet, with their texts."""
    return await db.fetch(SQL_PENDING_CHUNKS, after[0], collection_id, model_id, dimension, limit)


SQL_PENDING_NODES = """
SELECT n.document_id, n.node_id, d.title, d.metadata, n.path, n.summary
FROM nodes n JOIN documents d ON d.id = n.document_id
WHERE (n.document_id, n.node_id) > ($1, $6) AND ($2::bigint IS NULL OR d.collection_id = $2)
  AND n.embedding IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reembed_nodes s WHERE s.model_id = $3 AND s.dimension = $4
                  AND s.document_id = n.document_id AND s.node_id = n.node_id)
ORDER BY n.document_id, n.node_id LIMIT $5"""


async def pending_reembed_nodes(db: asyncpg.Connection | asyncpg.Pool, after: tuple[int, str],
                                collection_id: int | None, model_id: str, dimension: int,
                                limit: int) -> list[asyncpg.Record]:
    """Nodes with a vector after (document_id, node_id) ``after`` not staged for the target yet."""
    return await db.fetch(SQL_PENDING_NODES, after[0], collection_id, model_id, dimension, limit, after[1])


SQL_PENDING_DOCUMENTS = """
SELECT d.id, d.title, d.description
FROM documents d
WHERE d.id > $1 AND ($2::bigint IS NULL OR d.collection_id = $2) AND d.description_embedding IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reembed_documents s WHERE s.model_id = $3 AND s.dimension = $4
                  AND s.document_id = d.id)
ORDER BY d.id LIMIT $5"""


async def pending_reembed_documents(db: asyncpg.Connection | asyncpg.Pool, after: tuple[int],
                                    collection_id: int | None, model_id: str, dimension: int,
                                    limit: int) -> list[asyncpg.Record]:
    """Documents with a description vector after id ``after`` not staged for the target yet."""
    return await db.fetch(SQL_PENDING_DOCUMENTS, after[0], collection_id, model_id, dimension, limit)


STAGE_COLUMNS = {
    "chunks": ("reembed_chunks", ("model_id", "dimension", "chunk_id", "embedding")),
    "nodes": ("reembed_nodes", ("model_id", "dimension", "document_id", "node_id", "embedding")),
    "documents": ("reembed_documents", ("model_id", "dimension", "document_id", "embedding")),
}


async def stage_vectors(db: asyncpg.Connection | asyncpg.Pool, kind: str, records: Sequence[tuple[Any, ...]]) -> None:
    """Copy staged vectors of ``kind`` (chunks, nodes, documents): rows of ``STAGE_COLUMNS[kind]``."""
    table, columns = STAGE_COLUMNS[kind]
    await db.copy_records_to_table(table, columns=columns, records=records)


SQL_COUNTS = """
SELECT (SELECT count(*) FROM chunks c WHERE $1::bigint IS NULL OR c.collection_id = $1)
     + (SELECT count(*) FROM nodes n JOIN documents d ON d.id = n.document_id
        WHERE n.embedding IS NOT NULL AND ($1::bigint IS NULL OR d.collection_id = $1))
     + (SELECT count(*) FROM documents d
        WHERE d.description_embedding IS NOT NULL AND ($1::bigint IS NULL OR d.collection_id = $1)) AS total,
       (SELECT count(*) FROM chunks c JOIN reembed_chunks s ON s.chunk_id = c.id
        WHERE s.model_id = $2 AND s.dimension = $3 AND ($1::bigint IS NULL OR c.collection_id = $1))
     + (SELECT count(*) FROM nodes n JOIN documents d ON d.id = n.document_id
        JOIN reembed_nodes s ON s.document_id = n.document_id AND s.node_id = n.node_id
        WHERE n.embedding IS NOT NULL AND s.model_id = $2 AND s.dimension = $3
          AND ($1::bigint IS NULL OR d.collection_id = $1))
     + (SELECT count(*) FROM documents d JOIN reembed_documents s ON s.document_id = d.id
        WHERE d.description_embedding IS NOT NULL AND s.model_id = $2 AND s.dimension = $3
          AND ($1::bigint IS NULL OR d.collection_id = $1)) AS staged"""


async def reembed_counts(conn: asyncpg.Connection | asyncpg.Pool, collection_id: int | None, model_id: str,
                         dimension: int, *, timeout_s: float | None = None) -> asyncpg.Record:
    """``total`` vectors to produce (of a collection, or all) and how many of them are ``staged`` already."""
    return await conn.fetchrow(SQL_COUNTS, collection_id, model_id, dimension, timeout=timeout_s)


async def embedding_column_dimension(pool: asyncpg.Pool) -> int:
    """The dimension of the stored ``chunks.embedding`` column (``kb.core.embedder_record.SQL_COLUMN_DIM``)."""
    return int(await pool.fetchval(SQL_COLUMN_DIM))


# ---- re-embedding: the swap (one transaction, the caller's)

SQL_LOCK_RECORD = "LOCK TABLE embedder_state IN EXCLUSIVE MODE"  # waits for writers holding the record FOR SHARE


async def lock_embedder_record(conn: asyncpg.Connection) -> None:
    await conn.execute(SQL_LOCK_RECORD, timeout=LONG_STATEMENT_S)


SQL_LOCK_TABLES = "LOCK TABLE documents, nodes, chunks IN SHARE ROW EXCLUSIVE MODE"  # no writes; reads go on


async def lock_vector_tables(conn: asyncpg.Connection) -> None:
    await conn.execute(SQL_LOCK_TABLES, timeout=LONG_STATEMENT_S)


SQL_VECTOR_INDEXES = """
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename IN ('chunks', 'nodes', 'documents', 'line_labels')
  AND indexdef ~ 'USING (hnsw|ivfflat) '"""


async def vector_indexes(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """The vector (HNSW, IVFFlat) indexes of chunks, nodes, documents and line names: indexname, indexdef (the
    catalog's)."""
    return await conn.fetch(SQL_VECTOR_INDEXES, timeout=LONG_STATEMENT_S)


async def drop_index(conn: asyncpg.Connection, name: str) -> None:
    """Drop an index by the name the catalog gave (``vector_indexes``): never text from outside."""
    await conn.execute(f'DROP INDEX "{name}"', timeout=LONG_STATEMENT_S)


_OPCLASS = re.compile(r"\b(?:vector|halfvec)_(cosine|l2|ip|l1)_ops\b")


async def create_index(conn: asyncpg.Connection, indexdef: str, *, vector_type: str | None = None) -> None:
    """Build an index again from its definition as the catalog gave it (``vector_indexes``); with
    ``vector_type`` (``vector`` or ``halfvec``, checked by the caller), its operator class made that type's."""
    if vector_type is not None:
        indexdef = _OPCLASS.sub(lambda m: f"{vector_type}_{m.group(1)}_ops", indexdef)
    await conn.execute(indexdef, timeout=LONG_STATEMENT_S)


# ---- a vector index held back by a bulk ingest (ingest.bulk_index)

DEFERRED_LOCK_KEY = 7_351_100_004  # pg_advisory_xact_lock key: one deferral or rebuild of a vector index at a time
SQL_LOCK_DEFERRED = "SELECT pg_advisory_xact_lock($1)"
SQL_TRY_LOCK_DEFERRED = "SELECT pg_try_advisory_xact_lock($1)"
SQL_LOCK_CHUNKS_SHARE = "LOCK TABLE chunks IN SHARE MODE"
SQL_CHUNK_HNSW = """
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = 'chunks' AND indexdef ~ 'USING hnsw '
ORDER BY indexname"""
SQL_CHUNKS_UP_TO = "SELECT count(*) FROM (SELECT 1 FROM chunks LIMIT $1) s"
SQL_RECORD_DEFERRED = """
INSERT INTO deferred_indexes (indexname, indexdef, job_id, holder) VALUES ($1, $2, $3, $4)"""
SQL_DEFERRED = "SELECT indexname, job_id, holder, since FROM deferred_indexes ORDER BY since"
SQL_TAKE_DEFERRED = "DELETE FROM deferred_indexes WHERE indexname = $1 RETURNING indexdef"
SQL_INDEX_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1)"
SQL_JOB_PATHS = "SELECT path FROM ingest_job_items WHERE job_id = $1 AND status IN ('pending', 'running')"
SQL_JOB_OPEN = "SELECT EXISTS (SELECT 1 FROM ingest_job_items WHERE job_id = $1 AND status IN ('pending', 'running'))"
SQL_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '2s'"
SQL_NO_LOCK_TIMEOUT = "SET LOCAL lock_timeout = 0"


async def lock_deferred(conn: asyncpg.Connection, *, wait: bool = True) -> bool:
    """Serialise deferrals and rebuilds of the chunks' vector index (to the caller's transaction's end): wait for
    another one to end, or with ``wait=False`` return False at once when one runs. Then a statement that waits
    over 2 s for a table lock fails (``LockNotAvailableError``) instead of queueing every query of the table
    behind it."""
    if wait:
        await conn.execute(SQL_LOCK_DEFERRED, DEFERRED_LOCK_KEY, timeout=LONG_STATEMENT_S)
    elif not await conn.fetchval(SQL_TRY_LOCK_DEFERRED, DEFERRED_LOCK_KEY):
        return False
    await conn.execute(SQL_LOCK_TIMEOUT)
    return True


async def lock_chunks_for_build(conn: asyncpg.Connection) -> None:
    """The lock ``CREATE INDEX`` takes on chunks (writers wait, readers go on), taken before the build reads the
    column's type, so that a vector type conversion cannot commit in between."""
    await conn.execute(SQL_LOCK_CHUNKS_SHARE, timeout=LONG_STATEMENT_S)


async def wait_for_locks(conn: asyncpg.Connection) -> None:
    """Undo ``lock_deferred``'s 2 s bound for the rest of the transaction (a rebuild waits for writers)."""
    await conn.execute(SQL_NO_LOCK_TIMEOUT)


async def chunk_vector_index(conn: asyncpg.Connection) -> asyncpg.Record | None:
    """The chunks' HNSW index as the catalog has it (indexname, indexdef); None when there is none."""
    return await conn.fetchrow(SQL_CHUNK_HNSW)


async def chunks_up_to(conn: asyncpg.Connection, limit: int) -> int:
    """How many chunks are stored, counted up to ``limit`` (a bounded count, whatever the table holds)."""
    return int(await conn.fetchval(SQL_CHUNKS_UP_TO, limit, timeout=LONG_STATEMENT_S))


async def record_deferred(conn: asyncpg.Connection, name: str, indexdef: str, job_id: int | None,
                          holder: str) -> None:
    await conn.execute(SQL_RECORD_DEFERRED, name, indexdef, job_id, holder)


async def deferred_indexes(db: asyncpg.Connection | asyncpg.Pool) -> list[asyncpg.Record]:
    """The indexes held back: indexname, job_id, holder, since."""
    return await db.fetch(SQL_DEFERRED)


async def take_deferred(conn: asyncpg.Connection, name: str) -> str | None:
    """Remove the record of a held-back index and return its definition (None when another process took it)."""
    return await conn.fetchval(SQL_TAKE_DEFERRED, name)


async def index_exists(conn: asyncpg.Connection, name: str) -> bool:
    return bool(await conn.fetchval(SQL_INDEX_EXISTS, name))


async def job_open(pool: asyncpg.Pool, job_id: int) -> bool:
    """Has job ``job_id`` files still pending or running?"""
    return bool(await pool.fetchval(SQL_JOB_OPEN, job_id))


async def job_paths(pool: asyncpg.Pool, job_id: int) -> list[str]:
    """The paths of a job's files still to ingest (pending or running)."""
    return [r["path"] for r in await pool.fetch(SQL_JOB_PATHS, job_id)]


SQL_VECTOR_BYTES = """
SELECT count(*) * (SELECT CASE WHEN t.typname = 'halfvec' THEN 2 ELSE 4 END * a.atttypmod
                   FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                   WHERE a.attrelid = 'chunks'::regclass AND a.attname = 'embedding') FROM chunks"""


async def vector_bytes(conn: asyncpg.Connection) -> int:
    """The bytes of the stored chunk vectors (rows × dimension × 4, or 2 for halfvec); 0 without chunks."""
    return int(await conn.fetchval(SQL_VECTOR_BYTES, timeout=LONG_STATEMENT_S) or 0)


async def set_maintenance_work_mem(conn: asyncpg.Connection, mb: int) -> None:
    """``SET LOCAL maintenance_work_mem`` to ``mb`` MB for the rest of the caller's transaction."""
    await conn.execute(f"SET LOCAL maintenance_work_mem = '{mb}MB'")  # an int: never text from outside


VECTOR_COLUMNS = (("chunks", "embedding"), ("nodes", "embedding"), ("documents", "description_embedding"),
                  ("line_labels", "embedding"))


async def retype_vector_column(conn: asyncpg.Connection, table: str, column: str, type_name: str = "vector",
                               dimension: int | None = None) -> None:
    """Retype one of ``VECTOR_COLUMNS`` (names of ours, never text from outside) to ``type_name`` (``vector``,
    or the type the catalog holds), of ``dimension`` (an int) when given, else of any dimension."""
    typ = type_name if dimension is None else f"{type_name}({int(dimension)})"
    await conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {typ}", timeout=LONG_STATEMENT_S)


SQL_APPLY_CHUNKS = """
UPDATE chunks c SET embedding = s.embedding FROM reembed_chunks s
WHERE s.model_id = $1 AND s.dimension = $2 AND s.chunk_id = c.id"""
SQL_APPLY_NODES = """
UPDATE nodes n SET embedding = s.embedding FROM reembed_nodes s
WHERE s.model_id = $1 AND s.dimension = $2 AND s.document_id = n.document_id AND s.node_id = n.node_id"""
SQL_APPLY_DOCUMENTS = """
UPDATE documents d SET description_embedding = s.embedding FROM reembed_documents s
WHERE s.model_id = $1 AND s.dimension = $2 AND s.document_id = d.id"""


SQL_TOUCH_RESTAGED = """
UPDATE documents d SET updated_at = now()
FROM (SELECT DISTINCT c.document_id FROM reembed_chunks s JOIN chunks c ON c.id = s.chunk_id
      WHERE s.model_id = $1 AND s.dimension = $2) t
WHERE d.id = t.document_id"""
SQL_TOUCH_ALL = "UPDATE documents SET updated_at = now()"


async def touch_all_documents(conn: asyncpg.Connection) -> None:
    """Mark every document changed (its vectors were retyped): servers read their chunks and vectors anew."""
    await conn.execute(SQL_TOUCH_ALL, timeout=LONG_STATEMENT_S)


async def apply_staged_vectors(conn: asyncpg.Connection, model_id: str, dimension: int) -> None:
    """Replace the stored chunk, node and document vectors by those staged for the target (in that order); the
    documents whose vectors change are marked changed (``updated_at``), so servers read them anew."""
    for sql in (SQL_TOUCH_RESTAGED, SQL_APPLY_CHUNKS, SQL_APPLY_NODES, SQL_APPLY_DOCUMENTS):
        await conn.execute(sql, model_id, dimension, timeout=LONG_STATEMENT_S)


SQL_RECORD = """
INSERT INTO embedder_state (model_id, dimension) VALUES ($1, $2)
ON CONFLICT (singleton) DO UPDATE SET
    model_id = EXCLUDED.model_id, dimension = EXCLUDED.dimension, updated_at = now(),
    generation = embedder_state.generation
               + CASE WHEN (embedder_state.model_id, embedder_state.dimension) = (EXCLUDED.model_id, EXCLUDED.dimension)
                      THEN 0 ELSE 1 END
RETURNING generation"""


async def record_embedder(conn: asyncpg.Connection, model_id: str, dimension: int) -> int:
    """Record the embedder of the stored vectors; the generation (one more when the embedder changed)."""
    return int(await conn.fetchval(SQL_RECORD, model_id, dimension, timeout=LONG_STATEMENT_S))


SQL_CLEAR_ALL_STAGING = "TRUNCATE reembed_chunks, reembed_nodes, reembed_documents"


async def clear_all_staging(conn: asyncpg.Connection) -> None:
    await conn.execute(SQL_CLEAR_ALL_STAGING, timeout=LONG_STATEMENT_S)


SQL_CLEAR_TARGET_STAGING = [f"DELETE FROM {table} WHERE model_id = $1 AND dimension = $2"
                            for table, _ in STAGE_COLUMNS.values()]


async def clear_target_staging(conn: asyncpg.Connection, model_id: str, dimension: int) -> None:
    """Remove what was staged for one target (model_id, dimension)."""
    for sql in SQL_CLEAR_TARGET_STAGING:
        await conn.execute(sql, model_id, dimension, timeout=LONG_STATEMENT_S)


# ---- re-embedding: KB_VECTOR_TYPE, the stored vectors as `vector` (float32) or `halfvec` (float16)

SQL_VECTOR_COLUMN_TYPES = """
SELECT c.relname AS table_name, a.attname AS column_name, t.typname AS type_name, a.atttypmod AS dim
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid
WHERE c.relnamespace = current_schema()::regnamespace AND NOT a.attisdropped
  AND (c.relname, a.attname) IN (('chunks', 'embedding'), ('nodes', 'embedding'),
                                 ('documents', 'description_embedding'), ('line_labels', 'embedding'))"""


async def vector_column_types(conn: asyncpg.Connection | asyncpg.Pool) -> list[asyncpg.Record]:
    """The vector columns as the catalog has them: table_name, column_name, type_name, dim."""
    return await conn.fetch(SQL_VECTOR_COLUMN_TYPES)


async def convert_vector_column(conn: asyncpg.Connection, table: str, column: str, target: str, dim: int) -> None:
    """Retype a vector column (its table and column names from ``vector_column_types``, the catalog's) to
    ``target`` (``vector`` or ``halfvec``, checked by the caller) of ``dim`` (an int; none when not positive),
    converting its values."""
    typ = f"{target}({int(dim)})" if dim > 0 else target
    await conn.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" '
                       f"TYPE {typ} USING \"{column}\"::{typ}", timeout=LONG_STATEMENT_S)


# ---- re-indexing (full-text tokens and lexeme document frequencies)

SQL_TOKENIZER_STATE = "SELECT tokenizer FROM text_index_state"


async def tokenizer_version(conn: asyncpg.Connection | asyncpg.Pool) -> str | None:
    """The tokenizer version (``kb.core.text.TOKENIZER_VERSION``) the stored chunk tokens were made with."""
    return await conn.fetchval(SQL_TOKENIZER_STATE)


SQL_SET_TOKENIZER_STATE = "UPDATE text_index_state SET tokenizer = $1"


async def set_tokenizer_version(conn: asyncpg.Connection, version: str) -> None:
    """Record the tokenizer version the stored chunk tokens are now made with."""
    await conn.execute(SQL_SET_TOKENIZER_STATE, version)


SQL_MISSING_TOKENS = "SELECT EXISTS (SELECT 1 FROM chunks WHERE tokens IS NULL)"


async def chunks_missing_tokens(conn: asyncpg.Connection) -> bool:
    """Whether any chunk has no tokens (stored before the tokens column existed)."""
    return await conn.fetchval(SQL_MISSING_TOKENS)


SQL_COUNT_TO_TOKENISE = "SELECT count(*) FROM chunks WHERE $1 OR tokens IS NULL"


async def count_chunks_to_tokenise(conn: asyncpg.Connection, every: bool) -> int:
    """Chunks to re-tokenise: all of them with ``every``, else those without tokens."""
    return int(await conn.fetchval(SQL_COUNT_TO_TOKENISE, every, timeout=LONG_STATEMENT_S))


SQL_CHUNKS_TO_TOKENISE = """
SELECT id, heading_path, text FROM chunks WHERE id > $1 AND ($2 OR tokens IS NULL) ORDER BY id LIMIT $3"""


async def chunks_to_tokenise(conn: asyncpg.Connection, after: int, every: bool, limit: int) -> list[asyncpg.Record]:
    """A keyset page (id > ``after``, at most ``limit``) of chunks to re-tokenise: id, heading_path, text."""
    return await conn.fetch(SQL_CHUNKS_TO_TOKENISE, after, every, limit, timeout=LONG_STATEMENT_S)


# tokens never hold whitespace: one space-joined string per chunk
SQL_SET_TOKENS = """
UPDATE chunks c SET tokens = string_to_array(v.t, ' ')
FROM unnest($1::bigint[], $2::text[]) AS v(id, t) WHERE c.id = v.id"""


async def set_chunk_tokens(conn: asyncpg.Connection, ids: Sequence[int], tokens: Sequence[str]) -> None:
    """Store chunk tokens: ``tokens[i]`` (space-joined) for chunk ``ids[i]``."""
    await conn.execute(SQL_SET_TOKENS, ids, tokens, timeout=LONG_STATEMENT_S)


SQL_COLLECTION_IDS = "SELECT id FROM collections ORDER BY id"


async def collection_ids(conn: asyncpg.Connection) -> list[int]:
    return [r["id"] for r in await conn.fetch(SQL_COLLECTION_IDS)]


SQL_CLEAR_DF = "DELETE FROM lexeme_df WHERE collection_id = $1"
SQL_COUNT_DF = """
INSERT INTO lexeme_df (collection_id, lexeme, df)
SELECT $1, s.lx, count(*)
FROM documents d
CROSS JOIN LATERAL (
    SELECT DISTINCT unnest(tsvector_to_array(c.tsv)) AS lx FROM chunks c WHERE c.document_id = d.id
) s
WHERE d.collection_id = $1
GROUP BY s.lx"""


async def recount_lexeme_df(conn: asyncpg.Connection, collection_id: int) -> None:
    """Count a collection's lexeme document frequencies again from its chunks, in one transaction under its
    lexeme lock."""
    async with conn.transaction():
        await lock_lexemes(conn, collection_id)
        await conn.execute(SQL_CLEAR_DF, collection_id)
        await conn.execute(SQL_COUNT_DF, collection_id, timeout=LONG_STATEMENT_S)
