"""The web UI end to end in a real headless Chromium (Debian's ``chromium``, driven by Playwright) against a
live ``kb run`` server on the real embedded Postgres with the sample reports. Screenshots of every page
go to a temporary folder (printed at the end; KB_UI_SHOTS=<dir> keeps them somewhere else)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pymupdf
import pytest

from router.synthesize import readable
from tests.conftest import new_database
from tests.live import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (apt-get install -y chromium): browser tests skipped"),
]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ADMIN = "ui-admin-" + uuid.uuid4().hex[:8]
QUESTION = "What was Helios Robotics revenue in fiscal 2023?"
TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class Server:
    url: str
    root: Path  # its KB_INGEST_ROOT


@pytest.fixture(scope="module")
async def server(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    """``kb run`` (samples ingested on first start) with an admin token, on its own database."""
    root = tmp_path_factory.mktemp("ui-server")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATABASE_URL": await new_database(pg_uri, 'ui'), "KB_DATA_DIR": str(root / "data"),
                "KB_INGEST_ROOT": str(root), "KB_EMBEDDING_MODEL": "hash:384", "KB_INGEST_WORKERS": "0",
                "KB_ADMIN_TOKEN": ADMIN})
    log = root / "server.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "kb.cli", "run", "--port", str(port),
                                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                                    start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.returncode is not None:
                raise AssertionError(f"kb run exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"kb run not ready:\n{log.read_text()[-3000:]}")
            if "Ready" in log.read_text(errors="replace"):
                try:
                    async with httpx.AsyncClient() as client:
                        if (await client.get(f"{base}/health", timeout=2)).status_code == 200:
                            break
                except httpx.HTTPError:
                    pass
            await asyncio.sleep(0.5)
        assert f"Open the web UI at http://127.0.0.1:{port}/" in log.read_text()
        yield Server(url=base, root=root)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), timeout=30)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


@pytest.fixture(scope="module")
def shots() -> Iterator[Path]:
    folder = Path(os.environ.get("KB_UI_SHOTS") or tempfile.mkdtemp(prefix="kb-ui-shots-"))
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    print(f"\nUI screenshots: {folder}")


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[object]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        await b.close()


@pytest.fixture
async def page(browser, server: Server):
    """A fresh tab (its own session storage); page errors fail the test."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, base_url=server.url)
    tab = await context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    await context.close()
    assert not errors, errors


async def _ask(page, question: str, strategy: str = "auto") -> None:
    await page.locator("#advanced").evaluate("d => { d.open = true; }")  # strategy and sizes are under Advanced
    await page.select_option("#strategy", strategy)
    await page.fill("#question", question)
    await page.click("#ask-btn")


async def _ingested(page, folder: str) -> dict:
    """``folder`` (under the ingest root) ingested through the admin API; its finished job."""
    headers = {"Authorization": f"Bearer {ADMIN}"}
    created = await page.request.post("/kb/admin/ingest", data={"path": folder}, headers=headers)
    assert created.status == 202, await created.text()
    job_id = (await created.json())["job_id"]
    for _ in range(600):
        job = await (await page.request.get(f"/kb/admin/jobs/{job_id}", headers=headers)).json()
        if job["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.5)
    assert job["status"] == "done", job
    return job


async def _wait_answer(page, turn: int) -> None:
    await page.wait_for_selector(f".turn:nth-of-type({turn}) .turn-a[aria-busy='false']")


@pytest.mark.parametrize("strategy", ["auto", "metadata", "semantic", "description"])
async def test_ask_streams_an_answer_with_linked_citations(page, shots: Path, strategy: str) -> None:
    await page.goto("/")
    assert page.url.endswith("/ui/")
    await page.wait_for_selector("#collection option[value='default']", state="attached")
    await _ask(page, QUESTION, strategy)
    await _wait_answer(page, 1)
    answer = await page.inner_text("#answer-1")
    assert len(answer) > 40 and "No answer" not in answer
    assert await page.locator(".progress li.done").count() == 4
    assert await page.locator(".citation").count() >= 1
    assert await page.locator(".routed .chip").count() >= 1
    markers = page.locator("#answer-1 a.cite")
    assert await markers.count() >= 1, answer
    n = await markers.first.inner_text()
    assert await markers.first.get_attribute("href") == f"#cite-1-{n}"
    await markers.first.click()
    assert await page.evaluate("document.activeElement.closest('li.citation').id") == f"cite-1-{n}"
    citation = page.locator(f"#cite-1-{n}")
    assert (await citation.locator(".doc").inner_text()).endswith((".pdf", ".md"))
    assert (await citation.locator(".chip").inner_text()).startswith(("p.", "pp.", "line", "¶"))
    await page.screenshot(path=str(shots / f"ask-{strategy}.png"), full_page=True)


async def test_follow_up_keeps_the_history_and_the_trace_is_readable(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await _ask(page, QUESTION)
    await _wait_answer(page, 1)
    async with page.expect_request(lambda r: r.url.endswith("/kb/query")) as req:
        await _ask(page, "And how did its operating margin develop over the same year?")
    sent = (await req.value).post_data_json
    assert [t["role"] for t in sent["history"]] == ["user", "assistant"]
    assert sent["history"][0]["content"] == QUESTION and sent["stream"] is True
    await _wait_answer(page, 2)
    assert await page.locator(".turn").count() == 2
    trace = page.locator(".turn:nth-of-type(2) details.trace")
    assert await trace.get_attribute("open") is None  # collapsed by default
    await trace.locator("summary").click()
    sections = await trace.locator(".trace-section h4").all_inner_texts()
    for title in ("Routing candidates", "Chosen sections", "Evidence chunks", "Timings", "LLM usage"):
        assert any(s.startswith(title) for s in sections), sections
    chunk_head = await trace.locator(".trace-section", has_text="Evidence chunks").locator("th").all_inner_texts()
    assert {"DENSE", "BM25", "FUSED"} <= {h.upper() for h in chunk_head}
    assert await trace.locator(".bars .bar").count() >= 3
    routing = await trace.locator(".trace-section", has_text="Routing candidates").inner_text()
    assert "{" not in routing  # a table, not a JSON dump
    await page.screenshot(path=str(shots / "ask-trace.png"), full_page=True)


async def test_citation_opens_the_highlighted_page_and_markdown_lines(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await _ask(page, "What was Aurora Pharma total revenue in 2023?", "metadata")
    await _wait_answer(page, 1)
    await page.locator(".citation", has_text=".pdf").first.get_by_role("button", name=re.compile("View source")).click()
    await page.wait_for_selector(".viewer #page-image")  # beside the answer, not in a modal over it
    assert await page.locator("#preview[open]").count() == 0
    size = await page.evaluate("(() => { const i = document.getElementById('page-image');"
                               " return i.decode().then(() => [i.naturalWidth, i.naturalHeight]); })()")
    assert size[0] > 500 and size[1] > size[0]
    assert (await page.get_attribute("#page-image", "src")).startswith("blob:")
    await page.screenshot(path=str(shots / "citation-page.png"))
    await page.click(".viewer button[aria-label='Close the source']")
    assert await page.locator(".viewer:not([hidden])").count() == 0

    await page.click("#new-chat")
    await _ask(page, QUESTION, "metadata")
    await _wait_answer(page, 1)
    await page.locator(".turn .citation", has_text=".md").first.get_by_role("button", name=re.compile("View source")).click()
    await page.wait_for_selector(".viewer #source-lines")
    assert await page.locator("#source-lines .cited").count() >= 1
    await page.screenshot(path=str(shots / "citation-lines.png"))


async def test_documents_tree_pages_and_not_found(page, shots: Path) -> None:
    await page.goto("/ui/#/documents")
    await page.wait_for_selector(".doc-table")
    assert await page.locator(".doc-table tbody tr").count() == 6
    await page.screenshot(path=str(shots / "documents.png"), full_page=True)
    await page.get_by_role("link", name="Aurora Pharma Annual Report 2023").click()
    await page.wait_for_selector(".outline")
    assert "pages" in await page.inner_text(".page-head")
    nodes = page.locator(".node-btn")
    assert await nodes.count() >= 5
    await nodes.nth(1).click()
    await page.wait_for_selector("#node-pane .page-img")
    assert await page.locator("#node-pane h2").inner_text() == await nodes.nth(1).inner_text()
    await page.screenshot(path=str(shots / "document-tree.png"), full_page=True)
    toggle = page.locator(".toggle[aria-expanded]").first
    expanded = await toggle.get_attribute("aria-expanded")
    await toggle.focus()
    await page.keyboard.press("Enter")  # keyboard: the outline opens and closes
    assert await toggle.get_attribute("aria-expanded") != expanded

    await page.goto("/ui/#/documents/987654")
    await page.wait_for_selector(".state-error")
    assert "Document not found" in await page.inner_text("#view")
    await page.screenshot(path=str(shots / "document-404.png"))
    await page.goto("/ui/#/nowhere")
    assert "Page not found" in await page.inner_text("#view")
    await page.goto("/ui/no-such-page")
    assert "Page not found" in await page.inner_text("main")


async def test_upload_ingest_with_the_admin_token(page, shots: Path, tmp_path: Path) -> None:
    from playwright.async_api import expect

    memo = tmp_path / "zephyr-memo.md"
    memo.write_text("# Zephyr Airlines memo\n\n## Fleet\n\nZephyr Airlines operated 57 aircraft in 2024.\n")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nthis is not really a PDF")
    await page.goto("/ui/#/ingest")
    await page.wait_for_selector("#jobs .alert")  # no token yet: a readable 401
    alert = await page.inner_text("#jobs .alert")
    assert "Unauthorized (401)" in alert and "access token" in alert
    await page.screenshot(path=str(shots / "ingest-401.png"))

    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.click("#token-form button[type=submit]")
    assert ADMIN not in page.url
    assert await page.evaluate("sessionStorage.getItem('kb.token')") == ADMIN
    await page.wait_for_selector("#jobs .job")
    await page.set_input_files("#upload-files", [str(memo), str(broken)])
    await page.click("#upload-btn")
    await page.wait_for_selector("#upload-form .notice")
    memo_job = page.locator(".job", has_text="zephyr-memo")
    broken_job = page.locator(".job", has_text="broken")
    await memo_job.locator(".job-head .chip", has_text="done").wait_for()
    await broken_job.locator(".job-head .chip", has_text="done").wait_for()
    assert await memo_job.locator("td .chip").inner_text() == "ok"
    assert await broken_job.locator("td .chip").inner_text() == "failed"
    reason = await broken_job.locator(".item-error").inner_text()
    assert reason.startswith("corrupt or unreadable PDF")  # the broken file fails alone, with its reason
    assert "1/1" in await memo_job.locator(".stats").inner_text()
    await page.screenshot(path=str(shots / "ingest-done.png"), full_page=True)
    await memo_job.locator("a", has_text="zephyr-memo").click()
    await page.wait_for_selector(".outline")
    assert "Zephyr Airlines" in await page.inner_text("#view")

    await page.goto("/ui/#/documents")  # delete (admin), after a confirmation
    row = page.locator(".doc-table tbody tr", has_text="zephyr-memo")
    await row.wait_for()
    page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await row.locator("button", has_text="Delete").click()

    await expect(page.locator(".doc-table tbody tr")).to_have_count(6)
    assert "zephyr-memo" not in await page.inner_text(".doc-table")


async def test_folder_ingest_under_the_ingest_root(page, server: Server, shots: Path) -> None:
    folder = server.root / "memos"
    folder.mkdir()
    (folder / "kestrel.md").write_text("# Kestrel Rail memo\n\nKestrel Rail ran 212 trains a day in 2024.\n")
    (folder / "notes.xyz").write_text("not a supported format")
    await page.goto("/ui/#/ingest")
    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.press("#token-input", "Enter")  # keyboard: the dialog form submits
    await page.wait_for_selector("#folder-collection option[value='default']", state="attached")
    await page.fill("#folder-path", "../outside")
    await page.click("#folder-form button[type=submit]")
    await page.wait_for_selector("#folder-form .alert")
    assert "outside the ingest root" in await page.inner_text("#folder-form .alert")
    await page.fill("#folder-path", "memos")
    await page.click("#folder-form button[type=submit]")
    await page.wait_for_selector("#folder-form .notice")
    job = page.locator(".job", has_text="memos")
    await job.locator(".job-head .chip", has_text="done").wait_for()
    statuses = dict(zip(await job.locator("tbody td:first-child").all_inner_texts(),
                        await job.locator("tbody td .chip").all_inner_texts(), strict=True))
    assert statuses == {"memos/kestrel.md": "ok", "memos/notes.xyz": "unsupported"}, statuses  # under the root
    await page.screenshot(path=str(shots / "ingest-folder.png"), full_page=True)


async def test_ask_this_document_scopes_the_question_to_it(page, shots: Path) -> None:
    await page.goto("/ui/#/documents")
    await page.wait_for_selector(".doc-table")
    await page.get_by_role("link", name="Aurora Pharma Annual Report 2023").click()
    await page.wait_for_selector("#ask-this")
    await page.click("#ask-this")
    await page.wait_for_selector("#question")
    assert await page.input_value("#documents") == "aurora-pharma-2023-annual-report.pdf"
    assert await page.locator("#advanced").evaluate("d => d.open")  # the scope is shown, not hidden
    async with page.expect_request(lambda r: r.url.endswith("/kb/query")) as req:
        await page.fill("#question", "What was revenue in 2023?")  # a question that names no company
        await page.click("#ask-btn")
    assert (await req.value).post_data_json["documents"] == ["aurora-pharma-2023-annual-report.pdf"]
    await _wait_answer(page, 1)
    docs = {await c.inner_text() for c in await page.locator(".citation .doc").all()}
    assert docs == {"aurora-pharma-2023-annual-report.pdf"}, docs
    await page.screenshot(path=str(shots / "ask-this-document.png"), full_page=True)
    await page.goto("/ui/#/documents")  # handed over once: the next visit to Ask is not scoped
    await page.goto("/ui/#/ask")
    assert await page.input_value("#documents") == ""


async def test_api_error_shows_a_readable_message(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await _ask(page, "revenue " * 600)
    await page.wait_for_selector(".turn-a .alert")
    text = await page.inner_text(".turn-a .alert")
    assert "Invalid request (400)" in text and "4000" in text and "query" in text  # the API's own words
    await page.locator("#advanced").evaluate("d => { d.open = true; }")  # filters are under Advanced
    await page.fill("#filters", "{not json")
    await page.fill("#question", QUESTION)
    await page.click("#ask-btn")
    assert "Filters are not valid JSON" in await page.inner_text("#form-error")
    assert await page.input_value("#question") == QUESTION  # nothing was sent: the question stays
    await page.screenshot(path=str(shots / "ask-errors.png"), full_page=True)


async def test_stream_cut_by_the_client_leaves_the_server_healthy(page, server: Server) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        for _ in range(3):
            async with client.stream("POST", "/kb/query", json={"query": QUESTION, "stream": True}) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                async for line in r.aiter_lines():
                    assert line.startswith("event:")
                    break
        assert (await client.get("/health")).json()["status"] == "ok"
        whole = await client.post("/kb/query", json={"query": QUESTION, "include_trace": False})
        assert whole.status_code == 200 and whole.json()["citations"]
        async def slow(route) -> None:  # the answer takes long enough to be stopped
            await asyncio.sleep(1.5)
            await route.continue_()

        await page.route("**/kb/query", slow)
        await page.goto("/ui/#/ask")
        await _ask(page, QUESTION)
        waiting = page.locator(".progress li.active")  # the progress state shows while waiting
        assert await waiting.inner_text() == "Choosing documents"
        await page.click(".turn-a button.stop")
        await page.wait_for_selector(".turn-a[aria-busy='false']")
        assert "Stopped." in await page.inner_text(".turn-a")
        await page.unroute("**/kb/query")
        await _ask(page, QUESTION)  # a tab that leaves mid-answer
        await page.goto("/ui/#/documents")
        await page.wait_for_selector(".doc-table")
        assert (await client.get("/health")).json()["status"] == "ok"


UNLABELLED = """[...document.querySelectorAll('input, select, textarea, button')]
  .filter((e) => e.offsetParent !== null || e.closest('details'))
  .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
  .map((e) => e.outerHTML.slice(0, 80))"""


async def test_labels_and_keyboard_only_use(page) -> None:
    for route in ("/ui/#/ask", "/ui/#/ingest", "/ui/#/documents"):
        await page.goto(route)
        await page.wait_for_selector("select option", state="attached")
        assert await page.evaluate(UNLABELLED) == [], route
    await page.reload()
    await page.wait_for_selector(".doc-table")
    await page.keyboard.press("Tab")  # on the documents page: the first stop is the skip link
    assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
    await page.goto("/ui/#/ask")
    await page.wait_for_selector("#collection option", state="attached")
    await page.focus("#question")
    await page.keyboard.type(QUESTION)
    await page.keyboard.press("Enter")  # Enter asks (Shift+Enter is a new line)
    await _wait_answer(page, 1)
    await page.focus("#answer-1 a.cite")
    await page.keyboard.press("Enter")  # a marker moves focus to its citation's button
    assert await page.evaluate("document.activeElement.closest('li.citation') !== null")
    await page.keyboard.press("Enter")  # … which opens the page or lines beside the answer
    await page.wait_for_selector(".viewer #page-image, .viewer #source-lines")
    await page.keyboard.press("Escape")
    assert await page.locator(".viewer:not([hidden])").count() == 0


async def test_document_text_is_never_markup(page, tmp_path: Path) -> None:
    hostile = tmp_path / "quokka-notes.md"
    payload = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    hostile.write_text(f"# Quokka Shipping {payload}\n\n## Fleet {payload}\n\n"
                       f"Quokka Shipping operated 31 container vessels in 2024. {payload}\n")
    await page.goto("/ui/#/ingest")
    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.press("#token-input", "Enter")
    await page.set_input_files("#upload-files", str(hostile))
    await page.click("#upload-btn")
    await page.locator(".job", has_text="quokka-notes").locator(".job-head .chip", has_text="done").wait_for()
    await page.goto("/ui/#/ask")
    await _ask(page, "How many container vessels did Quokka Shipping operate in 2024?", "semantic")
    await _wait_answer(page, 1)
    cite = page.locator(".citation", has_text="quokka-notes")
    assert await cite.count() >= 1
    assert "<img src=x" in await cite.first.inner_text()  # shown as text …
    await cite.first.get_by_role("button", name=re.compile("View source")).click()
    await page.wait_for_selector(".viewer #source-lines .cited")
    assert "<script>" in await page.inner_text("#source-lines")
    await page.goto("/ui/#/documents")
    row = page.locator(".doc-table tbody tr", has_text="quokka-notes")
    await row.locator("a").click()
    await page.wait_for_selector(".outline")
    assert "<img" in await page.inner_text(".outline")
    # … and never as markup: no element was created from it and nothing ran
    assert await page.locator("#view img, #view script, .citation img").count() == 0
    assert await page.evaluate("window.pwned === undefined")


FACTS_QUESTION = "Companies: Acme Holdings, Inc. and Bolt Corp. Which company has the highest 'Total Liabilities'?"


@pytest.fixture(scope="module")
async def filings(server: Server) -> dict[str, int]:
    """Two generated 10-K text filings, a PDF statement page and a memo in their own collection ``filings`` (a folder ingest through
    the admin API): document name → id."""
    from tests.factgen import figures, statement_pdf, text_filing

    folder = server.root / "filings"
    folder.mkdir()
    acme = text_filing("Acme Holdings, Inc.", 2023, figures(1_500, -250, cash=320, liabilities=900, eps=-0.05),
                       figures(1_200, 80, cash=410, liabilities=700, eps=0.02))
    total = next(ln for ln in acme.splitlines() if ln.startswith("Total current liabilities"))
    deposits = "Customer deposits".ljust(len(total) - 36) + f"{'25':>18}{'20':>18}"  # a line outside the vocabulary
    (folder / "acme-2023.txt").write_text(acme.replace(total, f"{deposits}\n{total}", 1))
    (folder / "bolt-2023.txt").write_text(text_filing(
        "Bolt Corp", 2023, figures(8_000, 900, cash=2_500, liabilities=4_000, eps=1.25),
        figures(7_000, 700, cash=2_000, liabilities=3_500, eps=1.01)))
    statement_pdf(folder / "delta-2023.pdf", "Delta Motors")
    (folder / "memo.md").write_text("# Travel policy\n\nEmployees book economy class for flights under six hours.\n")
    auth = {"Authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(base_url=server.url, headers=auth, timeout=30) as client:
        assert (await client.post("/kb/collections", json={"name": "filings"})).status_code == 201
        job = (await client.post("/kb/admin/ingest", json={"path": "filings", "collection": "filings"})).json()
        deadline = time.monotonic() + 120
        while (status := (await client.get(f"/kb/admin/jobs/{job['job_id']}")).json())["status"] != "done":
            assert status["status"] in ("queued", "running") and time.monotonic() < deadline, status
            await asyncio.sleep(0.5)
        assert {i["name"]: i["status"] for i in status["items"]} == dict.fromkeys(
            ("filings/acme-2023.txt", "filings/bolt-2023.txt", "filings/delta-2023.pdf", "filings/memo.md"), "ok"), status
        docs = (await client.get("/kb/documents", params={"collection": "filings"})).json()
    return {d["name"].removeprefix("filings/"): d["id"] for d in docs}  # named by their path under the root


async def test_document_page_lists_the_facts_with_links_to_their_lines(page, server: Server, filings: dict[str, int],
                                                                      shots: Path) -> None:
    acme = filings["acme-2023.txt"]
    async with httpx.AsyncClient(base_url=server.url) as client:
        rows = (await client.get(f"/kb/documents/{acme}/facts", params={"concept": "total_liabilities"})).json()
        everything = (await client.get(f"/kb/documents/{acme}/facts")).json()
    line = next(r["line"] for r in rows if r["period_end"] == "2023-12-31")
    await page.goto(f"/ui/#/documents/{acme}")
    await page.wait_for_selector(".outline")
    tab = page.get_by_role("tab", name="Financial facts")
    await tab.click()
    assert page.url.endswith(f"#/documents/{acme}/facts")  # the tab is an address of its own
    await page.wait_for_selector("#facts-pane .facts-table")
    assert await page.locator("#tabpanel-outline").is_hidden()
    groups = await page.locator(".facts-group h3").all_text_contents()
    assert [g.split(" (")[0] for g in groups] == ["Income statement", "Balance sheet", "Cash flow statement"], groups
    named = sum(1 for r in everything if r["concept"])
    assert await tab.inner_text() == f"Financial facts ({named})"
    assert await page.locator(".facts-table tbody tr").count() == named  # measures of the vocabulary only
    row = page.locator(".facts-table tbody tr", has_text="Total liabilities").first
    cells = await row.locator("td").all_inner_texts()
    assert cells[:5] == ["Total liabilities", "Total liabilities", "at 2023-12-31", "900 (thousands)", "USD"], cells
    await page.screenshot(path=str(shots / "document-facts.png"), full_page=True)

    await row.locator("button").click()  # the source: the text lines viewer at that line, highlighted
    await page.wait_for_selector("#preview[open] #source-lines .cited")
    cited = page.locator("#source-lines .cited")
    assert await cited.count() == 1
    assert (await cited.locator("span").all_inner_texts())[0] == str(line)
    assert (await cited.locator("span").nth(1).inner_text()).startswith("Total liabilities")
    assert await page.locator("#source-lines div").count() > 10  # with the statement around it
    assert f"line {line}" in await page.inner_text("#preview-sub")
    await page.screenshot(path=str(shots / "document-facts-line.png"))
    await page.keyboard.press("Escape")

    await page.check("#facts-all")  # every statement line, those outside the vocabulary too
    assert await page.locator(".facts-table tbody tr").count() == len(everything) > named
    assert await page.locator(".facts-table tbody tr", has_text="Customer deposits").count() >= 1
    assert await page.evaluate(UNLABELLED) == []
    await tab.focus()
    await page.keyboard.press("ArrowLeft")  # keyboard: arrows move between the tabs
    assert await page.get_by_role("tab", name="Outline").get_attribute("aria-selected") == "true"
    assert await page.evaluate("document.activeElement.id") == "tab-outline"
    assert await page.locator("#tabpanel-facts").is_hidden()

    await page.goto(f"/ui/#/documents/{filings['delta-2023.pdf']}/facts")  # a PDF's facts open their page
    row = page.locator(".facts-table tbody tr", has_text="Net sales").first
    await row.wait_for()
    assert (await row.locator("td").all_inner_texts())[3:] == ["3,642 (millions)", "USD", "p. 2"]
    await row.locator("button").click()
    await page.wait_for_selector("#preview[open] #page-image")
    assert "p. 2" in await page.inner_text("#preview-sub")
    await page.screenshot(path=str(shots / "document-facts-page.png"))
    await page.keyboard.press("Escape")

    await page.goto(f"/ui/#/documents/{filings['memo.md']}/facts")
    await page.wait_for_selector("#facts-pane .state")
    assert "No statement facts were found in this document." in await page.inner_text("#facts-pane")
    assert await page.get_by_role("tab", name="Financial facts (0)").get_attribute("aria-selected") == "true"


async def test_answer_from_facts_shows_the_table_it_used(page, filings: dict[str, int], shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await page.wait_for_selector("#collection option[value='filings']", state="attached")
    await page.select_option("#collection", "filings")
    await _ask(page, FACTS_QUESTION)
    await _wait_answer(page, 1)
    answer = await page.inner_text("#answer-1")
    assert "Bolt Corp has the highest total liabilities" in answer, answer
    table = page.locator(".turn-a .answer-facts")
    assert await table.locator("h3").text_content() == "Computed from these statement facts"
    rows = table.locator("tbody tr")
    assert await rows.count() == 2
    texts = await rows.all_inner_texts()
    acme = next(t for t in texts if "Acme Holdings" in t)
    bolt = next(t for t in texts if "Bolt Corp" in t)
    assert "Total liabilities" in acme and "at 2023-12-31" in acme and "900 (thousands)" in acme, acme
    assert "4,000 (thousands)" in bolt, bolt
    in_text = {await a.inner_text() for a in await page.locator("#answer-1 a.cite").all()}
    marker = rows.filter(has_text="Bolt Corp").locator("a.cite")
    n = await marker.inner_text()
    assert n in in_text and await marker.get_attribute("href") == f"#cite-1-{n}"
    assert "bolt-2023.txt" in await page.inner_text(f"#cite-1-{n}")
    await page.screenshot(path=str(shots / "ask-facts.png"), full_page=True)
    await marker.click()  # the same target as the marker in the text: the citation, whose button opens the line
    assert await page.evaluate("document.activeElement.closest('li.citation').id") == f"cite-1-{n}"
    await page.keyboard.press("Enter")
    await page.wait_for_selector(".viewer #source-lines .cited")
    assert (await page.locator("#source-lines .cited span").nth(1).inner_text()).startswith("Total liabilities")
    await page.screenshot(path=str(shots / "ask-facts-line.png"))


# ---------------------------------------------------------------- issue 24: the second pass

SHOTS_24 = Path(os.environ.get("KB_UI_SHOTS_24", "")) if os.environ.get("KB_UI_SHOTS_24") else None


def _shot(shots: Path, name: str) -> str:
    """Where a screenshot goes (also under KB_UI_SHOTS_24 when set, for looking at them)."""
    if SHOTS_24 is not None:
        SHOTS_24.mkdir(parents=True, exist_ok=True)
        return str(SHOTS_24 / name)
    return str(shots / name)


async def test_first_screen_offers_the_collection_and_its_example_questions(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    examples = page.locator("#examples button.example")
    await examples.first.wait_for()
    summary = await page.inner_text("#collection-summary")
    assert " documents (" in summary and "PDF" in summary and "Markdown" in summary, summary
    first = await examples.first.inner_text()
    assert first == "What was Helios Robotics' revenue in fiscal 2022?"  # samples/QUESTIONS.md, Q1
    assert await page.locator("#advanced").get_attribute("open") is None  # strategy and sizes under Advanced
    labels = await page.locator("#advanced label").all_text_contents()
    assert {"How to pick documents", "Documents to read", "Passages to cite"} <= set(labels), labels
    assert await page.inner_text("#answer-mode") == "Offline · extractive answers"
    await page.locator(".mode-help summary").click()
    assert "KB_LLM_BASE_URL" in await page.inner_text(".mode-pop")
    assert await page.get_attribute("#llm-help", "href") == "/ui/help#using-an-llm"
    await page.screenshot(path=_shot(shots, "ask-first-screen.png"), full_page=True)
    async with page.expect_request(lambda r: r.url.endswith("/kb/query")) as req:
        await examples.first.click()
    sent = (await req.value).post_data_json
    assert sent["query"] == first and sent["strategy"] == "metadata"  # the strategy the sample question shows
    await _wait_answer(page, 1)
    assert "412.6" in await page.inner_text("#answer-1")


async def test_the_token_button_is_quiet_when_no_token_is_configured(page) -> None:
    """With tokens configured the access-token button is a normal button; a server that has none (its
    capabilities say so) shows it quietly."""
    await page.goto("/ui/#/ask")
    await page.wait_for_selector("#collection option", state="attached")
    assert "quiet" not in (await page.get_attribute("#token-btn", "class") or "")  # this server has tokens

    async def no_tokens(route) -> None:  # noqa: ANN001 - playwright's Route
        caps = await (await route.fetch()).json()
        await route.fulfill(json={**caps, "read_token": False, "admin_token": False})

    await page.route("**/kb/capabilities", no_tokens)
    await page.evaluate("localStorage.clear()")
    await page.reload()
    await page.locator("#token-btn.quiet").wait_for(state="attached")  # (the page's CSP forbids eval'd waits)


async def test_sources_beside_the_answer_with_a_page_viewer(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await _ask(page, "What was Aurora Pharma total revenue in 2023?", "metadata")
    await _wait_answer(page, 1)
    main_box = await page.locator(".answer-main").bounding_box()
    side_box = await page.locator(".answer-side").bounding_box()
    assert side_box["x"] >= main_box["x"] + main_box["width"] - 1  # two columns at 1,280 px
    marker = page.locator("#answer-1 a.cite").first
    n = await marker.inner_text()
    await marker.scroll_into_view_if_needed()
    await marker.hover()  # hover previews the source card with a page thumbnail
    pop = page.locator("#cite-pop")
    await pop.wait_for()
    assert (await pop.locator(".doc").inner_text()).startswith(f"[{n}] ")
    await pop.locator("img.thumb[src^='blob:']").wait_for()
    await page.screenshot(path=_shot(shots, "ask-hover-preview.png"))
    await marker.focus()  # … and so does keyboard focus
    assert await pop.is_visible()
    await marker.click()  # the marker opens its page beside the answer
    await page.wait_for_selector(".viewer:not([hidden]) #page-image")
    assert await page.locator("#preview[open]").count() == 0
    cite = await page.evaluate(f"document.getElementById('cite-1-{n}').querySelector('.chip').textContent")
    label = await page.inner_text("#page-label")
    physical = int(label.split()[1])
    assert cite.startswith(f"p. {physical}") and "printed" in cite and "printed" in label, (cite, label)
    for _ in range(50):  # the document's page count arrives with its details
        if " of " in (label := await page.inner_text("#page-label")):
            break
        await page.wait_for_timeout(100)
    assert " of 8 " in label, label
    width = (await page.locator("#page-image").bounding_box())["width"]
    await page.click("button[aria-label='Zoom in']")
    assert await page.inner_text(".viewer .zoom") == "125%"
    assert (await page.locator("#page-image").bounding_box())["width"] > width * 1.2
    await page.click("button[aria-label='Next page']")
    for _ in range(50):
        if (await page.inner_text("#page-label")).startswith(f"p. {physical + 1} "):
            break
        await page.wait_for_timeout(100)
    assert (await page.inner_text("#page-label")).startswith(f"p. {physical + 1} ")
    await page.locator("#page-image").wait_for()
    await page.screenshot(path=_shot(shots, "ask-two-columns.png"))
    async with page.expect_popup() as popup:
        await page.click("#open-original")
    assert (await popup.value).url.startswith("blob:")  # the original PDF, fetched with the token


async def test_narrow_screen_stacks_without_horizontal_overflow(browser, server: Server, shots: Path) -> None:
    context = await browser.new_context(viewport={"width": 390, "height": 844}, base_url=server.url)
    tab = await context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    try:
        for route in ("/ui/#/ask", "/ui/#/documents", "/ui/#/ingest"):
            await tab.goto(route)
            await tab.wait_for_selector("select option", state="attached")
            await tab.wait_for_timeout(300)
            assert await tab.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, route
        await tab.goto("/ui/#/ask")
        await _ask(tab, QUESTION)
        await _wait_answer(tab, 1)
        await tab.locator("#answer-1 a.cite").first.click()
        await tab.wait_for_selector(".viewer:not([hidden]) #page-image, .viewer:not([hidden]) #source-lines")
        await tab.wait_for_timeout(300)
        main_box = await tab.locator(".answer-main").bounding_box()
        side_box = await tab.locator(".answer-side").bounding_box()
        assert side_box["y"] >= main_box["y"] + main_box["height"] - 1  # stacked: sources below the answer
        assert await tab.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        await tab.screenshot(path=_shot(shots, "ask-narrow.png"), full_page=True)
        await tab.locator(".turn details.trace > summary, .turn details > summary", has_text="Trace").first.click()
        await tab.wait_for_timeout(300)  # the trace open: its tables scroll inside it, the page does not
        assert await tab.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, "trace"
        await tab.screenshot(path=_shot(shots, "trace-narrow.png"), full_page=True)
        await tab.goto("/ui/#/documents")
        await tab.locator(".doc-table a").first.click()
        await tab.wait_for_selector(".outline")
        await tab.locator(".node-btn").nth(1).click()
        await tab.wait_for_timeout(500)
        assert await tab.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, "document"
        await tab.screenshot(path=_shot(shots, "document-narrow.png"), full_page=True)
        await tab.goto("/ui/help")
        await tab.wait_for_selector("main.help table")
        assert await tab.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, "help"
    finally:
        await context.close()


async def test_not_found_says_why_and_retries_with_another_strategy(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await _ask(page, "What was the revenue of Zanzibar Widgets in 2019?", "metadata")
    await _wait_answer(page, 1)
    box = page.locator(".turn-a .not-found")
    await box.wait_for()
    assert "Zanzibar Widgets" in await box.locator(".reason").inner_text()
    retry = box.locator(".retry-with button")
    names = await retry.all_inner_texts()
    assert "Semantic" in names and "Metadata" not in names, names
    await page.screenshot(path=_shot(shots, "ask-not-found.png"), full_page=True)
    async with page.expect_request(lambda r: r.url.endswith("/kb/query")) as req:
        await retry.filter(has_text="Semantic").click()
    sent = (await req.value).post_data_json
    assert sent["strategy"] == "semantic" and sent["query"].startswith("What was the revenue of Zanzibar")
    await _wait_answer(page, 2)


async def test_not_stated_shows_its_reason_and_citations_highlight_the_quote(page, shots: Path) -> None:
    """A measure the report never states: the answer's own reason (``not_found``) beside its cited closest
    passage; an answered question's citation shows the sentence it cites highlighted in its passage."""
    await page.goto("/ui/#/ask")
    await _ask(page, "What was Bluefin Foods' goodwill impairment in the third quarter of 2023?")
    await _wait_answer(page, 1)
    box = page.locator(".turn-a .not-found")
    await box.wait_for()
    assert "goodwill impairment" in await box.locator(".reason").inner_text()
    assert await page.locator("#cite-1-1").count() == 1  # what was read is still cited
    await page.reload()  # a new conversation (no history from the first question)
    await _ask(page, "What was Helios Robotics revenue in fiscal 2022?")
    await _wait_answer(page, 1)
    mark = page.locator("#cite-1-1 .excerpt mark.quote").first
    await mark.wait_for(state="attached")
    quote = await mark.text_content()
    shown = " ".join((await page.inner_text("#answer-1")).split())
    # the passage's own text is highlighted; the answer states it as a reader reads it (a table row readably)
    row = page.locator("#cite-1-1 .excerpt tr.quote").first
    if await row.count():  # a table row: shown as a row of its table, each of its figures stated by the answer
        cells = [c for c in await row.locator("th, td").all_inner_texts() if c.strip()]
        assert quote == cells[0] and len(cells) > 2 and all(c in shown for c in cells), (cells, shown)
    else:
        assert len(quote) > 20 and (" ".join(quote.split()) in shown or readable(quote) in shown), (quote, shown)
    await page.screenshot(path=_shot(shots, "ask-not-stated-and-quote.png"), full_page=True)


async def test_a_citation_card_shows_its_quote_and_opens_to_the_whole_passage(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await _ask(page, "What did Helios Robotics say about its HeliosOS subscriptions and deferred revenue in 2023?")
    await _wait_answer(page, 1)
    cards = page.locator(".turn .citation")
    await cards.first.wait_for()
    checked = scrolled = 0
    for i in range(await cards.count()):
        card = cards.nth(i)
        excerpt, mark = card.locator(".excerpt"), card.locator(".excerpt mark.quote").first
        if not await mark.count():
            continue
        box, seen = await excerpt.bounding_box(), await mark.bounding_box()
        assert box["y"] - 1 <= seen["y"] and seen["y"] + min(seen["height"], 12) <= box["y"] + box["height"] + 1, i
        checked += 1
        scrolled += await excerpt.evaluate("e => e.scrollTop > 0")  # its quote lay below the card's first lines
        more = card.get_by_role("button", name=re.compile("Show the whole passage"))
        if await more.is_visible():  # a passage longer than the card: it opens in full, and closes again
            await more.click()
            assert await more.get_attribute("aria-expanded") == "true"
            assert (await excerpt.bounding_box())["height"] > box["height"]
            await more.click()
            assert (await excerpt.bounding_box())["height"] == box["height"]
    assert checked >= 1 and scrolled >= 1, (checked, scrolled)  # the quote shows, wherever it lies in the passage
    await page.screenshot(path=_shot(shots, "citation-quote.png"), full_page=True)


async def test_a_failed_question_is_kept_with_a_retry(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await page.wait_for_selector("#collection option", state="attached")
    await page.route("**/kb/query", lambda route: route.abort())
    await _ask(page, QUESTION)
    await page.wait_for_selector(".turn-a .alert")
    assert "Server unreachable" in await page.inner_text(".turn-a .alert")
    assert await page.input_value("#question") == QUESTION  # not cleared before it was answered
    await page.screenshot(path=_shot(shots, "ask-failed-retry.png"), full_page=True)
    await page.unroute("**/kb/query")
    await page.click(".turn-a button.retry")
    await _wait_answer(page, 1)
    assert await page.locator(".turn").count() == 1 and await page.locator(".turn-a .alert").count() == 0
    assert len(await page.inner_text("#answer-1")) > 40
    r = await page.request.get("/some/unknown/page", headers={"Accept": "text/html"})
    assert r.status == 404 and r.headers["content-type"].startswith("text/html")
    await page.goto("/some/unknown/page")  # outside /ui and the API: the UI's page, not JSON
    assert "Page not found" in await page.inner_text("main")
    api = await page.request.get("/kb/unknown", headers={"Accept": "text/html"})
    assert api.status == 404 and api.headers["content-type"].startswith("application/problem+json")


async def test_follow_ups_are_offered_and_a_follow_up_shows_how_it_was_read(page, shots: Path) -> None:
    """Issue 40 item 3: questions offered under an answer ask in the conversation; the follow-up says the subject it
    was read with, and "Change" puts that reading in the question box."""
    await page.goto("/ui/#/ask")
    await page.wait_for_selector("#collection option", state="attached")
    await _ask(page, QUESTION)
    await _wait_answer(page, 1)
    offered = await page.locator("#next-1 button").all_inner_texts()
    assert "What about 2022?" in offered and any(q.startswith("How about ") for q in offered), offered
    assert await page.locator("#read-as-1").count() == 0  # a question of its own
    await page.locator("#next-1 button", has_text="What about 2022?").click()
    await _wait_answer(page, 2)
    read = await page.inner_text("#read-as-2")
    assert read.startswith("Read as:") and "Helios Robotics" in read and "2022" in read, read
    assert "412.6" in await page.inner_text("#answer-2")
    await page.locator("#read-as-2 button", has_text="Change").click()
    assert "Helios Robotics" in await page.input_value("#question")
    await page.screenshot(path=_shot(shots, "ask-follow-ups.png"), full_page=True)


async def test_a_cited_table_shows_its_figures_under_their_column_headers(page, shots: Path) -> None:
    """Issue 40 item 2: a citation of a Markdown table row shows the table with its header row, the cited row marked;
    the answer writes the row with each figure's column."""
    await page.goto("/ui/#/ask")
    await page.wait_for_selector("#collection option", state="attached")
    await _ask(page, QUESTION)
    await _wait_answer(page, 1)
    table = page.locator(".turn:nth-of-type(1) .citation .excerpt table.md-table").first
    heads = await table.locator("thead th").all_inner_texts()
    assert "2023" in heads and "2022" in heads, heads
    marked = await table.locator("tr.quote").all_inner_texts()
    assert marked and marked[0].startswith("Revenue"), marked
    assert "|" not in await table.inner_text()
    await page.screenshot(path=_shot(shots, "ask-cited-table.png"), full_page=True)


async def test_an_answer_the_server_stops_sending_stays_marked_incomplete_with_a_retry(page, shots: Path) -> None:
    """The stream ends before its "done" event (the server stopped mid-answer): the words that came stay, marked
    incomplete, and Retry asks again."""
    await page.goto("/ui/#/ask")
    await page.wait_for_selector("#collection option", state="attached")
    partial = ('event: routing\ndata: {"strategy_used": "auto", "documents": [], "candidates": []}\n\n'
               'event: answer\ndata: {"delta": "Revenue, 2023: $497.3 "}\n\n')
    await page.route("**/kb/query", lambda route: route.fulfill(status=200, body=partial,
                                                                headers={"Content-Type": "text/event-stream"}))
    await _ask(page, QUESTION)
    await page.wait_for_selector(".turn-a .alert")
    assert "Revenue, 2023: $497.3" in await page.inner_text("#answer-1")  # what arrived stays
    assert "incomplete" in (await page.get_attribute("#answer-1", "class") or "")
    assert "Incomplete" in await page.inner_text(".turn-a .incomplete-note")
    assert "Connection lost" in await page.inner_text(".turn-a .alert")
    await page.screenshot(path=_shot(shots, "ask-incomplete.png"), full_page=True)
    await page.unroute("**/kb/query")
    await page.click(".turn-a button.retry")
    await _wait_answer(page, 1)
    assert await page.locator(".incomplete-note").count() == 0 and "497.3" in await page.inner_text("#answer-1")


async def test_ingest_shows_stages_failed_files_and_refreshes_counts(page, shots: Path, tmp_path: Path) -> None:
    from tests.pdfgen import Sec, make_report_pdf

    big = tmp_path / "tall-report.pdf"
    make_report_pdf(big, [Sec(f"Section {i}", paragraphs=30) for i in range(40)], outline=True)
    fake = tmp_path / "minutes.pdf"
    fake.write_text("Minutes of the board meeting.\nNothing was decided.\n")
    await page.goto("/ui/#/ingest")
    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.press("#token-input", "Enter")
    accept = await page.get_attribute("#upload-files", "accept") or ""
    for suffix in (".pdf", ".md", ".txt", ".docx", ".html"):  # from the formats registry
        assert suffix in accept.split(","), accept
    await page.wait_for_selector("#upload-collection option[value='default']", state="attached")
    before = await page.locator("#upload-collection option[value='default']").inner_text()
    await page.set_input_files("#upload-files", [str(big), str(fake)])
    await page.click("#upload-btn")
    job = page.locator(".job", has_text="tall-report")
    stages: set[str] = set()
    shot = False
    for _ in range(600):  # the worker reports where it is inside the file, shown live
        stages.update(await job.locator(".stage").all_inner_texts())
        if await job.locator(".job-head .chip", has_text="done").count():
            break
        if not shot and any(s for s in stages if s not in ("starting", "")):
            await page.screenshot(path=_shot(shots, "ingest-stage.png"), full_page=True)
            shot = True
        await page.wait_for_timeout(100)
    labels = ("reading the file", "building the tree", "writing summaries", "cutting into chunks", "embedding", "storing")
    assert any(s.startswith(labels) for s in stages), stages  # which stages a poll catches depends on speed
    failed = page.locator(".job", has_text="minutes")
    chip = failed.locator(".job-head .chip")
    await chip.filter(has_text="done · 1 failed").wait_for()
    assert "warn" in (await chip.get_attribute("class")).split()  # amber, not a green "done"
    assert "warn" in (await failed.locator(".progressbar > div").get_attribute("class")).split()
    reason = await failed.locator(".item-error").inner_text()
    assert reason.startswith("This file is not a PDF; it looks like plain text"), reason
    after = page.locator("#upload-collection option[value='default']")
    for _ in range(50):  # collection counts refresh once the jobs are done
        if await after.inner_text() != before:
            break
        await page.wait_for_timeout(100)
    assert await after.inner_text() != before, before
    await page.screenshot(path=_shot(shots, "ingest-failed-file.png"), full_page=True)
    # not a PDF: the same bytes would fail the same way, so no Retry is offered (the API still takes one)
    assert await failed.get_by_role("button", name="Retry").count() == 0
    assert await failed.get_by_role("button", name="Remove").count() == 1
    job_id = int((await failed.get_attribute("aria-label")).split()[-1])
    items = (await (await page.request.get(f"/kb/admin/jobs/{job_id}", headers={"Authorization": f"Bearer {ADMIN}"})).json())["items"]
    retried = await page.request.post(f"/kb/admin/jobs/{job_id}/items/{items[0]['id']}/retry",
                                      headers={"Authorization": f"Bearer {ADMIN}"})
    assert retried.ok and (await retried.json())["status"] in ("queued", "running")
    for _ in range(300):
        status = await (await page.request.get(f"/kb/admin/jobs/{job_id}", headers={"Authorization": f"Bearer {ADMIN}"})).json()
        if status["status"] == "done":
            break
        await page.wait_for_timeout(100)
    assert status["counts"] == {"failed": 1} and status["items"][0]["attempts"] == 1, status
    await page.reload()
    await failed.locator(".job-head .chip", has_text="done · 1 failed").wait_for()
    await failed.get_by_role("button", name="Remove").click()
    await failed.locator("tbody tr").first.wait_for(state="detached")
    assert await failed.locator("tbody tr").count() == 0


async def test_a_job_is_cancelled_from_its_card_and_its_rows_follow(page, shots: Path, tmp_path: Path) -> None:
    from tests.pdfgen import make_text_pdf

    long = make_text_pdf(tmp_path / "long-filing.pdf",  # long enough to be cancelled while it is read
                         [f"Page {i}. Revenue of the segment rose." for i in range(4500)])
    await page.goto("/ui/#/ingest")
    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.press("#token-input", "Enter")
    await page.wait_for_selector("#upload-collection option[value='default']", state="attached")
    await page.set_input_files("#upload-files", [str(long)])
    await page.click("#upload-btn")
    job = page.locator(".job", has_text="long-filing")
    assert await job.locator(".job-source").inner_text() == "uploaded: long-filing.pdf"  # no content hash shown
    assert await job.locator("tbody td").first.inner_text() == "long-filing.pdf"
    await job.locator(".job-head .chip", has_text="running").wait_for()
    await job.get_by_role("button", name=re.compile("Cancel job")).click()
    await job.locator(".job-head .chip", has_text="cancelled").wait_for()
    await job.locator("tbody .chip", has_text="cancelled").wait_for(timeout=15_000)  # no reload: polling followed
    assert await job.locator(".stage").count() == 0 and await job.get_by_role("button", name=re.compile("Cancel")).count() == 0
    await page.screenshot(path=_shot(shots, "ingest-cancelled.png"), full_page=True)


async def test_a_job_of_20000_files_is_shown_a_page_at_a_time(page, server: Server, shots: Path) -> None:
    """Issue 40, bad input: a job of 20,000 files (cancelled at once, so that it stays) is listed 200 files at a
    time with its pages before and after, and the Ingest page stays quick."""
    folder = server.root / "many"
    folder.mkdir()
    for i in range(20_000):
        (folder / f"note-{i:05d}.md").write_text(f"# Note {i}\n")
    headers = {"Authorization": f"Bearer {ADMIN}"}
    created = await page.request.post("/kb/admin/ingest", data={"path": "many"}, headers=headers)
    assert created.status == 202, await created.text()
    job_id = (await created.json())["job_id"]
    cancelled = await page.request.post(f"/kb/admin/jobs/{job_id}/cancel", headers=headers)
    assert cancelled.status in (200, 202, 409), await cancelled.text()
    await page.goto("/ui/#/ingest")
    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.press("#token-input", "Enter")
    job = page.locator(".job", has_text=f"Job {job_id} ")
    started = time.monotonic()
    await job.locator(".pager-text", has_text="of 20,000").wait_for()
    assert time.monotonic() - started < 10
    assert await job.locator(".pager-text").inner_text() == "Files 1–200 of 20,000"
    assert await job.locator("tbody tr").count() == 200
    await job.get_by_role("button", name=f"Next files of job {job_id}").click()
    await job.locator(".pager-text", has_text="Files 201–400").wait_for()
    assert (await job.locator("tbody td").first.inner_text()).endswith("note-00200.md")
    await job.get_by_role("button", name=f"Previous files of job {job_id}").click()
    await job.locator(".pager-text", has_text="Files 1–200").wait_for()
    await page.screenshot(path=_shot(shots, "ingest-20000-files.png"), full_page=False)


async def test_a_3000_page_document_is_viewed_a_page_at_a_time(page, server: Server, shots: Path) -> None:
    """Issue 40, bad input: a 3,000-page PDF — its outline of 301 sections renders, and its Pages tab is a pager
    (not 3,000 buttons) that renders each page when asked, holding one page image at a time."""
    folder = server.root / "huge"
    folder.mkdir()
    doc = pymupdf.open()
    for i in range(1, 3001):
        doc.new_page().insert_text((72, 72), f"Ledger page {i}. Entries of the day were posted.", fontsize=10)
    doc.set_toc([[1, "Ledger", 1]])
    doc.save(folder / "ledger.pdf")
    job = await _ingested(page, "huge")
    doc_id = job["items"][0]["document_id"]
    started = time.monotonic()
    await page.goto(f"/ui/#/documents/{doc_id}")
    await page.locator(".node-btn").nth(300).wait_for()  # the outline: 301 sections of 10 pages
    assert time.monotonic() - started < 15
    await page.get_by_role("tab", name="Pages").click()
    number = page.locator("#pages-pane .page-number")
    await number.wait_for()
    assert await page.locator("#pages-pane .page-span").inner_text() == "of 1–3000"
    assert await page.locator("#pages-pane .preview-nav button").count() == 2  # previous and next, not 3,000
    await page.locator("#pages-pane img.page-img[alt='Page 1']").wait_for()
    await number.fill("2999")
    await number.press("Enter")
    await page.locator("#pages-pane img.page-img[alt='Page 2999']").wait_for()
    await page.get_by_role("button", name="Next page").click()
    await page.locator("#pages-pane img.page-img[alt='Page 3000']").wait_for()
    assert await page.get_by_role("button", name="Next page").is_disabled()
    assert await page.locator("#pages-pane img.page-img").count() == 1  # one page image held at a time
    assert page.url.endswith(f"/documents/{doc_id}/pages")
    await page.screenshot(path=_shot(shots, "document-3000-pages.png"), full_page=False)


async def test_one_file_of_a_job_is_cancelled_and_the_others_go_on(page, server: Server, shots: Path) -> None:
    """Issue 40 item 4: Cancel on a file's row stops that file (while it is read) and the job's other file is
    ingested; ``kb jobs --cancel JOB --file ID`` is the same call."""
    from tests.pdfgen import make_text_pdf

    folder = server.root / "pair"
    folder.mkdir()
    make_text_pdf(folder / "a-long.pdf", [f"Page {i}. Revenue of the segment rose." for i in range(4500)])
    (folder / "b-short.md").write_text("# Short memo\n\nKestrel Rail ran 212 trains a day in 2024.\n")
    await page.goto("/ui/#/ingest")
    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.press("#token-input", "Enter")
    await page.wait_for_selector("#folder-collection option[value='default']", state="attached")
    await page.fill("#folder-path", "pair")
    await page.click("#folder-form button[type=submit]")
    job = page.locator(".job", has_text="pair")
    row = job.locator("tbody tr", has_text="a-long.pdf")
    await row.locator(".chip", has_text="running").wait_for()
    await row.get_by_role("button", name="Cancel pair/a-long.pdf").click()
    await row.locator(".chip", has_text="cancelled").wait_for(timeout=20_000)
    await job.locator("tbody tr", has_text="b-short.md").locator(".chip", has_text="ok").wait_for(timeout=30_000)
    await job.locator(".job-head .chip", has_text="done").wait_for()
    assert "cancelled while it was being ingested" in await row.inner_text()
    await page.screenshot(path=_shot(shots, "ingest-file-cancelled.png"), full_page=True)


async def test_the_page_viewer_marks_the_cited_paragraph_not_its_phrases_elsewhere(page, server: Server,
                                                                                  shots: Path) -> None:
    """Issue 40 item 1: three segment paragraphs share their wording and fill one chunk; the sentences the answer
    quotes are highlighted on the page, each where the chunk holds it, and nothing else."""
    from tests.pdfgen import segments_pdf

    (server.root / "segments").mkdir()
    (server.root / "segments" / "segments.pdf").write_bytes(segments_pdf(notes_page=True)[0])
    await _ingested(page, "segments")
    await page.goto("/ui/#/ask")
    await page.locator("#advanced").evaluate("d => { d.open = true; }")
    await page.fill("#documents", "segments/segments.pdf")
    async with page.expect_response(lambda r: "/pages/1.png?highlight=" in r.url and "quote=" in r.url) as shown:
        await _ask(page, "How many people did the Consumer segment employ at the end of the year?")
        await _wait_answer(page, 1)
        await page.locator("#answer-1 a.cite").first.click()
    response = await shown.value
    quote = parse_qs(urlsplit(response.url).query)["quote"][0]  # the cited sentences, located in their chunk
    assert "The Consumer segment employed 1201 people" in quote, quote
    # one box per quoted sentence (each one line): not the chunk's 12 lines, nor the phrases the page repeats
    assert int(response.headers["x-highlights"]) == len(quote.split(" … ")), (quote, dict(response.headers))
    await page.wait_for_selector(".viewer:not([hidden]) #page-image")
    assert await page.locator(".viewer .unmarked").count() == 0
    await page.screenshot(path=_shot(shots, "viewer-cited-paragraph.png"))


async def test_documents_page_search_filters_and_chunk_view(page, shots: Path) -> None:
    await page.goto("/ui/#/documents")
    await page.wait_for_selector(".doc-table tbody tr")
    total = await page.locator(".doc-table tbody tr").count()
    await page.fill("#doc-search", "helios")
    assert await page.locator(".doc-table tbody tr").count() == 2
    assert (await page.inner_text("#doc-count")).startswith(f"2 of {total}")
    await page.fill("#doc-search", "")
    await page.select_option("#filter-year", "2023")
    years = await page.locator(".doc-table tbody td:nth-child(3)").all_inner_texts()
    assert years and set(years) == {"2023"}, years
    await page.select_option("#filter-year", "")
    await page.select_option("#filter-type", "pdf")
    assert await page.locator(".doc-table tbody tr").count() >= 3
    await page.select_option("#filter-type", "")
    await page.locator("th[data-key=company] button").click()
    companies = [c for c in await page.locator(".doc-table tbody td:nth-child(2)").all_inner_texts() if c != "—"]
    assert companies == sorted(companies), companies
    assert await page.locator("th[data-key=company]").get_attribute("aria-sort") == "ascending"
    northwind = page.locator(".doc-table tbody tr", has_text="northwind-energy-2023-annual-report.pdf")
    assert (await northwind.locator("td.name a").inner_text()).startswith("Northwind Energy")  # not "Letter to …"
    assert "ready" in await northwind.locator("td .chip.ok").inner_text()
    chips = await northwind.locator(".meta .chip").all_inner_texts()
    assert len(chips) >= 8 and any(c.startswith("sector:") for c in chips)  # every metadata field
    more = northwind.get_by_role("button", name="Show the whole description of northwind-energy-2023-annual-report.pdf")
    if await more.count():
        await more.click()
        assert await more.get_attribute("aria-expanded") == "true"
    delete = await northwind.get_by_role("button", name="Delete northwind-energy-2023-annual-report.pdf").bounding_box()
    assert delete["width"] > delete["height"] and delete["height"] < 40  # on one line
    await page.screenshot(path=_shot(shots, "documents-page.png"), full_page=True)

    await northwind.locator("td.name a").click()
    await page.wait_for_selector(".outline")
    await page.locator(".node-btn").nth(1).click()
    await page.wait_for_selector("#node-pane .page-img")
    await page.click("#show-chunks")
    chunks = page.locator("#chunk-list .chunk")
    await chunks.first.wait_for()
    assert (await chunks.first.locator(".chip").inner_text()).startswith("p. ")
    assert len(await chunks.first.locator(".chunk-text").inner_text()) > 40
    assert all("...." not in s for s in await page.locator(".node-summary").all_inner_texts())
    await page.screenshot(path=_shot(shots, "document-chunks.png"), full_page=True)

    await page.goto("/ui/#/documents")
    await page.click("#token-btn")
    await page.fill("#token-input", ADMIN)
    await page.press("#token-input", "Enter")
    await page.click("#new-collection")
    await page.fill("#collection-name", "drafts")
    await page.fill("#collection-description", "Work in progress")
    await page.click("dialog.new-collection button[type=submit]")
    await page.get_by_text("This collection is empty").wait_for()
    assert await page.locator("#doc-collection").input_value() == "drafts"


@pytest.mark.parametrize("path", ["/ui/#/ask", "/ui/#/documents", "/ui/#/ingest", "/ui/help"])
async def test_every_page_loads_without_console_errors(page, path: str) -> None:
    """Content-security-policy refusals (an inline style on the help page's table columns) and script errors are
    console errors: none on any page."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    await page.add_init_script(f"sessionStorage.setItem('kb.token', {ADMIN!r})")  # the admin pages' token
    await page.goto(path)
    await page.wait_for_load_state("networkidle")
    if path == "/ui/help":
        assert await page.locator("main.help table").count() > 10
        right = page.locator("main.help th.align-right").first
        assert await right.evaluate("e => getComputedStyle(e).textAlign") == "right"  # aligned by the stylesheet
    assert errors == [], (errors, failed)
