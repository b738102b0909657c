"""The litestar application: lifespan (runtime, pipeline, ingest worker, MCP sessions), routes, errors, OpenAPI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager

import structlog
from litestar import Litestar, Router
from litestar.exceptions import NotFoundException
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, OpenAPI, OpenAPIMediaType, OpenAPIType, Schema, SecurityScheme
from litestar.routes import HTTPRoute

from ingest.render import LinesCache, PageCache
from kb import __version__
from kb.api.admin import AdminController
from kb.api.capabilities import CapabilitiesController
from kb.api.catalog import CatalogController, health
from kb.api.common import (
    DEPENDENCIES,
    LOOPBACK,
    before_request,
    body_limit,
    exception_handler,
    head_as_get_middleware,
    host_check_middleware,
    read_guard,
    request_id_middleware,
)
from kb.api.lifecycle import WorkerRunner, bound_hosts, warm_up, watch_embedder
from kb.api.mcp import http_session_manager, mcp_route
from kb.api.metrics import PROMETHEUS, MetricsController
from kb.api.pages import PagesController
from kb.api.query import QueryController
from kb.api.ui import OverviewController, SourceFileController, not_found_handler, ui_help, ui_root, ui_router
from kb.core.settings import ServerSettings, Settings, get_settings
from kb.mcp_server import Services, build_mcp_server
from kb.runtime import Runtime, build_ingest_context, open_runtime

log = structlog.get_logger("kb.app")



def openapi_config() -> OpenAPIConfig:
    """OpenAPI at /schema (behind the read guard) with the bearer security scheme."""
    bearer = SecurityScheme(type="http", scheme="bearer",
                            description="KB_ADMIN_TOKEN for admin endpoints, KB_API_TOKEN for reads")
    return OpenAPIConfig(
        title="kb — knowledge base with a document router", version=__version__,
        render_plugins=[SwaggerRenderPlugin()], components=Components(security_schemes={"bearer": bearer}),
        openapi_router=Router("/schema", guards=[read_guard], route_handlers=[], include_in_schema=False),
    )


def filter_value_schema() -> Schema:
    """What ``conditions_from_filters`` accepts as one filter's value: a scalar, a list, ``{"contains": …}``
    or numeric bounds (``{}`` and other objects are refused, so the schema refuses them too); the ``fact``
    key has its own form (``fact_filter``)."""
    number = Schema(any_of=[Schema(type=OpenAPIType.NUMBER),
                            Schema(type=OpenAPIType.STRING, pattern=r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")])
    bounds = ("gte", "lte", "gt", "lt")
    return Schema(any_of=[
        Schema(type=OpenAPIType.STRING), Schema(type=OpenAPIType.NUMBER), Schema(type=OpenAPIType.BOOLEAN),
        Schema(type=OpenAPIType.NULL), Schema(type=OpenAPIType.ARRAY),
        Schema(type=OpenAPIType.OBJECT, required=["contains"], description="{contains: text}"),
        Schema(type=OpenAPIType.OBJECT, properties={b: number for b in bounds},
               any_of=[Schema(required=[b]) for b in bounds], description="{gte, lte, gt, lt}: numbers"),
    ])


def adjust_openapi(schema: OpenAPI, server: ServerSettings) -> None:
    """Make the OpenAPI document say what this server really does.

    - Auth: without ``KB_API_TOKEN`` the read endpoints need none; without any token the admin endpoints
      need none (loopback peers only).
    - A query's ``filters``: the values the router accepts, not any JSON (``{}`` is not a filter).
    - ``POST /kb/query`` answers ``application/json`` (a ``QueryResult``) or, with ``stream: true``,
      ``text/event-stream``: two media types, not an ambiguous ``oneOf``.
    """
    request = (schema.components.schemas or {}).get("QueryRequest")
    filters = (request.properties or {}).get("filters") if request is not None else None
    if isinstance(filters, Schema):
        filters.property_names = Schema(pattern=r"^[A-Za-z0-9_.-]{1,64}$")  # router.store.METADATA_KEY
        filters.properties = {"fact": Schema(description='{"concept": …, "period": …, "gte": …}: a financial fact')}
        filters.additional_properties = filter_value_schema()
    top_docs = (request.properties or {}).get("top_docs") if request is not None else None
    for variant in getattr(top_docs, "one_of", None) or ():  # litestar drops constraints inside a union
        if getattr(variant, "type", None) == OpenAPIType.INTEGER:
            variant.minimum, variant.maximum = 1, 20
    for path, item in (schema.paths or {}).items():
        for method in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
            op = getattr(item, method, None)
            if op is None:
                continue
            if op.security:
                admin = "403" in (op.responses or {})
                needs_token = (server.admin_token or server.api_token) if admin else server.api_token
                if not needs_token:
                    op.security = None
            if path == "/kb/query" and method == "post":
                ok = (op.responses or {}).get("200")
                media = ok.content.get("application/json") if ok is not None and ok.content else None
                variants = getattr(getattr(media, "schema", None), "one_of", None)
                if media is not None and variants:
                    media.schema = variants[0]
                    ok.description = "The answer (JSON), or with `stream: true` server-sent events"
                    ok.content["text/event-stream"] = OpenAPIMediaType(
                        schema=Schema(description="events: routing, nodes, answer (deltas), citations, done"))


async def announce(configured_host: str, server: ServerSettings) -> None:
    """Once the server listens: where (the real bind address, also when uvicorn was started by hand with
    another ``--host``) and, without an admin token, what that means for the admin endpoints."""
    hosts = await bound_hosts(configured_host)
    loopback = all(h in LOOPBACK or h.startswith("127.") for h in hosts)
    log.info("server.listening", host=",".join(hosts), loopback=loopback)
    if not server.admin_token:
        detail = ("admin endpoints disabled (403): KB_API_TOKEN is set without KB_ADMIN_TOKEN"
                  if server.api_token else "admin API (ingest, delete) open to this machine only: loopback "
                  "clients and this server's own web UI; set KB_ADMIN_TOKEN to require a token and allow other hosts")
        log.warning("auth.no_admin_token", detail=detail, host=",".join(hosts), loopback=loopback)


def fix_options_allow(app: Litestar) -> None:
    """litestar (2.25) builds a path's automatic OPTIONS handler when the path's first handler is added,
    so its ``Allow`` misses methods added later (``DELETE /kb/documents/{id}``): point it at the final
    method set."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if handler.http_methods == {"OPTIONS"}:
                for cell in getattr(handler.fn, "__closure__", None) or ():
                    if isinstance(cell.cell_contents, HTTPRoute) and cell.cell_contents is not route:
                        cell.cell_contents.methods = route.methods


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
        server = rt.settings.server
        app.state.pages = PageCache(rt.settings.database.data_dir / "pages", server.page_cache_mb * 1024 * 1024)
        app.state.lines = LinesCache(server.lines_cache_mb * 1024 * 1024)
        adjust_openapi(app.openapi_schema, rt.settings.server)
        services.runtime, services.pipeline = rt, rt.pipeline
        app.state.embedder_problem = None
        stop = asyncio.Event()
        ctx = build_ingest_context(rt) if (run_worker if run_worker is not None else settings.ingest.run_worker) else None
        app.state.worker = runner = WorkerRunner(ctx, settings.ingest.job_stale_s)

        def embedder_problem(reason: str | None) -> None:
            app.state.embedder_problem = reason
            if reason:  # its vectors would not fit the re-embedded store: leave the queue to others
                runner.pause(reason)
            else:  # the stored vectors are this server's (again): ingest at their generation
                if ctx is not None:
                    ctx.embedder_generation = rt.embedder_record.generation
                runner.start()

        watchdog = asyncio.create_task(rt.watch_database(stop))
        watchers = [asyncio.create_task(watch_embedder(rt, embedder_problem, stop)),
                    asyncio.create_task(announce(host, settings.server))]
        runner.start()
        await warm_up(rt, settings.server.warmup_s)
        if on_ready is not None:
            on_ready()
        try:
            async with mcp_manager.run():
                yield
        finally:
            stop.set()
            await watchdog
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            await runner.close()  # its file is handed back
            if ctx is not None:
                ctx.close()
            app.state.lines.close()
            if runtime is None:
                await rt.close()

    app = Litestar(
        route_handlers=[health, CatalogController, CapabilitiesController, PagesController, QueryController,
                        AdminController, MetricsController, mcp_route(mcp_manager), ui_root, ui_help, ui_router(),
                        SourceFileController, OverviewController],
        lifespan=[lifespan],
        dependencies=DEPENDENCIES,
        exception_handlers={NotFoundException: not_found_handler, Exception: exception_handler},
        middleware=[request_id_middleware,
                    DefineMiddleware(host_check_middleware, bound_host=host),
                    DefineMiddleware(body_limit, json_bytes=settings.server.max_json_kb * 1024,
                                     upload_bytes=settings.ingest.max_upload_mb * 1024 * 1024,
                                     upload_paths=frozenset({"/kb/admin/documents"}),
                                     timeout_s=settings.server.body_timeout_s),
                    PROMETHEUS.middleware],
        before_request=before_request,
        openapi_config=openapi_config(),
        request_max_body_size=max(settings.ingest.max_upload_mb * 1024 * 1024, settings.server.max_json_kb * 1024),
        debug=False,
    )
    fix_options_allow(app)
    app.asgi_handler = head_as_get_middleware(app.asgi_handler)  # before routing: a HEAD finds the GET route
    return app
