"""Document routing strategies behind one interface: metadata, semantic (DocScore), description, auto."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import numpy as np
import structlog
from rank_bm25 import BM25Okapi

from kb.collections import CollectionStamp, collection_stamp
from kb.errors import LLMError
from kb.providers import ChatModel
from kb.providers.steps import ask
from kb.settings import RetrievalSettings
from kb.text import tokenize
from router import store
from router.metadata import (
    COMPANY_KEYS,
    MetadataMatch,
    conditions_from_filters,
    doc_year,
    known_values,
    match_question,
    period_prior,
    question_period,
)
from router.policy import ROUTING
from router.prompts import DESCRIPTION, description_prompt
from router.scoring import aggregate_score, min_max
from router.store import QueryTerms
from router.types import STRATEGIES, DocCandidate, RoutingResult

log = structlog.get_logger("router.routing")

@dataclass
class RouteContext:
    """What every strategy may use."""

    pool: asyncpg.Pool
    chat: ChatModel
    settings: RetrievalSettings
    collection_id: int
    question: str
    query_vec: np.ndarray
    top_docs: int
    filters: dict[str, Any]
    iterative_scan: bool = True
    terms: QueryTerms | None = None


class Router(Protocol):
    name: str

    async def route(self, ctx: RouteContext, within: Sequence[int] | None = None) -> RoutingResult: ...


async def chunk_hits(ctx: RouteContext, within: Sequence[int] | None, k: int) -> list[tuple[int, int, float, float]]:
    """(chunk_id, doc_id, dense sim, IDF-weighted share of query terms matched) for the best chunks,
    dense ∪ full-text."""
    terms = ctx.terms or await store.query_terms(ctx.pool, ctx.collection_id, ctx.question)
    # a whole collection: the HNSW index; a few documents: an exact scan of their chunks
    scope: dict[str, Any] = {"collection_id": ctx.collection_id} if within is None else {"doc_ids": list(within)}
    async with ctx.pool.acquire() as conn, conn.transaction():
        await store.vector_session(conn, ef_search=ctx.settings.hnsw_ef_search, k=k, iterative=ctx.iterative_scan)
        dense = await store.dense_chunks(conn, ctx.query_vec, k, scan="index" if within is None else "exact", **scope)
        text = await store.text_chunks(conn, terms, ctx.query_vec, k, **scope)
    ft = {r["id"]: float(r["score"]) / terms.total for r in text}
    out: dict[int, tuple[int, int, float, float]] = {}
    for r in dense:
        out[r["id"]] = (r["id"], r["document_id"], float(r["sim"]), ft.get(r["id"], 0.0))
    for r in text:
        out.setdefault(r["id"], (r["id"], r["document_id"], float(r["sim"]), ft[r["id"]]))
    return list(out.values())


async def _names(pool: asyncpg.Pool, ids: Sequence[int]) -> dict[int, str]:
    return {d: f.name for d, f in (await store.doc_fields(pool, ids)).items()}


class SemanticRouter:
    """Top chunks by pgvector cosine (plus full-text hits) grouped per document:
    DocScore = sum(chunk scores) / sqrt(N + 1)."""

    name = "semantic"

    async def scores(self, ctx: RouteContext, within: Sequence[int] | None = None) -> dict[int, tuple[float, int]]:
        total = await store.collection_chunk_count(ctx.pool, ctx.collection_id)
        k = min(ctx.settings.semantic_top_k, max(20, total // 20))  # small collections: fewer hits
        hits = await chunk_hits(ctx, within, k)
        w_d, w_b = ctx.settings.dense_weight, ctx.settings.bm25_weight
        per_doc: dict[int, list[float]] = {}
        for _, doc_id, sim, ft in hits:
            per_doc.setdefault(doc_id, []).append(w_d * max(sim, 0.0) + w_b * ft)
        return {d: (aggregate_score(v), len(v)) for d, v in per_doc.items()}

    async def route(self, ctx: RouteContext, within: Sequence[int] | None = None) -> RoutingResult:
        scores = await self.scores(ctx, within)
        names = await _names(ctx.pool, list(scores))
        ranked = sorted(scores.items(), key=lambda kv: -kv[1][0])
        cands = tuple(
            DocCandidate(d, names.get(d, str(d)), round(s, 4), f"DocScore {s:.3f} from {n} chunk hits")
            for d, (s, n) in ranked
        )
        return RoutingResult(strategy_used=self.name, documents=cands[: ctx.top_docs], candidates=cands[:20])


@dataclass(frozen=True)
class DescriptionIndex:
    """BM25 over ``name + title + description`` of every document of a collection (cached)."""

    ids: list[int]
    names: list[str]
    bm25: BM25Okapi | None


_desc_cache: dict[int, tuple[CollectionStamp, DescriptionIndex]] = {}
_desc_locks: dict[int, asyncio.Lock] = {}


async def description_index(pool: asyncpg.Pool, collection_id: int) -> DescriptionIndex:
    """Built once per collection version, so a 10,000-document collection costs one scan per change."""
    version = await collection_stamp(pool, collection_id)
    cached = _desc_cache.get(collection_id)
    if cached and cached[0] == version:
        return cached[1]
    lock = _desc_locks.setdefault(collection_id, asyncio.Lock())
    async with lock:  # one build per change, however many queries arrive meanwhile
        cached = _desc_cache.get(collection_id)
        if cached and cached[0] == version:
            return cached[1]
        rows = await store.all_descriptions(pool, collection_id)
        index = await asyncio.to_thread(_build_description_index, rows)
        _desc_cache[collection_id] = (version, index)
        return index


def _build_description_index(rows: Sequence[asyncpg.Record]) -> DescriptionIndex:
    corpus = [tokenize(f"{r['name']} {r['title']} {r['description']}") or ["\u2205"] for r in rows]
    return DescriptionIndex(ids=[r["id"] for r in rows], names=[r["name"] for r in rows],
                            bm25=BM25Okapi(corpus) if corpus else None)


class DescriptionRouter:
    """Shortlist by description embedding + BM25 (works for 10,000+ documents), then the LLM picks."""

    name = "description"

    async def shortlist(self, ctx: RouteContext, within: Sequence[int] | None, n: int) -> list[DocCandidate]:
        rows = await store.nearest_descriptions(ctx.pool, ctx.query_vec, ctx.collection_id, max(n * 4, 200))
        index = await description_index(ctx.pool, ctx.collection_id)
        allowed = set(within) if within is not None else None
        positions = [i for i, d in enumerate(index.ids) if allowed is None or d in allowed]
        q = tokenize(ctx.question)
        raw = index.bm25.get_scores(q) if (index.bm25 is not None and q) else np.zeros(len(index.ids))
        bm_norm = min_max([max(0.0, float(raw[i])) for i in positions])
        bm_by_id = {index.ids[i]: v for i, v in zip(positions, bm_norm, strict=True)}
        dense_vals = {r["id"]: float(r["sim"]) for r in rows if allowed is None or r["id"] in allowed}
        d_norm = dict(zip(dense_vals, min_max(list(dense_vals.values())), strict=True))
        scored = []
        for i in positions:
            d = index.ids[i]
            w = ROUTING.description_dense
            s = w * d_norm.get(d, 0.0) + (1 - w) * bm_by_id.get(d, 0.0)
            scored.append((s, d, index.names[i]))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [DocCandidate(d, name, round(s, 4), f"description match {s:.3f} (dense {d_norm.get(d, 0.0):.2f}, "
                             f"bm25 {bm_by_id.get(d, 0.0):.2f})") for s, d, name in scored[:n]]

    async def route(self, ctx: RouteContext, within: Sequence[int] | None = None) -> RoutingResult:
        shortlist = await self.shortlist(ctx, within, ctx.settings.description_shortlist)
        if ctx.chat.offline or not shortlist:
            return RoutingResult(strategy_used=self.name, documents=tuple(shortlist[: ctx.top_docs]),
                                 candidates=tuple(shortlist[:20]), notes=("offline: description shortlist ranking",))
        descs = {d: f.description for d, f in (await store.doc_fields(ctx.pool, [c.doc_id for c in shortlist])).items()}
        try:
            reply = await ask(ctx.chat, DESCRIPTION, description_prompt(ctx.question, shortlist, descs, ctx.top_docs))
            by_id = {str(c.doc_id): c for c in shortlist}
            chosen = [by_id[str(p)] for p in reply.answer if str(p) in by_id]
        except LLMError as exc:
            log.warning("router.description_llm_failed", error=str(exc))
            return RoutingResult(strategy_used=self.name, documents=tuple(shortlist[: ctx.top_docs]),
                                 candidates=tuple(shortlist[:20]), notes=("LLM failed: offline shortlist",),
                                 llm_calls=1)
        docs = tuple(DocCandidate(c.doc_id, c.name, c.score, "chosen by LLM from descriptions")
                     for c in dict.fromkeys(chosen))[: ctx.top_docs]
        return RoutingResult(strategy_used=self.name, documents=docs, candidates=tuple(shortlist[:20]), llm_calls=1)


class MetadataRouter:
    """Documents matching the validated conditions (explicit filters always applied), best-first by DocScore."""

    name = "metadata"

    async def conditions(self, ctx: RouteContext) -> MetadataMatch:
        kv = await known_values(ctx.pool, ctx.collection_id)
        return await match_question(ctx.question, kv, ctx.chat)

    async def route(self, ctx: RouteContext, within: Sequence[int] | None = None) -> RoutingResult:
        match = await self.conditions(ctx)
        conds, explanation, calls = match.conditions, match.explanation, match.llm_calls
        explicit = conditions_from_filters(ctx.filters)
        docs: list[tuple[int, str]] = []
        attempt = list(conds)
        while attempt and not docs:  # relax period/type conditions (last first) until something matches
            docs = await store.run_filter(ctx.pool, ctx.collection_id, attempt)
            if not docs:
                attempt.pop()
        if conds and len(attempt) < len(conds):
            explanation += f" (relaxed to {len(attempt)} of {len(conds)} conditions)"
        if not conds and within is not None:
            docs = list((await _names(ctx.pool, within)).items())
        if within is not None:
            allowed = set(within)
            docs = [d for d in docs if d[0] in allowed]
        scores = await SemanticRouter().scores(ctx, [d for d, _ in docs]) if docs else {}
        # within the matches: the same period/type prior as auto, then DocScore
        period = question_period(ctx.question)
        metas = {d: f.metadata for d, f in (await store.doc_fields(ctx.pool, [d for d, _ in docs])).items()}
        years = sorted({y for m in metas.values() if (y := doc_year(period, m)) is not None})
        company = any(c.key in COMPANY_KEYS for c in conds)
        prior = {d: period_prior(period, metas.get(d, {}), years, same_entity=company)[0] for d, _ in docs}
        ranked = sorted(docs, key=lambda d: (-prior[d[0]], -scores.get(d[0], (0.0, 0))[0], d[0]))
        cands = tuple(DocCandidate(d, n, round(scores.get(d, (0.0, 0))[0], 4),
                                   f"metadata: {explanation}" + (f"; prior +{prior[d]:.2f}" if prior[d] else ""))
                      for d, n in ranked)
        return RoutingResult(strategy_used=self.name, documents=cands[: ctx.top_docs], candidates=cands[:20],
                             conditions=(*explicit, *conds), notes=(explanation,), llm_calls=calls,
                             scope_hint=match.scope)




class AutoRouter:
    """A confident metadata filter (company/organisation) narrows the candidates; period and type
    conditions boost; DocScore ranks; descriptions break ties and rescue when nothing matched."""

    name = "auto"

    async def route(self, ctx: RouteContext, within: Sequence[int] | None = None) -> RoutingResult:
        notes: list[str] = []
        match = await MetadataRouter().conditions(ctx)
        conds, explanation, calls = match.conditions, match.explanation, match.llm_calls
        hard = tuple(c for c in conds if c.key in COMPANY_KEYS)
        candidate_ids: list[int] | None = list(within) if within is not None else None
        if within is not None:
            notes.append(f"explicit filters → {len(within)} documents")
        if hard:
            rows = await store.run_filter(ctx.pool, ctx.collection_id, hard)
            allowed = set(candidate_ids) if candidate_ids is not None else None
            ids = [d for d, _ in rows if allowed is None or d in allowed]
            if ids:
                candidate_ids = ids
                notes.append(f"metadata ({'; '.join(f'{c.key} in {c.value}' for c in hard)}) → {len(ids)} candidates")
            else:
                notes.append("metadata company filter matched nothing; not narrowed")
        narrowed = bool(hard) and candidate_ids is not None
        scores = await SemanticRouter().scores(ctx, candidate_ids) if candidate_ids is None or candidate_ids else {}
        desc = await DescriptionRouter().shortlist(ctx, candidate_ids, max(ctx.top_docs * 3, 10))
        desc_score = {c.doc_id: c.score for c in desc}
        ids = set(scores) | set(desc_score)
        if candidate_ids is not None:
            ids = (ids & set(candidate_ids)) | set(candidate_ids[:50])
        period = question_period(ctx.question)
        metas = {d: f.metadata for d, f in (await store.doc_fields(ctx.pool, list(ids))).items()}
        years = sorted({y for m in metas.values() if (y := doc_year(period, m)) is not None})
        ends = [str(m["period_end_date"]) for m in metas.values() if m.get("period_end_date")]
        latest_end = max(ends) if ends else None
        if period.years or period.quarters or period.doc_types:
            notes.append(f"period prior: years {list(period.years)}, quarters {list(period.quarters)}, "
                         f"types {list(period.doc_types)}")
        top_sem = max((v for v, _ in scores.values()), default=0.0) or 1.0
        sem_norm = {d: v / top_sem for d, (v, _) in scores.items()}  # ratios survive, unlike min-max
        combined = []
        for d in ids:
            boost, boost_why = period_prior(period, metas.get(d, {}), years, latest_end, same_entity=narrowed)
            # the prior outranks content similarity: a stated period or type decides, similarity breaks ties
            s = (ROUTING.auto_semantic * sem_norm.get(d, 0.0) + ROUTING.auto_description * desc_score.get(d, 0.0)
                 + ROUTING.prior_weight * boost)
            why = [f"DocScore {scores[d][0]:.3f} ({scores[d][1]} hits)" if d in scores else "no chunk hits"]
            if d in desc_score:
                why.append(f"description {desc_score[d]:.2f}")
            if hard and candidate_ids is not None:
                why.append("metadata match")
            if boost_why:
                why.append(f"prior +{boost:.2f} ({boost_why})")
            combined.append((d, s, ", ".join(why)))
        combined.sort(key=lambda x: (-x[1], x[0]))
        names = await _names(ctx.pool, [d for d, _, _ in combined])
        cands = tuple(DocCandidate(d, names.get(d, str(d)), round(s, 4), why) for d, s, why in combined)
        if not cands:
            notes.append("nothing matched: description shortlist over the whole collection")
            cands = tuple(await DescriptionRouter().shortlist(ctx, within, ctx.top_docs))
        if not conds:
            notes.append(explanation)
        return RoutingResult(strategy_used=self.name, documents=cands[: ctx.top_docs], candidates=cands[:20],
                             conditions=conds, notes=tuple(notes), llm_calls=calls, scope_hint=match.scope)


ROUTERS: dict[str, type] = {r.name: r for r in (AutoRouter, MetadataRouter, SemanticRouter, DescriptionRouter)}
if tuple(ROUTERS) != STRATEGIES:  # a strategy is added in router.types.Strategy and registered here
    raise ImportError(f"router.routing.ROUTERS {tuple(ROUTERS)} differ from router.types.STRATEGIES {STRATEGIES}")


def get_router(strategy: str) -> Router:
    return ROUTERS[strategy]()
