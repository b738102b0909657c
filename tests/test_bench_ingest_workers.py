"""`kb bench ingest --workers N` (issue 26 item 4) at a tiny size: real `kb worker` processes against the test
database, the job's figures, the lock-wait sampler, the embeddings server; not timed."""

from __future__ import annotations

import argparse
import re
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import numpy as np
import pytest

from kb.bench import ingest_scale
from kb.bench.cli import add_arguments
from kb.bench.cli import run as run_bench
from kb.bench.embed_server import make_handler
from kb.bench.ingest_scale import BENCH_MARK, ScaleConfig, parse_workers, run_scale, summary_lines
from kb.core.collections import create_collection
from kb.core.errors import ConfigError, EmbeddingError
from kb.core.providers.embed import HashEmbedder, RemoteEmbedder
from kb.core.settings import get_settings
from kb.runtime import open_runtime
from tests.conftest import SetEnv

SQL_LEFT = "SELECT count(*) FROM collections WHERE description = $1"


@pytest.fixture
def embed_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(HashEmbedder(384)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_embeddings_server_answers_as_an_openai_endpoint(embed_url: str) -> None:
    remote = RemoteEmbedder(base_url=embed_url, model="hash:384", batch_size=3, max_retries=0)
    texts = ["revenue rose 12%", "operating margin", "cash flow from operations", "goodwill impairment"]
    assert remote.dimension == 384
    assert np.allclose(remote.embed_batch(texts), HashEmbedder(384).embed_batch(texts), atol=1e-6)
    with pytest.raises(EmbeddingError):  # a wrong path is a clear error, not vectors
        RemoteEmbedder(base_url=embed_url.removesuffix("/v1") + "/nope", model="hash:384", max_retries=0)


def test_worker_counts_are_checked() -> None:
    assert parse_workers("1, 2,4") == (1, 2, 4)
    for bad in ("", "0,2", "two"):
        with pytest.raises(ConfigError, match="--workers"):
            parse_workers(bad)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["ingest", "--workers", "0,2"])
    with pytest.raises(ConfigError, match="--workers"):  # `kb bench ingest --workers` is this benchmark
        run_bench(args)  # refused before any database is opened


@pytest.mark.slow
async def test_two_worker_processes_share_one_job_and_clean_up(db_env: str, set_env: SetEnv) -> None:
    set_env(KB_EMBEDDING_MODEL="hash:384")
    report = await run_scale(ScaleConfig(workers=(1, 2), files=6, pages_per_file=2, sample_s=0.02))
    one, two = report.runs
    for run in (one, two):
        assert (run.files, run.files_ok, run.files_failed, run.pages) == (6, 6, 0, 12)
        assert run.chunks >= 12 and run.pages_per_s > 0 and run.chunks_per_s > 0
        assert run.lock_waits.samples > 0 and run.embedder == "hash:384" and not run.remote_embeddings
    assert one.workers_claiming == 1 and two.workers_claiming == 2  # both processes took files off the queue
    for run in (one, two):  # memory over time: points in time order, files done counting up, real sizes
        times, done, mbs = zip(*run.memory_series, strict=True)
        assert list(times) == sorted(times) and list(done) == sorted(done) and done[-1] <= 6
        assert 1 <= len(run.memory_series) <= 10 and all(50 < mb <= run.peak_rss_mb for mb in mbs)
    assert len(summary_lines(report)) == 4 + 2  # the table, and each run's memory line
    async with open_runtime(get_settings()) as rt:
        assert await rt.pool.fetchval(SQL_LEFT, BENCH_MARK) == 0  # each run's collection removed
    data_dir = get_settings().database.data_dir / "bench" / "ingest-workers"
    assert not list(data_dir.glob("w*/pdfs"))  # and its corpus


@pytest.mark.slow
async def test_workers_embed_through_the_embeddings_server(db_env: str, set_env: SetEnv) -> None:
    set_env(KB_EMBEDDING_MODEL="hash:384")
    report = await run_scale(ScaleConfig(workers=(1,), files=2, pages_per_file=2, serve_embeddings=True))
    (run,) = report.runs
    assert run.remote_embeddings and run.files_ok == 2 and run.chunks >= 4
    log = (get_settings().database.data_dir / "bench" / "ingest-workers" / "embed-server.log").read_text()
    texts = int(re.search(r"served \d+ requests, (\d+) texts", log).group(1))  # type: ignore[union-attr]
    assert texts >= run.chunks  # every chunk was embedded by the server, not in the worker


async def test_a_collection_the_bench_did_not_make_is_refused(db_env: str, set_env: SetEnv) -> None:
    set_env(KB_EMBEDDING_MODEL="hash:384")
    async with open_runtime(get_settings()) as rt:
        await create_collection(rt.pool, "bench-ingest-workers-1", "my own notes")
        with pytest.raises(ConfigError, match="was not made by this benchmark"):
            await ingest_scale._bench_collection(rt.pool, "bench-ingest-workers-1")
        assert await rt.pool.fetchval("SELECT description FROM collections WHERE name = $1",
                                      "bench-ingest-workers-1") == "my own notes"
        made = await ingest_scale._bench_collection(rt.pool, "bench-ingest-workers-2")
        again = await ingest_scale._bench_collection(rt.pool, "bench-ingest-workers-2")  # one it left behind: made anew
        assert again != made and await rt.pool.fetchval(SQL_LEFT, BENCH_MARK) == 1
