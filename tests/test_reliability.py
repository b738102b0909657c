"""Reliability: hostile input is a 4xx, body limits per endpoint, and a live server that survives its
database being killed or frozen, and clients that never finish their headers (issue 9)."""

from __future__ import annotations

import json
import os
import signal
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
from tests.http import app_client

JSON = {"content-type": "application/json"}


def _client(rt: Runtime):
    return app_client(create_app(runtime=rt, bound_host="127.0.0.1", run_worker=False))


async def test_malformed_bodies_are_400_not_500(runtime: Runtime) -> None:
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
        assert r.status_code == 400 and "filters has more than" in r.json()["detail"]
        r = await client.post("/kb/query", json={"query": "x", "history": [{"role": "user", "content": "hi"}] * 25})
        assert r.status_code == 400 and "history" in r.json()["detail"]
        r = await client.post("/kb/query", json={"query": "x", "expert_knowledge": "y" * 30_000})
        assert r.status_code == 400 and "expert_knowledge" in r.json()["detail"]
        # the query endpoint's body limit is KB_MAX_JSON_KB (1 MiB), not the 200 MB upload limit
        r = await client.post("/kb/query", json={"query": "x", "expert_knowledge": "y" * 2_000_000})
        assert r.status_code == 413 and r.headers["content-type"].startswith("application/problem+json")
        # a query within bounds still works
        r = await client.post("/kb/query", json={"query": "revenue", "history": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200, r.text


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
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    """``kb serve`` on an embedded Postgres of its own (so the test may kill it)."""
    root = tmp_path_factory.mktemp("live")
    (root / "memo.md").write_text("# Falcon memo\n\nThe Falcon project revenue was 12 million dollars in 2023.\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATA_DIR": str(root / "data"), "KB_INGEST_ROOT": str(root), "KB_EMBEDDING_MODEL": "hash:384",
                "KB_INGEST_WORKERS": "0", "KB_HEADER_TIMEOUT_S": "1", "KB_DB_COMMAND_TIMEOUT_S": "5",
                "KB_DB_CONNECT_TIMEOUT_S": "2"})
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen([sys.executable, "-m", "kb.cli", "serve", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, (root / "server.log").read_text()[-3000:]
        time.sleep(0.5)
    r = httpx.post(f"{base}/kb/admin/ingest", json={"path": "memo.md"}, timeout=10)
    assert r.status_code == 202, r.text
    job = r.json()["status_url"]
    while httpx.get(base + job, timeout=10).json()["status"] not in {"done", "failed"}:
        assert time.time() < deadline + 60
        time.sleep(0.5)
    yield {"base": base, "port": port, "pgdata": root / "data" / "pg", "log": root / "server.log"}
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


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
    assert "db.embedded_restarted" in live["log"].read_text()


def test_frozen_postgres_is_a_fast_503_and_recovers(live) -> None:
    base = live["base"]
    procs = _postgres_processes(live["pgdata"])
    for p in procs:
        p.suspend()  # SIGSTOP: the server accepts nothing and answers nothing
    try:
        started = time.time()
        r = httpx.get(f"{base}/health", timeout=30)
        assert r.status_code == 503 and r.headers["retry-after"]
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
