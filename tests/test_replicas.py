"""Read replicas (issue 26 item 3): a second embedded Postgres started as a streaming replica of the first
(``pg_basebackup`` + ``standby.signal`` from the bundled binaries). Ingest writes on the primary, the query
path reads on the replica, admin reads see their own writes, and a replica that is down, lagging or
read-write is skipped."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pgserver
import pytest

from kb.app import create_app
from kb.core.db import open_read_pools, parse_lsn, url_label
from kb.core.settings import get_settings
from kb.runtime import Runtime, open_runtime
from router.types import QueryRequest
from tests.conftest import SAMPLES, SetEnv, _with_db, clean_kb_env, ingest
from tests.http import app_client
from tests.replica import resume_replica, start_replica, stop_replica, wait_for_replay

REPORTS = SAMPLES / "reports"
HELIOS = REPORTS / "helios-robotics-2022-annual-report.md"
BLUEFIN = REPORTS / "bluefin-foods-2023-q3-quarterly-report.md"


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = pgserver.get_server(root / "primary", cleanup_mode="stop")
        self.primary_pgdata = root / "primary"
        self.replica_pgdata = root / "replica" / "pg"
        self.primary = _with_db(self.server.get_uri(), "kb")
        self.replica = ""

    async def start(self) -> None:
        conn = await asyncpg.connect(self.server.get_uri())
        try:
            await conn.execute('CREATE DATABASE "kb"')
        finally:
            await conn.close()
        uri = await asyncio.to_thread(start_replica, self.primary_pgdata, self.replica_pgdata)
        self.replica = _with_db(uri, "kb")


@pytest.fixture(scope="module")
async def cluster() -> AsyncIterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="kbrepl-"))
    os.chmod(root, 0o755)
    c = Cluster(root)
    try:
        await c.start()
        yield c
    finally:
        try:
            if (c.replica_pgdata / "postmaster.pid").exists():
                stop_replica(c.replica_pgdata)
        finally:
            c.server.cleanup()
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
async def rt(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    """A runtime writing on the primary, its query path on the replica (lag tolerance long: pausing replay
    below must leave the replica in use)."""
    mp = pytest.MonkeyPatch()
    clean_kb_env(mp, tmp_path_factory.mktemp("repl-data"), KB_DATABASE_URL=cluster.primary,
                 KB_DATABASE_READ_URLS=cluster.replica, KB_EMBEDDING_MODEL="hash:384",
                 KB_DATABASE_READ_MAX_LAG_S="120", KB_DATABASE_READ_CHECK_S="0.2")
    try:
        async with open_runtime(get_settings()) as runtime:
            yield runtime
    finally:
        mp.undo()
        get_settings.cache_clear()


async def _docs(rt: Runtime, question: str) -> set[str]:
    result = await rt.pipeline.run(QueryRequest(query=question))
    return {d.name for d in result.documents}


async def _replay(cluster: Cluster, *, paused: bool) -> None:
    conn = await asyncpg.connect(cluster.replica)
    try:
        await conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")
    finally:
        await conn.close()


@pytest.mark.db  # a primary and a streaming replica of its own
async def test_queries_read_on_the_replica_admin_reads_on_the_primary(cluster: Cluster, rt: Runtime) -> None:
    assert rt.read_pools is not None
    assert [s["healthy"] for s in rt.read_pools.status()] == [True], rt.read_pools.status()
    helios = await ingest(rt, HELIOS)
    assert helios.counts == {"ok": 1}
    await wait_for_replay(cluster.primary, cluster.replica)
    assert HELIOS.name in await _docs(rt, "What was Helios Robotics revenue in 2022?")

    await _replay(cluster, paused=True)  # the replica stays behind from here
    try:
        bluefin = await ingest(rt, BLUEFIN)
        assert bluefin.counts == {"ok": 1}
        doc_id = bluefin.items[0].document_id
        # the query path reads on the replica, which has not seen the new document ...
        assert BLUEFIN.name not in await _docs(rt, "Bluefin Foods net sales in the third quarter of 2023")
        # ... while its admin pages read on the primary: never a 404 for a document just ingested
        async with app_client(create_app(runtime=rt)) as client:
            r = await client.get(f"/kb/documents/{doc_id}")
            assert r.status_code == 200, r.text
            assert r.json()["document"]["name"] == BLUEFIN.name
            job = await client.get(f"/kb/admin/jobs/{bluefin.id}")
            assert job.status_code == 200 and job.json()["status"] == "done"
    finally:
        await _replay(cluster, paused=False)
    await wait_for_replay(cluster.primary, cluster.replica)
    assert BLUEFIN.name in await _docs(rt, "Bluefin Foods net sales in the third quarter of 2023")


@pytest.mark.db  # a primary and a streaming replica of its own
async def test_down_lagging_and_read_write_replicas_are_skipped(cluster: Cluster, rt: Runtime) -> None:
    down = _with_db(f"postgresql://postgres:@/postgres?host={cluster.root / 'nowhere'}", "kb")
    pools = await open_read_pools(rt.pool, [cluster.replica, cluster.primary, down], max_lag_s=0.3, check_s=60)
    try:
        replica, primary, nowhere = pools.status()
        assert replica["healthy"], replica
        assert not primary["healthy"] and "not a standby" in str(primary["reason"])
        assert not nowhere["healthy"] and "unreachable" in str(nowhere["reason"])
        assert {pools.lease().replica.url for _ in range(4)} == {cluster.replica}  # type: ignore[union-attr]

        await _replay(cluster, paused=True)
        try:
            await rt.pool.execute("INSERT INTO collections (name) VALUES ('lag-probe')")
            await pools.check()  # the primary's position now ...
            await asyncio.sleep(0.5)
            await pools.check()  # ... not replayed 0.5 s later
            replica = pools.status()[0]
            assert not replica["healthy"] and "lagging" in str(replica["reason"])
            assert pools.lease().replica is None  # nothing healthy: the primary
        finally:
            await _replay(cluster, paused=False)
        await wait_for_replay(cluster.primary, cluster.replica)
        await pools.check()
        assert pools.status()[0]["healthy"]
    finally:
        await pools.close()
        await rt.pool.execute("DELETE FROM collections WHERE name = 'lag-probe'")


@pytest.mark.db  # a primary and a streaming replica of its own
async def test_a_replica_stopped_mid_load_leaves_queries_to_the_primary(cluster: Cluster, rt: Runtime) -> None:
    assert rt.read_pools is not None
    questions = ["What was Helios Robotics revenue in 2022?", "Bluefin Foods net sales in the third quarter of 2023"]
    answered: list[set[str]] = []
    stop = asyncio.Event()

    async def load() -> None:
        while not stop.is_set():
            for q in questions:
                answered.append(await _docs(rt, q))

    workers = [asyncio.create_task(load()) for _ in range(3)]
    await asyncio.sleep(1.0)
    before = len(answered)
    await asyncio.to_thread(stop_replica, cluster.replica_pgdata)
    await asyncio.sleep(1.5)
    stop.set()
    await asyncio.gather(*workers)  # no query failed
    assert before > 0 and len(answered) > before + 3, (before, len(answered))
    assert all(HELIOS.name in docs or BLUEFIN.name in docs for docs in answered)
    assert not rt.read_pools.status()[0]["healthy"]
    assert rt.read_pools.lease().replica is None

    await asyncio.to_thread(resume_replica, cluster.replica_pgdata)  # back: used again after a check
    async with asyncio.timeout(30):
        while not rt.read_pools.status()[0]["healthy"]:
            await _docs(rt, questions[0])  # queries trigger the background checks
            await asyncio.sleep(0.2)
    assert rt.read_pools.lease().replica is not None


def test_replica_urls_lsns_and_labels(kb_env: dict[str, str], set_env: SetEnv) -> None:
    s = set_env(KB_DATABASE_READ_URLS=" postgresql://kb:pw@r1/kb , ,postgresql://kb@r2:5433/kb")
    assert s.database.replica_urls == ("postgresql://kb:pw@r1/kb", "postgresql://kb@r2:5433/kb")
    assert url_label(s.database.replica_urls[0]) == "postgresql://kb@r1/kb"  # never the password in a warning
    assert parse_lsn("16/B374D848") == (0x16 << 32) + 0xB374D848 and parse_lsn(None) == 0
