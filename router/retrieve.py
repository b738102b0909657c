"""Hybrid in-node retrieval (dense + BM25, min-max, weighted fusion) and optional cross-encoder rerank."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol

import asyncpg
import msgspec
import numpy as np

from kb.core.settings import RetrievalSettings
from kb.core.text import cited_span, count_tokens
from router import store
from router.doccache import DocReads
from router.scoring import bm25_scores, fuse, min_max
from router.types import NodePick, RetrievedChunk


class Reranker(Protocol):
    model_id: str

    def score(self, query: str, texts: list[str]) -> list[float]: ...


async def retrieve_in_nodes(reads: DocReads, doc_name: str, picks: Sequence[NodePick],
                            embed_query: Mapping[str, np.ndarray], *, top_k: int,
                            settings: RetrievalSettings) -> list[RetrievedChunk]:
    """For each (node, sub_query) of one document: dense + BM25 over that node's chunks, fused with the
    settings' weights; top_k per node.

    The document's chunks and vectors come from the process's cache (``router.doccache``); dense scores per
    distinct sub-query are computed in Python from the stored vectors (all float32, normalised), so nodes sharing
    a sub-query cost nothing extra.
    """
    if not picks:
        return []
    doc_id = picks[0].doc_id
    rows, vectors = await reads.node_chunks(doc_id, list(dict.fromkeys(p.node_id for p in picks)))
    by_node: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_node.setdefault(r["node_id"], []).append(i)
    out: list[RetrievedChunk] = []
    for pick in picks:
        index = by_node.get(pick.node_id, [])
        if not index:
            continue
        node_rows = [rows[i] for i in index]
        qvec = embed_query[pick.sub_query]
        texts = [r["text"] for r in node_rows]
        dense = [float(x) for x in vectors[index] @ qvec]
        bm = bm25_scores(pick.sub_query, texts)
        fused = fuse(dense, bm, settings.dense_weight, settings.bm25_weight)
        order = sorted(range(len(node_rows)), key=lambda i: -fused[i])[:top_k]
        for i in order:
            r = node_rows[i]
            page = r["page"]
            pages = cited_span(page, r["page_end"], r["start_index"], r["end_index"])
            out.append(RetrievedChunk(
                chunk_id=r["id"], doc_id=doc_id, doc_name=doc_name, node_id=r["node_id"],
                section_path=r["heading_path"], text=r["text"], page=page, pages=pages, unit=r["unit"],
                dense=round(dense[i], 4), bm25=round(bm[i], 4), fused=round(fused[i], 4), score=fused[i],
                statement=r["statement"],
            ))
    return out


async def direct_hits(reads: DocReads, doc_ids: Sequence[int], qvec: np.ndarray, names: dict[int, str],
                      *, limit: int) -> list[RetrievedChunk]:
    """The best chunks by cosine inside the routed documents (exact: each document's nearest chunks, read once
    per query and shared with tree search)."""
    if not doc_ids:
        return []
    rows = await reads.nearest_rows(doc_ids, qvec, limit)
    return _dense_rows([r for r, _ in rows], names, "direct", [sim for _, sim in rows])


async def statement_hits(pool: asyncpg.Pool, doc_ids: Sequence[int], kinds: frozenset[str], qvec: np.ndarray,
                         names: dict[int, str], *, limit: int) -> list[RetrievedChunk]:
    """Chunks on the pages of the financial statements a question names, inside some documents."""
    if not doc_ids or not kinds:
        return []
    return _dense_rows(await store.statement_chunks(pool, doc_ids, sorted(kinds), qvec, limit), names, "statement")


def _dense_rows(rows: Sequence[asyncpg.Record], names: dict[int, str], source: str,
                sims: Sequence[float] | None = None) -> list[RetrievedChunk]:
    out = []
    for i, r in enumerate(rows):
        page = r["page"]
        pages = cited_span(page, r["page_end"], r["start_index"], r["end_index"])
        dense = float(r["dense"]) if sims is None else sims[i]
        out.append(RetrievedChunk(
            chunk_id=r["id"], doc_id=r["document_id"], doc_name=names.get(r["document_id"], ""), node_id=r["node_id"],
            section_path=r["heading_path"], text=r["text"], page=page, pages=pages, unit=r["unit"],
            dense=round(dense, 4), bm25=0.0, fused=round(dense, 4), score=dense, source=source,
            statement=r["statement"],
        ))
    return out


def rank_across_nodes(question: str, chunks: Sequence[RetrievedChunk], node_prior: dict[tuple[int, str], float],
                      dense_weight: float, bm25_weight: float,
                      doc_weight: dict[int, float] | None = None, *, relevance_share: float = 0.8,
                      node_prior_share: float = 0.2, statements: frozenset[str] = frozenset(),
                      statement_share: float = 0.0) -> list[RetrievedChunk]:
    """Order the union of per-node results on one scale: dense and BM25 (question) over the pool,
    plus the node's tree-search prior, plus ``statement_share`` for a chunk on a page of a financial
    statement the question names (``statements``), scaled by how strongly the document was routed
    (shares: the ranking policy's)."""
    if not chunks:
        return []
    doc_weight = doc_weight or {}
    dense = min_max([c.dense for c in chunks])
    bm = min_max(bm25_scores(question, [c.text for c in chunks]))
    out = []
    for i, c in enumerate(chunks):
        prior = node_prior.get((c.doc_id, c.node_id), 0.0)
        relevance = dense_weight * dense[i] + bm25_weight * bm[i]
        named = statement_share if c.statement and c.statement in statements else 0.0
        s = (relevance_share * relevance + node_prior_share * prior + named) * doc_weight.get(c.doc_id, 1.0)
        out.append((s, c))
    out.sort(key=lambda x: -x[0])
    return [msgspec.structs.replace(c, score=round(s, 4)) for s, c in out]




async def whole_sections(pool: asyncpg.Pool, ranked: Sequence[RetrievedChunk], chosen: set[tuple[int, str]],
                         max_tokens: int) -> list[RetrievedChunk]:
    """Chunks of a chosen node whose own text has at most ``max_tokens`` tokens become one piece holding
    the whole text (spec 003: the full semantic unit), at the place of its best chunk, cited with the
    node's pages."""
    by_doc: dict[int, set[str]] = {}
    for doc_id, node_id in {(c.doc_id, c.node_id) for c in ranked if (c.doc_id, c.node_id) in chosen}:
        by_doc.setdefault(doc_id, set()).add(node_id)
    whole: dict[tuple[int, str], asyncpg.Record] = {}
    for doc_id, nodes in by_doc.items():
        for r in await store.node_texts(pool, doc_id, sorted(nodes)):
            if r["text"].strip() and count_tokens(r["text"]) <= max_tokens:
                whole[(doc_id, r["node_id"])] = r
    out: list[RetrievedChunk] = []
    done: set[tuple[int, str]] = set()
    for c in ranked:
        key = (c.doc_id, c.node_id)
        if key not in whole:
            out.append(c)
        elif key not in done:
            done.add(key)
            r = whole[key]
            out.append(msgspec.structs.replace(c, text=r["text"], page=r["start_index"],
                                               pages=(r["start_index"], r["end_index"]), unit=r["unit"],
                                               source="section"))
    return out


async def rerank(reranker: Reranker, question: str, chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """Cross-encoder scores replace the ordering (spec 001 §2.3)."""
    scores = await asyncio.to_thread(reranker.score, question, [c.text for c in chunks])
    ranked = sorted(zip(scores, chunks, strict=True), key=lambda x: -x[0])
    return [msgspec.structs.replace(c, rerank=round(s, 4), score=round(s, 4)) for s, c in ranked]
