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
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence

import msgspec
import numpy as np

from kb.core import lexicon as lx
from kb.core.providers import Embedder
from kb.core.vocab import han_pairs, same_line
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
        self._zh: dict[int, tuple[object, ZhNames]] = {}

    async def zh(self, collection_id: int, stamp: object, lines: Callable[[], Awaitable[list[str]]]) -> ZhNames:
        """The Chinese names of a collection (its printed lines read by ``lines``), built once per change of the
        collection (``stamp``)."""
        cached = self._zh.get(collection_id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        names = zh_names(await lines())
        if len(self._zh) >= 256:
            self._zh.clear()
        self._zh[collection_id] = (stamp, names)
        return names

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


class ZhNames:
    """Chinese measure names — the measure table's and the collection's own printed lines — matched to a
    question's leftover words by their characters: the idf-weighted Dice of their character pairs. MiniLM reads
    no Chinese, so this is how "支付给员工的现金" finds 支付给职工以及为职工支付的现金. Candidates come from an
    index of pairs (no scan over every name)."""

    def __init__(self, names: Iterable[tuple[str, MeasureRef]]) -> None:
        self.names: list[tuple[str, MeasureRef, frozenset[str]]] = []
        for name, ref in dict(names).items():
            if lx.is_zh(name) and (pairs := han_pairs(name)):
                self.names.append((name, ref, pairs))
        self.df = Counter(p for *_, pairs in self.names for p in pairs)
        self.postings: dict[str, list[int]] = {}
        for i, (*_, pairs) in enumerate(self.names):
            for p in pairs:
                self.postings.setdefault(p, []).append(i)
        self.weights = {p: self._idf(p) for p in self.df}

    def _idf(self, pair: str) -> float:
        return math.log(1 + len(self.names) / (1 + self.df.get(pair, 0)))

    def _weight(self, pairs: Iterable[str]) -> float:
        return sum(self.weights.get(p) or self._idf(p) for p in pairs)

    def match(self, phrase: str) -> MeaningMatch:
        """The measure whose Chinese name or printed line is nearest to ``phrase`` by its characters, if clearly so
        (``MEANING.zh_threshold`` and ``zh_margin`` over the nearest name of another measure)."""
        asked = han_pairs(lx.zh_as_printed(phrase))  # idempotent on words already as printed (unplaced_words)
        if not asked:
            return MeaningMatch(phrase, None, 0.0)
        mass = self._weight(asked)
        shared: dict[int, float] = {}
        for p in asked:
            for i in self.postings.get(p, ()):
                shared[i] = shared.get(i, 0.0) + self.weights[p]
        ranked = sorted(((max(2 * w / (mass + self._weight(self.names[i][2])), COVERAGE * w / mass), self.names[i][1])
                         for i, w in shared.items()), key=lambda x: -x[0])
        if not ranked:
            return MeaningMatch(phrase, None, 0.0)
        score, ref = ranked[0]
        # another measure, not the same line printed another way ("以及" / "及"): that is no rival
        rival = next((r for r in ranked[1:] if r[1] != ref and not same_line(r[1].name, ref.name)), None)
        if score < MEANING.zh_threshold:
            return MeaningMatch(phrase, None, round(score, 3), name=ref.name)
        if rival is not None and score - rival[0] < MEANING.zh_margin:
            return MeaningMatch(phrase, None, round(score, 3), name=ref.name, close=rival[1].name)
        return MeaningMatch(phrase, ref, round(score, 3), name=ref.name)


COVERAGE = 0.8
"""A long printed line that holds nearly all of the question's words ("支付税费" in 支付的各项税费) scores by that
share, at this weight, when it beats the Dice of the two."""


def zh_names(lines: Iterable[str] = ()) -> ZhNames:
    """The Chinese names of every measure (the measure table's, the lexicon's printed CAS lines) and a
    collection's own printed lines (``lines``: their names as stored, ``ingest.lines``)."""
    table = [(n, ref) for n, ref in measure_names().items() if lx.is_zh(n)]
    printed = [(label, MeasureRef(label, "line")) for label in (*lx.ZH_LINE_ITEMS, *lines)]
    return ZhNames([*printed, *table])  # a measure's own name wins over a printed line of the same words; the
    # collection's own lines come after the lexicon's, so a line printed two ways is found as the reports print it


def unplaced(words: Sequence[str]) -> str:
    """The phrase to embed: the unplaced words as written (Chinese as one run)."""
    return " ".join(w for w in words if w) if not any(lx.is_zh(w) for w in words) else "".join(words)
