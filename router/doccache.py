"""Documents' chunks and vectors kept in the process between queries (until their collection changes).

A question reads a few documents; each is read over and over by later questions. Their chunks (text, pages,
node ranges) and the vectors of their chunks and nodes are loaded once per document and collection stamp, and
a query's cosines, nearest chunks and in-node candidates are computed here in numpy instead of being shipped
from Postgres for every query (they were most of a query's database time and of its row decoding). Cosines are
pgvector's: ``dot / sqrt(|a|² |b|²)`` (float32 dot products, as pgvector sums), ties by id.

The cache is bounded in bytes (``KB_DOC_CACHE_MB``, least recently used out first); a document is loaded once
however many queries ask for it at the same time. Without a stamp (no collection) nothing is kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
import numpy as np

from kb.core.singleflight import SingleFlight
from router import store
from router.store import Nearest

ROW_OVERHEAD = 800
"""Bytes a cached chunk row costs besides its text (the record, its small fields, its index entries)."""


def _cosines(vectors: np.ndarray, norms_sq: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """pgvector's cosine similarity (1 − ``<=>``) of each row to ``qvec``: float32 dot products (pgvector sums in
    float32 too), divided in float64 by the norms."""
    if not len(vectors):
        return np.zeros(0, dtype=np.float64)
    q = np.asarray(qvec, dtype=np.float32)
    qq = float(np.dot(q.astype(np.float64), q.astype(np.float64)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip((vectors @ q).astype(np.float64) / np.sqrt(norms_sq * qq), -1.0, 1.0)  # pgvector keeps it in range


@dataclass(frozen=True)
class DocChunks:
    """One document as a process keeps it: its chunk rows in order (the columns ``node_chunks`` and the direct
    hits read) with their vectors (row i of ``vectors`` is ``rows[i]``'s), and its nodes' vectors."""

    doc_id: int
    rows: tuple[asyncpg.Record, ...]
    vectors: np.ndarray  # (chunks, dimension), as stored
    norms_sq: np.ndarray  # float64 |v|² per chunk
    ids: np.ndarray  # int64 chunk ids
    at: dict[int, int]  # chunk id → row index
    by_node: dict[str, tuple[int, ...]]  # node id → its chunks' row indexes, in order
    node_ids: tuple[str, ...]  # nodes with a vector
    node_vectors: np.ndarray
    node_norms_sq: np.ndarray
    nbytes: int
    complete: bool = True  # its rows are the chunk count its document records (not a lagging replica's view)

    def nearest(self, qvec: np.ndarray, limit: int) -> tuple[Nearest, ...]:
        """The ``limit`` chunks nearest ``qvec``, nearest first (ties by id), as the exact scan ordered them."""
        sims = _cosines(self.vectors, self.norms_sq, qvec)
        order = np.lexsort((self.ids, -sims))[:limit]
        return tuple(Nearest(int(self.ids[i]), self.rows[i]["node_id"], float(sims[i])) for i in order)

    def node_sims(self, qvec: np.ndarray) -> dict[str, float]:
        """The cosine of each node's vector to ``qvec`` (nodes without one are absent: 0 to the caller)."""
        sims = _cosines(self.node_vectors, self.node_norms_sq, qvec)
        return {n: float(s) for n, s in zip(self.node_ids, sims, strict=True)}

    def in_nodes(self, node_ids: Sequence[str]) -> tuple[list[asyncpg.Record], np.ndarray]:
        """The chunks of some nodes in document order, and their vectors (one row each)."""
        wanted = set(node_ids)
        index = sorted(i for n in wanted for i in self.by_node.get(n, ()))
        return [self.rows[i] for i in index], self.vectors[index]

    def rows_of(self, chunk_ids: Sequence[int]) -> dict[int, asyncpg.Record]:
        return {c: self.rows[self.at[c]] for c in chunk_ids if c in self.at}


async def load_doc_chunks(pool: asyncpg.Pool, doc_id: int) -> DocChunks:
    """One document's chunks and vectors, read in one snapshot."""
    rows, chunk_vecs, nodes, recorded = await store.doc_chunk_snapshot(pool, doc_id)
    ids = np.fromiter((r["id"] for r in rows), dtype=np.int64, count=len(rows))
    dim = len(chunk_vecs[0]) if chunk_vecs else (len(nodes[0][1]) if nodes else 0)
    vectors = np.stack(chunk_vecs) if chunk_vecs else np.zeros((0, dim), dtype=np.float32)
    by_node: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_node.setdefault(r["node_id"], []).append(i)
    node_ids = tuple(n for n, _ in nodes)
    node_vectors = np.stack([v for _, v in nodes]) if nodes else np.zeros((0, dim), dtype=np.float32)
    text_bytes = sum(len(r["text"].encode()) + len((r["heading_path"] or "").encode()) for r in rows)
    return DocChunks(
        doc_id=doc_id, rows=tuple(rows), vectors=vectors,
        norms_sq=np.einsum("ij,ij->i", vectors.astype(np.float64), vectors.astype(np.float64)),
        ids=ids, at={int(i): k for k, i in enumerate(ids)}, by_node={n: tuple(ix) for n, ix in by_node.items()}, node_ids=node_ids, node_vectors=node_vectors,
        node_norms_sq=np.einsum("ij,ij->i", node_vectors.astype(np.float64), node_vectors.astype(np.float64)),
        nbytes=int(vectors.nbytes + node_vectors.nbytes + text_bytes + ROW_OVERHEAD * len(rows)),
        complete=recorded is not None and int(recorded) == len(rows))


class DocCache:
    """Loaded documents by (document, collection stamp), at most ``max_bytes`` (least recently used out first;
    one larger than the whole budget is used and not kept)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self.bytes = 0
        self._docs: OrderedDict[tuple[int, object], DocChunks] = OrderedDict()
        self._loading: SingleFlight[tuple[int, object], DocChunks] = SingleFlight()

    async def get(self, pool: asyncpg.Pool, doc_id: int, stamp: object) -> DocChunks:
        key = (doc_id, stamp)
        if (doc := self._docs.get(key)) is not None:
            self._docs.move_to_end(key)
            return doc
        return await self._loading.run(key, lambda: self._load(pool, doc_id, key))

    async def _load(self, pool: asyncpg.Pool, doc_id: int, key: tuple[int, object]) -> DocChunks:
        if (doc := self._docs.get(key)) is not None:  # loaded while this question waited for another's load
            return doc
        doc = await load_doc_chunks(pool, doc_id)
        if key[1] is not None and doc.complete and doc.nbytes <= self.max_bytes:
            self._docs[key] = doc
            self.bytes += doc.nbytes
            while self.bytes > self.max_bytes:
                _, old = self._docs.popitem(last=False)
                self.bytes -= old.nbytes
        return doc


class DocReads:
    """One query's reads of its documents' chunks: each document from the process's ``DocCache`` (loaded once
    per collection stamp) and held for the query, its nearest chunks to a question vector memoised."""

    def __init__(self, pool: asyncpg.Pool, cache: DocCache, stamp: object) -> None:
        self.pool = pool
        self.cache = cache
        self.stamp = stamp
        self._nearest: dict[tuple[int, bytes, int], tuple[Nearest, ...]] = {}
        self._docs: dict[int, DocChunks] = {}  # held for the query, kept by the cache or not

    async def doc(self, doc_id: int) -> DocChunks:
        if (doc := self._docs.get(doc_id)) is None:
            doc = self._docs[doc_id] = await self.cache.get(self.pool, doc_id, self.stamp)
        return doc

    async def top(self, doc_id: int, qvec: np.ndarray, limit: int) -> tuple[Nearest, ...]:
        """The document's ``limit`` chunks nearest ``qvec``, nearest first (ties by id)."""
        key = (doc_id, np.asarray(qvec, dtype=np.float32).tobytes(), limit)
        if (found := self._nearest.get(key)) is None:
            found = self._nearest[key] = (await self.doc(doc_id)).nearest(qvec, limit)
        return found

    async def node_sims(self, doc_id: int, qvec: np.ndarray) -> dict[str, float]:
        return (await self.doc(doc_id)).node_sims(qvec)

    async def node_chunks(self, doc_id: int, node_ids: Sequence[str]) -> tuple[list[asyncpg.Record], np.ndarray]:
        """The chunks of some nodes of one document in order, with their vectors."""
        return (await self.doc(doc_id)).in_nodes(node_ids)

    async def nearest_rows(self, doc_ids: Sequence[int], qvec: np.ndarray,
                           limit: int) -> list[tuple[asyncpg.Record, float]]:
        """The ``limit`` chunks nearest the question over some documents, nearest first (ties by id), each with
        its row (text, pages, unit and node range) and cosine."""
        docs = [await self.doc(d) for d in doc_ids]
        found = [(n, doc) for doc in docs for n in await self.top(doc.doc_id, qvec, limit)]
        found.sort(key=lambda x: (-x[0].sim, x[0].id))
        out = []
        for n, doc in found[:limit]:
            row = doc.rows_of([n.id]).get(n.id)
            if row is not None:
                out.append((row, n.sim))
        return out
