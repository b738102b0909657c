"""Locating evidence in the routed documents: tree search in each (concurrently), hybrid retrieval inside the
chosen nodes, the nodes their text cross-references, chunk hits and named statements' pages, and the nodes a
sufficiency judgement asks for."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from kb.core.vocab import STATEMENT_LABELS
from router import store
from router.retrieve import direct_hits, retrieve_in_nodes, statement_hits
from router.scope import evidence_share
from router.state import Evidence, QueryState
from router.sufficiency import Judgement
from router.tree_search import LoadedTree, TreeSearcher, find_cross_references, load_tree, resolve_reference
from router.types import (
    DocCandidate,
    NodePick,
    Oracle,
    RetrievedChunk,
    RoutingResult,
    ScopePlan,
    TreeSearchResult,
)


@dataclass(frozen=True)
class Searched:
    """One document's tree and what tree search chose in it."""

    tree: LoadedTree
    result: TreeSearchResult


def documents_to_read(plan: ScopePlan, routing: RoutingResult) -> list[DocCandidate]:
    """A multi-document question reads its needed documents only (each with its own sub-question)."""
    if plan.scope.kind != "single":
        return [d for d in routing.documents if d.doc_id in plan.needed]
    return list(routing.documents)


async def search_trees(state: QueryState, docs: Sequence[DocCandidate], oracle: Oracle | None = None,
                       ) -> tuple[Searched, ...]:
    """Tree search in each document under its (sub-)question, at most ``doc_concurrency`` at once."""
    searcher = TreeSearcher(state.nearest, state.chat, state.settings,
                            state.policy, expert_knowledge=state.req.expert_knowledge, history=state.req.history)
    sem = asyncio.Semaphore(max(1, state.settings.doc_concurrency))

    async def search_doc(doc_id: int, name: str) -> Searched:
        async with sem:
            q = state.doc_q[doc_id]
            terms = state.terms if q == state.question else await store.query_terms(
                state.pool, state.collection_id, q, n_docs=state.catalog.stamp.documents)
            tree = await load_tree(state.nearest, doc_id, name, state.vectors[q], (state.collection_id, state.catalog.stamp))
            res = await searcher.search(tree, q, state.vectors[q], terms=terms, statements=state.statements)
            return Searched(tree, res)

    searched = await asyncio.gather(*(search_doc(d.doc_id, d.name) for d in docs))
    if oracle is not None and oracle.nodes:  # benchmark diagnostics: the nodes covering the gold pages
        searched = [Searched(x.tree, oracle_search(x.tree, oracle, state.doc_q[x.tree.doc_id])) for x in searched]
    return tuple(searched)


def oracle_search(tree: LoadedTree, oracle: Oracle, question: str) -> TreeSearchResult:
    """The oracle's nodes of this document as its tree-search choice."""
    by_id = tree.by_id()
    picks = tuple(NodePick(doc_id=tree.doc_id, node_id=n, title=by_id[n].title, section_path=" > ".join(by_id[n].path),
                           sub_query=question, reason="oracle")
                  for d, n in oracle.nodes if d == tree.doc_id and n in by_id)
    return TreeSearchResult(doc_id=tree.doc_id, picks=picks, thinking="oracle nodes", mode="oracle")


def chosen_ranks(searched: Sequence[Searched]) -> dict[tuple[int, str], tuple[int, int]]:
    """(node rank, document rank) of every node an LLM tree search chose (offline choices are not listed)."""
    rank: dict[tuple[int, str], tuple[int, int]] = {}
    for d, x in enumerate(searched):
        if x.result.mode.startswith("llm"):
            for j, p in enumerate(x.result.picks):
                rank.setdefault((p.doc_id, p.node_id), (j, d))
    return rank


async def locate(state: QueryState, routing: RoutingResult, docs: Sequence[DocCandidate],
                 searched: Sequence[Searched]) -> Evidence:
    """The candidates: chunks of the chosen and cross-referenced nodes, then chunk hits and the named
    statements' pages inside the documents read."""
    picks = tuple(p for x in searched for p in x.result.picks)
    vectors = await state.embed([p.sub_query for p in picks] or [state.question])
    ev = Evidence(doc_q=state.doc_q, picks=picks, chosen=chosen_ranks(searched))
    doc_rank = {d.doc_id: i for i, d in enumerate(routing.documents)}
    per_doc = await asyncio.gather(*(_read_chosen(state, x, vectors) for x in searched))
    for x, (found, extra) in zip(searched, per_doc, strict=True):
        decay = 1.0 / (1 + state.policy.doc_rank_decay * doc_rank.get(x.tree.doc_id, 0))
        for j, p in enumerate(x.result.picks):
            ev.prior[(x.tree.doc_id, p.node_id)] = (1.0 / (1 + j)) * decay
        ev.add_nodes(extra, found, state.policy.cross_ref_prior)
    ev.add_candidates(await _direct_hits(state, docs), state.policy.direct_hit_prior,
                      lambda c: "chunk hit inside the routed document")
    ev.add_candidates(await _statement_hits(state, docs), state.policy.statement_prior,
                      lambda c: f"holds the {STATEMENT_LABELS.get(c.statement, c.statement)} the question names")
    return ev


async def _read_chosen(state: QueryState, x: Searched, vectors: Mapping[str, np.ndarray],
                       ) -> tuple[list[RetrievedChunk], tuple[NodePick, ...]]:
    """One document: hybrid retrieval in its chosen nodes, then once in the nodes that text refers to
    ("see Note 7")."""
    tree, question = x.tree, state.doc_q[x.tree.doc_id]
    found = await retrieve_in_nodes(state.nearest, tree.doc_name, x.result.picks, vectors, top_k=state.req.top_k,
                                    settings=state.settings)
    refs = find_cross_references([c.text for c in found])[: state.settings.max_cross_refs]
    picked_ids = {p.node_id for p in x.result.picks}
    extra: list[NodePick] = []
    for label in refs:
        node = resolve_reference(tree, label)
        if node is not None and node.node_id not in picked_ids:
            picked_ids.add(node.node_id)
            extra.append(NodePick(doc_id=tree.doc_id, node_id=node.node_id, title=node.title,
                                  section_path=" > ".join(node.path), sub_query=question,
                                  reason=f"cross-reference '{label}'"))
    if extra:
        found += [msgspec.structs.replace(c, source="cross_ref") for c in await retrieve_in_nodes(
            state.nearest, tree.doc_name, extra, state.vectors, top_k=max(1, state.req.top_k // 2),
            settings=state.settings)]
    return found, tuple(extra)


async def _direct_hits(state: QueryState, docs: Sequence[DocCandidate]) -> list[RetrievedChunk]:
    """Chunk-level hits inside the routed documents join the tree-search candidates (spec 002: NodeScore
    candidates alongside tree search; spec 004: section, then paragraph) — never worse than flat search.
    A multi-document question takes each document's own best chunks by its sub-question."""
    per_k = state.policy.direct_hits_per_k
    if state.multi:
        assert state.plan is not None
        share = evidence_share(state.req.top_k, len(state.plan.needed))
        hits = await asyncio.gather(*(direct_hits(state.nearest, [d.doc_id], state.vectors[state.doc_q[d.doc_id]],
                                                  {d.doc_id: d.name}, limit=per_k * share) for d in docs))
        return [c for group in hits for c in group]
    return await direct_hits(state.nearest, [d.doc_id for d in docs], state.qvec, {d.doc_id: d.name for d in docs},
                             limit=per_k * state.req.top_k)


async def _statement_hits(state: QueryState, docs: Sequence[DocCandidate]) -> list[RetrievedChunk]:
    """The pages of the financial statements a question names ("… shown in the cash flow statement") in the
    best routed documents, whatever tree search chose (issue 14: tables as evidence)."""
    wanted, pol = state.statements, state.policy
    if not wanted:
        return []
    hits = await asyncio.gather(*(statement_hits(state.pool, [d.doc_id], wanted, state.vectors[state.doc_q[d.doc_id]],
                                                 {d.doc_id: d.name}, limit=pol.statement_hits_per_doc * len(wanted))
                                  for d in docs[: pol.statement_docs]))
    return [c for group in hits for c in group]


async def read_more(state: QueryState, ev: Evidence, verdict: Judgement, trees: Sequence[LoadedTree]) -> None:
    """Read the nodes a judgement asked for (validated ids) into the evidence, searched with what the judgement
    says is missing (else the document's sub-question). They rank on one scale with the first round's chosen
    nodes (the top node's tier), not behind all of them."""
    by_tree = {t.doc_id: t for t in trees}
    doc_rank = {d: r for (d, _), (_, r) in ev.chosen.items()}
    new: dict[int, list[NodePick]] = {}
    for doc_id, node_id in verdict.read:
        node = by_tree[doc_id].by_id()[node_id]
        new.setdefault(doc_id, []).append(NodePick(
            doc_id=doc_id, node_id=node_id, title=node.title, section_path=" > ".join(node.path),
            sub_query=verdict.missing or state.doc_q[doc_id],
            reason=f"round {verdict.round + 1}: {verdict.judgement} ({verdict.reason})"))
    vectors = await state.embed([p.sub_query for picks in new.values() for p in picks])
    for doc_id, picks in new.items():
        found = await retrieve_in_nodes(state.nearest, by_tree[doc_id].doc_name, picks, vectors,
                                        top_k=state.req.top_k, settings=state.settings)
        for p in picks:
            ev.chosen.setdefault((doc_id, p.node_id), (0, doc_rank.get(doc_id, len(doc_rank))))
        ev.add_nodes(picks, found, state.policy.cross_ref_prior)
