"""Retrieval metrics of the benchmark: pure functions over one question's ranked output, and the aggregate.

Documents are identified by name (the PDF file name); pages are 1-based and inclusive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec
import numpy as np

Span = tuple[str, int, int]
"""(document name, first page, last page), 1-based inclusive."""


class QuestionRun(msgspec.Struct, frozen=True):
    """What one strategy returned for one question, reduced to what the metrics need."""

    qid: str
    qtype: str
    docs: tuple[str, ...]  # ranked, deduplicated document names
    chunks: tuple[Span, ...]  # ranked chunk page spans
    nodes: tuple[Span, ...] | None  # selected node page ranges; None when the strategy has no tree
    latency_ms: float
    llm_calls: int = 0
    tokens: int = 0
    error: str | None = None


def doc_hit(relevant: Iterable[str], docs: Sequence[str], k: int) -> float:
    """1.0 when a relevant document is among the first ``k`` ranked documents."""
    rel = set(relevant)
    return 1.0 if any(d in rel for d in docs[:k]) else 0.0


def doc_recall(relevant: Iterable[str], docs: Sequence[str], k: int) -> float:
    """Share of the relevant documents among the first ``k`` ranked documents."""
    rel = set(relevant)
    if not rel:
        return 0.0
    return len(rel & set(docs[:k])) / len(rel)


def covers(span: Span, doc: str, page: int) -> bool:
    return span[0] == doc and span[1] <= page <= span[2]


def page_recall(evidence: Sequence[tuple[str, int]], chunks: Sequence[Span], k: int) -> float:
    """Share of evidence pages covered by one of the top-``k`` chunks."""
    if not evidence:
        return 0.0
    top = chunks[:k]
    hit = sum(1 for doc, page in evidence if any(covers(s, doc, page) for s in top))
    return hit / len(evidence)


def node_recall(evidence: Sequence[tuple[str, int]], nodes: Sequence[Span]) -> float:
    """Share of evidence pages inside the page range of a selected node."""
    if not evidence:
        return 0.0
    hit = sum(1 for doc, page in evidence if any(covers(s, doc, page) for s in nodes))
    return hit / len(evidence)


def reciprocal_rank(evidence: Sequence[tuple[str, int]], chunks: Sequence[Span], k: int = 10) -> float:
    """1/rank of the first of the top-``k`` chunks that covers an evidence page; 0 when none does."""
    for rank, span in enumerate(chunks[:k], start=1):
        if any(covers(span, doc, page) for doc, page in evidence):
            return 1.0 / rank
    return 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def question_metrics(relevant: Sequence[str], evidence: Sequence[tuple[str, int]], run: QuestionRun,
                     ks: Sequence[int], has_pages: bool) -> dict[str, float]:
    """The per-question values that ``aggregate`` averages."""
    m = {
        "doc_hit@1": doc_hit(relevant, run.docs, 1),
        "doc_hit@3": doc_hit(relevant, run.docs, 3),
        "doc_recall@3": doc_recall(relevant, run.docs, 3),
        "doc_recall@5": doc_recall(relevant, run.docs, 5),
    }
    if has_pages:
        for k in ks:
            m[f"page_recall@{k}"] = page_recall(evidence, run.chunks, k)
        if run.nodes is not None:
            m["node_recall"] = node_recall(evidence, run.nodes)
        m["mrr@10"] = reciprocal_rank(evidence, run.chunks, 10)
    return m


def metric_names(ks: Sequence[int]) -> list[str]:
    """Every metric of the report; page metrics are None (not applicable) for datasets without page labels."""
    return ["doc_hit@1", "doc_hit@3", "doc_recall@3", "doc_recall@5", *(f"page_recall@{k}" for k in ks),
            "node_recall", "mrr@10"]


def aggregate(per_question: Sequence[dict[str, float]], runs: Sequence[QuestionRun],
              ks: Sequence[int]) -> dict[str, float | int | None]:
    """Means of the per-question metrics (None where not applicable), latency percentiles, LLM usage."""
    out: dict[str, float | int | None] = {}
    for name in metric_names(ks):
        vals = [m[name] for m in per_question if name in m]
        out[name] = round(v, 4) if (v := _mean(vals)) is not None else None
    lat = [r.latency_ms for r in runs]
    p50, p95 = percentile(lat, 50), percentile(lat, 95)
    out["latency_ms_p50"] = round(p50, 1) if p50 is not None else None
    out["latency_ms_p95"] = round(p95, 1) if p95 is not None else None
    n = len(runs)
    out["llm_calls"] = round(sum(r.llm_calls for r in runs) / n, 3) if n else 0
    out["tokens"] = round(sum(r.tokens for r in runs) / n, 1) if n else 0
    out["n"] = n
    return out
