"""``kb serve --workers 2`` shares connections between its processes (``kb.balance``): clients that connect
together are not all accepted by the process that wakes first, and keep-alive keeps them where they landed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import psutil
import pytest

from kb.balance import peer_loads
from tests.live import live_server

pytestmark = pytest.mark.live


def _connections_by_worker(supervisor: int, port: int) -> dict[int, int]:
    workers = [p for p in psutil.Process(supervisor).children(recursive=True)
               if "multiprocessing.spawn" in " ".join(p.cmdline())]
    return {p.pid: sum(1 for c in p.net_connections(kind="tcp")
                       if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port)
            for p in workers}


async def _burst(base: str, clients: int, port: int, supervisor: int) -> tuple[dict[int, int], list[int]]:
    """``clients`` keep-alive clients connecting at once, each asking twice; the connections each process holds."""
    pool = [httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=1))
            for _ in range(clients)]
    try:
        statuses = [r.status_code for r in await asyncio.gather(*(c.get("/health") for c in pool))]
        statuses += [r.status_code for r in await asyncio.gather(*(c.get("/health") for c in pool))]
        return await asyncio.to_thread(_connections_by_worker, supervisor, port), statuses
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))


def test_clients_connecting_together_are_shared_between_the_worker_processes(tmp_path: Path) -> None:
    with live_server(tmp_path, workers=2) as srv:
        for clients in (20, 31):
            counts, statuses = asyncio.run(_burst(srv.base, clients, srv.port, srv.pid))
            assert set(statuses) == {200}
            assert len(counts) == 2 and sum(counts.values()) == clients, counts
            assert max(counts.values()) - min(counts.values()) <= 4, counts  # left to the event loop: 19/1
        assert httpx.get(f"{srv.base}/health", timeout=10).status_code == 200


def test_peers_are_processes_that_wrote_lately(tmp_path: Path) -> None:
    """A peer's count is read while it keeps rewriting it; a file left unwritten (a process that died or
    stalled), this process's own file and other files are no peers; a missing folder means no peers."""
    import os
    import time

    assert peer_loads(tmp_path / "gone", os.getpid()) == []
    (tmp_path / str(os.getpid())).write_text("9")  # this process's own file: not a peer
    (tmp_path / "101").write_text("3")
    (tmp_path / "102").write_text("0")
    (tmp_path / "101.tmp").write_text("0")  # a count being written
    old = time.time() - 5
    os.utime(tmp_path / "102", (old, old))
    assert peer_loads(tmp_path, os.getpid()) == [3]
    assert sorted(peer_loads(tmp_path, os.getpid(), fresh_s=10)) == [0, 3]


def test_the_count_folders_of_supervisors_that_are_gone_are_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    from kb.serve import LOADS_PREFIX, remove_stale_loads

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    gone = tmp_path / f"{LOADS_PREFIX}{dead.pid}-abc"
    kept = tmp_path / f"{LOADS_PREFIX}{os.getpid()}-def"
    other = tmp_path / "kb-worker-loads-notapid"
    for folder in (gone, kept, other):
        folder.mkdir()
        (folder / "123").write_text("4")
    assert remove_stale_loads(tmp_path) == [gone]
    assert not gone.exists() and kept.exists() and other.exists()
