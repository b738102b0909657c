"""Shared fixtures: one embedded Postgres per test session, a fresh database per test that asks for one."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ingest.jobs import JobStatus, create_job, run_job  # noqa: E402
from kb.core.settings import Settings, get_settings  # noqa: E402
from kb.runtime import Runtime, build_ingest_context  # noqa: E402

MODEL_DIR = Path(tempfile.mkdtemp(prefix="kb-test-models-"))
"""``KB_MODEL_DIR`` of every test: the bundled model is exported to ONNX once per session, not per data dir."""
atexit.register(shutil.rmtree, MODEL_DIR, ignore_errors=True)


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


def clean_kb_env(mp: pytest.MonkeyPatch, data_dir: Path, **env: str) -> dict[str, str]:
    """Drop every KB_* variable, then set the test defaults (data in ``data_dir``, no parser processes, no API
    worker) and ``env``; the settings cache is cleared. Returns what was set."""
    for k in list(os.environ):
        if k.startswith("KB_"):
            mp.delenv(k, raising=False)
    values = {"KB_DATA_DIR": str(data_dir), "KB_INGEST_WORKERS": "0", "KB_RUN_WORKER": "false",
              "KB_MODEL_DIR": str(MODEL_DIR), **env}
    for k, v in values.items():
        mp.setenv(k, v)
    get_settings.cache_clear()
    return values


@pytest.fixture
def kb_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A clean KB_* environment; tests add variables with ``set_env`` (or set them and call ``get_settings()``)."""
    yield clean_kb_env(monkeypatch, tmp_path / "data", KB_INGEST_ROOT=str(tmp_path))
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def onnx_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``KB_DATA_DIR`` shared by the session whose ``models/`` keeps the exported ONNX embedders (each export
    takes seconds: done once per session)."""
    return tmp_path_factory.mktemp("onnx-data")


SetEnv = Callable[..., Settings]


@pytest.fixture
def set_env(monkeypatch: pytest.MonkeyPatch) -> SetEnv:
    """``set_env(KB_API_TOKEN="x")``: set variables for this test and return the settings read afresh."""

    def apply(**env: str) -> Settings:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        get_settings.cache_clear()
        return get_settings()

    return apply


@pytest.fixture
def db_env(kb_env: dict[str, str], db_url: str, set_env: SetEnv) -> str:
    """``kb_env`` on a fresh database (``KB_DATABASE_URL``); returns its URL."""
    set_env(KB_DATABASE_URL=db_url)
    return db_url


@contextlib.asynccontextmanager
async def module_env(pg_uri: str, dbname: str, data_dir: Path, **env: str) -> AsyncIterator[str]:
    """For module-scoped fixtures: database ``dbname`` created afresh on the session server and a clean KB_*
    environment pointing at it (plus ``env``) until the block ends. Yields the database URL."""
    conn = await asyncpg.connect(pg_uri)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{dbname}"')
    finally:
        await conn.close()
    url = _with_db(pg_uri, dbname)
    mp = pytest.MonkeyPatch()
    clean_kb_env(mp, data_dir, KB_DATABASE_URL=url, **env)
    try:
        yield url
    finally:
        mp.undo()
        get_settings.cache_clear()


async def ingest(rt: Runtime, path: Path, *, collection_id: int = 1, **job: Any) -> JobStatus:
    """Create an ingest job for ``path`` (``create_job`` arguments: ``metadata_path``, ``recursive``, …) and
    run it to the end in this process (``run_job``, parsing in a thread); returns its final status."""
    job_id = await create_job(rt.pool, collection_id=collection_id, path=path, **job)
    return await finish_job(rt, job_id)


async def finish_job(rt: Runtime, job_id: int, **run: Any) -> JobStatus:
    """Run job ``job_id`` to the end in this process (``run_job``, parsing in a thread); returns its status."""
    return await run_job(build_ingest_context(rt, processes=False), job_id, **run)


@pytest.fixture
async def runtime(db_env: str) -> AsyncIterator[Runtime]:
    """A real runtime on a fresh database with the default embedder (the bundled MiniLM, int8-smooth) and the
    offline chat model."""
    from kb.runtime import open_runtime

    rt = await open_runtime(get_settings())
    yield rt
    await rt.close()


@contextlib.asynccontextmanager
async def runtime_over(pg_uri: str, dbname: str, folder: Path, *, ok: int, data_dir: Path | None = None,
                       **job: Any) -> AsyncIterator[Runtime]:
    """A runtime (bundled embedder, offline chat) on database ``dbname`` created afresh, with ``folder`` ingested
    through a real job (``create_job`` arguments in ``job``); the ingest root is the folder's parent and the data
    in ``data_dir`` (default ``folder/.kb``). Asserts every one of ``ok`` files was read and nothing failed."""
    from kb.runtime import open_runtime

    root = folder.parent
    async with module_env(pg_uri, dbname, data_dir or folder / ".kb", KB_INGEST_ROOT=str(root)), \
            open_runtime(get_settings()) as rt:
        status = await ingest(rt, folder, **job)
        assert status.status == "done" and status.counts == {"ok": ok}, \
            [(i.name, i.status, i.error) for i in status.items]
        yield rt


SAMPLES = Path(__file__).resolve().parent.parent / "samples"


@pytest.fixture(scope="module")
async def samples_rt(pg_uri: str, tmp_path_factory: pytest.TempPathFactory,
                     request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """The bundled sample reports ingested offline into a database of their own (once per test module)."""
    dbname = "samples_" + request.module.__name__.rsplit(".", 1)[-1]
    async with runtime_over(pg_uri, dbname, SAMPLES / "reports", ok=6, data_dir=tmp_path_factory.mktemp("samples-data"),
                            metadata_path=SAMPLES / "metadata.jsonl") as rt:
        yield rt


pytest_plugins = ["tests.fake_openai"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test lanes, each a marker (``pytest -m unit|db|slow|live``). ``live`` marks whole modules that drive
    live servers (reliability, load, schemathesis: ``make reliability``); ``slow`` marks longer integration
    tests. ``db`` is given here to every test whose fixtures reach the session's Postgres (``pg_uri``) and is
    set by hand on tests that start a Postgres of their own. ``unit`` is every other test (no database, neither
    slow nor live): ``make test-fast`` runs ``-m unit``. A test that starts using the database leaves the fast
    lane by itself."""
    for item in items:
        if "pg_uri" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.db)
        if not any(any(item.iter_markers(lane)) for lane in ("db", "live", "slow")):
            item.add_marker(pytest.mark.unit)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One clear line when the web UI's browser tests could not run."""
    import shutil

    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        terminalreporter.write_line("browser tests (tests/test_ui_browser.py) SKIPPED: no Chromium found; "
                                    "install it with `apt-get install -y chromium`")
