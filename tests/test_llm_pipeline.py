"""The OpenAI-compatible path end to end: ingest and query against a local fake server, including
hallucinated node ids, malformed JSON, 429/500 and timeouts — documents still ingest, queries still answer."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kb.core.settings import get_settings
from kb.runtime import Runtime, build_pipeline, open_runtime
from router.prompts import SUFFICIENCY, TREE_SEARCH
from router.types import QueryRequest
from tests.conftest import ingest, module_env
from tests.corpus import REPORTS, write_markdown, write_pdf
from tests.fake_openai import FakeOpenAI, FakeReply
from tests.http import wire

pytestmark = pytest.mark.slow


def tree_search(body: dict[str, Any]) -> FakeReply:
    """The Product Safety leaf (else the first leaf) and a hallucinated id."""
    leaves = re.findall(r"\[(\d{4})\] ([^\n]*?) \(leaf\)", body["messages"][-1]["content"])
    good = [nid for nid, title in leaves if "Safety" in title] or [leaves[0][0]] if leaves else []
    results = [{"node_id": "9999", "sub_query": "hallucinated"}]
    results += [{"node_id": nid, "sub_query": "lithium battery pack recall"} for nid in good]
    return FakeReply.json({"thinking": "the recall is a product safety matter", "results": results},
                          prompt_tokens=300, completion_tokens=40)


def smart(fake: FakeOpenAI) -> None:
    """Answers tree search, the sufficiency judgement and the answer sensibly, every other step minimally but
    validly."""
    fake.route({TREE_SEARCH: tree_search,
                SUFFICIENCY: FakeReply.json({"judgement": "sufficient", "reason": "the recall is stated"})},
               text=FakeReply.text("Voltaic Devices recalled 41,000 lithium battery packs [1].",
                                   prompt_tokens=500, completion_tokens=20))


@pytest.fixture
async def llm_rt(pg_uri: str, fake_openai: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Runtime]:
    smart(fake_openai)
    async with module_env(pg_uri, "llm_ok", tmp_path, **_llm_env(fake_openai), KB_LLM_TIMEOUT_S="5",
                          KB_LLM_MAX_RETRIES="1"):
        rt = await open_runtime(get_settings())
        yield rt
        await rt.close()


def _llm_env(fake: FakeOpenAI) -> dict[str, str]:
    return {"KB_LLM_BASE_URL": fake.base_url, "KB_LLM_API_KEY": "test-key", "KB_LLM_MODEL": "fake-model"}


async def _ingest(rt: Runtime, folder: Path) -> Any:
    return await ingest(rt, folder)


async def _ingest_reports(rt: Runtime, folder: Path, pdf: int, markdown: int) -> Any:
    """One report as a PDF and one as Markdown, ingested; both must be stored. Returns the job."""
    folder.mkdir()  # noqa: ASYNC240 - a test's own temporary folder
    write_pdf(REPORTS[pdf], folder)
    write_markdown(REPORTS[markdown], folder)
    job = await _ingest(rt, folder)
    assert job.counts == {"ok": 2}, [(i.name, i.error) for i in job.items]
    return job


async def test_llm_ingest_and_query(llm_rt: Runtime, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    job = await _ingest_reports(llm_rt, tmp_path / "docs", 2, 0)
    ingest_calls = fake_openai.call_count
    assert ingest_calls > 0
    recorded = await llm_rt.pool.fetchval("SELECT count(*) FROM llm_calls")
    assert recorded == ingest_calls
    # the job status reports what ingest spent, per file and per 100 pages
    assert job.llm_calls == ingest_calls == sum(it.llm_calls for it in job.items)
    assert job.llm_calls_per_100_pages == round(100 * ingest_calls / job.pages, 2)
    assert all(r.response_format is None or r.response_format["type"] == "json_schema"
               for r in fake_openai.requests)

    pipeline = build_pipeline(llm_rt)
    result = await pipeline.run(QueryRequest(
        query="Which company recalled lithium battery packs?", strategy="semantic", top_docs=1))
    trace = wire(result.trace)
    assert trace is not None
    assert result.documents[0].name == f"{REPORTS[2].stem}.pdf"
    search = trace["tree_search"][0]
    assert search["mode"] == "llm" and "9999" in search["dropped_ids"]
    chosen = [n for n in trace["nodes"] if n["reason"] == "chosen by LLM"]
    assert [n["title"] for n in chosen] == ["Product Safety"]
    assert chosen[0]["sub_query"] == "lithium battery pack recall"
    assert all(n["reason"] == "chunk hit inside the routed document" for n in trace["nodes"] if n not in chosen)
    assert result.answer == "Voltaic Devices recalled 41,000 lithium battery packs [1]."
    assert [c.marker for c in result.citations] == [1] and "41,000" in result.citations[0].text
    assert trace["synthesis"] == "llm"
    assert trace["llm"]["calls"] >= 2 and trace["llm"]["prompt_tokens"] >= 800
    # the same question again is served from the Postgres response cache
    before = fake_openai.call_count
    again = await pipeline.run(QueryRequest(
        query="Which company recalled lithium battery packs?", strategy="semantic", top_docs=1))
    assert fake_openai.call_count == before
    assert wire(again.trace)["llm"]["cached"] >= 2 and again.answer == result.answer


def failing_responder() -> Any:
    """Cycles through malformed JSON, 429, 500 and a timeout."""
    state = {"n": 0}

    def respond(body: dict[str, Any]) -> FakeReply:
        state["n"] += 1
        kind = state["n"] % 4
        if kind == 0:
            return FakeReply.text('{"results": [ {"node_id": "0001", ')
        if kind == 1:
            return FakeReply.rate_limited(retry_after=0)
        if kind == 2:
            return FakeReply.server_error(500)
        return FakeReply.slow(2.0, "{}")

    return respond


async def test_failing_llm_never_fails_ingest_or_query(pg_uri: str, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.script(responder=failing_responder())
    async with module_env(pg_uri, "llm_fail", tmp_path, **_llm_env(fake_openai), KB_LLM_TIMEOUT_S="0.3",
                          KB_LLM_MAX_RETRIES="1", KB_LLM_CACHE="false"):
        rt = await open_runtime(get_settings())
        try:
            await _ingest_reports(rt, tmp_path / "docs", 2, 3)
            docs = await rt.pool.fetch("SELECT name, description, node_count FROM documents")
            assert all(d["description"] and d["node_count"] > 1 for d in docs), docs
            failed = await rt.pool.fetchval("SELECT count(*) FROM llm_calls WHERE NOT ok")
            assert failed > 0
            result = await build_pipeline(rt).run(QueryRequest(query="Which company recalled lithium battery packs?"))
            assert result.documents[0].name == f"{REPORTS[2].stem}.pdf"
            assert result.citations and "41,000" in " ".join(c.text for c in result.citations)
            trace = wire(result.trace)
            assert trace is not None
            assert {s["mode"] for s in trace["tree_search"]} == {"offline_fallback"}
            assert trace["synthesis"] == "extractive_fallback"
            assert trace["llm"]["failed"] >= 1
            assert json.dumps(trace)  # serialisable
        finally:
            await rt.close()


async def test_an_answer_citing_no_evidence_falls_back_to_a_cited_one(llm_rt: Runtime, fake_openai: FakeOpenAI,
                                                                      tmp_path: Path) -> None:
    """The model's text reply ("A one-sentence description.", or a garbled JSON fragment) cites no evidence
    block: the extractive answer, with citations, is returned instead."""
    await _ingest_reports(llm_rt, tmp_path / "docs", 2, 0)
    for reply in ("A one-sentence description.", '{"results": [ {"node_id": "0001", '):
        fake_openai.route(text=FakeReply.text(reply))  # every step its smallest valid reply
        result = await build_pipeline(llm_rt).run(QueryRequest(query="Which company recalled lithium battery packs?"))
        assert result.trace is not None and wire(result.trace)["synthesis"] == "extractive_fallback"
        assert result.citations and reply not in result.answer


async def test_an_invented_figure_is_flagged_and_strictly_dropped(pg_uri: str, fake_openai: FakeOpenAI,
                                                                  tmp_path: Path) -> None:
    """The model states a figure no cited evidence holds: the sentence is flagged in the trace; with
    KB_STRICT_FIGURES=true it is dropped from the answer."""
    smart(fake_openai)
    fake_openai.route(text=FakeReply.text("Voltaic Devices recalled 41,000 lithium battery packs [1]. "
                                          "The recall cost $87.3 million [1]."))
    for strict in ("false", "true"):
        (tmp_path / strict).mkdir()
        async with module_env(pg_uri, f"llm_figures_{strict}", tmp_path / strict, **_llm_env(fake_openai),
                              KB_STRICT_FIGURES=strict):
            rt = await open_runtime(get_settings())
            try:
                await _ingest_reports(rt, tmp_path / strict / "docs", 2, 0)
                result = await build_pipeline(rt).run(QueryRequest(query="Which company recalled battery packs?"))
                trace = wire(result.trace)
                assert trace["synthesis"] == "llm"
                flagged = trace["unsupported_figures"]
                assert [f["figures"] for f in flagged] == [["87.3 × 1,000,000"]], flagged
                assert "41,000" in result.answer
                assert ("87.3" in result.answer) is (strict == "false")
                assert flagged[0]["dropped"] is (strict == "true")
            finally:
                await rt.close()
