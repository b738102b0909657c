"""Process lifecycle: how a ``kb`` process stops. SIGTERM (systemd, Docker, Kubernetes) and SIGHUP (a closed
terminal) are handled like Ctrl-C, so every command unwinds the same way (``finally`` blocks, ``async with``,
the server's graceful shutdown); children left at the end are ended; child processes die with their parent
(``PR_SET_PDEATHSIG``) even when it is killed with SIGKILL or by the OOM killer."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

import psutil
import structlog

log = structlog.get_logger("kb.core.process")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CHILD_GRACE_S = 3.0  # a child that has not exited this long after SIGTERM gets SIGKILL
_PR_SET_PDEATHSIG = 1
PARENT_ENV = "_KB_PARENT_PID"  # internal, not a setting: the pid a child started with ``as_child`` dies with
T = TypeVar("T")
_received: list[tuple[int, float]] = []  # the stop signals this process got, with when (monotonic)


def note_signal(signum: int) -> None:
    """Record a stop signal (also called by a supervisor that handles signals itself)."""
    _received.append((signum, time.monotonic()))


def received_signal() -> int | None:
    """The first stop signal this process got, or None."""
    return _received[0][0] if _received else None


def seconds_since_signal() -> float:
    """Seconds since the first stop signal (0 without one)."""
    return time.monotonic() - _received[0][1] if _received else 0.0


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def _as_interrupt(signum: int, _frame: FrameType | None) -> None:
    note_signal(signum)
    signal.raise_signal(signal.SIGINT)  # whoever handles SIGINT now (asyncio.run, uvicorn, Python) stops


def _interrupt(signum: int, frame: FrameType | None) -> None:
    note_signal(signum)
    signal.default_int_handler(signum, frame)


def install_stop_signals() -> None:
    """SIGTERM and SIGHUP act like SIGINT in this process: ``asyncio.run`` cancels its main task, uvicorn
    shuts down gracefully, and plain code gets ``KeyboardInterrupt``. Call once, in the main thread."""
    signal.signal(signal.SIGINT, _interrupt)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _as_interrupt)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` where a stop signal cancels ``coro`` (its ``finally`` blocks and ``async with``
    exits run, threads waiting on input are not waited for) and then raises ``KeyboardInterrupt``."""

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(sig: int) -> None:
            note_signal(sig)
            task.cancel()

        if threading.current_thread() is threading.main_thread():  # signals reach only the main thread
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, stop, sig)
        try:
            return await coro
        except asyncio.CancelledError:
            if received_signal() is None:
                raise
            raise KeyboardInterrupt from None

    if threading.current_thread() is not threading.main_thread():  # a benchmark run in a test's thread
        return asyncio.run(main())
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        return asyncio.run(main())
    finally:  # the loop reset them to the defaults when it closed
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def die_with_parent(parent_pid: int | None = None, sig: int = signal.SIGTERM) -> None:
    """Ask the kernel for ``sig`` when the parent exits (Linux ``PR_SET_PDEATHSIG``; elsewhere nothing).
    ``parent_pid``: the parent expected; if it is already gone, ``sig`` is sent at once."""
    if sys.platform != "linux":
        return
    import ctypes

    if ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig)) != 0:
        log.warning("process.pdeathsig_failed", errno=ctypes.get_errno())
        return
    if parent_pid is not None and os.getppid() != parent_pid:  # the parent died before the call above
        os.kill(os.getpid(), sig)


def as_child(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a ``kb`` child process that is to die with this one, even when this one is SIGKILLed (the
    child calls ``die_with_spawner`` first thing)."""
    return {**env, PARENT_ENV: str(os.getpid())}


def die_with_spawner() -> None:
    """In a process started with ``as_child``: SIGTERM when its parent ends (at once if it already has), so it
    stops cleanly — handing back what it holds — instead of living on as an orphan. Not passed on to its own
    children."""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent and parent.isdigit():
        die_with_parent(int(parent))


def lower_priority(nice: int) -> None:
    """Run the calling thread (Linux: threads have their own nice value; elsewhere the process) ``nice``
    steps below normal CPU priority: background work that takes only what queries leave. Lowering one's own
    priority needs no privilege; a platform without it is left as it is."""
    if nice <= 0:
        return
    try:
        who = threading.get_native_id() if sys.platform.startswith("linux") else 0
        os.setpriority(os.PRIO_PROCESS, who, min(19, os.getpriority(os.PRIO_PROCESS, who) + nice))
    except (AttributeError, OSError):  # no setpriority (Windows) or refused: same priority, still correct
        pass


def pool_process_started(parent_pid: int, nice: int = 0) -> None:
    """Initializer of a parser process (a spawned pool's): SIGKILL when ``parent_pid`` ends, and at once if it
    ended while this process was starting; ``nice`` steps below normal CPU priority (``KB_INGEST_NICE``: parsing
    takes what queries leave); then log like the parent. It lives in this light module so that it runs before
    the parsers' imports (seconds during which a killed parent used to leave an orphan)."""
    die_with_parent(parent_pid, signal.SIGKILL)
    lower_priority(nice)
    from kb.core.logging import configure_logging
    from kb.core.settings import get_settings

    server = get_settings().server
    configure_logging(server.log_format, server.log_level)


def _spared(proc: psutil.Process) -> bool:
    """Children not ended here: a Postgres (stopped by its owner or shared) and multiprocessing's resource
    tracker (it ignores SIGTERM and exits by itself once its last user is gone)."""
    try:
        return proc.name() == "postgres" or any("resource_tracker" in part for part in proc.cmdline())
    except psutil.Error:
        return True


def end_children(grace_s: float = CHILD_GRACE_S) -> int:
    """SIGTERM every descendant still running, SIGKILL those alive after ``grace_s``; how many were ended."""
    try:
        children = [p for p in psutil.Process().children(recursive=True) if not _spared(p)]
    except psutil.Error:
        return 0
    for proc in children:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    if alive:
        psutil.wait_procs(alive, timeout=grace_s)
    if children:
        log.info("process.children_ended", count=len(children), killed=len(alive))
    return len(children)
