"""Frozen types of the query pipeline: request, routing, node picks, retrieved chunks, result."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Strategy = Literal["auto", "metadata", "semantic", "description"]
STRATEGIES: tuple[str, ...] = ("auto", "metadata", "semantic", "description")


class Turn(msgspec.Struct, frozen=True):
    role: str
    content: str


class QueryRequest(msgspec.Struct, frozen=True, kw_only=True):
    query: str
    collection: str = "default"
    strategy: str = "auto"
    top_docs: int = 3
    top_k: int = 5
    filters: dict[str, Any] = {}
    expert_knowledge: str | None = None
    history: list[Turn] = []
    rerank: bool | None = None
    include_trace: bool = True
    stream: bool = False


class DocCandidate(msgspec.Struct, frozen=True):
    doc_id: int
    name: str
    score: float
    why: str


class Condition(msgspec.Struct, frozen=True):
    """One validated metadata condition. ``op``: eq | in | range | contains."""

    key: str
    op: str
    value: Any


class RoutingResult(msgspec.Struct, frozen=True):
    strategy_used: str
    documents: tuple[DocCandidate, ...]
    candidates: tuple[DocCandidate, ...] = ()
    conditions: tuple[Condition, ...] = ()
    notes: tuple[str, ...] = ()
    llm_calls: int = 0


class DocNode(msgspec.Struct, frozen=True):
    """A node of a routed document as loaded for tree search."""

    node_id: str
    parent_id: str | None
    level: int
    title: str
    path: tuple[str, ...]
    summary: str
    start: int
    end: int
    unit: str
    is_leaf: bool
    has_text: bool = False  # a parent with text of its own before its first child


class NodePick(msgspec.Struct, frozen=True):
    doc_id: int
    node_id: str
    title: str
    section_path: str
    sub_query: str
    score: float = 0.0
    reason: str = ""


class TreeSearchResult(msgspec.Struct, frozen=True):
    doc_id: int
    picks: tuple[NodePick, ...]
    thinking: str = ""
    mode: str = "offline"  # offline | llm | llm_topdown | offline_fallback
    dropped_ids: tuple[str, ...] = ()
    llm_calls: int = 0


class RetrievedChunk(msgspec.Struct, frozen=True):
    chunk_id: int
    doc_id: int
    doc_name: str
    node_id: str
    section_path: str
    text: str
    page: int | None
    pages: tuple[int, int]
    unit: str
    dense: float
    bm25: float
    fused: float
    score: float
    rerank: float | None = None


class CitationOut(msgspec.Struct, frozen=True):
    marker: int
    doc_id: int
    doc_name: str
    node_id: str
    section_path: str
    pages: tuple[int, int]
    text: str
    unit: str = "page"


class Answer(msgspec.Struct, frozen=True):
    text: str
    citations: tuple[CitationOut, ...]
    mode: str  # llm | extractive | extractive_fallback
    llm_calls: int = 0


class QueryResult(msgspec.Struct, frozen=True):
    answer: str
    citations: list[CitationOut]
    documents: list[DocCandidate]
    trace: dict[str, Any] | None = None
