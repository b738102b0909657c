"""A bulk ingest holds the chunks' vector index back and builds it once when it ends.

pgvector inserts each new chunk into the HNSW graph on its own (searching the graph, then rewriting its
neighbours' pages and their WAL): 0.75–0.86 ms a chunk, a fifth of the CPU that a whole-folder ingest spends on
anything but embedding. Building the graph in memory from the stored rows costs about a quarter of that (22,347
chunks of FinanceBench dev: 16.7 core-seconds inserted one by one, 3.7–4.1 built). So a job that will add
more chunks than the table holds (a first load, a collection a few times bigger than what is stored) drops
the index when its first file starts and builds it again when its last file ends (before the job is marked
done), or once it is cancelled or fails.

Meanwhile questions still get exact answers: without the index, Postgres ranks a collection's chunks by
scanning them (slower on a large table, never less accurate). The definition is kept in
``deferred_indexes`` (as the catalog gave it), so a worker (between files, or idle, every second) builds it once
the job has ended or has no file left to ingest, or once the process holding it is gone (same host), and marks
such a job done: a killed process never leaves the index missing for good. ``KB_INGEST_DEFER_INDEX=false``
turns this off.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import msgspec
import psutil
import structlog

from ingest import store
from ingest.reembed import set_build_memory

log = structlog.get_logger("ingest.bulk_index")

BYTES_PER_CHUNK = 6144
"""A low guess of a file's bytes per chunk, to tell before parsing whether a job adds more chunks than the
table holds: measured 1,330 for FinanceBench's PDFs (fonts and images count) and 560 for Loong's text filings, so
the guess undercounts a job's chunks four to ten times and a job defers only when it clearly pays."""


class Deferral(msgspec.Struct, frozen=True):
    """An index held back: its name, and the job (or else the process, ``host:pid``) holding it."""

    index: str
    job_id: int | None
    holder: str


class Rebuilt(msgspec.Struct, frozen=True):
    """An index built again: its name, and the seconds the build took (0.0 when another process had)."""

    index: str
    seconds: float


def this_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _file_bytes(paths: Sequence[str | Path]) -> int:
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_size
        except OSError:  # gone or unreadable: its item will say so; it adds no chunks
            continue
    return total


async def defer_for_files(pool: asyncpg.Pool, paths: Sequence[str | Path], *, job_id: int | None = None,
                          enabled: bool = True) -> Deferral | None:
    """Drop the chunks' HNSW index when ingesting ``paths`` will add more chunks than the table holds (a low
    guess from their bytes, ``BYTES_PER_CHUNK``) and record it for the rebuild; None when it stays (turned
    off, no such index, already held back, enough chunks stored, another deferral or rebuild running, or the
    table busy for 2 s)."""
    if not enabled:
        return None
    guess = await asyncio.to_thread(_file_bytes, list(paths)) // BYTES_PER_CHUNK
    if guess <= 0:
        return None
    holder = this_holder()
    try:
        async with pool.acquire() as conn, conn.transaction():
            if not await store.lock_deferred(conn, wait=False):
                return None
            index = await store.chunk_vector_index(conn)
            if index is None or await store.chunks_up_to(conn, guess + 1) > guess:
                return None
            await store.record_deferred(conn, index["indexname"], index["indexdef"], job_id, holder)
            await store.drop_index(conn, index["indexname"])
    except asyncpg.LockNotAvailableError:  # a long statement holds the table: insert row by row instead
        log.info("ingest.index_deferral_skipped", reason="chunks busy", job_id=job_id)
        return None
    log.info("ingest.index_deferred", index=index["indexname"], job_id=job_id, holder=holder, chunks_guess=guess)
    return Deferral(index["indexname"], job_id, holder)


async def defer_for_job(pool: asyncpg.Pool, job_id: int, *, enabled: bool = True) -> Deferral | None:
    """``defer_for_files`` over job ``job_id``'s files still to ingest."""
    if not enabled:
        return None
    return await defer_for_files(pool, await store.job_paths(pool, job_id), job_id=job_id)


async def rebuild(pool: asyncpg.Pool, index: str, *, wait: bool = True) -> Rebuilt | None:
    """Build a held-back index again from its recorded definition (for the column's vector type now), with
    memory enough for the graph (``reembed.build_memory_mb``). Writers of chunks wait while it builds; readers
    do not. Without ``wait``, None at once when another deferral or rebuild runs. A build that fails leaves the
    record (and raises), for a later sweep."""
    started = time.perf_counter()
    async with pool.acquire() as conn, conn.transaction():
        if not await store.lock_deferred(conn, wait=wait):
            return None
        await store.wait_for_locks(conn)  # the build waits for writers' documents to commit
        indexdef = await store.take_deferred(conn, index)
        if indexdef is None or await store.index_exists(conn, index):
            return Rebuilt(index, 0.0)
        await store.lock_chunks_for_build(conn)
        types = {(r["table_name"], r["column_name"]): r["type_name"] for r in await store.vector_column_types(conn)}
        mb = await set_build_memory(conn)
        await store.create_index(conn, indexdef, vector_type=types.get(("chunks", "embedding")))
    seconds = time.perf_counter() - started
    log.info("ingest.index_rebuilt", index=index, seconds=round(seconds, 2), build_memory_mb=mb)
    return Rebuilt(index, seconds)


async def rebuild_for_job(pool: asyncpg.Pool, job_id: int) -> list[Rebuilt]:
    """Build the indexes job ``job_id`` holds back once none of its files is pending or running (its last file
    just ended), before the job is marked done: a done job's documents are found through the index."""
    rows = [r for r in await store.deferred_indexes(pool) if r["job_id"] == job_id]
    if not rows or await store.job_open(pool, job_id):
        return []
    return [b for r in rows if (b := await rebuild(pool, r["indexname"])) is not None]


RETRY_S = 300.0
"""A sweep tries a build that failed again after this long (a full disk or memory fails the same way each time,
and each try holds the chunks' writers)."""
_failed_at: dict[str, float] = {}


async def _released(pool: asyncpg.Pool, row: asyncpg.Record) -> bool:
    """Is nobody holding this index back any more: its job ended, is gone, or has no file left to ingest (its
    process was killed after its last file, before the build), or — held by a process — that process is gone?"""
    if row["job_id"] is not None:
        state = await store.job_state(pool, row["job_id"])
        return state in store.JOB_FINISHED or state is None or not await store.job_open(pool, row["job_id"])
    host, _, pid = str(row["holder"]).rpartition(":")
    return host == socket.gethostname() and pid.isdigit() and not psutil.pid_exists(int(pid))


async def rebuild_released(pool: asyncpg.Pool) -> list[Rebuilt]:
    """Build every held-back index nobody holds any more (``_released``), unless another build runs now or
    this one failed here in the last ``RETRY_S``; a job left unfinished by a killed process is marked done after.
    Cheap when there is none: one read of a table that is almost always empty."""
    built: list[Rebuilt] = []
    for row in await store.deferred_indexes(pool):
        name = row["indexname"]
        if time.monotonic() - _failed_at.get(name, -RETRY_S) < RETRY_S or not await _released(pool, row):
            continue
        try:
            done = await rebuild(pool, name, wait=False)
        except (asyncpg.PostgresError, OSError):
            _failed_at[name] = time.monotonic()
            raise
        _failed_at.pop(name, None)
        if done is not None:
            built.append(done)
            if row["job_id"] is not None:
                await store.maybe_finish_job(pool, row["job_id"])
    return built
