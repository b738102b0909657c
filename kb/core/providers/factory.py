"""One factory that picks provider implementations from settings."""

from __future__ import annotations

import functools
from pathlib import Path

import structlog

from kb.core.cpu import CpuBudget, cpu_budget
from kb.core.errors import ConfigError
from kb.core.providers.base import ChatModel, Embedder
from kb.core.providers.chat import LLMStore, OfflineChatModel, OpenAIChatModel
from kb.core.providers.embed import CrossEncoderReranker, RemoteEmbedder, build_embedder
from kb.core.providers.local_models import AUTO, BUNDLED_MINILM, ONNX_MODELS, resolve_model
from kb.core.settings import Settings, get_settings

log = structlog.get_logger("kb.core.providers.factory")


def get_chat_model(settings: Settings | None = None, store: LLMStore | None = None) -> ChatModel:
    """OpenAI-compatible model when an endpoint or key is configured, else the offline provider."""
    s = (settings or get_settings()).llm
    if s.offline:
        return OfflineChatModel()
    return OpenAIChatModel(s, store=store)


@functools.cache
def _embedder(model: str, batch_size: int, threads: int | None, cache_dir: Path | None, runtime: str,
              background_nice: int, budget: CpuBudget) -> Embedder:
    return build_embedder(model, batch_size, threads=threads, cache_dir=cache_dir, runtime=runtime,
                          background_nice=background_nice, budget=budget)


@functools.cache
def _remote(base_url: str, model: str, api_key: str | None, dimensions: int | None, batch_size: int,
            timeout_s: float, max_retries: int) -> Embedder:
    return RemoteEmbedder(base_url=base_url, model=model, api_key=api_key, dimensions=dimensions,
                          batch_size=batch_size, timeout_s=timeout_s, max_retries=max_retries)


def get_embedder(settings: Settings | None = None, *, recorded: str | None = None) -> Embedder:
    """The configured embedder (loaded once per process): a remote endpoint when ``KB_EMBEDDING_BASE_URL``
    is set, else the local model (``KB_EMBEDDING_MODEL=auto``: the bundled model of ``recorded``, the model id
    the database's vectors come from, else the default one)."""
    settings = settings or get_settings()
    s = settings.embedding
    model = resolve_model(s.model, recorded, remote=bool(s.base_url))
    if s.base_url:
        return _remote(s.base_url, model, s.api_key, s.dimensions, s.batch_size, s.timeout_s, s.max_retries)
    try:
        return _local(settings, model)
    except ConfigError as exc:
        if s.model != AUTO or recorded is not None:
            raise
        # a new database and the default cannot be exported here: the bundled model in fp32 (or on torch)
        log.warning("embed.default_unavailable", model=model, fallback=BUNDLED_MINILM, reason=str(exc))
        return _local(settings, BUNDLED_MINILM)


def _local(settings: Settings, model: str) -> Embedder:
    s = settings.embedding
    onnx = model in ONNX_MODELS or (model == BUNDLED_MINILM and s.runtime == "onnx")
    cache_dir = (s.model_dir or settings.database.data_dir / "models") if onnx else None
    return _embedder(model, s.batch_size, s.threads, cache_dir, s.runtime, settings.ingest.nice,
                     cpu_budget(settings.ingest.cpu_cores, settings.ingest.cpu_dir))


@functools.cache
def _reranker(model: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(model)


def get_reranker(settings: Settings | None = None) -> CrossEncoderReranker | None:
    """The configured cross-encoder, or None when ``KB_RERANK_MODEL`` is unset."""
    model = (settings or get_settings()).embedding.rerank_model
    return _reranker(model) if model else None
