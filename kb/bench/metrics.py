"""Retrieval metrics of the benchmark: pure functions over one question's ranked output, and the aggregate.

Documents are identified by name (the PDF file name); pages are 1-based and inclusive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import msgspec
import numpy as np

from kb.core.text import Figure, figures  # the figure reading answers are checked with, too
from kb.core.text import same_figure as _matches

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
    cost_usd: float | None = None  # --llm with prices: this question's estimated LLM cost
    candidates: tuple[Span, ...] | None = None  # every candidate chunk before the top-k cut (routed strategies)
    evidence_docs: tuple[str, ...] = ()  # documents of the evidence handed to synthesis
    evidence_text: str = ""  # that evidence's text (for answer_number_recall)
    answer_text: str = ""  # the answer synthesised from that evidence (for answer_figure_recall)
    cited_docs: tuple[str, ...] = ()  # documents the answer cites, in citation order
    reading: str = ""  # how the question was read and answered: READINGS ("" for flat strategies)


READINGS = ("computed", "abstained", "text", "not_parsed")
"""computed: a verdict computed from facts as the question was read; abstained: figures shown, no verdict (the
reading disagreed or left something unplaced); text: understood, answered from text (no fact states it);
not_parsed: no operation on a measure was read (the text path answers). Mis-parsed needs a gold reading: it is
counted by ``kb bench parse``."""


def reading_of(understood: bool, facts_verdict: bool | None) -> str:
    """The ``READINGS`` entry of one answered question (``facts_verdict`` None: no facts answer)."""
    if facts_verdict is not None:
        return "computed" if facts_verdict else "abstained"
    return "text" if understood else "not_parsed"


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


def evidence_doc_coverage(relevant: Iterable[str], evidence_docs: Iterable[str]) -> float:
    """Share of the relevant documents that contribute evidence handed to synthesis."""
    rel = set(relevant)
    return len(rel & set(evidence_docs)) / len(rel) if rel else 0.0


def needed_recall(needed: Iterable[str], cited_docs: Iterable[str]) -> float:
    """Share of the needed documents that the answer cites."""
    return evidence_doc_coverage(needed, cited_docs)


def needed_cited(needed: Iterable[str], cited_docs: Iterable[str]) -> float:
    """1.0 when the answer cites every needed document (and there is at least one)."""
    need = set(needed)
    return 1.0 if need and need <= set(cited_docs) else 0.0


def reference_figures(answer: str, question: str) -> list[Figure]:
    """The figures of a reference answer that the question does not already state (deduplicated)."""
    asked = figures(question)
    refs = [f for f in figures(answer, reference=True)
            if not any(abs(f.value - q.value) < 1e-9 for q in asked)]
    return list({(f.value, f.scale, f.percent): f for f in refs}.values())


def figure_recall(answer: str, question: str, text: str) -> float | None:
    """Share of the reference answer's figures (not in the question) that ``text`` states; None without any."""
    refs = reference_figures(answer, question)
    if not refs:
        return None
    found = figures(text)
    return sum(1 for r in refs if any(_matches(r, e) for e in found)) / len(refs)


def answer_number_recall(answer: str, question: str, evidence_text: str) -> float | None:
    """Share of the reference answer's figures (not in the question) that the evidence text states.

    Normalisation: thousands separators and "$" are dropped; "million"/"mn"/"m", "billion"/"bn"/"b",
    "thousand"/"k", "亿" and "万" scale the value; a figure matches when the evidence states it at the reference's
    precision in any of these scales, unscaled evidence numbers also read as thousands, millions or
    billions (tables say "in millions"): "$82,959 million" = "82,959" = "82.959 billion"; "$2.5bn" matches
    "2,512" (in millions). Percentages match percentages or plain numbers. None when the reference has no figure.
    """
    return figure_recall(answer, question, evidence_text)


_CITATION_MARKER = re.compile(r"\[\d{1,3}\]")


def answer_figure_recall(answer: str, question: str, answer_text: str) -> float | None:
    """Share of the reference answer's figures (not in the question) that the ANSWER TEXT states, with the
    normalisation of ``answer_number_recall``: what reached the reader, where ``answer_number_recall`` measures
    what reached synthesis. Citation markers ("[9]") are not figures. None when the reference has no figure."""
    return figure_recall(answer, question, _CITATION_MARKER.sub(" ", answer_text))


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def question_metrics(relevant: Sequence[str], evidence: Sequence[tuple[str, int]], run: QuestionRun,
                     ks: Sequence[int], has_pages: bool, *, answer: str = "", question: str = "") -> dict[str, float]:
    """The per-question values that ``aggregate`` averages."""
    m = {
        "doc_hit@1": doc_hit(relevant, run.docs, 1),
        "doc_hit@3": doc_hit(relevant, run.docs, 3),
        "doc_recall@3": doc_recall(relevant, run.docs, 3),
        "doc_recall@5": doc_recall(relevant, run.docs, 5),
        "evidence_doc_coverage": evidence_doc_coverage(relevant, run.evidence_docs),
    }
    if (nr := answer_number_recall(answer, question, run.evidence_text)) is not None:
        m["answer_number_recall"] = nr
    if (fr := answer_figure_recall(answer, question, run.answer_text)) is not None:
        m["answer_figure_recall"] = fr
    if has_pages:
        for k in ks:
            m[f"page_recall@{k}"] = page_recall(evidence, run.chunks, k)
        if run.nodes is not None:
            m["node_recall"] = node_recall(evidence, run.nodes)
        if run.candidates is not None:  # in-node retrieval, before cross-node ranking cuts to k
            m["candidate_page_recall"] = page_recall(evidence, run.candidates, len(run.candidates))
        m["mrr@10"] = reciprocal_rank(evidence, run.chunks, 10)
    return m


def metric_names(ks: Sequence[int]) -> list[str]:
    """Every metric of the report; page metrics are None (not applicable) for datasets without page labels."""
    return ["doc_hit@1", "doc_hit@3", "doc_recall@3", "doc_recall@5", *(f"page_recall@{k}" for k in ks),
            "node_recall", "candidate_page_recall", "mrr@10", "evidence_doc_coverage", "answer_number_recall",
            "answer_figure_recall"]


def aggregate(per_question: Sequence[dict[str, float]], runs: Sequence[QuestionRun],
              ks: Sequence[int], extra: Sequence[str] = ()) -> dict[str, float | int | None]:
    """Means of the per-question metrics (None where not applicable), latency percentiles, LLM usage.
    ``extra``: a dataset's own metrics, after the common ones."""
    out: dict[str, float | int | None] = {}
    for name in [*metric_names(ks), *extra]:
        vals = [m[name] for m in per_question if name in m]
        out[name] = round(v, 4) if (v := _mean(vals)) is not None else None
    lat = [r.latency_ms for r in runs]
    p50, p95 = percentile(lat, 50), percentile(lat, 95)
    out["latency_ms_p50"] = round(p50, 1) if p50 is not None else None
    out["latency_ms_p95"] = round(p95, 1) if p95 is not None else None
    n = len(runs)
    out["llm_calls"] = round(sum(r.llm_calls for r in runs) / n, 3) if n else 0
    out["tokens"] = round(sum(r.tokens for r in runs) / n, 1) if n else 0
    costs = [r.cost_usd for r in runs if r.cost_usd is not None]
    if costs:
        out["cost_usd"] = round(sum(costs) / len(costs), 6)
    read = [r.reading for r in runs if r.reading]
    for kind in READINGS if read else ():
        out[f"reading_{kind}"] = round(read.count(kind) / len(read), 4)
    out["n"] = n
    return out
