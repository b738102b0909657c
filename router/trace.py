"""The query trace as typed structs (``POST /kb/query`` with ``include_trace``), built from the stage results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec

from kb.core.types import LLMUsage
from router.catalog import Catalog
from router.facts import FactsAnswer, FactUsed
from router.followup import Inherited
from router.policy import OFFLINE
from router.question import Question
from router.scope import evidence_found
from router.sufficiency import Judgement
from router.types import (
    Answer,
    CitationOut,
    Condition,
    DocCandidate,
    NodePick,
    RetrievedChunk,
    RoutingResult,
    ScopePlan,
    SubQuestion,
    TextFigure,
    TreeSearchResult,
    UnsupportedFigure,
)


class NeededDoc(msgspec.Struct, frozen=True):
    doc_id: int
    name: str
    evidence: int  # evidence pieces handed to synthesis from this document


class ScopeTrace(msgspec.Struct, frozen=True):
    """The scope decision and its reason, needed documents, sub-questions, evidence per document, and the
    needed documents whose evidence does not speak to their sub-question."""

    kind: str
    reason: str
    mode: str
    entities: tuple[str, ...]
    missing_entities: tuple[str, ...]
    needed: tuple[NeededDoc, ...]
    sub_questions: tuple[SubQuestion, ...]
    added_documents: tuple[int, ...]
    dropped: tuple[str, ...]
    nothing_found: tuple[str, ...]


class RoutingTrace(msgspec.Struct, frozen=True):
    candidates: tuple[DocCandidate, ...]
    conditions: tuple[Condition, ...]
    notes: tuple[str, ...]


class TreeSearchTrace(msgspec.Struct, frozen=True):
    doc_id: int
    mode: str
    thinking: str
    dropped_ids: tuple[str, ...]


class ChunkTrace(msgspec.Struct, frozen=True):
    chunk_id: int
    doc_id: int
    node_id: str
    page: int | None
    dense: float
    bm25: float
    fused: float
    score: float
    rerank: float | None
    source: str
    statement: str
    fill: bool  # LLM ranking: not from a node the model chose (it fills the remaining slots)


class FollowUpTrace(msgspec.Struct, frozen=True):
    """A follow-up resolved from the earlier turns of the conversation: the question as routed, read and answered,
    and what it took from which turn."""

    question: str
    inherited: tuple[Inherited, ...]


class Trace(msgspec.Struct, frozen=True):
    scope: ScopeTrace
    strategy_used: str
    routing: RoutingTrace
    tree_search: tuple[TreeSearchTrace, ...]
    nodes: tuple[NodePick, ...]
    ranking: str
    iterations: tuple[Judgement, ...]
    chunks: tuple[ChunkTrace, ...]
    rerank: str
    synthesis: str
    unsupported_figures: tuple[UnsupportedFigure, ...]  # LLM answer sentences stating figures not in their evidence
    timings_ms: dict[str, float]
    llm: LLMUsage
    question: Question | None = None  # the question as read (router.question), when an answer was computed
    follow_up: FollowUpTrace | None = None  # what a follow-up took from the earlier turns (router.followup)
    lead_figure: TextFigure | None = None  # a text answer's lead figure, with its span (router.textfigure)


@dataclass(frozen=True)
class RetrievalOutcome:
    """Everything up to (not including) synthesis; the benchmark consumes this."""

    routing: RoutingResult
    searches: tuple[TreeSearchResult, ...]
    picks: tuple[NodePick, ...]
    chunks: tuple[RetrievedChunk, ...]
    rerank_note: str
    timings_ms: dict[str, float]
    llm_calls: int
    plan: ScopePlan
    evidence: tuple[RetrievedChunk, ...]  # what synthesis gets: top_k, or each needed document's share
    policy: str = OFFLINE.name  # the ranking policy used
    chosen_chunks: frozenset[int] = frozenset()  # LLM policy: chunks of the model's chosen nodes (others fill)
    rounds: tuple[Judgement, ...] = ()  # sufficiency judgements (LLM mode)
    facts: FactsAnswer | None = None  # the answer computed from stored facts (router.facts), when it applies
    reading: Question | None = None  # the question as read beside it (router.question)
    asked: str = ""  # the question the text path ranked and synthesis answers (a follow-up as resolved)
    inherited: tuple[Inherited, ...] = ()  # what a follow-up took from the earlier turns
    within: tuple[int, ...] | None = None  # the documents the request's documents and filters allow (None: any)
    catalog: Catalog | None = None  # the collection's catalog the query read (follow-ups are made from it)


class QueryResult(msgspec.Struct, frozen=True):
    answer: str
    citations: list[CitationOut]
    documents: list[DocCandidate]
    facts: list[FactUsed] = []  # the statement facts an answer computed from (its table)
    not_found: str = ""  # why the evidence does not answer the question ("" when it does)
    trace: Trace | None = None
    suggestions: list[str] = []  # follow-up questions to offer (router.suggest): computed answers only
    read_as: FollowUpTrace | None = None  # a follow-up: the question as resolved, and what it took from earlier turns


def scope_trace(question: str, plan: ScopePlan, routing: RoutingResult,
                evidence: Sequence[RetrievedChunk]) -> ScopeTrace:
    names = {d.doc_id: d.name for d in routing.documents}
    counts = {d: sum(c.holds for c in evidence if c.doc_id == d) for d in names}
    found = evidence_found(question, evidence, plan) if plan.scope.kind != "single" else {}
    return ScopeTrace(
        kind=plan.scope.kind, reason=plan.scope.reason, mode=plan.mode, entities=plan.scope.entities,
        missing_entities=plan.scope.missing,
        needed=tuple(NeededDoc(d, names.get(d, str(d)), counts.get(d, 0)) for d in plan.needed),
        sub_questions=plan.sub_questions, added_documents=plan.added, dropped=plan.dropped,
        nothing_found=tuple(names.get(d, str(d)) for d in plan.needed if not counts.get(d) or found.get(d) is False))


def build_trace(question: str, out: RetrievalOutcome, answer: Answer, timings_ms: Mapping[str, float],
                usage: LLMUsage) -> Trace:
    """The trace of one answered query: the retrieval stages' outcome, the answer's mode, timings and usage."""
    routing, llm_ranking = out.routing, out.policy == "llm"
    return Trace(
        scope=scope_trace(question, out.plan, routing, out.evidence), strategy_used=routing.strategy_used,
        routing=RoutingTrace(routing.candidates, routing.conditions, routing.notes),
        tree_search=tuple(TreeSearchTrace(s.doc_id, s.mode, s.thinking, s.dropped_ids) for s in out.searches),
        nodes=out.picks, ranking=out.policy, iterations=out.rounds,
        chunks=tuple(ChunkTrace(c.chunk_id, c.doc_id, c.node_id, c.page, c.dense, c.bm25, c.fused, c.score, c.rerank,
                                c.source, c.statement, llm_ranking and c.chunk_id not in out.chosen_chunks)
                     for c in out.chunks),
        rerank=out.rerank_note, synthesis=answer.mode, unsupported_figures=answer.unsupported, timings_ms={k: round(v, 1) for k, v in timings_ms.items()},
        llm=usage, question=out.reading, lead_figure=answer.lead,
        follow_up=FollowUpTrace(out.asked, out.inherited) if out.inherited else None)


class Section(msgspec.Struct, frozen=True):
    """A section tree search chose in a routed document: where it lies and why it was read."""

    doc_id: int
    doc_name: str
    node_id: str
    title: str
    section_path: str
    pages: tuple[int, int] | None  # first and last page (or line, per ``unit``); None when unknown
    unit: str
    score: float
    reason: str


class Passage(msgspec.Struct, frozen=True):
    """One ranked evidence passage, as synthesis would get it: its scores and its citation."""

    rank: int
    score: float
    dense: float
    bm25: float
    source: str  # node | cross_ref | direct | statement | section
    citation: CitationOut  # marker = rank


class RetrieveResult(msgspec.Struct, frozen=True):
    """``POST /kb/retrieve``: what the router found for a question, without an answer."""

    question: str  # as routed and retrieved (a follow-up resolved from the conversation)
    strategy_used: str
    documents: list[DocCandidate]
    sections: list[Section]
    passages: list[Passage]
    facts: list[FactUsed] = []  # statement facts the question computes from, when it does
    routing_notes: list[str] = []
    timings_ms: dict[str, float] = {}


def build_retrieved(question: str, out: RetrievalOutcome, spans: Mapping[tuple[int, str], tuple[int, int, str]],
                    timings_ms: Mapping[str, float]) -> RetrieveResult:
    """The retrieval outcome as documents, sections (with their page spans) and ranked passages."""
    names = {d.doc_id: d.name for d in out.routing.documents}
    sections = []
    for p in out.picks:
        span = spans.get((p.doc_id, p.node_id))
        sections.append(Section(p.doc_id, names.get(p.doc_id, str(p.doc_id)), p.node_id, p.title, p.section_path,
                                (span[0], span[1]) if span else None, span[2] if span else "page", round(p.score, 4),
                                p.reason))
    passages = [Passage(rank=i, score=round(c.score, 4), dense=round(c.dense, 4), bm25=round(c.bm25, 4),
                        source=c.source,
                        citation=CitationOut(marker=i, doc_id=c.doc_id, doc_name=c.doc_name, node_id=c.node_id,
                                             section_path=c.section_path, pages=c.pages, text=c.text, unit=c.unit,
                                             chunk_id=c.chunk_id if c.chunk_id > 0 else None))
                for i, c in enumerate(out.evidence, 1)]
    return RetrieveResult(question=question, strategy_used=out.routing.strategy_used,
                          documents=list(out.routing.documents), sections=sections, passages=passages,
                          facts=list(out.facts.used) if out.facts is not None else [],
                          routing_notes=list(out.routing.notes),
                          timings_ms={k: round(v, 1) for k, v in timings_ms.items()})
