"""Small scoring primitives: min-max normalisation, weighted fusion, DocScore/NodeScore, BM25."""

from __future__ import annotations

import functools
import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from itertools import chain

import numpy as np
from rank_bm25 import BM25Okapi

from kb.core.text import tokenize


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; all-equal input maps to 1.0 when positive, else 0.0."""
    return min_max_array(np.asarray(values, dtype=np.float64)).tolist()


def min_max_array(values: np.ndarray) -> np.ndarray:
    """``min_max`` over an array of floats."""
    if not len(values):
        return values
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12:
        return np.full(len(values), 1.0 if hi > 0 else 0.0)
    return (values - lo) / (hi - lo)


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


TOKEN_COUNT_TEXTS = 20_000  # texts whose token counts a process keeps (``_text_counts``)


@functools.lru_cache(maxsize=TOKEN_COUNT_TEXTS)
def _text_counts(text: str) -> Counter[str]:
    """A chunk's token counts (first occurrence first), computed once per text: the same chunks come back
    query after query."""
    return Counter(tokenize(text) or ("\u2205",))


def warm_token_counts(texts: Sequence[str]) -> int:
    """Compute the token counts of ``texts`` into the process's cache, as the first queries reading them would
    (a server's warm-up); returns how many were computed. Stops once the cache is full."""
    done = 0
    for text in texts:
        if _text_counts.cache_info().currsize >= TOKEN_COUNT_TEXTS:
            break
        _text_counts(text)
        done += 1
    return done


class PostingsBM25:
    """``rank_bm25.BM25Okapi`` scores (its idf, floor and formula: the same floats) read from postings, so a
    query costs the documents holding its terms, not a pass over every document (10,000 descriptions)."""

    def __init__(self, corpus: Sequence[Sequence[str]]) -> None:
        okapi = BM25Okapi([list(d) for d in corpus])
        self.size = okapi.corpus_size
        self.idf: dict[str, float] = okapi.idf
        self.k1 = okapi.k1
        doc_len = np.array(okapi.doc_len)
        self._norm = okapi.k1 * (1 - okapi.b + okapi.b * doc_len / okapi.avgdl)  # BM25Okapi.get_scores' terms
        docs: dict[str, list[int]] = defaultdict(list)
        freqs: dict[str, list[int]] = defaultdict(list)
        for i, counts in enumerate(okapi.doc_freqs):
            for word, f in counts.items():
                docs[word].append(i)
                freqs[word].append(f)
        self._postings = {w: (np.array(docs[w], dtype=np.int64), np.array(freqs[w])) for w in docs}

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        """A score per document of the corpus, in corpus order (BM25Okapi.get_scores)."""
        score = np.zeros(self.size)
        for q in query:
            post = self._postings.get(q)
            if post is None:
                continue
            idx, tf = post
            score[idx] += (self.idf.get(q) or 0) * (tf * (self.k1 + 1) / (tf + self._norm[idx]))
        return score


def bm25_scores(query: str, texts: Sequence[str]) -> list[float]:
    """BM25Okapi scores of ``texts`` for ``query`` with the shared tokenizer."""
    if not texts:
        return []
    q = tokenize(query)
    if not q:
        return [0.0] * len(texts)
    scores = _scores(_text_corpus(tuple(texts)), q)
    return [max(0.0, float(s)) for s in scores]


@functools.lru_cache(maxsize=64)
def _idf_table(n: int) -> np.ndarray:
    """BM25Okapi's idf of a word in ``f`` of ``n`` documents, for every ``f`` (computed as it does, with
    ``math.log``)."""
    return np.array([math.log(n - f + 0.5) - math.log(f + 0.5) for f in range(n + 1)])


class _Corpus:
    """What BM25Okapi derives from a corpus alone — lengths, document frequencies, the idf floor — kept for a
    corpus that comes back (a document's node labels, a node's chunks) with each query."""

    __slots__ = ("counts", "df", "doc_len", "avgdl", "eps", "idf_of")

    def __init__(self, counts: Sequence[Counter[str]], epsilon: float) -> None:
        n = len(counts)
        self.counts = counts
        self.doc_len = np.array([c.total() for c in counts])
        self.avgdl = int(self.doc_len.sum()) / n
        self.df = Counter(chain.from_iterable(counts))  # words in first-occurrence order, as BM25Okapi counts them
        self.idf_of = _idf_table(n)
        # BM25Okapi sums the idf word by word in that order: a cumulative sum adds in the same order (same float)
        idf_sum = float(np.add.accumulate(self.idf_of[np.fromiter(self.df.values(), dtype=np.int64,
                                                                  count=len(self.df))])[-1])
        self.eps = epsilon * (idf_sum / len(self.df))


@functools.lru_cache(maxsize=256)
def _text_corpus(texts: tuple[str, ...]) -> _Corpus:
    return _Corpus([_text_counts(t) for t in texts], 0.25)


def okapi_scores(counts: Sequence[Counter[str]], query: Sequence[str], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> np.ndarray:
    """``BM25Okapi(corpus).get_scores(query)`` (the same floats: its idf with the ``epsilon`` floor over the
    average idf, summed in its order) from each document's token counts, without building its per-word
    tables: a query's in-node BM25 runs over a few hundred chunks."""
    return _scores(_Corpus(counts, epsilon), query, k1, b)


def _scores(corpus: _Corpus, query: Sequence[str], k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    score = np.zeros(len(corpus.counts))
    norm = None
    for q in query:
        f = corpus.df.get(q)
        if f is None:
            continue
        idf = float(corpus.idf_of[f])
        idf = corpus.eps if idf < 0 else idf
        q_freq = np.array([c.get(q) or 0 for c in corpus.counts])
        if norm is None:
            norm = k1 * (1 - b + b * corpus.doc_len / corpus.avgdl)
        score += (idf or 0) * (q_freq * (k1 + 1) / (q_freq + norm))
    return score
