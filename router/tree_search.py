"""Per-document tree search: pick leaf nodes (each with a sub-query) for a question.

LLM path: the serialized tree (spec 001 format) → ``{thinking, results:[{node_id, sub_query}]}``,
ids validated against the document's leaves; trees too large for one prompt are searched top-down.
Offline path: hybrid similarity of the question to title + summary plus a NodeScore over the node's
chunk hits (spec 002 §Action 3). Cross-references in the retrieved text are followed separately.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np
import structlog

from kb.core.errors import LLMError
from kb.core.providers import ChatModel
from kb.core.providers.steps import ask
from kb.core.settings import RetrievalSettings
from kb.core.text import count_tokens, normalize_title, unit_label
from kb.core.types import TreeNode
from kb.core.vocab import STATEMENT_LABELS
from router import store
from router.doccache import DocReads
from router.policy import OFFLINE, RankingPolicy
from router.prompts import TREE_SEARCH, tree_search_prompt
from router.scoring import bm25_scores, group_scores, min_max
from router.types import NodePick, TreeSearchResult, Turn

log = structlog.get_logger("router.tree_search")


_XREF = re.compile(
    r"\b(?:see|refer to|described in|discussed in|included in|in)\s+"
    r"((?:note|item|section|appendix|part|exhibit)\s+(?:[0-9]+[A-Za-z]?(?:\.[0-9]+)*|[IVX]+\b|[A-Z]\b))",
    re.I,
)


@dataclass(frozen=True)
class LoadedTree:
    doc_id: int
    doc_name: str
    nodes: tuple[TreeNode, ...]  # as stored, without their text (``text`` is "")
    sims: dict[str, float]
    with_text: frozenset[str] = frozenset()  # ids of nodes with chunks of their own

    def selectable(self, node: TreeNode) -> bool:
        """A leaf, or a parent with text of its own before its first child (e.g. the statements at the
        start of "Item 8" before "Note 1"), so every page is reachable."""
        return node.is_leaf or node.node_id in self.with_text

    @property
    def leaves(self) -> list[TreeNode]:
        """The selectable nodes, in order."""
        return [n for n in self.nodes if self.selectable(n)]

    def children(self, node_id: str | None) -> list[TreeNode]:
        return [n for n in self.nodes if n.parent_id == node_id]

    def by_id(self) -> dict[str, TreeNode]:
        return {n.node_id: n for n in self.nodes}


_TREES: OrderedDict[tuple[int, object], tuple[tuple[TreeNode, ...], frozenset[str]]] = OrderedDict()
TREE_CACHE_DOCS = 256
"""Documents whose tree (nodes, titles, summaries) a process keeps between queries; a tree is the same until its
collection changes (the key holds the collection's stamp)."""


async def _read_tree(pool: asyncpg.Pool, doc_id: int,
                     stamp: object) -> tuple[tuple[TreeNode, ...], frozenset[str]]:
    """A document's nodes (without text) and the ids of those holding text, read from the database and kept in
    the process's cache under ``stamp`` (when one is given)."""
    rows = await store.doc_nodes(pool, doc_id)
    nodes = tuple(
        TreeNode(node_id=r["node_id"], parent_id=r["parent_id"], ordinal=r["ordinal"], level=r["level"],
                 title=r["title"], start=r["start_index"], end=r["end_index"], text="", summary=r["summary"],
                 path=tuple(r["path"]), is_leaf=r["is_leaf"], unit=r["unit"], statements=tuple(r["statements"] or ()))
        for r in rows
    )
    with_text = frozenset(r["node_id"] for r in rows if r["has_text"])
    if stamp is not None:
        _TREES[(doc_id, stamp)] = (nodes, with_text)
        while len(_TREES) > TREE_CACHE_DOCS:
            _TREES.popitem(last=False)
    return nodes, with_text


def leaf_label(node: TreeNode) -> str:
    """What the offline search matches a question's words against for a selectable node: its path and summary."""
    return " ".join(node.path) + " " + node.summary


async def warm_tree(pool: asyncpg.Pool, doc_id: int, stamp: object) -> list[str]:
    """Read a document's tree into the process's cache unless it is there (a server's warm-up); returns the
    labels of its selectable nodes (:func:`leaf_label`), whose token counts the first search would compute.
    The cache keeps :data:`TREE_CACHE_DOCS` trees: warming more only replaces the first ones."""
    cached = _TREES.get((doc_id, stamp))
    nodes, with_text = cached if cached is not None else await _read_tree(pool, doc_id, stamp)
    tree = LoadedTree(doc_id=doc_id, doc_name="", nodes=nodes, sims={}, with_text=with_text)
    return [leaf_label(n) for n in tree.leaves]


async def load_tree(reads: DocReads, doc_id: int, doc_name: str, query_vec: np.ndarray,
                    stamp: object = None) -> LoadedTree:
    """A document's tree with each node's similarity to the question; the nodes themselves from the process's
    cache when the collection is unchanged since they were read (``stamp``), the similarities from the
    document's cached node vectors (``router.doccache``)."""
    key = (doc_id, stamp)
    cached = _TREES.get(key) if stamp is not None else None
    sims = await reads.node_sims(doc_id, query_vec)
    if cached is not None:
        _TREES.move_to_end(key)
        nodes, with_text = cached
        return LoadedTree(doc_id=doc_id, doc_name=doc_name, nodes=nodes,
                          sims={n.node_id: sims.get(n.node_id, 0.0) for n in nodes}, with_text=with_text)
    nodes, with_text = await _read_tree(reads.pool, doc_id, stamp)
    sims = {n.node_id: sims.get(n.node_id, 0.0) for n in nodes}
    return LoadedTree(doc_id=doc_id, doc_name=doc_name, nodes=nodes, sims=sims, with_text=with_text)


def serialize_tree(nodes: Sequence[TreeNode], *, with_summary: bool = True, mark_expandable: bool = False,
                   with_text: frozenset[str] = frozenset()) -> str:
    """Spec 001 format: indented ``[node_id] title (leaf)``, summary, pages; ``with_text``: ids of parents
    with text of their own, marked "(own text)"; the financial statements on a node's pages in brackets."""
    lines = []
    base = min((n.level for n in nodes), default=1)
    for n in nodes:
        pad = "  " * max(0, n.level - base)
        mark = " (leaf)" if n.is_leaf else (" (expandable)" if mark_expandable else (" (own text)" if n.node_id in with_text else ""))
        kinds = f" [{', '.join(STATEMENT_LABELS.get(k, k) for k in n.statements)}]" if n.statements else ""
        lines.append(f"{pad}[{n.node_id}] {n.title}{mark}{kinds} ({unit_label(n.unit)} {n.start}-{n.end})")
        if with_summary and n.summary:
            lines.append(f"{pad}  summary: {n.summary[:300]}")
    return "\n".join(lines)


class TreeSearcher:
    """Chooses nodes in one document; LLM when available, offline otherwise or on failure."""

    def __init__(self, nearest: DocReads | None, chat: ChatModel, settings: RetrievalSettings,
                 policy: RankingPolicy = OFFLINE, *, expert_knowledge: str | None = None,
                 history: Sequence[Turn] = ()) -> None:
        """One searcher per query: ``nearest`` is the query's memo of each document's chunks nearest a question
        (and its database pool; only the offline path reads the database), ``expert_knowledge`` and ``history``
        the request's."""
        self.nearest = nearest
        self.pool = nearest.pool if nearest is not None else None
        self.chat = chat
        self.max_nodes = settings.max_nodes_per_doc
        self.prompt_tokens = settings.tree_prompt_tokens
        self.dense_weight = settings.dense_weight
        self.bm25_weight = settings.bm25_weight
        self.policy = policy
        self.expert_knowledge = expert_knowledge
        self.history = history

    async def search(self, tree: LoadedTree, question: str, query_vec: np.ndarray, *,
                     terms: store.QueryTerms | None = None, statements: frozenset[str] = frozenset(),
                     ) -> TreeSearchResult:
        """``statements``: the financial statements the question names (offline: their nodes score higher)."""
        expert_knowledge, history = self.expert_knowledge, self.history
        if not tree.nodes:
            return TreeSearchResult(doc_id=tree.doc_id, picks=())
        terms = terms or store.QueryTerms([], [])
        if self.chat.offline:
            return await self.offline(tree, question, query_vec, expert_knowledge=expert_knowledge, terms=terms,
                                      statements=statements)
        try:
            res = await self.llm(tree, question, expert_knowledge=expert_knowledge, history=history)
            if not res.picks:  # nothing usable chosen: this document is searched (and ranked) offline
                off = await self.offline(tree, question, query_vec, expert_knowledge=expert_knowledge, terms=terms,
                                         statements=statements)
                return TreeSearchResult(doc_id=tree.doc_id, picks=off.picks, mode="offline_fallback",
                                        thinking=f"LLM chose no usable node; offline. LLM: {res.thinking}"[:1000],
                                        dropped_ids=res.dropped_ids, llm_calls=res.llm_calls)
            return res
        except LLMError as exc:
            log.warning("router.tree_search_llm_failed", doc_id=tree.doc_id, error=str(exc))
            res = await self.offline(tree, question, query_vec, expert_knowledge=expert_knowledge, terms=terms,
                                     statements=statements)
            return TreeSearchResult(doc_id=res.doc_id, picks=res.picks, thinking=f"LLM failed ({exc}); offline",
                                    mode="offline_fallback", llm_calls=1)

    # ------------------------------------------------------------------ offline
    async def offline(self, tree: LoadedTree, question: str, query_vec: np.ndarray, *,
                      expert_knowledge: str | None = None, terms: store.QueryTerms | None = None,
                      statements: frozenset[str] = frozenset()) -> TreeSearchResult:
        leaves = tree.leaves
        assert self.nearest is not None and self.pool is not None, "the offline tree search reads the database"
        hits = await self.nearest.top(tree.doc_id, query_vec, 40)
        terms = terms or store.QueryTerms([], [])
        texts = await store.node_text_hits(self.pool, tree.doc_id, terms, 40)
        t_norm = {i: float(r["score"]) / terms.total for i, r in enumerate(texts)}
        node_score = group_scores(
            [(r.node_id, self.dense_weight * max(r.sim, 0.0)) for r in hits]
            + [(r["node_id"], self.bm25_weight * t_norm[i]) for i, r in enumerate(texts)]
        )
        labels = [leaf_label(n) for n in leaves]
        q_for_titles = question + (" " + expert_knowledge if expert_knowledge else "")
        title_bm = min_max(bm25_scores(q_for_titles, labels))
        title_dense = min_max([tree.sims.get(n.node_id, 0.0) for n in leaves])
        ns = min_max([node_score.get(n.node_id, 0.0) for n in leaves])
        scored = []
        for i, n in enumerate(leaves):
            pol = self.policy
            s = pol.leaf_chunk_hits * ns[i] + pol.leaf_title_dense * title_dense[i] + pol.leaf_title_bm25 * title_bm[i]
            named = sorted(statements.intersection(n.statements))
            s += pol.leaf_statement if named else 0.0
            scored.append((s, n, f"NodeScore {node_score.get(n.node_id, 0.0):.3f}, title/summary "
                                  f"{title_dense[i]:.2f}/{title_bm[i]:.2f}"
                                  + (f", holds the {', '.join(STATEMENT_LABELS[k] for k in named)}" if named else "")))
        scored.sort(key=lambda x: -x[0])
        best = scored[0][0] if scored else 0.0
        picks = tuple(
            NodePick(doc_id=tree.doc_id, node_id=n.node_id, title=n.title, section_path=" > ".join(n.path),
                     sub_query=question, score=round(s, 4), reason=why)
            for s, n, why in scored[: self.max_nodes]
            if s >= self.policy.leaf_keep_ratio * best or s == best
        )
        return TreeSearchResult(doc_id=tree.doc_id, picks=picks,
                                thinking="offline: NodeScore over chunk hits + title/summary similarity")

    # ------------------------------------------------------------------ LLM
    async def _ask(self, question: str, serialized: str, context: dict[str, Any],
                   topdown: bool) -> tuple[str, list[dict[str, Any]]]:
        reply = await ask(self.chat, TREE_SEARCH, tree_search_prompt(question, serialized, max_nodes=self.max_nodes,
                                                                     topdown=topdown, **context))
        return reply.thinking, [{"node_id": str(r.node_id), "sub_query": r.sub_query} for r in reply.results]

    async def llm(self, tree: LoadedTree, question: str, *, expert_knowledge: str | None = None,
                  history: Sequence[Turn] = ()) -> TreeSearchResult:
        context = {"expert_knowledge": expert_knowledge, "history": history}
        leaves = {n.node_id: n for n in tree.leaves}
        full = serialize_tree(tree.nodes, with_text=tree.with_text)
        if count_tokens(full) <= self.prompt_tokens:
            thinking, results = await self._ask(question, full, context, topdown=False)
            picks, dropped = self._validate(tree, results, leaves, question)
            return TreeSearchResult(doc_id=tree.doc_id, picks=picks, thinking=thinking, mode="llm",
                                    dropped_ids=dropped, llm_calls=1)
        # top-down best-first descent: show one level of the frontier at a time
        by_id = tree.by_id()
        frontier = tree.children(None)
        chosen: list[NodePick] = []
        dropped: list[str] = []
        calls, thoughts = 0, []
        seen: set[str] = set()
        while frontier and len(chosen) < self.max_nodes and calls < 6:
            thinking, results = await self._ask(
                question, serialize_tree(frontier, mark_expandable=True), context, topdown=True)
            calls += 1
            thoughts.append(thinking)
            allowed = {n.node_id for n in frontier}
            next_frontier: list[TreeNode] = []
            for nid, sub_query in _choices(results, allowed, seen, dropped, question):
                node = by_id[nid]
                if node.is_leaf:
                    chosen.append(self._pick(tree, node, sub_query, "LLM top-down"))
                else:
                    next_frontier.extend(tree.children(nid))
            frontier = next_frontier
        return TreeSearchResult(doc_id=tree.doc_id, picks=tuple(chosen[: self.max_nodes]),
                                thinking=" | ".join(t for t in thoughts if t), mode="llm_topdown",
                                dropped_ids=tuple(dropped), llm_calls=calls)

    def _pick(self, tree: LoadedTree, node: TreeNode, sub_query: str, reason: str) -> NodePick:
        return NodePick(doc_id=tree.doc_id, node_id=node.node_id, title=node.title,
                        section_path=" > ".join(node.path), sub_query=sub_query, reason=reason)

    def _validate(self, tree: LoadedTree, results: list[dict[str, Any]], leaves: dict[str, TreeNode],
                  question: str) -> tuple[tuple[NodePick, ...], tuple[str, ...]]:
        dropped: list[str] = []
        picks = [self._pick(tree, leaves[nid], sub_query, "chosen by LLM")
                 for nid, sub_query in _choices(results, leaves, set(), dropped, question)]
        if dropped:
            log.info("router.tree_search_dropped_ids", doc_id=tree.doc_id, dropped=dropped)
        return tuple(picks[: self.max_nodes]), tuple(dropped)


def _choices(results: Sequence[dict[str, Any]], allowed: Container[str], seen: set[str], dropped: list[str],
             question: str) -> Iterator[tuple[str, str]]:
    """(node id, sub-query) of each reply entry naming an allowed node not chosen before (``seen``); ids
    of other nodes are appended to ``dropped``. An entry without a sub-query asks the question itself."""
    for r in results:
        nid = str(r.get("node_id", "")).strip()
        if nid not in allowed:
            dropped.append(nid)
            continue
        if nid in seen:
            continue
        seen.add(nid)
        yield nid, str(r.get("sub_query") or question)


def find_cross_references(texts: Sequence[str]) -> list[str]:
    """Referenced labels such as "Note 7", "Item 8", "Section 3.2", "Appendix G" (normalised, unique)."""
    out: list[str] = []
    for t in texts:
        for m in _XREF.finditer(t):
            label = normalize_title(m.group(1))
            if label not in out:
                out.append(label)
    return out


def resolve_reference(tree: LoadedTree, label: str) -> TreeNode | None:
    """The node whose title starts with the referenced label ("note 7" → "Note 7 — Debt"); leaves first."""
    matches = [n for n in tree.nodes if re.match(rf"{re.escape(label)}(?![0-9a-z])", normalize_title(n.title))]
    if not matches:
        return None
    leaf = [n for n in matches if n.is_leaf]
    if leaf:
        return leaf[0]
    first = matches[0]
    kids = [n for n in tree.leaves if n.path[: len(first.path)] == first.path]
    return kids[0] if kids else None
