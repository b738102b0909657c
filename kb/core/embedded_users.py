"""Who uses the embedded Postgres of a data folder, so that the last ``kb`` process to stop stops it.

One registry file per data folder (``embedded-users.json``: the live processes using the server, each a pid
and its start time, and whether ``kb db start`` keeps the server running), read and written only while
holding an exclusive ``flock`` on ``embedded.lock``. Starting, restarting and stopping the server happen
under the same lock, so a decision ("I am the last one: stop it", "it is down: start it") is never made on
a registry another process is changing. The kernel drops the lock of a killed process; its entry names a
process that no longer exists and is pruned by whoever reads the registry next.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from kb.core.errors import ConfigError

log = structlog.get_logger("kb.core.embedded_users")

USERS_FILE = "embedded-users.json"
LOCK_FILE = "embedded.lock"
LEGACY_OWNER_FILE = "embedded-owner.json"  # before the registry: one owner; read as one user, then removed
LOCK_WAIT_S = 120.0  # a stop holds the lock up to ~12 s (fast shutdown, then SIGQUIT, then SIGKILL)


@dataclass(frozen=True)
class User:
    """One process: its pid and start time (a pid alone may be reused)."""

    pid: int
    started: float


@dataclass(frozen=True)
class Registry:
    """The live users of one embedded server and whether ``kb db start`` keeps it running."""

    users: tuple[User, ...] = ()
    kept: bool = False
    pruned: tuple[User, ...] = field(default=(), compare=False)  # entries of processes gone, dropped on read


def process_start(pid: int) -> float | None:
    """The start time of the live (not zombie) process ``pid``; None when it is gone."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except psutil.Error:
        return None


def this_process() -> User:
    pid = os.getpid()
    return User(pid, process_start(pid) or 0.0)


def _alive(user: User) -> bool:
    started = process_start(user.pid)
    return started is not None and abs(started - user.started) < 1.0


def _parse(text: str) -> tuple[list[User], bool]:
    data = json.loads(text)
    users = [User(int(u["pid"]), float(u["started"])) for u in data.get("users", [])]
    return users, bool(data.get("kept", False))


def read(data_dir: Path) -> Registry:
    """The registry with dead processes left out (no lock: for status reports; decisions use ``locked``).
    A corrupt file reads as "no users, not kept": a server nobody uses is stopped by the next last user."""
    users: list[User] = []
    kept = False
    path = data_dir / USERS_FILE
    try:
        users, kept = _parse(path.read_text())
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("db.embedded_users_unreadable", path=str(path), error=str(exc))
    legacy = data_dir / LEGACY_OWNER_FILE
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        owner = json.loads(legacy.read_text())
        users.append(User(int(owner["pid"]), float(owner["started"] or 0.0)))
    live = tuple(dict.fromkeys(u for u in users if _alive(u)))
    return Registry(users=live, kept=kept, pruned=tuple(u for u in users if u not in live))


def _write(data_dir: Path, registry: Registry) -> None:
    path = data_dir / USERS_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    body = {"users": [{"pid": u.pid, "started": u.started} for u in registry.users], "kept": registry.kept}
    tmp.write_text(json.dumps(body))
    os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one
    (data_dir / LEGACY_OWNER_FILE).unlink(missing_ok=True)


@contextlib.contextmanager
def _flock(data_dir: Path, wait_s: float) -> Iterator[None]:
    with open(data_dir / LOCK_FILE, "a+") as fh:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConfigError(f"KB_DATA_DIR={data_dir}: another kb process has held {LOCK_FILE} for "
                                      f"{wait_s:.0f} s while starting or stopping the embedded Postgres") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


class Session:
    """The registry under the lock: read on entry, changed with ``add``/``remove``/``keep``, written on exit."""

    def __init__(self, data_dir: Path, registry: Registry) -> None:
        self.data_dir = data_dir
        self.registry = registry
        self._changed = bool(registry.pruned) or (data_dir / LEGACY_OWNER_FILE).exists()

    def add(self, user: User) -> None:
        if user not in self.registry.users:
            self.registry = Registry(users=(*self.registry.users, user), kept=self.registry.kept)
            self._changed = True

    def remove(self, user: User) -> None:
        if user in self.registry.users:
            self.registry = Registry(users=tuple(u for u in self.registry.users if u != user), kept=self.registry.kept)
            self._changed = True

    def keep(self, kept: bool) -> None:
        if kept != self.registry.kept:
            self.registry = Registry(users=self.registry.users, kept=kept)
            self._changed = True

    def others(self, user: User) -> tuple[User, ...]:
        return tuple(u for u in self.registry.users if u != user)

    def save(self) -> None:
        if self._changed:
            _write(self.data_dir, self.registry)
            self._changed = False


@contextlib.contextmanager
def locked(data_dir: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[Session]:
    """Hold the data folder's lock; yield its registry (dead users pruned) and write it back when changed."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with _flock(data_dir, wait_s):
        session = Session(data_dir, read(data_dir))
        try:
            yield session
        finally:
            session.save()
