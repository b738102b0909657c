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
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import numpy as np
import structlog

from ingest import store
from ingest.embedding import CachedEmbedder
from ingest.lines import index_lines
from ingest.pipeline import doc_label, embed_text_for_chunk, embed_text_for_description, embed_text_for_node
from kb.core.collections import get_collection
from kb.core.db import LONG_STATEMENT_S, MIGRATION_LOCK_KEY
from kb.core.embedder_record import UNRECORDED, EmbedderRecord, read_record
from kb.core.errors import ConfigError, ConflictError, DatabaseError
from kb.core.providers import Embedder

log = structlog.get_logger("ingest.reembed")

REEMBED_LOCK_KEY = 7_351_100_002  # pg_advisory_lock key: one `kb reembed` per database at a time
Db = asyncpg.Pool | asyncpg.Connection
Progress = Callable[[int, int], None]


async def build_memory_mb(conn: asyncpg.Connection) -> int:
    """``maintenance_work_mem`` for an HNSW build: enough for the graph to stay in memory (vectors plus about
    as much again for the graph, measured: 390 MB for 200,000 384-d float32 vectors), at least 1 GB and at
    most a quarter of this machine's RAM (a 2-million-chunk build that spills to disk takes hours; the
    embedded Postgres runs on this machine)."""
    vectors = await store.vector_bytes(conn)
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(max(1024, min(2.2 * vectors / 2**20, ram / 4 / 2**20)))


async def set_build_memory(conn: asyncpg.Connection) -> int:
    """``SET LOCAL maintenance_work_mem`` for the index builds of the current transaction (``build_memory_mb``)."""
    mb = await build_memory_mb(conn)
    await store.set_maintenance_work_mem(conn, mb)  # an int: never text from outside
    return mb


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
    pending: Callable[..., Awaitable[list[asyncpg.Record]]]  # (db, after, collection_id, model_id, dimension, limit)
    key: Callable[[asyncpg.Record], tuple[Any, ...]]  # staging key columns of a row
    text: Callable[[asyncpg.Record], str]
    start: tuple[Any, ...]


def _meta(row: asyncpg.Record) -> dict[str, Any]:
    raw = row["metadata"]
    return json.loads(raw) if isinstance(raw, str) else dict(raw or {})


def _label(row: asyncpg.Record) -> str:
    return doc_label(_meta(row), row["title"])


KINDS = (
    _Kind("documents", store.pending_reembed_documents, lambda r: (r["id"],),
          lambda r: embed_text_for_description(r["title"], r["description"]), (0,)),
    _Kind("nodes", store.pending_reembed_nodes, lambda r: (r["document_id"], r["node_id"]),
          lambda r: embed_text_for_node(_label(r), list(r["path"]), r["summary"]), (0, "")),
    _Kind("chunks", store.pending_reembed_chunks, lambda r: (r["id"],),
          lambda r: embed_text_for_chunk(_label(r), r["heading_path"], r["text"], r["context"]), (0,)),
)


async def plan_reembed(pool: asyncpg.Pool, embedder: Embedder, collection: str | None = None) -> ReembedPlan:
    """Check what may be done and count it; a collection needs the recorded embedder (``ConfigError``)."""
    recorded = await read_record(pool) or EmbedderRecord(UNRECORDED, await store.embedding_column_dimension(pool))
    model_id, dim = embedder.model_id, embedder.dimension
    collection_id = None
    if collection is not None:
        if not recorded.matches(model_id, dim):
            raise ConfigError(
                f"--collection re-embeds with the recorded embedder only: database vectors come from "
                f"{recorded.describe()}, the configured embedder is {model_id!r} ({dim}-d), and one database holds "
                "one embedder's vectors; run 'kb reembed' without --collection to re-embed every collection")
        collection_id = (await get_collection(pool, collection)).id
    row = await store.reembed_counts(pool, collection_id, model_id, dim)
    return ReembedPlan(recorded=recorded, model_id=model_id, dimension=dim, collection=collection,
                       collection_id=collection_id, total=int(row["total"]), staged=int(row["staged"]))


async def stage(db: Db, cached: CachedEmbedder, plan: ReembedPlan, *, batch: int = 256,
                on_batch: Callable[[int], None] | None = None) -> int:
    """Embed and stage every vector the plan still lacks, one committed batch at a time; return the count."""
    done = 0
    for kind in KINDS:
        after = kind.start
        while True:
            rows = await kind.pending(db, after, plan.collection_id, plan.model_id, plan.dimension, batch)
            if not rows:
                break
            vecs = await cached.embed([kind.text(r) for r in rows])
            records = [(plan.model_id, plan.dimension, *kind.key(r), np.asarray(v, dtype=np.float32))
                       for r, v in zip(rows, vecs, strict=True)]
            await store.stage_vectors(db, kind.name, records)
            after = kind.key(rows[-1])
            done += len(rows)
            if on_batch is not None:
                on_batch(len(rows))
    return done


async def _retype(conn: asyncpg.Connection, plan: ReembedPlan) -> None:
    """Replace every vector and retype the columns to the new dimension (indexes dropped, rebuilt)."""
    await set_build_memory(conn)
    indexes = await store.vector_indexes(conn)
    stored = {(r["table_name"], r["column_name"]): r["type_name"] for r in await store.vector_column_types(conn)}
    for ix in indexes:
        await store.drop_index(conn, ix["indexname"])
    await store.clear_label_vectors(conn)  # line names are embedded again after the swap (ingest.lines)
    for table, column in store.VECTOR_COLUMNS:
        await store.retype_vector_column(conn, table, column, "vector")
    await store.apply_staged_vectors(conn, plan.model_id, plan.dimension)
    for table, column in store.VECTOR_COLUMNS:  # fails (and rolls everything back) if any old vector was left
        await store.retype_vector_column(conn, table, column, stored.get((table, column), "vector"),
                                         plan.dimension)  # KB_VECTOR_TYPE is kept
    for ix in indexes:
        await store.create_index(conn, ix["indexdef"])


async def swap(pool: asyncpg.Pool, cached: CachedEmbedder, plan: ReembedPlan) -> tuple[int, int]:
    """In ONE transaction: stage what writers added meanwhile, swap the staged vectors in, update the record.

    Returns (vectors swapped in, new generation).
    """
    async with pool.acquire() as conn, conn.transaction():
        await store.lock_embedder_record(conn)  # waits for writers holding the record FOR SHARE
        await store.lock_vector_tables(conn)  # no writes; reads go on
        await stage(conn, cached, plan)  # documents written between staging and the lock
        counts = await store.reembed_counts(conn, plan.collection_id, plan.model_id, plan.dimension,
                                            timeout_s=LONG_STATEMENT_S)
        if counts["staged"] != counts["total"]:
            raise DatabaseError(f"re-embed staging incomplete ({counts['staged']} of {counts['total']} vectors)")
        if plan.collection_id is None:
            await _retype(conn, plan)
        else:  # the recorded embedder: same dimension, the rows of one collection
            await store.apply_staged_vectors(conn, plan.model_id, plan.dimension)
        generation = await store.record_embedder(conn, plan.model_id, plan.dimension)
        if plan.collection_id is None:
            await store.clear_all_staging(conn)
        else:
            await store.clear_target_staging(conn, plan.model_id, plan.dimension)
    return int(counts["total"]), generation


async def reembed(pool: asyncpg.Pool, embedder: Embedder, *, collection: str | None = None, batch: int = 256,
                  on_progress: Progress | None = None) -> ReembedResult:
    """Re-embed the database (or one collection) with ``embedder``: stage, then swap in one transaction."""
    started = time.perf_counter()
    async with pool.acquire() as lock_conn:
        if not await store.try_advisory_lock(lock_conn, REEMBED_LOCK_KEY):
            raise ConflictError("another 'kb reembed' is running on this database")
        try:
            plan = await plan_reembed(pool, embedder, collection)
            log.info("reembed.start", source=plan.recorded.model_id, target=plan.model_id, dimension=plan.dimension,
                     collection=collection, total=plan.total, staged=plan.staged)
            cached = CachedEmbedder(pool, embedder, batch=batch, refresh=not plan.changes_embedder, background=True)
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
            for collection_id in await store.collections_with_unembedded_labels(pool):
                await index_lines(pool, cached, collection_id, generation=generation)
        finally:
            await store.advisory_unlock(lock_conn, REEMBED_LOCK_KEY)
    result = ReembedResult(model_id=plan.model_id, dimension=plan.dimension, collection=collection, vectors=vectors,
                           resumed=plan.staged, embedded=cached.misses, generation=generation,
                           seconds=round(time.perf_counter() - started, 2), swap_seconds=swap_seconds)
    log.info("reembed.done", **msgspec.structs.asdict(result))
    return result


# ---- KB_VECTOR_TYPE: the stored vectors as `vector` (float32) or `halfvec` (float16)


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
    rows = await store.vector_column_types(pool)
    return next(r["type_name"] for r in rows if r["table_name"] == "chunks")


async def convert_vector_type(pool: asyncpg.Pool, target: str) -> VectorTypeChange | None:
    """Retype every stored vector column to ``target`` (``vector`` ↔ ``halfvec``) and rebuild its HNSW index
    with the matching operator class, in ONE transaction under the migration lock (readers wait for it;
    concurrent starts convert once). None when the database already stores ``target``."""
    if target not in ("vector", "halfvec"):
        raise ConfigError(f"KB_VECTOR_TYPE must be vector or halfvec, got {target!r}")
    if all(r["type_name"] == target for r in await store.vector_column_types(pool)):
        return None  # every start asks: no lock when there is nothing to do
    started = time.perf_counter()
    async with pool.acquire() as conn:
        await store.advisory_lock(conn, MIGRATION_LOCK_KEY)
        try:
            async with conn.transaction():
                columns = [r for r in await store.vector_column_types(conn) if r["type_name"] != target]
                if not columns:
                    return None
                log.info("db.vector_type_converting", target=target, columns=len(columns))
                indexes = await store.vector_indexes(conn)
                for ix in indexes:
                    await store.drop_index(conn, ix["indexname"])
                t = time.perf_counter()
                for r in columns:
                    await store.convert_vector_column(conn, r["table_name"], r["column_name"], target, r["dim"])
                retype_s, t = time.perf_counter() - t, time.perf_counter()
                mb = await set_build_memory(conn)
                log.info("db.vector_type_retyped", seconds=round(retype_s, 1), index_build_memory_mb=mb)
                for ix in indexes:
                    await store.create_index(conn, ix["indexdef"], vector_type=target)
                await store.touch_all_documents(conn)  # servers read the retyped vectors anew
                index_s = time.perf_counter() - t
        finally:
            await store.advisory_unlock(conn, MIGRATION_LOCK_KEY)
    change = VectorTypeChange(vector_type=target, columns=tuple(f"{r['table_name']}.{r['column_name']}" for r in columns),
                              indexes=tuple(ix["indexname"] for ix in indexes),
                              seconds=round(time.perf_counter() - started, 2), retype_seconds=round(retype_s, 2),
                              index_seconds=round(index_s, 2))
    log.info("db.vector_type_converted", **msgspec.structs.asdict(change))
    return change
