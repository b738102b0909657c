"""``kb bench latency`` at a tiny size: the synthetic reports carry statement facts that the production reader
reads back from their printed statements, consistent across a company's reports; the corpus-wide facts
questions are "list" questions naming no company, answered from the facts of every document of the collection
(not only the routed ones); the bench times them whole and reports them apart."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kb.bench.latency_report import render_markdown, summary_lines
from kb.bench.latency_types import LatencyConfig, LatencyReport
from kb.bench.synthetic import (
    _QUESTIONS_FACTS,
    DOCS_PER_COMPANY,
    SyntheticQuestion,
    companies,
    facts_question,
    synthetic_document,
    synthetic_fact_count,
)
from kb.bench.synthetic_facts import FACTS_PER_REPORT
from kb.core.types import ChunkDraft
from router.facts import task
from router.metadata import KnownValues
from router.reading import read_question
from router.scope import classify_scope

SEED = 7
FACT_QUESTIONS = [t.format(fy=2023) for t in _QUESTIONS_FACTS]


def _doc(index: int, n_companies: int = 3):  # noqa: ANN202
    return synthetic_document(index, 40, SEED, companies(n_companies, SEED))


def _key(f) -> tuple:  # noqa: ANN001
    return f.concept, f.period_end, f.months, round(f.value, 2)


@pytest.mark.parametrize("index", [0, 6, 7, 8])  # 10-K 2017, 10-K 2023, 10-Q 2024 Q1 and Q2
def test_printed_statements_read_back_as_the_stored_facts(index: int) -> None:
    from ingest.facts import extract_facts

    _, meta, _, tree, chunks, facts = _doc(index)
    assert len(facts) == FACTS_PER_REPORT
    assert {f.statement for f in facts} == {"income", "balance", "cash_flow"}
    assert {c.statement for c in chunks} == {"", "income", "balance", "cash_flow"}
    first: dict[str, ChunkDraft] = {}
    for c in chunks:  # a statement's table opens the first chunk of its section
        if c.statement:
            first.setdefault(c.statement, c)
    statement_chunks = list(first.values())
    assert all(c.text.startswith(meta["company"]) for c in statement_chunks)
    read = extract_facts(tree, text="\n\n".join(c.text for c in statement_chunks),
                         period_end=meta["period_end_date"], doc_type=meta["doc_type"])
    assert {_key(f) for f in read if f.concept} == {_key(f) for f in facts}
    for f in facts:  # each fact cites the page and node of the chunk printing its line
        holder = next(c for c in statement_chunks if c.statement == f.statement)
        assert (f.page, f.node_id) == (holder.page, holder.node_id)
        assert f.printed in f.source and f.line_item in holder.text


def test_press_releases_carry_no_facts_and_the_count_is_known() -> None:
    _, meta, *_, facts = _doc(9)
    assert meta["form"] == "8-K" and facts == ()
    assert synthetic_fact_count(25) == sum(len(_doc(i)[-1]) for i in range(25)) == 23 * FACTS_PER_REPORT


def test_a_company_figures_agree_across_its_reports() -> None:
    by_doc = {i: {(f.concept, str(f.period_end), f.months): f.value for f in _doc(i)[-1]} for i in (5, 6, 7, 8)}
    k22, k23, q1, q2 = by_doc[5], by_doc[6], by_doc[7], by_doc[8]
    for (concept, end, months), value in k22.items():  # 10-K 2023's comparative column = 10-K 2022's own
        if end == "2022-12-31":
            assert k23[(concept, end, months)] == value, concept
    assert q1[("total_assets", "2023-12-31", 0)] == k23[("total_assets", "2023-12-31", 0)]
    assert q2[("total_liabilities", "2023-12-31", 0)] == k23[("total_liabilities", "2023-12-31", 0)]
    quarters = q1[("revenue", "2023-03-31", 3)] + q2[("revenue", "2023-06-30", 3)]
    assert 0.4 * k23[("revenue", "2023-12-31", 12)] < quarters < 0.5 * k23[("revenue", "2023-12-31", 12)]
    assert k23[("total_assets", "2023-12-31", 0)] == k23[("liabilities_and_equity", "2023-12-31", 0)]


def _known(n_docs: int) -> KnownValues:
    """The catalog's known metadata values of a synthetic collection of ``n_docs`` documents."""
    values: dict[str, Counter[str]] = {}
    company_list = companies(math.ceil(n_docs / DOCS_PER_COMPANY), SEED)
    for i in range(n_docs):
        meta = synthetic_document(i, 30, SEED, company_list)[1]
        for k, v in meta.items():
            values.setdefault(k, Counter())[str(v)] += 1
    return KnownValues(values={k: dict(v) for k, v in values.items()}, doc_count=n_docs)


def test_facts_questions_are_corpus_wide_rankings() -> None:
    kv = _known(200)
    for q in FACT_QUESTIONS:
        a = task(read_question(q))
        assert a is not None and a.operation in ("max", "min", "rank"), (q, a)
        scope = classify_scope(q, kv)
        assert scope.kind == "list" and not scope.entities, (q, scope)
    asked = {facts_question(SyntheticQuestion(f"q{i}", None, None)) for i in range(60)}
    assert len({a.split(" in 20")[0] for a in asked}) == len(_QUESTIONS_FACTS)


@pytest.fixture
async def tiny_report(db_env: str, set_env) -> AsyncIterator[LatencyReport]:  # noqa: ANN001
    """``kb bench latency`` on 30 documents of 30 chunks (3 companies), 3 measured questions."""
    from kb.bench.latency import run_latency

    set_env(KB_EMBEDDING_MODEL="hash:384")
    yield await run_latency(LatencyConfig(docs=30, chunks_per_doc=30, queries=3, collection="bench-latency",
                                          json_out=None, reuse=False, warmup=1))


@pytest.mark.slow
async def test_bench_times_the_corpus_wide_facts_question(tiny_report: LatencyReport) -> None:
    from kb.core.providers.chat import OfflineChatModel
    from kb.core.settings import get_settings
    from kb.runtime import open_runtime
    from router.pipeline import QueryPipeline
    from router.types import QueryRequest

    report = tiny_report
    assert report.collection.facts == synthetic_fact_count(30) == 27 * FACTS_PER_REPORT
    f = report.facts_question
    assert f is not None and f.total.n == 3 and f.answered_from_facts == 1.0
    assert f.facts_docs_min >= 3  # every company's figure, whatever the question
    for stage in ("route", "facts", "tree_search", "retrieve", "synthesize"):
        assert f.stages[stage].n == 3 and f.stages[stage].median >= 0, stage
    assert f.total.median >= f.stages["facts"].median
    text = render_markdown(report, "")
    assert "## Corpus-wide facts question (3 questions, whole query, offline)" in text
    assert "| corpus-wide ranking (highest / lowest / rank) |" in text
    assert any("corpus-wide facts question" in line for line in summary_lines(report))

    settings = get_settings()
    async with open_runtime(settings, chat=OfflineChatModel()) as rt:
        pipeline = QueryPipeline(rt.pool, rt.embedder, rt.chat, settings.retrieval)
        for q in FACT_QUESTIONS:
            res = await pipeline.run(QueryRequest(query=q, collection="bench-latency", include_trace=True))
            assert res.trace is not None and res.trace.scope.kind == "list", q
            used = {x.doc_id for x in res.facts}
            companies_used = {x.entity for x in res.facts}
            assert len(companies_used) == 3, (q, companies_used)
            # one report per company: of a stated year its annual report, else its latest report
            assert len(used) == 3, (q, sorted(used))
            meta = {d: rt_doc for d, rt_doc in (await _doc_meta(rt, used)).items()}
            if "2023" in q:
                assert {m["doc_type"] for m in meta.values()} == {"10k"}, meta
                assert {str(x.period_end)[:4] for x in res.facts} == {"2023"}, q
            else:
                latest = await _latest_per_company(rt)
                assert set(used) == latest, (q, sorted(used), sorted(latest))
            head, listing = res.answer.split("\n", 2)[:2]
            assert head.endswith(f"{res.facts[0].label}{', 2023' if '2023' in q else ''}, over 3 companies:"), head
            assert listing.startswith(res.facts[0].label.capitalize()), res.answer[:120]


async def _doc_meta(rt: Any, ids: Any) -> dict[int, dict[str, Any]]:
    import json

    rows = await rt.pool.fetch("SELECT id, metadata FROM documents WHERE id = ANY($1::bigint[])", list(ids))
    return {r["id"]: json.loads(r["metadata"]) if isinstance(r["metadata"], str) else dict(r["metadata"])
            for r in rows}


async def _latest_per_company(rt: Any) -> set[int]:
    """Each company's document with the latest period end among those with statement facts."""
    rows = await rt.pool.fetch(
        "SELECT DISTINCT ON (d.metadata ->> 'company') d.id FROM documents d "
        "WHERE EXISTS (SELECT 1 FROM facts f WHERE f.document_id = d.id) "
        "ORDER BY d.metadata ->> 'company', d.metadata ->> 'period_end_date' DESC")
    return {r["id"] for r in rows}
