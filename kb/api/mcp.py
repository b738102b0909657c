"""The MCP streamable-HTTP endpoint at ``/mcp``, behind the same guard as the read endpoints."""

from __future__ import annotations

from litestar import asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from kb.api.common import read_guard


def mcp_route(manager: StreamableHTTPSessionManager) -> ASGIRouteHandler:
    """Mount ``manager`` (run it in the app lifespan) at ``/mcp``; KB_API_TOKEN applies as for reads."""

    @asgi(path="/mcp", is_mount=True, guards=[read_guard], copy_scope=True)
    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        await manager.handle_request(scope, receive, send)

    return mcp_endpoint
