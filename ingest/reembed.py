"""``kb reembed``: re-embed every stored vector (chunks, tree nodes, document descriptions) with the configured
embedder.

New vectors are first staged in ``reembed_*`` tables keyed by the target embedder, batch by batch (each batch
committed, so a killed run resumes where it stopped), through the (model, sha256) embedding cache. Then ONE
transaction swaps them in: vector indexes dropped, columns retyped to the new dimension, every vector
replaced, indexes rebuilt, the embedder record updated. Readers see all old vectors or all new ones.

With a collection, only that collection is re-embedded, and only with the recorded embedder (the database
holds one embedder's vectors: a different one re-embeds everything). Re-embedding with the recorded embedder
recomputes every vector instead of reading the cache (the point is to replace suspect vectors).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import numpy as np
import structlog

from ingest.embedding import CachedEmbedder
from ingest.pipeline import doc_label, embed_text_for_chunk, embed_text_for_description, embed_text_for_node
from kb.core.collections import get_collection
from kb.core.db import LONG_STATEMENT_S, MIGRATION_LOCK_KEY
from kb.core.embedder_record import SQL_COLUMN_DIM, UNRECORDED, EmbedderRecord, read_record
from kb.core.errors import ConfigError, ConflictError, DatabaseError
from kb.core.providers import Embedder

log = structlog.get_logger("ingest.reembed")

REEMBED_LOCK_KEY = 7_351_100_002  # pg_advisory_lock key: one `kb reembed` per database at a time
Db = asyncpg.Pool | asyncpg.Connection
Progress = Callable[[int, int], None]

SQL_TRY_LOCK = "SELECT pg_try_advisory_lock($1)"
SQL_UNLOCK = "SELECT pg_advisory_unlock($1)"

# ---- what to embed: rows not staged yet for the target (model_id $3, dimension $4), keyset pages
SQL_PENDING_CHUNKS = """
SELECT c.id, d.title, d.metadata, c.heading_path, c.text, c.context
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.id > $1 AND ($2::bigint IS NULL OR c.collection_id = $2)
  AND NOT EXISTS (SELECT 1 FROM reembed_chunks s WHERE s.model_id = $3 AND s.dimension = $4 AND s.chunk_id = c.id)
ORDER BY c.id LIMIT $5"""
SQL_PENDING_NODES = """
SELECT n.document_id, n.node_id, d.title, d.metadata, n.path, n.summary
FROM nodes n JOIN documents d ON d.id = n.document_id
WHERE (n.document_id, n.node_id) > ($1, $6) AND ($2::bigint IS NULL OR d.collection_id = $2)
  AND n.embedding IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reembed_nodes s WHERE s.model_id = $3 AND s.dimension = $4
                  AND s.document_id = n.document_id AND s.node_id = n.node_id)
ORDER BY n.document_id, n.node_id LIMIT $5"""
SQL_PENDING_DOCUMENTS = """
SELECT d.id, d.title, d.description
FROM documents d
WHERE d.id > $1 AND ($2::bigint IS NULL OR d.collection_id = $2) AND d.description_embedding IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reembed_documents s WHERE s.model_id = $3 AND s.dimension = $4
                  AND s.document_id = d.id)
ORDER BY d.id LIMIT $5"""
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
STAGE_COLUMNS = {
    "chunks": ("reembed_chunks", ("model_id", "dimension", "chunk_id", "embedding")),
    "nodes": ("reembed_nodes", ("model_id", "dimension", "document_id", "node_id", "embedding")),
    "documents": ("reembed_documents", ("model_id", "dimension", "document_id", "embedding")),
}

# ---- the swap (one transaction)
SQL_LOCK_RECORD = "LOCK TABLE embedder_state IN EXCLUSIVE MODE"  # waits for writers holding the record FOR SHARE
SQL_LOCK_TABLES = "LOCK TABLE documents, nodes, chunks IN SHARE ROW EXCLUSIVE MODE"  # no writes; reads go on
SQL_VECTOR_INDEXES = """
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename IN ('chunks', 'nodes', 'documents')
  AND indexdef ~ 'USING (hnsw|ivfflat) '"""
SQL_VECTOR_BYTES = """
SELECT count(*) * (SELECT CASE WHEN t.typname = 'halfvec' THEN 2 ELSE 4 END * a.atttypmod
                   FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                   WHERE a.attrelid = 'chunks'::regclass AND a.attname = 'embedding') FROM chunks"""


async def build_memory_mb(conn: asyncpg.Connection) -> int:
    """``maintenance_work_mem`` for an HNSW build: enough for the graph to stay in memory (vectors plus about
    as much again for the graph, measured: 390 MB for 200,000 384-d float32 vectors), at least 1 GB and at
    most a quarter of this machine's RAM (a 2-million-chunk build that spills to disk takes hours; the
    embedded Postgres runs on this machine)."""
    vectors = int(await conn.fetchval(SQL_VECTOR_BYTES) or 0)
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(max(1024, min(2.2 * vectors / 2**20, ram / 4 / 2**20)))


async def set_build_memory(conn: asyncpg.Connection) -> int:
    """``SET LOCAL maintenance_work_mem`` for the index builds of the current transaction (``build_memory_mb``)."""
    mb = await build_memory_mb(conn)
    await conn.execute(f"SET LOCAL maintenance_work_mem = '{mb}MB'")  # an int: never text from outside
    return mb
VECTOR_COLUMNS = (("chunks", "embedding"), ("nodes", "embedding"), ("documents", "description_embedding"))
SQL_APPLY_CHUNKS = """
UPDATE chunks c SET embedding = s.embedding FROM reembed_chunks s
WHERE s.model_id = $1 AND s.dimension = $2 AND s.chunk_id = c.id"""
SQL_APPLY_NODES = """
UPDATE nodes n SET embedding = s.embedding FROM reembed_nodes s
WHERE s.model_id = $1 AND s.dimension = $2 AND s.document_id = n.document_id AND s.node_id = n.node_id"""
SQL_APPLY_DOCUMENTS = """
UPDATE documents d SET description_embedding = s.embedding FROM reembed_documents s
WHERE s.model_id = $1 AND s.dimension = $2 AND s.document_id = d.id"""
SQL_RECORD = """
INSERT INTO embedder_state (model_id, dimension) VALUES ($1, $2)
ON CONFLICT (singleton) DO UPDATE SET
    model_id = EXCLUDED.model_id, dimension = EXCLUDED.dimension, updated_at = now(),
    generation = embedder_state.generation
               + CASE WHEN (embedder_state.model_id, embedder_state.dimension) = (EXCLUDED.model_id, EXCLUDED.dimension)
                      THEN 0 ELSE 1 END
RETURNING generation"""
SQL_CLEAR_ALL_STAGING = "TRUNCATE reembed_chunks, reembed_nodes, reembed_documents"
SQL_CLEAR_TARGET_STAGING = [f"DELETE FROM {table} WHERE model_id = $1 AND dimension = $2"
                            for table, _ in STAGE_COLUMNS.values()]


class ReembedPlan(msgspec.Struct, frozen=True):
    """What a run will do: from which embedder to which, over what, and how much is already staged."""

    recorded: EmbedderRecord
    model_id: str
    dimension: int
    collection: str | None
    collection_id: int | None
    total: int  # vectors to produce (chunks, nodes with a vector, documents with a description vector)
    staged: int  # already staged by an earlier, interrupted run

    @property
    def changes_embedder(self) -> bool:
        return not self.recorded.matches(self.model_id, self.dimension)


class ReembedResult(msgspec.Struct, frozen=True):
    model_id: str
    dimension: int
    collection: str | None
    vectors: int  # vectors swapped in
    resumed: int  # of which staged by an earlier run
    embedded: int  # texts the embedder computed (cache misses) in this run
    generation: int
    seconds: float
    swap_seconds: float  # the one transaction (queries wait for it when the columns are retyped)


@dataclass(frozen=True)
class _Kind:
    """One kind of stored vector: how to page through the rows that still need one, and their texts."""

    name: str
    sql: str
    key: Callable[[asyncpg.Record], tuple[Any, ...]]  # staging key columns of a row
    text: Callable[[asyncpg.Record], str]
    start: tuple[Any, ...]


def _meta(row: asyncpg.Record) -> dict[str, Any]:
    raw = row["metadata"]
    return json.loads(raw) if isinstance(raw, str) else dict(raw or {})


def _label(row: asyncpg.Record) -> str:
    return doc_label(_meta(row), row["title"])


KINDS = (
    _Kind("documents", SQL_PENDING_DOCUMENTS, lambda r: (r["id"],),
          lambda r: embed_text_for_description(r["title"], r["description"]), (0,)),
    _Kind("nodes", SQL_PENDING_NODES, lambda r: (r["document_id"], r["node_id"]),
          lambda r: embed_text_for_node(_label(r), list(r["path"]), r["summary"]), (0, "")),
    _Kind("chunks", SQL_PENDING_CHUNKS, lambda r: (r["id"],),
          lambda r: embed_text_for_chunk(_label(r), r["heading_path"], r["text"], r["context"]), (0,)),
)


async def plan_reembed(pool: asyncpg.Pool, embedder: Embedder, collection: str | None = None) -> ReembedPlan:
    """Check what may be done and count it; a collection needs the recorded embedder (``ConfigError``)."""
    recorded = await read_record(pool) or EmbedderRecord(UNRECORDED, int(await pool.fetchval(SQL_COLUMN_DIM)))
    model_id, dim = embedder.model_id, embedder.dimension
    collection_id = None
    if collection is not None:
        if not recorded.matches(model_id, dim):
            raise ConfigError(
                f"--collection re-embeds with the recorded embedder only: database vectors come from "
                f"{recorded.describe()}, the configured embedder is {model_id!r} ({dim}-d), and one database holds "
                "one embedder's vectors; run 'kb reembed' without --collection to re-embed every collection")
        collection_id = (await get_collection(pool, collection)).id
    row = await pool.fetchrow(SQL_COUNTS, collection_id, model_id, dim)
    return ReembedPlan(recorded=recorded, model_id=model_id, dimension=dim, collection=collection,
                       collection_id=collection_id, total=int(row["total"]), staged=int(row["staged"]))


async def stage(db: Db, cached: CachedEmbedder, plan: ReembedPlan, *, batch: int = 256,
                on_batch: Callable[[int], None] | None = None) -> int:
    """Embed and stage every vector the plan still lacks, one committed batch at a time; return the count."""
    done = 0
    for kind in KINDS:
        table, columns = STAGE_COLUMNS[kind.name]
        after = kind.start
        while True:
            rows = await db.fetch(kind.sql, after[0], plan.collection_id, plan.model_id, plan.dimension, batch,
                                  *after[1:])
            if not rows:
                break
            vecs = await cached.embed([kind.text(r) for r in rows])
            records = [(plan.model_id, plan.dimension, *kind.key(r), np.asarray(v, dtype=np.float32))
                       for r, v in zip(rows, vecs, strict=True)]
            await db.copy_records_to_table(table, columns=columns, records=records)
            after = kind.key(rows[-1])
            done += len(rows)
            if on_batch is not None:
                on_batch(len(rows))
    return done


async def _retype(conn: asyncpg.Connection, plan: ReembedPlan) -> None:
    """Replace every vector and retype the columns to the new dimension (indexes dropped, rebuilt)."""
    await set_build_memory(conn)
    indexes = await conn.fetch(SQL_VECTOR_INDEXES, timeout=LONG_STATEMENT_S)
    stored = {(r["table_name"], r["column_name"]): r["type_name"] for r in await conn.fetch(SQL_VECTOR_COLUMN_TYPES)}
    for ix in indexes:
        await conn.execute(f'DROP INDEX "{ix["indexname"]}"', timeout=LONG_STATEMENT_S)
    for table, column in VECTOR_COLUMNS:
        await conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector", timeout=LONG_STATEMENT_S)
    for sql in (SQL_APPLY_CHUNKS, SQL_APPLY_NODES, SQL_APPLY_DOCUMENTS):
        await conn.execute(sql, plan.model_id, plan.dimension, timeout=LONG_STATEMENT_S)
    for table, column in VECTOR_COLUMNS:  # fails (and rolls everything back) if any old vector was left
        typ = f"{stored.get((table, column), 'vector')}({int(plan.dimension)})"  # KB_VECTOR_TYPE is kept
        await conn.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {typ}", timeout=LONG_STATEMENT_S)
    for ix in indexes:
        await conn.execute(ix["indexdef"], timeout=LONG_STATEMENT_S)


async def swap(pool: asyncpg.Pool, cached: CachedEmbedder, plan: ReembedPlan) -> tuple[int, int]:
    """In ONE transaction: stage what writers added meanwhile, swap the staged vectors in, update the record.

    Returns (vectors swapped in, new generation).
    """
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(SQL_LOCK_RECORD, timeout=LONG_STATEMENT_S)
        await conn.execute(SQL_LOCK_TABLES, timeout=LONG_STATEMENT_S)
        await stage(conn, cached, plan)  # documents written between staging and the lock
        counts = await conn.fetchrow(SQL_COUNTS, plan.collection_id, plan.model_id, plan.dimension, timeout=LONG_STATEMENT_S)
        if counts["staged"] != counts["total"]:
            raise DatabaseError(f"re-embed staging incomplete ({counts['staged']} of {counts['total']} vectors)")
        if plan.collection_id is None:
            await _retype(conn, plan)
        else:  # the recorded embedder: same dimension, the rows of one collection
            for sql in (SQL_APPLY_CHUNKS, SQL_APPLY_NODES, SQL_APPLY_DOCUMENTS):
                await conn.execute(sql, plan.model_id, plan.dimension, timeout=LONG_STATEMENT_S)
        generation = int(await conn.fetchval(SQL_RECORD, plan.model_id, plan.dimension, timeout=LONG_STATEMENT_S))
        if plan.collection_id is None:
            await conn.execute(SQL_CLEAR_ALL_STAGING, timeout=LONG_STATEMENT_S)
        else:
            for sql in SQL_CLEAR_TARGET_STAGING:
                await conn.execute(sql, plan.model_id, plan.dimension, timeout=LONG_STATEMENT_S)
    return int(counts["total"]), generation


async def reembed(pool: asyncpg.Pool, embedder: Embedder, *, collection: str | None = None, batch: int = 256,
                  on_progress: Progress | None = None) -> ReembedResult:
    """Re-embed the database (or one collection) with ``embedder``: stage, then swap in one transaction."""
    started = time.perf_counter()
    async with pool.acquire() as lock_conn:
        if not await lock_conn.fetchval(SQL_TRY_LOCK, REEMBED_LOCK_KEY):
            raise ConflictError("another 'kb reembed' is running on this database")
        try:
            plan = await plan_reembed(pool, embedder, collection)
            log.info("reembed.start", source=plan.recorded.model_id, target=plan.model_id, dimension=plan.dimension,
                     collection=collection, total=plan.total, staged=plan.staged)
            cached = CachedEmbedder(pool, embedder, batch=batch, refresh=not plan.changes_embedder)
            progress = plan.staged

            def advance(n: int) -> None:
                nonlocal progress
                progress += n
                if on_progress is not None:
                    on_progress(min(progress, plan.total), plan.total)

            advance(0)
            await stage(pool, cached, plan, batch=batch, on_batch=advance)
            swap_started = time.perf_counter()
            vectors, generation = await swap(pool, cached, plan)
            swap_seconds = round(time.perf_counter() - swap_started, 2)
        finally:
            await lock_conn.fetchval(SQL_UNLOCK, REEMBED_LOCK_KEY)
    result = ReembedResult(model_id=plan.model_id, dimension=plan.dimension, collection=collection, vectors=vectors,
                           resumed=plan.staged, embedded=cached.misses, generation=generation,
                           seconds=round(time.perf_counter() - started, 2), swap_seconds=swap_seconds)
    log.info("reembed.done", **msgspec.structs.asdict(result))
    return result


# ---- KB_VECTOR_TYPE: the stored vectors as `vector` (float32) or `halfvec` (float16)
SQL_VECTOR_COLUMN_TYPES = """
SELECT c.relname AS table_name, a.attname AS column_name, t.typname AS type_name, a.atttypmod AS dim
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid
WHERE c.relnamespace = current_schema()::regnamespace AND NOT a.attisdropped
  AND (c.relname, a.attname) IN (('chunks', 'embedding'), ('nodes', 'embedding'),
                                 ('documents', 'description_embedding'))"""
_OPCLASS = re.compile(r"\b(?:vector|halfvec)_(cosine|l2|ip|l1)_ops\b")


class VectorTypeChange(msgspec.Struct, frozen=True):
    """What ``convert_vector_type`` did: the columns retyped, the indexes rebuilt, how long it took."""

    vector_type: str
    columns: tuple[str, ...]
    indexes: tuple[str, ...]
    seconds: float
    retype_seconds: float = 0.0  # rewriting the vectors
    index_seconds: float = 0.0  # rebuilding the HNSW indexes


async def vector_type(pool: asyncpg.Pool) -> str:
    """The stored type of ``chunks.embedding`` (``vector`` or ``halfvec``)."""
    rows = await pool.fetch(SQL_VECTOR_COLUMN_TYPES)
    return next(r["type_name"] for r in rows if r["table_name"] == "chunks")


async def convert_vector_type(pool: asyncpg.Pool, target: str) -> VectorTypeChange | None:
    """Retype every stored vector column to ``target`` (``vector`` ↔ ``halfvec``) and rebuild its HNSW index
    with the matching operator class, in ONE transaction under the migration lock (readers wait for it;
    concurrent starts convert once). None when the database already stores ``target``."""
    if target not in ("vector", "halfvec"):
        raise ConfigError(f"KB_VECTOR_TYPE must be vector or halfvec, got {target!r}")
    if all(r["type_name"] == target for r in await pool.fetch(SQL_VECTOR_COLUMN_TYPES)):
        return None  # every start asks: no lock when there is nothing to do
    started = time.perf_counter()
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY, timeout=LONG_STATEMENT_S)
        try:
            async with conn.transaction():
                columns = [r for r in await conn.fetch(SQL_VECTOR_COLUMN_TYPES) if r["type_name"] != target]
                if not columns:
                    return None
                log.info("db.vector_type_converting", target=target, columns=len(columns))
                indexes = await conn.fetch(SQL_VECTOR_INDEXES, timeout=LONG_STATEMENT_S)
                for ix in indexes:
                    await conn.execute(f'DROP INDEX "{ix["indexname"]}"', timeout=LONG_STATEMENT_S)
                t = time.perf_counter()
                for r in columns:
                    typ = f"{target}({int(r['dim'])})" if r["dim"] > 0 else target
                    await conn.execute(f'ALTER TABLE "{r["table_name"]}" ALTER COLUMN "{r["column_name"]}" '
                                       f"TYPE {typ} USING \"{r['column_name']}\"::{typ}", timeout=LONG_STATEMENT_S)
                retype_s, t = time.perf_counter() - t, time.perf_counter()
                mb = await set_build_memory(conn)
                log.info("db.vector_type_retyped", seconds=round(retype_s, 1), index_build_memory_mb=mb)
                for ix in indexes:
                    await conn.execute(_OPCLASS.sub(lambda m: f"{target}_{m.group(1)}_ops", ix["indexdef"]),
                                       timeout=LONG_STATEMENT_S)
                index_s = time.perf_counter() - t
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    change = VectorTypeChange(vector_type=target, columns=tuple(f"{r['table_name']}.{r['column_name']}" for r in columns),
                              indexes=tuple(ix["indexname"] for ix in indexes),
                              seconds=round(time.perf_counter() - started, 2), retype_seconds=round(retype_s, 2),
                              index_seconds=round(index_s, 2))
    log.info("db.vector_type_converted", **msgspec.structs.asdict(change))
    return change
