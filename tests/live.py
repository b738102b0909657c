"""A real ``kb serve`` process on an embedded Postgres of its own (hash embeddings, offline), for tests
that need real sockets, signals or a database they may kill."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class LiveServer:
    base: str
    port: int
    root: Path  # KB_INGEST_ROOT
    pgdata: Path
    log: Path
    pid: int


@contextmanager
def live_server(root: Path, *, workers: int = 1, **env_extra: str) -> Iterator[LiveServer]:
    """Start ``kb serve`` with ``KB_INGEST_ROOT=root`` and wait until ``/health`` answers 200."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATA_DIR": str(root / "data"), "KB_INGEST_ROOT": str(root), "KB_EMBEDDING_MODEL": "hash:384",
                "KB_INGEST_WORKERS": "0", **env_extra})
    log_path = root / "server.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "kb.cli", "serve", "--port", str(port), "--workers", str(workers)],
                            env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.time() < deadline, "the server did not become ready"
            time.sleep(0.5)
        yield LiveServer(base=base, port=port, root=root, pgdata=root / "data" / "pg", log=log_path, pid=proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def ingest_and_wait(server: LiveServer, path: str, headers: dict[str, str] | None = None) -> dict:
    """Ingest ``path`` (under the server's root) and wait until the job has finished."""
    r = httpx.post(f"{server.base}/kb/admin/ingest", json={"path": path}, headers=headers or {}, timeout=10)
    assert r.status_code == 202, r.text
    deadline = time.time() + 120
    while True:
        job = httpx.get(server.base + r.json()["status_url"], headers=headers or {}, timeout=10).json()
        if job["status"] in {"done", "failed", "cancelled"}:
            return job
        assert time.time() < deadline, job
        time.sleep(0.3)
