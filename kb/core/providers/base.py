"""The two provider Protocols every pipeline step depends on."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from kb.core.types import ChatResult


@runtime_checkable
class ChatModel(Protocol):
    """An async chat model with JSON-schema output and token usage.

    ``offline`` is True for the built-in offline provider: it answers no prompt,
    and every step then runs its offline (embedding/BM25/heuristic) implementation.
    """

    model_id: str
    offline: bool

    async def complete_json(
        self, *, purpose: str, system: str, prompt: str, schema: dict[str, Any]
    ) -> ChatResult: ...

    async def complete_text(self, *, purpose: str, system: str, prompt: str) -> ChatResult: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    model_id: str
    dimension: int

    def embed_batch(self, texts: list[str]) -> np.ndarray: ...
