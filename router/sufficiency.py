"""The sufficiency judgement of spec 003 (LLM mode): does the gathered evidence answer the question, and if
not, which nodes should be read next (children of a chosen parent, siblings, a referenced note)?

One JSON call per round; node ids are validated against the searched documents' trees: unknown, already
read and out-of-document ids are dropped and reported; a parent without text of its own stands for its
first readable descendants. A failed or malformed judgement ends the loop: the answer uses what was gathered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
import structlog

from kb.core.errors import LLMError
from kb.core.providers.steps import ask
from kb.core.text import truncate_tokens, unit_label
from router.prompts import SUFFICIENCY, NodeRef, sufficiency_prompt
from router.state import QueryState
from router.synthesize import build_evidence
from router.tree_search import LoadedTree
from router.types import RetrievedChunk

log = structlog.get_logger("router.sufficiency")

EVIDENCE_TOKENS = 6000
"""The evidence shown to the judge is cut to this many tokens."""
OUTLINE_TOKENS = 4000
"""Each document's outline shown to the judge is cut to this many tokens."""


class Judgement(msgspec.Struct, frozen=True):
    """One round's verdict: sufficient | insufficient | follow_reference | failed."""

    round: int
    judgement: str
    reason: str = ""
    read: tuple[tuple[int, str], ...] = ()  # (doc_id, node_id) to read next, validated
    dropped: tuple[str, ...] = ()
    missing: str = ""  # what the evidence lacks (the sub-query the next round searches the read nodes with)


def _outline(tree: LoadedTree, read: set[tuple[int, str]]) -> str:
    base = min((n.level for n in tree.nodes), default=1)
    return "\n".join(
        f"{'  ' * max(0, n.level - base)}[{n.node_id}] {n.title}{' (leaf)' if n.is_leaf else ''} "
        f"({unit_label(n.unit)} {n.start}-{n.end})"
        + (" [read]" if (tree.doc_id, n.node_id) in read else "")
        for n in tree.nodes)


def _prompt(question: str, evidence: Sequence[RetrievedChunk], trees: Sequence[LoadedTree],
            read: set[tuple[int, str]]) -> str:
    outlines = [f'Document doc_id "{t.doc_id}" ({t.doc_name}):\n{truncate_tokens(_outline(t, read), OUTLINE_TOKENS)}'
                for t in trees]
    return sufficiency_prompt(question, truncate_tokens(build_evidence(evidence), EVIDENCE_TOKENS), outlines)


def validate_reads(refs: Sequence[NodeRef], trees: Sequence[LoadedTree], read: set[tuple[int, str]],
                   max_nodes: int) -> tuple[list[tuple[int, str]], list[str]]:
    """Readable, new nodes of the searched documents (a parent without text → its first readable
    descendants), at most ``max_nodes``; and what was dropped, with the reason."""
    by_doc: Mapping[str, LoadedTree] = {str(t.doc_id): t for t in trees}
    keep: list[tuple[int, str]] = []
    dropped: list[str] = []
    for item in refs:
        doc, nid = str(item.doc_id).strip(), str(item.node_id).strip()
        tree = by_doc.get(doc)
        node = tree.by_id().get(nid) if tree else None
        if tree is None:
            dropped.append(f"doc {doc[:40]!r}: not a searched document")
            continue
        if node is None:
            dropped.append(f"{doc}/{nid[:40]}: no such node in this document")
            continue
        targets = [node] if tree.selectable(node) else [
            n for n in tree.leaves if n.path[: len(node.path)] == node.path and n.node_id != nid]
        added = False
        for t in targets:
            key = (tree.doc_id, t.node_id)
            if key in read or key in keep:
                continue
            if len(keep) >= max_nodes:
                dropped.append(f"{doc}/{t.node_id}: beyond {max_nodes} nodes per round")
                break
            keep.append(key)
            added = True
        if not added and (tree.doc_id, nid) in read:
            dropped.append(f"{doc}/{nid}: already read")
        elif not added and len(keep) < max_nodes:
            dropped.append(f"{doc}/{nid}: nothing unread to read in it")
    return keep, dropped


async def judge(state: QueryState, evidence: Sequence[RetrievedChunk], trees: Sequence[LoadedTree],
                read: set[tuple[int, str]], round_no: int) -> Judgement:
    """One sufficiency call over the query's evidence; ``failed`` (and no nodes) when the call or its reply is
    unusable."""
    chat, question, max_nodes = state.chat, state.asked, state.settings.max_nodes_per_doc
    try:
        reply = await ask(chat, SUFFICIENCY, _prompt(question, evidence, trees, read))
    except LLMError as exc:
        log.warning("router.sufficiency_failed", round=round_no, error=str(exc))
        return Judgement(round=round_no, judgement="failed", reason=str(exc)[:300])
    verdict, reason = reply.judgement, reply.reason[:500]
    if verdict == "sufficient":
        return Judgement(round=round_no, judgement=verdict, reason=reason)
    keep, dropped = validate_reads(reply.read, trees, read, max_nodes)
    if dropped:
        log.info("router.sufficiency_dropped", round=round_no, dropped=dropped)
    return Judgement(round=round_no, judgement=verdict, reason=reason, read=tuple(keep), dropped=tuple(dropped),
                     missing=" ".join(reply.missing.split())[:300])
