"""Shared fixtures: one embedded Postgres per test session, a fresh database per test that asks for one."""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from kb.runtime import Runtime  # noqa: E402
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


async def new_database(pg_uri: str, prefix: str = "t") -> str:
    """Create an empty database on the session server; return its URI."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(pg_uri)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return _with_db(pg_uri, name)


@pytest.fixture
async def db_url(pg_uri: str) -> AsyncIterator[str]:
    """A fresh, empty database on the session server."""
    url = await new_database(pg_uri)
    name = url.partition("?")[0].rsplit("/", 1)[1]
    yield url
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


SAMPLES = Path(__file__).resolve().parent.parent / "samples"


@pytest.fixture(scope="module")
async def samples_rt(pg_uri: str, tmp_path_factory: pytest.TempPathFactory,
                     request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """The bundled sample reports ingested offline into a database of their own (once per test module)."""
    from ingest.jobs import Worker, create_job, get_job
    from kb.runtime import build_ingest_context, open_runtime

    dbname = "samples_" + request.module.__name__.rsplit(".", 1)[-1]
    conn = await asyncpg.connect(pg_uri)
    await conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    await conn.execute(f'CREATE DATABASE "{dbname}"')
    await conn.close()
    base, _, q = pg_uri.partition("?")
    mp = pytest.MonkeyPatch()
    for k in list(os.environ):
        if k.startswith("KB_"):
            mp.delenv(k)
    mp.setenv("KB_DATABASE_URL", base.rsplit("/", 1)[0] + f"/{dbname}" + (f"?{q}" if q else ""))
    mp.setenv("KB_DATA_DIR", str(tmp_path_factory.mktemp("samples-data")))
    mp.setenv("KB_INGEST_WORKERS", "0")
    get_settings.cache_clear()
    rt = await open_runtime(get_settings())
    job_id = await create_job(rt.pool, collection_id=1, path=SAMPLES / "reports",
                              metadata_path=SAMPLES / "metadata.jsonl")
    await Worker(build_ingest_context(rt, processes=False)).run(asyncio.Event(), until_empty=True)
    job = await get_job(rt.pool, job_id)
    assert job.counts == {"ok": 6}, [(i.name, i.error) for i in job.items]
    yield rt
    await rt.close()
    mp.undo()
    get_settings.cache_clear()


pytest_plugins = ["tests.fake_openai"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One clear line when the web UI's browser tests could not run."""
    import shutil

    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        terminalreporter.write_line("browser tests (tests/test_ui_browser.py) SKIPPED: no Chromium found; "
                                    "install it with `apt-get install -y chromium`")
