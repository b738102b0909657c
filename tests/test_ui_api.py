"""Evidence previews and the UI's static files over real HTTP, on the real embedded Postgres, with a PDF and
a Markdown file written by the test and ingested by the real worker."""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf
import pytest

from kb.app import create_app
from kb.runtime import Runtime
from tests.conftest import SetEnv, ingest
from tests.http import app_client
from tests.pdfgen import Sec, make_report_pdf

MD = """# Orion Mining annual report

## Production

Orion Mining produced 412 thousand tonnes of copper in 2024.
The Atacama pit delivered most of the increase.

## Safety

The lost-time injury rate fell to 0.8 per million hours.
"""

HTML = """<!doctype html><html><head><title>Lynx Freight memo</title></head><body>
<h1>Lynx Freight memo</h1><h2>Volumes</h2><p>Lynx Freight moved 88 thousand containers in 2024.</p>
<p>Rail carried a third of them.</p><h2>Outlook</h2><p>Lynx expects flat volumes in 2025.</p></body></html>
"""


def _client(rt: Runtime):
    return app_client(create_app(runtime=rt, bound_host="127.0.0.1", run_worker=False))


async def _ingest(runtime: Runtime, tmp_path: Path) -> tuple[dict[str, int], Path]:
    """A generated PDF and a Markdown file ingested through a folder job; {name: document id}."""
    docs = tmp_path / "docs"
    docs.mkdir()
    make_report_pdf(docs / "report.pdf", [Sec("Revenue", paragraphs=4), Sec("Liquidity", paragraphs=8),
                                          Sec("Risks", paragraphs=6)], outline=True)
    (docs / "orion.md").write_text(MD)
    (docs / "lynx.html").write_text(HTML)
    job = await ingest(runtime, docs, allowed_root=tmp_path)
    assert job.counts == {"ok": 3}, [(i.name, i.error) for i in job.items]
    return {i.name: i.document_id for i in job.items}, docs


def _is_problem(r, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    body = r.json()
    assert body["status"] == status and body["detail"]
    return body


async def test_page_image_highlights_the_cited_chunk(runtime: Runtime, tmp_path: Path) -> None:
    ids, _ = await _ingest(runtime, tmp_path)
    pdf_id = ids["report.pdf"]
    async with _client(runtime) as client:
        r = await client.post("/kb/query", json={"query": "What does the report say about liquidity?",
                                                 "top_docs": 1, "filters": {}, "strategy": "semantic"})
        assert r.status_code == 200, r.text
        cites = [c for c in r.json()["citations"] if c["unit"] == "page"]
        assert cites, r.json()
        cite = cites[0]
        owner = await runtime.pool.fetchrow("SELECT document_id, page FROM chunks WHERE id = $1", cite["chunk_id"])
        assert owner["document_id"] == cite["doc_id"] == pdf_id
        page = owner["page"]
        url = f"/kb/documents/{pdf_id}/pages/{page}.png"
        marked = await client.get(url, params={"highlight": cite["chunk_id"]})
        assert marked.status_code == 200, marked.text
        assert marked.headers["content-type"] == "image/png" and marked.content[:8] == b"\x89PNG\r\n\x1a\n"
        assert int(marked.headers["x-highlights"]) > 0 and 0 < float(marked.headers["x-highlight-top"]) < 1
        plain = await client.get(url)
        assert plain.status_code == 200 and int(plain.headers["x-highlights"]) == 0
        assert "x-highlight-top" not in plain.headers
        assert plain.content != marked.content  # the highlight changed the pixels
        pix = pymupdf.Pixmap(marked.content)
        assert 800 < pix.width < 1000 and pix.height > pix.width  # a US-letter page at 110 dpi
        again = await client.get(url, params={"highlight": cite["chunk_id"]})
        assert again.content == marked.content  # from the cache, with the same marks
        assert [again.headers[h] for h in ("x-highlights", "x-highlight-top")] == \
            [marked.headers[h] for h in ("x-highlights", "x-highlight-top")]
        folder = runtime.settings.database.data_dir / "pages" / str(pdf_id)
        assert {p.name for p in folder.rglob("*.png")} == {f"p{page}-d110.png"}  # highlights drawn on it
        assert not list(folder.rglob("*.part"))
        assert (await client.delete(f"/kb/documents/{pdf_id}")).status_code == 204
        assert not folder.exists()  # a deleted document's pages leave the cache
        _is_problem(await client.get(url), 404)


async def test_page_image_bad_requests_are_problem_details(runtime: Runtime, tmp_path: Path) -> None:
    ids, _ = await _ingest(runtime, tmp_path)
    pdf_id, md_id = ids["report.pdf"], ids["orion.md"]
    pages = await runtime.pool.fetchval("SELECT page_count FROM documents WHERE id = $1", pdf_id)
    md_chunk = await runtime.pool.fetchval("SELECT min(id) FROM chunks WHERE document_id = $1", md_id)
    base = f"/kb/documents/{pdf_id}/pages"
    async with _client(runtime) as client:
        for page, status in [("0.png", 400), ("-3.png", 400), (f"{pages + 1}.png", 404), (f"{10**8}.png", 404),
                             (f"{10**30}.png", 400), ("01.png", 400), ("one.png", 400), ("1.jpg", 400), ("1", 400)]:
            _is_problem(await client.get(f"{base}/{page}"), status)
        assert "has" in (await client.get(f"{base}/{pages + 1}.png")).json()["detail"]
        other = _is_problem(await client.get(f"{base}/1.png", params={"highlight": md_chunk}), 404)
        assert f"not part of document {pdf_id}" in other["detail"]
        _is_problem(await client.get(f"{base}/1.png", params={"highlight": 10**12}), 404)
        _is_problem(await client.get(f"{base}/1.png", params={"highlight": 2**63}), 400)
        _is_problem(await client.get(f"{base}/1.png", params={"highlight": 0}), 400)
        _is_problem(await client.get(f"{base}/1.png", params={"highlight": "x"}), 400)
        _is_problem(await client.get("/kb/documents/987654/pages/1.png"), 404)
        md = _is_problem(await client.get(f"/kb/documents/{md_id}/pages/1.png"), 404)
        assert f"/kb/documents/{md_id}/lines" in md["detail"]
        assert (await client.get("/health")).json()["status"] == "ok"


async def test_markdown_lines_mark_the_cited_chunk(runtime: Runtime, tmp_path: Path) -> None:
    ids, _ = await _ingest(runtime, tmp_path)
    md_id, pdf_id = ids["orion.md"], ids["report.pdf"]
    chunk_id, text = await runtime.pool.fetchrow(
        "SELECT id, text FROM chunks WHERE document_id = $1 AND text LIKE '%412 thousand%'", md_id)
    async with _client(runtime) as client:
        r = await client.get(f"/kb/documents/{md_id}/lines", params={"highlight": chunk_id})
        assert r.status_code == 200, r.text
        body = r.json()
        cited = [ln["text"] for ln in body["lines"] if ln["cited"]]
        assert "Orion Mining produced 412 thousand tonnes of copper in 2024." in cited
        assert all(c.strip() in text for c in cited)
        assert "The lost-time injury rate fell to 0.8 per million hours." not in cited
        assert body["total"] == len(MD.splitlines())
        whole = (await client.get(f"/kb/documents/{md_id}/lines", params={"start": 1})).json()
        assert [ln["text"] for ln in whole["lines"]] == MD.splitlines() and not any(ln["cited"] for ln in whole["lines"])
        _is_problem(await client.get(f"/kb/documents/{md_id}/lines", params={"start": 500}), 404)
        _is_problem(await client.get(f"/kb/documents/{md_id}/lines", params={"start": 0}), 400)
        _is_problem(await client.get(f"/kb/documents/{md_id}/lines", params={"count": 401}), 400)
        window = (await client.get(f"/kb/documents/{md_id}/lines", params={"start": 3, "count": 2})).json()
        assert [ln["n"] for ln in window["lines"]] == [3, 4] and window["end"] == 4
        _is_problem(await client.get(f"/kb/documents/{pdf_id}/lines"), 404)
        _is_problem(await client.get("/kb/documents/987654/lines"), 404)


async def test_html_paragraphs_mark_the_cited_chunk(runtime: Runtime, tmp_path: Path) -> None:
    ids, _ = await _ingest(runtime, tmp_path)
    html_id = ids["lynx.html"]
    chunk_id = await runtime.pool.fetchval(
        "SELECT id FROM chunks WHERE document_id = $1 AND text LIKE '%88 thousand%'", html_id)
    async with _client(runtime) as client:
        body = (await client.get(f"/kb/documents/{html_id}/lines", params={"highlight": chunk_id})).json()
        cited = [ln["text"] for ln in body["lines"] if ln["cited"]]
        assert "Lynx Freight moved 88 thousand containers in 2024." in cited
        assert not any("<p>" in ln["text"] for ln in body["lines"])  # paragraphs as parsed, not the raw markup
        assert "Lynx expects flat volumes in 2025." not in cited
        _is_problem(await client.get(f"/kb/documents/{html_id}/pages/1.png"), 404)


async def test_changed_or_missing_source_is_a_clear_error(runtime: Runtime, tmp_path: Path) -> None:
    ids, docs = await _ingest(runtime, tmp_path)
    pdf_id = ids["report.pdf"]
    async with _client(runtime) as client:
        assert (await client.get(f"/kb/documents/{pdf_id}/pages/1.png")).status_code == 200
        (docs / "report.pdf").write_bytes((docs / "report.pdf").read_bytes() + b"\n% edited\n")
        changed = _is_problem(await client.get(f"/kb/documents/{pdf_id}/pages/2.png"), 409)
        assert "changed since it was ingested" in changed["detail"]
        (docs / "report.pdf").unlink()
        gone = _is_problem(await client.get(f"/kb/documents/{pdf_id}/pages/2.png"), 404)
        assert "cannot be read" in gone["detail"] and str(tmp_path) not in gone["detail"]
        cached = await client.get(f"/kb/documents/{pdf_id}/pages/1.png")  # rendered before: still served
        assert cached.status_code == 200 and cached.headers["x-highlights"] == "0"


async def test_previews_need_the_read_token_when_set(runtime: Runtime, tmp_path: Path,
                                                      set_env: SetEnv) -> None:

    ids, _ = await _ingest(runtime, tmp_path)
    runtime.settings = set_env(KB_API_TOKEN="reader")
    page = f"/kb/documents/{ids['report.pdf']}/pages/1.png"
    lines = f"/kb/documents/{ids['orion.md']}/lines"
    async with _client(runtime) as client:
        for url in (page, lines):
            _is_problem(await client.get(url), 401)
            _is_problem(await client.get(url, headers={"Authorization": "Bearer wrong"}), 401)
            assert (await client.get(url, headers={"Authorization": "Bearer reader"})).status_code == 200
        ui = await client.get("/ui/")  # the static UI carries no data: it loads, then asks for the token
        assert ui.status_code == 200


async def test_ui_is_served_with_a_content_security_policy(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        root = await client.get("/")
        assert root.status_code in (301, 302, 307, 308) and root.headers["location"] == "/ui/"
        pages = {path: await client.get(path) for path in ("/ui/", "/ui/app.js", "/ui/app.css", "/ui/missing")}
        for path, r in pages.items():
            csp = r.headers.get("content-security-policy", "")
            assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp, path
            assert r.headers["x-content-type-options"] == "nosniff"
        index = pages["/ui/"]
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        assert '<script src="/ui/app.js"' in index.text and "<script>" not in index.text
        assert " style=" not in index.text and "onclick" not in index.text  # nothing inline for the CSP to block
        assert pages["/ui/app.js"].status_code == 200 and "javascript" in pages["/ui/app.js"].headers["content-type"]
        assert "innerHTML" not in pages["/ui/app.js"].text  # document text only ever goes through textContent
        missing = pages["/ui/missing"]
        assert missing.status_code == 404 and "Page not found" in missing.text
        api = await client.get("/health")
        assert "content-security-policy" not in api.headers  # the API's own responses are unchanged


async def test_the_readme_is_a_help_page_with_heading_anchors(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        r = await client.get("/ui/help")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), r.text[:200]
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert '<h3 id="using-an-llm">Using an LLM</h3>' in r.text  # the answer-mode badge links here
    assert "KB_LLM_BASE_URL" in r.text and "<script" not in r.text


@pytest.mark.unit
def test_the_help_page_escapes_html_and_slugs_headings() -> None:
    from kb.api.ui import help_page, slug

    page = help_page("# Using an LLM\n\n<script>alert(1)</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n").decode()
    assert '<h1 id="using-an-llm">' in page and "<script>" not in page and "&lt;script&gt;" in page
    assert "<table>" in page
    assert slug("Languages: Chinese and other scripts") == "languages-chinese-and-other-scripts"


@pytest.mark.parametrize("name", ["index.html", "app.js", "app.css", "404.html", "favicon.svg"])
def test_static_files_ship_in_the_package(name: str) -> None:
    from importlib.resources import files

    assert (files("kb") / "ui" / "static" / name).is_file()


async def test_ingest_reports_stages_and_failed_files_can_be_retried_or_removed(
        runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ingest import jobs
    from ingest.pipeline import ingest_file
    from kb.runtime import build_ingest_context
    from tests.conftest import finish_job

    docs = tmp_path / "docs"
    docs.mkdir()
    make_report_pdf(docs / "report.pdf", [Sec("Revenue", paragraphs=6), Sec("Risks", paragraphs=6)])
    (docs / "notes.pdf").write_text("Minutes of the board meeting.\nNothing about revenue.\n")
    (docs / "memo.docx").write_text("<!doctype html><html><body><p>memo</p></body></html>")

    seen: list[tuple[str, int, int]] = []  # the pipeline reports each stage as it starts
    ctx = build_ingest_context(runtime, processes=False)
    make_report_pdf(tmp_path / "direct.pdf", [Sec("Outlook", paragraphs=8)])
    outcome = await ingest_file(ctx, tmp_path / "direct.pdf", name="direct.pdf", collection_id=1,
                                progress=lambda *at: seen.append(at))
    assert outcome.status == "ok"
    stages = [s for s, _, _ in seen]
    assert stages[0] == "reading" and stages[-1] == "storing" and {"tree", "embedding"} <= set(stages)
    assert ("tree", outcome.pages, outcome.pages) in seen and seen[-1] == ("storing", outcome.chunks, outcome.chunks)

    monkeypatch.setattr(jobs, "PROGRESS_S", 0.01)
    job = await ingest(runtime, docs, allowed_root=tmp_path)
    assert job.status == "done" and job.counts == {"ok": 1, "failed": 2}, job.counts
    errors = {i.name: i.error for i in job.items}
    assert errors["notes.pdf"].startswith("This file is not a PDF; it looks like plain text")
    assert errors["memo.docx"].startswith("This file is not a .docx document; it looks like an HTML page")
    row = await runtime.pool.fetchrow("SELECT stage, stage_total FROM ingest_job_items WHERE name = 'report.pdf'")
    assert row["stage"] in {"reading", "tree", "chunking", "embedding", "storing"}, row  # the worker wrote where it was
    assert all(i.stage is None for i in job.items)  # shown only while a file runs

    ids = {i.name: i.id for i in job.items}
    async with _client(runtime) as client:
        base = f"/kb/admin/jobs/{job.id}/items"
        _is_problem(await client.post(f"{base}/{ids['report.pdf']}/retry"), 409)  # an ingested file is not retried
        _is_problem(await client.post(f"{base}/999999/retry"), 404)
        _is_problem(await client.post(f"{base}/999999/cancel"), 404)
        _is_problem(await client.post(f"{base}/{ids['report.pdf']}/cancel"), 409)  # a finished file is not cancelled
        # the job ran an hour ago; the hour it then stood finished is not counted in its pages/s after the retry
        await runtime.pool.execute("UPDATE ingest_jobs SET started_at = started_at - interval '1 hour', "
                                   "finished_at = finished_at - interval '1 hour' WHERE id = $1", job.id)
        again = await client.post(f"{base}/{ids['notes.pdf']}/retry")
        assert again.status_code == 200, again.text
        assert again.json()["status"] in {"queued", "running"}
        assert {i["name"]: i["status"] for i in again.json()["items"]}["notes.pdf"] == "pending"
        _is_problem(await client.delete(f"{base}/{ids['notes.pdf']}"), 409)  # queued: not removed
        rerun = await finish_job(runtime, job.id)
        assert rerun.status == "done" and rerun.counts == {"ok": 1, "failed": 2}
        idle = await runtime.pool.fetchval("SELECT idle_seconds FROM ingest_jobs WHERE id = $1", job.id)
        wall = (rerun.finished_at - rerun.started_at).total_seconds()
        assert 3600 <= idle < wall, (idle, wall)
        assert rerun.pages_per_s == pytest.approx(rerun.pages / (wall - idle), rel=0.01) and rerun.pages_per_s > 0.1
        assert (await client.delete(f"{base}/{ids['notes.pdf']}")).status_code == 204
        left = (await client.get(f"/kb/admin/jobs/{job.id}")).json()
        assert [i["name"] for i in left["items"]] == ["memo.docx", "report.pdf"] and left["status"] == "done"


async def test_a_file_cancelled_on_its_own_stores_nothing_even_at_its_write(runtime: Runtime, tmp_path: Path) -> None:
    """A file flagged cancelled while it runs is refused at its write (its worker may not have polled yet); a
    job that never started and is retried counts no idle time."""
    from ingest.jobs import cancel_file, create_job, get_job, retry_item
    from ingest.pipeline import ingest_file
    from kb.runtime import build_ingest_context

    (tmp_path / "one").mkdir()
    make_report_pdf(tmp_path / "one" / "memo.pdf", [Sec("Revenue", paragraphs=4)])
    job_id = await create_job(runtime.pool, collection_id=1, path=tmp_path / "one")
    item_id = (await get_job(runtime.pool, job_id)).items[0].id
    await runtime.pool.execute("UPDATE ingest_job_items SET status = 'running', cancel_requested = true "
                               "WHERE id = $1", item_id)  # as cancel_file leaves a running file
    with build_ingest_context(runtime, processes=False) as ctx:
        outcome = await ingest_file(ctx, tmp_path / "one" / "memo.pdf", name="one/memo.pdf", collection_id=1,
                                    job_id=job_id, item_id=item_id)
    assert outcome.status == "cancelled" and "this file was cancelled" in outcome.error, outcome
    assert await runtime.pool.fetchval("SELECT count(*) FROM documents WHERE name = 'one/memo.pdf'") == 0
    # a job cancelled file by file before it ever started: retried, its pages/s has no idle time to subtract
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "a.md").write_text("# A\n\nText.\n")
    never = await create_job(runtime.pool, collection_id=1, path=tmp_path / "two")
    first = (await get_job(runtime.pool, never)).items[0].id
    assert await cancel_file(runtime.pool, never, first) == "cancelled"  # a queued file: at once
    assert (await get_job(runtime.pool, never)).status == "done"
    await runtime.pool.execute("UPDATE ingest_jobs SET finished_at = finished_at - interval '1 hour' WHERE id = $1",
                               never)
    await retry_item(runtime.pool, never, first)
    assert await runtime.pool.fetchval("SELECT idle_seconds FROM ingest_jobs WHERE id = $1", never) == 0


@pytest.mark.parametrize("labels", [True, False])
async def test_citations_carry_the_printed_page_number(runtime: Runtime, tmp_path: Path, labels: bool) -> None:
    """A report with two front-matter pages (i, ii): physical page 3 prints "1" — from the PDF's page labels,
    or read from its footer when it has none."""
    docs = tmp_path / "docs"
    docs.mkdir()
    make_report_pdf(docs / "front.pdf", [Sec("Revenue", paragraphs=5), Sec("Liquidity", paragraphs=12)],
                    front_matter_pages=2, page_labels=labels, outline=True)
    (docs / "orion.md").write_text(MD)
    job = await ingest(runtime, docs, allowed_root=tmp_path)
    assert job.counts == {"ok": 2}
    async with _client(runtime) as client:
        r = await client.post("/kb/query", json={"query": "What does the report say about liquidity?",
                                                 "strategy": "semantic", "top_docs": 2})
        assert r.status_code == 200, r.text
        cites = r.json()["citations"]
        pdf = [c for c in cites if c["unit"] == "page"]
        assert pdf, cites
        for c in pdf:
            assert c["printed_page"] == (str(c["pages"][0] - 2) if c["pages"][0] > 2 else "i" * c["pages"][0]), c
        assert all(c["printed_page"] is None for c in cites if c["unit"] != "page")
        streamed = await client.post("/kb/query", json={"query": "What does the report say about liquidity?",
                                                        "strategy": "semantic", "top_docs": 2, "stream": True})
        assert "event: citations" in streamed.text, streamed.text[:300]
        assert '"printed_page":"' in streamed.text.split("event: citations", 1)[1].split("event:", 1)[0]


async def test_printed_pages_are_stored_at_ingest_and_read_once_for_older_documents(runtime: Runtime,
                                                                                    tmp_path: Path) -> None:
    """Issue 37 (the first seconds after a start): the printed page labels are read at ingest and stored, so a
    citation needs neither the source file nor a pass over its pages; a document stored before (no labels) has
    them read by the first queries that cite it — once, however many ask at the same time — and stored."""
    import asyncio

    from ingest import page_labels

    docs = tmp_path / "docs"
    docs.mkdir()
    make_report_pdf(docs / "front.pdf", [Sec("Revenue", paragraphs=5), Sec("Liquidity", paragraphs=12)],
                    front_matter_pages=2)
    job = await ingest(runtime, docs, allowed_root=tmp_path)
    assert job.counts == {"ok": 1}
    doc_id = job.items[0].document_id
    stored = await runtime.pool.fetchval("SELECT printed_pages FROM documents WHERE id = $1", doc_id)
    labels = {int(k): v for k, v in json.loads(stored).items()}
    assert labels[3] == "1" and labels[4] == "2" and all(labels[p] == str(p - 2) for p in labels if p > 2), labels
    question = {"query": "What does the report say about liquidity?", "strategy": "semantic"}
    (docs / "front.pdf").rename(tmp_path / "moved.pdf")  # the source is gone: the stored labels still serve
    page_labels._cache.clear()
    async with _client(runtime) as client:
        r = await client.post("/kb/query", json=question)
        cites = [c for c in r.json()["citations"] if c["unit"] == "page"]
        assert cites and all(c["printed_page"] == str(c["pages"][0] - 2) for c in cites if c["pages"][0] > 2), cites
        # as if ingested before the labels were stored: the first questions read them from the source, once
        (tmp_path / "moved.pdf").rename(docs / "front.pdf")
        await runtime.pool.execute("UPDATE documents SET printed_pages = NULL WHERE id = $1", doc_id)
        page_labels._cache.clear()
        reads = 0
        real = page_labels.printed_labels

        def counted(data: bytes) -> dict[int, str]:
            nonlocal reads
            reads += 1
            return real(data)

        page_labels.printed_labels = counted  # type: ignore[assignment]
        try:
            answers = await asyncio.gather(*(client.post("/kb/query", json=question) for _ in range(4)))
        finally:
            page_labels.printed_labels = real  # type: ignore[assignment]
        assert reads == 1 and all(a.status_code == 200 for a in answers)
        for a in answers:
            cites = [c for c in a.json()["citations"] if c["unit"] == "page" and c["pages"][0] > 2]
            assert cites and all(c["printed_page"] == str(c["pages"][0] - 2) for c in cites), cites
    again = await runtime.pool.fetchval("SELECT printed_pages FROM documents WHERE id = $1", doc_id)
    assert {int(k): v for k, v in json.loads(again).items()} == labels


async def test_original_file_section_chunks_and_overview(runtime: Runtime, tmp_path: Path) -> None:
    ids, docs = await _ingest(runtime, tmp_path)
    async with _client(runtime) as client:
        pdf = await client.get(f"/kb/documents/{ids['report.pdf']}/file")
        assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
        assert pdf.content == (docs / "report.pdf").read_bytes()
        assert pdf.headers["content-security-policy"] == "sandbox" and "inline" in pdf.headers["content-disposition"]
        html = await client.get(f"/kb/documents/{ids['lynx.html']}/file")  # never served as a page to run
        assert html.headers["content-type"].startswith("text/plain") and "<h1>Lynx" in html.text

        tree = (await client.get(f"/kb/documents/{ids['orion.md']}")).json()["tree"]
        root = next(n for n in tree if n["parent_id"] is None)
        section = await client.get(f"/kb/documents/{ids['orion.md']}/chunks", params={"node": root["node_id"]})
        assert section.status_code == 200, section.text
        body = section.json()
        stored = await runtime.pool.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", ids["orion.md"])
        assert len(body["chunks"]) == stored and not body["truncated"]  # the root holds every chunk
        assert any("412 thousand tonnes" in c["text"] for c in body["chunks"])
        pdf_tree = (await client.get(f"/kb/documents/{ids['report.pdf']}")).json()["tree"]
        leaf = next(n for n in pdf_tree if n["title"] == "Liquidity")
        pages = (await client.get(f"/kb/documents/{ids['report.pdf']}/chunks", params={"node": leaf["node_id"]})).json()
        assert pages["title"] == "Liquidity" and pages["chunks"]
        assert all(leaf["start_index"] <= c["page"] <= leaf["end_index"] for c in pages["chunks"])  # with their pages
        _is_problem(await client.get(f"/kb/documents/{ids['orion.md']}/chunks", params={"node": "nope"}), 404)

        overview = (await client.get("/kb/collections/default/overview")).json()
        assert overview["documents"] == 3 and overview["source"] == "documents"  # not the samples
        assert overview["summary"].startswith("3 documents (") and "PDF" in overview["summary"]
        assert 1 <= len(overview["examples"]) <= 4
        _is_problem(await client.get("/kb/collections/nowhere/overview"), 404)

        (docs / "report.pdf").write_bytes(b"%PDF-1.7 changed")
        _is_problem(await client.get(f"/kb/documents/{ids['report.pdf']}/file"), 409)


async def test_odd_ui_paths_are_not_found_not_server_errors(runtime: Runtime) -> None:
    """A NUL byte or a very long name under /ui/ is a 404, not a 500 (no token is needed to ask)."""
    async with _client(runtime) as client:
        for path in ("/ui/%00", "/ui/a%00b.js", "/ui/" + "x" * 5000, "/ui/" + "é" * 2000 + ".css"):
            r = await client.get(path)
            assert r.status_code == 404, (path[:40], r.status_code, r.text[:200])


def test_the_overview_counts_one_company_under_its_several_names() -> None:
    from datetime import UTC, datetime

    from ingest.store import DocumentInfo
    from kb.api.ui import company_names, summarize

    def doc(name: str, company: str, year: int) -> DocumentInfo:
        now = datetime.now(UTC)
        return DocumentInfo(id=1, name=name, source_path=name, sha256="0", file_type="pdf",
                            metadata={"company": company, "fiscal_year": year}, title=name, description="",
                            page_count=3, tree_mode="pages", node_count=1, chunk_count=1, warnings=[], status="ready",
                            created_at=now, updated_at=now)

    docs = [doc("a.pdf", "Amcor", 2023), doc("b.pdf", "Amcor PLC", 2023), doc("c.pdf", "AMCOR P.L.C.", 2022),
            doc("d.pdf", "Best Buy Co., Inc.", 2019), doc("e.pdf", "Best Buy", 2017), doc("f.pdf", "3M Company", 2022)]
    assert company_names(docs) == ["3M Company", "Amcor", "Best Buy"]
    assert "3M Company, Amcor, Best Buy" in summarize(docs)
