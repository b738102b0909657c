"""The litestar application: lifespan (runtime, pipeline, ingest worker, MCP sessions), routes, errors, OpenAPI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager

import structlog
from litestar import Litestar, Router
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

from ingest.embedding import CachedEmbedder
from ingest.jobs import Worker, make_executor, stop_executor
from ingest.pipeline import IngestContext
from kb import __version__
from kb.api.admin import AdminController
from kb.api.catalog import CatalogController, health
from kb.api.common import (
    LOOPBACK,
    before_request,
    body_limit,
    exception_handler,
    read_guard,
    request_id_middleware,
)
from kb.api.mcp import http_session_manager, mcp_route
from kb.api.metrics import PROMETHEUS, MetricsController
from kb.api.pages import PagesController
from kb.api.query import QueryController
from kb.api.ui import ui_root, ui_router
from kb.mcp_server import Services, build_mcp_server
from kb.providers import get_reranker
from kb.runtime import Runtime, open_runtime
from kb.settings import Settings, get_settings
from router.pipeline import QueryPipeline

log = structlog.get_logger("kb.app")


def build_ingest_context(rt: Runtime, *, processes: bool = True) -> IngestContext:
    s = rt.settings.ingest
    return IngestContext(pool=rt.pool, embedder=CachedEmbedder(rt.pool, rt.embedder), chat=rt.chat, settings=s,
                         executor=make_executor(s.workers) if processes else None,
                         embedder_generation=rt.embedder_record.generation)


def build_pipeline(rt: Runtime) -> QueryPipeline:
    return QueryPipeline(rt.pool, rt.embedder, rt.chat, rt.settings.retrieval, reranker=get_reranker(rt.settings))


def openapi_config() -> OpenAPIConfig:
    """OpenAPI at /schema (behind the read guard) with the bearer security scheme."""
    bearer = SecurityScheme(type="http", scheme="bearer",
                            description="KB_ADMIN_TOKEN for admin endpoints, KB_API_TOKEN for reads")
    return OpenAPIConfig(
        title="kb — knowledge base with a document router", version=__version__,
        render_plugins=[SwaggerRenderPlugin()], components=Components(security_schemes={"bearer": bearer}),
        openapi_router=Router("/schema", guards=[read_guard], route_handlers=[], include_in_schema=False),
    )


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None,
               bound_host: str | None = None, run_worker: bool | None = None,
               on_ready: Callable[[], None] | None = None) -> Litestar:
    """Build the app. ``runtime`` may be injected (tests); otherwise it is opened at start-up."""
    settings = settings or (runtime.settings if runtime else get_settings())
    host = bound_host or settings.server.host
    services = Services()  # the MCP tools' view of the runtime, filled in the lifespan
    mcp_manager = http_session_manager(build_mcp_server(services), host)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncGenerator[None, None]:
        rt = runtime or await open_runtime(settings)
        app.state.runtime = rt
        app.state.pipeline = build_pipeline(rt)
        services.runtime, services.pipeline = rt, app.state.pipeline
        if not settings.server.admin_token:
            detail = ("admin endpoints disabled (403): KB_API_TOKEN is set without KB_ADMIN_TOKEN"
                      if settings.server.api_token else "admin endpoints open to loopback peers only (not browsers)")
            log.warning("auth.no_admin_token", detail=detail, host=host, loopback=host in LOOPBACK)
        stop = asyncio.Event()
        watchdog = asyncio.create_task(rt.watch_database(stop))
        worker_task = None
        ctx = None
        if run_worker if run_worker is not None else settings.ingest.run_worker:
            ctx = build_ingest_context(rt)
            worker = Worker(ctx, concurrency=1, stale_s=settings.ingest.job_stale_s)
            worker_task = asyncio.create_task(worker.run(stop))
            log.info("worker.started", worker=worker.name)
        if on_ready is not None:
            on_ready()
        try:
            async with mcp_manager.run():
                yield
        finally:
            stop.set()
            await watchdog
            if worker_task is not None:
                try:
                    await asyncio.wait_for(worker_task, timeout=5)
                except TimeoutError:
                    worker_task.cancel()
            if ctx is not None and ctx.executor is not None:
                stop_executor(ctx.executor)
            if runtime is None:
                await rt.close()

    return Litestar(
        route_handlers=[health, CatalogController, PagesController, QueryController, AdminController,
                        MetricsController, mcp_route(mcp_manager), ui_root, ui_router()],
        lifespan=[lifespan],
        exception_handlers={Exception: exception_handler},
        middleware=[request_id_middleware,
                    DefineMiddleware(body_limit, json_bytes=settings.server.max_json_kb * 1024,
                                     upload_bytes=settings.ingest.max_upload_mb * 1024 * 1024,
                                     upload_paths=frozenset({"/kb/admin/documents"})),
                    PROMETHEUS.middleware],
        before_request=before_request,
        openapi_config=openapi_config(),
        request_max_body_size=max(settings.ingest.max_upload_mb * 1024 * 1024, settings.server.max_json_kb * 1024),
        debug=False,
    )
