"""Issue 25, the API side of the re-probe: bounded preview caches, Host checks on every route, slow bodies and
per-client connection caps, an embedder changed under a running server, and database edges."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import pymupdf
import pytest

from ingest.render import LinesCache, PageCache, SourceDoc
from kb.app import create_app
from kb.core.errors import UnavailableError
from kb.runtime import Runtime
from tests.conftest import SetEnv, ingest
from tests.http import app_client, wait_for_job
from tests.live import LiveServer, free_port, ingest_and_wait, live_server
from tests.pdfgen import make_text_pdf


def _doc(path: Path, doc_id: int = 1, file_type: str = "pdf", pages: int = 0) -> SourceDoc:
    return SourceDoc(doc_id=doc_id, name=path.name, source_path=str(path),
                     sha256=hashlib.sha256(path.read_bytes()).hexdigest(), file_type=file_type,
                     page_count=pages, allowed_root=str(path.parent))


async def test_lines_cache_parses_once_off_the_shared_pool_and_bounds_waiting(tmp_path: Path) -> None:
    cache = LinesCache(max_chars=10_000, max_waiting=2)
    release = threading.Event()
    threads: list[str] = []

    def parse(text: str):
        def run() -> list[str]:
            threads.append(threading.current_thread().name)
            release.wait(10)
            return text.splitlines()
        return run

    docs = []
    for i in range(3):
        (tmp_path / f"d{i}.md").write_text(f"doc {i}\nline two\n")
        docs.append(_doc(tmp_path / f"d{i}.md", doc_id=i + 1, file_type="md"))
    same = [asyncio.create_task(cache.get(docs[0], parse("doc 0\nline two"))) for _ in range(5)]
    other = asyncio.create_task(cache.get(docs[1], parse("doc 1\nline two")))
    await asyncio.sleep(0.1)
    with pytest.raises(UnavailableError, match="retry"):  # a third source waits beyond max_waiting
        await cache.get(docs[2], parse("doc 2"))
    release.set()
    results = await asyncio.gather(*same, other)
    assert results[0] == ["doc 0", "line two"] and all(r == results[0] for r in results[:5])
    assert cache.parses == 2 and len(threads) == 2 and all(t.startswith("kb-lines") for t in threads)
    assert await cache.get(docs[0], parse("never parsed")) == ["doc 0", "line two"]  # from memory
    assert cache.parses == 2
    # bounded by characters: the least recently used go first
    small = LinesCache(max_chars=40)
    for i in range(3):
        await small.get(docs[i], parse(f"{'x' * 15}\n{i}"))
    assert small.parses == 3
    await small.get(docs[2], parse("again"))
    assert small.parses == 3  # the last one is still kept
    await small.get(docs[0], parse(f"{'x' * 15}\n0"))
    assert small.parses == 4  # the first was dropped to make room
    cache.close()
    small.close()


def test_page_cache_keeps_plain_pages_within_its_size_and_draws_highlights(tmp_path: Path) -> None:
    pdf = make_text_pdf(tmp_path / "long.pdf", [f"Page {n} says the copper output was {n * 7} tonnes. "
                                                "Lorem ipsum dolor sit amet. " * 20 for n in range(1, 13)])
    doc = _doc(pdf, pages=12)
    one = PageCache(tmp_path / "cache", max_bytes=10**9).get(doc, 1, None).png
    limit = int(len(one) * 4.5)  # room for four pages
    cache = PageCache(tmp_path / "pages", max_bytes=limit)
    for page in range(1, 13):
        image = cache.get(doc, page, None)
        assert not image.cached and image.marks.highlights == 0
        assert cache.size() <= limit
        if page == 4:
            cache.get(doc, 1, None)  # page 1 used again: the most recent now
    stored = {p.name for p in (tmp_path / "pages").rglob("*.png")}
    assert "p12-d110.png" in stored and "p2-d110.png" not in stored and len(stored) <= 4
    assert not list((tmp_path / "pages").rglob("*.part"))
    # a highlight is drawn on the cached plain page: no file per (page, chunk)
    from ingest.render import ChunkRef

    chunk = ChunkRef(chunk_id=77, doc_id=doc.doc_id, text="Page 12 says the copper output was 84 tonnes.",
                     page=12, page_end=12)
    plain = cache.get(doc, 12, None)
    marked = cache.get(doc, 12, chunk)
    assert plain.cached and marked.cached and marked.marks.highlights > 0 and 0 < marked.marks.top < 0.5
    assert {p.name for p in (tmp_path / "pages").rglob("*.png")} == stored
    a, b = pymupdf.Pixmap(plain.png), pymupdf.Pixmap(marked.png)
    assert (a.width, a.height) == (b.width, b.height) and a.samples != b.samples
    changed = sum(x != y for x, y in zip(a.samples, b.samples, strict=True))
    assert changed < len(a.samples) // 4  # only the marked lines, not the page
    pdf.unlink()  # the source gone: the page and its known marks are still served
    assert cache.get(doc, 12, chunk).png == marked.png


def _client(rt: Runtime, *, bound_host: str = "127.0.0.1", base_url: str = "http://127.0.0.1:8000"):
    return app_client(create_app(runtime=rt, bound_host=bound_host, run_worker=False), base_url=base_url)


async def _md_document(rt: Runtime, tmp_path: Path) -> int:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "orion.md").write_text("# Orion\n\n## Output\n\nOrion Mining produced 412 thousand tonnes of copper.\n")
    job = await ingest(rt, docs, allowed_root=tmp_path)
    assert job.counts == {"ok": 1}, [(i.name, i.error) for i in job.items]
    return job.items[0].document_id


async def test_every_route_refuses_a_foreign_host(runtime: Runtime, tmp_path: Path, set_env: SetEnv) -> None:
    doc_id = await _md_document(runtime, tmp_path)
    reads = [("GET", "/kb/documents"), ("GET", f"/kb/documents/{doc_id}/lines"), ("GET", "/metrics"),
             ("GET", "/health"), ("GET", "/kb/collections"), ("GET", "/ui/")]
    query = {"query": "How much copper did Orion produce?"}
    async with _client(runtime, base_url="http://evil.example:8000") as client:  # DNS rebinding, no tokens
        for method, path in reads:
            r = await client.request(method, path)
            assert r.status_code == 421 and "KB_ALLOWED_HOSTS" in r.json()["detail"], (path, r.text)
        r = await client.post("/kb/query", json=query)
        assert r.status_code == 421 and r.headers["content-type"] == "application/problem+json"
    for base in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000", "http://10.1.2.3:8000",
                 "http://kb.localhost"):
        async with _client(runtime, base_url=base) as client:
            assert (await client.get(f"/kb/documents/{doc_id}/lines")).status_code == 200, base
            assert (await client.post("/kb/query", json=query)).status_code == 200, base
    async with _client(runtime, bound_host="kb-box", base_url="http://KB-box:8000") as client:  # the bound name
        assert (await client.get("/kb/documents")).status_code == 200
    async with _client(runtime, bound_host="0.0.0.0", base_url="http://evil.example") as client:  # MCP too
        r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                              headers={"Accept": "application/json, text/event-stream"})
        assert r.status_code == 421 and "KB_ALLOWED_HOSTS" in r.json()["detail"]
    runtime.settings = set_env(KB_ALLOWED_HOSTS="kb.example.org, .corp.example")
    for base, status in [("http://kb.example.org", 200), ("http://a.corp.example:8000", 200),
                         ("http://corp.example", 200), ("http://evilcorp.example", 421), ("http://evil.example", 421)]:
        async with _client(runtime, base_url=base) as client:
            assert (await client.get("/kb/documents")).status_code == status, base
    runtime.settings = set_env(KB_API_TOKEN="reader")  # a page on another site cannot send the token
    async with _client(runtime, base_url="http://evil.example:8000") as client:
        assert (await client.get("/kb/documents")).status_code == 401
        r = await client.get("/kb/documents", headers={"Authorization": "Bearer reader"})
        assert r.status_code == 200


async def test_reembed_under_a_running_server_is_a_503_with_the_reason(runtime: Runtime, tmp_path: Path) -> None:
    from ingest.reembed import reembed
    from kb.core.providers.embed import HashEmbedder

    await _md_document(runtime, tmp_path)
    query = {"query": "How much copper did Orion produce?"}
    async with _client(runtime) as client:
        assert (await client.post("/kb/query", json=query)).status_code == 200
        assert (await client.get("/health")).json()["embedder"]["matches_database"] is True
        other = HashEmbedder(runtime.embedder.dimension // 2)  # another model and dimension
        await reembed(runtime.pool, other)

        async with asyncio.timeout(15):  # the record is read every 2 s
            for _ in range(100):
                if (await client.post("/kb/query", json=query)).status_code == 503:
                    break
                await asyncio.sleep(0.3)
        r = await client.post("/kb/query", json=query)
        body = r.json()
        assert r.headers["retry-after"] and "kb reembed" in body["detail"] and other.model_id in body["detail"]
        health = await client.get("/health")
        assert health.status_code == 503 and health.json()["embedder"]["matches_database"] is False
        assert "restart this server" in health.json()["detail"] and health.json()["database"] is True
        assert (await client.get("/kb/documents")).status_code == 503  # everything but health, metrics, schema
        assert (await client.get("/metrics")).status_code == 200
        mcp = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                headers={"Accept": "application/json, text/event-stream"})
        assert mcp.status_code == 503 and "kb reembed" in mcp.json()["detail"]


async def test_head_is_answered_like_get_without_a_body(runtime: Runtime, tmp_path: Path) -> None:
    doc_id = await _md_document(runtime, tmp_path)
    async with _client(runtime) as client:
        for path in ("/health", "/kb/documents", f"/kb/documents/{doc_id}/file", "/ui/", "/schema/openapi.json"):
            got, head = await client.get(path), await client.head(path)
            assert got.status_code == head.status_code == 200, (path, head.status_code)  # it was 405
            assert head.content == b"" and got.content, path
            assert head.headers["content-type"] == got.headers["content-type"], path
            if "content-length" in got.headers:
                assert head.headers["content-length"] == got.headers["content-length"], path
        assert (await client.head("/kb/documents/999999")).status_code == 404
        assert (await client.head("/kb/query")).status_code == 405  # a POST-only address stays 405 for HEAD


async def test_a_few_questions_at_once_the_rest_in_order_and_a_long_wait_is_a_503(runtime: Runtime, tmp_path: Path,
                                                                                   set_env: SetEnv) -> None:
    """KB_QUERY_CONCURRENCY questions are answered at once per process and the others wait their turn; one that
    waited KB_QUERY_QUEUE_S is a 503 "Service overloaded" with Retry-After (JSON, stream and MCP alike)."""
    from kb.runtime import QueryGate

    gate, running, most = QueryGate(2, 5.0), 0, 0

    async def question() -> None:
        nonlocal running, most
        async with gate.turn():
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.gather(*(question() for _ in range(12)))
    assert most == 2

    await _md_document(runtime, tmp_path)
    runtime.settings = set_env(KB_QUERY_CONCURRENCY="1", KB_QUERY_QUEUE_S="20")
    query = {"query": "How much copper did Orion produce?"}
    async with _client(runtime) as client:
        first, second = await asyncio.gather(*(client.post("/kb/query", json=query) for _ in range(2)))
        assert first.status_code == second.status_code == 200 and runtime.query_gate.limit == 1
        runtime.query_gate.wait_s = 0.3
        async with runtime.query_gate.turn():  # another question holds the one turn
            r = await client.post("/kb/query", json=query)
            assert r.status_code == 503 and r.json()["title"] == "Service overloaded" and r.headers["retry-after"]
            assert "KB_QUERY_QUEUE_S" in r.json()["detail"]
            streamed = await client.post("/kb/query", json={**query, "stream": True})
            assert streamed.status_code == 200 and "event: error" in streamed.text and "503" in streamed.text
        assert (await client.post("/kb/query", json=query)).status_code == 200  # its turn came back


async def _health_until(client: httpx.AsyncClient, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async with asyncio.timeout(20):  # the embedder record is read every 2 s
        for _ in range(1000):
            if ready(body := (await client.get("/health")).json()):
                return body
            await asyncio.sleep(0.2)
    raise AssertionError("health never became ready")


async def test_reembed_away_and_back_leaves_the_server_ingesting(runtime: Runtime, tmp_path: Path,
                                                                 kb_env: dict[str, str]) -> None:
    """R7: the worker paused by ``kb reembed`` to another model starts again when the vectors are this server's
    again, and ``/health`` says which (it used to stay stopped under a 200, a new job queued for ever)."""
    from ingest.reembed import reembed
    from kb.core.providers.embed import HashEmbedder

    await _md_document(runtime, tmp_path)
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "vega.md").write_text("# Vega\n\n## Output\n\nVega Metals produced 9 tonnes of gold.\n")
    async with app_client(create_app(runtime=runtime, run_worker=True)) as client:
        assert (await client.get("/health")).json()["ingest_worker"] == {"state": "running", "reason": None}
        await reembed(runtime.pool, HashEmbedder(runtime.embedder.dimension // 2))
        away = await _health_until(client, lambda h: h["ingest_worker"]["state"] == "stopped")
        assert "kb reembed" in away["ingest_worker"]["reason"] and away["embedder"]["matches_database"] is False
        await reembed(runtime.pool, runtime.embedder)
        back = await _health_until(client, lambda h: h["status"] == "ok")
        assert back["ingest_worker"] == {"state": "running", "reason": None}
        r = await client.post("/kb/admin/ingest", json={"path": "later", "collection": "default"})
        assert r.status_code == 202, r.text
        job = await wait_for_job(client, r.json()["job_id"], timeout_s=60)
        assert job["status"] == "done" and job["counts"] == {"ok": 1}, job["items"]
    async with app_client(create_app(runtime=runtime, run_worker=False)) as client:
        assert (await client.get("/health")).json()["ingest_worker"] == {"state": "off", "reason": None}


# ---------------------------------------------------------------- a live server: sockets, a database to freeze
@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("live25")
    (root / "memo.md").write_text("# Falcon memo\n\nThe Falcon project revenue was 12 million dollars in 2023.\n")
    with live_server(root, KB_MAX_CONNECTIONS="10", KB_MAX_CLIENT_CONNECTIONS="4", KB_BODY_TIMEOUT_S="3",
                     KB_DB_COMMAND_TIMEOUT_S="5", KB_DB_CONNECT_TIMEOUT_S="2") as srv:
        assert ingest_and_wait(srv, "memo.md")["status"] == "done"
        yield srv


def _status_line(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    try:
        return sock.recv(4096).split(b"\r\n", 1)[0]
    except TimeoutError:
        return b""


@pytest.mark.live
def test_slow_bodies_and_mcp_streams_cannot_take_every_connection(live: LiveServer) -> None:
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10)  # another client
    # ten GET /mcp (event streams) are refused at once instead of each holding a connection for ever
    streams = [socket.create_connection(("127.0.0.1", live.port), source_address=(f"127.0.1.{i}", 0))
               for i in range(1, 9)]  # eight addresses: the per-client cap is not what refuses them
    for s in streams:
        s.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    assert [_status_line(s, 5)[:12] for s in streams] == [b"HTTP/1.1 405"] * 8
    assert other.get(f"{live.base}/health").status_code == 200
    for s in streams:  # and the server lets them go (keep-alive timeout): nothing is held
        s.settimeout(15)
        while s.recv(4096):
            pass
        s.close()
    time.sleep(0.5)
    # nine slow bodies from one address: four are held (KB_MAX_CLIENT_CONNECTIONS), five are refused at once
    head = (b"POST /kb/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 200\r\n\r\n{\"query\": ")
    slow = []
    for _ in range(9):
        s = socket.create_connection(("127.0.0.1", live.port))
        s.sendall(head)
        slow.append(s)
        time.sleep(0.05)
    started = time.time()
    refused = [_status_line(s, 2) for s in slow[4:]]
    assert all(line.startswith(b"HTTP/1.1 503") for line in refused), refused
    readable, _, _ = select.select(slow[:4], [], [], 0)
    assert not readable  # still waiting for their bodies
    assert other.get(f"{live.base}/health").status_code == 200  # another client is served meanwhile
    assert other.post(f"{live.base}/kb/query", json={"query": "Falcon revenue?"}).status_code == 200
    # the held ones time out (KB_BODY_TIMEOUT_S=3): a 408 and the connection closed
    late = [_status_line(s, 10) for s in slow[:4]]
    assert all(line.startswith(b"HTTP/1.1 408") for line in late), late
    assert time.time() - started < 8
    for s in slow:  # closed by the server (a reset: it did not read what the client had sent)
        s.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while s.recv(4096):
                pass
        s.close()
    other.close()
    assert httpx.get(f"{live.base}/health", timeout=10).status_code == 200
    assert "http.body_timeout" in live.log.read_text() and "http.client_cap" in live.log.read_text()


@pytest.mark.live
def test_frozen_database_bounds_metrics_and_mcp(live: LiveServer) -> None:
    import psutil

    pid = int((live.pgdata / "postmaster.pid").read_text().split()[0])
    master = psutil.Process(pid)
    procs = [master, *master.children()]
    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_collections", "arguments": {}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for p in procs:
        p.suspend()
    try:
        started = time.time()
        r = httpx.get(f"{live.base}/metrics", timeout=30)
        assert r.status_code == 200 and "kb_database_up 0.0" in r.text
        assert time.time() - started < 4
        assert httpx.get(f"{live.base}/health", timeout=30).status_code == 503  # the gate closes with it
        started = time.time()
        r = httpx.post(f"{live.base}/mcp", json=mcp, headers=accept, timeout=30)
        assert r.status_code == 503 and r.headers["retry-after"], r.text
        assert time.time() - started < 2
    finally:
        for p in procs:
            p.resume()
    deadline = time.time() + 30
    while httpx.get(f"{live.base}/health", timeout=10).status_code != 200:  # noqa: ASYNC110
        assert time.time() < deadline
        time.sleep(0.2)
    # what /health says holds for the next request at once
    assert httpx.post(f"{live.base}/mcp", json=mcp, headers=accept, timeout=30).status_code == 200
    assert httpx.post(f"{live.base}/kb/query", json={"query": "Falcon revenue?"}, timeout=30).status_code == 200
    assert "kb_database_up 1.0" in httpx.get(f"{live.base}/metrics", timeout=10).text


@pytest.mark.live
def test_start_up_log_names_the_real_bind_address(tmp_path: Path) -> None:
    """``uvicorn kb.app:create_app --factory --host 0.0.0.0`` (KB_HOST left at 127.0.0.1): the log says 0.0.0.0."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATA_DIR": str(tmp_path / "data"), "KB_INGEST_ROOT": str(tmp_path), "KB_RUN_WORKER": "false",
                "KB_EMBEDDING_MODEL": "hash:384"})
    log_path = tmp_path / "uvicorn.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "kb.app:create_app", "--factory",
                                 "--host", "0.0.0.0", "--port", str(port)], env=env, stdout=out, stderr=out)
        try:
            deadline = time.time() + 120
            while "server.listening" not in log_path.read_text():
                assert proc.poll() is None and time.time() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.5)
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    text = log_path.read_text()
    listening = [line for line in text.splitlines() if "server.listening" in line]
    assert listening and "host=0.0.0.0" in listening[0] and "loopback=False" in listening[0], listening
    warning = [line for line in text.splitlines() if "auth.no_admin_token" in line]
    assert warning and "loopback=False" in warning[0] and "127.0.0.1" not in warning[0], warning
    from kb.core.db import embedded_status

    assert not embedded_status(tmp_path / "data")["running"]  # the app's process stopped the Postgres it started


async def test_query_filter_values_in_the_schema_are_the_ones_accepted(runtime: Runtime, tmp_path: Path) -> None:
    import jsonschema

    await _md_document(runtime, tmp_path)
    async with _client(runtime) as client:
        doc = (await client.get("/schema/openapi.json")).json()
        request = doc["components"]["schemas"]["QueryRequest"]
        filters = {**request["properties"]["filters"], "components": doc["components"]}
        accepted = [{"company": "Orion"}, {"fiscal_year": [2023, 2024]}, {"fiscal_year": {"gte": 2020, "lte": "2025"}},
                    {"title": {"contains": "Orion"}}, {"audited": True}, {"x": None}, {"x": 1.5},
                    {"fact": {"concept": "revenue", "gte": 1}}]
        refused = [{"company": {}}, {"company": {"foo": 1}}, {"fiscal_year": {"gte": "soon"}}, {"bad key!": 1}]
        for value in accepted:
            jsonschema.validate(value, filters)
            r = await client.post("/kb/query", json={"query": "copper output?", "filters": value})
            assert r.status_code in (200, 404), (value, r.text)  # 404: no document matches
        for value in refused:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(value, filters)
            r = await client.post("/kb/query", json={"query": "copper output?", "filters": value})
            assert r.status_code == 400, (value, r.text)


async def test_a_connection_caught_between_states_is_a_503(runtime: Runtime) -> None:
    """asyncpg's "cannot switch to state" (a postmaster killed in the middle of a statement) is the database
    going away: 503 with Retry-After, as JSON and mid-stream, not a 500."""
    import asyncpg

    from router.pipeline import QueryPipeline

    class Broken(QueryPipeline):  # what handlers are given must be a pipeline
        def __init__(self) -> None:
            pass

        async def run(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
            raise asyncpg.InternalClientError("cannot switch to state 12; another operation (2) is in progress")

    runtime._pipeline = Broken()
    try:
        async with _client(runtime) as client:
            r = await client.post("/kb/query", json={"query": "anything?"})
            assert r.status_code == 503 and r.headers["retry-after"], r.text
            r = await client.post("/kb/query", json={"query": "anything?", "stream": True})
            assert r.status_code == 200 and "event: error" in r.text and '"status": 503' in r.text, r.text
    finally:
        runtime._pipeline = None


async def test_lines_are_parsed_once_per_source(runtime: Runtime, tmp_path: Path) -> None:
    doc_id = await _md_document(runtime, tmp_path)
    app = create_app(runtime=runtime, bound_host="127.0.0.1", run_worker=False)
    async with app_client(app) as client:
        bodies = await asyncio.gather(*(client.get(f"/kb/documents/{doc_id}/lines") for _ in range(6)))
        assert all(r.status_code == 200 for r in bodies) and len({r.text for r in bodies}) == 1
        again = await client.get(f"/kb/documents/{doc_id}/lines", params={"start": 3, "count": 1})
        assert again.json()["lines"][0]["text"] == "## Output"
        ranged = await client.get(f"/kb/documents/{doc_id}/lines", params={"start": 3, "end": 4})
        assert [ln["text"] for ln in ranged.json()["lines"]][:1] == ["## Output"] and len(ranged.json()["lines"]) == 2
        backwards = await client.get(f"/kb/documents/{doc_id}/lines", params={"start": 5, "end": 2})
        assert backwards.status_code == 200 and backwards.json()["lines"] == [], backwards.text
        assert app.state.lines.parses == 1  # six concurrent requests and a later one: one parse
        assert (await client.delete(f"/kb/documents/{doc_id}")).status_code == 204
        assert not app.state.lines._lines  # a deleted document's lines are forgotten


async def test_a_wait_that_runs_out_under_load_is_overload_not_an_unreachable_database(runtime: Runtime) -> None:
    """A pool slot, a connection or a statement that waited too long while the database is up is a 503 "Service
    overloaded" with Retry-After (as JSON and mid-stream); "unreachable" only when the database is gone."""
    import asyncpg

    from router.pipeline import QueryPipeline

    class Slow(QueryPipeline):  # what handlers are given must be a pipeline
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        async def run(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
            raise self.exc

    try:
        async with _client(runtime) as client:
            for exc in (TimeoutError(), asyncpg.QueryCanceledError("canceling statement due to statement timeout")):
                runtime._pipeline = Slow(exc)
                r = await client.post("/kb/query", json={"query": "anything?"})
                assert r.status_code == 503 and r.headers["retry-after"], r.text
                assert r.json()["title"] == "Service overloaded" and "busy" in r.json()["detail"], r.text
                r = await client.post("/kb/query", json={"query": "anything?", "stream": True})
                assert '"status": 503' in r.text and "Service overloaded" in r.text, r.text
            runtime._pipeline = Slow(ConnectionRefusedError())
            r = await client.post("/kb/query", json={"query": "anything?"})
            assert r.status_code == 503 and r.json()["title"] == "Service unavailable", r.text
            assert "unreachable" in r.json()["detail"]
    finally:
        runtime._pipeline = None


def test_a_logged_path_carries_no_control_characters() -> None:
    from kb.api.common import logged_path

    assert logged_path("/ui/a\x1b[31mred\x00z") == "/ui/a\\x1b[31mred\\x00z"
    assert len(logged_path("/kb/" + "x" * 5000)) == 300 and logged_path("/kb/documents/3") == "/kb/documents/3"


async def test_the_503s_of_an_outage_are_a_few_log_lines(runtime: Runtime) -> None:
    """Every request during an outage gets its 503, but the log says so once per interval, with the count."""
    from structlog.testing import capture_logs

    from kb.api.common import UNAVAILABLE_LOG

    UNAVAILABLE_LOG._last = float("-inf")
    runtime.db_available = False
    try:
        async with _client(runtime) as client:
            with capture_logs() as logs:
                codes = [(await client.get("/kb/documents")).status_code for _ in range(40)]
        assert codes == [503] * 40
        said = [e for e in logs if e["event"] in ("api.unavailable", "api.error")]
        assert len(said) == 1 and said[0]["event"] == "api.unavailable" and said[0]["log_level"] == "warning", said
    finally:
        runtime.db_available = True


def _big_pdf(path: Path, image_mb: int) -> Path:
    """A one-page PDF carrying ``image_mb`` MB of incompressible image (random pixels), and a line of text."""
    import numpy as np

    side = int((image_mb * 1024 * 1024 / 3) ** 0.5)
    pix = pymupdf.Pixmap(pymupdf.csRGB, side, side,
                         np.random.default_rng(7).integers(0, 256, side * side * 3, dtype=np.uint8).tobytes(), False)
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Borealis Shipping annual report: revenue was 81 million dollars in 2023.")
    page.insert_image(pymupdf.Rect(72, 100, 400, 428), pixmap=pix)
    doc.save(path)
    return path


@pytest.mark.live
def test_stalled_readers_of_a_large_file_hold_neither_memory_nor_connections(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """R1: ten clients that ask for a large original file and never read the answer. The file used to be held
    whole in memory per client for as long as the socket stayed open (10 × 39 MB); it is streamed in pieces,
    and a client that reads nothing for ``KB_SEND_TIMEOUT_S`` is dropped. Meanwhile others are served and a
    full download is byte-exact."""
    root = tmp_path_factory.mktemp("stalled")
    size = _big_pdf(root / "big.pdf", 24).stat().st_size
    assert size > 20 * 1024 * 1024
    with live_server(root, KB_SEND_TIMEOUT_S="3") as srv:
        job = ingest_and_wait(srv, "big.pdf")
        doc_id = job["items"][0]["document_id"]
        server = psutil.Process(srv.pid)
        request = f"GET /kb/documents/{doc_id}/file HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        assert httpx.get(f"{srv.base}/kb/documents/{doc_id}/file", timeout=30).content == (root / "big.pdf").read_bytes()
        before = server.memory_info().rss
        stalled = []
        for i in range(10):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that takes (almost) nothing
            s.bind((f"127.0.3.{i + 1}", 0))
            s.connect(("127.0.0.1", srv.port))
            s.sendall(request)
            stalled.append(s)
        time.sleep(1.5)
        grown = server.memory_info().rss - before
        assert grown < 60 * 1024 * 1024, f"{grown / 2**20:.0f} MB held for 10 stalled readers of a {size / 2**20:.0f} MB file"
        assert httpx.get(f"{srv.base}/health", timeout=10).status_code == 200  # others are served meanwhile
        time.sleep(4.5)  # past KB_SEND_TIMEOUT_S: every stalled reader is dropped
        for s in stalled:
            got, s_closed = 0, False
            s.settimeout(10)
            try:
                while chunk := s.recv(1 << 20):
                    got += len(chunk)
                s_closed = True
            except ConnectionResetError:
                s_closed = True
            finally:
                s.close()
            assert s_closed and got < size, (got, size)
        assert srv.log.read_text().count("http.slow_reader_dropped") >= 10
        assert httpx.get(f"{srv.base}/kb/documents/{doc_id}/file", timeout=30).content == (root / "big.pdf").read_bytes()
        # clients that hang up halfway through the download: no socket or file is left open, nothing is logged
        # as an error, and the next download is whole
        fds = server.num_fds()
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", srv.port)) as s:
                s.sendall(request)
                got = 0
                while got < size // 2 and (chunk := s.recv(1 << 20)):
                    got += len(chunk)
            assert got >= size // 2
        time.sleep(1.0)
        assert server.num_fds() <= fds, (server.num_fds(), fds)
        assert httpx.get(f"{srv.base}/kb/documents/{doc_id}/file", timeout=30).content == (root / "big.pdf").read_bytes()
        text = srv.log.read_text(errors="replace")
        assert "Traceback" not in text and "Exception in ASGI" not in text, text[-3000:]
