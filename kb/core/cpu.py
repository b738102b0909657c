"""One CPU budget for every ``kb`` process of a machine: heavy ingest work never runs on more cores than there are.

A unit of heavy ingest work — one file's parse (in a parser process), its tree and summaries, its chunking, its
facts, and each thread running ingest's texts through the embedding model — holds one of ``cores`` slots while it
runs. The slots are lock files ``slot-<i>`` in one folder every process of the user shares (``KB_CPU_DIR``,
default ``<tmp>/kb-cpu-<uid>``), held with an exclusive ``flock``: the kernel drops a lock when its holder dies, so
a killed process never keeps a slot. Two ``kb ingest`` runs, the job worker of a ``kb serve``, ``kb worker``
processes and their parser processes together run at most ``cores`` such units (``KB_CPU_CORES``, default the
cores this process may use: its affinity, capped by its container's CPU quota). A process's units take slots first
come, first served; a run of texts keeps its slot from one text to the next and hands it back when a unit of its
process waits or a question needs the core (:meth:`CpuBudget.should_yield`).

Questions come first: a process with a question in flight holds ``serving-<pid>`` (:meth:`CpuBudget.serving`), and
each such process keeps one core free of ingest work — a new unit waits until one is free (a unit already running
finishes first: one text, at most one file's stage). Ingest always keeps one unit running, so a server that is never
idle still ingests: when every core answers questions that one unit is the only excess, at its lower priority
(``KB_INGEST_NICE``). Not counted: the light work of event loops, Postgres' work (a document's store, a question's
reads) and the torch runtime (``KB_EMBEDDING_RUNTIME=torch`` runs its batches on ``KB_EMBEDDING_THREADS`` threads
by priority only). A stopping process stops waiting for slots; a folder that cannot be used leaves every process
working as if alone (logged once).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import fcntl
import functools
import math
import os
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import structlog

from kb.core.process import received_signal

log = structlog.get_logger("kb.core.cpu")

POLL_S = 0.003
"""How often a unit waiting for a slot looks again."""
SERVING_PREFIX = "serving-"
_PERMANENT = frozenset({errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EROFS})
SERVING_TTL_S = 0.01
"""How long the count of processes answering questions is reused before the folder is listed again."""


def cgroup_cores(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The CPU quota of this process's cgroup (v2 ``cpu.max``, e.g. ``docker --cpus 2``) in whole cores, rounded
    up; None when there is none or it cannot be read."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def available_cores() -> int:
    """CPU cores this process may run on: its affinity mask (e.g. a container's cpuset), capped by its cgroup's
    CPU quota; at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity on macOS
        cores = os.cpu_count() or 1
    quota = cgroup_cores()
    return max(1, min(cores, quota) if quota else cores)


def default_folder() -> Path:
    """``<tmp>/kb-cpu-<uid>``: shared by every process of this user on this machine."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"kb-cpu-{uid}"


@dataclass(frozen=True)
class BudgetUse:
    """What the budget's folder says now: slots held by ingest work, processes answering questions."""

    cores: int
    held: int
    serving: int


class CpuBudget:
    """``cores`` slots shared through lock files in ``folder`` (see the module docstring). Thread-safe."""

    def __init__(self, cores: int, folder: Path) -> None:
        self.cores = max(1, cores)
        self.folder = folder
        self._broken = False
        self._lock = threading.Lock()
        self._serving = 0
        self._serving_fd: int | None = None
        self._serving_path: Path | None = None
        self._made = False
        self._marked = False
        self._logged: set[str] = set()
        self._slot_of: dict[int, int] = {}  # descriptor of a held slot → its number
        self._serving_read: tuple[float, int] = (-1e9, 0)
        self._turns = threading.Condition()
        self._queue: list[int] = []  # tickets of this process's units waiting, first come first served
        self._next_ticket = 0
        self._waiters = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="kb-cpu-wait")

    # ---- ingest work

    def _failed(self, exc: OSError) -> None:
        """A folder that cannot be used (no permission, not a folder, read-only) turns budgeting off for this
        process; another error (too many open files) leaves only the unit at hand unbudgeted. Logged once each."""
        if exc.errno in _PERMANENT:
            self._broken = True
        if type(exc).__name__ not in self._logged:
            self._logged.add(type(exc).__name__)
            log.warning("cpu.budget_unavailable", folder=str(self.folder), error=str(exc),
                        effect="heavy work is not budgeted across processes" if self._broken
                        else "this unit of work is not budgeted")

    def _open(self, name: str) -> int:
        return os.open(self.folder / name, os.O_RDWR | os.O_CREAT, 0o600)

    def busy_serving(self) -> int:
        """Processes with a question in flight (each holds its ``serving-<pid>`` lock); files of processes that
        are gone are removed."""
        busy = 0
        for entry in os.scandir(self.folder):
            if not entry.name.startswith(SERVING_PREFIX):
                continue
            locked = _locked(entry.path)
            busy += bool(locked)
            pid = entry.name[len(SERVING_PREFIX):]
            if locked is False and pid.isdigit() and not psutil.pid_exists(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
        return busy

    def _serving_now(self) -> int:
        """``busy_serving``, read again at most every ``SERVING_TTL_S`` (it lists the folder)."""
        now = time.monotonic()
        if now - self._serving_read[0] > SERVING_TTL_S:
            try:
                self._serving_read = (now, self.busy_serving())
            except OSError as exc:  # the folder gone or unreadable: the last count stands
                self._failed(exc)
                self._made = False
        return self._serving_read[1]

    def try_slot(self) -> int | None:
        """A held slot's descriptor, or None when every slot ingest may use now is taken (``-1``: no budget)."""
        for attempt in range(2):
            if self._broken:
                return -1
            try:
                if not self._made:
                    self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                    self._made = True
                limit = max(1, self.cores - self._serving_now())  # ingest keeps one: a busy server still ingests
                for i in range(limit):
                    fd = self._open(f"slot-{i}")
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)
                        continue
                    self._slot_of[fd] = i
                    return fd
                return None
            except FileNotFoundError as exc:  # the folder was removed (a /tmp cleaner): made again, once
                self._made = False
                if attempt:
                    self._failed(exc)
            except OSError as exc:
                self._failed(exc)
                return -1
        return -1

    def should_yield(self, fd: int) -> bool:
        """Whether a unit holding ``fd`` across many short runs (a run of texts) should hand it back now: a unit
        of this process waits for a slot, or a process started answering questions and the slot is beyond what
        ingest may use now."""
        if fd < 0:
            return False
        if self._queue:
            return True
        return self._slot_of.get(fd, 0) >= max(1, self.cores - self._serving_now())

    def acquire(self, what: str = "", abort: threading.Event | None = None) -> int:
        """Wait for a slot (blocking) for the unit ``what`` and return its descriptor for :meth:`release`. This
        process's units take slots in the order they asked (first come, first served: a text of a long run asks
        again behind a parse that waits); one freed here wakes the next at once, one freed by another process is
        seen within ``POLL_S``. A process told to stop (SIGTERM, Ctrl-C) or a set ``abort`` stops waiting: the
        unit goes on without a slot (``-1``), so stopping never hangs on another process's work."""
        with self._turns:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._queue.append(ticket)
            try:
                while True:
                    if self._queue[0] == ticket and (fd := self.try_slot()) is not None:
                        return fd
                    if (abort is not None and abort.is_set()) or received_signal() is not None:
                        return -1
                    self._turns.wait(POLL_S)
            finally:
                self._queue.remove(ticket)
                self._turns.notify_all()

    def release(self, fd: int) -> None:
        """Hand a slot back (wakes this process's next waiting unit)."""
        if fd >= 0:
            self._slot_of.pop(fd, None)
            os.close(fd)  # closing the only descriptor of the open file drops its lock
        with self._turns:
            self._turns.notify_all()

    @contextlib.contextmanager
    def slot(self, what: str = "") -> Iterator[None]:
        """Hold one slot while the unit ``what`` runs (waits for one; blocking: call it from a worker thread)."""
        fd = self.acquire(what)
        try:
            yield
        finally:
            self.release(fd)

    @contextlib.asynccontextmanager
    async def async_slot(self, what: str = "") -> AsyncIterator[None]:
        """:meth:`slot` for a coroutine: waits in a thread of its own, not on the event loop. A coroutine
        cancelled while it waits takes no slot: its thread stops waiting, and one granted meanwhile is handed
        back at once."""
        abort = threading.Event()
        waiting = self._waiters.submit(self.acquire, what, abort)
        try:
            fd = await asyncio.wrap_future(waiting)
        except asyncio.CancelledError:
            abort.set()
            waiting.add_done_callback(self._release_granted)
            raise
        try:
            yield
        finally:
            self.release(fd)

    def _release_granted(self, done: concurrent.futures.Future[int]) -> None:
        if not done.cancelled() and done.exception() is None:
            self.release(done.result())

    def use(self) -> BudgetUse:
        """Slots held and processes serving, read from the folder (for status and tests)."""
        try:
            held = sum(bool(_locked(self.folder / f"slot-{i}")) for i in range(self.cores))
            serving = self.busy_serving() if self.folder.is_dir() else 0
        except OSError:
            return BudgetUse(self.cores, 0, 0)
        return BudgetUse(self.cores, held, serving)

    # ---- questions

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Mark this process as answering a question while the block runs (nested and concurrent uses count:
        the mark is held while any is in flight). Never waits: a mark that could not be taken at once (another
        process probing the file that microsecond) is tried again at the next question."""
        with self._lock:
            self._serving += 1
            if not self._marked:
                self._mark_on()
        try:
            yield
        finally:
            with self._lock:
                self._serving -= 1
                if self._serving == 0 and self._marked:
                    self._mark_off()

    def _serving_file(self) -> int:
        """This process's ``serving-<pid>`` descriptor, opened again after a fork or when the file was removed
        (a /tmp cleaner, a process of another pid namespace sharing the folder)."""
        name = f"{SERVING_PREFIX}{os.getpid()}"
        fd = self._serving_fd
        if fd is not None and self._serving_path is not None and self._serving_path.name == name:
            if os.fstat(fd).st_nlink > 0:
                return fd
            os.close(fd)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._serving_path = self.folder / name
        self._serving_fd = self._open(name)
        return self._serving_fd

    def _mark_on(self) -> None:
        self._serving_read = (-1e9, 0)  # this process's own count changed: read it afresh
        if self._broken:
            return
        try:
            fd = self._serving_file()
            for _ in range(3):  # a probe holds its shared lock for microseconds
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self._marked = True
                    return
                except BlockingIOError:
                    time.sleep(0)
        except OSError as exc:
            self._failed(exc)

    def _mark_off(self) -> None:
        self._serving_read = (-1e9, 0)
        self._marked = False
        if self._serving_fd is not None:
            try:
                fcntl.flock(self._serving_fd, fcntl.LOCK_UN)
            except OSError as exc:
                self._failed(exc)


def _locked(path: str | Path) -> bool | None:
    """Whether another open file holds an exclusive lock on ``path`` (a held slot, a serving mark); None when
    there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@functools.cache
def _budget(cores: int, folder: str) -> CpuBudget:
    return CpuBudget(cores, Path(folder))


def cpu_budget(cores: int | None = None, folder: Path | None = None) -> CpuBudget:
    """This process's budget: ``cores`` (``KB_CPU_CORES``; unset → :func:`available_cores`) slots in ``folder``
    (``KB_CPU_DIR``; unset → :func:`default_folder`). One object per (cores, folder) and process."""
    return _budget(cores or available_cores(), str(folder or default_folder()))
