"""Signals a routing strategy composes, each read over the query's state: chunk hits and DocScore, the
description shortlist, and the metadata conditions the question states."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kb.core.text import tokenize
from router import store
from router.metadata import MetadataMatch, match_question
from router.policy import ROUTING
from router.reading import fact_condition
from router.scoring import aggregate_score, min_max_array
from router.state import QueryState
from router.types import DocCandidate


async def chunk_hits(state: QueryState, within: Sequence[int] | None, k: int) -> list[tuple[int, int, float, float]]:
    """(chunk_id, doc_id, dense sim, IDF-weighted share of query terms matched) for the best chunks,
    dense ∪ full-text."""
    terms = state.terms
    # a whole collection: the HNSW index; a few documents: an exact scan of their chunks
    scope: dict[str, Any] = {"collection_id": state.collection_id} if within is None else {"doc_ids": list(within)}
    async with state.pool.acquire() as conn, conn.transaction():
        await store.vector_session(conn, ef_search=state.settings.hnsw_ef_search, k=k,
                                   iterative=state.services.iterative_scan)
        dense = await store.dense_chunks(conn, state.qvec, k, scan="index" if within is None else "exact", **scope)
        text = await store.text_chunks(conn, terms, state.qvec, k, **scope)
    ft = {r["id"]: float(r["score"]) / terms.total for r in text}
    out: dict[int, tuple[int, int, float, float]] = {}
    for r in dense:
        out[r["id"]] = (r["id"], r["document_id"], float(r["sim"]), ft.get(r["id"], 0.0))
    for r in text:
        out.setdefault(r["id"], (r["id"], r["document_id"], float(r["sim"]), ft[r["id"]]))
    return list(out.values())


async def doc_scores(state: QueryState, within: Sequence[int] | None = None) -> dict[int, tuple[float, int]]:
    """DocScore = sum(chunk scores) / sqrt(N + 1) over the top chunks (pgvector cosine plus full-text hits),
    with the number of hits, per document."""
    total = state.catalog.stamp.chunks
    k = min(state.settings.semantic_top_k, max(20, total // 20))  # small collections: fewer hits
    hits = await chunk_hits(state, within, k)
    w_d, w_b = state.settings.dense_weight, state.settings.bm25_weight
    per_doc: dict[int, list[float]] = {}
    for _, doc_id, sim, ft in hits:
        per_doc.setdefault(doc_id, []).append(w_d * max(sim, 0.0) + w_b * ft)
    return {d: (aggregate_score(v), len(v)) for d, v in per_doc.items()}


async def description_shortlist(state: QueryState, within: Sequence[int] | None, n: int) -> list[DocCandidate]:
    """The ``n`` documents whose description (embedding) and name/title/description (BM25) match best."""
    index = state.catalog.descriptions
    ids = np.asarray(index.ids, dtype=np.int64)
    allowed = np.isin(ids, np.fromiter(within, dtype=np.int64)) if within is not None else np.ones(len(ids), bool)
    near, sims = index.nearest(state.qvec, max(n * 4, 200))
    dense = np.zeros(len(ids))
    dense[near[allowed[near]]] = min_max_array(sims[allowed[near]])
    q = tokenize(state.question)
    raw = index.bm25.get_scores(q) if (index.bm25 is not None and q) else np.zeros(len(ids))
    positions = np.flatnonzero(allowed)
    bm, dense = min_max_array(np.maximum(raw[positions], 0.0)), dense[positions]
    w = ROUTING.description_dense
    scores = w * dense + (1 - w) * bm
    out = []
    for j in np.lexsort((ids[positions], -scores))[:n]:  # best first, then by id
        i, s = positions[j], float(scores[j])
        out.append(DocCandidate(int(ids[i]), index.names[i], round(s, 4), f"description match {s:.3f} (dense "
                                f"{float(dense[j]):.2f}, bm25 {float(bm[j]):.2f})"))
    return out


async def metadata_match(state: QueryState) -> MetadataMatch:
    """The metadata conditions the question states (offline rules; with an LLM, its validated proposal)."""
    screen = fact_condition(state.reading) if state.reading is not None else None
    lines: list[str] = []
    if not state.chat.offline:  # the LLM reads the question too: the collection's printed lines nearest to it
        lines = [r["printed"] for r in await store.nearest_lines(state.pool, state.collection_id, state.qvec,
                                                                 PROMPT_LINES, iterative=state.services.iterative_scan)]
    return await match_question(state.question, state.catalog.known, state.chat, screen, lines)


PROMPT_LINES = 12
"""The collection's printed lines nearest to the question that the metadata prompt lists (with an LLM)."""
