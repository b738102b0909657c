"""Every LLM step of the query side, declared once: purpose, system prompt, reply type and prompt builder.

The JSON schema sent to the model is generated from the reply type (``kb.core.providers.steps``); ``ask()``
validates the reply against it. Steps: route.metadata, route.description, tree.search, query.plan,
query.sufficiency, synthesize (free text with evidence markers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from kb.core.providers.steps import LLMStep
from router.types import DocCandidate, Turn

Scope = Literal["single", "multi", "list"]


# --------------------------------------------------------------------------- replies


class ConditionReply(msgspec.Struct, frozen=True):
    key: str
    op: str
    value: Any = None


class MetadataReply(msgspec.Struct, frozen=True):
    conditions: list[ConditionReply]
    thinking: str = ""
    scope: Scope | None = None
    question: Any = None  # the typed question (router.question), validated by router.reading.from_llm


class DescriptionReply(msgspec.Struct, frozen=True):
    answer: list[str | int]
    thinking: str = ""


class NodeChoice(msgspec.Struct, frozen=True):
    node_id: str | int
    sub_query: str = ""


class TreeSearchReply(msgspec.Struct, frozen=True):
    results: list[NodeChoice]
    thinking: str = ""


class SubQuestionReply(msgspec.Struct, frozen=True):
    doc_id: str | int
    sub_question: str = ""


class PlanReply(msgspec.Struct, frozen=True):
    scope: Scope
    sub_questions: list[SubQuestionReply]
    reason: str = ""


class NodeRef(msgspec.Struct, frozen=True):
    doc_id: str | int
    node_id: str | int


class JudgeReply(msgspec.Struct, frozen=True):
    judgement: Literal["sufficient", "insufficient", "follow_reference"]
    reason: str = ""
    read: list[NodeRef] = []
    missing: str = ""  # what the evidence lacks, as a short search query: the next round's sub-query


# --------------------------------------------------------------------------- steps

METADATA = LLMStep("route.metadata", "You turn questions about a document collection into metadata filters. "
                   "Reply with JSON only.", MetadataReply)
DESCRIPTION = LLMStep("route.description", "You select documents relevant to a query from their descriptions. "
                      "Reply with JSON only.", DescriptionReply)
TREE_SEARCH = LLMStep("tree.search", "You are a document retrieval expert. Reply with JSON only.", TreeSearchReply)
PLAN = LLMStep("query.plan", "You plan how to answer questions over a collection of reports. Reply with JSON only.",
               PlanReply)
SUFFICIENCY = LLMStep("query.sufficiency", "You judge whether retrieved evidence answers a question. "
                      "Reply with JSON only.", JudgeReply)
SYNTHESIS_PURPOSE = "synthesize"
SYNTHESIS_SYSTEM = (
    "You answer questions about a collection of reports using only the evidence given. Rules: 1) answer only "
    "from the evidence, never invent facts or numbers; 2) after every claim put the evidence marker(s) like [1] "
    "or [2][3]; 3) lead with the sentence that answers (the asked figure with its period and unit); "
    "4) if the evidence does not state what is asked, begin the answer with \"Not stated in the evidence:\", "
    "say what the documents read are about instead, and cite them; if it answers only in part, say what is "
    "missing; 5) be concise and precise; keep units and periods; answer in the language of the question."
)


NOT_STATED = "not stated in the evidence"
"""What the synthesis prompt asks an LLM to write when the evidence does not state what is asked."""


# --------------------------------------------------------------------------- prompt builders


def conversation(history: Sequence[Turn], turns: int = 6, chars: int = 500) -> str:
    """The last turns of the conversation ("Conversation so far: …"), '' without history."""
    if not history:
        return ""
    return "Conversation so far:\n" + "\n".join(f"{t.role}: {t.content[:chars]}" for t in history[-turns:])


def typed_question_prompt(measures: Sequence[str], metrics: Sequence[str], lines: Sequence[str] = ()) -> str:
    """How the metadata step also reads the question into the typed question (``router.question``), with the
    vocabulary's concepts, the metrics and the collection's printed lines nearest to the question."""
    return (
        "\n\nAlso read the question as one typed question (\"question\" in the reply; null when it asks no figure). "
        "Fields: operation: one of lookup, compare, max, min, rank, screen, group, series, change; measures: "
        "[{\"name\": ..., \"kind\": \"concept\" | \"metric\" | \"line\" | \"formula\"}] — a concept or metric "
        "name from the lists below, a printed line item as the reports print it, or \"a / b\" (\"a / b * 100\" for a "
        "percentage) of two concepts; companies: the collection's company names it asks about ([] for all); "
        "periods: [{\"year\": 2023, \"quarter\": 0, \"months\": 12}] (months 3, 6, 9 or 12; \"relative\": "
        "\"latest\" or \"last_n\" with \"n\"); change: \"\" | absolute | percent | yoy | qoq | cagr; sign: \"\" | "
        "loss; order: \"\" | asc | desc; over: \"\" | periods | measures (an extreme over one company's periods, or over the measures it lists); average: "
        "true | false; limit: a number or null; ranges: [{\"label\", \"low\", \"low_inclusive\", \"high\", "
        "\"high_inclusive\", \"direction\"}] in base units; bounds: {\"gt\"|\"gte\"|\"lt\"|\"lte\": number}; unit: "
        "\"\" | thousand | million | billion | 万 | 亿; decimals: a number or null; unknown: [what you could not "
        "place].\nConcepts: " + ", ".join(measures) + "\nMetrics: " + ", ".join(metrics)
        + ("\nPrinted lines of these reports nearest to the question: " + "; ".join(lines) if lines else "")
    )


def metadata_prompt(question: str, values: Mapping[str, Mapping[str, int]], max_values: int = 60,
                    typed: str = "") -> str:
    lines = []
    for key, vals in sorted(values.items()):
        shown = sorted(vals, key=lambda v: -vals[v])[:max_values]
        more = f" (+{len(vals) - len(shown)} more)" if len(vals) > len(shown) else ""
        lines.append(f"- {key}: {shown}{more}")
    return (
        "Select documents for the question by their metadata. Use only these keys and, for eq/in, only listed "
        "values. Operators: eq (value), in (list of values), range ({\"gte\":..,\"lte\":..}), contains (substring). "
        "Return no condition for a key the question does not constrain. Also say whether the question needs one "
        'document ("single"), several documents to compare or follow over time ("multi"), or a list or '
        'aggregation over many documents ("list").\n\n'
        f"Question: {question}\n\nMetadata keys and known values:\n" + "\n".join(lines) + typed +
        '\n\nReply: {"thinking": "...", "conditions": [{"key": "...", "op": "in", "value": ["..."]}], '
        '"scope": "single"' + (', "question": {"operation": "...", "measures": [...], ...}}' if typed else "}")
    )


def description_prompt(question: str, shortlist: Sequence[DocCandidate], descriptions: Mapping[int, str],
                       top_docs: int) -> str:
    listing = "\n".join(
        f'{{"doc_id": "{c.doc_id}", "doc_name": {c.name!r}, "doc_description": {descriptions.get(c.doc_id, "")!r}}}'
        for c in shortlist
    )
    return (
        "You are given a list of documents with their IDs, file names, and descriptions. Select the documents "
        f"that may contain information relevant to the query (at most {top_docs}, best first).\n\n"
        f"Query: {question}\n\nDocuments:\n{listing}\n\n"
        'Reply: {"thinking": "<reasoning>", "answer": ["doc_id1", "doc_id2"]} ([] if none is relevant)'
    )


def tree_search_prompt(question: str, serialized: str, *, max_nodes: int, topdown: bool,
                       expert_knowledge: str | None = None, history: Sequence[Turn] = ()) -> str:
    task = (
        "Find the nodes most likely to contain the answer. You may return leaf nodes, or nodes marked "
        "(expandable) to look inside them." if topdown else
        "Find the nodes marked (leaf) or (own text) most likely to contain the answer."
    )
    context = "\n\n".join(p for p in (
        f"Expert knowledge of relevant sections: {expert_knowledge}" if expert_knowledge else "",
        conversation(history)) if p)
    return (
        f"{task}\nRules:\n1. Return 1-{max_nodes} nodes, most relevant first.\n"
        "2. For each node write a refined sub_query describing what to find in it.\n\n"
        f"Question: {question}\n\n{context}\n\nDocument tree:\n{serialized}\n\n"
        'Reply: {"thinking": "<brief analysis>", "results": [{"node_id": "0007", "sub_query": "..."}]}'
    )


def plan_prompt(question: str, documents: Sequence[str], rules_kind: str, rules_reason: str, top_docs: int) -> str:
    """``documents``: one line per routed document (doc_id, name, entity, period, description)."""
    return (
        "Decide whether the question needs one document (single), several documents to compare or follow over "
        "time (multi), or a list/aggregation over many documents (list). For multi and list, write one focused "
        f"sub-question per document that is needed (at most {top_docs}), using only the doc_ids below; leave out "
        "documents that are not needed.\n\n"
        f"Question: {question}\n\nRule-based first guess: {rules_kind} ({rules_reason})\n\nRouted documents:\n"
        + "\n".join(documents)
        + '\n\nReply: {"scope": "single|multi|list", "reason": "...", '
        '"sub_questions": [{"doc_id": "12", "sub_question": "..."}]}'
    )


def sufficiency_prompt(question: str, evidence: str, outlines: Sequence[str]) -> str:
    return (
        "Judge whether the evidence is sufficient to answer the question. If it is not, name the nodes to read "
        "next: children of a chosen section, its siblings, or a note the evidence refers to (follow_reference). "
        "Only name nodes not marked [read], and say in \"missing\" what the evidence lacks, as a short search "
        "query (it is searched for in the nodes you name).\n\n"
        f"Question: {question}\n\nEvidence:\n{evidence}\n\n"
        "Document outlines:\n" + "\n\n".join(outlines)
        + '\n\nReply: {"judgement": "sufficient|insufficient|follow_reference", "reason": "...", '
        '"read": [{"doc_id": "12", "node_id": "0007"}], "missing": "..."}'
    )


def synthesis_prompt(question: str, evidence: str, history: Sequence[Turn] = ()) -> str:
    convo = conversation(history)
    return f"{convo + chr(10) * 2 if convo else ''}Question: {question}\n\nEvidence:\n{evidence}\n\nAnswer with evidence markers:"


def multi_synthesis_prompt(question: str, evidence: str, *, kind: str, reason: str, sub_questions: Sequence[str],
                           no_answer: Sequence[str], missing: str, history: Sequence[Turn] = ()) -> str:
    """Per document first, then the comparison / change / aggregate."""
    convo = conversation(history)
    return (
        f"{convo + chr(10) * 2 if convo else ''}Question: {question}\n\n"
        f"This question needs several documents ({kind}: {reason}). Sub-questions:\n" + "\n".join(sub_questions)
        + "\n\n"
        + (f"Documents whose evidence seems not to answer: {', '.join(no_answer)}\n\n" if no_answer else "")
        + (f"{missing} Say so; do not answer about it from other documents.\n\n" if missing else "")
        + f"Evidence (grouped by document):\n{evidence}\n\n"
        "First answer for each document in turn (one short paragraph or table row per document, citing every "
        "claim with its markers); write 'No evidence found in <document>' where its evidence does not answer. "
        "Then give the comparison, change over time or aggregate answer, citing again. Answer with evidence markers:"
    )
