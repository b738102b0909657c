"""A bulk ingest holds the chunks' vector index back and builds it once at its end (ingest.bulk_index), on the
real embedded Postgres with real jobs."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ingest.jobs
from ingest import bulk_index, store
from ingest.jobs import Worker, create_job
from kb.core.collections import ensure_collection
from kb.runtime import Runtime, build_ingest_context
from router import store as router_store
from tests.conftest import SetEnv, finish_job
from tests.corpus import REPORTS, write_markdown, write_pdf


async def _index(rt: Runtime) -> Any:
    async with rt.pool.acquire() as conn:
        return await store.chunk_vector_index(conn)


def _watch_index(monkeypatch: pytest.MonkeyPatch, rt: Runtime) -> list[bool]:
    """Note, as each file of a job starts, whether the chunks' vector index exists then."""
    seen: list[bool] = []
    real: Callable[..., Any] = ingest.jobs.ingest_file

    async def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(await _index(rt) is not None)
        return await real(*args, **kwargs)

    monkeypatch.setattr(ingest.jobs, "ingest_file", watched)
    return seen


def _folder(tmp_path: Path, name: str, n: int) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for report in REPORTS[:n]:
        write_markdown(report, folder)
    write_pdf(REPORTS[n], folder)
    return folder


async def test_a_first_load_builds_the_vector_index_once_at_its_end(runtime: Runtime, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    before = await _index(runtime)
    assert before is not None
    seen = _watch_index(monkeypatch, runtime)
    coll = await ensure_collection(runtime.pool, "default")
    job_id = await create_job(runtime.pool, collection_id=coll.id, path=_folder(tmp_path, "first", 3))
    job = await finish_job(runtime, job_id)
    assert job.status == "done" and all(i.status == "ok" for i in job.items), job.items
    assert seen and not any(seen), seen  # every file went in while the index was held back
    after = await _index(runtime)
    assert after is not None and tuple(after) == tuple(before)  # the same index, built again
    assert await store.deferred_indexes(runtime.pool) == []
    # and it answers: the index scan finds what an exact scan finds
    qvec = runtime.embedder.embed_batch(["revenue for the year"])[0]
    async with runtime.pool.acquire() as conn, conn.transaction():
        await router_store.vector_session(conn, ef_search=100, k=5, iterative=False)
        by_index = [r["id"] for r in await router_store.dense_chunks(conn, qvec, 5, scan="index", collection_id=coll.id)]
    exact = [r["id"] for r in await router_store.dense_chunks(runtime.pool, qvec, 5, scan="exact", collection_id=coll.id)]
    assert by_index == exact and len(exact) == 5


async def test_a_job_adding_few_chunks_to_a_filled_table_keeps_the_index(runtime: Runtime, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    coll = await ensure_collection(runtime.pool, "default")
    await finish_job(runtime, await create_job(runtime.pool, collection_id=coll.id, path=_folder(tmp_path, "a", 3)))
    async with runtime.pool.acquire() as conn:
        assert await store.chunks_up_to(conn, 10_000) > 2
    seen = _watch_index(monkeypatch, runtime)
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "note.md").write_text("# Note\n\n" + "The board met and approved the budget for the year. " * 140)
    assert bulk_index.BYTES_PER_CHUNK < (folder / "note.md").stat().st_size < 2 * bulk_index.BYTES_PER_CHUNK
    job = await finish_job(runtime, await create_job(runtime.pool, collection_id=coll.id, path=folder))
    assert job.status == "done" and seen == [True]  # a guess of 1 chunk against those stored: inserted one by one


async def test_a_small_job_on_an_empty_table_keeps_the_index(runtime: Runtime, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _watch_index(monkeypatch, runtime)
    folder = tmp_path / "small"
    folder.mkdir()
    (folder / "memo.md").write_text("# Memo\n\nRevenue was $12.5 million in 2023.\n")  # under BYTES_PER_CHUNK
    coll = await ensure_collection(runtime.pool, "default")
    job = await finish_job(runtime, await create_job(runtime.pool, collection_id=coll.id, path=folder))
    assert job.status == "done" and seen == [True]


async def test_deferral_turned_off(db_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   set_env: SetEnv) -> None:
    from kb.runtime import open_runtime

    settings = set_env(KB_INGEST_DEFER_INDEX="false")
    assert settings.ingest.defer_vector_index is False
    rt = await open_runtime(settings)
    try:
        seen = _watch_index(monkeypatch, rt)
        coll = await ensure_collection(rt.pool, "default")
        folder = _folder(tmp_path, "off", 2)
        assert sum(f.stat().st_size for f in folder.iterdir()) >= bulk_index.BYTES_PER_CHUNK  # held back if on
        job = await finish_job(rt, await create_job(rt.pool, collection_id=coll.id, path=folder))
        assert job.status == "done" and seen and all(seen), seen
    finally:
        await rt.close()


async def _hold_back(rt: Runtime, *, job_id: int | None, holder: str) -> str:
    """Drop the chunks' vector index as a deferral would, recorded for ``job_id`` / ``holder``."""
    async with rt.pool.acquire() as conn, conn.transaction():
        index = await store.chunk_vector_index(conn)
        await store.record_deferred(conn, index["indexname"], index["indexdef"], job_id, holder)
        await store.drop_index(conn, index["indexname"])
    return str(index["indexname"])


async def test_an_index_held_by_an_ended_job_or_a_gone_process_is_built_by_the_next_worker(
        runtime: Runtime, tmp_path: Path) -> None:
    coll = await ensure_collection(runtime.pool, "default")
    folder = _folder(tmp_path, "c", 2)
    await finish_job(runtime, await create_job(runtime.pool, collection_id=coll.id, path=folder))
    worker = Worker(build_ingest_context(runtime, processes=False))

    # a job that still runs keeps holding it, and questions are answered by an exact scan meanwhile
    running = await create_job(runtime.pool, collection_id=coll.id, path=folder, force=True)
    await store.mark_job_running(runtime.pool, running)
    name = await _hold_back(runtime, job_id=running, holder="elsewhere:1")
    qvec = runtime.embedder.embed_batch(["net income"])[0]
    async with runtime.pool.acquire() as conn, conn.transaction():
        await router_store.vector_session(conn, ef_search=100, k=4, iterative=False)
        held = [r["id"] for r in await router_store.dense_chunks(conn, qvec, 4, scan="index", collection_id=coll.id)]
    assert held == [r["id"] for r in await router_store.dense_chunks(runtime.pool, qvec, 4, scan="exact",
                                                                     collection_id=coll.id)]
    await worker.rebuild_indexes()
    assert await _index(runtime) is None
    # ... until it is cancelled: the next worker's sweep builds it
    await ingest.jobs.cancel_job(runtime.pool, running)
    await worker.rebuild_indexes()
    assert await _index(runtime) is not None and await store.deferred_indexes(runtime.pool) == []

    # a process that held it back and was killed: same host, its pid gone
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await child.wait()
    gone = child.pid
    assert name == await _hold_back(runtime, job_id=None, holder=f"{bulk_index.this_holder().rpartition(':')[0]}:{gone}")
    mine = await _hold_back_again_refused(runtime, tmp_path)
    assert mine is None  # no index left to hold back: a second deferral does nothing
    built = await bulk_index.rebuild_released(runtime.pool)
    assert [b.index for b in built] == [name] and built[0].seconds > 0
    assert await _index(runtime) is not None


async def _hold_back_again_refused(rt: Runtime, folder: Path) -> bulk_index.Deferral | None:
    big = folder / "big.bin"
    big.write_bytes(b"x" * (20 * bulk_index.BYTES_PER_CHUNK))
    try:
        return await bulk_index.defer_for_files(rt.pool, [big])
    finally:
        big.unlink()


async def test_a_live_process_keeps_its_deferral(runtime: Runtime) -> None:
    name = await _hold_back(runtime, job_id=None, holder=bulk_index.this_holder())
    assert await bulk_index.rebuild_released(runtime.pool) == []
    assert await _index(runtime) is None
    built = await bulk_index.rebuild(runtime.pool, name)
    assert built is not None and built.seconds > 0
    assert await _index(runtime) is not None
    again = await bulk_index.rebuild(runtime.pool, name)
    assert again is not None and again.seconds == 0.0  # already built: nothing to do


async def test_a_job_is_done_only_once_its_index_is_built(runtime: Runtime, tmp_path: Path) -> None:
    """As the server's worker runs a job: whoever sees it done finds its chunks through the index."""
    coll = await ensure_collection(runtime.pool, "default")
    job_id = await create_job(runtime.pool, collection_id=coll.id, path=_folder(tmp_path, "served", 3))
    stop = asyncio.Event()
    worker = asyncio.create_task(Worker(build_ingest_context(runtime, processes=False), poll_s=0.05).run(stop))
    held_seen = False
    try:
        while (status := await store.job_state(runtime.pool, job_id)) not in store.JOB_FINISHED:
            held_seen = held_seen or await _index(runtime) is None
            await asyncio.sleep(0.02)
        assert status == "done" and held_seen
        assert await _index(runtime) is not None and await store.deferred_indexes(runtime.pool) == []
    finally:
        stop.set()
        await worker


async def test_a_job_killed_before_its_build_is_built_and_done_by_the_next_worker(runtime: Runtime,
                                                                                    tmp_path: Path) -> None:
    """Its process was killed after its last file was recorded and before the build: the job still says running,
    with no file left. The next worker's sweep builds the index and marks the job done."""
    coll = await ensure_collection(runtime.pool, "default")
    job_id = await create_job(runtime.pool, collection_id=coll.id, path=_folder(tmp_path, "killed", 2))
    await finish_job(runtime, job_id)
    await store.mark_job_running(runtime.pool, job_id)  # as the killed process left it
    assert await store.job_state(runtime.pool, job_id) == "running" and not await store.job_open(runtime.pool, job_id)
    await _hold_back(runtime, job_id=job_id, holder="elsewhere:1")
    await Worker(build_ingest_context(runtime, processes=False)).rebuild_indexes()
    assert await _index(runtime) is not None and await store.deferred_indexes(runtime.pool) == []
    assert await store.job_state(runtime.pool, job_id) == "done"


async def test_a_sweep_does_not_wait_for_another_build(runtime: Runtime, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (20 * bulk_index.BYTES_PER_CHUNK))  # an empty table: would be held back
    async with runtime.pool.acquire() as conn, conn.transaction():
        assert await store.lock_deferred(conn)  # another deferral or build under way
        assert await bulk_index.defer_for_files(runtime.pool, [big]) is None
    assert await _index(runtime) is not None
    await _hold_back(runtime, job_id=None, holder="elsewhere-host:1")
    name = (await store.deferred_indexes(runtime.pool))[0]["indexname"]
    async with runtime.pool.acquire() as conn, conn.transaction():
        assert await store.lock_deferred(conn)
        assert await bulk_index.rebuild(runtime.pool, name, wait=False) is None
    assert await _index(runtime) is None  # a holder on another host is not judged from here
    assert await bulk_index.rebuild_released(runtime.pool) == []
    built = await bulk_index.rebuild(runtime.pool, name, wait=False)
    assert built is not None and built.seconds > 0 and await _index(runtime) is not None
