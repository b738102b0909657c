"""``kb bench latency`` at scale (issue 26 item 1), on a small synthetic collection: an interrupted load resumes
(documents kept, the dropped indexes rebuilt once at the end), a collection the bench did not write is refused
untouched, ``--drop`` cleans up, and the report has the list over 100 documents, the targets and RAM."""

from __future__ import annotations

from pathlib import Path

import pytest

import ingest.store
from kb.bench.latency_types import LatencyConfig
from kb.bench.loader import INDEX_STASH, load_collection
from kb.bench.measure import LIST20, LIST100
from kb.core.errors import ConfigError
from kb.core.settings import get_settings
from kb.runtime import open_runtime
from tests.conftest import SetEnv
from tests.conftest import ingest as ingest_path

SQL_DOCS = """
SELECT d.id, d.name FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = $1 ORDER BY d.id"""
SQL_HNSW = "SELECT count(*) FROM pg_indexes WHERE tablename = 'chunks' AND indexdef ~ 'USING hnsw'"


def _cfg(**kw: object) -> LatencyConfig:
    base: dict[str, object] = {"docs": 20, "chunks_per_doc": 30, "queries": 2, "collection": "bench-latency",
                               "json_out": None, "reuse": True, "warmup": 1}
    return LatencyConfig(**{**base, **kw})  # type: ignore[arg-type]


async def test_an_interrupted_load_resumes(db_env: str, set_env: SetEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = set_env(KB_EMBEDDING_MODEL="hash:384")
    data_dir = settings.database.data_dir
    real = ingest.store.write_document
    calls = 0

    async def dies_after_seven(pool, doc):  # noqa: ANN001, ANN202 - the production writer, then a crash
        nonlocal calls
        calls += 1
        if calls > 7:
            raise KeyboardInterrupt
        return await real(pool, doc)

    async with open_runtime(get_settings()) as rt:
        monkeypatch.setattr(ingest.store, "write_document", dies_after_seven)
        with pytest.raises(KeyboardInterrupt):
            await load_collection(rt.pool, _cfg(), data_dir, 384)
        first = await rt.pool.fetch(SQL_DOCS, "bench-latency")
        assert len(first) == 7
        assert (data_dir / INDEX_STASH).exists() and await rt.pool.fetchval(SQL_HNSW) == 0  # not rebuilt yet

        monkeypatch.setattr(ingest.store, "write_document", real)
        load = await load_collection(rt.pool, _cfg(), data_dir, 384)
        assert load.generated and load.resumed_docs == 7
        rows = await rt.pool.fetch(SQL_DOCS, "bench-latency")
        assert len(rows) == 20 and rows[:7] == first  # the first seven kept as they were
        assert await rt.pool.fetchval(SQL_HNSW) == 1 and not (data_dir / INDEX_STASH).exists()
        assert "chunks_embedding_hnsw" in load.seconds_index_build

        again = await load_collection(rt.pool, _cfg(), data_dir, 384)  # complete: reused
        assert not again.generated and await rt.pool.fetch(SQL_DOCS, "bench-latency") == rows


async def test_a_collection_the_bench_did_not_write_is_refused(db_env: str, set_env: SetEnv, tmp_path: Path) -> None:
    settings = set_env(KB_EMBEDDING_MODEL="hash:384")
    (tmp_path / "notes.md").write_text("# Notes\n\nQuarterly revenue rose to 12.5 million dollars.\n")
    async with open_runtime(get_settings()) as rt:
        job = await ingest_path(rt, tmp_path / "notes.md")
        assert job.counts == {"ok": 1}
        with pytest.raises(ConfigError, match="holds 1 documents the benchmark did not write"):
            await load_collection(rt.pool, _cfg(collection="default", reuse=False), settings.database.data_dir, 384)
        assert [r["name"] for r in await rt.pool.fetch(SQL_DOCS, "default")] == ["notes.md"]


@pytest.mark.slow
async def test_the_report_lists_over_100_documents_and_drop_cleans_up(db_env: str, set_env: SetEnv) -> None:
    from kb.bench.latency import run_latency
    from kb.bench.latency_report import render_markdown, summary_lines

    set_env(KB_EMBEDDING_MODEL="hash:384")
    report = await run_latency(_cfg(docs=120, reuse=False, drop=True))
    by_name = {s.strategy: s for s in report.strategies}
    assert by_name[LIST20].docs_routed <= 20 < by_name[LIST100].docs_routed <= 100
    assert by_name[LIST100].total.n == 2
    assert set(report.targets) == {"auto median < 100 ms", "auto p95 < 250 ms", f"{LIST20} median < 300 ms"}
    assert report.memory["bench_peak_rss_mb"] > 0 and report.memory["postgres_rss_mb"] > 0
    assert report.config["vector_type"] == "vector"
    assert "chunks_embedding_hnsw" in report.load.seconds_index_build
    assert any(line.startswith("targets (issue 26)") for line in summary_lines(report))
    assert "Targets (issue 26 item 1, 2 cores)" in render_markdown(report, "")
    async with open_runtime(get_settings()) as rt:
        assert await rt.pool.fetchval("SELECT count(*) FROM collections WHERE name = 'bench-latency'") == 0
        assert await rt.pool.fetchval("SELECT count(*) FROM chunks") == 0


def test_ten_thousand_documents_have_a_thousand_distinct_companies() -> None:
    from kb.bench import synthetic

    many = synthetic.companies(1000, 7)  # --docs 10000
    assert len({c.name.split()[0] for c in many}) == 1000
    few = synthetic.companies(520, 7)  # up to 5,200 documents: the corpus of earlier figures, names unchanged
    assert all(c.name.split()[0].lower().endswith(synthetic._NAME_B) for c in few)
    with pytest.raises(ConfigError, match="at most 10400 synthetic documents"):
        synthetic.companies(1041, 7)
