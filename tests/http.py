"""Real HTTP requests against the ASGI app in the test's own event loop (the pool lives there too)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from litestar import Litestar


@asynccontextmanager
async def app_client(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    """Run the app's lifespan and yield an httpx client speaking HTTP to it."""
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield client
