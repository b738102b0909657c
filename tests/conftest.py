"""Shared fixtures: one embedded Postgres per test session, a fresh database per test that asks for one."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from kb.settings import get_settings  # noqa: E402

_KB_VARS = [k for k in os.environ if k.startswith("KB_")]


@pytest.fixture(scope="session")
def pg_uri() -> Iterator[str]:
    """A real embedded Postgres (pgvector) for the whole session, deleted at the end."""
    import pgserver

    root = Path(tempfile.mkdtemp(prefix="kbtest-"))
    os.chmod(root, 0o755)
    server = pgserver.get_server(root / "pg", cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()


def _with_db(uri: str, dbname: str) -> str:
    base, _, query = uri.partition("?")
    base = base.rsplit("/", 1)[0]
    return f"{base}/{dbname}" + (f"?{query}" if query else "")


@pytest.fixture
async def db_url(pg_uri: str) -> AsyncIterator[str]:
    """A fresh, empty database on the session server."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(pg_uri)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    yield _with_db(pg_uri, name)
    conn = await asyncpg.connect(pg_uri)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
def kb_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A clean KB_* environment; tests add variables and call ``get_settings()`` after."""
    for k in list(os.environ):
        if k.startswith("KB_"):
            monkeypatch.delenv(k, raising=False)
    env = {"KB_DATA_DIR": str(tmp_path / "data"), "KB_INGEST_ROOT": str(tmp_path), "KB_INGEST_WORKERS": "0",
           "KB_RUN_WORKER": "false"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    yield env
    get_settings.cache_clear()


@pytest.fixture
async def runtime(kb_env: dict[str, str], db_url: str, monkeypatch: pytest.MonkeyPatch):
    """A real runtime on a fresh database with the bundled MiniLM embedder and the offline chat model."""
    from kb.runtime import open_runtime

    monkeypatch.setenv("KB_DATABASE_URL", db_url)
    get_settings.cache_clear()
    rt = await open_runtime(get_settings())
    yield rt
    await rt.close()


pytest_plugins = ["tests.fake_openai"]
