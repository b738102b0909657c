"""Reliability: hostile input is a 4xx, body limits per endpoint, and a live server that survives its
database being killed or frozen, and clients that never finish their headers (issue 9)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from kb.app import create_app
from kb.runtime import Runtime
from tests.conftest import finish_job, ingest
from tests.http import app_client
from tests.live import ingest_and_wait, live_server

pytestmark = pytest.mark.live
JSON = {"content-type": "application/json"}


def _client(rt: Runtime):
    return app_client(create_app(runtime=rt, bound_host="127.0.0.1", run_worker=False))


async def test_malformed_bodies_are_400_not_500(runtime: Runtime, tmp_path: Path) -> None:
    deep_object = '{"a":' * 990 + "1" + "}" * 990
    async with _client(runtime) as client:
        for path in ("/kb/query", "/kb/collections", "/kb/admin/ingest"):
            r = await client.post(path, content=b'{"query": "\xff\xfe", "name": "\xff", "path": "\xff"}', headers=JSON)
            assert r.status_code == 400 and "UTF-8" in r.json()["detail"], (path, r.text)
            r = await client.post(path, content=b'{"query": ', headers=JSON)
            assert r.status_code == 400 and "malformed JSON" in r.json()["detail"], (path, r.text)
        r = await client.post("/kb/query", content=f'{{"query": "x", "filters": {deep_object}}}', headers=JSON)
        assert r.status_code == 400 and "nested too deeply" in r.json()["detail"]
        r = await client.post("/kb/query", json={"query": "x", "filters": {f"k{i}": "v" for i in range(20_000)}})
        assert r.status_code == 400 and "$.filters" in r.json()["detail"]
        r = await client.post("/kb/query", json={"query": "x", "history": [{"role": "user", "content": "hi"}] * 25})
        assert r.status_code == 400 and "$.history" in r.json()["detail"]
        r = await client.post("/kb/query", json={"query": "x", "expert_knowledge": "y" * 30_000})
        assert r.status_code == 400 and "$.expert_knowledge" in r.json()["detail"]
        # the query endpoint's body limit is KB_MAX_JSON_KB (1 MiB), not the 200 MB upload limit
        r = await client.post("/kb/query", json={"query": "x", "expert_knowledge": "y" * 2_000_000})
        assert r.status_code == 413 and r.headers["content-type"].startswith("application/problem+json")
        # a query within bounds passes validation and reaches the (empty) collection: nothing to search
        r = await client.post("/kb/query", json={"query": "revenue", "history": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400 and "holds no documents" in r.json()["detail"], r.text
    (tmp_path / "memo.md").write_text("# Kite project\n\nRevenue of the Kite project was $4.2 million in 2023.\n")
    assert (await ingest(runtime, tmp_path)).status == "done"
    async with _client(runtime) as client:  # and once there is something to search, it answers
        r = await client.post("/kb/query", json={"query": "revenue", "history": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and "4.2" in r.json()["answer"], r.text


async def test_hostile_paths_are_400(runtime: Runtime, tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    folder = deep
    for _ in range(70):
        folder = folder / "d"
    folder.mkdir(parents=True)
    (folder / "x.md").write_text("# X\n\nhello")
    async with _client(runtime) as client:
        for path, words in (("a" * 300, "longer than 255 bytes"), ("/".join(["abc"] * 1500), "longer than 4096"),
                            ("é" * 200, "longer than 255 bytes")):
            r = await client.post("/kb/admin/ingest", json={"path": path})
            assert r.status_code == 400 and words in r.json()["detail"], r.text
        r = await client.post("/kb/admin/ingest", json={"path": "deep", "recursive": True})
        assert r.status_code == 400 and "deeper than" in r.json()["detail"]
        r = await client.post("/kb/admin/ingest", json={"path": "deep", "recursive": False})
        assert r.status_code == 202  # the folder itself is fine when not walked


# ---------------------------------------------------------------- a live server on its own embedded Postgres
@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    """``kb serve`` on an embedded Postgres of its own (so the test may kill it)."""
    root = tmp_path_factory.mktemp("live")
    (root / "memo.md").write_text("# Falcon memo\n\nThe Falcon project revenue was 12 million dollars in 2023.\n")
    with live_server(root, KB_HEADER_TIMEOUT_S="1", KB_DB_COMMAND_TIMEOUT_S="5", KB_DB_CONNECT_TIMEOUT_S="2") as srv:
        assert ingest_and_wait(srv, "memo.md")["status"] == "done"
        yield {"base": srv.base, "port": srv.port, "pgdata": srv.pgdata, "log": srv.log}


def _postgres_processes(pgdata: Path) -> list[psutil.Process]:
    pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    master = psutil.Process(pid)
    return [master, *master.children()]


def _ask(base: str) -> httpx.Response:
    return httpx.post(f"{base}/kb/query", json={"query": "What was the Falcon project revenue?"}, timeout=60)


def _wait_for(predicate, timeout: float) -> float:
    started = time.time()
    while time.time() - started < timeout:
        if predicate():
            return time.time() - started
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout} s")


def test_killed_postgres_is_503_then_restarted(live) -> None:
    base = live["base"]
    assert _ask(base).status_code == 200
    _postgres_processes(live["pgdata"])[0].kill()  # kill -9 of the postmaster
    statuses = []
    for _ in range(3):
        r = _ask(base)
        statuses.append(r.status_code)
        if r.status_code == 503:
            assert r.headers["retry-after"] and r.headers["content-type"].startswith("application/problem+json")
    assert 500 not in statuses, statuses
    # the server restarts its embedded Postgres; queries answer again, with the ingested memo intact
    _wait_for(lambda: httpx.get(f"{base}/health", timeout=5).status_code == 200, 30)
    r = _ask(base)
    assert r.status_code == 200 and "12 million" in r.json()["answer"], r.text
    # the restart is logged once the registry of the Postgres' users is written, which can be just after the
    # database answers again
    _wait_for(lambda: "db.embedded_restarted" in live["log"].read_text(), 10)


def test_frozen_postgres_is_a_fast_503_and_recovers(live) -> None:
    base = live["base"]
    procs = _postgres_processes(live["pgdata"])
    for p in procs:
        p.suspend()  # SIGSTOP: the server accepts nothing and answers nothing
    try:
        started = time.time()
        r = httpx.get(f"{base}/health", timeout=30)
        assert r.status_code == 503 and r.headers["retry-after"]
        assert r.json()["status"] == 503 and r.json()["database"] is False  # problem details + health fields
        assert time.time() - started < 5
        # once the watcher has seen it, requests fail at once instead of waiting on the database
        _wait_for(lambda: _ask(base).status_code == 503, 15)
        started = time.time()
        r = _ask(base)
        assert r.status_code == 503 and time.time() - started < 1.0
    finally:
        for p in procs:
            p.resume()
    _wait_for(lambda: _ask(base).status_code == 200, 30)


def test_postgres_killed_during_ingest_loses_nothing(live) -> None:
    """The file being ingested when Postgres dies goes back to the queue and is ingested once it is back."""
    from tests.pdfgen import make_text_pdf, paragraph

    root = live["pgdata"].parent.parent
    make_text_pdf(root / "long-report.pdf", [f"Part {i}. " + paragraph(f"long-{i}", 12) for i in range(800)])
    base = live["base"]
    r = httpx.post(f"{base}/kb/admin/ingest", json={"path": "long-report.pdf"}, timeout=10)
    assert r.status_code == 202, r.text
    status_url = base + r.json()["status_url"]
    _wait_for(lambda: httpx.get(status_url, timeout=10).json()["items"][0]["status"] == "running", 30)
    _postgres_processes(live["pgdata"])[0].kill()
    time.sleep(1)

    def finished() -> bool:
        try:
            return httpx.get(status_url, timeout=10).json()["status"] == "done"
        except (httpx.HTTPError, KeyError, ValueError):
            return False

    _wait_for(finished, 180)
    item = httpx.get(status_url, timeout=10).json()["items"][0]
    assert item["status"] == "ok" and item["pages"] == 800, item
    docs = httpx.get(f"{base}/kb/documents", timeout=10).json()
    assert [d["name"] for d in docs].count("long-report.pdf") == 1


def test_unfinished_headers_are_dropped_and_big_headers_refused(live) -> None:
    with socket.create_connection(("127.0.0.1", live["port"])) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        s.settimeout(10)
        started = time.time()
        assert s.recv(1024) == b""  # closed by the server (KB_HEADER_TIMEOUT_S=1)
        assert time.time() - started < 5
    r = httpx.get(f"{live['base']}/health", headers={"X-Big": "a" * 100_000}, timeout=10)
    assert r.status_code in {400, 431}
    r = httpx.get(f"{live['base']}/health", timeout=10)
    assert r.status_code == 200 and json.loads(r.text)["database"] is True


# ---------------------------------------------------------------- ingest: cancel, hand back, time limit, dedupe
def _slow_pdf(folder: Path, name: str = "slow.pdf", pages: int = 150) -> Path:
    """A real text PDF big enough that embedding it takes seconds with the bundled model."""
    from tests.pdfgen import make_text_pdf, paragraph

    folder.mkdir(parents=True, exist_ok=True)
    return make_text_pdf(folder / name, [f"Section {i}. " + paragraph(f"ops-{i}", 14) for i in range(pages)])


async def _item_status(rt: Runtime, job_id: int, wanted: str) -> None:
    import asyncio

    from ingest.jobs import get_job

    async with asyncio.timeout(60):
        for _ in range(10**6):  # polling the database: there is no event to wait on
            if (await get_job(rt.pool, job_id)).items[0].status == wanted:
                return
            await asyncio.sleep(0.1)


async def test_cancel_a_job_pending_and_running(runtime: Runtime, tmp_path: Path) -> None:
    import asyncio

    from ingest.jobs import get_job

    _slow_pdf(tmp_path / "slow")
    (tmp_path / "slow" / "zz-later.md").write_text("# Later\n\nNever ingested: the job is cancelled first.")
    async with _client(runtime) as client:
        job_id = (await client.post("/kb/admin/ingest", json={"path": "slow"})).json()["job_id"]
        task = asyncio.create_task(finish_job(runtime, job_id, stale_s=4))  # heartbeat every second
        await _item_status(runtime, job_id, "running")
        r = await client.post(f"/kb/admin/jobs/{job_id}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        assert r.json()["items"][1]["status"] == "cancelled"  # the pending file at once
        job = await asyncio.wait_for(task, timeout=60)  # ends once its worker let go of the running file
        assert [i.status for i in job.items] == ["cancelled", "cancelled"] and job.status == "cancelled"
        assert job == await get_job(runtime.pool, job_id)
        assert "nothing was stored" in job.items[0].error
        assert await runtime.pool.fetchval("SELECT count(*) FROM documents") == 0
        r = await client.post(f"/kb/admin/jobs/{job_id}/cancel")
        assert r.status_code == 409
        assert (await client.post("/kb/admin/jobs/999999/cancel")).status_code == 404


async def test_stopping_worker_hands_its_file_back(runtime: Runtime, tmp_path: Path) -> None:
    import asyncio

    from ingest.jobs import create_job, get_job

    path = _slow_pdf(tmp_path / "handback")
    job_id = await create_job(runtime.pool, collection_id=1, path=path)
    stop = asyncio.Event()
    first = asyncio.create_task(finish_job(runtime, job_id, stop=stop))
    await _item_status(runtime, job_id, "running")
    stop.set()  # what SIGTERM does to the server's (or `kb worker`'s) worker
    item = (await asyncio.wait_for(first, timeout=30)).items[0]
    assert (item.status, item.attempts) == ("pending", 0)  # handed back at once, no attempt spent
    assert (await get_job(runtime.pool, job_id)).items[0] == item
    item = (await finish_job(runtime, job_id)).items[0]
    assert (item.status, item.attempts) == ("ok", 1), item.error


async def test_file_time_limit(runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    path = _slow_pdf(tmp_path / "timeout")
    runtime.settings = dataclasses.replace(
        runtime.settings, ingest=dataclasses.replace(runtime.settings.ingest, file_timeout_s=0.5))
    item = (await ingest(runtime, path)).items[0]
    assert item.status == "failed" and "KB_FILE_TIMEOUT_S" in item.error
    assert await runtime.pool.fetchval("SELECT count(*) FROM documents") == 0


async def test_same_content_is_stored_once_even_by_concurrent_workers(runtime: Runtime, tmp_path: Path) -> None:
    import asyncio

    import asyncpg

    from ingest.jobs import create_job, get_job

    folder = tmp_path / "dupes"
    folder.mkdir()
    text = "# Heron memo\n\nThe Heron programme spent 4.2 million dollars on tooling in 2024.\n"
    for i in range(4):
        (folder / f"copy{i}.md").write_text(text)
    job_id = await create_job(runtime.pool, collection_id=1, path=folder)
    await asyncio.gather(*(finish_job(runtime, job_id) for _ in range(4)))  # four workers
    job = await get_job(runtime.pool, job_id)
    assert job.counts == {"ok": 1, "skipped": 3}, job.counts
    doc_ids = {i.document_id for i in job.items}
    assert len(doc_ids) == 1 and await runtime.pool.fetchval("SELECT count(*) FROM documents") == 1
    # the constraint itself: a second row with the same content cannot be written by anyone
    with pytest.raises(asyncpg.UniqueViolationError):
        await runtime.pool.execute(
            "INSERT INTO documents (collection_id, name, source_path, sha256, file_type, metadata, title, description,"
            " page_count, tree_mode, node_count, chunk_count, warnings) SELECT collection_id, 'other.md', source_path,"
            " sha256, file_type, metadata, title, description, page_count, tree_mode, node_count, chunk_count,"
            " warnings FROM documents LIMIT 1")


async def test_replaced_document_keeps_earlier_jobs_pointing_at_it(runtime: Runtime, tmp_path: Path) -> None:
    from ingest.jobs import get_job

    path = tmp_path / "same-name.md"
    path.write_text("# Osprey\n\nVersion one of the Osprey memo.\n")
    first = await ingest(runtime, path)
    path.write_text("# Osprey\n\nVersion two of the Osprey memo, with new figures.\n")
    new_id = (await ingest(runtime, path)).items[0].document_id
    assert (await get_job(runtime.pool, first.id)).items[0].document_id == new_id
    assert await runtime.pool.fetchval("SELECT count(*) FROM documents WHERE id = $1", new_id) == 1


async def test_page_and_chunk_limits_fail_the_file_alone(runtime: Runtime, tmp_path: Path) -> None:
    import dataclasses

    folder = tmp_path / "limits"
    _slow_pdf(folder, "many-pages.pdf", pages=30)
    (folder / "many-chunks.md").write_text("# Log\n\n" + "\n\n".join(f"## Entry {i}\n\n" + "word " * 120
                                                                    for i in range(40)))
    (folder / "small.md").write_text("# Small\n\nA short memo about the Kite project.\n")
    runtime.settings = dataclasses.replace(
        runtime.settings, ingest=dataclasses.replace(runtime.settings.ingest, max_pages=20, max_chunks=25))
    items = {i.name: i for i in (await ingest(runtime, folder)).items}
    assert items["many-pages.pdf"].status == "failed" and "KB_MAX_PAGES=20" in items["many-pages.pdf"].error
    assert items["many-chunks.md"].status == "failed" and "KB_MAX_CHUNKS_PER_FILE=25" in items["many-chunks.md"].error
    assert items["small.md"].status == "ok"


def test_cli_query_leaves_no_postgres_running(tmp_path: Path) -> None:
    """`kb query` starts the embedded Postgres for itself and stops it when it ends: on an empty collection it
    says there is nothing to search, with a non-zero exit; after `kb ingest` it answers."""
    from kb.core.db import embedded_status

    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATA_DIR": str(tmp_path / "data"), "KB_EMBEDDING_MODEL": "hash:384"})
    out = subprocess.run([sys.executable, "-m", "kb.cli", "query", "What was the revenue?"], env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode != 0 and "holds no documents" in out.stderr, out.stderr[-2000:]
    assert embedded_status(tmp_path / "data")["initialised"] is True
    assert embedded_status(tmp_path / "data")["running"] is False
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "memo.md").write_text("# Kite project\n\nRevenue of the Kite project was $4.2 million.\n")
    env["KB_INGEST_ROOT"] = str(tmp_path)
    for args in (["ingest", str(tmp_path / "docs")], ["query", "What was the revenue of the Kite project?"]):
        out = subprocess.run([sys.executable, "-m", "kb.cli", *args], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
    assert "4.2" in out.stdout and embedded_status(tmp_path / "data")["running"] is False
    # questions piped one per line are each answered; no question and no terminal is exit 2 with a message
    piped = subprocess.run([sys.executable, "-m", "kb.cli", "query", "--json"], env=env, capture_output=True,
                           text=True, timeout=300,
                           input="What was the revenue of the Kite project?\n\nWhich project is the memo about?\n")
    assert piped.returncode == 0 and piped.stdout.count('"answer":') == 2, piped.stderr[-2000:]
    empty = subprocess.run([sys.executable, "-m", "kb.cli", "query"], env=env, capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
    assert empty.returncode == 2 and "no question" in empty.stderr, empty.stderr[-2000:]
    # jobs are listed and cancelled from the CLI
    jobs = subprocess.run([sys.executable, "-m", "kb.cli", "jobs", "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    listed = json.loads(jobs.stdout)
    assert jobs.returncode == 0 and [(j["status"], j["files"]) for j in listed] == [("done", 1)], jobs.stdout
    for job, says in ((listed[0]["id"], "already done"), (424242, "does not exist")):
        out = subprocess.run([sys.executable, "-m", "kb.cli", "jobs", "--cancel", str(job)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and says in out.stderr, out.stderr[-2000:]
    item = listed[0]["items"][0]["id"]  # one file: a finished one is not cancelled, --file needs its job
    for args, code, says in ((["--cancel", str(listed[0]["id"]), "--file", str(item)], 1, "only a queued or running"),
                             (["cancel", str(listed[0]["id"]), str(item)], 1, "only a queued or running"),
                             (["cancel", str(listed[0]["id"])], 1, "already done"),
                             (["cancel"], 2, "expected `kb jobs cancel JOB [FILE]`"),
                             (["--file", str(item)], 2, "--file needs --cancel")):
        out = subprocess.run([sys.executable, "-m", "kb.cli", "jobs", *args], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == code and says in out.stderr, out.stderr[-2000:]


def test_killed_server_leaves_no_parser_processes(tmp_path: Path) -> None:
    """Parser processes die with the server, even when it is killed with SIGKILL."""
    from tests.pdfgen import make_text_pdf, paragraph

    make_text_pdf(tmp_path / "big.pdf", [f"Part {i}. " + paragraph(f"big-{i}", 12) for i in range(400)])
    with live_server(tmp_path, KB_INGEST_WORKERS="1") as srv:
        server = psutil.Process(srv.pid)
        r = httpx.post(f"{srv.base}/kb/admin/ingest", json={"path": "big.pdf"}, timeout=10)
        assert r.status_code == 202

        def parsers() -> list[psutil.Process]:
            return [p for p in server.children(recursive=True) if "multiprocessing" in " ".join(p.cmdline())]

        _wait_for(lambda: len(parsers()) >= 1, 60)
        spawned = parsers()
        server.kill()
        server.wait(10)
        gone, alive = psutil.wait_procs(spawned, timeout=15)
        assert not alive, [p.cmdline() for p in alive]
        pid = int((srv.pgdata / "postmaster.pid").read_text().split()[0])
        psutil.Process(pid).terminate()  # the test's own clean-up: the killed server could not stop it


PROBE_S = float(os.environ.get("KB_PROBE_SECONDS", "20"))  # `make reliability`: 60


def test_mixed_traffic_across_postgres_kills_gets_no_server_error(tmp_path: Path) -> None:
    """The probe of issue 38 again, with counts: four clients send a mix of reads (questions, the document list, a
    tree, a section, the original file, jobs, health, metrics) and deletes while Postgres is killed four times
    (``kill -9`` of the postmaster, each time after it came back). Every answer is a 2xx, a 404 for the deleted
    document or a 503 with Retry-After — never a 500 — and afterwards the memo still answers."""
    import random
    import threading
    from collections import Counter

    for k in range(6):
        (tmp_path / f"memo{k}.md").write_text(f"# Falcon memo {k}\n\n## Revenue\n\nThe Falcon project {k} revenue "
                                             f"was {12 + k} million dollars in 2023.\n")
    with live_server(tmp_path, KB_DB_COMMAND_TIMEOUT_S="5", KB_DB_CONNECT_TIMEOUT_S="2") as srv:
        docs = [ingest_and_wait(srv, f"memo{k}.md")["items"][0]["document_id"] for k in range(6)]
        doomed = docs[3:]  # deleted mid-traffic: their reads become 404s
        statuses: Counter[int] = Counter()
        bad: list[str] = []
        stop = threading.Event()

        def client(seed: int) -> None:
            rng = random.Random(seed)
            with httpx.Client(base_url=srv.base, timeout=30) as http:
                while not stop.is_set():
                    doc = rng.choice(docs)
                    kind = rng.randrange(8)
                    try:
                        if kind == 0:
                            r = http.post("/kb/query", json={"query": f"What was the Falcon project {doc % 6} revenue?"})
                        elif kind == 1:
                            r = http.get("/kb/documents")
                        elif kind == 2:
                            r = http.get(f"/kb/documents/{doc}")
                        elif kind == 3:
                            r = http.get(f"/kb/documents/{doc}/file")
                        elif kind == 4:
                            r = http.get("/kb/admin/jobs")
                        elif kind == 5:
                            r = http.get("/metrics")
                        elif kind == 6:
                            r = http.get("/health")
                        else:
                            r = http.post("/kb/query", json={"query": "Which Falcon project had the highest revenue?",
                                                            "stream": True})
                    except httpx.HTTPError as exc:  # a dropped connection has no status: counted as -1
                        statuses[-1] += 1
                        bad.append(f"{kind}: {type(exc).__name__}: {exc}")
                        continue
                    statuses[r.status_code] += 1
                    if r.status_code >= 500 and not (r.status_code == 503 and r.headers.get("retry-after")):
                        bad.append(f"{kind} {r.request.url.path}: {r.status_code} {r.text[:200]}")

        threads = [threading.Thread(target=client, args=(seed,)) for seed in range(4)]
        for t in threads:
            t.start()
        kills = 0
        try:
            for k in range(4):
                time.sleep(PROBE_S / 5)
                if k == 1:
                    for doc in doomed:
                        assert httpx.delete(f"{srv.base}/kb/documents/{doc}", timeout=30).status_code in {202, 204}
                _postgres_processes(srv.pgdata)[0].kill()
                kills += 1
                _wait_for(lambda: httpx.get(f"{srv.base}/health", timeout=5).status_code == 200, 60)
            time.sleep(PROBE_S / 5)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        print(f"probe: {sum(statuses.values())} requests across {kills} Postgres kills: "
              f"{dict(sorted(statuses.items()))} (-1: connection dropped)")
        assert not bad, bad[:10]
        assert statuses[500] == 0 and statuses[200] > 100, statuses
        r = httpx.post(f"{srv.base}/kb/query", json={"query": "What was the Falcon project 1 revenue?"}, timeout=60)
        assert r.status_code == 200 and "13 million" in r.json()["answer"], r.text
