"""A streaming replica of an embedded Postgres, made with the bundled binaries (``pg_basebackup -R`` writes
``standby.signal`` and ``primary_conninfo``), for the read-replica tests."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncpg
import pgserver

from kb.core.db import parse_lsn


def _system_user() -> str | None:
    return "pgserver" if os.geteuid() == 0 else None  # pgserver runs Postgres as this user under root


def start_replica(primary_pgdata: Path, replica_pgdata: Path) -> str:
    """Base-backup the running primary into ``replica_pgdata`` and start it as a hot standby listening on a
    Unix socket in its own folder; returns its server URI (database ``postgres``)."""
    user = _system_user()
    replica_pgdata.parent.mkdir(parents=True, exist_ok=True)
    if user:
        os.chown(replica_pgdata.parent, *_ids(user))
    pgserver.pg_basebackup(["-D", str(replica_pgdata), "-R", "-X", "stream", "--checkpoint=fast", "-h", str(primary_pgdata),
                            "-U", "postgres"], user=user)
    for leftover in (*replica_pgdata.glob(".s.PGSQL.*"), replica_pgdata / ".handle_pids.json"):
        leftover.unlink(missing_ok=True)  # the primary's socket lock and pgserver's bookkeeping, copied along
    resume_replica(replica_pgdata)
    return f"postgresql://postgres:@/postgres?host={replica_pgdata}"


def resume_replica(replica_pgdata: Path) -> None:
    """Start the (stopped) replica again."""
    pgserver.pg_ctl(["-w", "-l", str(replica_pgdata.parent / "replica.log"), "-o", f'-h "" -k {replica_pgdata}',
                     "start"], pgdata=replica_pgdata, user=_system_user(), timeout=60)


def stop_replica(replica_pgdata: Path) -> None:
    """Stop the replica (fast: running statements are cut off, as when a machine goes away)."""
    pgserver.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=replica_pgdata, user=_system_user(), timeout=60)


def _ids(user: str) -> tuple[int, int]:
    import pwd

    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


async def wait_for_replay(primary_url: str, replica_url: str, timeout_s: float = 30) -> None:
    """Until the replica has replayed everything the primary had written when called."""
    p = await asyncpg.connect(primary_url)
    r = await asyncpg.connect(replica_url)
    try:
        target = parse_lsn(await p.fetchval("SELECT pg_current_wal_lsn()::text"))
        async with asyncio.timeout(timeout_s):
            while parse_lsn(await r.fetchval("SELECT pg_last_wal_replay_lsn()::text")) < target:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    finally:
        await p.close()
        await r.close()
