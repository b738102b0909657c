"""Small scoring primitives: min-max normalisation, weighted fusion, DocScore/NodeScore, BM25."""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence

from rank_bm25 import BM25Okapi

from kb.text import tokenize


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; all-equal input maps to 1.0 when positive, else 0.0."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def fuse(dense: Sequence[float], bm25: Sequence[float], dense_weight: float, bm25_weight: float) -> list[float]:
    """Weighted sum of min-max normalised dense and BM25 scores (spec 001 §2.2)."""
    d, b = min_max(dense), min_max(bm25)
    return [dense_weight * x + bm25_weight * y for x, y in zip(d, b, strict=True)]


def aggregate_score(scores: Iterable[float]) -> float:
    """DocScore / NodeScore = sum(chunk scores) / sqrt(N + 1) (spec 000 §7.2.2, spec 002)."""
    vals = list(scores)
    return sum(vals) / math.sqrt(len(vals) + 1)


def group_scores(pairs: Iterable[tuple[Hashable, float]]) -> dict[Hashable, float]:
    """Aggregate (key, chunk score) pairs per key with ``aggregate_score``."""
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for key, score in pairs:
        groups[key].append(score)
    return {k: aggregate_score(v) for k, v in groups.items()}


@functools.lru_cache(maxsize=20_000)
def _text_tokens(text: str) -> tuple[str, ...]:
    """A chunk's tokens, computed once per text: the same chunks come back query after query."""
    return tuple(tokenize(text)) or ("\u2205",)


def bm25_scores(query: str, texts: Sequence[str]) -> list[float]:
    """BM25Okapi scores of ``texts`` for ``query`` with the shared tokenizer."""
    if not texts:
        return []
    q = tokenize(query)
    if not q:
        return [0.0] * len(texts)
    corpus = [list(_text_tokens(t)) for t in texts]
    scores = BM25Okapi(corpus).get_scores(q)
    return [max(0.0, float(s)) for s in scores]
