"""What the API process watches while it runs: the embedder record (``kb reembed`` run by another process)
and, once the server listens, where it really is bound (the start-up log names that host, not ``KB_HOST``,
when uvicorn was started by hand on another address)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg
import structlog

from ingest.jobs import STOP_GRACE_S, Worker
from ingest.pipeline import IngestContext
from kb.core.embedder_record import mismatch_message, read_record
from kb.core.errors import KBError
from kb.runtime import Runtime

log = structlog.get_logger("kb.app")

EMBEDDER_CHECK_S = 2.0


async def warm_up(rt: Runtime, budget_s: float) -> int:
    """Before the server says it is ready: load what the first questions would otherwise load one by one, for
    at most ``budget_s`` (``KB_WARMUP_S``) — the lemmatiser's and the token counter's tables, a first run of the
    embedder and the measure names' vectors (``router.meaning``); each collection's catalog and its documents'
    chunks, vectors and trees into the process's caches (``router.doccache``, up to its budget); then the BM25
    token counts of those nodes' labels and chunks (``router.scoring``, up to its size). Returns the documents
    loaded. A database that does not answer is left to the watcher: warming is skipped, not fatal."""
    from kb.core.collections import list_collections
    from kb.core.text import count_tokens
    from router.reading import read_question
    from router.scoring import warm_token_counts
    from router.tree_search import warm_tree

    if budget_s <= 0:
        return 0
    pipeline, loaded, counted, started = rt.pipeline, 0, 0, time.perf_counter()
    deadline = started + budget_s
    try:
        async with asyncio.timeout(budget_s):
            read_question("What was revenue in fiscal 2023?", ())
            collections = [c for c in await list_collections(rt.pool) if c.documents]
            if collections:  # else no question can be answered yet: nothing more to load
                count_tokens("What was revenue in fiscal 2023?")
                await asyncio.to_thread(rt.embedder.embed_batch, ["What was revenue in fiscal 2023?"])
                await pipeline.meaning.vectors()  # the measure names, embedded once per process (≈ 1 s)
            texts: list[list[str]] = []  # per document: its nodes' labels, then its chunks' texts
            for coll in collections:
                catalog = await pipeline.catalogs.get(coll.id)
                stamp = (coll.id, catalog.stamp)
                for doc_id in catalog.docs:
                    if pipeline.documents.bytes >= pipeline.documents.max_bytes:
                        break
                    doc = await pipeline.documents.get(rt.pool, doc_id, stamp)
                    texts.append([*await warm_tree(rt.pool, doc_id, stamp), *(r["text"] for r in doc.rows)])
                    loaded += 1
            for doc_texts in texts:  # CPU in the loop: the timeout cannot cut it, so the deadline is checked here
                if time.perf_counter() > deadline:
                    raise TimeoutError
                counted += warm_token_counts(doc_texts)
    except TimeoutError:
        log.info("warmup.cut", seconds=budget_s, documents=loaded, token_counts=counted)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, KBError) as exc:
        log.warning("warmup.skipped", error=f"{type(exc).__name__}: {exc}"[:200])
    import gc
    gc.collect()
    gc.freeze()
    log.info("warmup.done", documents=loaded, token_counts=counted, seconds=round(time.perf_counter() - started, 2))
    return loaded


class WorkerRunner:
    """The API process's ingest worker. It pauses while the stored vectors are another embedder's (``kb reembed``
    to another model: its vectors would not fit) and starts again once they match; ``state`` says which, for
    ``/health``. A worker that crashed is ``stopped`` with the error as its reason (logged when seen)."""

    def __init__(self, ctx: IngestContext | None, stale_s: int) -> None:
        self.ctx = ctx
        self.stale_s = stale_s
        self.reason: str | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[int] | None = None

    def start(self) -> None:
        """Start a worker unless one is running (or this process runs none); one still handing its file back
        after a pause is waited for first."""
        if self.ctx is None or (self._task is not None and not self._task.done() and not self._stop.is_set()):
            return
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run(self.ctx, self._task, self._stop))
        self._task.add_done_callback(self._ended)
        self.reason = None

    async def _run(self, ctx: IngestContext, previous: asyncio.Task[int] | None, stop: asyncio.Event) -> int:
        if previous is not None:
            await asyncio.wait({previous})  # its end (and any crash) is reported by its own callback
        worker = Worker(ctx, concurrency=1, stale_s=self.stale_s)
        log.info("worker.started", worker=worker.name)
        return await worker.run(stop, grace_s=STOP_GRACE_S)

    def pause(self, reason: str) -> None:
        """Stop taking files (the one in hand is handed back); ``start`` resumes."""
        if self._task is not None and not self._task.done():
            self.reason = reason
            self._stop.set()
            log.warning("worker.paused", reason=reason)

    def _ended(self, task: asyncio.Task[int]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.reason = f"the ingest worker crashed: {type(task.exception()).__name__}: {task.exception()}"
            log.error("worker.crashed", error=self.reason)

    @property
    def state(self) -> str:
        """``off`` (``KB_RUN_WORKER=false``), ``running`` or ``stopped``."""
        if self.ctx is None:
            return "off"
        return "running" if self._task is not None and not self._task.done() else "stopped"

    async def close(self) -> None:
        """Stop the worker and wait for it (a worker stuck longer than ``STOP_GRACE_S`` is cancelled)."""
        self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task})  # a crash was logged by _ended: the rest of the shutdown still runs


async def watch_embedder(rt: Runtime, on_problem: Callable[[str | None], None], stop: asyncio.Event,
                         interval_s: float = EMBEDDER_CHECK_S) -> None:
    """Until ``stop``: read the embedder record every ``interval_s``. A record this process's embedder no
    longer matches (``kb reembed`` to another model) is reported through ``on_problem(reason)`` (queries
    would compare vectors of two embedders); the same embedder at a new generation is adopted, and reported as
    ``on_problem(None)`` (the ingest worker then writes at that generation)."""
    problem: str | None = None
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
            return
        if not rt.db_available:
            continue
        try:
            record = await asyncio.wait_for(read_record(rt.pool), timeout=interval_s)
        except Exception as exc:  # noqa: BLE001 - the database watcher reports an unreachable database
            log.debug("embedder.check_failed", error=f"{type(exc).__name__}: {exc}"[:200])
            continue
        if record is None:
            continue
        now: str | None = None
        regenerated = False
        if not record.matches(rt.embedder.model_id, rt.embedder.dimension):
            now = (mismatch_message(record, rt.embedder.model_id, rt.embedder.dimension)
                   + "; then restart this server")
        elif record.generation != rt.embedder_record.generation:
            log.info("embedder.regenerated", generation=record.generation)
            rt.embedder_record = record
            regenerated = True
        if regenerated and now is None and problem is None:  # re-embedded by the same model: ingest at the new
            on_problem(None)  # generation (its stored vectors were refused as stale before)
        if now != problem:
            (log.error if now else log.info)("embedder.changed" if now else "embedder.matches", detail=now)
            problem = now
            on_problem(now)


def listening_hosts(port: int | None = None) -> list[str]:
    """The addresses this process's listening TCP sockets are bound to (Linux ``/proc``; else empty)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/self/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    hosts: list[str] = []
    for table, width in (("tcp", 4), ("tcp6", 16)):
        try:
            rows = Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            addr_hex, port_hex = cols[1].split(":")
            if port is not None and int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(addr_hex)
            # /proc prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, width, 4))
            hosts.append(str(ipaddress.ip_address(raw)))
    return sorted(set(hosts))


async def bound_hosts(configured: str, wait_s: float = 10.0) -> list[str]:
    """Where the server listens, once it does (uvicorn binds after the lifespan has started); the configured
    host when that cannot be seen within ``wait_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while loop.time() < deadline:
        found = await asyncio.to_thread(listening_hosts)
        if found:
            return found
        await asyncio.sleep(0.2)
    return [configured]
