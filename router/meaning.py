"""Measures by meaning: when no measure of the question is found by its words (``router.reading``), the words
the reading left unplaced are embedded and compared with the names of every measure — the vocabulary's printed
labels and synonyms and the measure table's names, English and Chinese (``kb.core.lexicon``,
``kb.core.vocab``), embedded once per process — and with the collection's own printed lines nearest to them
(stored with their vectors at ingest: ``ingest.lines``, found through an index). A measure is taken only above a similarity threshold and with
a margin over the best name of any other measure; otherwise the question stays without a measure, and when two
measures were close that is said (the answer states no verdict).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
import numpy as np

from kb.core import lexicon as lx
from kb.core.providers import Embedder
from router.measures import measure_names
from router.policy import MEANING
from router.question import MeasureRef


class MeaningMatch(msgspec.Struct, frozen=True):
    """The nearest measure of a phrase: ``ref`` when it clears the threshold and the margin, else None;
    ``close`` names the runner-up when the margin failed."""

    phrase: str
    ref: MeasureRef | None
    score: float
    name: str = ""  # the measure name nearest to the phrase
    close: str = ""  # another measure within the margin (ambiguous)


class MeaningIndex:
    """Every measure name, embedded by the query embedder on first use (≈ 600 short phrases)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.names = sorted(measure_names().items())
        self._vectors: np.ndarray | None = None
        self._lock = asyncio.Lock()

    async def vectors(self) -> np.ndarray:
        async with self._lock:
            if self._vectors is None:
                raw = await asyncio.to_thread(self.embedder.embed_batch, [n for n, _ in self.names])
                m = np.asarray(raw, dtype=np.float32)
                self._vectors = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
            return self._vectors

    async def match(self, phrase: str, vector: Sequence[float] | np.ndarray,
                    lines: Sequence[tuple[str, float]] = ()) -> MeaningMatch:
        """The measure whose name is nearest to ``phrase`` (its embedding ``vector``), if clearly so: among the
        measure names and ``lines``, the collection's own printed lines nearest to it (name, similarity)."""
        names = await self.vectors()
        v = np.asarray(vector, dtype=np.float32)
        v = v / max(float(np.linalg.norm(v)), 1e-9)
        sims = names @ v
        order = np.argsort(-sims)[:64]
        ranked = sorted([(float(sims[int(i)]), self.names[int(i)][1]) for i in order]
                        + [(float(sim), MeasureRef(label, "line")) for label, sim in lines],
                        key=lambda x: -x[0])
        score, ref = ranked[0]
        rival = next((r for r in ranked[1:] if r[1].name != ref.name), None)
        runner = rival[0] if rival is not None else -1.0
        if score < MEANING.threshold:
            return MeaningMatch(phrase, None, round(score, 3), name=ref.name)
        if score - runner < MEANING.margin:
            return MeaningMatch(phrase, None, round(score, 3), name=ref.name,
                                close=rival[1].name if rival is not None else "")
        return MeaningMatch(phrase, ref, round(score, 3), name=ref.name)


def unplaced(words: Sequence[str]) -> str:
    """The phrase to embed: the unplaced words as written (Chinese as one run)."""
    return " ".join(w for w in words if w) if not any(lx.is_zh(w) for w in words) else "".join(words)
