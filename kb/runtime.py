"""The process-wide runtime: settings, pool, providers. Opened once by the API, CLI or worker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncpg
import structlog

from kb.db import create_pool, migrate, resolve_database_url
from kb.embedder_record import EmbedderRecord, ensure_embedder
from kb.llm_store import PgLLMStore
from kb.providers import ChatModel, Embedder, get_chat_model, get_embedder
from kb.settings import Settings, get_settings

log = structlog.get_logger("kb.runtime")


@dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    embedder: Embedder
    chat: ChatModel
    database_url: str
    embedder_record: EmbedderRecord  # what the stored vectors came from when this process started

    async def close(self) -> None:
        await self.pool.close()


async def open_runtime(settings: Settings | None = None, *, embedder: Embedder | None = None,
                       chat: ChatModel | None = None, allow_embedder_change: bool = False) -> Runtime:
    """Resolve the database (embedded if needed), migrate, load the embedder and the chat model.

    An embedder other than the one the stored vectors come from is refused (``EmbedderMismatchError``)
    unless ``allow_embedder_change`` (``kb reembed``).
    """
    settings = settings or get_settings()
    url = await asyncio.to_thread(resolve_database_url, settings.database)
    emb = embedder or await asyncio.to_thread(get_embedder, settings)
    pool = await create_pool(url, min_size=settings.database.pool_min, max_size=settings.database.pool_max)
    try:
        await migrate(pool, embedding_dim=emb.dimension)
        record = await ensure_embedder(pool, emb.model_id, emb.dimension, allow_change=allow_embedder_change)
    except BaseException:
        await pool.close()
        raise
    model = chat or get_chat_model(settings, store=PgLLMStore(pool))
    log.info("runtime.ready", embedder=emb.model_id, chat=model.model_id, embedded_db=settings.database.url is None)
    return Runtime(settings=settings, pool=pool, embedder=emb, chat=model, database_url=url,
                   embedder_record=record)
