"""One query's state: what every stage reads (``QueryState``, frozen, built by ``prepare``) and the evidence
gathered so far (``Evidence``, one owner that grows it over sufficiency rounds)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import asyncpg
import numpy as np

from kb.core.collections import lookup_collection_id
from kb.core.db import ReadPools
from kb.core.errors import ValidationError
from kb.core.providers import ChatModel, Embedder
from kb.core.settings import RetrievalSettings
from kb.core.telemetry import Clock as Clock  # re-exported: the pipeline times its stages with it
from kb.core.vocab import question_statements
from router import store
from router.catalog import Catalog, Catalogs
from router.crosslang import bridged
from router.doccache import DocCache, DocReads
from router.followup import FollowUp, resolve
from router.meaning import MeaningIndex
from router.metadata import conditions_from_filters
from router.policy import RankingPolicy, policy_for
from router.question import Question
from router.reading import read_question
from router.scope import classify_scope, effective_top_docs, missing_entities
from router.store import QueryTerms
from router.types import (
    Admitted,
    NodePick,
    QueryRequest,
    QuestionScope,
    Request,
    RetrievedChunk,
    ScopePlan,
    checked,
)


class QueryVectors:
    """Query embeddings with a small cache shared by the queries of one pipeline (safe under concurrency):
    the texts not cached yet are embedded in one batch."""

    def __init__(self, embedder: Embedder, max_entries: int = 2000) -> None:
        self.embedder = embedder
        self.max_entries = max_entries
        self._cache: dict[str, np.ndarray] = {}

    async def embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        out = {t: v for t in texts if (v := self._cache.get(t)) is not None}
        missing = [t for t in dict.fromkeys(texts) if t not in out]
        if missing:
            vecs = await asyncio.to_thread(self.embedder.embed_batch, missing)
            out.update(zip(missing, vecs, strict=True))
            if len(self._cache) > self.max_entries:
                self._cache.clear()
            self._cache.update(zip(missing, vecs, strict=True))
        return {t: out[t] for t in texts}


@dataclass(frozen=True)
class Services:
    """What a query runs on (one per pipeline)."""

    pool: asyncpg.Pool
    settings: RetrievalSettings
    vectors: QueryVectors
    catalogs: Catalogs
    iterative_scan: bool
    meaning: MeaningIndex | None = None  # measure names embedded once (router.meaning)
    documents: DocCache | None = None  # documents' chunks and vectors kept between queries (router.doccache)

    def for_query(self) -> Services:
        """The services of one query: with read replicas (``KB_DATABASE_READ_URLS``), its reads pinned to one
        pool, a replica's or the primary's (one replica's state for the whole query)."""
        return replace(self, pool=self.pool.pin()) if isinstance(self.pool, ReadPools) else self


@dataclass(frozen=True)
class QueryState:
    """Everything a stage may read about one query; stages return results, they do not change it."""

    req: QueryRequest
    chat: ChatModel
    services: Services
    collection_id: int
    catalog: Catalog
    question: str  # what routing and retrieval search for (a follow-up resolved from the earlier turns)
    vectors: Mapping[str, np.ndarray]  # the question's, then every sub-question's
    terms: QueryTerms
    within: tuple[int, ...] | None  # the documents the request's documents and filters allow (None: any)
    scope: QuestionScope  # by the rules; the routing stage may widen it
    missing: tuple[str, ...]  # names in the question no document of the collection mentions
    top_docs: int
    policy: RankingPolicy
    statements: frozenset[str]  # the financial statements the question names
    nearest: DocReads  # the query's reads of its documents' chunks and vectors (cached by the process)
    reading: Question | None = None  # the question as read (router.reading): what facts and filters compute
    plan: ScopePlan | None = None
    doc_q: Mapping[int, str] = field(default_factory=dict)  # each routed document's (sub-)question
    follow_up: FollowUp | None = None  # the question resolved against the conversation (router.followup)
    given: tuple[int, ...] = ()  # the request's documents (routing skipped), in its order; () → routed

    @property
    def pool(self) -> asyncpg.Pool:
        return self.services.pool

    @property
    def settings(self) -> RetrievalSettings:
        return self.services.settings

    @property
    def asked(self) -> str:
        """The question the text path ranks and answers: a follow-up as resolved, else the request's own."""
        return self.follow_up.text if self.follow_up is not None and self.follow_up.settled else self.req.query

    @property
    def qvec(self) -> np.ndarray:
        return self.vectors[self.question]

    @property
    def multi(self) -> bool:
        return self.plan is not None and self.plan.scope.kind != "single"

    async def with_plan(self, plan: ScopePlan, doc_ids: Sequence[int]) -> QueryState:
        """The state with the plan and the sub-question of each document to read (embedded in one call)."""
        doc_q = {d: (s.question if (s := plan.sub_question(d)) else self.question) for d in doc_ids}
        vectors = await self.services.vectors.embed(list(dict.fromkeys([self.question, *doc_q.values()])))
        return replace(self, plan=plan, doc_q=doc_q, vectors={**self.vectors, **vectors})

    async def embed(self, texts: Sequence[str]) -> Mapping[str, np.ndarray]:
        """Vectors of further texts (the sub-queries an LLM tree search wrote), with the state's own."""
        missing = [t for t in texts if t not in self.vectors]
        return {**self.vectors, **(await self.services.vectors.embed(missing) if missing else {})}


def retrieval_query(req: QueryRequest, follow_up: FollowUp | None = None) -> str:
    """The text used for routing and retrieval: a follow-up resolved from the earlier turns (``router.followup``:
    "What about 2022? [Helios Robotics, net income, fiscal 2022]"), a question naming whom it is about as it is; otherwise a
    short follow-up borrows the previous user turn (spec 003)."""
    if follow_up is not None and follow_up.settled:
        return follow_up.text
    q = req.query.strip()
    prev = [t.content for t in req.history if t.role == "user"]
    if prev and len(q.split()) < 12:
        return f"{q} (context: {prev[-1][:300]})"
    return q


async def preflight(pool: asyncpg.Pool, req: QueryRequest) -> Admitted:
    """What a request must pass before any work (and before a streamed answer starts, so that it fails with
    its status, not an error event): an existing collection (its id), a question in words, well-formed filters,
    and each document it names found in that collection (400 naming those it does not hold)."""
    collection_id = await lookup_collection_id(pool, req.collection)
    if len(re.findall(r"\w", req.query)) < 2:
        raise ValidationError("the question has nothing to search for: ask in words (at least two letters or "
                              "digits)")
    if req.filters:
        conditions_from_filters(req.filters)
    return Admitted(req=req, collection_id=collection_id,
                    documents=await given_documents(pool, collection_id, req) if req.documents else ())


async def given_documents(pool: asyncpg.Pool, collection_id: int, req: QueryRequest) -> tuple[int, ...]:
    """``req.documents`` (ids or names, any case) as ids in the order given, each once; a ``ValidationError``
    (400: the request names them) naming those the collection does not hold."""
    ids = [r for r in req.documents if isinstance(r, int)]
    names = [r for r in req.documents if isinstance(r, str)]
    rows = await store.documents_by_ref(pool, collection_id, ids, names)
    by_id = {d: d for d, _ in rows}
    by_name = {n.lower(): d for d, n in rows}
    found = [by_id.get(r) if isinstance(r, int) else by_name.get(r.lower()) for r in req.documents]
    if missing := [repr(r) for r, d in zip(req.documents, found, strict=True) if d is None]:
        raise ValidationError(f"no document {', '.join(missing)} in collection {req.collection!r} "
                            "(documents are named by their id or name, as GET /kb/documents lists them)")
    return tuple(dict.fromkeys(d for d in found if d is not None))


async def admit(pool: asyncpg.Pool, req: Request) -> Admitted:
    """The one validation of a request (an ``Admitted`` one passes as it is): its bounds (``checked``), then the
    pre-flight."""
    if isinstance(req, Admitted):
        return req
    return await preflight(pool, checked(req))


async def prepare(services: Services, request: Request, chat: ChatModel) -> QueryState:
    """The one place that admits the request (unless admitted already), embeds the question, reads the
    collection's catalog and applies the filters."""
    admitted = await admit(services.pool, request)
    pool, req, collection_id = services.pool, admitted.req, admitted.collection_id
    catalog = await services.catalogs.get(collection_id)
    if not catalog.docs:
        raise ValidationError(f"collection {req.collection!r} holds no documents: nothing to search; ingest "
                              "some first (POST /kb/admin/ingest, the web UI or `kb ingest`)")
    follow_up = await asyncio.to_thread(resolve, req.query, req.history, catalog.companies) if req.history \
        else resolve(req.query, (), catalog.companies)  # earlier turns are read off the event loop
    question = retrieval_query(req, follow_up)
    reading = follow_up.question if question == follow_up.text else read_question(question, catalog.companies)
    scope = classify_scope(question, catalog.known, reading)
    question = bridged(question, reading, catalog.languages)  # searched in the documents' language too
    vectors = await services.vectors.embed([question])
    missing = await missing_entities(pool, collection_id, req.query, catalog.known)
    within = admitted.documents or None
    if req.filters:
        allowed = tuple(d for d, _ in await store.run_filter(pool, collection_id, conditions_from_filters(req.filters)))
        kept = set(allowed)
        within = tuple(d for d in within if d in kept) if within is not None else allowed
    return QueryState(
        req=req, chat=chat, services=services, collection_id=collection_id, catalog=catalog, question=question,
        vectors=vectors, terms=await store.query_terms(pool, collection_id, question, n_docs=catalog.stamp.documents), within=within, scope=scope,
        missing=missing, top_docs=effective_top_docs(req.top_docs, scope, catalog.known), policy=policy_for(chat),
        statements=question_statements(question), reading=reading, follow_up=follow_up, given=admitted.documents,
        nearest=DocReads(pool, services.documents or DocCache(0), (collection_id, catalog.stamp)))


NodeKey = tuple[int, str]


@dataclass
class Evidence:
    """The candidate chunks of one query and the nodes they come from, grown by locating and by sufficiency
    rounds; its owner is the query's run."""

    doc_q: Mapping[int, str]
    chunks: list[RetrievedChunk] = field(default_factory=list)
    picks: tuple[NodePick, ...] = ()
    prior: dict[NodeKey, float] = field(default_factory=dict)  # tree-search prior of each node read
    chosen: dict[NodeKey, tuple[int, int]] = field(default_factory=dict)  # (node rank, doc rank): LLM choices

    @property
    def read(self) -> set[NodeKey]:
        return {(p.doc_id, p.node_id) for p in self.picks}

    def add_nodes(self, picks: Sequence[NodePick], found: Sequence[RetrievedChunk], prior: float) -> None:
        """Nodes read on purpose (cross-references, a judgement's request) and the chunks found in them."""
        self.chunks.extend(found)
        for p in picks:
            self.prior[(p.doc_id, p.node_id)] = prior
        self.picks = self.picks + tuple(picks)

    def add_candidates(self, found: Sequence[RetrievedChunk], node_prior: float,
                       reason: Callable[[RetrievedChunk], str]) -> None:
        """Chunks found outside tree search join the candidates once each; a node not read yet gets
        ``node_prior`` and a pick with ``reason``."""
        seen_ids = {c.chunk_id for c in self.chunks}
        for c in found:
            if c.chunk_id in seen_ids:
                continue
            seen_ids.add(c.chunk_id)
            self.chunks.append(c)
            if (c.doc_id, c.node_id) not in self.prior:
                self.prior[(c.doc_id, c.node_id)] = node_prior
                self.picks = self.picks + (NodePick(
                    doc_id=c.doc_id, node_id=c.node_id, title=c.section_path.split(" > ")[-1],
                    section_path=c.section_path, sub_query=self.doc_q[c.doc_id], reason=reason(c)),)


