"""Serving the app with uvicorn, with the connection limits a public port needs.

uvicorn has a keep-alive timeout but none for a client that never finishes its request headers; the
protocol below closes such a connection after ``KB_HEADER_TIMEOUT_S``. Headers are parsed by h11 with a
size cap (``KB_MAX_HEADER_KB``), ``KB_MAX_CONNECTIONS`` bounds open connections and running requests
(beyond it a request gets a 503) and ``KB_MAX_CLIENT_CONNECTIONS`` the connections of one client address.
A slow request body is the app's to time out (``KB_BODY_TIMEOUT_S``, ``kb.api.common.body_limit``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import h11
import psutil
import structlog
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.supervisors import multiprocess
from uvicorn.supervisors.multiprocess import Multiprocess

from kb.api.common import problem_bytes
from kb.balance import LOADS_ENV, AcceptBalancer
from kb.core.process import STOP_SIGNALS, die_with_parent, note_signal
from kb.core.settings import ServerSettings, get_settings

log = structlog.get_logger("kb.serve")
_SUPERVISOR_ENV = "_KB_SUPERVISOR_PID"  # internal, not a setting: the supervisor pid for its workers


_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\nretry-after: 5\r\n"
         b"connection: close\r\ncontent-length: %d\r\n\r\n%s")
_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/problem+json\r\n"
              b"connection: close\r\ncontent-length: %d\r\n\r\n%s")


class KBH11Protocol(H11Protocol):
    """h11 with two limits uvicorn lacks: a connection whose request headers have not arrived within
    ``KB_HEADER_TIMEOUT_S`` (after a kept-alive response: keep-alive timeout + that) is closed, and request
    headers larger than ``KB_MAX_HEADER_KB`` get a 431. A module-level class: ``--workers`` pickles it."""

    _header_timer: asyncio.TimerHandle | None = None
    _seen = 0  # bytes of the current request head received so far
    _tail = b""  # the last bytes seen, to find a terminator split across reads

    _send_timer: asyncio.TimerHandle | None = None

    @property
    def _limits(self) -> tuple[float, int]:
        server = get_settings().server
        return server.header_timeout_s, server.max_header_kb * 1024

    def pause_writing(self) -> None:
        """The socket's send buffer is full (the client is not reading): a client that reads nothing for
        ``KB_SEND_TIMEOUT_S`` is dropped, so a stalled reader holds neither a connection nor a response for
        ever (what it holds meanwhile: the buffer, at most one piece of a streamed response)."""
        super().pause_writing()
        if self._send_timer is None and (limit := get_settings().server.send_timeout_s) > 0:
            self._send_timer = self.loop.call_later(limit, self._send_overdue)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_overdue(self) -> None:
        self._send_timer = None
        log.warning("http.slow_reader_dropped", client=str(self.client), timeout_s=get_settings().server.send_timeout_s)
        # also when closing: a closed transport still waits for its full buffer to drain, for ever
        self.transport.abort()  # its unsent bytes are dropped; the response's stream sees the disconnect

    def _refuse(self) -> None:
        body = problem_bytes(431, "Request headers too large", "request headers exceed KB_MAX_HEADER_KB")
        self.transport.write(_TOO_LARGE % (len(body), body))
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # reading a request line and headers
            buf = self._tail + data
            end = buf.find(b"\r\n\r\n")
            head = self._seen - len(self._tail) + (end if end >= 0 else len(buf))
            if head > self._limits[1]:
                self._refuse()
                return
            self._seen, self._tail = (0, b"") if end >= 0 else (head, buf[-3:])
        super().data_received(data)

    def _arm(self, delay_s: float) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(delay_s, self._headers_overdue)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self._admit(transport):
            return
        self._arm(self._limits[0])

    _clients: dict[str, int] = {}  # open connections by client address (this process)
    _counted: str | None = None

    def _admit(self, transport: asyncio.Transport) -> bool:
        """At most ``KB_MAX_CLIENT_CONNECTIONS`` open connections per client address: one client cannot take
        every connection of ``KB_MAX_CONNECTIONS``; beyond it a 503 at once."""
        cap = get_settings().server.max_client_connections
        peer = transport.get_extra_info("peername")
        addr = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if cap > 0 and addr and self._clients.get(addr, 0) >= cap:
            body = problem_bytes(503, "Too many connections",
                                 f"this client has {cap} open connections (KB_MAX_CLIENT_CONNECTIONS)")
            transport.write(_BUSY % (len(body), body))
            transport.close()
            log.info("http.client_cap", client=addr, cap=cap)
            return False
        self._clients[addr] = self._clients.get(addr, 0) + 1
        self._counted = addr
        return True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm(self.timeout_keep_alive + self._limits[0])  # the next request's headers, kept alive

    def _headers_overdue(self) -> None:
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("http.header_timeout", client=str(self.client))
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._header_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        if self._counted is not None:
            left = self._clients.get(self._counted, 1) - 1
            if left > 0:
                self._clients[self._counted] = left
            else:
                self._clients.pop(self._counted, None)
            self._counted = None
        super().connection_lost(exc)


GRACEFUL_SHUTDOWN_S = 5  # requests still running this long after a stop signal are cancelled
# a --workers process not answering the supervisor's ping this long is killed and replaced; uvicorn's 5 s
# killed workers still importing on a busy machine, over and over
WORKER_HEALTHCHECK_S = 30


def uvicorn_options(server: ServerSettings) -> dict[str, Any]:
    """The uvicorn keyword arguments that enforce the server's connection limits."""
    return {
        "http": KBH11Protocol,
        "h11_max_incomplete_event_size": server.max_header_kb * 1024,
        "limit_concurrency": server.max_connections,
        "timeout_keep_alive": 5,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
        "log_level": "warning",
        "access_log": False,
    }


class Supervisor(Multiprocess):
    """uvicorn's worker supervisor, except that SIGHUP stops the server (as it does with one process)
    instead of restarting the workers, and the stop signal is recorded for the line saying so."""

    def handle_signals(self) -> None:
        for sig in tuple(self.signal_queue):
            if sig in STOP_SIGNALS:
                note_signal(sig)
        super().handle_signals()

    def handle_hup(self) -> None:
        self.should_exit.set()


class BalancedServer(uvicorn.Server):
    """uvicorn's server in a ``--workers`` process, accepting by least connections (``kb.balance``): uvicorn
    serves no socket itself; each shared socket is read by an :class:`AcceptBalancer`, stopped at shutdown."""

    _balancers: list[AcceptBalancer]

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        folder = os.environ.get(LOADS_ENV)
        if not sockets or not folder:
            await super().startup(sockets)
            return
        await super().startup([])  # the lifespan and server state, no listening
        factory = functools.partial(self.config.http_protocol_class, config=self.config,
                                    server_state=self.server_state, app_state=self.lifespan.state)
        self._balancers = [AcceptBalancer(Path(folder), sock, factory, lambda: len(self.server_state.connections),
                                          self.config.backlog) for sock in sockets]
        for balancer in self._balancers:
            balancer.start()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for balancer in getattr(self, "_balancers", []):
            balancer.stop()  # before uvicorn closes the sockets
        await super().shutdown(sockets)


class BalancedProcess(multiprocess.Process):
    """A ``--workers`` process running :class:`BalancedServer` (module level: the supervisor pickles it)."""

    @property
    def server(self) -> uvicorn.Server:
        if self._server is None:
            self._server = BalancedServer(config=self.config)
        return self._server


def worker_app() -> Any:
    """The app of one ``--workers`` process (a uvicorn factory): it dies with the supervisor, even one killed
    with SIGKILL or by the OOM killer (so a restart finds the port free), and logs as the supervisor does
    (kb's structlog set-up: redaction, plain tracebacks, ``KB_LOG_FORMAT``)."""
    from kb.app import create_app
    from kb.core.logging import configure_logging

    supervisor = os.environ.get(_SUPERVISOR_ENV)
    die_with_parent(int(supervisor) if supervisor else None)
    settings = get_settings()
    configure_logging(settings.server.log_format, settings.server.log_level)
    return create_app(settings, bound_host=settings.server.host)


LOADS_PREFIX = "kb-worker-loads-"


def remove_stale_loads(base: Path) -> list[Path]:
    """Remove the count folders (``<base>/kb-worker-loads-<pid>-*``) of supervisors that are gone — one killed
    with SIGKILL cannot remove its own; the folders removed."""
    gone = []
    for folder in base.glob(f"{LOADS_PREFIX}*"):
        pid = folder.name[len(LOADS_PREFIX):].split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder)
    return gone


def serve(app: Any, host: str, port: int, server: ServerSettings, workers: int = 1) -> None:
    """Run ``app`` on ``host:port`` until interrupted. ``workers`` > 1: that many processes, each building
    the app from the environment (``worker_app``), sharing the port; the embedded Postgres belongs to this
    (the supervising) process."""
    if workers <= 1:
        uvicorn.run(app, host=host, port=port, **uvicorn_options(server))
        return
    os.environ["KB_HOST"], os.environ["KB_PORT"] = host, str(port)
    os.environ[_SUPERVISOR_ENV] = str(os.getpid())
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # one BLAS thread per process: no oversubscription
        os.environ.setdefault(var, "1")
    get_settings.cache_clear()
    config = uvicorn.Config("kb.serve:worker_app", factory=True, host=host, port=port, workers=workers,
                            timeout_worker_healthcheck=WORKER_HEALTHCHECK_S, **uvicorn_options(server))
    remove_stale_loads(Path(tempfile.gettempdir()))
    loads = tempfile.mkdtemp(prefix=f"{LOADS_PREFIX}{os.getpid()}-")
    os.environ[LOADS_ENV] = loads
    multiprocess.Process = BalancedProcess  # type: ignore[misc]  # what the supervisor starts and restarts
    try:
        Supervisor(config, sockets=[config.bind_socket()]).run()
    finally:
        shutil.rmtree(loads, ignore_errors=True)
