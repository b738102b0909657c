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

from kb.core.db import LONG_STATEMENT_S
from kb.core.text import TOKENIZER_VERSION, index_tokens

log = structlog.get_logger("ingest.reindex")

REINDEX_LOCK_KEY = 7_351_100_003  # pg_advisory_lock key: one re-tokenising run per database at a time
Progress = Callable[[int, int], None]

SQL_LOCK = "SELECT pg_advisory_lock($1)"
SQL_UNLOCK = "SELECT pg_advisory_unlock($1)"
SQL_STATE = "SELECT tokenizer FROM text_index_state"
SQL_SET_STATE = "UPDATE text_index_state SET tokenizer = $1"
SQL_MISSING = "SELECT EXISTS (SELECT 1 FROM chunks WHERE tokens IS NULL)"
SQL_COUNT = "SELECT count(*) FROM chunks WHERE $1 OR tokens IS NULL"
SQL_PENDING = """
SELECT id, heading_path, text FROM chunks WHERE id > $1 AND ($2 OR tokens IS NULL) ORDER BY id LIMIT $3"""
# tokens never hold whitespace: one space-joined string per chunk
SQL_SET_TOKENS = """
UPDATE chunks c SET tokens = string_to_array(v.t, ' ')
FROM unnest($1::bigint[], $2::text[]) AS v(id, t) WHERE c.id = v.id"""
SQL_COLLECTIONS = "SELECT id FROM collections ORDER BY id"
SQL_LOCK_LEXEMES = "SELECT pg_advisory_xact_lock(hashtextextended('lexeme_df/' || ($1::bigint)::text, 42))"
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
        await conn.execute(SQL_LOCK, REINDEX_LOCK_KEY, timeout=LONG_STATEMENT_S)
        try:
            if not force and await _up_to_date(conn):  # another process did it while we waited
                return None
            every = force or await conn.fetchval(SQL_STATE) != TOKENIZER_VERSION
            return await _reindex(conn, every=every, batch=batch, on_progress=on_progress)
        finally:
            await conn.execute(SQL_UNLOCK, REINDEX_LOCK_KEY)


async def _up_to_date(conn: asyncpg.Connection) -> bool:
    return await conn.fetchval(SQL_STATE) == TOKENIZER_VERSION and not await conn.fetchval(SQL_MISSING)


async def _reindex(conn: asyncpg.Connection, *, every: bool, batch: int,
                   on_progress: Progress | None) -> ReindexResult:
    t0 = time.perf_counter()
    total = int(await conn.fetchval(SQL_COUNT, every, timeout=LONG_STATEMENT_S))
    log.info("reindex.start", chunks=total, every=every, tokenizer=TOKENIZER_VERSION)
    done, last = 0, 0
    while True:
        rows = await conn.fetch(SQL_PENDING, last, every, batch, timeout=LONG_STATEMENT_S)
        if not rows:
            break
        ids = [r["id"] for r in rows]
        toks = [" ".join(index_tokens(r["heading_path"], r["text"])) for r in rows]
        await conn.execute(SQL_SET_TOKENS, ids, toks, timeout=LONG_STATEMENT_S)
        done, last = done + len(rows), ids[-1]
        if on_progress:
            on_progress(done, total)
    collections = [r["id"] for r in await conn.fetch(SQL_COLLECTIONS)]
    for cid in collections:
        async with conn.transaction():
            await conn.execute(SQL_LOCK_LEXEMES, cid)
            await conn.execute(SQL_CLEAR_DF, cid)
            await conn.execute(SQL_COUNT_DF, cid, timeout=LONG_STATEMENT_S)
    await conn.execute(SQL_SET_STATE, TOKENIZER_VERSION)
    result = ReindexResult(chunks=done, collections=len(collections), seconds=round(time.perf_counter() - t0, 2))
    log.info("reindex.done", chunks=result.chunks, collections=result.collections, seconds=result.seconds)
    return result
