"""The bundled sample corpus (what `make run` serves): every README/QUESTIONS.md question routes and is
answered from the right document, through the production ingest job and query pipeline."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kb.app import build_ingest_context, build_pipeline
from kb.runtime import Runtime
from router.types import QueryRequest

pytestmark = pytest.mark.slow
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _questions() -> list[dict[str, object]]:
    text = (SAMPLES / "QUESTIONS.md").read_text()
    out = []
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        fields = dict(re.findall(r"^- \*\*([^*]+):\*\*\s*(.+)$", block, flags=re.M))
        out.append({
            "id": block.split()[0],
            "strategy": fields["Strategy"].strip(),
            "question": fields["Question"].strip(),
            "doc": fields["Expected document"].strip(" `"),
            "must": re.findall(r"`([^`]+)`", fields["Answer must contain"]),
        })
    return out


QUESTIONS = _questions()


@pytest.fixture(scope="module")
async def samples_rt(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    import os

    import asyncpg

    from ingest.jobs import Worker, create_job, get_job
    from kb.runtime import open_runtime
    from kb.settings import get_settings

    conn = await asyncpg.connect(pg_uri)
    await conn.execute('DROP DATABASE IF EXISTS "samples" WITH (FORCE)')
    await conn.execute('CREATE DATABASE "samples"')
    await conn.close()
    base, _, q = pg_uri.partition("?")
    mp = pytest.MonkeyPatch()
    for k in list(os.environ):
        if k.startswith("KB_"):
            mp.delenv(k)
    mp.setenv("KB_DATABASE_URL", base.rsplit("/", 1)[0] + "/samples" + (f"?{q}" if q else ""))
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


def test_questions_file_parses() -> None:
    assert len(QUESTIONS) >= 3
    assert {"metadata", "semantic", "description"} <= {q["strategy"] for q in QUESTIONS}


@pytest.mark.parametrize("q", QUESTIONS, ids=[str(q["id"]) for q in QUESTIONS])
async def test_sample_question(samples_rt: Runtime, q: dict[str, object]) -> None:
    pipeline = build_pipeline(samples_rt)
    for strategy in (str(q["strategy"]), "auto"):
        result = await pipeline.run(QueryRequest(query=str(q["question"]), strategy=strategy))
        assert Path(result.documents[0].name).stem == q["doc"], (strategy, [d.name for d in result.documents])
        evidence = " ".join([result.answer, *(f"{c.doc_name} {c.text}" for c in result.citations)])
        for needle in q["must"]:  # type: ignore[union-attr]
            assert needle.lower() in evidence.lower(), (strategy, needle, result.answer)
