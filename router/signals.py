"""Signals a routing strategy composes, each read over the query's state: chunk hits and DocScore, the
description shortlist, and the metadata conditions the question states."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kb.text import tokenize
from router import store
from router.metadata import MetadataMatch, match_question
from router.policy import ROUTING
from router.scoring import aggregate_score, min_max
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
    nearest = index.nearest(state.qvec, max(n * 4, 200))
    ids = np.asarray(index.ids, dtype=np.int64)
    mask = np.isin(ids, np.asarray(list(within), dtype=np.int64)) if within is not None else np.ones(len(ids), bool)
    positions = np.flatnonzero(mask)
    q = tokenize(state.question)
    raw = index.bm25.get_scores(q) if (index.bm25 is not None and q) else np.zeros(len(ids))
    bm = _min_max(np.maximum(raw[positions], 0.0))
    allowed = set(ids[positions].tolist()) if within is not None else None
    dense_vals = {d: s for d, s in nearest if allowed is None or d in allowed}
    d_norm = dict(zip(dense_vals, min_max(list(dense_vals.values())), strict=True))
    dense = np.zeros(len(positions))
    if d_norm:  # ids are in ascending order (the catalog reads them by id)
        dense[np.searchsorted(ids[positions], np.fromiter(d_norm, dtype=np.int64))] = list(d_norm.values())
    w = ROUTING.description_dense
    scores = w * dense + (1 - w) * bm
    top = np.lexsort((ids[positions], -scores))[:n]  # best first, then by id
    out = []
    for j in top:
        d, s = int(ids[positions[j]]), float(scores[j])
        out.append(DocCandidate(d, index.names[positions[j]], round(s, 4), f"description match {s:.3f} (dense "
                                f"{float(dense[j]):.2f}, bm25 {float(bm[j]):.2f})"))
    return out


def _min_max(values: np.ndarray) -> np.ndarray:
    """``scoring.min_max`` over an array (the same floats)."""
    if not len(values):
        return values
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12:
        return np.full(len(values), 1.0 if hi > 0 else 0.0)
    return (values - lo) / (hi - lo)


async def metadata_match(state: QueryState) -> MetadataMatch:
    """The metadata conditions the question states (offline rules; with an LLM, its validated proposal)."""
    return await match_question(state.question, state.catalog.known, state.chat)
