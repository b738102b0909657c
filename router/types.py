"""Frozen types of the query pipeline: request, routing, node picks, retrieved chunks, result."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Annotated, Any, Literal, get_args

import msgspec

from kb.core.errors import ValidationError

Strategy = Literal["auto", "metadata", "semantic", "description"]
"""The routing strategies, declared once: ``router.routing.ROUTERS`` must register exactly these, and the API
(``QueryRequest.strategy``), ``kb query --strategy`` and ``kb bench`` take their lists from here."""
STRATEGIES: tuple[str, ...] = get_args(Strategy)
FLAT_MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")
"""The flat baselines of ``router.flat.FlatRetriever`` (no routing); ``kb bench`` runs them as ``flat-<mode>``."""


NO_NUL = r"^[^\x00]*$"
Text = Annotated[str, msgspec.Meta(pattern=NO_NUL)]

# the bounds of a query request: the API schema, the MCP tool and ``checked`` read these, nothing else
MAX_QUERY_CHARS = 4000
MAX_EXPERT_CHARS = 20_000
MAX_HISTORY_TURNS = 20
MAX_TURN_CHARS = 8000
MAX_FILTER_KEYS = 32
MAX_FILTER_JSON_CHARS = 8000
MAX_TOP_DOCS = 20
MAX_TOP_K = 50
DEFAULT_TOP_K = 5
MAX_COLLECTION_CHARS = 64
COLLECTION_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_COLLECTION_CHARS - 1}}}$"


class Turn(msgspec.Struct, frozen=True):
    role: Literal["user", "assistant", "system"]
    content: Annotated[str, msgspec.Meta(max_length=MAX_TURN_CHARS, pattern=NO_NUL)]


TopDocs = Annotated[Annotated[int, msgspec.Meta(ge=1, le=MAX_TOP_DOCS)] | None, msgspec.Meta(
    description=f"Documents to route (1-{MAX_TOP_DOCS}). Unset: chosen by the question's scope — 3 for a "
                "single-document question, the named entities' documents for a comparison or change over time, "
                "10 for a list.")]
TopK = Annotated[int, msgspec.Meta(
    ge=1, le=MAX_TOP_K,
    description=f"Evidence pieces handed to synthesis in total (1-{MAX_TOP_K}). A multi-document question gives "
                "every needed document at least max(1, top_k // n) of them, so the total is max(top_k, n) for n "
                "needed documents.")]


DocumentRef = Annotated[int, msgspec.Meta(ge=1)] | Annotated[str, msgspec.Meta(min_length=1, max_length=512,
                                                                                pattern=NO_NUL)]
"""A stored document by its id or its name (as ``GET /kb/documents`` lists them)."""


class QueryRequest(msgspec.Struct, frozen=True, kw_only=True):
    query: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_CHARS,
                                       pattern=r"^[^\x00]*[^\x00\s][^\x00]*$",
                                       description=f"The question (1-{MAX_QUERY_CHARS} characters, not only "
                                                   "spaces).")]
    collection: Annotated[str, msgspec.Meta(pattern=COLLECTION_PATTERN)] = "default"
    strategy: Strategy = "auto"
    top_docs: TopDocs = None
    top_k: TopK = DEFAULT_TOP_K
    filters: Annotated[dict[str, Any], msgspec.Meta(
        max_length=MAX_FILTER_KEYS,
        description=f"{{key: value | [values] | {{gte, lte}} | {{contains}}}}; at most {MAX_FILTER_KEYS} keys")] = {}
    documents: Annotated[list[DocumentRef], msgspec.Meta(
        max_length=MAX_TOP_DOCS,
        description=f"Ask these documents only (1-{MAX_TOP_DOCS} ids or names from GET /kb/documents): routing is "
                    "skipped (the trace says so); filters, when given too, narrow them further.",
        examples=[[3], ["3M_2018_10K.pdf", "3M_2022_10K.pdf"]])] = []
    expert_knowledge: Annotated[str, msgspec.Meta(max_length=MAX_EXPERT_CHARS, pattern=NO_NUL)] | None = None
    history: Annotated[list[Turn], msgspec.Meta(max_length=MAX_HISTORY_TURNS)] = []
    rerank: bool | None = None
    include_trace: bool = True
    stream: bool = False


_PATTERN_HINTS = {
    "query": "must not be empty or only spaces, nor contain NUL characters",
    "collection": "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit",
}


def _readable(message: str) -> str:
    """msgspec's message, with a broken pattern said in words ("query must not be empty …")."""
    if "matching regex" not in message:
        return f"invalid query request: {message}"
    path = re.search(r"at `\$\.(\w+)", message)
    field = path.group(1) if path else "request"
    return f"{field} {_PATTERN_HINTS.get(field, 'must not contain NUL characters')}"


def checked(req: QueryRequest) -> QueryRequest:
    """``req`` validated against ``QueryRequest``'s own bounds (a request built in Python skips them) and the
    size of its filters as JSON; ``ValidationError`` (400) otherwise. Every caller goes through here."""
    try:
        req = msgspec.convert(msgspec.to_builtins(req), QueryRequest)
    except msgspec.ValidationError as exc:
        raise ValidationError(_readable(str(exc))) from exc
    filters = json.dumps(req.filters, default=str)
    if len(filters) > MAX_FILTER_JSON_CHARS:
        raise ValidationError(f"filters is larger than {MAX_FILTER_JSON_CHARS} characters of JSON")
    if "\\u0000" in filters or "\x00" in filters:
        raise ValidationError("NUL characters are not allowed in the request")
    return req


class Admitted(msgspec.Struct, frozen=True):
    """A request admitted once, at the pipeline's entry (``router.state.admit``): within ``QueryRequest``'s
    bounds (``checked``), its collection found (``collection_id``), its question in words, its filters well
    formed. The stages take it as it is; nothing validates it again."""

    req: QueryRequest
    collection_id: int
    documents: tuple[int, ...] = ()  # ``req.documents`` as ids, in the order given (none: routing decides)


Request = QueryRequest | Admitted
"""What the pipeline's entry points take: a request, admitted there, or one admitted already."""


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
    scope_hint: str = ""  # the LLM's scope for the question, from the metadata call (auto, metadata)
    llm_question: Any = None  # the LLM's typed question from the same call, unvalidated (router.reading.from_llm)


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
    source: str = "node"  # node | cross_ref | direct (chunk hit) | statement (a named statement's page) | section
    statement: str = ""  # the financial statement kind of its page ("cash_flow"), else ""
    holds: int = 1  # evidence passages (``router.passages``): how many ranked evidence chunks it holds


class CitationOut(msgspec.Struct, frozen=True):
    marker: int
    doc_id: int
    doc_name: str
    node_id: str
    section_path: str
    pages: tuple[int, int]
    text: str
    unit: str = "page"
    chunk_id: int | None = None  # the retrieved chunk (page previews highlight it)
    quote: str = ""  # the sentence(s) or row of ``text`` the answer cites (offline answers), shown highlighted
    printed_page: str | None = None  # the number pages[0] prints (PDF page label or header/footer), if any


class UnsupportedFigure(msgspec.Struct, frozen=True):
    """A sentence of an LLM answer stating figures its cited evidence does not state."""

    sentence: str
    figures: tuple[str, ...]
    dropped: bool  # KB_STRICT_FIGURES: the sentence was removed from the answer


class TextFigure(msgspec.Struct, frozen=True):
    """The figure a text answer leads with (``router.textfigure``): as printed, its span in months (12 a year, 9,
    6, 3; 0 a point in time or not said) and its period end when the sentence writes a date."""

    figure: str
    months: int = 0
    ends: dt.date | None = None


class Answer(msgspec.Struct, frozen=True):
    text: str
    citations: tuple[CitationOut, ...]
    mode: str  # llm | extractive | extractive_fallback | facts | facts_llm
    llm_calls: int = 0
    unsupported: tuple[UnsupportedFigure, ...] = ()  # LLM answers: figures not in the cited evidence
    not_found: str = ""  # why the evidence does not answer ("" when it does)
    lead: TextFigure | None = None  # a text answer: the figure its lead sentence states, with its span


class QuestionScope(msgspec.Struct, frozen=True):
    """single | multi (comparison, change over time) | list (aggregation over many documents)."""

    kind: str
    reason: str
    entities: tuple[str, ...] = ()  # known company values named in the question
    key: str = ""  # the metadata key the entities are values of
    series: bool = False  # a change over time: every document of the entity is needed
    missing: tuple[str, ...] = ()  # names in the question that no document of the collection mentions
    renamed: tuple[tuple[str, str], ...] = ()  # (entity value, the value it is one company with): former names


class SubQuestion(msgspec.Struct, frozen=True):
    """The question restricted to one routed document."""

    doc_id: int
    doc_name: str
    question: str
    entity: str = ""
    period: str = ""


class ScopePlan(msgspec.Struct, frozen=True):
    """The scope, the documents that get an evidence share, and their sub-questions."""

    scope: QuestionScope
    needed: tuple[int, ...]
    sub_questions: tuple[SubQuestion, ...] = ()
    mode: str = "offline"  # offline | llm | offline_fallback
    dropped: tuple[str, ...] = ()  # what validation removed from the LLM's decomposition
    added: tuple[int, ...] = ()  # documents added because a named entity had none routed
    llm_calls: int = 0

    def sub_question(self, doc_id: int) -> SubQuestion | None:
        return next((s for s in self.sub_questions if s.doc_id == doc_id), None)


class Oracle(msgspec.Struct, frozen=True):
    """Benchmark diagnostics: route exactly ``docs`` (ids, best first) and/or choose exactly ``nodes``
    ((doc_id, node_id) pairs) instead of routing / tree search, to bound what each stage could gain."""

    docs: tuple[int, ...] = ()
    nodes: tuple[tuple[int, str], ...] = ()
