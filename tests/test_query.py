"""End to end: ingest a generated corpus into the embedded Postgres, then query every strategy over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from kb.app import create_app
from kb.core.text import normalize_title
from kb.runtime import Runtime, build_pipeline
from router.types import QueryRequest
from tests.conftest import runtime_over
from tests.corpus import build_corpus
from tests.http import app_client, wire

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def corpus(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Runtime, Path]]:
    """The generated corpus, ingested once for the module through a real ingest job."""
    folder = tmp_path_factory.mktemp("corpus")
    build_corpus(folder)
    (folder / "metadata.jsonl").write_text(json.dumps(
        {"name": "voltaic-devices-2023", "company": "Voltaic Devices", "fiscal_year": 2023,
         "doc_type": "annual_report"}) + "\n")
    async with runtime_over(pg_uri, "query_corpus", folder, ok=4) as rt:
        yield rt, folder


async def _query(rt: Runtime, **body: Any) -> dict[str, Any]:
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        r = await client.post("/kb/query", json=body)
        assert r.status_code == 200, r.text
        return r.json()


QUESTIONS = {
    "metadata": ("What was Zephyr Mining's total revenue in fiscal 2021?", "zephyr-mining-2021.md"),
    "semantic": ("Which company recalled lithium battery packs because they were overheating?",
                 "voltaic-devices-2023.pdf"),
    "description": ("Which report is from the Norwegian regional airline?", "kestrel-airlines-2020.md"),
}


@pytest.mark.parametrize("strategy", ["metadata", "semantic", "description"])
async def test_each_strategy_routes_its_question(corpus: tuple[Runtime, Path], strategy: str) -> None:
    rt, _ = corpus
    question, expected = QUESTIONS[strategy]
    body = await _query(rt, query=question, strategy=strategy)
    assert body["documents"][0]["name"] == expected, body["documents"]
    assert body["trace"]["strategy_used"] == strategy
    assert body["documents"][0]["why"]
    assert body["citations"], body


@pytest.mark.parametrize("strategy", ["metadata", "semantic", "description"])
async def test_auto_routes_every_question(corpus: tuple[Runtime, Path], strategy: str) -> None:
    rt, _ = corpus
    question, expected = QUESTIONS[strategy]
    body = await _query(rt, query=question)
    assert body["documents"][0]["name"] == expected, body["trace"]["routing"]


async def test_metadata_answer_is_extractive_and_cited(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    body = await _query(rt, query=QUESTIONS["metadata"][0], strategy="metadata")
    assert "412.7" in body["answer"]
    cited = {c["marker"]: c for c in body["citations"]}
    assert any("412.7" in c["text"] for c in cited.values())
    assert body["trace"]["routing"]["conditions"], "the company/year filter is in the trace"
    trace = body["trace"]
    assert set(trace["timings_ms"]) >= {"route", "tree_search", "retrieve", "synthesize", "total"}
    assert trace["llm"]["calls"] == 0 and trace["synthesis"] == "extractive"
    for c in trace["chunks"]:
        assert {"dense", "bm25", "fused"} <= set(c)


async def test_pdf_citations_point_at_the_pages_holding_the_text(corpus: tuple[Runtime, Path]) -> None:
    rt, folder = corpus
    body = await _query(rt, query=QUESTIONS["semantic"][0], strategy="semantic", top_docs=1)
    doc = pymupdf.open(folder / "voltaic-devices-2023.pdf")
    assert body["citations"]
    for c in body["citations"]:
        first, last = c["pages"]
        page_text = normalize_title(" ".join(doc[p - 1].get_text() for p in range(first, last + 1)))
        snippet = normalize_title(c["text"])[:80]
        assert snippet and snippet in page_text, (c["pages"], c["text"][:80])
    assert any(c["pages"][0] == 2 for c in body["citations"])  # "Product Safety" is page 2


async def test_explicit_filters_are_always_applied(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    for strategy in ("auto", "metadata", "semantic", "description"):
        body = await _query(rt, query="What was Zephyr Mining's total revenue?", strategy=strategy,
                            filters={"fiscal_year": 2022, "company": ["Zephyr Mining"]})
        assert [d["name"] for d in body["documents"]] == ["zephyr-mining-2022.md"], strategy
        assert "377.9" in body["answer"]


async def test_hostile_input_never_reaches_sql(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    evil = "Zephyr Mining 2021'; DROP TABLE documents; -- revenue) OR 1=1 | !! & :*"
    body = await _query(rt, query=evil, strategy="metadata")
    assert body["documents"]
    body = await _query(rt, query=evil, strategy="auto")
    assert await rt.pool.fetchval("SELECT count(*) FROM documents") == 4
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        r = await client.post("/kb/query", json={"query": "x", "filters": {"a'); DROP TABLE x; --": 1}})
        assert r.status_code == 400


async def test_cross_reference_is_followed(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    body = await _query(rt, query="How did Zephyr Mining refinance its debt in 2022?", strategy="metadata",
                        top_docs=1)
    reasons = [n["reason"] for n in body["trace"]["nodes"]]
    titles = [n["title"] for n in body["trace"]["nodes"]]
    assert any("Note 7" in t for t in titles), (titles, reasons)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"query": ""}, 400),
        ({"query": "   "}, 400),
        ({"query": "x"}, 400),  # one letter: nothing to search for
        ({"query": "?!"}, 400),
        ({"query": "x", "strategy": "magic"}, 400),
        ({"query": "x", "top_docs": 0}, 400),
        ({"query": "x", "top_docs": 21}, 400),
        ({"query": "x", "collection": "missing"}, 404),
        ({"query": "x", "history": [{"role": "robot", "content": "hi"}]}, 400),
        ({"query": "x", "top_k": "5"}, 400),  # strict types: no string → int
        ({"query": "x", "stream": 0}, 400),  # no int → bool
        ({"query": "x", "top_docs": 2.0}, 400),
        # a streamed answer fails with its status before the stream starts, not as a 200 with an error event
        ({"query": "x", "collection": "missing", "stream": True}, 404),
        ({"query": "x", "stream": True}, 400),
        ({"query": "what was the revenue", "stream": True, "filters": {"k": {}}}, 400),
    ],
)
async def test_query_validation(corpus: tuple[Runtime, Path], body: dict[str, Any], status: int) -> None:
    rt, _ = corpus
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        r = await client.post("/kb/query", json=body)
        assert r.status_code == status, r.text
        assert r.json()["status"] == status


async def test_history_follow_up(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    body = await _query(rt, query="And what was its operating margin?", strategy="auto", history=[
        {"role": "user", "content": "What was Zephyr Mining's total revenue in fiscal 2022?"},
        {"role": "assistant", "content": "$377.9 million."}])
    assert body["documents"][0]["name"] == "zephyr-mining-2022.md"
    assert "15.2" in body["answer"]


async def test_streaming_events(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        r = await client.post("/kb/query", json={"query": QUESTIONS["semantic"][0], "stream": True})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [ln.split(":", 1)[1].strip() for ln in r.text.splitlines() if ln.startswith("event:")]
        assert events[0] == "routing" and events[1] == "nodes"
        assert "answer" in events and events[-2:] == ["citations", "done"]


async def test_query_terms_are_idf_weighted_and_safe(corpus: tuple[Runtime, Path]) -> None:
    from router.store import query_terms

    rt, _ = corpus
    terms = await query_terms(rt.pool, 1, "Zephyr lithium battery packs' & | !:* (report) zzzunknownzzz")
    idf = dict(zip(terms.lexemes, terms.idf, strict=True))
    assert idf["lithium"] > idf["zephyr"] > 0  # in 1 of 4 documents vs 2 of 4
    assert "zzzunknownzzz" not in terms.lexemes  # in no document: dropped
    assert terms.idf == sorted(terms.idf, reverse=True)
    df = dict(await rt.pool.fetch("SELECT lexeme, df FROM lexeme_df WHERE collection_id = 1"))
    assert df["lithium"] == 1 and df["zephyr"] == 2


def _tiny_cross_encoder(folder: Path) -> Path:
    """A tiny randomly initialised BERT cross-encoder saved locally (no weights exist offline)."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the a of revenue battery recall lithium company "
             "packs million total year zephyr mining copper".split()]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(words))
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    cfg = BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, num_labels=1, max_position_embeddings=512)
    BertForSequenceClassification(cfg).save_pretrained(folder)
    return folder


async def test_cross_encoder_rerank(corpus: tuple[Runtime, Path], tmp_path: Path) -> None:
    from kb.core.providers.embed import CrossEncoderReranker
    from router.pipeline import QueryPipeline
    from router.types import QueryRequest

    rt, _ = corpus
    model_dir = _tiny_cross_encoder(tmp_path / "ce")
    reranker = CrossEncoderReranker(str(model_dir))
    pipeline = QueryPipeline(rt.pool, rt.embedder, rt.chat, rt.settings.retrieval, reranker=reranker)
    result = await pipeline.run(QueryRequest(query="What was Zephyr Mining's revenue?", rerank=True, top_k=4))
    trace = wire(result.trace)
    assert trace is not None and trace["rerank"] == f"cross-encoder {model_dir}"
    scores = [c["rerank"] for c in trace["chunks"]]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)
    texts = {r["id"]: r["text"] for r in await rt.pool.fetch(
        "SELECT id, text FROM chunks WHERE id = ANY($1::bigint[])", [c["chunk_id"] for c in trace["chunks"]])}
    for c in trace["chunks"]:  # each score is the model's own score for that chunk
        direct = reranker.score("What was Zephyr Mining's revenue?", [texts[c["chunk_id"]]])[0]
        assert c["rerank"] == pytest.approx(direct, abs=2e-4)
    # rerank requested but no model configured: skipped with a note
    plain = await build_pipeline_without_reranker(rt).run(QueryRequest(query="Zephyr revenue", rerank=True))
    assert plain.trace is not None and wire(plain.trace)["rerank"].startswith("skipped")
    assert all(c["rerank"] is None for c in wire(plain.trace)["chunks"])


def build_pipeline_without_reranker(rt: Runtime):
    from router.pipeline import QueryPipeline

    return QueryPipeline(rt.pool, rt.embedder, rt.chat, rt.settings.retrieval, reranker=None)


async def test_range_and_boolean_filters(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    body = await _query(rt, query="revenue", filters={"fiscal_year": {"gte": 2022, "lte": 2023}}, top_docs=5)
    names = {d["name"] for d in body["documents"]}
    assert names and names <= {"zephyr-mining-2022.md", "voltaic-devices-2023.pdf"}
    body = await _query(rt, query="revenue", filters={"audited": True}, top_docs=5)
    assert body["documents"] == []


async def test_description_llm_bad_shape_falls_back(corpus: tuple[Runtime, Path]) -> None:
    from router.pipeline import QueryPipeline
    from router.types import QueryRequest
    from tests.fakes import Malformed, ScriptedChat

    odd = ScriptedChat(default=Malformed({"answer": 5, "results": None, "conditions": "x"}),  # every step
                       text="Kestrel Airlines [1]")
    rt, _ = corpus
    pipeline = QueryPipeline(rt.pool, rt.embedder, odd, rt.settings.retrieval)
    for strategy in ("description", "auto"):
        result = await pipeline.run(QueryRequest(query=QUESTIONS["description"][0], strategy=strategy))
        assert result.documents and result.documents[0].name == QUESTIONS["description"][1], strategy
        assert result.trace is not None and wire(result.trace)["llm"]["calls"] >= 1
        assert {s["mode"] for s in wire(result.trace)["tree_search"]} == {"offline_fallback"}
    # metadata: the bad LLM filter falls back to offline matching; the question names no metadata
    result = await pipeline.run(QueryRequest(query=QUESTIONS["metadata"][0], strategy="metadata"))
    assert result.documents[0].name == QUESTIONS["metadata"][1]
    assert "offline match" in " ".join(wire(result.trace)["routing"]["notes"])


async def test_metrics_endpoint(corpus: tuple[Runtime, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """/metrics: Prometheus text with requests by route and status, query stages, LLM usage and the ingest
    gauges; behind the read token when one is set."""
    import re

    from prometheus_client.parser import text_string_to_metric_families

    rt, _ = corpus
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        before = await client.get("/metrics")
        assert before.status_code == 200 and before.headers["content-type"].startswith("text/plain")
        r = await client.post("/kb/query", json={"query": "Which company recalled lithium battery packs?"})
        assert r.status_code == 200
        after = (await client.get("/metrics")).text
    families = {f.name: f for f in text_string_to_metric_families(after)}
    total = next(s for s in families["kb_query_stage_seconds"].samples
                 if s.name.endswith("_count") and s.labels["stage"] == "total")
    assert total.value >= 1
    assert any(s.labels.get("path") == "/kb/query" and s.labels.get("status_code") == "200"
               for s in families["kb_requests"].samples)
    assert "kb_ingest_queue_depth" in families and "kb_ingest_pages_per_second" in families
    assert re.search(r'^kb_llm_calls_total\{outcome="ok"\} ', after, flags=re.M)


def _stage_count(stage: str = "total") -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("kb_query_stage_seconds_count", {"stage": stage}) or 0.0


async def test_untraced_and_streamed_queries_are_counted(corpus: tuple[Runtime, Path]) -> None:
    """/metrics observes every answered query, whether it asked for a trace or a stream."""
    rt, _ = corpus
    before = _stage_count()
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        r = await client.post("/kb/query", json={"query": QUESTIONS["semantic"][0], "include_trace": False})
        assert r.status_code == 200 and r.json()["trace"] is None
        assert _stage_count() == before + 1
        r = await client.post("/kb/query", json={"query": QUESTIONS["semantic"][0], "stream": True,
                                                 "include_trace": False})
        assert r.status_code == 200 and "event: done" in r.text
    assert _stage_count() == before + 2
    assert _stage_count("synthesize") >= 2


def _counter(calls: dict[str, int]) -> Any:
    """``counting(name, fn)``: ``fn`` wrapped to count its calls in ``calls[name]``."""
    def counting(name: str, fn: Any) -> Any:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return await fn(*args, **kwargs)
        return wrapper
    return counting


async def test_one_stamp_query_and_one_catalog_read_per_change(corpus: tuple[Runtime, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A query reads the collection's change stamp once and its documents' fields only when the collection
    changed since the last query (the catalog), whatever the strategy."""
    import router.catalog
    from router import store

    rt, _ = corpus
    calls = {"stamp": 0, "documents": 0}
    counting = _counter(calls)

    monkeypatch.setattr(router.catalog, "collection_stamp", counting("stamp", router.catalog.collection_stamp))
    monkeypatch.setattr(store, "collection_documents", counting("documents", store.collection_documents))
    pipeline = build_pipeline(rt)
    for i, strategy in enumerate(("auto", "metadata", "semantic", "description")):
        result = await pipeline.run(QueryRequest(query=QUESTIONS["metadata"][0], strategy=strategy))
        assert result.documents
        assert calls == {"stamp": i + 1, "documents": 1}, (strategy, calls)
    await rt.pool.execute("UPDATE documents SET updated_at = now() WHERE id = (SELECT min(id) FROM documents)")
    await pipeline.run(QueryRequest(query=QUESTIONS["metadata"][0]))
    assert calls == {"stamp": 5, "documents": 2}


async def test_a_document_tree_is_read_once_per_collection_change(corpus: tuple[Runtime, Path],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A query reads the trees of the documents it searches (nodes, titles, summaries) and their chunks and vectors
    only when the collection changed since they were read; otherwise nothing of them — the cosines come from the
    vectors the process keeps — and it answers the same."""
    from router import store, tree_search

    rt, _ = corpus
    calls = {"nodes": 0, "chunks": 0}
    counting = _counter(calls)

    tree_search._TREES.clear()
    monkeypatch.setattr(store, "doc_nodes", counting("nodes", store.doc_nodes))
    monkeypatch.setattr(store, "doc_chunk_snapshot", counting("chunks", store.doc_chunk_snapshot))
    pipeline = build_pipeline(rt)
    question = QUESTIONS["semantic"][0]
    first = await pipeline.run(QueryRequest(query=question, strategy="semantic", include_trace=True))
    read, loaded = calls["nodes"], calls["chunks"]
    assert read >= 1 and loaded >= read
    again = await pipeline.run(QueryRequest(query=question, strategy="semantic", include_trace=True))
    assert calls == {"nodes": read, "chunks": loaded}, calls
    assert again.answer == first.answer and again.trace.nodes == first.trace.nodes
    assert again.citations == first.citations
    await rt.pool.execute("UPDATE documents SET updated_at = now() WHERE id = (SELECT min(id) FROM documents)")
    await pipeline.run(QueryRequest(query=question, strategy="semantic"))
    assert calls["nodes"] == 2 * read and calls["chunks"] == 2 * loaded, calls
    small = build_pipeline(rt)  # a cache too small for one document keeps nothing and answers the same
    small.documents.max_bytes = 1
    before = calls["chunks"]
    same = await small.run(QueryRequest(query=question, strategy="semantic", include_trace=True))
    await small.run(QueryRequest(query=question, strategy="semantic"))
    assert calls["chunks"] == before + 2 * loaded  # once per document and query, none kept
    assert same.answer == first.answer and small.documents.bytes == 0


async def test_cached_cosines_are_pgvectors(corpus: tuple[Runtime, Path]) -> None:
    """The cosines and nearest chunks computed from a document's cached vectors are the ones pgvector's exact
    scan gives (to float rounding, in the same order), and so are the nodes' cosines."""
    from router.doccache import DocCache, DocReads

    rt, _ = corpus
    qvec = rt.embedder.embed_batch(["Which company recalled lithium battery packs?"])[0]
    reads = DocReads(rt.pool, DocCache(64 * 1024 * 1024), stamp=None)
    for doc_id in [r["id"] for r in await rt.pool.fetch("SELECT id FROM documents ORDER BY id")]:
        exact = await rt.pool.fetch("SELECT id, 1 - (embedding <=> $2) AS sim FROM chunks WHERE document_id = $1 "
                                    "ORDER BY 1 - (embedding <=> $2) DESC, id LIMIT 20", doc_id, qvec)
        mine = await reads.top(doc_id, qvec, 20)
        assert [n.id for n in mine] == [r["id"] for r in exact]
        assert max(abs(a.sim - b["sim"]) for a, b in zip(mine, exact, strict=True)) < 1e-6
        nodes = {r["node_id"]: r["sim"] for r in await rt.pool.fetch(
            "SELECT node_id, 1 - (embedding <=> $2) AS sim FROM nodes WHERE document_id = $1 AND embedding IS NOT NULL",
            doc_id, qvec)}
        sims = await reads.node_sims(doc_id, qvec)
        assert sims.keys() == nodes.keys() and all(abs(sims[n] - nodes[n]) < 1e-6 for n in nodes)


async def test_a_document_asked_by_questions_at_once_is_loaded_once(corpus: tuple[Runtime, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Questions asking for the same document at the same time share one read of it; a load that was cancelled
    leaves nothing behind, and the next question reads it."""
    from router import store
    from router.doccache import DocCache

    rt, _ = corpus
    calls = {"chunks": 0}
    monkeypatch.setattr(store, "doc_chunk_snapshot", _counter(calls)("chunks", store.doc_chunk_snapshot))
    doc_id = int(await rt.pool.fetchval("SELECT min(id) FROM documents"))
    cache = DocCache(64 * 1024 * 1024)
    docs = await asyncio.gather(*(cache.get(rt.pool, doc_id, "stamp") for _ in range(5)))
    assert calls["chunks"] == 1 and all(d is docs[0] for d in docs) and len(docs[0].rows) > 0
    fresh = DocCache(64 * 1024 * 1024)
    first = asyncio.create_task(fresh.get(rt.pool, doc_id, "stamp"))
    await asyncio.sleep(0)  # the load has started
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    again = await fresh.get(rt.pool, doc_id, "stamp")
    assert len(again.rows) == len(docs[0].rows) and fresh.bytes == again.nbytes


async def test_re_embedded_vectors_are_read_anew(corpus: tuple[Runtime, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """``kb reembed --collection`` replaces vectors without adding or removing a document: the documents it
    re-embedded are marked changed, so a running server reads their chunks and vectors again instead of answering
    from the ones it kept."""
    from ingest.reembed import reembed
    from router import store

    rt, _ = corpus
    calls = {"chunks": 0}
    monkeypatch.setattr(store, "doc_chunk_snapshot", _counter(calls)("chunks", store.doc_chunk_snapshot))
    pipeline = build_pipeline(rt)
    question = QueryRequest(query=QUESTIONS["semantic"][0], strategy="semantic")
    await pipeline.run(question)
    loaded = calls["chunks"]
    await pipeline.run(question)
    assert loaded >= 1 and calls["chunks"] == loaded
    await reembed(rt.pool, rt.embedder, collection="default")
    await pipeline.run(question)
    assert calls["chunks"] == 2 * loaded


async def test_the_server_warms_its_documents_before_it_is_ready(corpus: tuple[Runtime, Path],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """At start (KB_WARMUP_S) the server loads its collections' documents and trees into the process's caches,
    the token counts of their chunks and the measure names' vectors, so the first questions read none of them
    and count no chunk's tokens; KB_WARMUP_S=0 loads nothing."""
    from kb.api.lifecycle import warm_up
    from router import scoring, store, tree_search

    rt, _ = corpus
    calls = {"chunks": 0, "trees": 0}
    monkeypatch.setattr(store, "doc_chunk_snapshot", _counter(calls)("chunks", store.doc_chunk_snapshot))
    monkeypatch.setattr(store, "doc_nodes", _counter(calls)("trees", store.doc_nodes))
    rt._pipeline = None  # a fresh pipeline, no tree and no token count kept yet
    tree_search._TREES.clear()
    scoring._text_counts.cache_clear()
    scoring._text_corpus.cache_clear()  # else a corpus asked before is scored without counting its texts
    assert await warm_up(rt, 0) == 0 and rt.pipeline.documents.bytes == 0
    documents = int(await rt.pool.fetchval("SELECT count(*) FROM documents"))
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        assert calls == {"chunks": documents, "trees": documents} and rt.pipeline.documents.bytes > 0
        assert rt.pipeline.meaning._vectors is not None
        counted = scoring._text_counts.cache_info()
        r = await client.post("/kb/query", json={"query": QUESTIONS["semantic"][0], "strategy": "semantic"})
        assert r.status_code == 200 and calls == {"chunks": documents, "trees": documents}  # nothing read again
        after = scoring._text_counts.cache_info()
        assert after.hits > counted.hits  # its chunks' token counts were there


async def test_an_empty_collection_answers_400_nothing_to_search(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        admin = {"Authorization": f"Bearer {rt.settings.server.admin_token}"} if rt.settings.server.admin_token else {}
        r = await client.post("/kb/collections", json={"name": "empty-shelf"}, headers=admin)
        assert r.status_code in (201, 409), r.text
        r = await client.post("/kb/query", json={"query": "What was revenue in 2023?", "collection": "empty-shelf"})
        assert r.status_code == 400 and "holds no documents" in r.json()["detail"], r.text


async def test_a_question_asked_of_named_documents_skips_routing(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    ids = {r["name"]: r["id"] for r in await rt.pool.fetch("SELECT id, name FROM documents")}
    body = await _query(rt, query="What was the total revenue?", documents=["zephyr-mining-2022.md"])
    assert [d["name"] for d in body["documents"]] == ["zephyr-mining-2022.md"]
    assert body["trace"]["strategy_used"] == "documents"
    assert any("routing skipped" in n for n in body["trace"]["routing"]["notes"])
    assert "377.9" in body["answer"] and {c["doc_name"] for c in body["citations"]} == {"zephyr-mining-2022.md"}
    # by id, and by name in another case; a question about another company still reads only the named report
    body = await _query(rt, query="Which company recalled lithium battery packs?",
                        documents=[ids["kestrel-airlines-2020.md"]])
    assert {c["doc_name"] for c in body["citations"]} <= {"kestrel-airlines-2020.md"}
    assert [d["name"] for d in body["documents"]] == ["kestrel-airlines-2020.md"]
    body = await _query(rt, query="What was total revenue?", documents=["Zephyr-Mining-2021.MD"])
    assert [d["name"] for d in body["documents"]] == ["zephyr-mining-2021.md"]


async def test_named_documents_and_filters_both_hold(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    body = await _query(rt, query="What was the total revenue?", filters={"fiscal_year": 2022},
                        documents=["zephyr-mining-2021.md", "zephyr-mining-2022.md"])
    assert [d["name"] for d in body["documents"]] == ["zephyr-mining-2022.md"]
    assert any("the filters keep 1 of them" in n for n in body["trace"]["routing"]["notes"])


@pytest.mark.parametrize(("documents", "status", "says"), [
    (["no-such-report.md"], 400, "no document 'no-such-report.md' in collection 'default'"),
    ([999999], 400, "no document 999999"),
    ([0], 400, ""),
    ([""], 400, ""),
    ([f"d{i}.md" for i in range(21)], 400, ""),
])
async def test_named_documents_are_checked_before_any_work(corpus: tuple[Runtime, Path], documents: list[Any],
                                                           status: int, says: str) -> None:
    rt, _ = corpus
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        for stream in (False, True):  # a streamed answer fails with its status before the stream starts
            r = await client.post("/kb/query", json={"query": "What was revenue?", "documents": documents,
                                                     "stream": stream})
            assert r.status_code == status, r.text
            assert says in r.json()["detail"]


@pytest.mark.parametrize(("question", "expected"), [
    ("Tell me about the lithium battery packs that overheated and were recalled.", "voltaic-devices-2023.pdf"),
    ("Which report describes a regional airline flying in Norway?", "kestrel-airlines-2020.md"),
])
async def test_a_metadata_question_naming_nothing_known_falls_back_to_auto(
        corpus: tuple[Runtime, Path], question: str, expected: str) -> None:
    rt, _ = corpus
    body = await _query(rt, query=question, strategy="metadata")
    assert body["trace"]["strategy_used"] == "metadata→auto"
    assert any("fell back to auto" in n for n in body["trace"]["routing"]["notes"]), body["trace"]["routing"]
    assert body["documents"] and body["documents"][0]["name"] == expected, body["documents"]


async def test_retrieve_returns_the_evidence_without_an_answer(corpus: tuple[Runtime, Path]) -> None:
    rt, _ = corpus
    question = "Which company recalled lithium battery packs because they were overheating?"
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        r = await client.post("/kb/retrieve", json={"query": question, "top_k": 4})
        assert r.status_code == 200, r.text
        found = r.json()
        asked = (await client.post("/kb/query", json={"query": question, "top_k": 4})).json()
        refused = await client.post("/kb/retrieve", json={"query": question, "stream": True})
        schema = (await client.get("/schema/openapi.json")).json()
    assert "answer" not in found and found["strategy_used"] == "auto"
    # the same routing and evidence the answer is written from
    assert [d["doc_id"] for d in found["documents"]] == [d["doc_id"] for d in asked["documents"]]
    assert found["documents"][0]["name"] == "voltaic-devices-2023.pdf" and found["documents"][0]["why"]
    assert 1 <= len(found["passages"]) <= 4 and [p["rank"] for p in found["passages"]] == list(
        range(1, len(found["passages"]) + 1))
    cited = found["passages"][0]["citation"]
    assert cited["doc_name"] == "voltaic-devices-2023.pdf" and cited["pages"][0] >= 1 and cited["text"]
    assert any("41,000" in p["citation"]["text"] for p in found["passages"])
    pdf_sections = [s for s in found["sections"] if s["doc_name"] == "voltaic-devices-2023.pdf"]
    assert pdf_sections and all(s["unit"] == "page" and s["pages"][0] <= s["pages"][1] for s in pdf_sections)
    assert refused.status_code == 400 and "not streamed" in refused.json()["detail"]
    assert "/kb/retrieve" in schema["paths"] and "Example" in schema["paths"]["/kb/retrieve"]["post"]["description"]
    # named documents and their checks apply here too
    async with app_client(create_app(runtime=rt, run_worker=False)) as client:
        one = (await client.post("/kb/retrieve", json={"query": "revenue", "documents": ["zephyr-mining-2021.md"]}))
        missing = await client.post("/kb/retrieve", json={"query": "revenue", "documents": ["nope.md"]})
    assert [d["name"] for d in one.json()["documents"]] == ["zephyr-mining-2021.md"]
    assert {p["citation"]["doc_name"] for p in one.json()["passages"]} == {"zephyr-mining-2021.md"}
    assert missing.status_code == 400 and "nope.md" in missing.json()["detail"]
