"""The composition root: settings, pool and providers (``Runtime``), and the query pipeline and ingest
context built from them. The API (through litestar dependency injection), the CLI, the ingest worker, MCP
and the benchmarks all get their parts here; nothing else wires them together."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import asyncpg
import structlog

from ingest.embedding import CachedEmbedder
from ingest.pipeline import IngestContext, make_executor
from ingest.reembed import convert_vector_type
from ingest.reindex import ensure_tokens
from ingest.render import PageCache
from kb.core.cpu import CpuBudget, cpu_budget
from kb.core.db import (
    ReadPools,
    create_pool,
    migrate,
    open_read_pools,
    resolve_database_url,
    restart_embedded_if_down,
)
from kb.core.embedder_record import EmbedderRecord, ensure_embedder, recorded_model
from kb.core.errors import OverloadedError
from kb.core.llm_store import PgLLMStore
from kb.core.providers import ChatModel, Embedder, get_chat_model, get_embedder, get_reranker
from kb.core.settings import Settings, get_settings
from kb.core.telemetry import observe_query
from router.pipeline import QueryPipeline, ReplicaPipeline

log = structlog.get_logger("kb.runtime")


class QueryGate:
    """At most ``limit`` questions answered at once in this process; the others wait their turn in order (first
    come, first served: under load every question waits about as long, instead of each taking as long as the
    number of questions sharing the cores allows — a heavy one several times longer). One that waited ``wait_s``
    gets ``OverloadedError`` (503 with Retry-After); 0 waits without limit. While a question waits or is
    answered, the process is marked serving in the machine's CPU budget (``budget``): ingest leaves it a core."""

    def __init__(self, limit: int, wait_s: float, budget: CpuBudget | None = None) -> None:
        self.limit = max(1, limit)
        self.wait_s = wait_s
        self.budget = budget
        self._slots = asyncio.Semaphore(self.limit)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        with self.budget.serving() if self.budget is not None else contextlib.nullcontext():
            try:
                async with asyncio.timeout(self.wait_s if self.wait_s > 0 else None):
                    await self._slots.acquire()
            except TimeoutError:
                raise OverloadedError(f"the server is busy: this question waited {self.wait_s:g} s for its turn "
                                      "(KB_QUERY_QUEUE_S); retry shortly") from None
            try:
                yield
            finally:
                self._slots.release()


@dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    embedder: Embedder
    chat: ChatModel
    database_url: str
    embedder_record: EmbedderRecord  # what the stored vectors came from when this process started
    db_available: bool = True  # kept by watch_database: False while the database is unreachable
    read_pools: ReadPools | None = None  # KB_DATABASE_READ_URLS: the query path's replicas (None: the primary)
    _pipeline: QueryPipeline | None = field(default=None, init=False, repr=False)
    _gate: QueryGate | None = field(default=None, init=False, repr=False)

    @property
    def query_gate(self) -> QueryGate:
        """The turns of the questions the API and MCP answer (``KB_QUERY_CONCURRENCY``)."""
        if self._gate is None:
            server = self.settings.server
            limit = server.query_concurrency or (4 if self.chat.offline else 32)
            ingest = self.settings.ingest
            self._gate = QueryGate(limit, server.query_queue_s, cpu_budget(ingest.cpu_cores, ingest.cpu_dir))
        return self._gate

    @property
    def pipeline(self) -> QueryPipeline:
        """The query pipeline the API and MCP serve (built once)."""
        if self._pipeline is None:
            self._pipeline = build_pipeline(self)
        return self._pipeline

    @property
    def page_cache(self) -> PageCache:
        """Rendered page previews under ``KB_DATA_DIR/pages``."""
        return PageCache(self.settings.database.data_dir / "pages")

    async def close(self) -> None:
        if self.read_pools is not None:
            await self.read_pools.close()
        await self.pool.close()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def probe_database(self, timeout_s: float = 2.0) -> bool:
        """``SELECT 1`` within ``timeout_s``; a frozen server is not waited for (the probe is left to its
        own statement timeout)."""
        probe = asyncio.ensure_future(self.pool.fetchval("SELECT 1"))
        done, _ = await asyncio.wait({probe}, timeout=timeout_s)
        if not done:
            probe.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: never "never retrieved"
            return False
        return probe.exception() is None

    async def watch_database(self, stop: asyncio.Event, interval_s: float = 2.0) -> None:
        """While the process runs, probe the database every ``interval_s``: ``db_available`` lets requests
        fail fast (503) while it is unreachable, and an embedded Postgres that died is started again (its
        owner is whoever uses it); the pool reconnects once it is back."""
        embedded = self.settings.database.url is None
        data_dir = self.settings.database.data_dir
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
                return
            except TimeoutError:
                pass
            try:
                if embedded and await asyncio.to_thread(restart_embedded_if_down, data_dir):
                    self.pool.expire_connections()
                ok = await self.probe_database()
            except Exception as exc:  # noqa: BLE001 - keep watching; the next round tries again
                log.error("db.watch_failed", error=str(exc))
                ok = False
            if ok != self.db_available:
                (log.info if ok else log.warning)("db.available" if ok else "db.unavailable")
                self.db_available = ok


class OpeningRuntime:
    """What ``open_runtime()`` returns: ``await`` it for a runtime the caller closes, or ``async with`` it for
    one closed when the block ends."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._runtime: Runtime | None = None

    def __await__(self) -> Generator[Any, None, Runtime]:
        return _open_runtime(**self._kwargs).__await__()

    async def __aenter__(self) -> Runtime:
        self._runtime = await _open_runtime(**self._kwargs)
        return self._runtime

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._runtime is not None:
            await self._runtime.close()


def open_runtime(settings: Settings | None = None, *, embedder: Embedder | None = None,
                 chat: ChatModel | None = None, allow_embedder_change: bool = False) -> OpeningRuntime:
    """Resolve the database (embedded if needed), migrate, load the embedder and the chat model:
    ``rt = await open_runtime()`` (the caller closes it) or ``async with open_runtime() as rt:``.

    An embedder other than the one the stored vectors come from is refused (``EmbedderMismatchError``)
    unless ``allow_embedder_change`` (``kb reembed``).
    """
    return OpeningRuntime(settings=settings, embedder=embedder, chat=chat, allow_embedder_change=allow_embedder_change)


_READY_SAID: list[bool] = []


async def _open_runtime(settings: Settings | None, embedder: Embedder | None, chat: ChatModel | None,
                        allow_embedder_change: bool) -> Runtime:
    settings = settings or get_settings()
    url = await asyncio.to_thread(resolve_database_url, settings.database)
    db = settings.database
    pool = await create_pool(url, min_size=db.pool_min, max_size=db.pool_max, connect_timeout=db.connect_timeout_s,
                             command_timeout=db.command_timeout_s)
    try:
        emb = embedder or await asyncio.to_thread(get_embedder, settings, recorded=await recorded_model(pool))
        await migrate(pool, embedding_dim=emb.dimension)
        record = await ensure_embedder(pool, emb.model_id, emb.dimension, allow_change=allow_embedder_change)
        await ensure_tokens(pool)  # chunks stored before the tokens column / by an older tokenizer (issue 23)
        await convert_vector_type(pool, db.vector_type)  # KB_VECTOR_TYPE changed: retype, rebuild the index
        reads = await open_read_pools(pool, db.replica_urls, max_lag_s=db.read_max_lag_s, check_s=db.read_check_s,
                                      pool_max=db.pool_max, connect_timeout=db.connect_timeout_s,
                                      command_timeout=db.command_timeout_s) if db.replica_urls else None
    except BaseException:
        await pool.close()
        raise
    model = chat or get_chat_model(settings, store=PgLLMStore(pool))
    (log.debug if _READY_SAID else log.info)("runtime.ready", embedder=emb.model_id, chat=model.model_id,
                                             embedded_db=settings.database.url is None)
    _READY_SAID.append(True)  # once per process at info: `kb serve` opens a runtime to check, then its own
    return Runtime(settings=settings, pool=pool, embedder=emb, chat=model, database_url=url,
                   embedder_record=record, read_pools=reads)


def build_pipeline(rt: Runtime) -> QueryPipeline:
    """A query pipeline over the runtime's pool (its reads on the replicas when there are) and providers (the
    API's is ``rt.pipeline``)."""
    if rt.read_pools is not None:  # ReadPools has the reads the router calls
        return ReplicaPipeline(rt.read_pools, rt.embedder, rt.chat, rt.settings.retrieval,  # type: ignore[arg-type]
                               reranker=get_reranker(rt.settings), observe=observe_query)
    return QueryPipeline(rt.pool, rt.embedder, rt.chat, rt.settings.retrieval, reranker=get_reranker(rt.settings),
                         observe=observe_query)


def build_ingest_context(rt: Runtime, *, processes: bool = True) -> IngestContext:
    """An ingest context (embedding cache, chat, settings; a pool of ``KB_INGEST_WORKERS`` parser processes
    when ``processes``). It owns that pool: use it as ``with build_ingest_context(rt) as ctx:`` (or call
    ``ctx.close()``)."""
    s = rt.settings.ingest
    cached = CachedEmbedder(rt.pool, rt.embedder, batch=rt.settings.embedding.batch_size, background=True)
    return IngestContext(pool=rt.pool, embedder=cached, chat=rt.chat, settings=s,
                         executor=make_executor(s.workers, s.nice) if processes else None,
                         embedder_generation=rt.embedder_record.generation,
                         budget=cpu_budget(s.cpu_cores, s.cpu_dir))
