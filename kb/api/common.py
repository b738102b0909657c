"""Shared API pieces: problem-details errors, auth guards, request-id middleware, state access."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import math
import re
import time
import uuid
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
import structlog
from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.exceptions import (
    ClientException,
    HTTPException,
    NotAuthorizedException,
    PermissionDeniedException,
)
from litestar.exceptions import ValidationException as LitestarValidation
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ingest.render import LinesCache, PageCache
from kb.core.db import is_db_unavailable
from kb.core.errors import (
    AuthError,
    ForbiddenError,
    KBError,
    OverloadedError,
    UnavailableError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from kb.core.logging import requests_at_info
from kb.core.settings import Settings
from kb.runtime import Runtime
from router.pipeline import QueryPipeline

log = structlog.get_logger("kb.api")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")


class Problem(msgspec.Struct, frozen=True):
    """Problem details (RFC 9457): the body of every error response."""

    type: str
    status: int
    title: str
    detail: str


PROBLEM_JSON = "application/problem+json"
_ERRORS = {
    400: "Invalid request (malformed JSON, wrong type or value)",
    401: "Missing or invalid bearer token",
    403: "Admin access refused (no KB_ADMIN_TOKEN and not a local, non-browser request)",
    404: "Not found",
    409: "Conflict",
    408: "The request body did not arrive in time (KB_BODY_TIMEOUT_S)",
    413: "Request body too large (KB_MAX_JSON_KB; uploads: KB_MAX_UPLOAD_MB)",
    415: "Content-Type must be application/json",
    503: "The database is unreachable right now (Retry-After)",
}
COLLECTION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # the collections table's CHECK
DbId = Annotated[int, Parameter(ge=1, le=2**53, description="a database id")]  # exact as a JSON number
CollectionParam = Annotated[str, Parameter(pattern=COLLECTION_NAME, description="collection name")]
RETRY_AFTER_S = 5  # the Retry-After of a 503 while the database is unreachable
BEARER = [{"bearer": []}]  # the OpenAPI security requirement of every guarded controller


def errors(*codes: int) -> dict[int, ResponseSpec]:
    """OpenAPI documentation of a handler's error responses, as problem details (503 for all: the database
    may be unreachable)."""
    return {c: ResponseSpec(data_container=Problem, media_type=PROBLEM_JSON, description=_ERRORS[c],
                            generate_examples=False) for c in sorted({*codes, 503})}


def runtime(request: ASGIConnection[Any, Any, Any, Any]) -> Runtime:
    """The runtime, for guards and middleware (handlers get it injected: ``DEPENDENCIES``)."""
    return request.app.state.runtime


def _provide_runtime(state: State) -> Runtime:
    return state.runtime


def _provide_pipeline(state: State) -> QueryPipeline:
    return state.runtime.pipeline


def _provide_pages(state: State) -> PageCache:
    return state.pages


def _provide_lines(state: State) -> LinesCache:
    return state.lines


DEPENDENCIES = {"rt": Provide(_provide_runtime, sync_to_thread=False),
                "pipeline": Provide(_provide_pipeline, sync_to_thread=False),
                "pages": Provide(_provide_pages, sync_to_thread=False),
                "lines": Provide(_provide_lines, sync_to_thread=False)}
"""What handlers are given by name: ``rt`` (the runtime: pool, settings, providers), ``pipeline`` (the query
pipeline), ``pages`` (the rendered-page cache) and ``lines`` (parsed text sources); the lifespan puts them on
``app.state``."""


def problem_body(status: int, title: str, detail: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Problem details (RFC 9457) as a dict; ``extra`` members after the standard ones, which they never
    replace (a health body's own ``status: "unavailable"`` must not hide ``status: 503``)."""
    standard = {"type": "about:blank", "status": status, "title": title, "detail": detail}
    return {**standard, **{k: v for k, v in (extra or {}).items() if k not in standard}}


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    return Response(
        content=problem_body(status, title, detail),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def _path_roots(settings: Settings) -> list[tuple[Path, str]]:
    """Folders whose absolute location stays private: (folder, how it is shown), most specific first."""
    roots = [(settings.database.data_dir / "uploads", "uploads"), (settings.ingest.root, ".")]
    return sorted(roots, key=lambda r: len(r[0].parts), reverse=True)


def public_path(path: str, settings: Settings) -> str:
    """A server path as API output shows it: relative to KB_INGEST_ROOT or ``uploads/…``; else its name."""
    p = Path(path)
    for root, shown in _path_roots(settings):
        if p == root or root in p.parents:
            rel = p.relative_to(root).as_posix()
            return rel if shown == "." else f"{shown}/{rel}".removesuffix("/.")
    return p.name


def scrub_paths(text: str, settings: Settings) -> str:
    """Free text (errors) with the ingest root and the data folder no longer spelled out."""
    for root, shown in [*_path_roots(settings), (settings.database.data_dir, "<data>")]:
        if len(root.parts) <= 1:  # "/" itself: nothing private to hide, and replacing it would garble the text
            continue
        prefix = "" if shown == "." else f"{shown}/"
        text = re.sub(re.escape(str(root)) + r"(/|(?![\w.-]))",
                      lambda m, prefix=prefix, shown=shown: prefix if m.group(1) else shown, text)
    return text


def _settings_of(request: ASGIConnection[Any, Any, Any, Any]) -> Settings | None:
    rt = request.app.state.get("runtime")
    return rt.settings if rt is not None else None


class _Throttled:
    """One warning per ``interval_s`` for the 503s of an outage (each request of it gets one), with the number
    of them since the last line: thousands of requests during a short outage are a few log lines, not thousands."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self.interval_s = interval_s
        self._last = -math.inf
        self._since = 0

    def say(self, exc: UnavailableError, cause: str = "") -> None:
        self._since += 1
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            event = "api.overloaded" if isinstance(exc, OverloadedError) else "api.unavailable"
            log.warning(event, reason=exc.detail, cause=cause or None, requests=self._since)
            self._last, self._since = now, 0


UNAVAILABLE_LOG = _Throttled()


def logged_path(path: str, limit: int = 300) -> str:
    """A request path as the log may print it: control characters (an escape byte, a NUL) escaped, and cut."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in path[:limit])


def unavailable(rt: Runtime | None, exc: BaseException) -> UnavailableError | None:
    """The 503 an exception means: overloaded when a wait ran out (a pool slot, a connection, a statement) while
    the runtime sees the database up; unreachable when the database is gone; None for anything else."""
    if isinstance(exc, TimeoutError | asyncpg.QueryCanceledError) and (rt is None or rt.db_available):
        return OverloadedError()
    return UnavailableError() if db_unreachable(exc) else None


def db_unreachable(exc: BaseException) -> bool:
    """``kb.core.db.is_db_unavailable``, and asyncpg's "cannot switch to state" of a connection whose server was
    killed in the middle of a statement (a 503 to retry, not a 500)."""
    return is_db_unavailable(exc) or (isinstance(exc, asyncpg.InternalClientError)
                                      and "cannot switch to state" in str(exc))


def exception_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """The one handler: KBError → its status; framework errors → their status; anything else → 500."""
    if isinstance(exc, KBError):
        if isinstance(exc, UnavailableError):  # expected while the database is down: said once per interval
            UNAVAILABLE_LOG.say(exc)
        elif exc.status_code >= 500:
            log.error("api.error", error=exc.detail, kind=type(exc).__name__)
        settings = _settings_of(request)
        headers = {"WWW-Authenticate": 'Bearer realm="kb"'} if isinstance(exc, AuthError) else None
        if exc.status_code == 503:
            headers = {"Retry-After": str(RETRY_AFTER_S)}
        return problem(exc.status_code, exc.title, scrub_paths(exc.detail, settings) if settings else exc.detail,
                       headers)
    if (down := unavailable(request.app.state.get("runtime"), exc)) is not None:
        UNAVAILABLE_LOG.say(down, cause=f"{type(exc).__name__}: {exc}"[:300])
        return problem(down.status_code, down.title, down.detail, {"Retry-After": str(RETRY_AFTER_S)})
    if isinstance(exc, UnicodeDecodeError):
        return problem(400, "Invalid request", "the request is not valid UTF-8")
    if isinstance(exc, asyncpg.DataError | OverflowError):  # e.g. an id beyond bigint, bad encoding
        return problem(400, "Invalid request", f"invalid value: {str(exc).splitlines()[0][:200]}")
    if isinstance(exc, LitestarValidation):
        detail = exc.detail
        if exc.extra:
            detail = f"{detail}: {exc.extra}"
        return problem(400, "Invalid request", str(detail))
    if isinstance(exc, HTTPException):  # its headers (e.g. Allow on a 405) are kept
        return problem(exc.status_code, exc.__class__.__name__.replace("Exception", "") or "Error", str(exc.detail),
                       dict(exc.headers or {}))
    log.exception("api.unhandled", path=logged_path(request.url.path))
    return problem(500, "Internal error", "an unexpected error occurred; see the server log for the request id")


def _bearer(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _check(expected: str, given: str | None) -> None:
    if given is None:
        raise AuthError("missing bearer token (Authorization: Bearer <token>)")
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise AuthError("invalid token")


def _ip_is_loopback(value: str) -> bool:
    try:
        ip = ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def _host_is_loopback(host: str) -> bool:
    """A ``Host`` header value (port allowed) that names this machine's loopback interface."""
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:8000
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    return name == "localhost" or _ip_is_loopback(name)


def _expects_json(handler: BaseRouteHandler) -> bool:
    data = handler.parsed_fn_signature.parameters.get("data")
    if data is None:
        return False
    media = getattr(data.kwarg_definition, "media_type", None)
    return media is None or media == RequestEncodingType.JSON


def _refuse_browser(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Token-less admin access is for local tools, not web pages: refuse what a browser could forge
    (CSRF, DNS rebinding) and requests relayed by a proxy."""
    headers = connection.headers
    if any(h in headers for h in _PROXY_HEADERS):
        raise ForbiddenError("proxied request refused: set KB_ADMIN_TOKEN to use admin endpoints through a proxy")
    host = headers.get("host", "")
    if not _host_is_loopback(host):
        raise ForbiddenError("Host header is not a loopback name; set KB_ADMIN_TOKEN for remote admin access")
    origin = headers.get("origin")
    if origin is not None:
        parsed = urlsplit(origin)
        if (parsed.scheme, parsed.netloc.lower()) != (connection.url.scheme, host.lower()):
            raise ForbiddenError("cross-origin request refused (Origin is not this server)")
    if _expects_json(handler):
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            raise UnsupportedMediaTypeError("Content-Type must be application/json")


def admin_guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """The one admin check, for ``/kb/admin/*`` and every mutating endpoint.

    With ``KB_ADMIN_TOKEN``: that bearer token (the read token never grants admin). Without it: refused
    when ``KB_API_TOKEN`` is set; otherwise allowed only from a loopback *peer address* and never for a
    browser-style or proxied request.
    """
    server = runtime(connection).settings.server
    if server.admin_token:
        _check(server.admin_token, _bearer(connection))
        return
    if server.api_token:
        raise ForbiddenError("admin endpoints are disabled: KB_API_TOKEN is set without KB_ADMIN_TOKEN")
    client = connection.scope.get("client")
    if not client or not _ip_is_loopback(str(client[0])):
        raise ForbiddenError("admin endpoints are open to loopback clients only: set KB_ADMIN_TOKEN")
    _refuse_browser(connection, handler)


def read_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Read endpoints: KB_API_TOKEN when configured (the admin token is accepted too)."""
    server = runtime(connection).settings.server
    if not server.api_token:
        return
    given = _bearer(connection)
    if given and server.admin_token and hmac.compare_digest(server.admin_token.encode(), given.encode()):
        return
    _check(server.api_token, given)


__all__ = ["NotAuthorizedException", "PermissionDeniedException", "admin_guard", "read_guard"]


_NO_DATABASE = ("/health", "/metrics", "/schema", "/kb/capabilities")


def unavailable_reason(state: State, path: str) -> str | None:
    """Why a request to ``path`` gets a 503 at once: the database is known to be unreachable, or the stored
    vectors now come from another embedder (``kb reembed`` since this process started); None: neither."""
    rt = state.get("runtime")
    if rt is None or path.startswith(_NO_DATABASE):
        return None
    if not rt.db_available:
        return UnavailableError().detail
    return state.get("embedder_problem")


async def before_request(request: Request[Any, Any, Any]) -> None:
    """Every request: a 503 at once while the database is known to be unreachable (or the embedder record
    changed under this process), then the strict body check."""
    reason = unavailable_reason(request.app.state, request.url.path)
    if reason is not None:
        raise UnavailableError(reason)
    await strict_json_body(request)


async def strict_json_body(request: Request[Any, Any, Any]) -> None:
    """``before_request``: a JSON body must match the handler's type without coercion
    (``"top_k": "5"`` or ``"recursive": 0`` is a 400, not 5 or false)."""
    handler = request.route_handler
    if not _expects_json(handler):
        return
    annotation = handler.parsed_fn_signature.parameters["data"].annotation
    body = await request.body()
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"the body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        msgspec.json.decode(body, type=annotation)
    except msgspec.ValidationError as exc:
        raise ValidationError(str(exc)) from exc
    except RecursionError as exc:
        raise ValidationError("the JSON body is nested too deeply") from exc
    except msgspec.DecodeError as exc:
        raise ValidationError(f"malformed JSON: {exc}") from exc


REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""An incoming ``X-Request-ID`` is kept only in this form; anything else (escape sequences that would reach an
operator's terminal, spaces, longer ids) is replaced by a new id."""


def request_id_middleware(app: ASGIApp) -> ASGIApp:
    """Bind a request id (incoming ``X-Request-ID`` of a safe form, or new) to the log context; return it; log
    duration."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        rid = headers.get(b"x-request-id", b"").decode("latin-1")
        if not REQUEST_ID.fullmatch(rid):
            rid = uuid.uuid4().hex[:16]
        started = time.perf_counter()
        status = {"code": 0}
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=rid)

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode("latin-1"))]
            await send(message)

        try:
            await app(scope, receive, send_wrapper)
        finally:
            (log.info if requests_at_info() else log.debug)(
                "http.request", method=scope.get("method"), path=scope.get("path"), status=status["code"],
                duration_ms=round((time.perf_counter() - started) * 1000, 1))
            structlog.contextvars.clear_contextvars()

    return middleware


def head_as_get_middleware(app: ASGIApp) -> ASGIApp:
    """``HEAD`` answered as the ``GET`` of the same address would be, headers only (RFC 9110 §9.3.2; it was a
    405 everywhere): monitors and link checkers use it."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # the body is not sent; its last (empty) message ends the response
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await app({**scope, "method": "GET"}, receive, headers_only)

    return middleware


def _host_name(host: str) -> str:
    """The name of a ``Host`` header value, without its port (``[::1]:8000`` → ``::1``)."""
    name = host.strip().lower()
    if name.startswith("["):
        return name[1 : name.find("]")] if "]" in name else name
    return name.rsplit(":", 1)[0] if name.count(":") == 1 else name


def host_allowed(host: str, bound_host: str, allowed: str) -> bool:
    """Whether a ``Host`` header names this server: an IP address (a page on another site cannot make a
    browser send one for its own origin: DNS rebinding needs a name), ``localhost`` (and ``*.localhost``),
    the bound host, or a name of ``KB_ALLOWED_HOSTS`` (``*``: any; ``.example.org``: it and its subdomains)."""
    name = _host_name(host).rstrip(".")
    if not name:
        return True  # no Host header (HTTP/1.0): not a browser
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    if name == "localhost" or name.endswith(".localhost") or name == bound_host.lower():
        return True
    for entry in (e.strip().lower() for e in allowed.split(",")):
        if entry == "*" or entry == name or (entry.startswith(".") and (name == entry[1:] or name.endswith(entry))):
            return True
    return False


def host_check_middleware(app: ASGIApp, *, bound_host: str) -> ASGIApp:
    """Every route: a request whose ``Host`` is not a name of this server gets a 421 (DNS rebinding: a page on
    another site whose name now points here would read the knowledge base), unless ``KB_API_TOKEN`` guards
    the reads (such a page cannot send the token)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        rt = scope["litestar_app"].state.get("runtime")
        server = rt.settings.server if rt is not None else None
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if server is not None and not server.api_token and not host_allowed(host, bound_host, server.allowed_hosts):
            log.warning("http.host_refused", host=host[:100], path=scope.get("path"))
            body = problem_bytes(421, "Misdirected request",
                                 f"Host {host[:100]!r} is not a name of this server (DNS rebinding protection); "
                                 "list it in KB_ALLOWED_HOSTS, or set KB_API_TOKEN")
            await send({"type": "http.response.start", "status": 421,
                        "headers": [(b"content-type", PROBLEM_JSON.encode()),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return middleware


def problem_bytes(status: int, title: str, detail: str) -> bytes:
    """Problem details as JSON bytes, for responses written below the framework (raw ASGI, the protocol)."""
    return msgspec.json.encode(problem_body(status, title, detail))


def body_limit(app: ASGIApp, *, json_bytes: int, upload_bytes: int, upload_paths: frozenset[str],
               timeout_s: float = 30.0) -> ASGIApp:
    """Per-endpoint request body limits: uploads get ``KB_MAX_UPLOAD_MB``, every other endpoint
    ``KB_MAX_JSON_KB``. A declared ``Content-Length`` over the limit is refused before the body is read;
    a chunked body is counted as it arrives. A body is read in time (``KB_BODY_TIMEOUT_S``): an upload may
    pause at most that long between two pieces, any other body must be complete within it; otherwise a 408
    and the connection is closed (a slow body cannot hold a connection for ever)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        upload = scope.get("path") in upload_paths
        limit = upload_bytes if upload else json_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            body = problem_bytes(413, "Request body too large", f"the body exceeds {limit} bytes for this endpoint")
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", PROBLEM_JSON.encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        received = 0
        deadline: float | None = None
        body_done = False

        async def limited() -> Message:
            nonlocal received, deadline, body_done
            if body_done:  # e.g. waiting for a disconnect while a response streams: no limit
                return await receive()
            now = time.monotonic()
            if deadline is None or upload:
                deadline = now + timeout_s
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - now))
            except TimeoutError:
                log.info("http.body_timeout", path=scope.get("path"), received=received)
                raise ClientException(status_code=408, detail=f"the request body did not arrive within "
                                      f"{timeout_s:g} s (KB_BODY_TIMEOUT_S)", headers={"connection": "close"}) from None
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise ClientException(status_code=413, detail=f"the body exceeds {limit} bytes for this endpoint")
            return message

        await app(scope, limited, send)

    return middleware
