"""The web UI end to end in a real headless Chromium (Debian's ``chromium``, driven by Playwright) against a
live ``kb run`` server on the real embedded Postgres with the sample reports. Screenshots of every page
go to a temporary folder (printed at the end; KB_UI_SHOTS=<dir> keeps them somewhere else)."""

from __future__ import annotations

import asyncio
import os
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

import httpx
import pytest

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
    await page.select_option("#strategy", strategy)
    await page.fill("#question", question)
    await page.click("#ask-btn")


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
    await page.locator(".citation", has_text=".pdf").first.locator("button").click()
    await page.wait_for_selector("#preview[open] #page-image")
    size = await page.evaluate("(() => { const i = document.getElementById('page-image');"
                               " return i.decode().then(() => [i.naturalWidth, i.naturalHeight]); })()")
    assert size[0] > 500 and size[1] > size[0]
    assert (await page.get_attribute("#page-image", "src")).startswith("blob:")
    await page.screenshot(path=str(shots / "citation-page.png"))
    await page.keyboard.press("Escape")
    assert await page.locator("#preview[open]").count() == 0

    await page.click("#new-chat")
    await _ask(page, QUESTION, "metadata")
    await _wait_answer(page, 1)
    await page.locator(".turn .citation", has_text=".md").first.locator("button").click()
    await page.wait_for_selector("#preview[open] #source-lines")
    assert await page.locator("#source-lines .cited").count() >= 1
    await page.screenshot(path=str(shots / "citation-lines.png"))


async def test_documents_tree_pages_and_not_found(page, shots: Path) -> None:
    await page.goto("/ui/#/documents")
    await page.wait_for_selector(".doc-table")
    assert await page.locator(".doc-table tbody tr").count() == 6
    await page.screenshot(path=str(shots / "documents.png"), full_page=True)
    await page.click("text=aurora-pharma-2023-annual-report.pdf")
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


async def test_api_error_shows_a_readable_message(page, shots: Path) -> None:
    await page.goto("/ui/#/ask")
    await _ask(page, "revenue " * 600)
    await page.wait_for_selector(".turn-a .alert")
    text = await page.inner_text(".turn-a .alert")
    assert "Invalid request (400)" in text and "4000" in text and "query" in text  # the API's own words
    await page.locator("details.more summary").click()
    await page.fill("#filters", "{not json")
    await page.fill("#question", QUESTION)
    await page.click("#ask-btn")
    assert "Filters are not valid JSON" in await page.inner_text("#form-error")
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
    await page.keyboard.press("Enter")  # … which opens the page or lines preview
    await page.wait_for_selector("#preview[open] #page-image, #preview[open] #source-lines")
    await page.keyboard.press("Escape")
    assert await page.locator("#preview[open]").count() == 0


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
    await cite.first.locator("button").click()
    await page.wait_for_selector("#preview[open] #source-lines .cited")
    assert "<script>" in await page.inner_text("#source-lines")
    await page.keyboard.press("Escape")
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
    (folder / "acme-2023.txt").write_text(text_filing(
        "Acme Holdings, Inc.", 2023, figures(1_500, -250, cash=320, liabilities=900, eps=-0.05),
        figures(1_200, 80, cash=410, liabilities=700, eps=0.02)))
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
    assert await page.locator(".facts-table tbody tr", has_text="Weighted average shares").count() >= 1
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
    await page.wait_for_selector("#preview[open] #source-lines .cited")
    assert (await page.locator("#source-lines .cited span").nth(1).inner_text()).startswith("Total liabilities")
    await page.screenshot(path=str(shots / "ask-facts-line.png"))
