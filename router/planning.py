"""The plan stage: complete the routing for the entities a question names, then the documents that need an
evidence share and their sub-questions — offline by rules (``router.scope``), or confirmed and written by one
LLM call (``query.plan``), validated, offline on failure."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import structlog

from kb.core.errors import LLMError
from kb.core.periods import states_period
from kb.core.providers.steps import ask
from kb.core.vocab import ANNUAL_TYPES
from router import store
from router.metadata import QUARTER_KEYS, meta_int
from router.prompts import PLAN, plan_prompt
from router.question import Question
from router.scope import (
    complete_routing,
    doc_entity,
    doc_period,
    needed_documents,
    offline_sub_questions,
    validate_plan,
)
from router.state import QueryState
from router.types import Condition, DocCandidate, QuestionScope, RoutingResult, ScopePlan

log = structlog.get_logger("router.planning")


async def plan_documents(state: QueryState, scope: QuestionScope,
                         routing: RoutingResult) -> tuple[ScopePlan, RoutingResult]:
    """The routing completed for named entities, and the plan over it."""
    routing = within_span(state, scope, latest_reports(state, scope, routing))
    if scope.kind == "single":
        return ScopePlan(scope=msgspec.structs.replace(scope, missing=state.missing),
                         needed=tuple(d.doc_id for d in routing.documents[:1])), routing
    extra: list[DocCandidate] = []
    if scope.kind == "multi" and scope.entities and scope.key:
        rows = await store.run_filter(state.pool, state.collection_id,
                                      [Condition(scope.key, "in", list(scope.entities))])
        allowed = set(state.within) if state.within is not None else None
        extra = [DocCandidate(d, n, 0.0, "metadata match") for d, n in rows if allowed is None or d in allowed]
    pool_ids = [d.doc_id for d in routing.documents] + [c.doc_id for c in routing.candidates] + \
        [c.doc_id for c in extra]
    metas = state.catalog.metadata(list(dict.fromkeys(pool_ids)))
    widened = msgspec.structs.replace(routing, candidates=(*routing.candidates, *extra))
    completed, added = complete_routing(widened, scope, metas, state.top_docs)
    completed = within_span(state, scope, completed)
    completed = msgspec.structs.replace(completed, candidates=routing.candidates)
    return await plan(state, scope, completed, metas, added), completed


def latest_reports(state: QueryState, scope: QuestionScope, routing: RoutingResult) -> RoutingResult:
    """A question about a company that states no period is about its latest report: a routed document whose
    company has a later report in the collection gives its place to that report (the top document of a
    single-document question, each company's first document otherwise). A change over time, a stated year
    or quarter, or an explicit filter leave the routing as it is."""
    q = state.question
    if scope.series or state.within is not None or states_period(q):
        return routing
    docs = list(routing.documents)
    seen: set[tuple[int, ...]] = set()
    for d in list(docs[:1] if scope.kind == "single" else docs):
        reports = state.catalog.company_reports(d.doc_id)
        if len(reports) < 2 or reports in seen:
            continue
        seen.add(reports)
        if _HISTORY.search(q):  # "historically", "each year": the latest annual report holds the years
            reports = tuple(r for r in reports if _annual(state, r)) or reports
        latest = reports[0]
        if latest == d.doc_id or _end(state, latest) <= _end(state, d.doc_id):
            continue
        moved = next((x for x in docs if x.doc_id == latest), None) or DocCandidate(
            latest, state.catalog.names([latest]).get(latest, str(latest)), d.score,
            f"the latest report of the company (the question states no period); {d.why}")
        docs = [x for x in docs if x.doc_id != latest]
        docs.insert(docs.index(d), moved)
    if docs == list(routing.documents):
        return routing
    while len(docs) > len(routing.documents):  # the latest report takes a place, it adds none: top_docs holds
        docs.pop()
    return msgspec.structs.replace(routing, documents=tuple(docs))


def within_span(state: QueryState, scope: QuestionScope, routing: RoutingResult) -> RoutingResult:
    """The routing of a change over a stated span kept to that span (``span_routing``) over the catalog."""
    if state.reading is None or not scope.series:
        return routing

    def period(doc_id: int) -> tuple[int, int] | None:
        meta = state.catalog.metadata([doc_id]).get(doc_id, {})
        year = meta_int(meta, ("fiscal_year",))
        return None if year is None else (year, meta_int(meta, QUARTER_KEYS) or 4)

    return span_routing(state.reading, routing, period, state.catalog.company_reports,
                        lambda d: state.catalog.names([d]).get(d, str(d)))


def span_routing(q: Question, routing: RoutingResult, period: Callable[[int], tuple[int, int] | None],
                 reports: Callable[[int], tuple[int, ...]], name: Callable[[int], str]) -> RoutingResult:
    """A change over a stated span ("从2017年第三季度到2024年第一季度", "from FY2019 to FY2023") reads the reports
    of that span: a routed report whose period (fiscal year, quarter; 4 for a year) ends before the span starts
    cannot hold a figure of it. It gives its place to a report of the same company inside the span that routing
    missed (``reports``: the company's, latest first), or is dropped when the company's reports inside the span
    are read."""
    marks = sorted((p.year, p.quarter) for p in q.periods if p.year)
    if q.operation not in ("series", "change") or len(marks) < 2:
        return routing
    start, end = (marks[0][0], marks[0][1] or 1), (marks[-1][0], marks[-1][1] or 4)

    def inside(doc_id: int) -> bool:
        p = period(doc_id)
        return p is not None and start <= p <= end

    def before(doc_id: int) -> bool:
        p = period(doc_id)
        return p is not None and p < start

    docs, routed = list(routing.documents), {d.doc_id for d in routing.documents}
    for i, d in enumerate(docs):
        if not before(d.doc_id):
            continue
        found = next((r for r in reports(d.doc_id) if r not in routed and inside(r)), None)
        if found is not None:
            routed.add(found)
            docs[i] = DocCandidate(found, name(found), d.score, f"inside the span the question states; in place of "
                                                                f"{d.name}")
    read_inside = {r for d in docs if inside(d.doc_id) for r in reports(d.doc_id)}
    docs = [d for d in docs if not (d.doc_id in read_inside and before(d.doc_id))]
    return msgspec.structs.replace(routing, documents=tuple(docs)) if docs != list(routing.documents) else routing


_HISTORY = re.compile(r"(?i)\b(?:historical(?:ly)?|history|over (?:the )?(?:past|last) \w+ years|each year|every year"
                      r"|annual(?:ly)?|year[- ]over[- ]year|consistent(?:ly)?|long[- ]term trend)\b")


def _annual(state: QueryState, doc_id: int) -> bool:
    return str(state.catalog.metadata([doc_id]).get(doc_id, {}).get("doc_type") or "") in ANNUAL_TYPES


def _end(state: QueryState, doc_id: int) -> str:
    meta = state.catalog.metadata([doc_id]).get(doc_id, {})
    return str(meta.get("period_end_date") or meta.get("report_date") or "")


async def plan(state: QueryState, scope: QuestionScope, routing: RoutingResult,
               metas: Mapping[int, Mapping[str, Any]], added: tuple[int, ...]) -> ScopePlan:
    """Needed documents and their sub-questions: offline rules, or one LLM call (validated, offline on failure)."""
    question, chat, top_docs = state.question, state.chat, state.top_docs
    needed = needed_documents(routing, scope, metas)
    base = ScopePlan(scope=msgspec.structs.replace(scope, missing=state.missing), needed=needed,
                     sub_questions=offline_sub_questions(question, scope, routing, metas, needed, state.reading)
                     if scope.kind != "single" else (), added=added)
    if scope.kind == "single" or chat.offline or len(routing.documents) < 2:
        return base
    try:
        reply = await ask(chat, PLAN, _plan_prompt(state, routing, metas, scope))
        kind, reason = reply.scope, reply.reason[:300]
        kept, dropped = validate_plan(reply, routing, top_docs)
    except LLMError as exc:
        log.warning("router.plan_llm_failed", error=str(exc))
        return msgspec.structs.replace(base, mode="offline_fallback", llm_calls=1,
                                       dropped=(f"LLM plan failed: {exc}",))
    if dropped:
        log.info("router.plan_dropped", dropped=dropped)
    llm_scope = msgspec.structs.replace(base.scope, kind=kind, reason=f"LLM: {reason}" if reason else "LLM")
    if kind == "single":
        return ScopePlan(scope=llm_scope, needed=base.needed[:1], sub_questions=(), mode="llm",
                         dropped=tuple(dropped), added=base.added, llm_calls=1)
    if not kept:  # nothing usable: the offline decomposition, said so
        return msgspec.structs.replace(base, scope=llm_scope, mode="offline_fallback", llm_calls=1,
                                       dropped=(*dropped, "no valid sub-question: offline decomposition"))
    by_doc = {s.doc_id: s for s in offline_sub_questions(question, scope, routing, metas, [d for d, _ in kept],
                                                          state.reading)}
    subs = tuple(msgspec.structs.replace(by_doc[d], question=q) for d, q in kept)
    return ScopePlan(scope=llm_scope, needed=tuple(d for d, _ in kept), sub_questions=subs, mode="llm",
                     dropped=tuple(dropped), added=base.added, llm_calls=1)


def _plan_prompt(state: QueryState, routing: RoutingResult, metas: Mapping[int, Mapping[str, Any]],
                 scope: QuestionScope) -> str:
    descriptions = {d: f.description for d, f in state.catalog.fields([d.doc_id for d in routing.documents]).items()}
    lines = []
    for d in routing.documents:
        meta = metas.get(d.doc_id, {})
        lines.append(f'- doc_id "{d.doc_id}": {d.name} — {doc_entity(meta) or "?"}, {doc_period(meta) or "?"}; '
                     f"{descriptions.get(d.doc_id, '')[:200]}")
    return plan_prompt(state.question, lines, scope.kind, scope.reason, state.top_docs)
