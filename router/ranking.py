"""Ranking the candidates and selecting the evidence under the query's ``RankingPolicy``: document weights,
one scale over all candidates (per document by its sub-question for a multi-document question), the
optional cross-encoder, the LLM's chosen nodes first, pages diversified, each needed document's share."""

from __future__ import annotations

from dataclasses import dataclass

from router.policy import OFFLINE, RankingPolicy
from router.retrieve import Reranker, rank_across_nodes, rerank, whole_sections
from router.scope import allot_evidence
from router.state import Evidence, QueryState
from router.sufficiency import Judgement
from router.types import RetrievedChunk, RoutingResult, ScopePlan


@dataclass(frozen=True)
class Ranked:
    """The candidates in order (the evidence first) and the evidence handed to synthesis."""

    chunks: tuple[RetrievedChunk, ...]
    evidence: tuple[RetrievedChunk, ...]
    rerank_note: str
    rounds: tuple[Judgement, ...] = ()  # the sufficiency judgements that led here (LLM mode)


def doc_weights(routing: RoutingResult, floor: float = OFFLINE.doc_weight_floor) -> dict[int, float]:
    """Routed documents' weight for chunk ranking: floor + (1 − floor) · score / best score (by rank without
    scores)."""
    docs = routing.documents
    best = max((d.score for d in docs), default=0.0)
    if best <= 0:
        return {d.doc_id: floor + (1 - floor) / (1 + i) for i, d in enumerate(docs)}
    return {d.doc_id: floor + (1 - floor) * min(1.0, max(d.score, 0.0) / best) for d in docs}


def diversify_pages(ranked: list[RetrievedChunk]) -> list[RetrievedChunk]:
    """Best first, but a chunk whose pages are already covered by a better chunk of the same document waits
    until every page has had its turn (near-duplicates and overlapping windows do not fill the list)."""
    seen: set[tuple[int, int]] = set()
    first: list[RetrievedChunk] = []
    later: list[RetrievedChunk] = []
    for c in ranked:
        pages = {(c.doc_id, p) for p in range(c.pages[0], c.pages[1] + 1)} if c.pages[0] is not None else set()
        if pages and pages <= seen:
            later.append(c)
        else:
            first.append(c)
            seen |= pages
    return first + later


def select_evidence(ranked: list[RetrievedChunk], plan: ScopePlan, top_k: int,
                    pol: RankingPolicy = OFFLINE) -> tuple[list[RetrievedChunk], tuple[RetrievedChunk, ...]]:
    """(ranking with the evidence first, evidence for synthesis): the top ``top_k`` for one document, each
    needed document's share (``allot_evidence``) for a multi-document question; pages first diversified."""
    if pol.page_diversity:
        ranked = diversify_pages(ranked)
    if plan.scope.kind == "single":
        return ranked, tuple(ranked[:top_k])
    per_doc: dict[int, list[RetrievedChunk]] = {}
    for c in ranked:
        per_doc.setdefault(c.doc_id, []).append(c)
    evidence = tuple(allot_evidence(per_doc, plan.needed, ranked, top_k))
    in_evidence = {c.chunk_id for c in evidence}
    return [*evidence, *(c for c in ranked if c.chunk_id not in in_evidence)], evidence


async def rank(state: QueryState, ev: Evidence, routing: RoutingResult, reranker: Reranker | None) -> Ranked:
    """Rank what was gathered (LLM policy: chosen nodes first) and select the evidence."""
    assert state.plan is not None
    ranked, note = await _score(state, ev, routing, reranker)
    if state.policy.chosen_nodes_first:
        ranked = await _chosen_first(state, ranked, ev.chosen)
    ranked, evidence = select_evidence(ranked, state.plan, state.req.top_k, state.policy)
    return Ranked(chunks=tuple(ranked), evidence=evidence, rerank_note=note)


async def _score(state: QueryState, ev: Evidence, routing: RoutingResult,
                 reranker: Reranker | None) -> tuple[list[RetrievedChunk], str]:
    """One ranking over all chunks by the question, or (multi-document) each document's chunks by its own
    sub-question, merged by score; then the optional cross-encoder."""
    pol, req = state.policy, state.req
    weights = doc_weights(routing, pol.doc_weight_floor)
    shares = {"relevance_share": pol.relevance_share, "node_prior_share": pol.node_prior_share,
              "statements": state.statements, "statement_share": pol.statement_share}
    if not state.multi:
        w = state.settings.rank_dense_weight
        ranked = rank_across_nodes(state.asked, ev.chunks, ev.prior, w, 1 - w, weights, **shares)
    else:
        groups: dict[int, list[RetrievedChunk]] = {}
        for c in ev.chunks:
            groups.setdefault(c.doc_id, []).append(c)
        w = pol.multi_dense_weight
        ranked = sorted((c for d, group in groups.items()
                         for c in rank_across_nodes(state.doc_q[d], group, ev.prior, w, 1 - w, weights, **shares)),
                        key=lambda c: -c.score)
    use_rerank = req.rerank if req.rerank is not None else reranker is not None
    if not use_rerank:
        return ranked, "not requested"
    if reranker is None:
        return ranked, "skipped: no cross-encoder configured (KB_RERANK_MODEL)"
    if ranked:
        ranked = await _rerank(state, ranked, reranker)
    return ranked, f"cross-encoder {reranker.model_id}" if ranked else "not requested"


async def _rerank(state: QueryState, ranked: list[RetrievedChunk], reranker: Reranker) -> list[RetrievedChunk]:
    top_k = state.req.top_k
    if not state.multi:
        return await rerank(reranker, state.asked, ranked[: max(top_k * 4, 20)])
    per_doc: dict[int, list[RetrievedChunk]] = {}
    for c in ranked:
        per_doc.setdefault(c.doc_id, []).append(c)
    reranked = [c for d, group in per_doc.items()
                for c in await rerank(reranker, state.doc_q[d], group[: max(top_k, 8)])]
    return sorted(reranked, key=lambda c: -c.score)


async def _chosen_first(state: QueryState, ranked: list[RetrievedChunk],
                        rank_of: dict[tuple[int, str], tuple[int, int]]) -> list[RetrievedChunk]:
    """LLM policy: chunks of the nodes the model chose come first — by the model's node order, then the
    in-node fused score under the node's sub-query; small chosen nodes whole. A document whose tree search
    fell back offline (or chose nothing) keeps the offline order for its chunks; the rest fill."""
    if state.policy.whole_section_tokens:
        ranked = await whole_sections(state.pool, ranked, set(rank_of), state.policy.whole_section_tokens)
    chosen = [c for c in ranked if c.source in {"node", "section"} and (c.doc_id, c.node_id) in rank_of]
    chosen.sort(key=lambda c: (*rank_of[(c.doc_id, c.node_id)], -c.fused))
    ids = {c.chunk_id for c in chosen}
    return chosen + [c for c in ranked if c.chunk_id not in ids]
