"""The measuring loop of ``kb bench latency``: every strategy per question, rotated, beside a pgvector top-10;
and a corpus-wide facts question answered whole (retrieval and offline synthesis)."""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np
import structlog

from kb.bench.latency_types import FactsLatency, Stat, StrategyLatency
from kb.bench.synthetic import SyntheticQuestion, facts_question, list_question
from router.store import vector_session
from router.types import STRATEGIES

log = structlog.get_logger("kb.bench.measure")

STAGES: tuple[str, ...] = ("route", "tree_search", "retrieve")
LIST20 = "auto, list over 20 docs"
"""A list question ("Which of these companies …?") routed to 20 documents, each with its sub-question."""
LIST100 = "auto, list over 100 docs"
"""The same list question routed to 100 documents (issue 26: past the API's ``top_docs`` limit of 20, as a
catalog-wide list would be)."""
LISTS = {LIST20: 20, LIST100: 100}
MEASURED: tuple[str, ...] = (*STRATEGIES, LIST20, LIST100)
FACTS_RANK = "auto, corpus-wide facts question"
"""A ranking question over a vocabulary measure that names no company ("Which companies have the highest
revenue in 2023?"), answered whole: ``QueryPipeline.run`` (retrieval with the facts stage over every document
of the collection, then offline synthesis), request defaults (top_docs and top_k unset)."""
FACTS_STAGES: tuple[str, ...] = ("route", "facts", "tree_search", "retrieve", "synthesize")
ROTATION: tuple[str, ...] = (*MEASURED, FACTS_RANK)

SQL_REFERENCE = "SELECT id FROM chunks ORDER BY embedding <=> $1 LIMIT 10"


@dataclass(frozen=True)
class QuerySample:
    strategy: str
    wall_ms: float
    stages: dict[str, float]
    docs: int
    chunks: int
    company_hit: bool | None
    question: str = ""
    facts_docs: int = 0  # documents whose facts the answer used (FACTS_RANK)
    facts_used: int = 0
    from_facts: bool = False  # the answer was computed from facts


class RunTimings:
    """``QueryPipeline``'s observer (``observe=``): the stage timings (ms) of the last ``run``."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}

    def __call__(self, ms: Any, usage: Any) -> None:
        self.last = dict(ms)


def _company_hit(q: SyntheticQuestion, doc_names: Sequence[str]) -> bool | None:
    if q.company is None:
        return None
    slug = re.sub(r"[^a-z0-9]+", "-", q.company.lower()).strip("-")
    return any(n.startswith(slug + "_") for n in doc_names)


async def measure(pipeline: Any, pool: asyncpg.Pool, collection: str, questions: Sequence[SyntheticQuestion],
                  warmup: int, ef_search: int, embed: Callable[[list[str]], np.ndarray],
                  run_timings: RunTimings) -> tuple[list[QuerySample], list[float]]:
    """Warm up, then time every strategy and the corpus-wide facts question (rotated order per question) and
    the plain pgvector reference. ``run_timings`` is the pipeline's observer."""
    from kb.core.collections import lookup_collection_id
    from router.types import Admitted, QueryRequest

    collection_id = await lookup_collection_id(pipeline.pool, collection)

    async def whole(q: SyntheticQuestion) -> QuerySample:
        text = facts_question(q)
        req = QueryRequest(query=text, collection=collection, strategy="auto")
        t = time.perf_counter()
        res = await pipeline.run(req)
        wall = (time.perf_counter() - t) * 1000
        ms = run_timings.last
        return QuerySample(FACTS_RANK, wall, {k: ms.get(k, math.nan) for k in FACTS_STAGES}, len(res.documents),
                           len(res.citations), None, question=text, facts_docs=len({f.doc_id for f in res.facts}),
                           facts_used=len(res.facts), from_facts=bool(res.facts))

    async def one(q: SyntheticQuestion, strategy: str) -> QuerySample:
        if strategy == FACTS_RANK:
            return await whole(q)
        if strategy in LISTS:  # past the request bounds on purpose: admitted as it is (LIST100)
            req = QueryRequest(query=list_question(q), collection=collection, strategy="auto",
                               top_docs=LISTS[strategy], top_k=5)
        else:
            req = QueryRequest(query=q.text, collection=collection, strategy=strategy, top_docs=3, top_k=5)
        t = time.perf_counter()
        out = await pipeline.retrieve(Admitted(req=req, collection_id=collection_id))
        wall = (time.perf_counter() - t) * 1000
        return QuerySample(strategy, wall, {k: out.timings_ms.get(k, math.nan) for k in STAGES},
                           len(out.routing.documents), len(out.chunks),
                           None if strategy in LISTS else _company_hit(q, [d.name for d in out.routing.documents]))

    async def reference(vec: np.ndarray) -> float:
        t = time.perf_counter()
        async with pool.acquire() as conn, conn.transaction():
            await vector_session(conn, ef_search=ef_search, k=10, iterative=False)
            rows = await conn.fetch(SQL_REFERENCE, vec)
        if len(rows) != 10:
            log.warning("bench.reference_short", rows=len(rows))
        return (time.perf_counter() - t) * 1000

    vecs = embed([q.text for q in questions])
    for i, q in enumerate(questions[:warmup]):
        for s in ROTATION:
            await one(q, s)
        await reference(vecs[i])
    samples: list[QuerySample] = []
    ref: list[float] = []
    measured = list(questions[warmup:])
    for i, q in enumerate(measured):
        order = ROTATION[i % len(ROTATION):] + ROTATION[: i % len(ROTATION)]
        for s in order:
            samples.append(await one(q, s))
        ref.append(await reference(vecs[warmup + i]))
        if (i + 1) % 10 == 0:
            log.info("bench.latency_progress", queries=i + 1, of=len(measured))
    return samples, ref


def summarize(samples: Sequence[QuerySample]) -> list[StrategyLatency]:
    out = []
    for s in MEASURED:
        rows = [x for x in samples if x.strategy == s]
        hits = [x.company_hit for x in rows if x.company_hit is not None]
        out.append(StrategyLatency(
            strategy=s, total=Stat.of([x.wall_ms for x in rows]),
            stages={st: Stat.of([x.stages[st] for x in rows]) for st in STAGES},
            docs_routed=round(statistics.fmean(x.docs for x in rows), 2) if rows else 0.0,
            chunks_returned=round(statistics.fmean(x.chunks for x in rows), 2) if rows else 0.0,
            company_hit_rate=round(sum(hits) / len(hits), 3) if hits else None,
        ))
    return out


def summarize_facts(samples: Sequence[QuerySample]) -> FactsLatency:
    """The corpus-wide facts question: whole-query time, per stage, and how many documents' facts it used."""
    rows = [x for x in samples if x.strategy == FACTS_RANK]
    return FactsLatency(
        total=Stat.of([x.wall_ms for x in rows]),
        stages={st: Stat.of([x.stages[st] for x in rows]) for st in FACTS_STAGES},
        answered_from_facts=round(sum(x.from_facts for x in rows) / len(rows), 3) if rows else 0.0,
        docs_routed=round(statistics.fmean(x.docs for x in rows), 1) if rows else 0.0,
        facts_docs=round(statistics.fmean(x.facts_docs for x in rows), 1) if rows else 0.0,
        facts_docs_min=min((x.facts_docs for x in rows), default=0),
        facts_used=round(statistics.fmean(x.facts_used for x in rows), 1) if rows else 0.0,
        questions=tuple(sorted({x.question for x in rows})),
    )


async def reference_plan(pool: asyncpg.Pool, vec: np.ndarray, ef_search: int) -> str:
    async with pool.acquire() as conn, conn.transaction():
        await vector_session(conn, ef_search=ef_search, k=10, iterative=False)
        rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + SQL_REFERENCE, vec)
    return re.sub(r"'\[[^\]]*\]'::vector", "$1", "\n".join(r[0] for r in rows))
