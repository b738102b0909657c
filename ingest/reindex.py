"""Re-tokenise stored chunks for full-text search (``kb reindex``, and at start when needed), without
re-embedding.

``chunks.tokens`` holds ``kb.core.text.index_tokens`` of each chunk (Postgres derives ``tsv`` from it). Chunks
stored before the tokens column existed have none, and a new ``kb.core.text.TOKENIZER_VERSION`` makes every stored
token list stale: :func:`ensure_tokens` (run by every process at start) re-tokenises what is missing or stale in
keyset batches, each committed, then recounts the collections' lexeme document frequencies and records the
version. One process at a time (advisory lock); the others wait and find the work done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg
import structlog

from ingest import store
from kb.core.text import TOKENIZER_VERSION, index_tokens

log = structlog.get_logger("ingest.reindex")

REINDEX_LOCK_KEY = 7_351_100_003  # pg_advisory_lock key: one re-tokenising run per database at a time
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ReindexResult:
    chunks: int
    collections: int
    seconds: float


async def ensure_tokens(pool: asyncpg.Pool, *, force: bool = False, batch: int = 2000,
                        on_progress: Progress | None = None) -> ReindexResult | None:
    """Re-tokenise the chunks whose tokens are missing, or all of them when the stored tokenizer version is
    not ``TOKENIZER_VERSION`` (or ``force``); ``None`` when nothing was to do."""
    async with pool.acquire() as conn:
        if not force and await _up_to_date(conn):
            return None
        await store.advisory_lock(conn, REINDEX_LOCK_KEY)
        try:
            if not force and await _up_to_date(conn):  # another process did it while we waited
                return None
            every = force or await store.tokenizer_version(conn) != TOKENIZER_VERSION
            return await _reindex(conn, every=every, batch=batch, on_progress=on_progress)
        finally:
            await store.advisory_unlock(conn, REINDEX_LOCK_KEY)


async def _up_to_date(conn: asyncpg.Connection) -> bool:
    return await store.tokenizer_version(conn) == TOKENIZER_VERSION and not await store.chunks_missing_tokens(conn)


async def _reindex(conn: asyncpg.Connection, *, every: bool, batch: int,
                   on_progress: Progress | None) -> ReindexResult:
    t0 = time.perf_counter()
    total = await store.count_chunks_to_tokenise(conn, every)
    log.info("reindex.start", chunks=total, every=every, tokenizer=TOKENIZER_VERSION)
    done, last = 0, 0
    while True:
        rows = await store.chunks_to_tokenise(conn, last, every, batch)
        if not rows:
            break
        ids = [r["id"] for r in rows]
        toks = [" ".join(index_tokens(r["heading_path"], r["text"])) for r in rows]
        await store.set_chunk_tokens(conn, ids, toks)
        done, last = done + len(rows), ids[-1]
        if on_progress:
            on_progress(done, total)
    collections = await store.collection_ids(conn)
    for cid in collections:
        await store.recount_lexeme_df(conn, cid)  # one transaction per collection, under its lexeme lock
    await store.set_tokenizer_version(conn, TOKENIZER_VERSION)
    result = ReindexResult(chunks=done, collections=len(collections), seconds=round(time.perf_counter() - t0, 2))
    log.info("reindex.done", chunks=result.chunks, collections=result.collections, seconds=result.seconds)
    return result
