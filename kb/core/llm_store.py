"""Postgres-backed LLM response cache and usage log (``llm_cache``, ``llm_calls``)."""

from __future__ import annotations

import asyncpg
import structlog

from kb.core.types import ChatResult, ChatUsage

log = structlog.get_logger("kb.llm")

SQL_CACHE_GET = """
SELECT response, prompt_tokens, completion_tokens FROM llm_cache WHERE model = $1 AND prompt_hash = $2"""
SQL_CACHE_PUT = """
INSERT INTO llm_cache (model, prompt_hash, response, prompt_tokens, completion_tokens)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (model, prompt_hash) DO NOTHING"""
SQL_RECORD_CALL = """
INSERT INTO llm_calls (purpose, model, prompt_hash, prompt_tokens, completion_tokens, duration_ms, cached, ok)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"""


class PgLLMStore:
    """Implements ``kb.core.providers.chat.LLMStore`` on the shared pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def get(self, model: str, prompt_hash: str) -> ChatResult | None:
        row = await self._pool.fetchrow(SQL_CACHE_GET, model, prompt_hash)
        if row is None:
            return None
        return ChatResult(
            text=row["response"], model=model,
            usage=ChatUsage(row["prompt_tokens"], row["completion_tokens"], True),
        )

    async def put(self, model: str, prompt_hash: str, result: ChatResult) -> None:
        await self._pool.execute(
            SQL_CACHE_PUT, model, prompt_hash, result.text,
            result.usage.prompt_tokens, result.usage.completion_tokens,
        )

    async def record(self, purpose: str, model: str, prompt_hash: str, result: ChatResult, ok: bool) -> None:
        await self._pool.execute(
            SQL_RECORD_CALL, purpose, model, prompt_hash, result.usage.prompt_tokens,
            result.usage.completion_tokens, result.duration_ms, result.usage.cached, ok,
        )
        log.debug("llm.call", purpose=purpose, model=model, cached=result.usage.cached, ok=ok)
