"""Loading the synthetic corpus of ``kb bench latency`` through the production storage path.

``load_collection`` makes the collection hold exactly the configured documents, with their statement facts
(``ingest.store.write_document``, COPY). When the database holds nothing but this collection, the HNSW and GIN indexes of ``chunks`` are dropped
for the load and rebuilt after it (their definitions are saved in the data dir until rebuilt). Index builds, TRUNCATE
and VACUUM run without the statement timeout of queries (``KB_DB_COMMAND_TIMEOUT_S``): the HNSW build over
200,000 chunks takes minutes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import math
import multiprocessing
import time
from collections import deque
from pathlib import Path
from typing import Any

import asyncpg
import structlog

from ingest.reembed import build_memory_mb
from kb.bench.latency_types import LatencyConfig, LoadReport
from kb.bench.synthetic import DOCS_PER_COMPANY, generate_batch
from kb.core.db import LONG_STATEMENT_S
from kb.core.errors import ConfigError

log = structlog.get_logger("kb.bench.loader")

INDEX_STASH = "bench-latency-dropped-indexes.json"

SQL_SIZE = """
SELECT (SELECT count(*) FROM documents WHERE collection_id = $1) AS docs,
       (SELECT count(*) FROM chunks WHERE collection_id = $1) AS chunks,
       (SELECT count(*) FROM nodes n JOIN documents d ON d.id = n.document_id WHERE d.collection_id = $1) AS nodes,
       (SELECT count(*) FROM facts WHERE collection_id = $1) AS facts"""
SQL_OTHER_DATA = "SELECT EXISTS (SELECT 1 FROM documents WHERE collection_id <> $1)"
SQL_COLLECTION_DOC_IDS = "SELECT id FROM documents WHERE collection_id = $1"
# per-collection statistics maintained by ingest.store (e.g. lexeme_df): emptied with the documents
SQL_DERIVED_TABLES = """
SELECT c.conrelid::regclass::text FROM pg_constraint c
WHERE c.contype = 'f' AND c.confrelid = 'collections'::regclass
  AND c.conrelid NOT IN ('documents'::regclass, 'ingest_jobs'::regclass)"""
SQL_BULK_INDEXES = """
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = 'chunks' AND indexdef ~ 'USING (hnsw|gin) '"""
SQL_INDEX_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = $1)"
SQL_RELATION_SIZES = """
SELECT c.relname AS name, c.relkind::text AS kind, pg_relation_size(c.oid) AS bytes,
       CASE WHEN c.relkind = 'r' THEN pg_total_relation_size(c.oid) END AS total_bytes
FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
WHERE ns.nspname = current_schema()
  AND (c.relname IN ('chunks', 'nodes', 'documents', 'facts')
       OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'chunks'::regclass))
ORDER BY c.relkind DESC, c.relname"""


async def collection_size(pool: asyncpg.Pool, collection_id: int) -> tuple[int, int, int, int]:
    """Documents, tree nodes, chunks and fact rows of the collection."""
    row = await pool.fetchrow(SQL_SIZE, collection_id)
    return int(row["docs"]), int(row["nodes"]), int(row["chunks"]), int(row["facts"])


def _stash_path(data_dir: Path) -> Path:
    return data_dir / INDEX_STASH


async def restore_indexes(pool: asyncpg.Pool, data_dir: Path) -> dict[str, float]:
    """Re-create indexes dropped for a load (also after an interrupted run); seconds per index."""
    stash = _stash_path(data_dir)
    if not stash.exists():
        return {}
    defs: dict[str, str] = json.loads(stash.read_text())
    seconds: dict[str, float] = {}
    async with pool.acquire() as conn:
        await conn.execute(f"SET maintenance_work_mem = '{await build_memory_mb(conn)}MB'")
        try:
            for name, ddl in defs.items():
                if await conn.fetchval(SQL_INDEX_EXISTS, name):
                    continue
                t = time.perf_counter()
                log.info("bench.index_build", index=name)
                await conn.execute(ddl, timeout=LONG_STATEMENT_S)
                seconds[name] = round(time.perf_counter() - t, 1)
                log.info("bench.index_built", index=name, seconds=seconds[name])
        finally:
            await conn.execute("RESET maintenance_work_mem")
    stash.unlink()
    return seconds


async def drop_bulk_indexes(pool: asyncpg.Pool, data_dir: Path) -> None:
    """Drop the HNSW and GIN indexes of ``chunks``; their definitions are stashed for ``restore_indexes``."""
    rows = await pool.fetch(SQL_BULK_INDEXES)
    defs = {r["indexname"]: r["indexdef"] for r in rows}
    stash = _stash_path(data_dir)
    if stash.exists():
        defs = {**defs, **json.loads(stash.read_text())}
    stash.parent.mkdir(parents=True, exist_ok=True)  # with KB_DATABASE_URL the data dir may not exist yet
    stash.write_text(json.dumps(defs, indent=1))
    for name in (r["indexname"] for r in rows):
        await pool.execute(f'DROP INDEX IF EXISTS "{name}"', timeout=LONG_STATEMENT_S)
    log.info("bench.indexes_dropped", indexes=sorted(defs))


SQL_COLLECTION_SOURCES = "SELECT id, source_path FROM documents WHERE collection_id = $1"
SQL_DROP_COLLECTION = "DELETE FROM collections WHERE id = $1"


def source_path(cfg: LatencyConfig, index: int, name: str) -> str:
    """Where a synthetic document says it came from: the seed, chunks per document, corpus size (the companies
    depend on it) and its index: the resume key."""
    return f"synthetic://{cfg.seed}/{cfg.chunks_per_doc}/{cfg.docs}/{index}/{name}"


def _index_of(cfg: LatencyConfig, path: str) -> int | None:
    prefix = f"synthetic://{cfg.seed}/{cfg.chunks_per_doc}/{cfg.docs}/"
    if not path.startswith(prefix):
        return None
    head = path[len(prefix):].split("/", 1)[0]
    return int(head) if head.isdigit() and int(head) < cfg.docs else None


async def load_collection(pool: asyncpg.Pool, cfg: LatencyConfig, data_dir: Path, dim: int) -> LoadReport:
    """Make the collection hold exactly the configured synthetic documents. With ``--reuse`` a complete load is
    reused and an interrupted one resumes (the documents already written are kept; one transaction each);
    without, the collection is written afresh. A collection holding anything the bench did not write is
    refused."""
    from ingest.store import delete_document
    from kb.core.collections import ensure_collection

    coll = await ensure_collection(pool, cfg.collection)
    rows = await pool.fetch(SQL_COLLECTION_SOURCES, coll.id)
    foreign = [r for r in rows if not r["source_path"].startswith("synthetic://")]
    if foreign:
        raise ConfigError(f"kb bench latency: collection {cfg.collection!r} holds {len(foreign)} documents the "
                          "benchmark did not write; refusing to overwrite it (choose another --collection)")
    kept = {i: r["id"] for r in rows if (i := _index_of(cfg, r["source_path"])) is not None} if cfg.reuse else {}
    stale = [r["id"] for r in rows if r["id"] not in set(kept.values())]
    todo = [i for i in range(cfg.docs) if i not in kept]
    if not todo and not stale:
        built = await restore_indexes(pool, data_dir)  # a run interrupted after its last document
        log.info("bench.collection_reused", collection=cfg.collection, docs=len(kept))
        return LoadReport(generated=bool(built), seconds_index_build=built)
    alone = not await pool.fetchval(SQL_OTHER_DATA, coll.id)
    t = time.perf_counter()
    if alone:
        await drop_bulk_indexes(pool, data_dir)
        if stale and not kept:
            derived = [r[0] for r in await pool.fetch(SQL_DERIVED_TABLES)]
            tables = ", ".join(["chunks", "nodes", "documents", *derived])
            await pool.execute(f"TRUNCATE {tables}", timeout=LONG_STATEMENT_S)
            stale = []
    for doc_id in stale:
        await delete_document(pool, doc_id)  # the production delete keeps per-collection statistics right
    t_clear = time.perf_counter() - t
    if kept:
        log.info("bench.load_resumed", collection=cfg.collection, kept=len(kept), to_write=len(todo))

    t0 = time.perf_counter()
    await write_synthetic(pool, cfg, coll.id, dim, todo)
    t_write = time.perf_counter() - t0
    index_seconds = await restore_indexes(pool, data_dir)  # not after an interruption: the next run resumes
    t = time.perf_counter()
    for table in ("documents", "nodes", "chunks", "facts"):
        await pool.execute(f"VACUUM (ANALYZE) {table}", timeout=LONG_STATEMENT_S)
    t_vac = time.perf_counter() - t
    return LoadReport(generated=True, seconds_generate_and_write=round(t_write, 1), seconds_clear=round(t_clear, 1),
                      seconds_index_build=index_seconds, seconds_vacuum_analyze=round(t_vac, 1),
                      indexes_dropped_for_load=alone, resumed_docs=len(kept))


async def write_synthetic(pool: asyncpg.Pool, cfg: LatencyConfig, collection_id: int, dim: int,
                          todo: list[int]) -> None:
    """Generate (in a worker process) and write documents ``todo`` through ``ingest.store.write_document``
    (rows by COPY, one transaction per document), with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ingest.store import NewDocument, write_document

    n_companies = math.ceil(cfg.docs / DOCS_PER_COMPANY)
    batches = [todo[i:i + 8] for i in range(0, len(todo), 8)]
    loop = asyncio.get_running_loop()
    ctx = multiprocessing.get_context("spawn")
    columns = (TextColumn("writing documents"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=False) as bar, \
            concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
        task = bar.add_task("load", total=cfg.docs, completed=cfg.docs - len(todo))

        def submit(b: list[int]) -> asyncio.Future[list[Any]]:
            return loop.run_in_executor(ex, generate_batch, b, cfg.chunks_per_doc, cfg.seed, n_companies, dim)

        ahead = deque(submit(b) for b in batches[:2])  # generated ahead while writing: two batches at most
        for k, batch in enumerate(batches):
            docs = await ahead.popleft()
            if k + 2 < len(batches):
                ahead.append(submit(batches[k + 2]))
            for index, doc in zip(batch, docs, strict=True):
                sha = hashlib.sha256(f"{cfg.seed}/{doc.name}/{cfg.chunks_per_doc}".encode()).hexdigest()
                await write_document(pool, NewDocument(
                    collection_id=collection_id, name=doc.name, source_path=source_path(cfg, index, doc.name),
                    sha256=sha, file_type="pdf", metadata=doc.metadata, title=doc.title,
                    description=doc.description, description_embedding=doc.desc_vec, tree=doc.tree,
                    node_embeddings=doc.node_vecs, chunks=doc.chunks, chunk_embeddings=doc.chunk_vecs,
                    facts=doc.facts))
                bar.advance(task)
            if k % 12 == 0:
                log.info("bench.load_progress", written=cfg.docs - len(todo) + sum(map(len, batches[:k + 1])),
                         of=cfg.docs)


async def drop_collection(pool: asyncpg.Pool, collection: str) -> None:
    """``--drop``: remove the benchmark's collection (TRUNCATE when the database holds nothing else)."""
    coll_id = await pool.fetchval("SELECT id FROM collections WHERE name = $1", collection)
    if coll_id is None:
        return
    if not await pool.fetchval(SQL_OTHER_DATA, coll_id):
        derived = [r[0] for r in await pool.fetch(SQL_DERIVED_TABLES)]
        await pool.execute(f"TRUNCATE {', '.join(['chunks', 'nodes', 'documents', *derived])}",
                           timeout=LONG_STATEMENT_S)
    await pool.execute(SQL_DROP_COLLECTION, coll_id, timeout=LONG_STATEMENT_S)
    log.info("bench.collection_dropped", collection=collection)


async def relation_sizes(pool: asyncpg.Pool) -> dict[str, dict[str, Any]]:
    return {r["name"]: {"kind": "table" if r["kind"] == "r" else "index", "bytes": int(r["bytes"]),
                        "total_bytes": int(r["total_bytes"]) if r["total_bytes"] is not None else None}
            for r in await pool.fetch(SQL_RELATION_SIZES)}
