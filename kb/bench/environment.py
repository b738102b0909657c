"""Facts about where a benchmark ran: machine, commit, date, load, PostgreSQL and pgvector versions.

Every ``kb bench`` report takes these facts from here; each report chooses which of them it shows.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import structlog

log = structlog.get_logger("kb.bench.environment")

REPO = Path(__file__).resolve().parents[2]
QUERY_PATH: tuple[str, ...] = ("router", "ingest", "kb", "sql", ":(exclude)kb/bench")
"""The code a query runs through (git pathspecs): what ``kb bench latency`` calls its code version."""

SQL_PGVECTOR = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
SQL_SETTINGS = """
SELECT name, current_setting(name) AS value FROM pg_settings
WHERE name IN ('shared_buffers', 'work_mem', 'maintenance_work_mem', 'effective_cache_size',
               'max_parallel_workers_per_gather', 'max_parallel_maintenance_workers', 'jit', 'random_page_cost')"""


@dataclass(frozen=True)
class Machine:
    """The machine a benchmark ran on."""

    cpu: str  # the CPU model (/proc/cpuinfo), else what ``platform`` knows
    arch: str  # e.g. x86_64
    cores: int | None  # CPUs in the machine (os.cpu_count)
    usable_cores: int  # CPUs this process may run on (its affinity)
    memory_gib: float | None
    os: str  # platform.platform()
    python: str


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        log.debug("bench.no_cpuinfo")
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        log.debug("bench.no_meminfo")
        return None


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def machine() -> Machine:
    """The machine this process runs on."""
    return Machine(cpu=_cpu_model(), arch=platform.machine(), cores=os.cpu_count(), usable_cores=_usable_cores(),
                   memory_gib=_memory_gib(), os=platform.platform(), python=platform.python_version())


def git_commit(*pathspec: str, untracked: bool = False) -> str | None:
    """Short commit of the checkout, ``+dirty`` when files under ``pathspec`` (default: all) differ from it.

    Untracked files count only with ``untracked``; None when git is unavailable.
    """
    status = ["git", "status", "--porcelain"] + ([] if untracked else ["--untracked-files=no"])
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run([*status, "--", *pathspec], cwd=REPO, capture_output=True, text=True,
                               check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("bench.git_unavailable", error=str(exc))
        return None
    return (head + ("+dirty" if dirty else "")) or None


def utc_minutes() -> str:
    """Now, as ``2025-01-31 14:05 UTC``."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def utc_seconds() -> str:
    """Now, as ISO 8601 to the second (``2025-01-31T14:05:09+00:00``)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages, to two decimals."""
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


async def pgvector_version(pool: asyncpg.Pool) -> str | None:
    return await pool.fetchval(SQL_PGVECTOR)


async def postgres_facts(pool: asyncpg.Pool) -> dict[str, Any]:
    """Server version, pgvector version and the settings that matter for query speed."""
    settings = {r["name"]: r["value"] for r in await pool.fetch(SQL_SETTINGS)}
    return {"server_version": await pool.fetchval("SHOW server_version"),
            "pgvector": await pgvector_version(pool), "settings": settings}
