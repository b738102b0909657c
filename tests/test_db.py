"""Migrator, pgvector codec, embedded-server checks, settings — against the real embedded Postgres."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from kb.core.db import check_pgdata_version, create_pool, migrate, migration_files, schema_version
from kb.core.embedder_record import ensure_embedder
from kb.core.errors import ConfigError
from kb.core.settings import get_settings
from tests.conftest import SetEnv


async def test_migrator_fresh_and_rerun(db_url: str) -> None:
    pool = await create_pool(db_url)
    try:
        applied = await migrate(pool, embedding_dim=384)
        assert applied == [v for v, _, _ in migration_files()]
        assert await schema_version(pool) == applied[-1]
        tables = {r["tablename"] for r in await pool.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
        for t in ("collections", "documents", "nodes", "chunks", "ingest_jobs", "ingest_job_items", "llm_calls",
                  "schema_migrations", "embedding_cache"):
            assert t in tables
        assert await pool.fetchval("SELECT name FROM collections WHERE name = 'default'") == "default"
        # re-run applies nothing and keeps data
        assert await migrate(pool, embedding_dim=384) == []
        assert await pool.fetchval("SELECT count(*) FROM schema_migrations") == len(applied)
        # the embedding column takes the embedder's dimension
        assert await pool.fetchval(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid='chunks'::regclass AND attname='embedding'") == 384
        # the embedder is recorded at the first start; another dimension is refused with a clear message
        await ensure_embedder(pool, "hash:384", 384)
        with pytest.raises(ConfigError, match="come from 'hash:384' \\(384-d\\)"):
            await ensure_embedder(pool, "hash:768", 768)
    finally:
        await pool.close()


async def test_migrator_concurrent_start(db_url: str) -> None:
    pools = [await create_pool(db_url) for _ in range(4)]
    try:
        results = await asyncio.gather(*(migrate(p, embedding_dim=384) for p in pools))
        applied = [r for r in results if r]
        assert len(applied) == 1, results  # exactly one process applied the schema
        assert await pools[0].fetchval("SELECT count(*) FROM collections WHERE name='default'") == 1
    finally:
        for p in pools:
            await p.close()


async def test_vector_codec_round_trip(db_url: str) -> None:
    pool = await create_pool(db_url)
    try:
        await migrate(pool, embedding_dim=384)
        vec = np.random.default_rng(1).random(384).astype(np.float32)
        async with pool.acquire() as conn:
            await conn.execute("CREATE TEMP TABLE v (e vector(384))")
            await conn.execute("INSERT INTO v VALUES ($1)", vec)
            back = await conn.fetchval("SELECT e FROM v")
            assert np.allclose(np.asarray(back), vec, atol=1e-6)
            dist = await conn.fetchval("SELECT e <=> $1 FROM v", vec)
            assert dist == pytest.approx(0.0, abs=1e-6)
    finally:
        await pool.close()


async def test_missing_vector_extension_is_created_or_reported(db_url: str) -> None:
    # the embedded server ships pgvector, so create_pool installs it in a fresh database
    conn = await asyncpg.connect(db_url)
    try:
        assert await conn.fetchval("SELECT 1 FROM pg_extension WHERE extname='vector'") is None
    finally:
        await conn.close()
    pool = await create_pool(db_url)
    try:
        assert await pool.fetchval("SELECT extversion FROM pg_extension WHERE extname='vector'")
    finally:
        await pool.close()


async def test_unreachable_database_is_one_readable_line() -> None:
    with pytest.raises(ConfigError, match="KB_DATABASE_URL"):
        await create_pool("postgresql://nobody@127.0.0.1:1/none")


def test_wrong_database_url_exits_with_one_line(tmp_path: Path) -> None:
    env = {"KB_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "KB_DATA_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "KB_EMBEDDING_MODEL": "hash:384"}
    proc = subprocess.run([sys.executable, "-m", "kb.cli", "query", "hello"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("kb:")]
    assert len(lines) == 1 and "KB_DATABASE_URL" in lines[0], proc.stderr


def test_wrong_database_url_serve_exits_with_one_line(tmp_path: Path) -> None:
    env = {"KB_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "KB_DATA_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "KB_EMBEDDING_MODEL": "hash:384"}
    for cmd in (["serve", "--port", "8799"], ["run", "--port", "8799"]):
        proc = subprocess.run([sys.executable, "-m", "kb.cli", *cmd], env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and "KB_DATABASE_URL" in proc.stderr


def test_data_dir_from_other_postgres_version_is_refused(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("9\n")
    (pgdata / "precious").write_text("data")
    with pytest.raises(ConfigError, match="PostgreSQL 9"):
        check_pgdata_version(pgdata)
    assert (pgdata / "precious").read_text() == "data"


def test_settings_masking(kb_env: dict[str, str], set_env: SetEnv) -> None:
    set_env(KB_ADMIN_TOKEN="s3cret", KB_LLM_API_KEY="sk-123", KB_DATABASE_URL="postgresql://u:pw@db:5432/kb")
    masked = get_settings().masked()
    text = str(masked)
    assert "s3cret" not in text and "sk-123" not in text and "pw@" not in text
    assert masked["server"]["admin_token"] == "***"
    assert masked["database"]["url"] == "postgresql://u:***@db:5432/kb"
    assert get_settings().llm.offline is False


def test_bad_integer_setting(kb_env: dict[str, str], set_env: SetEnv) -> None:
    with pytest.raises(ConfigError, match="KB_PORT"):
        set_env(KB_PORT="eighty")


async def test_count_documents_on_fresh_and_migrated_database(db_url: str) -> None:
    from kb.core.db import count_documents

    assert await count_documents(db_url, "default") == 0  # not migrated yet: no tables
    pool = await create_pool(db_url)
    try:
        await migrate(pool, embedding_dim=384)
    finally:
        await pool.close()
    assert await count_documents(db_url, "default") == 0
