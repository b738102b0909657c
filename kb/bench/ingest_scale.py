"""`kb bench ingest --workers 1,2,4`: N ``kb worker`` processes against one database (issue 26 item 4).

For each N: a fresh synthetic PDF corpus (``--files`` × ``--pages-per-file``; its text differs per run so the
embedding cache never answers), a collection of its own, N worker processes started and ready (model loaded)
before the job is created; the clock runs from the job's creation to its end. Workers claim files with
``FOR UPDATE SKIP LOCKED`` (``ingest.jobs``); while they run, ``pg_stat_activity`` is sampled for sessions
waiting on a heavyweight lock, split into statements on the job tables and the rest. Reported per N: pages/s,
chunks/s, files ok/failed, lock-wait samples and waiter-seconds. ``--serve-embeddings`` starts
``kb.bench.embed_server`` (the configured local model behind an OpenAI-compatible ``/v1/embeddings``) in its
own process and points the workers at it with ``KB_EMBEDDING_BASE_URL``. Each run's collection and corpus are
removed afterwards. Each worker process runs ``KB_INGEST_WORKERS=1`` (one claim loop, one parser process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import structlog

from kb.core.errors import ConfigError
from kb.core.process import as_child

log = structlog.get_logger("kb.bench.ingest_scale")

BENCH_MARK = "kb bench ingest --workers"  # the description of a collection this bench made
READY_LINE = "waiting for ingest jobs"  # what `kb worker` prints once it can claim files
READY_TIMEOUT_S = 300.0
SERIES_POINTS = 10  # points of a run's memory over time
STOP_TIMEOUT_S = 20.0
SQL_LOCK_WAITERS = r"""
SELECT a.wait_event, a.query ILIKE '%ingest_job%' AS job_table,
       left(regexp_replace(a.query, '\s+', ' ', 'g'), 72) AS statement
FROM pg_stat_activity a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.wait_event_type = 'Lock'"""
SQL_BENCH_COLLECTION = "SELECT id, description FROM collections WHERE name = $1"
SQL_JOB_WORKERS = "SELECT count(DISTINCT worker) FROM ingest_job_items WHERE job_id = $1"
SQL_DROP_COLLECTION = "DELETE FROM collections WHERE id = $1"
SQL_JOB_PROGRESS = """
SELECT count(*) FILTER (WHERE status NOT IN ('pending', 'running')) AS done,
       coalesce(sum(stage_done) FILTER (WHERE status = 'running'), 0) AS moving,
       string_agg(stage, ',') FILTER (WHERE status = 'running') AS stages
FROM ingest_job_items WHERE job_id = $1"""  # documents, chunks, nodes, jobs cascade
_WORDS = (
    "revenue margin segment growth capital liquidity customer product market operating income tax cash flow "
    "equity debt lease asset liability pension supply demand region volume price cost expense investment "
    "acquisition goodwill inventory receivable contract backlog risk currency interest dividend share "
    "guidance outlook quarter annual subsidiary impairment amortization depreciation restructuring litigation "
    "compliance regulation headcount facility warehouse logistics pricing discount subscription renewal"
).split()


@dataclass(frozen=True)
class ScaleConfig:
    """What ``kb bench ingest --workers`` runs."""

    workers: tuple[int, ...]
    files: int = 40
    pages_per_file: int = 8
    serve_embeddings: bool = False
    sample_s: float = 0.05
    collection: str = "bench-ingest-workers"
    seed: int = 7
    json_out: Path | None = None


class LockWaits(msgspec.Struct, frozen=True):
    """``pg_stat_activity`` sampled every ``interval_s`` during a run: sessions waiting on a lock."""

    samples: int
    interval_s: float
    job_table_samples: int  # samples in which a statement on ingest_jobs / ingest_job_items waited
    job_table_waiter_s: float  # waiting sessions × interval, summed: an estimate of time spent waiting
    job_table_max_waiters: int
    other_samples: int  # lock waits on other statements (documents, chunks, ...)
    other_waiter_s: float
    by_event: dict[str, int]  # wait_event (tuple, transactionid, relation, advisory ...) → waiter samples
    by_statement: dict[str, int]  # the waiting statement's first 72 characters → waiter samples


class WorkerRun(msgspec.Struct, frozen=True):
    """One N: the job's figures and the lock waits while it ran."""

    workers: int
    embedder: str
    remote_embeddings: bool
    files: int
    files_ok: int
    files_failed: int
    pages: int
    chunks: int
    seconds: float
    pages_per_s: float
    chunks_per_s: float
    lock_waits: LockWaits
    worker_start_s: float  # until every worker process was ready (not in ``seconds``)
    workers_claiming: int  # distinct workers that claimed the job's files
    peak_rss_mb: float = 0.0  # the largest resident memory of one worker process with its parser, sampled every 0.5 s
    progress_gap_s: float = 0.0  # the longest time the job's progress (files done, stage, count) stood still
    memory_series: tuple[tuple[float, int, float], ...] = ()
    """(seconds since the job started, files finished, the largest worker memory in MB since the previous point):
    one point every ``SERIES_POINTS``-th of the run, so memory can be seen bounded over time."""


class ScaleReport(msgspec.Struct, frozen=True):
    config: dict[str, Any]
    machine: dict[str, Any]
    runs: list[WorkerRun]


def parse_workers(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` → (1, 2, 4); each at least 1."""
    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise ConfigError(f"--workers takes worker process counts such as 1,2,4 (got {text!r})")
    return counts


def write_corpus(folder: Path, files: int, pages: int, seed: str) -> list[Path]:
    """``files`` PDFs of ``pages`` pages each (a heading and about 40 lines of report prose with figures per
    page), the text drawn from ``seed``: a new seed gives text the embedding cache has not seen."""
    import pymupdf

    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(files):
        rng = random.Random(f"{seed}-{i}")
        doc = pymupdf.open()
        for p in range(pages):
            page = doc.new_page(width=612, height=792)
            title = f"{p + 1}. {rng.choice(_WORDS).title()} and {rng.choice(_WORDS)}"
            page.insert_text((72, 80), title, fontsize=14)
            lines = []
            for _ in range(40):
                words = [rng.choice(_WORDS) for _ in range(9)]
                words.insert(rng.randrange(9), f"{rng.uniform(1, 999):.1f}")
                lines.append(" ".join(words))
            page.insert_textbox(pymupdf.Rect(72, 100, 540, 740), "\n".join(lines), fontsize=9)
        path = folder / f"report-{i:03d}.pdf"
        doc.save(path)
        doc.close()
        made.append(path)
    return made


class LockSampler:
    """Counts, every ``interval_s`` on its own connection, the sessions waiting on a heavyweight lock."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url = url
        self.interval_s = interval_s
        self.samples = 0
        self.job = Counter[int]()  # waiters → samples
        self.other = Counter[int]()
        self.by_event = Counter[str]()
        self.by_statement = Counter[str]()

    async def run(self, stop: asyncio.Event) -> None:
        conn = await asyncpg.connect(self.url)
        try:
            while not stop.is_set():
                rows = await conn.fetch(SQL_LOCK_WAITERS)
                self.samples += 1
                job = sum(1 for r in rows if r["job_table"])
                self.job[job] += 1
                self.other[len(rows) - job] += 1
                self.by_event.update(str(r["wait_event"]) for r in rows)
                self.by_statement.update(str(r["statement"]).strip() for r in rows)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)
        finally:
            await conn.close()

    def result(self) -> LockWaits:
        def waiter_s(c: Counter[int]) -> float:
            return round(sum(n * k for n, k in c.items()) * self.interval_s, 3)

        return LockWaits(samples=self.samples, interval_s=self.interval_s,
                         job_table_samples=sum(k for n, k in self.job.items() if n),
                         job_table_waiter_s=waiter_s(self.job), job_table_max_waiters=max(self.job, default=0),
                         other_samples=sum(k for n, k in self.other.items() if n), other_waiter_s=waiter_s(self.other),
                         by_event=dict(self.by_event), by_statement=dict(self.by_statement.most_common(10)))


async def _ready(proc: asyncio.subprocess.Process, timeout_s: float) -> None:
    """Wait for a worker's ready line on its stdout (its model loaded, its runtime open)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), left) if left > 0 else b""
        except TimeoutError:
            line = b""
        if READY_LINE.encode() in line:
            return
        if not line:
            raise ConfigError(f"kb bench ingest: a worker process (pid {proc.pid}) was not ready within "
                              f"{timeout_s:.0f} s (exit code {proc.returncode}); see its log beside the corpus")


@contextlib.asynccontextmanager
async def worker_processes(n: int, env: dict[str, str], log_dir: Path) -> AsyncIterator[list[int]]:
    """``n`` ``kb worker`` processes with ``env``, ready; stopped (SIGTERM, then killed) on leaving."""
    procs: list[asyncio.subprocess.Process] = []
    try:
        for i in range(n):
            with (log_dir / f"worker-{i}.log").open("wb") as err:
                procs.append(await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "kb.cli", "worker", env=as_child(env), stdout=subprocess.PIPE,
                    stderr=err))
        await asyncio.gather(*(_ready(p, READY_TIMEOUT_S) for p in procs))
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                await asyncio.wait_for(p.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.warning("bench.worker_killed", pid=p.pid)
                p.kill()
                await p.wait()


@contextlib.contextmanager
def embeddings_server(env: dict[str, str], log_dir: Path) -> Any:
    """``kb.bench.embed_server`` in its own process; yields its base URL; stopped on leaving."""
    with (log_dir / "embed-server.log").open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kb.bench.embed_server"], env=as_child(env), stdout=subprocess.PIPE,
                                stderr=err, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            raise ConfigError(f"kb bench ingest: the embeddings server did not start (exit {proc.poll()})")
        yield line.split()[2]
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _bench_collection(pool: asyncpg.Pool, name: str) -> int:
    """A new collection for one run; one this bench left behind is dropped first, any other is refused."""
    from kb.core.collections import create_collection

    row = await pool.fetchrow(SQL_BENCH_COLLECTION, name)
    if row is not None:
        if row["description"] != BENCH_MARK:
            raise ConfigError(f"kb bench ingest: collection {name!r} exists and was not made by this benchmark; "
                              "nothing was changed")
        await pool.execute(SQL_DROP_COLLECTION, row["id"])
    return (await create_collection(pool, name, BENCH_MARK)).id


async def _finished(pool: asyncpg.Pool, job_id: int) -> Any:
    """The job's status once it is finished (polled: the workers are other processes)."""
    from ingest.jobs import FINISHED, get_job

    while True:
        job = await get_job(pool, job_id)
        if job.status in FINISHED:
            return job
        await asyncio.sleep(0.2)


class ProcessSampler:
    """Every ``interval_s``: the resident memory of each worker process with its children (its parser), the
    largest seen; and the job's progress (files finished, the running files' stage and count), the longest time
    it stood still."""

    def __init__(self, pids: Sequence[int], interval_s: float = 0.5) -> None:
        self.pids = list(pids)
        self.interval_s = interval_s
        self.peak_bytes = 0
        self.longest_still_s = 0.0
        self.samples: list[tuple[float, int, int]] = []  # (seconds, files done, largest worker bytes)

    def series(self, points: int = SERIES_POINTS) -> tuple[tuple[float, int, float], ...]:
        """The samples in ``points`` equal spans of the run: each span's end, files done, largest MB in it."""
        if not self.samples:
            return ()
        end = self.samples[-1][0] or 1.0
        spans: dict[int, tuple[float, int, int]] = {}
        for t, done, rss in self.samples:
            k = min(points - 1, int(points * t / end))
            prev = spans.get(k)
            spans[k] = (t, done, max(rss, prev[2] if prev else 0))
        return tuple((round(t, 1), done, round(rss / 2**20, 1)) for _, (t, done, rss) in sorted(spans.items()))

    def _rss(self, pid: int) -> int:
        import psutil

        try:
            proc = psutil.Process(pid)
            return sum(p.memory_info().rss for p in (proc, *proc.children(recursive=True)))
        except psutil.Error:
            return 0

    async def run(self, pool: asyncpg.Pool, job_id: int, stop: asyncio.Event) -> None:
        seen, since = None, time.monotonic()
        started = since
        while not stop.is_set():
            rss = max(self._rss(p) for p in self.pids) if self.pids else 0
            self.peak_bytes = max(self.peak_bytes, rss)
            row = await pool.fetchrow(SQL_JOB_PROGRESS, job_id)
            self.samples.append((time.monotonic() - started, int(row["done"]) if row is not None else 0, rss))
            now = (row["done"], row["moving"], row["stages"]) if row is not None else None
            if now != seen:
                seen, since = now, time.monotonic()
            self.longest_still_s = max(self.longest_still_s, time.monotonic() - since)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)


async def measure_workers(rt: Any, cfg: ScaleConfig, n: int, work_dir: Path,
                          embed_url: str | None) -> WorkerRun:
    """One run with ``n`` worker processes: see the module docstring."""
    from ingest.jobs import create_job

    name = f"{cfg.collection}-{n}"
    corpus = work_dir / f"w{n}"
    shutil.rmtree(corpus, ignore_errors=True)
    await asyncio.to_thread(write_corpus, corpus / "pdfs", cfg.files, cfg.pages_per_file,
                            f"{cfg.seed}-{n}-{time.time_ns()}")
    coll_id = await _bench_collection(rt.pool, name)
    env = {**os.environ, "KB_DATABASE_URL": rt.database_url, "KB_INGEST_WORKERS": "1"}
    if embed_url:
        env |= {"KB_EMBEDDING_BASE_URL": embed_url, "KB_EMBEDDING_MODEL": rt.embedder.model_id,
                "KB_EMBEDDING_DIMENSIONS": str(rt.embedder.dimension)}
    try:
        t0 = time.perf_counter()
        async with worker_processes(n, env, corpus) as pids:
            started_s = time.perf_counter() - t0
            sampler = LockSampler(rt.database_url, cfg.sample_s)
            stop = asyncio.Event()
            sampling = asyncio.create_task(sampler.run(stop))
            t = time.perf_counter()
            job_id = await create_job(rt.pool, collection_id=coll_id, path=corpus / "pdfs")
            watcher = ProcessSampler(pids)
            watching = asyncio.create_task(watcher.run(rt.pool, job_id, stop))
            job = await _finished(rt.pool, job_id)
            seconds = time.perf_counter() - t
            stop.set()
            await sampling
            await watching
            claiming = int(await rt.pool.fetchval(SQL_JOB_WORKERS, job_id))
    finally:
        row = await rt.pool.fetchrow(SQL_BENCH_COLLECTION, name)
        if row is not None:
            await rt.pool.execute(SQL_DROP_COLLECTION, row["id"])
    shutil.rmtree(corpus / "pdfs", ignore_errors=True)  # the worker logs stay
    counts = job.counts
    run = WorkerRun(workers=n, embedder=rt.embedder.model_id, remote_embeddings=embed_url is not None,
                    files=job.files, files_ok=counts.get("ok", 0), files_failed=counts.get("failed", 0),
                    pages=job.pages, chunks=job.chunks, seconds=round(seconds, 2),
                    pages_per_s=round(job.pages / seconds, 2), chunks_per_s=round(job.chunks / seconds, 2),
                    lock_waits=sampler.result(), worker_start_s=round(started_s, 2),
                    workers_claiming=claiming, peak_rss_mb=round(watcher.peak_bytes / 2**20, 1),
                    progress_gap_s=round(watcher.longest_still_s, 1), memory_series=watcher.series())
    log.info("bench.ingest_workers", workers=n, pages_per_s=run.pages_per_s, chunks_per_s=run.chunks_per_s,
             job_table_lock_samples=run.lock_waits.job_table_samples)
    return run


async def run_scale(cfg: ScaleConfig) -> ScaleReport:
    """Every N of ``cfg.workers``, one after another, on the configured database."""
    from kb.core.settings import get_settings
    from kb.runtime import open_runtime

    settings = get_settings()
    work_dir = settings.database.data_dir / "bench" / "ingest-workers"
    work_dir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    runs: list[WorkerRun] = []
    async with open_runtime(settings) as rt:
        with contextlib.ExitStack() as stack:
            server_env = {**os.environ, "KB_EMBEDDING_MODEL": rt.embedder.model_id}  # the database's model
            url = stack.enter_context(embeddings_server(server_env, work_dir)) if cfg.serve_embeddings else None
            for n in cfg.workers:
                runs.append(await measure_workers(rt, cfg, n, work_dir, url))
    machine = {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load],
               "load_after": [round(x, 2) for x in os.getloadavg()]}
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()}
    return ScaleReport(config=config, machine=machine, runs=runs)


def summary_lines(report: ScaleReport) -> list[str]:
    """The report as a small table for the terminal and the README."""
    lines = ["| workers (claiming) | embedder | pages | chunks | seconds | pages/s | chunks/s | failed "
             "| job-table lock waits (samples, waiter-s) | other lock waits | peak worker MB | longest still s |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|"]
    for r in report.runs:
        w = r.lock_waits
        emb = f"{r.embedder} (remote)" if r.remote_embeddings else r.embedder
        lines.append(f"| {r.workers} ({r.workers_claiming}) | {emb} | {r.pages} | {r.chunks} | {r.seconds} | {r.pages_per_s} | "
                     f"{r.chunks_per_s} | {r.files_failed} | {w.job_table_samples}/{w.samples}, "
                     f"{w.job_table_waiter_s} | {w.other_samples}/{w.samples}, {w.other_waiter_s} | {r.peak_rss_mb} | "
                     f"{r.progress_gap_s} |")
    for r in report.runs:
        if r.memory_series:
            points = ", ".join(f"{t:g} s: {done} files, {mb:g} MB" for t, done, mb in r.memory_series)
            lines.append(f"\nMemory over time, N = {r.workers} (largest worker with its parser per tenth of the run): "
                         f"{points}")
    return lines


def config_from_args(args: argparse.Namespace) -> ScaleConfig:
    if args.files < 1 or args.pages_per_file < 1:
        raise ConfigError("kb bench ingest --workers: --files and --pages-per-file must be at least 1")
    return ScaleConfig(workers=parse_workers(args.workers), files=args.files, pages_per_file=args.pages_per_file,
                       serve_embeddings=args.serve_embeddings, json_out=args.json_out)


def run_cli(args: argparse.Namespace) -> int:
    from kb.core.process import run_async

    report = run_async(run_scale(config_from_args(args)))
    print("\n".join(summary_lines(report)))
    if args.json_out:
        args.json_out.write_text(json.dumps(msgspec.to_builtins(report), indent=2))
        print(f"kb bench: ingest scaling written to {args.json_out}")
    return 0
