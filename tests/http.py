"""Real HTTP requests against the ASGI app in the test's own event loop (the pool lives there too)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
from litestar import Litestar


@asynccontextmanager
async def app_client(app: Litestar, *, peer: str = "127.0.0.1",
                     base_url: str = "http://127.0.0.1:8000") -> AsyncIterator[httpx.AsyncClient]:
    """Run the app's lifespan and yield an httpx client speaking HTTP to it from the ``peer`` address."""
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app, client=(peer, 50000))
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
            yield client


def wire(value: Any) -> Any:
    """A struct (a query trace) as the API sends it: plain JSON types."""
    return msgspec.json.decode(msgspec.json.encode(value))


async def wait_for_job(client: httpx.AsyncClient, job_id: int, timeout_s: float = 120) -> dict[str, Any]:
    """Poll ``/kb/admin/jobs/{job_id}`` until the job has finished (the server's own worker runs it); its JSON."""
    async with asyncio.timeout(timeout_s):
        while True:
            job = (await client.get(f"/kb/admin/jobs/{job_id}")).json()
            if job["status"] in {"done", "failed", "cancelled"}:
                return job
            await asyncio.sleep(0.25)


async def ask_json(rt: Any, query: str) -> dict[str, Any]:
    """``POST /kb/query`` on the app of runtime ``rt`` (no worker): the JSON answer of a 200."""
    from kb.app import create_app

    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        r = await client.post("/kb/query", json={"query": query})
        assert r.status_code == 200, r.text
        return r.json()
