"""Facts about where a benchmark ran: machine, commit, PostgreSQL and pgvector versions."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import asyncpg
import structlog

log = structlog.get_logger("kb.bench.environment")

SQL_SETTINGS = """
SELECT name, current_setting(name) AS value FROM pg_settings
WHERE name IN ('shared_buffers', 'work_mem', 'maintenance_work_mem', 'effective_cache_size',
               'max_parallel_workers_per_gather', 'max_parallel_maintenance_workers', 'jit', 'random_page_cost')"""


def machine_facts() -> dict[str, Any]:
    mem_gb = None
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError as exc:
        log.warning("bench.machine_facts_unreadable", error=str(exc))
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu, "ram_gb": mem_gb,
            "python": platform.python_version(), "platform": platform.platform()}


def code_version() -> str:
    """``git describe``-like commit of the query path measured, ``+dirty`` when router/ingest/kb/sql differ (kb/bench excluded)."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "router", "ingest", "kb", "sql",
                                ":(exclude)kb/bench"], cwd=root,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("bench.git_unavailable", error=str(exc))
        return "unknown"
    return head + ("+dirty" if dirty else "")


async def postgres_facts(pool: asyncpg.Pool) -> dict[str, Any]:
    settings = {r["name"]: r["value"] for r in await pool.fetch(SQL_SETTINGS)}
    return {"server_version": await pool.fetchval("SHOW server_version"),
            "pgvector": await pool.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
            "settings": settings}
