"""One factory that picks provider implementations from settings."""

from __future__ import annotations

import functools

from kb.providers.base import ChatModel, Embedder
from kb.providers.chat import LLMStore, OfflineChatModel, OpenAIChatModel
from kb.providers.embed import CrossEncoderReranker, build_embedder
from kb.settings import Settings, get_settings


def get_chat_model(settings: Settings | None = None, store: LLMStore | None = None) -> ChatModel:
    """OpenAI-compatible model when an endpoint or key is configured, else the offline provider."""
    s = (settings or get_settings()).llm
    if s.offline:
        return OfflineChatModel()
    return OpenAIChatModel(s, store=store)


@functools.cache
def _embedder(model: str, batch_size: int) -> Embedder:
    return build_embedder(model, batch_size)


def get_embedder(settings: Settings | None = None) -> Embedder:
    """The configured embedder (loaded once per process)."""
    s = (settings or get_settings()).embedding
    return _embedder(s.model, s.batch_size)


@functools.cache
def _reranker(model: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(model)


def get_reranker(settings: Settings | None = None) -> CrossEncoderReranker | None:
    """The configured cross-encoder, or None when ``KB_RERANK_MODEL`` is unset."""
    model = (settings or get_settings()).embedding.rerank_model
    return _reranker(model) if model else None
