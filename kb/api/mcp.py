"""The MCP streamable-HTTP endpoint at ``/mcp``, behind the same guard as the read endpoints: POST only
(stateless, so no ``GET`` event stream to hold a connection), a 503 at once while the database is down."""

from __future__ import annotations

from litestar import asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from mcp.server import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from kb.api.common import LOOPBACK, PROBLEM_JSON, RETRY_AFTER_S, problem_bytes, read_guard, unavailable_reason

_HOST_NAMES = ("127.0.0.1", "localhost", "[::1]")  # as they appear in Host and Origin headers


def http_session_manager(server: MCPServer, bound_host: str) -> StreamableHTTPSessionManager:
    """The server's streamable-HTTP session manager: stateless (any API replica can answer any
    request), JSON replies. Run it with ``manager.run()`` in the app lifespan. A loopback-bound
    server accepts only loopback Host/Origin headers (DNS-rebinding protection)."""
    security = None
    if bound_host in LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*_HOST_NAMES, *(f"{h}:*" for h in _HOST_NAMES)],
            allowed_origins=[f"{scheme}://{h}{port}" for scheme in ("http", "https") for h in _HOST_NAMES
                             for port in ("", ":*")],
        )
    server.streamable_http_app(json_response=True, stateless_http=True, transport_security=security,
                               host=bound_host)
    return server.session_manager


def mcp_route(manager: StreamableHTTPSessionManager) -> ASGIRouteHandler:
    """Mount ``manager`` at ``/mcp``; KB_API_TOKEN applies as for the read endpoints."""

    @asgi(path="/mcp", guards=[read_guard], copy_scope=True)  # a plain route: the path stays "/mcp" in logs
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "GET":  # stateless: no server-initiated messages, so no endless SSE stream
            await _send_problem(send, 405, "Method not allowed",
                                "GET /mcp (an event stream) is not offered by this stateless server; POST requests",
                                [(b"allow", b"POST")])
            return
        reason = unavailable_reason(scope["litestar_app"].state, "/mcp")
        if reason is not None:  # as the REST endpoints: a 503 at once, not a wait on a frozen database
            await _send_problem(send, 503, "Service unavailable", reason,
                                [(b"retry-after", str(RETRY_AFTER_S).encode())])
            return
        await manager.handle_request(scope, receive, send)

    return mcp_endpoint


async def _send_problem(send: Send, status: int, title: str, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = problem_bytes(status, title, detail)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
