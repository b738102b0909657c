"""Provider Protocols (ChatModel, Embedder) and their implementations, with one factory."""

from kb.core.providers.base import ChatModel, Embedder
from kb.core.providers.factory import get_chat_model, get_embedder, get_reranker

__all__ = ["ChatModel", "Embedder", "get_chat_model", "get_embedder", "get_reranker"]
