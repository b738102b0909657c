"""The web UI: static files shipped in the package, served at ``/ui/`` (``/`` redirects there), every
response with a content-security policy that allows only this server's own scripts, styles and images."""

from __future__ import annotations

from pathlib import Path

from litestar import Router, get
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp, Message, Receive, Scope, Send

STATIC_DIR = Path(__file__).resolve().parent.parent / "ui" / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
UI_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def csp_middleware(app: ASGIApp) -> ASGIApp:
    """Add the UI's security headers to every response of the UI routes."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *UI_HEADERS]
            await send(message)

        await app(scope, receive, send_wrapper)

    return middleware


@get("/", include_in_schema=False, middleware=[csp_middleware])
async def ui_root() -> Redirect:
    return Redirect("/ui/")


def ui_router() -> Router:
    """``/ui/…`` from the packaged static folder (``index.html`` for the folder, ``404.html`` when missing)."""
    return create_static_files_router(path="/ui", directories=[STATIC_DIR], html_mode=True, name="ui",
                                      middleware=[csp_middleware])
