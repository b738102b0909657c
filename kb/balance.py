"""Least-connections accepting among ``kb serve --workers`` processes that share one listening socket.

Left to asyncio, the process whose event loop wakes first accepts every connection waiting (one ``accept``
after another until none is left): 50 clients connecting together could all land on one process, which then
answers them on one core while the other process idles, and with keep-alive they stay there — measured under
50 clients, splits of 44/6 and 1/49 with a p95 1.4–1.8× the balanced one's. Here each process accepts one
connection at a time, and only while it holds no more open connections than the least loaded other process;
otherwise it stops listening for :data:`DEFER_S` and looks again, and after :data:`MAX_DEFER_S` accepts anyway
(a peer that is hung or stopping never holds a connection back for longer).

Each process writes its count of open connections (and connections being set up) to a file named by its pid
in a folder the supervisor made (``_KB_WORKER_LOADS``); files of processes no longer alive are ignored.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import socket
from collections.abc import Callable
from pathlib import Path

import structlog

log = structlog.get_logger("kb.balance")

LOADS_ENV = "_KB_WORKER_LOADS"  # internal, not a setting: the supervisor's folder of per-process counts
DEFER_S = 0.002
MAX_DEFER_S = 0.05
RETRY_AFTER_ERROR_S = 1.0  # out of file descriptors and the like: asyncio's own pause before accepting again
_FATAL_ACCEPT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def peer_loads(folder: Path, me: int) -> list[int]:
    """Open connections of the other live processes, as each last wrote them."""
    out: list[int] = []
    for entry in os.scandir(folder):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            os.kill(int(entry.name), 0)
            out.append(int(Path(entry.path).read_text() or 0))
        except ProcessLookupError:
            continue  # a process that died: its count means nothing
        except (PermissionError, ValueError, FileNotFoundError):
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
        self.waited = 0.0
        self.written = -1

    def start(self) -> None:
        """Start accepting on the socket the supervisor bound (listening, as asyncio's server would)."""
        self.sock.setblocking(False)
        self.sock.listen(self.backlog)
        self.serving = True
        self.publish()
        self.loop.add_reader(self.sock.fileno(), self._ready)
        self.loop.call_later(0.1, self._republish)

    def stop(self) -> None:
        """Stop accepting (connections already accepted are the server's to close)."""
        if self.serving:
            self.serving = False
            self.loop.remove_reader(self.sock.fileno())
            self.file.unlink(missing_ok=True)

    def is_serving(self) -> bool:
        return self.serving

    def load(self) -> int:
        return self.open_connections() + self.pending

    def publish(self) -> None:
        load = self.load()
        if load != self.written:
            tmp = self.file.with_suffix(".tmp")
            tmp.write_text(str(load))
            tmp.replace(self.file)
            self.written = load

    def _republish(self) -> None:  # connections closing are seen here, ten times a second
        if self.is_serving():
            self.publish()
            self.loop.call_later(0.1, self._republish)

    def _listen_again(self) -> None:
        if self.is_serving():
            self.loop.add_reader(self.sock.fileno(), self._ready)

    def _pause(self, seconds: float) -> None:
        self.loop.remove_reader(self.sock.fileno())  # until then: the waiting connection keeps it readable
        self.loop.call_later(seconds, self._listen_again)

    def _ready(self) -> None:
        """The socket has a connection waiting: accept one, or let a less loaded process take it."""
        peers = peer_loads(self.folder, self.me)
        if peers and self.load() > min(peers) and self.waited < MAX_DEFER_S:
            self.waited += DEFER_S
            self._pause(DEFER_S)
            return
        self.waited = 0.0
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return  # another process took it
        except OSError as exc:  # out of descriptors, or worse: paused, not retried in a busy loop
            (log.warning if exc.errno in _FATAL_ACCEPT else log.error)(
                "http.accept_paused", error=f"{type(exc).__name__}: {exc}", seconds=RETRY_AFTER_ERROR_S)
            self._pause(RETRY_AFTER_ERROR_S)
            return
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
