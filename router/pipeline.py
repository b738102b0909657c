"""The query pipeline: prepare → route → plan → locate → rank → (judge → read → rank)* → synthesize.

Each stage is a function over the query's ``QueryState`` (``router.state``) with a typed result:
``routing.route`` and ``routing.plan_documents``, ``locate.search_trees`` and ``locate.locate``,
``ranking.rank``, ``sufficiency.judge`` and ``locate.read_more``, ``synthesize.synthesize``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import asyncpg
import msgspec
import structlog

from kb.core import lexicon as lx
from kb.core.db import ReplicaLostError, supports_iterative_scan
from kb.core.providers import ChatModel, Embedder
from kb.core.providers.chat import TEXT_DELTAS, CountingChat
from kb.core.settings import RetrievalSettings
from kb.core.types import LLMUsage
from router import store
from router.catalog import Catalogs
from router.doccache import DocCache
from router.events import asked_event, event_passages
from router.facts import FactsAnswer, answer_from_facts, facts_table, with_named
from router.locate import Searched, documents_to_read, locate, read_more, search_trees
from router.meaning import MeaningIndex, MeaningMatch, unplaced
from router.metrics import answer_metric, restate
from router.passages import passages
from router.planning import plan_documents
from router.policy import MEANING
from router.question import SOFT, Question, unsure_of
from router.ranking import Ranked, rank
from router.reading import from_llm, read_question, same_reading, unplaced_words, with_days
from router.retrieve import Reranker
from router.routing import route
from router.state import Clock, Evidence, QueryState, QueryVectors, Services, admit, prepare
from router.sufficiency import Judgement, judge
from router.suggest import follow_ups
from router.synthesize import Grounds, check_figures, synthesize
from router.trace import (
    FollowUpTrace,
    QueryResult,
    RetrievalOutcome,
    RetrieveResult,
    Trace,
    build_retrieved,
    build_trace,
)
from router.types import Answer, Oracle, QuestionScope, Request, RoutingResult, ScopePlan
from router.understood import abstained, disagreement, uncomputed

log = structlog.get_logger("router.pipeline")

Event = Callable[[str, Any], Awaitable[None]]
Observer = Callable[[Mapping[str, float], LLMUsage], None]
"""Called once per answered query with its stage timings (ms) and LLM usage (``/metrics``)."""


class QueryPipeline:
    """One instance per process (the runtime's); its caches (query vectors, collection catalogs) outlive queries."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, chat: ChatModel, settings: RetrievalSettings,
                 reranker: Reranker | None = None, observe: Observer | None = None) -> None:
        self.pool, self.chat, self.settings, self.reranker, self.observe = pool, chat, settings, reranker, observe
        self.vectors, self.catalogs, self.meaning = QueryVectors(embedder), Catalogs(pool), MeaningIndex(embedder)
        self.documents = DocCache(settings.doc_cache_mb * 1024 * 1024)
        self._services: Services | None = None

    async def services(self) -> Services:
        if self._services is None:
            self._services = Services(self.pool, self.settings, self.vectors, self.catalogs,
                                      iterative_scan=await supports_iterative_scan(self.pool), meaning=self.meaning,
                                      documents=self.documents)
        return self._services

    async def retrieve(self, req: Request, on_event: Event | None = None, *, chat: ChatModel | None = None,
                       oracle: Oracle | None = None, clock: Clock | None = None) -> RetrievalOutcome:
        """Every stage but synthesis."""
        chat, clock = chat or CountingChat(self.chat), clock or Clock()
        with clock.stage("route"):
            state = await prepare(await self.services(), req, chat)
            routing, scope = await route(state, oracle)
            reading, plan, routing = await read_and_plan(state, scope, routing)
            docs = documents_to_read(plan, routing)
            state = await state.with_plan(plan, [d.doc_id for d in docs])
        with clock.stage("facts"):
            facts = await facts_or_none(state, plan, reading)
        log.info("router.docs_selected", strategy=state.req.strategy, scope=plan.scope.kind,
                 doc_ids=[d.doc_id for d in routing.documents], needed=list(plan.needed))
        if on_event:
            await on_event("routing", routing)
        with clock.stage("tree_search"):
            searched = await search_trees(state, docs, oracle)
        if on_event:
            await on_event("nodes", tuple(p for x in searched for p in x.result.picks))
        with clock.stage("retrieve"):
            ev = await locate(state, routing, docs, searched)
            ranked = await as_passages(state, await judge_and_read(
                state, ev, routing, searched, await rank(state, ev, routing, self.reranker), self.reranker))
        return replace(outcome(state, routing, searched, ev, ranked, clock.ms), facts=facts, reading=reading)

    async def run(self, req: Request, on_event: Event | None = None) -> QueryResult:
        """The whole pipeline; the trace when the request asks for it; the observer in every case."""
        admitted, chat, clock = await admit((await self.services()).pool, req), CountingChat(self.chat), Clock()
        req, out = admitted.req, await self.retrieve(admitted, on_event, chat=chat, clock=clock)
        with clock.stage("synthesize"), streamed(on_event):
            answer = await answer_of(chat, req, out, strict=self.settings.strict_figures)
        clock.total()
        usage = chat.usage()
        if self.observe is not None:
            self.observe(clock.ms, usage)
        trace = build_trace(out.asked or req.query, out, answer, clock.ms, usage) \
            if req.include_trace else None
        log.info("router.query_done", strategy=req.strategy, scope=out.plan.scope.kind,
                 docs=len(out.routing.documents), nodes=len(out.picks), chunks=len(out.evidence),
                 total_ms=round(clock.ms["total"], 1))
        return await query_result((await self.services()).pool, out, answer, trace)


async def query_result(pool: asyncpg.Pool, out: RetrievalOutcome, answer: Answer, trace: Trace | None) -> QueryResult:
    """The response: the answer with its citations, documents and facts, a follow-up's reading, and the follow-ups
    to offer under it (``router.suggest``)."""
    suggestions: tuple[str, ...] = ()
    if not answer.not_found and out.catalog is not None:
        try:
            suggestions = await follow_ups(pool, out.catalog, out.reading,
                                           out.facts if answer.mode.startswith("facts") else None,
                                           [c.doc_id for c in answer.citations], out.within)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:  # the answer stands without them
            log.warning("router.follow_ups_failed", error=f"{type(exc).__name__}: {exc}"[:300])
    return QueryResult(answer=answer.text, citations=list(answer.citations), documents=list(out.routing.documents),
                       facts=facts_table(out.facts, answer), not_found=answer.not_found, trace=trace,
                       suggestions=list(suggestions),
                       read_as=FollowUpTrace(out.asked, out.inherited) if out.inherited else None)


@contextlib.contextmanager
def streamed(on_event: Event | None) -> Iterator[None]:
    """With ``on_event``, the model's answer text goes to it piece by piece as it is written (``answer_delta``;
    ``kb.core.providers.chat.TEXT_DELTAS``); the checked answer follows in the result."""
    if on_event is None:
        yield
        return
    token = TEXT_DELTAS.set(lambda piece: on_event("answer_delta", piece))
    try:
        yield
    finally:
        TEXT_DELTAS.reset(token)


async def retrieved(pipeline: QueryPipeline, req: Request) -> RetrieveResult:
    """Every stage but synthesis, as documents, sections and ranked passages (``POST /kb/retrieve``)."""
    services = await pipeline.services()
    admitted, clock = await admit(services.pool, req), Clock()
    out = await pipeline.retrieve(admitted, chat=CountingChat(pipeline.chat), clock=clock)
    clock.total()
    spans = await store.node_spans(services.pool, list(dict.fromkeys((p.doc_id, p.node_id) for p in out.picks)))
    return build_retrieved(out.asked or admitted.req.query, out, spans, clock.ms)


async def answer_of(chat: ChatModel, req: Request, out: RetrievalOutcome, *, strict: bool) -> Answer:
    """The one synthesis over the evidence, its figures checked; an offline text answer to a ratio or metric the
    facts did not give, whose lead states no figure of its unit, begins by saying it was not computed
    (``router.understood.uncomputed``)."""
    grounds = Grounds(out.plan, out.facts, out.reading.concept if out.reading is not None else "",
                      out.reading.lang if out.reading is not None else "")
    answer = check_figures(await synthesize(chat, out.asked or req.query, list(out.evidence), req.history, grounds),
                           strict=strict, computed=out.facts.text if out.facts else "")
    if out.facts is None and answer.mode.startswith("extractive") and out.reading is not None \
            and (note := uncomputed(out.reading, answer.text)):
        return msgspec.structs.replace(answer, text=f"{note}\n{answer.text}")
    return answer


class ReplicaPipeline(QueryPipeline):
    """The query pipeline over read replicas (``KB_DATABASE_READ_URLS``, ``kb.core.db.ReadPools``): each query's reads
    pinned to one pool, a replica's or the primary's; a query whose replica goes away under it runs again
    (the replica is marked down, so on another one or the primary)."""

    async def services(self) -> Services:
        return (await super().services()).for_query()

    async def retrieve(self, req: Request, on_event: Event | None = None, **kwargs: Any) -> RetrievalOutcome:
        try:
            return await super().retrieve(req, on_event, **kwargs)
        except ReplicaLostError as exc:
            log.warning("router.replica_lost", error=str(exc))
            return await super().retrieve(req, on_event, **kwargs)


async def read_and_plan(state: QueryState, scope: QuestionScope, routing: RoutingResult,
                        ) -> tuple[Question, ScopePlan, RoutingResult]:
    """The question as read (``router.reading``), and the plan with every company it names (who is asked about
    comes from the typed question: ``router.facts.with_named``)."""
    plan, routing = await plan_documents(state, scope, routing)
    reading = state.reading or read_question(state.question, state.catalog.companies)
    if routing.llm_question is not None:  # the metadata step's LLM read it too: valid, its reading is used
        llm, dropped = from_llm(routing.llm_question, state.question, state.catalog.companies)
        if dropped:
            log.info("router.llm_reading_dropped", dropped=list(dropped))
        if llm is not None:
            llm = with_days(llm, reading)
            if not same_reading(llm, reading):
                log.info("router.reading_disagrees", llm=msgspec.to_builtins(llm), rules=msgspec.to_builtins(reading))
            reading = msgspec.structs.replace(llm, rules=reading)
    reading = await by_meaning(state, reading)
    return reading, with_named(plan, reading, state.catalog, state.within), routing


async def by_meaning(state: QueryState, reading: Question) -> Question:
    """A question whose measure no word names: its unplaced words matched to the measure names by embedding
    (``router.meaning``) — taken when clearly nearest, said to be ambiguous when two are close."""
    index = state.services.meaning
    if index is not None and len(reading.unsure) == 1:
        return await _settle(state, reading, *reading.unsure[0])
    if reading.measures or index is None:  # the common case: no second pass over the question
        return reading
    words = unplaced_words(state.question, state.catalog.companies)
    if not words or (reading.operation is None and len(words) > 3):
        return reading
    phrase = unplaced(words)
    found = await (_nearest_zh(state, phrase) if lx.is_zh(phrase) else _nearest(state, phrase))
    if found.ref is not None:
        unknown = tuple(u for u in reading.unknown if u not in SOFT)
        return msgspec.structs.replace(reading, operation=reading.operation or "lookup", measures=(found.ref,),
                                       unknown=unknown, meaning=f"{phrase} ~ {found.name} ({found.score:.2f})")
    if found.close:
        return msgspec.structs.replace(reading, unknown=(*reading.unknown, f"the measure could be {found.name} "
                                                                          f"or {found.close}"))
    return reading


async def _nearest(state: QueryState, phrase: str) -> MeaningMatch:
    """The measure name or printed line of the collection nearest to a phrase (``router.meaning``)."""
    assert state.services.meaning is not None
    vector = (await state.services.vectors.embed([phrase]))[phrase]
    lines = await store.nearest_lines(state.pool, state.collection_id, vector, MEANING.lines,
                                      iterative=state.services.iterative_scan)
    found = await state.services.meaning.match(phrase, vector, [(r["label"], float(r["sim"])) for r in lines])
    log.info("router.measure_by_meaning", phrase=phrase, measure=found.name, score=found.score,
             taken=found.ref is not None, close=found.close, lines=[r["label"] for r in lines])
    return found


async def _nearest_zh(state: QueryState, phrase: str) -> MeaningMatch:
    """The Chinese measure name or printed line of the collection nearest to a phrase by its characters."""
    assert state.services.meaning is not None
    names = await state.services.meaning.zh(state.collection_id, state.catalog.stamp,
                                            lambda: store.zh_line_labels(state.pool, state.collection_id))
    found = names.match(phrase)
    log.info("router.measure_by_meaning", phrase=phrase, measure=found.name, score=found.score,
             taken=found.ref is not None, close=found.close, by="characters")
    return found


async def _settle(state: QueryState, reading: Question, phrase: str, measure: str) -> Question:
    """A one-word measure the reader is not sure of ("unearned revenue": revenue?): the phrase matched by meaning
    decides — another measure or a printed line of the collection it is clearly nearest to replaces it;
    otherwise (nothing near, or the same measure, near by its own word) the doubt stays and no verdict is
    given."""
    found = await _nearest(state, phrase)
    if found.ref is None or found.ref.name == measure:  # its own word makes it near: that settles nothing
        return reading
    measures = tuple(found.ref if m.name == measure else m for m in reading.measures)
    unknown = tuple(u for u in reading.unknown if u != unsure_of(phrase, measure))
    return msgspec.structs.replace(reading, measures=tuple(dict.fromkeys(measures)), unknown=unknown, unsure=(),
                                   meaning=f"{phrase} ~ {found.name} ({found.score:.2f})")


async def facts_or_none(state: QueryState, plan: ScopePlan, reading: Question) -> FactsAnswer | None:
    """The facts answer to the question as read (``router.question``), or none when reading the facts fails:
    the question takes the text path (logged). An answer the reading disagrees with, or that answers a question
    the reading could not fully place, states no verdict (``router.understood``)."""
    try:
        computed = await answer_metric(state.pool, state.catalog, reading, plan) or restate(
            await answer_from_facts(state.pool, state.catalog, reading, plan, within=state.within), reading)
    except (asyncpg.PostgresError, ValueError, KeyError, ZeroDivisionError) as exc:
        log.warning("router.facts_failed", error=f"{type(exc).__name__}: {exc}")
        return None
    if computed is None:
        return None
    why = disagreement(reading, computed)
    return abstained(computed, why, reading.lang) if why else computed


async def as_passages(state: QueryState, ranked: Ranked) -> Ranked:
    """The evidence grown into passages within ``KB_EVIDENCE_TOKENS`` (``router.passages``), and for a question
    about an event over the companies each document's best passage for it (``with_event_passages``)."""
    grown = replace(ranked, evidence=await passages(state.pool, ranked.evidence, state.settings.evidence_tokens))
    return await with_event_passages(state, grown)


async def with_event_passages(state: QueryState, ranked: Ranked) -> Ranked:
    """A multi-document question about an event ("which companies made an acquisition"): each needed document's
    best passage for the event joins the evidence (``router.events``)."""
    event = asked_event(state.question) if state.multi else None
    if event is None or state.plan is None:
        return ranked
    return replace(ranked, evidence=await event_passages(state.pool, state.plan, state.qvec, event, ranked.evidence))


async def judge_and_read(state: QueryState, ev: Evidence, routing: RoutingResult, searched: tuple[Searched, ...],
                         ranked: Ranked, reranker: Reranker | None) -> Ranked:
    """Spec 003: judge, read further, rank again, at most ``max_iterations`` rounds — when the model chose
    nodes in at least one tree (when every tree search fell back offline, it is not asked again)."""
    rounds: list[Judgement] = []
    if not (state.policy.chosen_nodes_first and ev.chosen):
        return ranked
    trees = [x.tree for x in searched]
    for round_no in range(1, state.settings.max_iterations):
        verdict = await judge(state, ranked.evidence, trees, ev.read, round_no)
        rounds.append(verdict)
        if verdict.judgement in {"sufficient", "failed"} or not verdict.read:
            break
        await read_more(state, ev, verdict, trees)
        ranked = await rank(state, ev, routing, reranker)
    return replace(ranked, rounds=tuple(rounds))


def outcome(state: QueryState, routing: RoutingResult, searched: tuple[Searched, ...], ev: Evidence, ranked: Ranked,
            timings_ms: dict[str, float]) -> RetrievalOutcome:
    """The retrieval stages' results as one record (LLM calls of routing, plan, tree search and judgements)."""
    assert state.plan is not None
    rounds = ranked.rounds
    calls = routing.llm_calls + state.plan.llm_calls + sum(x.result.llm_calls for x in searched) + len(rounds)
    chosen = frozenset(c.chunk_id for c in ranked.chunks
                       if (c.doc_id, c.node_id) in ev.chosen and c.source in {"node", "section"})
    return RetrievalOutcome(routing=routing, searches=tuple(x.result for x in searched), picks=ev.picks,
                            chunks=ranked.chunks, rerank_note=ranked.rerank_note, timings_ms=dict(timings_ms),
                            llm_calls=calls, plan=state.plan, evidence=ranked.evidence, policy=state.policy.name,
                            rounds=rounds, chosen_chunks=chosen, asked=state.asked,
                            inherited=state.follow_up.inherited if state.follow_up is not None else (),
                            within=state.within, catalog=state.catalog)
