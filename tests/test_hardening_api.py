"""Issue 25, the API side of the re-probe: bounded preview caches, Host checks on every route, slow bodies and
per-client connection caps, an embedder changed under a running server, and database edges."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path

import pymupdf
import pytest

from ingest.render import LinesCache, PageCache, SourceDoc
from kb.app import create_app
from kb.errors import UnavailableError
from kb.runtime import Runtime
from tests.conftest import SetEnv, ingest
from tests.http import app_client
from tests.pdfgen import make_text_pdf


def _doc(path: Path, doc_id: int = 1, file_type: str = "pdf", pages: int = 0) -> SourceDoc:
    return SourceDoc(doc_id=doc_id, name=path.name, source_path=str(path),
                     sha256=hashlib.sha256(path.read_bytes()).hexdigest(), file_type=file_type,
                     page_count=pages, allowed_root=str(path.parent))


@pytest.mark.unit
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


@pytest.mark.unit
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
    from kb.providers.embed import HashEmbedder

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
