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
from pathlib import Path
from typing import Any

import asyncpg
import structlog

from kb.bench.latency_types import LatencyConfig, LoadReport
from kb.bench.synthetic import DOCS_PER_COMPANY, generate_batch, synthetic_fact_count
from kb.db import LONG_STATEMENT_S

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
        await conn.execute("SET maintenance_work_mem = '1GB'")
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


async def load_collection(pool: asyncpg.Pool, cfg: LatencyConfig, data_dir: Path, dim: int) -> LoadReport:
    """Make the collection hold exactly the configured synthetic documents (or reuse it)."""
    from ingest.store import NewDocument, delete_document, write_document
    from kb.collections import ensure_collection

    coll = await ensure_collection(pool, cfg.collection)
    await restore_indexes(pool, data_dir)  # a previous run may have been interrupted mid-load
    docs, _, chunks, facts = await collection_size(pool, coll.id)
    want_chunks = cfg.docs * cfg.chunks_per_doc
    if cfg.reuse and docs == cfg.docs and chunks == want_chunks and facts == synthetic_fact_count(cfg.docs):
        log.info("bench.collection_reused", collection=cfg.collection, docs=docs, chunks=chunks, facts=facts)
        return LoadReport(generated=False)
    alone = not await pool.fetchval(SQL_OTHER_DATA, coll.id)
    t = time.perf_counter()
    if alone:
        await drop_bulk_indexes(pool, data_dir)
        if docs:
            derived = [r[0] for r in await pool.fetch(SQL_DERIVED_TABLES)]
            tables = ", ".join(["chunks", "nodes", "documents", *derived])
            await pool.execute(f"TRUNCATE {tables}", timeout=LONG_STATEMENT_S)
    elif docs:
        for doc_id in [r[0] for r in await pool.fetch(SQL_COLLECTION_DOC_IDS, coll.id)]:
            await delete_document(pool, doc_id)  # the production delete keeps per-collection statistics right
    t_clear = time.perf_counter() - t

    n_companies = math.ceil(cfg.docs / DOCS_PER_COMPANY)
    batches = [list(range(i, min(i + 8, cfg.docs))) for i in range(0, cfg.docs, 8)]
    t0 = time.perf_counter()
    loop = asyncio.get_running_loop()
    written = 0
    index_seconds: dict[str, float] = {}
    ctx = multiprocessing.get_context("spawn")
    try:
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
            futures = [loop.run_in_executor(ex, generate_batch, b, cfg.chunks_per_doc, cfg.seed, n_companies, dim)
                       for b in batches]
            for fut in futures:
                for doc in await fut:
                    sha = hashlib.sha256(f"{cfg.seed}/{doc.name}/{cfg.chunks_per_doc}".encode()).hexdigest()
                    await write_document(pool, NewDocument(
                        collection_id=coll.id, name=doc.name, source_path=f"synthetic://{doc.name}", sha256=sha,
                        file_type="pdf", metadata=doc.metadata, title=doc.title, description=doc.description,
                        description_embedding=doc.desc_vec, tree=doc.tree, node_embeddings=doc.node_vecs,
                        chunks=doc.chunks, chunk_embeddings=doc.chunk_vecs, facts=doc.facts))
                    written += 1
                if written % 100 < 8:
                    log.info("bench.load_progress", docs=written, of=cfg.docs,
                             seconds=round(time.perf_counter() - t0, 1))
        t_write = time.perf_counter() - t0
    finally:
        index_seconds = await restore_indexes(pool, data_dir)
    t = time.perf_counter()
    for table in ("documents", "nodes", "chunks", "facts"):
        await pool.execute(f"VACUUM (ANALYZE) {table}", timeout=LONG_STATEMENT_S)
    t_vac = time.perf_counter() - t
    return LoadReport(generated=True, seconds_generate_and_write=round(t_write, 1), seconds_clear=round(t_clear, 1),
                      seconds_index_build=index_seconds, seconds_vacuum_analyze=round(t_vac, 1),
                      indexes_dropped_for_load=alone)



async def relation_sizes(pool: asyncpg.Pool) -> dict[str, dict[str, Any]]:
    return {r["name"]: {"kind": "table" if r["kind"] == "r" else "index", "bytes": int(r["bytes"]),
                        "total_bytes": int(r["total_bytes"]) if r["total_bytes"] is not None else None}
            for r in await pool.fetch(SQL_RELATION_SIZES)}
