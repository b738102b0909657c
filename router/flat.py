"""Flat baselines: top-k chunks over a whole collection with no routing and no tree.

What a user of a plain vector store gets, on the same chunks and embedder as the router:
``dense`` (pgvector cosine through the HNSW index), ``bm25`` (rank-bm25 over every chunk of the
collection with the shared tokenizer, cached in memory) and ``hybrid`` (min-max fusion of both).
The output is the router's ``RetrievedChunk``, ranked.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import asyncpg
import numpy as np
import structlog
from rank_bm25 import BM25Okapi

from kb.core.collections import CollectionStamp, collection_stamp, lookup_collection_id
from kb.core.db import supports_iterative_scan
from kb.core.errors import ValidationError
from kb.core.providers import Embedder
from kb.core.settings import RetrievalSettings
from kb.core.text import cited_span, tokenize
from router import store
from router.scoring import min_max
from router.types import FLAT_MODES, RetrievedChunk

log = structlog.get_logger("router.flat")




@dataclass(frozen=True)
class FlatOutcome:
    """Ranked chunks of one flat search and where the time went."""

    mode: str
    chunks: tuple[RetrievedChunk, ...]
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class _Bm25Index:
    stamp: CollectionStamp
    ids: np.ndarray
    bm25: BM25Okapi


class FlatRetriever:
    """Collection-wide top-k retrieval without routing or tree search (the baselines of ``kb bench``)."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, settings: RetrievalSettings,
                 candidates: int = 100) -> None:
        self.pool = pool
        self.embedder = embedder
        self.settings = settings
        self.candidates = candidates
        self._bm25: dict[int, _Bm25Index] = {}
        self._iterative: bool | None = None

    async def _collection_id(self, collection: str) -> int:
        return await lookup_collection_id(self.pool, collection)

    async def _iterative_scan(self) -> bool:
        if self._iterative is None:
            self._iterative = await supports_iterative_scan(self.pool)
        return self._iterative

    async def prepare(self, collection: str) -> None:
        """Build (or refresh) the in-memory BM25 index of the collection."""
        await self._bm25_index(await self._collection_id(collection))

    async def _bm25_index(self, collection_id: int) -> _Bm25Index:
        stamp = await collection_stamp(self.pool, collection_id)
        cached = self._bm25.get(collection_id)
        if cached is not None and cached.stamp == stamp:
            return cached
        started = time.perf_counter()
        rows = await store.collection_texts(self.pool, collection_id)
        ids = np.asarray([r["id"] for r in rows], dtype=np.int64)
        texts = [r["text"] for r in rows]

        def build() -> BM25Okapi:
            return BM25Okapi([tokenize(t) or ["\u2205"] for t in texts] or [["\u2205"]])

        index = _Bm25Index(stamp=stamp, ids=ids, bm25=await asyncio.to_thread(build))
        self._bm25[collection_id] = index
        log.info("router.flat_bm25_built", collection_id=collection_id, chunks=len(ids),
                 seconds=round(time.perf_counter() - started, 2))
        return index

    async def _dense(self, collection_id: int, qvec: np.ndarray, k: int) -> dict[int, float]:
        async with self.pool.acquire() as conn, conn.transaction():
            await store.vector_session(conn, ef_search=self.settings.hnsw_ef_search, k=k,
                                       iterative=await self._iterative_scan())
            rows = await store.dense_chunks(conn, qvec, k, scan="index", collection_id=collection_id)
        return {int(r["id"]): float(r["sim"]) for r in rows}

    async def _bm25_scores(self, collection_id: int, query: str) -> tuple[np.ndarray, np.ndarray]:
        index = await self._bm25_index(collection_id)
        q = tokenize(query)
        if not q or len(index.ids) == 0:
            return index.ids, np.zeros(len(index.ids))
        scores = await asyncio.to_thread(index.bm25.get_scores, q)
        return index.ids, np.maximum(np.asarray(scores, dtype=float), 0.0)

    @staticmethod
    def _top(ids: np.ndarray, scores: np.ndarray, k: int) -> dict[int, float]:
        if len(ids) == 0:
            return {}
        k = min(k, len(ids))
        part = np.argpartition(-scores, k - 1)[:k]
        order = part[np.argsort(-scores[part], kind="stable")]
        return {int(ids[i]): float(scores[i]) for i in order if scores[i] > 0}

    async def search(self, query: str, collection: str, mode: str, top_k: int) -> FlatOutcome:
        """Top ``top_k`` chunks of the collection for ``query`` (query embedding included in the timing)."""
        if mode not in FLAT_MODES:
            raise ValidationError(f"unknown flat mode {mode!r}; use one of {', '.join(FLAT_MODES)}")
        if not 1 <= top_k <= 1000:
            raise ValidationError("top_k must be between 1 and 1000")
        t0 = time.perf_counter()
        collection_id = await self._collection_id(collection)
        timings: dict[str, float] = {}
        dense: dict[int, float] = {}
        bm: dict[int, float] = {}
        if mode in ("dense", "hybrid"):
            qvec = (await asyncio.to_thread(self.embedder.embed_batch, [query]))[0]
            timings["embed"] = (time.perf_counter() - t0) * 1000
            dense = await self._dense(collection_id, qvec, top_k if mode == "dense" else self.candidates)
        if mode in ("bm25", "hybrid"):
            ids, scores = await self._bm25_scores(collection_id, query)
            bm = self._top(ids, scores, top_k if mode == "bm25" else self.candidates)
            if mode == "hybrid":
                # every candidate gets both scores: BM25 from the full score vector, cosine from SQL
                pos = {int(i): j for j, i in enumerate(ids)}
                missing = [i for i in dense if i not in bm]
                bm.update({i: float(scores[pos[i]]) for i in missing if i in pos})
                need = [i for i in bm if i not in dense]
                if need:
                    dense.update(await store.chunk_sims(self.pool, qvec, need))
        if mode == "dense":
            ranked = list(dense.items())
        elif mode == "bm25":
            ranked = list(bm.items())
        else:
            ids_u = list(dict.fromkeys([*dense, *bm]))
            d_norm = min_max([dense.get(i, 0.0) for i in ids_u])
            b_norm = min_max([bm.get(i, 0.0) for i in ids_u])
            fused = [self.settings.dense_weight * d + self.settings.bm25_weight * b
                     for d, b in zip(d_norm, b_norm, strict=True)]
            ranked = sorted(zip(ids_u, fused, strict=True), key=lambda x: -x[1])
        ranked = ranked[:top_k]
        timings["search"] = (time.perf_counter() - t0) * 1000 - timings.get("embed", 0.0)
        details = await store.chunk_details(self.pool, [i for i, _ in ranked])
        chunks = []
        for cid, score in ranked:
            r = details.get(cid)
            if r is None:  # deleted between the search and the lookup
                continue
            page = r["page"]
            pages = cited_span(page, r["page_end"], r["start_index"], r["end_index"])
            chunks.append(RetrievedChunk(
                chunk_id=cid, doc_id=int(r["document_id"]), doc_name=r["name"], node_id=r["node_id"],
                section_path=r["heading_path"], text=r["text"], page=page, pages=pages, unit=r["unit"],
                dense=round(dense.get(cid, 0.0), 4), bm25=round(bm.get(cid, 0.0), 4), fused=round(score, 4),
                score=round(score, 4)))
        timings["total"] = (time.perf_counter() - t0) * 1000
        return FlatOutcome(mode=mode, chunks=tuple(chunks), timings_ms=timings)
