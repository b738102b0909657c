"""LLM mode on the sample reports against the fake OpenAI server: the model's node choice decides the
evidence, small sections are handed over whole, and the sufficiency loop (spec 003) reads further nodes —
bounded by KB_MAX_ITERATIONS, with bad node ids dropped and a malformed judgement falling back."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from kb.core.providers.chat import OpenAIChatModel
from kb.core.settings import LLMSettings
from kb.runtime import Runtime
from router.pipeline import QueryPipeline
from router.prompts import METADATA, SUFFICIENCY, TREE_SEARCH
from router.types import QueryRequest
from tests.fake_openai import FakeOpenAI, FakeReply
from tests.http import wire

pytestmark = pytest.mark.slow
QUESTION = "What was Helios Robotics' revenue in fiscal 2022?"
WARRANTY = "0013"  # Helios 2022 › Notes › Note 6 — Warranty reserve: a small section, nothing about revenue


def pipeline(rt: Runtime, fake: FakeOpenAI, max_iterations: int = 2) -> QueryPipeline:
    chat = OpenAIChatModel(LLMSettings(base_url=fake.base_url, model="fake-model", api_key="k", timeout_s=5,
                                       max_retries=0, concurrency=4, cache=False))
    return QueryPipeline(rt.pool, rt.embedder, chat,
                         dataclasses.replace(rt.settings.retrieval, max_iterations=max_iterations))


def respond(fake: FakeOpenAI, judge: Any, picks: list[str] | None = None) -> None:
    """Metadata: Helios FY2022; tree search: ``picks``; sufficiency: ``judge(round, doc_id, unread leaves)``;
    the answer cites [1]; any other step its smallest valid reply."""
    rounds = {"n": 0}

    def sufficiency(body: dict[str, Any]) -> FakeReply:
        user = body["messages"][-1]["content"]
        rounds["n"] += 1
        unread = re.findall(r"\[(\d{4})\] [^\n]*\(leaf\) \([^)]*\)$", user, flags=re.M)  # unread leaves
        return judge(rounds["n"], re.search(r'Document doc_id "(\d+)"', user).group(1), unread)

    fake.route({
        METADATA: FakeReply.json({"conditions": [{"key": "company", "op": "in", "value": ["Helios Robotics"]},
                                                 {"key": "fiscal_year", "op": "in", "value": ["2022"]}]}),
        TREE_SEARCH: FakeReply.json({"thinking": "notes", "results": [
            {"node_id": n, "sub_query": "warranty reserve"} for n in (picks if picks is not None else [WARRANTY])]}),
        SUFFICIENCY: sufficiency,
    }, text=FakeReply.text("The warranty reserve is described [1]."))


def sufficient(_round: int, _doc: str, _unread: list[str]) -> FakeReply:
    return FakeReply.json({"judgement": "sufficient", "reason": "stated"})


async def test_model_choice_decides_the_evidence(samples_rt: Runtime, fake_openai: FakeOpenAI) -> None:
    respond(fake_openai, sufficient)
    result = await pipeline(samples_rt, fake_openai).run(QueryRequest(query=QUESTION, strategy="metadata", top_docs=1))
    trace = wire(result.trace)
    assert trace["ranking"] == "llm" and trace["tree_search"][0]["mode"] == "llm"
    first = trace["chunks"][0]
    assert (first["node_id"], first["source"]) == (WARRANTY, "section")  # the whole small section, first
    assert max(c["dense"] for c in trace["chunks"]) > first["dense"]  # although other chunks are closer
    assert not first["fill"] and all(c["fill"] for c in trace["chunks"] if c["node_id"] != WARRANTY)
    assert [(c.marker, c.node_id) for c in result.citations] == [(1, WARRANTY)]
    assert "warranty reserve" in result.citations[0].text.lower() and result.citations[0].pages[0] >= 1
    assert [(r["round"], r["judgement"]) for r in trace["iterations"]] == [(1, "sufficient")]
    assert trace["llm"]["calls"] <= 2 + len(result.documents) + 1  # metadata, tree search, judge, synthesis


async def test_insufficient_reads_the_named_node_and_drops_bad_ids(samples_rt: Runtime,
                                                                  fake_openai: FakeOpenAI) -> None:
    def judge(_round: int, doc: str, _unread: list[str]) -> FakeReply:
        return FakeReply.json({"judgement": "insufficient", "reason": "revenue is in a segment", "read": [
            {"doc_id": doc, "node_id": "0004"}, {"doc_id": doc, "node_id": "9999"},
            {"doc_id": doc, "node_id": WARRANTY}, {"doc_id": "123456", "node_id": "0001"}]})

    respond(fake_openai, judge)
    result = await pipeline(samples_rt, fake_openai).run(QueryRequest(query=QUESTION, strategy="metadata", top_docs=1))
    rounds = wire(result.trace)["iterations"]
    assert len(rounds) == 1 and rounds[0]["judgement"] == "insufficient"  # KB_MAX_ITERATIONS=2: one judgement
    assert [n for _, n in rounds[0]["read"]] == ["0004"]
    dropped = " ".join(rounds[0]["dropped"])
    assert "9999" in dropped and f"{WARRANTY}: already read" in dropped and "123456" in dropped
    read = [n for n in wire(result.trace)["nodes"] if n["node_id"] == "0004"]
    assert read and read[0]["reason"].startswith("round 2: insufficient")
    assert "0004" in {c["node_id"] for c in wire(result.trace)["chunks"][:5]}


async def test_always_insufficient_stops_at_the_limit(samples_rt: Runtime, fake_openai: FakeOpenAI) -> None:
    asked_for: list[str] = []

    def judge(_round: int, doc: str, unread: list[str]) -> FakeReply:  # asks for an unread node every time
        asked_for.append(unread[-1])
        return FakeReply.json({"judgement": "insufficient", "read": [{"doc_id": doc, "node_id": unread[-1]}]})

    respond(fake_openai, judge)
    result = await pipeline(samples_rt, fake_openai, max_iterations=3).run(
        QueryRequest(query=QUESTION, strategy="metadata", top_docs=1))
    assert [r["read"][0][1] for r in wire(result.trace)["iterations"]] == asked_for  # read in rounds 2 and 3
    assert len(asked_for) == 2 and asked_for[0] != asked_for[1]  # the second outline marks the first as read
    asked = [r for r in fake_openai.requests if r.step is SUFFICIENCY]
    assert len(asked) == 2
    one_pass = await pipeline(samples_rt, fake_openai, max_iterations=1).run(
        QueryRequest(query=QUESTION, strategy="metadata", top_docs=1))
    assert wire(one_pass.trace)["iterations"] == []


async def test_malformed_judgement_answers_with_what_was_gathered(samples_rt: Runtime,
                                                                  fake_openai: FakeOpenAI) -> None:
    respond(fake_openai, lambda _r, _d, _u: FakeReply.text("{not json"))
    result = await pipeline(samples_rt, fake_openai).run(QueryRequest(query=QUESTION, strategy="metadata", top_docs=1))
    assert wire(result.trace)["iterations"][0]["judgement"] == "failed"
    assert wire(result.trace)["synthesis"] == "llm" and result.citations[0].node_id == WARRANTY
    assert json.dumps(wire(result.trace))


async def test_no_usable_choice_ranks_that_document_offline(samples_rt: Runtime, fake_openai: FakeOpenAI) -> None:
    respond(fake_openai, sufficient, picks=["9999"])
    result = await pipeline(samples_rt, fake_openai).run(QueryRequest(query=QUESTION, strategy="metadata", top_docs=1))
    search = wire(result.trace)["tree_search"][0]
    assert search["mode"] == "offline_fallback" and "chose no usable node" in search["thinking"]
    assert search["dropped_ids"] == ["9999"]
    assert wire(result.trace)["iterations"] == []  # the model chose nothing: no judgement asked
    assert all(c["source"] != "section" for c in wire(result.trace)["chunks"])


def _node_id(prompt: str, title: str) -> str:
    return re.search(r"\[(\d{4})\] " + re.escape(title), prompt).group(1)


async def test_a_section_read_in_round_two_reaches_the_evidence_and_the_answer(samples_rt: Runtime,
                                                                            fake_openai: FakeOpenAI) -> None:
    """The first round's chosen sections hold more chunks than the evidence takes; the judgement names the debt
    note and what is missing. The note is searched with that, competes on one scale with the first sections,
    and its chunk is in the final evidence and cited in the answer."""
    first = ["Business overview", "Segment results", "Outlook", "Financial highlights"]

    def tree_search(body: dict[str, Any]) -> FakeReply:
        user = body["messages"][-1]["content"]
        return FakeReply.json({"thinking": "narrative sections", "results": [
            {"node_id": _node_id(user, t), "sub_query": "revenue growth"} for t in first]})

    def judge(body: dict[str, Any]) -> FakeReply:
        user = body["messages"][-1]["content"]
        doc = re.search(r'Document doc_id "(\d+)"', user).group(1)
        return FakeReply.json({"judgement": "insufficient", "reason": "the debt terms are not in the evidence",
                               "read": [{"doc_id": doc, "node_id": _node_id(user, "Note 4 — Debt")}],
                               "missing": "convertible senior notes issued"})

    def answer(body: dict[str, Any]) -> FakeReply:
        user = body["messages"][-1]["content"]
        block = re.search(r"^\[(\d+)\] [^\n]*Note 4 — Debt", user, flags=re.M)
        return FakeReply.text(f"Growth was funded with convertible notes [{block.group(1) if block else 1}].")

    fake_openai.route({METADATA: FakeReply.json({"conditions": [
        {"key": "company", "op": "in", "value": ["Helios Robotics"]}, {"key": "fiscal_year", "op": "in",
                                                                       "value": ["2022"]}]}),
        TREE_SEARCH: tree_search, SUFFICIENCY: judge}, text=answer)
    q = "How did Helios Robotics pay for its expansion in fiscal 2022?"
    result = await pipeline(samples_rt, fake_openai).run(QueryRequest(query=q, strategy="metadata", top_docs=1,
                                                                      top_k=2))
    trace = wire(result.trace)
    assert trace["iterations"][0]["missing"] == "convertible senior notes issued"
    debt = [n for n in trace["nodes"] if n["title"] == "Note 4 — Debt"]
    assert debt and debt[0]["sub_query"] == "convertible senior notes issued"
    round1 = {n["node_id"] for n in trace["nodes"] if n["title"] in first}
    assert sum(1 for c in trace["chunks"] if c["node_id"] in round1) > 2  # the first round alone fills top_k
    evidence = trace["chunks"][:2]
    assert debt[0]["node_id"] in {c["node_id"] for c in evidence}, [c["node_id"] for c in evidence]
    assert [c.node_id for c in result.citations] == [debt[0]["node_id"]]
    assert "convertible senior notes due 2027" in result.citations[0].text
