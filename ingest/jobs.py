"""Folder ingest as jobs in Postgres, claimed by any number of workers with FOR UPDATE SKIP LOCKED."""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import structlog

from ingest import bulk_index, store
from ingest.files import OUTSIDE_ROOT, hard_link
from ingest.formats import format_of
from ingest.metadata import load_folder_metadata
from ingest.pageindex import TREE_SIDECAR_SUFFIX
from ingest.pipeline import IngestContext, IngestOutcome, ingest_file
from ingest.store import Deleting, finish_delete, stalled_deletes
from kb.core.collections import get_collection
from kb.core.db import is_db_unavailable
from kb.core.errors import ConflictError, IngestError, NotFoundError, ValidationError

log = structlog.get_logger("ingest.jobs")

MAX_ATTEMPTS = 3
RETRY = "retry"  # an outcome that is not final: the item goes back to the queue
FINISHED = store.JOB_FINISHED
STORED = frozenset({"ok", "replaced"})  # item states of a file stored as a document (new, or a new version)
CANCEL_POLL_S = 2.0  # a file in hand stops (its parser process killed) this soon after its job is cancelled
STOP_GRACE_S = 5.0  # a stopped worker that has not handed its files back by then is cancelled
PROGRESS_S = 0.5  # a file's stage is written at most this often


class JobItem(msgspec.Struct, frozen=True):
    name: str
    path: str
    status: str
    error: str | None
    document_id: int | None
    pages: int
    chunks: int
    seconds: float | None
    attempts: int
    llm_calls: int = 0
    stage: str | None = None  # while running: reading | tree | summaries | embedding | storing
    stage_done: int = 0  # pages, or chunks embedded, of stage_total (0: not known)
    stage_total: int = 0
    id: int = 0  # for retry / remove of a failed file


class JobStatus(msgspec.Struct, frozen=True):
    id: int
    collection: str
    root_path: str
    recursive: bool
    status: str
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    counts: dict[str, int]
    files: int
    pages: int
    chunks: int
    pages_per_s: float | None
    items: list[JobItem]
    seconds_left: float | None = None  # a running job: its files left at the mean wall time per finished file
    llm_calls: int = 0
    llm_calls_per_100_pages: float | None = None

    @property
    def files_done(self) -> int:
        """Files no longer pending or running (ingested, skipped, failed, unsupported or cancelled)."""
        return sum(n for status, n in self.counts.items() if status not in {"pending", "running"})


MAX_PATH_BYTES = 4096  # PATH_MAX
MAX_NAME_BYTES = 255  # NAME_MAX of one path component
MAX_FOLDER_DEPTH = 64  # a recursive ingest refuses deeper folder trees
MAX_JOB_FILES = 100_000


def _check_path_text(path: str) -> None:
    """Refuse, with a 400, a path no file system could hold (before any system call sees it)."""
    if "\x00" in path:
        raise ValidationError("path contains a NUL character")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise ValidationError(f"path is longer than {MAX_PATH_BYTES} bytes")
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ValidationError(f"a path component is longer than {MAX_NAME_BYTES} bytes: {part[:40]!r}…")


def resolve_ingest_path(root: Path, path: str) -> Path:
    """Resolve ``path`` (relative to ``root`` or absolute) and require it inside ``root``.

    Symlinks are resolved first, so neither ``..`` nor a link can escape the root.
    """
    _check_path_text(path)
    try:
        raw = Path(path)
        candidate = (raw if raw.is_absolute() else root / raw).resolve()
        root = root.resolve()
        if candidate != root and root not in candidate.parents:
            raise ValidationError(f"path {path!r} is outside the ingest root (KB_INGEST_ROOT)")
        exists = candidate.exists()
    except (ValueError, RuntimeError, OSError) as exc:
        raise ValidationError(f"invalid path {path!r}: {exc.strerror if isinstance(exc, OSError) else exc}") from exc
    if not exists:
        raise NotFoundError(f"path {path!r} does not exist")
    return candidate


def _walk(root: Path, recursive: bool) -> list[Path]:
    """Files under ``root`` (sorted), without following folder links; iterative, so a deep tree cannot
    exhaust the stack. Hidden entries (a name starting with ".") are skipped."""
    out: list[Path] = []
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise ValidationError(f"cannot list folder {folder.name!r}: {exc.strerror}") from exc
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                if not recursive:
                    continue
                if depth + 1 >= MAX_FOLDER_DEPTH:
                    raise ValidationError(f"the folder tree is deeper than {MAX_FOLDER_DEPTH} levels")
                stack.append((Path(entry.path), depth + 1))
            elif entry.is_file():  # a link to a file counts; its real path is checked below
                out.append(Path(entry.path))
                if len(out) > MAX_JOB_FILES:
                    raise ValidationError(f"more than {MAX_JOB_FILES} files in one job; ingest subfolders separately")
    return sorted(out)


def document_name(path: Path, folder: Path, name_root: Path | None) -> str:
    """A file's document name: its path under ``name_root`` (the ingest root) when it lies inside it, so two
    folders' ``annual.md`` never share a name; else its path under the job's ``folder`` (or its file name)."""
    for base in (name_root, folder):
        if base is not None and base != path and base in path.parents:
            return path.relative_to(base).as_posix()
    return path.name


def refusal(path: Path, allowed: Path | None) -> str | None:
    """Why a file of a confined job is refused (its real path lies outside ``allowed``, or it is a hard link
    that may be another name of a file outside it), or None."""
    if allowed is None:
        return None
    real = path.resolve()
    if real != allowed and allowed not in real.parents:
        return OUTSIDE_ROOT
    try:
        links = path.stat().st_nlink
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}"
    return hard_link(links)


def enumerate_files(root: Path, recursive: bool, allowed_root: Path | None = None,
                    name_root: Path | None = None) -> list[tuple[Path, str, str | None]]:
    """(file, document name, refusal reason) triples; names are paths relative to ``name_root`` (the ingest
    root) when given, else to the folder, so files of the same name in other folders cannot collide. Hidden
    files and folders (a name starting with ".") are skipped; folder links are not followed. With
    ``allowed_root``, files whose real path (links resolved) lies outside it, and hard links, are refused."""
    allowed = allowed_root.resolve() if allowed_root is not None else None
    names = name_root.resolve() if name_root is not None else None
    def name(p: Path, folder: Path) -> str:
        return document_name(Path(os.path.abspath(p)), Path(os.path.abspath(folder)), names)

    if root.is_file():
        return [(root, name(root, root.parent), refusal(root, allowed))]
    out: list[tuple[Path, str, str | None]] = []
    for p in _walk(root, recursive):
        if p.name.endswith((".meta.json", TREE_SIDECAR_SUFFIX)):
            continue
        if p.name in {"metadata.jsonl", "metadata.csv", "documents.jsonl", "questions.jsonl"} and p.parent == root:
            continue
        out.append((p, name(p, root), refusal(p, allowed)))
    return out


def qualified_names(path: Path, name: str) -> list[str]:
    """``name``, then the file's path with one more of its folders in front each time, up to the whole path."""
    whole = Path(os.path.abspath(path))
    depth = len(Path(name).parts)
    longer = [Path(*whole.parts[-k:]).as_posix() for k in range(depth + 1, len(whole.parts))]
    return [name, *longer, whole.as_posix()]


def loose_names(files: list[tuple[Path, str, str | None]], name_root: Path | None) -> dict[int, list[str]]:
    """For each file named by its place in the job's folder (not under the ingest root): the names it may take."""
    root = name_root.resolve() if name_root is not None else None
    return {i: qualified_names(file, name) for i, (file, name, _) in enumerate(files)
            if root is None or root not in Path(os.path.abspath(file)).parents}


def names_apart(files: list[tuple[Path, str, str | None]], options: dict[int, list[str]],
                stored: dict[str, str]) -> list[tuple[Path, str, str | None]]:
    """Each loose file keeps the name its stored document has (``stored``: name → source path), else takes the
    first of its names that no stored document and no other file of the job holds."""
    taken = {name for _, name, _ in files}
    out = list(files)
    for i, names in options.items():
        file, name, refused = files[i]
        here = os.path.abspath(file)
        mine = [n for n in names if n in stored and os.path.abspath(stored[n]) == here]
        free = [n for n in names if n not in stored and (n == name or n not in taken)]
        chosen = (mine or free or names[-1:])[0]
        if chosen != name:
            taken.add(chosen)
            out[i] = (file, chosen, refused)
    return out


async def _names_apart(pool: asyncpg.Pool, collection_id: int, files: list[tuple[Path, str, str | None]],
                       name_root: Path | None) -> list[tuple[Path, str, str | None]]:
    """Files named by their place in the job's folder (outside the ingest root) do not take the name of a stored
    document from another file: ``kb ingest /a`` and then ``kb ingest /b`` both holding ``annual.md`` make
    ``annual.md`` and ``b/annual.md``. The same file ingested again keeps the name it was given (and
    replaces its document when changed); a name taken, the next longer one is tried."""
    options = await asyncio.to_thread(loose_names, files, name_root)
    if not options:
        return files
    stored = await store.sources_by_name(pool, collection_id, sorted({n for ns in options.values() for n in ns}))
    return await asyncio.to_thread(names_apart, files, options, stored)


async def create_job(pool: asyncpg.Pool, *, collection_id: int, path: Path, recursive: bool = False,
                     metadata_path: Path | None = None, allowed_root: Path | None = None,
                     name_root: Path | None = None, upload: bool = False, force: bool = False,
                     name: str | None = None) -> int:
    """Create a job with one item per file; unsupported files are recorded as such right away.

    ``allowed_root`` confines the job: files whose real path lies outside it are refused now, and the
    worker checks each file again on the descriptor it reads from. Documents are named by their path under
    ``name_root`` (the ingest root; default: the folder ingested). An ``upload`` job's file is removed
    when it is skipped as a copy of a stored document, or (failed or cancelled) when its item is removed. With
    ``force`` its files are re-processed even when nothing changed (``ingest.pipeline.ingest_file``).

    The metadata file is read here, so a broken one is a 400 for the caller, not a failure per file.
    """
    if metadata_path is not None:
        try:
            await asyncio.to_thread(_load_job_metadata, path, metadata_path, allowed_root)
        except (IngestError, OSError, ValueError) as exc:
            raise ValidationError(f"metadata file {metadata_path.name!r} is unusable: {exc}") from exc
    files = await asyncio.to_thread(enumerate_files, path, recursive, allowed_root, name_root)
    if name is not None and len(files) == 1:  # one file re-ingested under its stored document's name
        files = [(files[0][0], name, files[0][2])]
    elif not upload:
        files = await _names_apart(pool, collection_id, files, name_root)
    allowed = await asyncio.to_thread(allowed_root.resolve) if allowed_root is not None else None
    rows = []
    for file, name, refused in files:
        supported = format_of(file) is not None
        status = "pending" if supported and not refused else "unsupported"
        reason = refused or (None if supported else f"unsupported file type {file.suffix or '(none)'}")
        rows.append((str(file), name, status, reason))
    job_id = await store.insert_job(pool, collection_id=collection_id, root_path=str(path), recursive=recursive,
                                    metadata_path=str(metadata_path) if metadata_path else None,
                                    allowed_root=str(allowed) if allowed is not None else None, upload=upload,
                                    items=rows, force=force)
    log.info("jobs.created", job_id=job_id, files=len(files), path=str(path))
    return int(job_id)


async def get_job(pool: asyncpg.Pool, job_id: int, *, items_limit: int | None = None,
                  items_offset: int = 0) -> JobStatus:
    """A job's status: totals over all its files, and its items (all, or ``items_limit`` from
    ``items_offset`` in file order; ``files`` is the full count)."""
    row = await store.job_row(pool, job_id)
    if row is None:
        raise NotFoundError(f"job {job_id} does not exist")
    rows = await store.job_items(pool, job_id, limit=items_limit, offset=items_offset)
    items = [JobItem(**dict(r)) for r in rows]
    totals = await store.job_totals(pool, job_id)
    counts = {t["status"]: int(t["files"]) for t in totals}
    pages = sum(int(t["pages"]) for t in totals if t["status"] in STORED)
    busy = sum(float(t["seconds"]) for t in totals if t["status"] in {*STORED, "failed"})
    fields = dict(row)
    idle = float(fields.pop("idle_seconds") or 0)  # stood finished before a retry: not working time
    started, finished = row["started_at"], row["finished_at"]
    wall = None
    if started is not None:
        end = finished or datetime.now(started.tzinfo)
        wall = max((end - started).total_seconds() - idle, 1e-6)
    rate = pages / wall if wall and pages else (pages / busy if busy else None)
    calls = sum(int(t["llm_calls"]) for t in totals)
    done = sum(n for status, n in counts.items() if status not in {"pending", "running"})
    left = sum(counts.values()) - done
    eta = round(left * wall / done, 1) if wall and done and left and finished is None else None
    return JobStatus(**fields, counts=counts, files=sum(counts.values()), pages=pages,
                     chunks=sum(int(t["chunks"]) for t in totals), pages_per_s=round(rate, 3) if rate else None,
                     items=items, llm_calls=calls, seconds_left=eta,
                     llm_calls_per_100_pages=round(100 * calls / pages, 2) if pages else None)


async def list_jobs(pool: asyncpg.Pool, limit: int = 20, offset: int = 0,
                    items_limit: int | None = None) -> list[JobStatus]:
    """The newest jobs first (``limit`` from ``offset``), each with at most ``items_limit`` items."""
    return [await get_job(pool, job_id, items_limit=items_limit)
            for job_id in await store.job_ids(pool, limit, offset)]


async def count_jobs(pool: asyncpg.Pool) -> int:
    return await store.count_ingest_jobs(pool)


async def finish_document_delete(pool: asyncpg.Pool, deleting: Deleting,
                                 on_progress: Callable[[int], object] | None = None) -> None:
    """Remove a document taken out by ``ingest.store.start_delete`` in batches, then its uploaded file
    (a file of a folder ingest is never touched)."""
    await finish_delete(pool, deleting.id, on_progress=on_progress)
    if await store.is_uploaded_file(pool, deleting.source_path):
        await discard_upload(pool, deleting.source_path)


def remove_upload(path: Path) -> None:
    """Delete an uploaded file and its folder when that is left empty (each upload has a folder of its own)."""
    try:
        path.unlink(missing_ok=True)
        path.parent.rmdir()
    except OSError as exc:  # a folder another upload of the same bytes still uses, or already gone
        if path.exists():
            log.warning("jobs.upload_not_removed", path=path.name, error=exc.strerror or str(exc))


async def discard_upload(pool: asyncpg.Pool, path: str) -> bool:
    """Remove an uploaded file no document keeps (its ingest was skipped, failed or cancelled, or its document
    was deleted). Returns whether it was removed."""
    if await store.is_document_source(pool, path):
        return False
    await asyncio.to_thread(remove_upload, Path(path))
    log.info("jobs.upload_removed", path=Path(path).name)
    return True


async def run_job(ctx: IngestContext, job_id: int, *, workers: int = 1,
                  on_progress: Callable[[JobStatus], object] | None = None, progress_s: float = 0.5,
                  stop: asyncio.Event | None = None, stale_s: int | None = None) -> JobStatus:
    """Run a local worker (``workers`` items at a time) until job ``job_id`` has finished, and return its status.

    The worker takes any queued file, of this job or another; files of the job held by another worker (the
    server's) are waited for, and taken over if that worker dies (after ``stale_s``, default
    ``KB_JOB_STALE_S``). A cancelled job ends once the worker let go of its files. When ``stop`` is set the
    file in hand is handed back and the status as it is then is returned. ``on_progress(status)`` is called
    at most every ``progress_s`` seconds and once at the end. A crash of the worker is raised here. The
    caller owns ``ctx`` (and closes its parser pool)."""
    if await store.job_state(ctx.pool, job_id) is None:
        raise NotFoundError(f"job {job_id} does not exist")
    worker = Worker(ctx, concurrency=workers, stale_s=stale_s)
    halt = asyncio.Event()
    running = asyncio.create_task(worker.run(halt, grace_s=STOP_GRACE_S))
    running.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: raised below unless we fail
    stop = stop or asyncio.Event()
    stopped = asyncio.create_task(stop.wait())
    reported: float | None = None
    try:
        while not running.done() and not stop.is_set():
            worker.changed.clear()  # set again by every file the worker finishes or hands back
            if await store.job_state(ctx.pool, job_id) in FINISHED and not worker.busy[job_id]:
                break
            if on_progress is not None and (reported is None or time.monotonic() - reported >= progress_s):
                on_progress(await get_job(ctx.pool, job_id))
                reported = time.monotonic()
            changed = asyncio.create_task(worker.changed.wait())
            await asyncio.wait({running, stopped, changed}, timeout=min(progress_s, 1.0),
                               return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
    finally:
        halt.set()
        stopped.cancel()
        if not running.done():
            await asyncio.wait({running})  # hands back what it holds; Worker.run bounds the wait
    await running  # a crash of the worker surfaces here
    job = await get_job(ctx.pool, job_id)
    if on_progress is not None:
        on_progress(job)
    return job


class Worker:
    """Claims job items one at a time and ingests them; several may run per process and per machine.

    ``busy`` counts the items in hand per job, and ``changed`` is set whenever one is finished or handed back
    (``run_job`` waits on it)."""

    def __init__(self, ctx: IngestContext, *, concurrency: int = 1, stale_s: int | None = None,
                 poll_s: float = 1.0) -> None:
        self.ctx = ctx
        self.concurrency = max(1, concurrency)
        self.stale_s = ctx.settings.job_stale_s if stale_s is None else stale_s
        self.poll_s = poll_s
        self.name = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.busy: collections.Counter[int] = collections.Counter()
        self.changed = asyncio.Event()
        self._meta_cache: dict[int, dict[str, Any]] = {}

    async def run(self, stop: asyncio.Event, *, grace_s: float | None = None) -> int:
        """Process items until ``stop`` is set; the items in hand are then handed back. Returns items done.

        With ``grace_s``, a worker still busy that long after ``stop`` (a database that does not answer) is
        cancelled rather than waited for, and 0 is returned."""
        loops = asyncio.gather(*(self._loop(stop) for _ in range(self.concurrency)))
        if grace_s is None:
            return sum(await loops)
        halted = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({loops, halted}, return_when=asyncio.FIRST_COMPLETED)
            if not loops.done():
                await asyncio.wait({loops}, timeout=grace_s)
        finally:
            halted.cancel()
            if not loops.done():  # stuck past the grace (or this task is being cancelled): not waited for
                loops.cancel()
                loops.add_done_callback(lambda f: f.cancelled() or f.exception())
        if not loops.done():
            log.warning("worker.stop_timeout", worker=self.name, grace_s=grace_s)
            return 0
        return sum(loops.result())

    async def _loop(self, stop: asyncio.Event) -> int:
        done = 0
        while not stop.is_set():
            try:
                claimed = await self.run_one(stop)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.error("worker.claim_failed", error=str(exc))
                claimed = False
            if claimed:
                done += 1
                continue
            try:
                await asyncio.wait_for(stop.wait(), timeout=self.poll_s)
            except TimeoutError:
                pass
        return done

    async def pending(self) -> int:
        return await store.pending_work(self.ctx.pool, self.stale_s)

    async def run_one(self, stop: asyncio.Event | None = None) -> bool:
        """Claim and process one item. Returns False when there was nothing to claim.

        The item ends early when its job is cancelled (``cancelled``), when it runs longer than
        ``KB_FILE_TIMEOUT_S`` (``failed``, parser processes replaced), or when ``stop`` is set: then it is
        handed back as ``pending`` without counting an attempt, for the next worker to take at once.
        """
        pool = self.ctx.pool
        for job_id in await store.give_up_items(pool, self.stale_s, MAX_ATTEMPTS):
            await store.maybe_finish_job(pool, job_id)
        await self.rebuild_indexes()  # held back by a job cancelled or ended elsewhere, or by a process gone
        for deleting in await stalled_deletes(pool, self.stale_s):  # its deleter (a server) stopped half-way
            log.info("worker.delete_resumed", doc_id=deleting.id)
            await finish_document_delete(pool, deleting)
        item = await store.claim_item(pool, self.name, self.stale_s, MAX_ATTEMPTS)
        if item is None:
            return False
        self.busy[item["job_id"]] += 1
        try:
            return await self._process(item, stop)
        finally:
            self.busy[item["job_id"]] -= 1
            if not self.busy[item["job_id"]]:
                del self.busy[item["job_id"]]
            self.changed.set()

    async def _process(self, item: asyncpg.Record, stop: asyncio.Event | None) -> bool:
        """Ingest one claimed item and record its outcome (or hand it back)."""
        pool = self.ctx.pool
        job = await store.job_for_item(pool, item["job_id"])
        if job is not None and job["status"] == "queued":  # its first file: a bulk job holds the vector index back
            await self._defer_index(item["job_id"])
        await store.mark_job_running(pool, item["job_id"])
        log.info("worker.item_claimed", job_id=item["job_id"], name=item["name"], attempt=item["attempts"])
        started = time.perf_counter()
        stage: list[tuple[str, int, int]] = []  # the latest stage reported, written by the flusher
        work = asyncio.create_task(self._ingest(item, job, stage.append))
        beat = asyncio.create_task(self._heartbeat(item["id"], item["job_id"]))  # returns when the job is cancelled
        flush = asyncio.create_task(self._write_progress(item["id"], stage))
        halt = asyncio.create_task(stop.wait()) if stop is not None else None
        waiting = {work, beat} | ({halt} if halt is not None else set())
        timeout = self.ctx.settings.file_timeout_s
        try:
            done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (beat, halt, flush):
                if task is not None:
                    task.cancel()
        if work in done:
            outcome = work.result()
            if outcome.status == RETRY:  # handed back (as soon as the database answers again); nothing is lost
                await _retry_db(lambda: store.hand_back_item(pool, item["id"], self.name), stop)
                return True
        else:
            await _cancel(work)
            if halt is not None and halt in done:
                await store.hand_back_item(pool, item["id"], self.name)
                log.info("worker.item_handed_back", job_id=item["job_id"], name=item["name"])
                return True
            if beat in done:
                self.ctx.renew_executor()  # its parser process is killed, not left running to the file's end
                outcome = IngestOutcome(item["name"], "cancelled",
                                        error="cancelled while it was being ingested (nothing was stored)")
            else:
                self.ctx.renew_executor()  # a parser stuck on this file must not hold the next one
                outcome = IngestOutcome(item["name"], "failed", error=f"took longer than {timeout:g} s "
                                        "(KB_FILE_TIMEOUT_S); nothing was stored")
            log.warning("worker.item_stopped", name=item["name"], status=outcome.status, error=outcome.error)
        await store.finish_item(pool, item["id"], outcome.status, outcome.error, outcome.document_id,
                                outcome.pages, outcome.chunks, time.perf_counter() - started, self.name,
                                outcome.llm_calls)
        try:
            await self.rebuild_indexes(item["job_id"])  # its job's last file: the index held back, built before done
        finally:
            await store.maybe_finish_job(pool, item["job_id"])
        if job["upload"] and outcome.status == "skipped":  # a copy of a stored document: not kept (a failed or
            await discard_upload(pool, item["path"])  # cancelled one stays for a retry until its item is removed)
        return True

    async def _defer_index(self, job_id: int) -> None:
        """``bulk_index.defer_for_job``; a database error there is logged and the job goes on with the index."""
        try:
            await bulk_index.defer_for_job(self.ctx.pool, job_id, enabled=self.ctx.settings.defer_vector_index)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
            log.warning("worker.index_deferral_failed", job_id=job_id, error=str(exc))

    async def rebuild_indexes(self, job_id: int | None = None) -> None:
        """``bulk_index.rebuild_for_job`` (with ``job_id``) or ``rebuild_released``; a failed build stays recorded
        for the next call (logged)."""
        try:
            if job_id is not None:
                await bulk_index.rebuild_for_job(self.ctx.pool, job_id)
            else:
                await bulk_index.rebuild_released(self.ctx.pool)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
            log.error("worker.index_rebuild_failed", job_id=job_id, error=str(exc))

    async def _write_progress(self, item_id: int, stage: list[tuple[str, int, int]]) -> None:
        """Write the latest stage of the file in hand every ``PROGRESS_S`` (until cancelled)."""
        written = None
        while True:
            await asyncio.sleep(PROGRESS_S)
            if not stage or stage[-1] == written:
                continue
            latest = stage[-1]
            del stage[:-1]
            try:
                await store.write_item_progress(self.ctx.pool, item_id, self.name, *latest)
                written = latest
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("worker.progress_failed", error=str(exc))

    async def _ingest(self, item: asyncpg.Record, job: asyncpg.Record,
                      progress: Callable[[tuple[str, int, int]], object] | None = None) -> IngestOutcome:
        """The outcome of one claimed item (status ``retry``: back to the queue); never raises for a bad file."""
        executor = self.ctx.executor
        try:
            allowed = Path(job["allowed_root"]) if job["allowed_root"] else None
            meta = await self._folder_metadata(item["job_id"], job["root_path"], job["metadata_path"], allowed)
            stem, in_folder = Path(item["name"]).stem, _in_folder(item["path"], job["root_path"])
            return await ingest_file(
                self.ctx, Path(item["path"]), name=item["name"], collection_id=job["collection_id"],
                folder_metadata=meta.get(stem) or meta.get(in_folder) or meta.get(item["name"]) or {},
                allowed_root=allowed, job_id=item["job_id"], item_id=item["id"],
                progress=(lambda *at: progress(at)) if progress is not None else None, force=job["force"],
            )
        except IngestError as exc:  # the job's folder metadata is unreadable or outside the root
            return IngestOutcome(item["name"], "failed", error=f"folder metadata: {exc.detail}")
        except BrokenProcessPool as exc:  # a parser process died (e.g. out of memory): new pool, fail the file
            if self.ctx.executor is not executor:  # killed on purpose (another file's cancel or timeout)
                log.info("worker.parser_replaced", name=item["name"])
                return IngestOutcome(item["name"], RETRY, error="parser pool replaced while parsing")
            log.error("worker.parser_died", name=item["name"], error=str(exc))
            self.ctx.renew_executor()
            return IngestOutcome(item["name"], "failed", error="the parser process died on this file")
        except Exception as exc:  # noqa: BLE001 - one broken file must not stop the job
            if is_db_unavailable(exc):  # the database went away mid-file: nothing was stored; back to the queue
                log.warning("worker.db_unavailable", name=item["name"], error=f"{type(exc).__name__}: {exc}"[:300])
                return IngestOutcome(item["name"], RETRY, error=f"database unavailable: {type(exc).__name__}")
            log.exception("worker.item_crashed", name=item["name"])
            return IngestOutcome(item["name"], "failed", error=f"internal error: {type(exc).__name__}: {exc}")

    async def _heartbeat(self, item_id: int, job_id: int) -> None:
        """Beat (every ``stale_s / 4``) until the item or its job is cancelled, which is looked for every
        ``CANCEL_POLL_S``; then return."""
        beat_s = max(1.0, self.stale_s / 4)
        last = time.monotonic()
        while True:
            await asyncio.sleep(min(CANCEL_POLL_S, beat_s))
            beat = time.monotonic() - last >= beat_s
            try:
                if beat:
                    state = await store.heartbeat_item(self.ctx.pool, item_id, self.name)
                    last = time.monotonic()
                else:
                    state = "cancelled" if await store.item_cancelled(self.ctx.pool, item_id) else ""
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("worker.heartbeat_failed", error=str(exc))
                continue
            if state == "cancelled":
                return

    async def _folder_metadata(self, job_id: int, root: str, metadata_path: str | None,
                               allowed_root: Path | None) -> dict[str, Any]:
        key = job_id  # per job: edits to metadata files between jobs are seen
        if key not in self._meta_cache:
            if len(self._meta_cache) > 64:
                self._meta_cache.clear()
            self._meta_cache[key] = await asyncio.to_thread(
                _load_job_metadata, Path(root), Path(metadata_path) if metadata_path else None, allowed_root
            )
        return self._meta_cache[key]


def _in_folder(path: str, folder: str) -> str:
    """A job file's path relative to the job's folder (how folder metadata rows name it)."""
    file, root = Path(path), Path(folder)
    return file.relative_to(root).as_posix() if root in file.parents else file.name


def _load_job_metadata(root: Path, metadata_path: Path | None, allowed_root: Path | None = None) -> dict[str, Any]:
    """Folder metadata for a job whose root is a folder or a single file."""
    return load_folder_metadata(root if root.is_dir() else root.parent, metadata_path, allowed_root)


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception as exc:  # noqa: BLE001 - it was being abandoned anyway; say what it was doing
        log.warning("worker.cancelled_task_failed", error=f"{type(exc).__name__}: {exc}")


async def _retry_db(call: Any, stop: asyncio.Event | None, wait_s: float = 2.0) -> None:
    """Run a database call until it succeeds (the database is coming back) or ``stop`` is set."""
    while True:
        try:
            await call()
            return
        except Exception as exc:
            if not is_db_unavailable(exc):
                raise
            log.warning("worker.db_wait", error=f"{type(exc).__name__}: {exc}"[:200])
        if stop is not None and stop.is_set():
            return  # the item stays claimed; its heartbeat stops, so it is resumed after KB_JOB_STALE_S
        await asyncio.sleep(wait_s)


async def reingest_document(pool: asyncpg.Pool, doc_id: int, *, ingest_root: Path, uploads: Path) -> int:
    """A job re-processing one stored document from its source file, under its name, even if nothing changed
    (``force``); its source must lie inside the ingest root or the uploads folder. The stored version stays
    until the new one is written. Returns the job id."""
    info, _ = await store.get_document(pool, doc_id)
    source = Path(info.source_path)
    real = await asyncio.to_thread(source.resolve)
    root = next((r for r in (uploads, ingest_root) if real.is_relative_to(r.resolve())), None)
    if root is None:
        raise ConflictError(f"document {doc_id}'s source file lies outside KB_INGEST_ROOT; re-ingest it with "
                            "`kb ingest --force PATH`")
    if not await asyncio.to_thread(source.is_file):
        raise ConflictError(f"document {doc_id}'s source file is gone (moved or deleted); ingest it again from "
                            "where it is now")
    coll = await get_collection(pool, info.collection or "default")
    return await create_job(pool, collection_id=coll.id, path=source, allowed_root=root, force=True,
                            name=info.name, upload=root == uploads)


async def cancel_job(pool: asyncpg.Pool, job_id: int) -> int:
    """Cancel a job: its pending files are marked ``cancelled`` now; a file being ingested stops within
    ``CANCEL_POLL_S`` (its parser process killed) and nothing of it is stored, even when it reaches the store
    first (the write checks the job). Returns the number of files cancelled now."""
    async with pool.acquire() as conn, conn.transaction():
        state = await store.job_state(conn, job_id)
        if state is None:
            raise NotFoundError(f"job {job_id} does not exist")
        if state in ("done", "failed", "cancelled"):
            raise ConflictError(f"job {job_id} is already {state}")
        rows = await store.cancel_job_rows(conn, job_id)
    log.info("jobs.cancelled", job_id=job_id, pending_cancelled=len(rows))
    return len(rows)


async def cancel_file(pool: asyncpg.Pool, job_id: int, item_id: int) -> str:
    """Cancel one file of a job: a queued file at once (``cancelled``), a file being ingested within
    ``CANCEL_POLL_S`` (``running`` until its worker stops it; nothing of it is stored unless its write came first);
    the job's other files go on. 404 for an unknown file, 409 for a finished one."""
    async with pool.acquire() as conn, conn.transaction():
        status = await store.cancel_item(conn, job_id, item_id)
        if status is None:
            await _item_refusal(conn, job_id, item_id, "cancelled: only a queued or running file is")
        await store.maybe_finish_job(conn, job_id)
    log.info("jobs.item_cancelled", job_id=job_id, item_id=item_id, was=status)
    return status


async def retry_item(pool: asyncpg.Pool, job_id: int, item_id: int) -> None:
    """Queue a failed (or cancelled) file of a job again; its job runs again. 409 for a file in another state."""
    async with pool.acquire() as conn, conn.transaction():
        if await store.requeue_item(conn, job_id, item_id) is None:
            await _item_refusal(conn, job_id, item_id, "retried: only a failed or cancelled file is")
        await store.reopen_job(conn, job_id)
    log.info("jobs.item_retried", job_id=job_id, item_id=item_id)


async def remove_item(pool: asyncpg.Pool, job_id: int, item_id: int) -> None:
    """Remove a finished file from a job's list (nothing of a failed file was stored). 409 while it is queued
    or being ingested."""
    async with pool.acquire() as conn, conn.transaction():
        upload = await store.item_upload_path(conn, job_id, item_id)
        if await store.delete_finished_item(conn, job_id, item_id) is None:
            await _item_refusal(conn, job_id, item_id, "removed while it is queued or being ingested")
        await store.maybe_finish_job(conn, job_id)
    log.info("jobs.item_removed", job_id=job_id, item_id=item_id)
    if upload is not None:  # an uploaded file no document keeps goes with its item
        await discard_upload(pool, upload)


async def _item_refusal(conn: asyncpg.Connection, job_id: int, item_id: int, rule: str) -> None:
    status = await store.item_status(conn, job_id, item_id)
    if status is None:
        raise NotFoundError(f"job {job_id} has no file {item_id}")
    raise ConflictError(f"file {item_id} of job {job_id} is {status}; it cannot be {rule}")
