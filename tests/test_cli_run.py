"""`kb run` (what `make run` does) end to end in a subprocess: a fresh embedded Postgres in a new data dir,
the sample reports ingested, the API answering over real HTTP; the second start reuses the data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.live import free_port

pytestmark = pytest.mark.slow


def _start(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATA_DIR": str(data_dir), "KB_EMBEDDING_MODEL": "hash:384", "KB_INGEST_WORKERS": "1"})
    return subprocess.Popen([sys.executable, "-m", "kb.cli", "run", "--port", str(port)], env=env,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def _wait_ready(proc: subprocess.Popen[bytes], log: Path, port: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"kb run exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        if "Ready" in log.read_text(errors="replace"):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
        time.sleep(0.5)
    raise AssertionError(f"kb run not ready in {timeout}s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_kb_run_twice(tmp_path: Path) -> None:
    data_dir = tmp_path / "kbdata"
    port = free_port()
    log1 = tmp_path / "run1.log"
    proc = _start(data_dir, port, log1)
    try:
        _wait_ready(proc, log1, port)
        text = log1.read_text()
        assert "ingesting the sample reports" in text and "curl -s http://127.0.0.1:" in text
        r = httpx.post(f"http://127.0.0.1:{port}/kb/query", timeout=60,
                       json={"query": "What was Helios Robotics revenue in fiscal 2022?", "strategy": "metadata"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["documents"][0]["name"].startswith("helios-robotics-2022")
        assert "412.6" in body["answer"] + " ".join(c["text"] for c in body["citations"])
        docs = httpx.get(f"http://127.0.0.1:{port}/kb/documents", timeout=10).json()
        assert len(docs) == 6
    finally:
        _stop(proc)
    log2 = tmp_path / "run2.log"
    started = time.monotonic()
    proc = _start(data_dir, port, log2)
    try:
        _wait_ready(proc, log2, port, timeout=120)
        assert "ingesting the sample reports" not in log2.read_text()  # data reused
        assert time.monotonic() - started < 120
        assert len(httpx.get(f"http://127.0.0.1:{port}/kb/documents", timeout=10).json()) == 6
    finally:
        _stop(proc)
