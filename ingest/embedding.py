"""Embeddings with a Postgres cache keyed by (model, sha256(text)).

Small batches: a query embedding waits for at most one batch on the shared model.
"""

from __future__ import annotations

import asyncio
import hashlib

import asyncpg
import numpy as np
import structlog

from ingest import store
from kb.core.providers import Embedder

log = structlog.get_logger("ingest.embedding")


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


class CachedEmbedder:
    """Embeds texts, reusing vectors already computed for the same model and text.

    A cached vector of another dimension (the same model asked for another size) is a miss. With ``refresh``
    nothing is read from the cache: every text is embedded again and its entry overwritten. Missing texts go to
    the embedder ``batch`` at a time (``KB_EMBEDDING_BATCH``), each batch stored as soon as it is embedded. With
    ``background`` (ingest) they go to the embedder's ``embed_background`` when it has one: below queries.
    """

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, *, batch: int, refresh: bool = False,
                 background: bool = False) -> None:
        self.pool = pool
        self.embedder = embedder
        self._embed = getattr(embedder, "embed_background", embedder.embed_batch) if background else embedder.embed_batch
        self.batch = batch
        self.refresh = refresh
        self.hits = 0
        self.misses = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` in order (float32, normalised)."""
        dim = self.embedder.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        if not texts:
            return out
        shas = [text_sha(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        model = self.embedder.model_id
        unique = list(dict.fromkeys(shas))
        for i in range(0, 0 if self.refresh else len(unique), 5000):
            for row in await store.cached_embeddings(self.pool, model, unique[i : i + 5000]):
                vec = np.asarray(row["embedding"], dtype=np.float32)
                if vec.shape == (dim,):
                    found[row["sha256"]] = vec
        missing = [(sha, texts[i]) for i, sha in enumerate(shas) if sha not in found]
        missing = list(dict(missing).items())
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        for i in range(0, len(missing), self.batch):
            part = missing[i : i + self.batch]
            vecs = await asyncio.to_thread(self._embed, [t for _, t in part])
            for (sha, _), vec in zip(part, vecs, strict=True):
                found[sha] = vec
            await store.store_embeddings(self.pool, [(model, sha, found[sha]) for sha, _ in part])
        for i, sha in enumerate(shas):
            out[i] = found[sha]
        return out
