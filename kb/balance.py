"""Least-connections accepting among ``kb serve --workers`` processes that share one listening socket.

Left to asyncio, the process whose event loop wakes first accepts every connection waiting (one ``accept``
after another until none is left): 50 clients connecting together could all land on one process, which then
answers them on one core while the other process idles, and with keep-alive they stay there — measured under
50 clients, splits of 44/6 and 1/49 with a p95 1.4–1.8× the balanced one's. Here each process accepts one
connection at a time, and only while it holds no more open connections than the least loaded other process;
otherwise it stops listening for :data:`DEFER_S` and looks again, and after :data:`MAX_DEFER_S` accepts anyway
(a peer that is hung or stopping never holds a connection back for longer).

Each process writes its count of open connections (and connections being set up) to a file named by its pid
in a folder the supervisor made (``_KB_WORKER_LOADS``), again every :data:`PUBLISH_S`; a file not rewritten
for :data:`FRESH_S` (a process that died, or whose event loop stalled) is not a peer. When the folder cannot
be read or written, the processes accept as they would alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import structlog

log = structlog.get_logger("kb.balance")

LOADS_ENV = "_KB_WORKER_LOADS"  # internal, not a setting: the supervisor's folder of per-process counts
DEFER_S = 0.002
MAX_DEFER_S = 0.05
PUBLISH_S = 0.1  # each process rewrites its count this often (a file older than FRESH_S: a stalled process)
FRESH_S = 0.5
RETRY_AFTER_ERROR_S = 1.0  # out of file descriptors and the like: asyncio's own pause before accepting again
_LOST = {errno.ECONNABORTED, errno.EPROTO, errno.EPERM}  # that connection is gone (accept(2)): take the next
_FATAL_ACCEPT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def peer_loads(folder: Path, me: int, fresh_s: float = FRESH_S) -> list[int]:
    """Open connections of the other processes, as each last wrote them. A peer is a process that rewrote its
    count within ``fresh_s``: one that died or whose event loop stalled stops rewriting and drops out (a reused
    pid included). No folder (removed by a temp cleaner, say): no peers."""
    out: list[int] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if now - entry.stat().st_mtime <= fresh_s:
                out.append(int(Path(entry.path).read_text() or 0))
        except (OSError, ValueError):  # gone meanwhile, or half written: not a peer now
            continue
    return out


class AcceptBalancer:
    """Takes over the accepting of one listening socket in this process (see the module docstring)."""

    def __init__(self, folder: Path, sock: socket.socket, factory: Callable[[], asyncio.Protocol],
                 open_connections: Callable[[], int], backlog: int) -> None:
        self.folder, self.sock, self.factory, self.backlog = folder, sock, factory, backlog
        self.open_connections = open_connections
        self.serving = False
        self.loop = asyncio.get_running_loop()
        self.me = os.getpid()
        self.file = folder / str(self.me)
        self.pending = 0  # accepted, the protocol not yet made
        self.defer_until: float | None = None  # deferring the waiting connection to a peer until then
        self.publish_failed = False

    def start(self) -> None:
        """Start accepting on the socket the supervisor bound (listening, as asyncio's server would)."""
        self.sock.setblocking(False)
        self.sock.listen(self.backlog)
        self.serving = True
        self.publish()
        self.loop.add_reader(self.sock.fileno(), self._ready)
        self.loop.call_later(PUBLISH_S, self._republish)

    def stop(self) -> None:
        """Stop accepting (connections already accepted are the server's to close)."""
        if self.serving:
            self.serving = False
            self.loop.remove_reader(self.sock.fileno())
            with contextlib.suppress(OSError):  # the folder may be gone already: nothing left to remove
                self.file.unlink(missing_ok=True)

    def load(self) -> int:
        return self.open_connections() + self.pending

    def publish(self) -> None:
        """Write this process's load (its file's age tells the others it is alive and serving)."""
        if not self.serving:
            return
        try:
            tmp = self.file.with_suffix(".tmp")
            tmp.write_text(str(self.load()))
            tmp.replace(self.file)
        except OSError as exc:  # the others then see no peer here: they accept as they would alone
            if not self.publish_failed:
                log.warning("http.balance_unpublished", error=f"{type(exc).__name__}: {exc}", folder=str(self.folder))
                self.publish_failed = True

    def _republish(self) -> None:
        if not self.serving:
            return
        try:
            self.publish()
        finally:
            self.loop.call_later(PUBLISH_S, self._republish)

    def _listen_again(self) -> None:
        if self.serving:
            self.loop.add_reader(self.sock.fileno(), self._ready)

    def _pause(self, seconds: float) -> None:
        self.loop.remove_reader(self.sock.fileno())  # until then: the waiting connection keeps it readable
        self.loop.call_later(seconds, self._listen_again)

    def _ready(self) -> None:
        """The socket has a connection waiting: accept one, or let a less loaded process take it."""
        peers = peer_loads(self.folder, self.me)
        now = self.loop.time()
        if peers and self.load() > min(peers):
            self.defer_until = self.defer_until or now + MAX_DEFER_S
            if now < self.defer_until:
                self._pause(DEFER_S)
                return
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            self.defer_until = None  # another process took it
            return
        except OSError as exc:
            if exc.errno in _LOST:
                return
            # out of descriptors, or worse: paused, never retried in a busy loop
            (log.warning if exc.errno in _FATAL_ACCEPT else log.error)(
                "http.accept_paused", error=f"{type(exc).__name__}: {exc}", seconds=RETRY_AFTER_ERROR_S)
            self._pause(RETRY_AFTER_ERROR_S)
            return
        self.defer_until = None
        conn.setblocking(False)
        self.pending += 1
        self.publish()
        task = self.loop.create_task(self.loop.connect_accepted_socket(self.factory, conn))
        task.add_done_callback(functools.partial(self._made, conn))

    def _made(self, conn: socket.socket, task: asyncio.Task) -> None:
        self.pending -= 1
        if not task.cancelled() and task.exception() is not None:
            log.warning("http.connection_setup_failed", error=str(task.exception()))
            conn.close()
        self.publish()
