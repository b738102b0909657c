"""Database foundation: embedded Postgres, the asyncpg pool (pgvector codec) and the migrator."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.resources
import re
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import structlog
from pgvector import HalfVector, Vector
from pgvector.asyncpg import register_vector

from kb.core import embedded_users as users_registry
from kb.core.errors import ConfigError, DatabaseError
from kb.core.settings import DatabaseSettings

# pgserver asks platformdirs for a runtime dir it never uses; without XDG_RUNTIME_DIR (containers, CI) that prints
# a warning nobody can act on at every start (issue 24 item 7)
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set", module="platformdirs")

log = structlog.get_logger("kb.core.db")

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"  # the repository's sql/ (packaged as kb.sql)
if not SQL_DIR.is_dir():  # installed from a wheel
    SQL_DIR = Path(str(importlib.resources.files("kb.sql")))
MIGRATION_LOCK_KEY = 7_351_100_001  # pg_advisory_lock key for migrations
LONG_STATEMENT_S = 6 * 3600.0  # migrations (index builds) are exempt from KB_DB_COMMAND_TIMEOUT_S
_using: set[Path] = set()  # data dirs whose embedded server this process uses (and leaves when it exits)
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

SQL_CREATE_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
SQL_APPLIED = "SELECT version FROM schema_migrations ORDER BY version"
SQL_RECORD = "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)"
SQL_SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM schema_migrations"
SQL_VECTOR_EXT = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
SQL_AVAILABLE_VECTOR = "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
SQL_HAS_DOCUMENTS_TABLE = "SELECT to_regclass('documents') IS NOT NULL"
SQL_DOCUMENT_COUNT = """
SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = $1"""


# ---------------------------------------------------------------- embedded server
def _embedded_pgdata(data_dir: Path) -> Path:
    return data_dir / "pg"


def embedded_major_version() -> str:
    """Major version of the bundled Postgres binaries."""
    import pgserver

    out = pgserver.pg_config(["--version"])  # "PostgreSQL 18.3"
    m = re.search(r"(\d+)", out)
    return m.group(1) if m else "?"


def check_pgdata_version(pgdata: Path) -> None:
    """Refuse a data dir initialised by another Postgres major version (nothing is touched)."""
    version_file = pgdata / "PG_VERSION"
    if not version_file.exists():
        return
    theirs = version_file.read_text().strip()
    ours = embedded_major_version()
    if theirs != ours:
        raise ConfigError(
            f"KB_DATA_DIR={pgdata.parent}: the database in {pgdata} was created by PostgreSQL {theirs}, "
            f"but the embedded server is PostgreSQL {ours}; use another KB_DATA_DIR or dump/restore (nothing was changed)"
        )


def embedded_users(data_dir: Path) -> list[int]:
    """The pids of the live ``kb`` processes using the embedded server in ``data_dir`` (the last to stop stops
    it, unless ``kb db start`` keeps it running)."""
    return [u.pid for u in users_registry.read(data_dir.expanduser().resolve()).users]


def _use(data_dir: Path, session: users_registry.Session) -> None:
    """Register this process as a user of the embedded server (under the registry lock); it leaves on exit."""
    session.add(users_registry.this_process())
    if not _using:  # any program that starts it (uvicorn on the app factory, a script) leaves on a normal exit
        atexit.register(release_embedded)
    _using.add(data_dir)


def start_embedded(data_dir: Path, *, keep_running: bool = True) -> str:
    """Start (or attach to) the embedded Postgres in ``data_dir``; return its URI.

    ``keep_running`` (``kb db start``): nobody stops it on exit, only ``kb db stop``. Otherwise this process
    becomes one of its users, and the last user to exit stops it (``release_embedded``). One left running with
    no live user (its users were killed with SIGKILL or by the OOM killer) is adopted the same way.
    """
    import pgserver

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = _embedded_pgdata(data_dir)
    check_pgdata_version(pgdata)
    me = users_registry.this_process()
    with users_registry.locked(data_dir) as session:
        leftover = (bool(embedded_status(data_dir)["running"]) and not session.registry.kept
                    and not session.others(me))
        try:  # never pgserver's own clean-up: it trusts a list of pids that a killed process never leaves
            server = pgserver.get_server(pgdata, cleanup_mode=None)
        except Exception as exc:  # noqa: BLE001 - turned into one readable line
            raise ConfigError(f"KB_DATA_DIR={data_dir}: embedded Postgres failed to start: {exc}") from exc
        if keep_running:
            session.keep(True)
        else:
            if leftover and me not in session.registry.users:
                log.warning("db.embedded_adopted", data_dir=str(data_dir), pid=server.get_pid())
            _use(data_dir, session)
    return server.get_uri()


@dataclass(frozen=True)
class Release:
    """What became of one embedded server when this process stopped using it."""

    data_dir: Path
    stopped: bool
    others: int = 0  # live kb processes still using it
    kept: bool = False  # kept running by ``kb db start``
    error: str | None = None


def release_embedded() -> list[Release]:
    """This process stops using its embedded servers; each one it was the last user of (and not kept running by
    ``kb db start``) is stopped, under the registry lock so that no other process starts using it meanwhile."""
    me = users_registry.this_process()
    released = []
    for data_dir in sorted(_using):
        _using.discard(data_dir)
        if not _embedded_pgdata(data_dir).exists():  # removed meanwhile (a test's folder): nothing to stop or record
            continue
        try:
            with users_registry.locked(data_dir) as session:
                session.remove(me)
                others, kept = len(session.registry.users), session.registry.kept
                stopped = not others and not kept and _stop_postmaster(data_dir)
            released.append(Release(data_dir, stopped, others, kept))
        except Exception as exc:  # noqa: BLE001 - reported; the other servers are still released
            log.error("db.embedded_stop_failed", data_dir=str(data_dir), error=str(exc))
            released.append(Release(data_dir, False, error=str(exc)))
    return released


def embedded_status(data_dir: Path) -> dict[str, object]:
    """Whether the embedded server in ``data_dir`` exists and runs (without starting it), and who uses it."""
    from pgserver.utils import PostmasterInfo

    pgdata = _embedded_pgdata(data_dir)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    running = bool(info is not None and info.is_running())
    registry = users_registry.read(data_dir) if data_dir.exists() else users_registry.Registry()
    return {
        "data_dir": str(data_dir),
        "initialised": (pgdata / "PG_VERSION").exists(),
        "running": running,
        "pid": info.pid if running and info else None,
        "uri": info.get_uri() if running and info else None,
        "users": [u.pid for u in registry.users],
        "kept_running": registry.kept,
    }


def _stop_postmaster(data_dir: Path, timeout_s: float = 8.0) -> bool:
    """Stop the server if it runs (a fast shutdown); True when it was stopped. The caller holds the lock.

    The postmaster is signalled directly rather than through ``pg_ctl``: run as root, pgserver runs
    ``pg_ctl`` as its own user, which fails once a parent folder has lost the traversal right it was given.
    A server that has not stopped after ``timeout_s`` is shut down immediately (SIGQUIT), then killed.
    """
    import signal

    import psutil

    status = embedded_status(data_dir)
    if not status["running"] or status["pid"] is None:
        return False
    try:
        proc = psutil.Process(int(status["pid"]))  # type: ignore[call-overload]
        for sig, wait_s in ((signal.SIGINT, timeout_s), (signal.SIGQUIT, 2.0), (signal.SIGKILL, 2.0)):
            proc.send_signal(sig)
            try:
                proc.wait(timeout=wait_s)
                break
            except psutil.TimeoutExpired:
                log.warning("db.embedded_stop_slow", data_dir=str(data_dir), signal=sig.name)
    except psutil.NoSuchProcess:
        pass
    return True


def stop_embedded(data_dir: Path, timeout_s: float = 8.0) -> bool:
    """``kb db stop``: stop the embedded server whoever uses it (clients are disconnected, nothing is lost) and
    no longer keep it running. True when it was stopped."""
    data_dir = data_dir.expanduser().resolve()
    with users_registry.locked(data_dir) as session:
        session.keep(False)
        return _stop_postmaster(data_dir, timeout_s)


def restart_embedded_if_down(data_dir: Path) -> bool:
    """Start the embedded server again when its postmaster died (``kill -9``); True when this process did.

    Under the registry lock, so that of several processes that notice at once one restarts it and the others
    find it running; the server keeps its socket folder, so the URI and the pools stay valid.
    """
    if embedded_status(data_dir)["running"]:
        return False
    import pgserver

    data_dir = data_dir.expanduser().resolve()
    with users_registry.locked(data_dir) as session:
        if embedded_status(data_dir)["running"]:
            return False  # another user restarted it while this one waited for the lock
        pgserver.get_server(_embedded_pgdata(data_dir), cleanup_mode=None).ensure_postgres_running()
        log.warning("db.embedded_restarted", data_dir=str(data_dir))
        _use(data_dir, session)
    return True


def resolve_database_url(settings: DatabaseSettings, *, keep_running: bool = False) -> str:
    """``KB_DATABASE_URL`` if set, else the embedded server's URI (started if needed).

    This process becomes a user of an embedded server (``start_embedded``); the last user to exit stops it,
    unless ``keep_running`` (``kb db start``).
    """
    if settings.url:
        return settings.url
    return start_embedded(settings.data_dir, keep_running=keep_running)


# ---------------------------------------------------------------- pool
def _decode_vector(data: bytes) -> np.ndarray:
    return Vector.from_binary(data).to_numpy()


def _encode_vector(value: object) -> bytes:
    return (value if isinstance(value, Vector) else Vector(value)).to_binary()


def _decode_halfvec(data: bytes) -> np.ndarray:
    return HalfVector.from_binary(data).to_numpy().astype(np.float32)


def _encode_halfvec(value: object) -> bytes:
    return (value if isinstance(value, HalfVector) else HalfVector(value)).to_binary()


async def _init_connection(conn: asyncpg.Connection) -> None:
    """pgvector codecs on every connection; vectors (``vector`` and ``halfvec``, ``KB_VECTOR_TYPE``) come back
    as float32 numpy arrays."""
    await register_vector(conn)
    await conn.set_type_codec("vector", schema="public", encoder=_encode_vector, decoder=_decode_vector,
                              format="binary")
    await conn.set_type_codec("halfvec", schema="public", encoder=_encode_halfvec, decoder=_decode_halfvec,
                              format="binary")


# errors meaning "the database cannot be reached right now" (→ 503 with Retry-After, not 500)
DB_UNAVAILABLE: tuple[type[BaseException], ...] = (
    asyncpg.CannotConnectNowError, asyncpg.ConnectionDoesNotExistError, asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError, asyncpg.CrashShutdownError, asyncpg.InterfaceError,
    ConnectionError, FileNotFoundError, TimeoutError,
)


def is_db_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached now. A missing Unix socket is a
    ``FileNotFoundError`` without a file name (a file's own error names the file)."""
    if isinstance(exc, FileNotFoundError):
        return exc.filename is None
    return isinstance(exc, DB_UNAVAILABLE)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool release without asyncpg's reset round trip (``RESET ALL``, ``UNLISTEN *``, unlock all: about a
    tenth of a query's CPU under load). Nothing here leaves session state behind: settings are set
    transaction-locally (``set_config(..., true)``, ``SET LOCAL``) and session advisory locks are released
    by their owners (migrations, ``kb reembed``)."""


async def create_pool(url: str, *, min_size: int = 1, max_size: int = 10, connect_timeout: float = 15.0,
                      command_timeout: float | None = None) -> asyncpg.Pool:
    """Connect, make sure ``vector`` exists, and return a pool with the pgvector codec.

    ``connect_timeout`` bounds every new connection, ``command_timeout`` every statement, so a frozen
    server makes requests fail (503) instead of hanging.
    """
    try:
        conn = await asyncpg.connect(url, timeout=max(connect_timeout, 15.0))
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        raise ConfigError(f"KB_DATABASE_URL: cannot connect to the database ({type(exc).__name__}: {exc})") from exc
    try:
        if await conn.fetchval(SQL_VECTOR_EXT) is None:
            if await conn.fetchval(SQL_AVAILABLE_VECTOR) is None:
                raise ConfigError(
                    "KB_DATABASE_URL: the database has no 'vector' extension (install pgvector >= 0.6)"
                )
            try:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except asyncpg.PostgresError as exc:
                raise ConfigError(
                    f"KB_DATABASE_URL: cannot create extension 'vector' ({exc}); ask an admin to run CREATE EXTENSION vector"
                ) from exc
    finally:
        await conn.close()
    pool = await asyncpg.create_pool(url, min_size=min_size, max_size=max_size, init=_init_connection,
                                     timeout=connect_timeout, command_timeout=command_timeout, reset=_keep_session)
    assert pool is not None
    return pool


# ---------------------------------------------------------------- migrator
def migration_files(sql_dir: Path = SQL_DIR) -> list[tuple[int, str, Path]]:
    """``sql/NNNN_name.sql`` files in version order."""
    out = []
    for path in sorted(sql_dir.glob("*.sql")):
        m = _MIGRATION_FILE.match(path.name)
        if m:
            out.append((int(m.group(1)), m.group(2), path))
    return out


async def migrate(pool: asyncpg.Pool, *, embedding_dim: int, sql_dir: Path = SQL_DIR) -> list[int]:
    """Apply pending migrations in order under an advisory lock; return versions applied.

    The only substitution is ``{{EMBEDDING_DIM}}``, an integer from the configured embedder (used when the
    vector columns are created); ``kb.core.embedder_record`` checks the embedder against the database after.
    """
    files = migration_files(sql_dir)
    if not files:
        raise ConfigError(f"no schema migrations found in {sql_dir} (broken installation)")
    applied_now: list[int] = []
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY, timeout=LONG_STATEMENT_S)
        try:
            await conn.execute(SQL_CREATE_MIGRATIONS)
            done = {r["version"] for r in await conn.fetch(SQL_APPLIED)}
            for version, name, path in files:
                if version in done:
                    continue
                sql = path.read_text().replace("{{EMBEDDING_DIM}}", str(int(embedding_dim)))
                async with conn.transaction():
                    await conn.execute(sql, timeout=LONG_STATEMENT_S)
                    await conn.execute(SQL_RECORD, version, name)
                applied_now.append(version)
                log.info("db.migration_applied", version=version, name=name)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied_now


async def schema_version(pool: asyncpg.Pool) -> int:
    try:
        return int(await pool.fetchval(SQL_SCHEMA_VERSION))
    except asyncpg.PostgresError as exc:
        raise DatabaseError(f"schema version unavailable: {exc}") from exc


async def count_documents(url: str, collection: str) -> int:
    """Documents in a collection, without the pool, providers or migrations (0 on a fresh database)."""
    try:
        conn = await asyncpg.connect(url, timeout=15)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        raise ConfigError(f"KB_DATABASE_URL: cannot connect to the database ({type(exc).__name__}: {exc})") from exc
    try:
        if not await conn.fetchval(SQL_HAS_DOCUMENTS_TABLE):  # a fresh database: not migrated yet
            return 0
        return int(await conn.fetchval(SQL_DOCUMENT_COUNT, collection))
    finally:
        await conn.close()


async def supports_iterative_scan(pool: asyncpg.Pool) -> bool:
    """pgvector ≥ 0.8 can keep scanning an HNSW index until a filtered query has enough rows."""
    version = await pool.fetchval(SQL_VECTOR_EXT) or "0"
    parts = [int(x) for x in re.findall(r"\d+", version)[:2]] + [0, 0]
    return (parts[0], parts[1]) >= (0, 8)


# ---------------------------------------------------------------- read replicas (KB_DATABASE_READ_URLS)
SQL_IN_RECOVERY = "SELECT pg_is_in_recovery()"
SQL_REPLICA_STATE = """
SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replay_lsn,
       extract(epoch FROM now() - pg_last_xact_replay_timestamp()) AS replay_age_s"""
SQL_PRIMARY_LSN = "SELECT pg_current_wal_lsn()::text"


def parse_lsn(text: str | None) -> int:
    """A ``pg_lsn`` (``16/B374D848``) as an integer byte position (0 when unknown)."""
    if not text:
        return 0
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) + int(lo, 16)


def replica_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says the server went away: ``is_db_unavailable``, or asyncpg's "cannot switch to state"
    of a connection whose server was stopped in the middle of a statement."""
    return is_db_unavailable(exc) or (isinstance(exc, asyncpg.InternalClientError)
                                      and "cannot switch to state" in str(exc))


def url_label(url: str) -> str:
    """A database URL without its password, for logs and warnings."""
    return re.sub(r"(//[^:/@]*):[^@/]*@", r"\1@", url)


@dataclass
class Replica:
    """One read replica: its pool (made at the first health check that reaches it) and whether it is used."""

    url: str
    pool: asyncpg.Pool | None = None
    healthy: bool = False
    reason: str = "not checked yet"

    @property
    def label(self) -> str:
        return url_label(self.url)


@dataclass(frozen=True)
class ReadLease:
    """The pool one query reads from: a replica's, or the primary's (``replica`` None)."""

    pool: asyncpg.Pool
    replica: Replica | None


class ReadPools:
    """The query path's reads over Postgres streaming replicas: round robin among the healthy ones, the
    primary when none is. A replica is healthy when it answers, is a standby (``pg_is_in_recovery()``) and
    has replayed what the primary had written ``max_lag_s`` ago; checks run every ``check_s`` in the
    background (never in a request's way). A call that finds a replica gone marks it down and runs on the
    primary. Writes, admin reads and read-your-write never come here: they use the primary's pool.

    Quacks like the asyncpg pool for what the router calls (``fetch``, ``fetchrow``, ``fetchval``,
    ``acquire``); ``lease()`` pins one query to one pool."""

    def __init__(self, primary: asyncpg.Pool, urls: Sequence[str], *, max_lag_s: float = 10.0, check_s: float = 5.0,
                 pool_max: int = 10, connect_timeout: float = 5.0, command_timeout: float | None = None) -> None:
        self.primary = primary
        self.replicas = [Replica(u) for u in urls]
        self.max_lag_s, self.check_s = max_lag_s, check_s
        self._pool_args = {"max_size": pool_max, "timeout": connect_timeout, "command_timeout": command_timeout}
        self._samples: deque[tuple[float, int]] = deque(maxlen=max(8, int(4 * max_lag_s / max(check_s, 0.05)) + 4))
        self._next = 0
        self._checked_at = 0.0
        self._check_task: asyncio.Task[None] | None = None

    # -------- health
    async def check(self) -> None:
        """Check every replica now (the primary's WAL position first)."""
        now = time.monotonic()
        primary_lsn = parse_lsn(await self.primary.fetchval(SQL_PRIMARY_LSN))
        self._samples.append((now, primary_lsn))
        old = [lsn for t, lsn in self._samples if t <= now - self.max_lag_s]
        await asyncio.gather(*(self._check_one(r, primary_lsn, old[-1] if old else None) for r in self.replicas))
        self._checked_at = time.monotonic()

    async def _check_one(self, r: Replica, primary_lsn: int, lsn_then: int | None) -> None:
        try:
            if r.pool is None:
                r.pool = await asyncpg.create_pool(r.url, min_size=0, init=_init_connection, reset=_keep_session,
                                                   **self._pool_args)
            row = await r.pool.fetchrow(SQL_REPLICA_STATE, timeout=self._pool_args["timeout"])
        except Exception as exc:  # noqa: BLE001 - any failure means: not usable now (said in the warning)
            self._set(r, False, f"unreachable ({type(exc).__name__}: {exc})")
            return
        replay = parse_lsn(row["replay_lsn"])
        age = row["replay_age_s"]
        if not row["standby"]:
            self._set(r, False, "not a standby (read-write): never used")
        elif lsn_then is not None and replay < lsn_then:
            self._set(r, False, f"lagging: has not replayed what the primary wrote {self.max_lag_s:g} s ago")
        elif lsn_then is None and replay < primary_lsn and age is not None and float(age) > self.max_lag_s:
            self._set(r, False, f"lagging: last replayed {float(age):.0f} s ago, behind the primary")
        else:
            self._set(r, True, "ok")

    def _set(self, r: Replica, healthy: bool, reason: str) -> None:
        if (healthy, reason) != (r.healthy, r.reason):
            if healthy:
                log.info("db.replica_ok", replica=r.label)
            else:
                log.warning("db.replica_skipped", replica=r.label, reason=reason)
        r.healthy, r.reason = healthy, reason

    def mark_down(self, r: Replica, exc: BaseException) -> None:
        """A call found ``r`` gone: skip it until a check finds it back."""
        self._set(r, False, f"unreachable ({type(exc).__name__}: {exc})")

    def _maybe_check(self) -> None:
        if time.monotonic() - self._checked_at < self.check_s:
            return
        if self._check_task is not None and not self._check_task.done():
            return
        self._checked_at = time.monotonic()  # one check at a time, however many queries arrive
        self._check_task = asyncio.get_running_loop().create_task(self._check_logged())

    async def _check_logged(self) -> None:
        try:
            await self.check()
        except Exception as exc:  # noqa: BLE001 - the primary itself is down: reads fail on it anyway
            log.warning("db.replica_check_failed", error=f"{type(exc).__name__}: {exc}")

    # -------- routing
    def lease(self) -> ReadLease:
        """The pool for one query: the next healthy replica (round robin), else the primary."""
        self._maybe_check()
        healthy = [r for r in self.replicas if r.healthy and r.pool is not None]
        if not healthy:
            return ReadLease(self.primary, None)
        self._next = (self._next + 1) % len(healthy)
        r = healthy[self._next]
        assert r.pool is not None
        return ReadLease(r.pool, r)

    def pin(self) -> PinnedReads:
        """One query's reads, all on the pool ``lease()`` chose (one replica's state, never two)."""
        return PinnedReads(self, self.lease())

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        return await self.pin().fetch(query, *args, **kwargs)

    async def fetchrow(self, query: str, *args: Any, **kwargs: Any) -> asyncpg.Record | None:
        return await self.pin().fetchrow(query, *args, **kwargs)

    async def fetchval(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self.pin().fetchval(query, *args, **kwargs)

    def acquire(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        return self.pin().acquire()

    def status(self) -> list[dict[str, object]]:
        """Each replica: its URL (no password), whether it is used, and why not."""
        return [{"url": r.label, "healthy": r.healthy, "reason": r.reason} for r in self.replicas]

    async def close(self) -> None:
        """Close the replicas' pools (the primary's belongs to the runtime)."""
        if self._check_task is not None:
            self._check_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._check_task
        await asyncio.gather(*(r.pool.close() for r in self.replicas if r.pool is not None), return_exceptions=True)


class PinnedReads:
    """The reads of one query on one pool. A replica that turns out gone is marked down and the primary takes
    over: a statement is run again there; a connection whose body failed raises ``ReplicaLostError`` (the
    caller runs the query again)."""

    def __init__(self, pools: ReadPools, lease: ReadLease) -> None:
        self.pools, self.lease = pools, lease

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the leased replica going away (then marked down; later reads use the primary)."""
        replica = self.lease.replica
        if replica is None or not replica_gone(exc):
            return False
        self.pools.mark_down(replica, exc)
        self.lease = ReadLease(self.pools.primary, None)
        return True

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self.lease.pool, method)(*args, **kwargs)
        except Exception as exc:
            if not self._lost(exc):
                raise
            return await getattr(self.lease.pool, method)(*args, **kwargs)

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        return await self._call("fetch", query, *args, **kwargs)

    async def fetchrow(self, query: str, *args: Any, **kwargs: Any) -> asyncpg.Record | None:
        return await self._call("fetchrow", query, *args, **kwargs)

    async def fetchval(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self._call("fetchval", query, *args, **kwargs)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection on the pinned pool (the primary's when the replica cannot give one)."""
        cm = self.lease.pool.acquire()
        try:
            conn = await cm.__aenter__()
        except Exception as exc:
            if not self._lost(exc):
                raise
            cm = self.lease.pool.acquire()
            conn = await cm.__aenter__()
        replica = self.lease.replica
        try:
            yield conn
        except BaseException as exc:
            lost = self._lost(exc)
            await cm.__aexit__(type(exc), exc, exc.__traceback__)
            if lost and replica is not None:
                raise ReplicaLostError(f"read replica {replica.label} went away: {exc}") from exc
            raise
        await cm.__aexit__(None, None, None)


class ReplicaLostError(ConnectionError):
    """A read replica went away under a query's connection (marked down: run the query again, on the primary;
    left alone, it is a 503 like any unreachable database)."""


async def open_read_pools(primary: asyncpg.Pool, urls: Sequence[str], **kwargs: Any) -> ReadPools:
    """``ReadPools`` over ``urls``, checked once (a replica that is down, lagging or read-write is skipped
    with a warning; the primary serves until it is back)."""
    pools = ReadPools(primary, urls, **kwargs)
    await pools.check()
    return pools
