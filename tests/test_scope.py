"""Question scope, per-document evidence budget and decomposition validation (pure functions; the
end-to-end checks on the sample corpus are in tests/test_samples.py)."""

from __future__ import annotations

import pytest

from router.metadata import KnownValues, match_offline
from router.reading import read_question
from router.scope import (
    allot_evidence,
    classify_scope,
    effective_top_docs,
    evidence_share,
    topic,
    validate_plan,
)
from router.types import DocCandidate, RetrievedChunk, RoutingResult

KV = KnownValues(values={
    "company": {"Aurora Pharma": 1, "Northwind Energy": 1, "Helios Robotics": 2, "Apple Inc.": 4},
    "fiscal_year": {"2021": 1, "2022": 2, "2023": 4},
}, doc_count=8)


@pytest.mark.parametrize(("question", "kind"), [
    ("Compare the 2023 revenue of Aurora Pharma and Northwind Energy.", "multi"),
    ("How has Apple's total net sales changed over time?", "multi"),
    ("What is the effective tax rate reported by Apple in these quarters?", "multi"),
    ("How does Apple's R&D spending in the latest quarter compare to previous quarters?", "multi"),
    ("Which of these companies report a product recall?", "list"),
    ("List all companies that mention a cyber attack.", "list"),
    ("Which company had a product recall of frozen seafood?", "single"),
    ("What was Helios Robotics' revenue in fiscal 2022?", "single"),
    ("How much has the effective tax rate of Helios Robotics changed between FY2021 and FY2022?", "single"),
    ("What is the FY2019 - FY2021 3 year average operating margin for Helios Robotics?", "single"),
    ("Compare Helios Robotics' revenue in 2015 and 2023.", "multi"),
    ("Did any company change its auditor?", "list"),  # an event asked over the companies (router.events)
    ("哪些公司进行了收购？", "list"),
    ("Did Helios Robotics change its auditor?", "single"),
])
def test_scope_rules(question: str, kind: str) -> None:
    scope = classify_scope(question, KV)
    assert scope.kind == kind, scope.reason
    assert scope.reason


def test_the_typed_question_widens_the_rules_scope() -> None:
    """Where the rules see one document, the question as read may see more: companies written by short forms, a
    ranking over the collection, a series over years beyond one report's comparatives."""
    from router.reading import read_question

    companies = {c: () for c in KV.values["company"]}

    def scope(question: str):  # noqa: ANN202
        return classify_scope(question, KV, read_question(question, companies))

    two = scope("Did Aurora or Northwind earn more in 2023?")
    assert (two.kind, set(two.entities)) == ("multi", {"Aurora Pharma", "Northwind Energy"}), two.reason
    assert scope("Which firm booked the biggest 2023 revenue?").kind == "list"
    assert scope("Who had the lowest net income in 2022?").kind == "list"
    assert scope("From 2021 to 2023, which year saw the largest increase in revenue?").kind != "list"
    years = scope("How did Helios Robotics' revenue develop from 2015 to 2023?")
    assert (years.kind, years.series) == ("multi", True), years.reason
    assert scope("What was Helios Robotics' revenue in fiscal 2022?").kind == "single"  # as the rules say


def test_an_understood_question_decides_its_scope_and_says_where_the_wording_differs() -> None:
    """The typed question decides; the wording rules' other view is logged and kept in the reason. Not
    understood (no measure), the rules decide alone."""
    from router.reading import read_question

    companies = {c: () for c in KV.values["company"]}

    def scope(question: str):  # noqa: ANN202
        return classify_scope(question, KV, read_question(question, companies))

    for question in ("Which firm booked the biggest 2023 revenue?", "哪家公司2023年的营业收入最高？",
                     "Rank the companies by 2022 net income."):
        s = scope(question)
        assert s.kind == "list" and s.reason.startswith("the question as read"), (question, s.reason)
        assert "the wording alone: single" in s.reason, s.reason  # the rules alone would have read one document
    same = scope("Compare the 2023 revenue of Aurora Pharma and Northwind Energy.")
    assert same.kind == "multi" and "wording alone" not in same.reason
    text = scope("Which of these companies report a product recall?")  # no measure: the wording decides
    assert text.kind == "list" and not text.reason.startswith("the question as read")


def test_scope_entities_and_top_docs() -> None:
    two = classify_scope("Compare the 2023 revenue of Aurora Pharma and Northwind Energy.", KV)
    assert set(two.entities) == {"Aurora Pharma", "Northwind Energy"} and not two.series
    series = classify_scope("How has Apple's total net sales changed over time?", KV)
    assert series.entities == ("Apple Inc.",) and series.series
    assert effective_top_docs(None, series, KV) == 4  # every Apple filing
    assert effective_top_docs(None, two, KV) == 3
    assert effective_top_docs(None, classify_scope("Which of these companies report a recall?", KV), KV) == 10
    assert effective_top_docs(None, classify_scope("What was Apple's revenue?", KV), KV) == 3
    assert effective_top_docs(7, series, KV) == 7
    assert topic("Compare the 2023 revenue of Aurora Pharma and Northwind Energy.", two) == "revenue"
    assert topic("How has Apple's total net sales changed over time?", series) == "total net sales"


def _chunk(cid: int, doc: int, score: float) -> RetrievedChunk:
    return RetrievedChunk(chunk_id=cid, doc_id=doc, doc_name=f"d{doc}", node_id="0001", section_path="s", text="t",
                          page=1, pages=(1, 1), unit="page", dense=score, bm25=0.0, fused=score, score=score)


def test_allot_gives_every_needed_document_its_share() -> None:
    # document 1 dominates the global ranking: a single top-5 list would hold no chunk of document 2
    a = [_chunk(i, 1, 1.0 - i / 100) for i in range(10)]
    b = [_chunk(100 + i, 2, 0.5 - i / 100) for i in range(10)]
    ranked = sorted(a + b, key=lambda c: -c.score)
    out = allot_evidence({1: a, 2: b}, [1, 2], ranked, 5)
    assert [c.doc_id for c in out] == [1, 1, 1, 2, 2]  # share 2 each, the fifth slot by global rank
    assert [c.chunk_id for c in out] == [0, 1, 2, 100, 101]
    assert evidence_share(5, 2) == 2 and evidence_share(5, 20) == 1
    many = allot_evidence({d: [_chunk(d * 10, d, 0.1)] for d in range(8)}, list(range(8)), [], 5)
    assert len(many) == 8 and {c.doc_id for c in many} == set(range(8))  # total = max(top_k, n)
    # a needed document without any chunk keeps no slot and nothing else is dropped
    assert [c.doc_id for c in allot_evidence({1: a}, [1, 2], ranked, 4)] == [1, 1, 1, 1]


def test_validate_plan_drops_and_trims() -> None:
    import msgspec

    from router.prompts import PlanReply

    routing = RoutingResult(strategy_used="auto", documents=tuple(DocCandidate(d, f"d{d}", 1.0, "") for d in (1, 2, 3)))
    reply = msgspec.convert({"scope": "multi", "reason": "two", "sub_questions": [
        {"doc_id": "1", "sub_question": "A revenue"}, {"doc_id": 999, "sub_question": "x"},
        {"doc_id": "1", "sub_question": "again"}, {"doc_id": "2", "sub_question": ""},
        {"doc_id": 3, "sub_question": "C revenue"}, {"doc_id": "2", "sub_question": "B revenue"},
    ]}, PlanReply)
    kept, dropped = validate_plan(reply, routing, top_docs=2)
    assert kept == [(1, "A revenue"), (3, "C revenue")]
    assert any("999" in d for d in dropped) and any("duplicate" in d for d in dropped)
    assert any("empty" in d for d in dropped) and any("beyond top_docs=2" in d for d in dropped)
    for garbage in ({"scope": "several", "sub_questions": []}, {"scope": "multi", "sub_questions": "1,2"},
                    {"scope": "multi", "sub_questions": ["junk"]}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(garbage, PlanReply, strict=False)


def test_readme_lists_the_ranking_policies() -> None:
    """The README's policy table shows the numbers router/policy.py declares."""
    import dataclasses
    import re
    from pathlib import Path

    from router.policy import LLM, OFFLINE, ROUTING

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = readme.split("| policy field | offline | llm |", 1)[1].split("\n\n", 1)[0]
    shown: dict[str, tuple[str, str]] = {}
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0])
        for i, name in enumerate(names):
            shown[name] = (cells[1].split(" / ")[i], cells[2].split(" / ")[i])

    def text(v: object) -> str:
        return ("yes" if v else "no") if isinstance(v, bool) else str(v)

    fields = [f.name for f in dataclasses.fields(OFFLINE) if f.name != "name"]
    assert sorted(shown) == sorted(fields)
    for name in fields:
        assert shown[name] == (text(getattr(OFFLINE, name)), text(getattr(LLM, name))), name
    routing_rows = readme.split("| routing field | value |", 1)[1].split("\n\n", 1)[0]
    routing: dict[str, str] = {}
    for row in routing_rows.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for i, name in enumerate(re.findall(r"`([^`]+)`", cells[0])):
            routing[name] = cells[1].split(" / ")[i]
    assert sorted(routing) == sorted(f.name for f in dataclasses.fields(ROUTING))
    for name, value in routing.items():
        assert float(value) == getattr(ROUTING, name), name


def test_page_diversity_defers_chunks_of_pages_already_covered() -> None:
    from router.ranking import diversify_pages

    def at(cid: int, doc: int, lo: int, hi: int) -> RetrievedChunk:
        return RetrievedChunk(chunk_id=cid, doc_id=doc, doc_name="d", node_id="0001", section_path="s", text="t",
                              page=lo, pages=(lo, hi), unit="page", dense=0, bm25=0, fused=0, score=1 - cid / 10)

    ranked = [at(1, 1, 1, 1), at(2, 1, 1, 1), at(3, 1, 2, 2), at(4, 1, 1, 2), at(5, 2, 1, 1), at(6, 1, 2, 3)]
    # page 1 of document 2 is another page; 6 adds page 3; 2 and 4 only repeat covered pages
    assert [c.chunk_id for c in diversify_pages(ranked)] == [1, 3, 5, 6, 2, 4]


FILERS = [f"{w} {s}" for w, s in zip(
    ["Acme Holdings", "Broad Street Realty", "Foo Corp \\DE\\", "The Arena Group Holdings", "Bar", "Delta Marine",
     "Gresham Worldwide", "Grant Park Futures Fund", "Echo Bay Minerals", "Kestrel Air"],
    ["Inc.", "Inc.", "", "Inc.", "Ltd", "Corporation", "Inc.", "Limited Partnership", "Co.", "ASA"], strict=True)]
FILER_KV = KnownValues(values={"company": {n.strip(): 1 for n in FILERS} | {f"Filler Company {i}": 1 for i in range(40)}},
                       doc_count=50)


@pytest.mark.parametrize("question", [
    "Companies: ACME HOLDINGS, INC., FOO CORP \\DE\\ and BAR LTD. Which company has the highest revenue?",
    "Companies: Acme Holdings Inc, Foo Corporation and Bar Limited. Which has the highest revenue?",
    "Which of Acme Holdings, Inc.'s, Foo Corp's and Bar Ltd.'s revenues is highest?",
])
def test_companies_written_as_filings_or_people_write_them(question: str) -> None:
    scope = classify_scope(question, FILER_KV)
    assert scope.kind == "multi" and set(scope.entities) == {"Acme Holdings Inc.", "Foo Corp \\DE\\", "Bar Ltd"}, scope


def test_many_companies_named_once_each_and_names_inside_names() -> None:
    named = [n.strip() for n in FILERS] + [f"Filler Company {i}" for i in range(40)]
    question = "Companies: " + ", ".join(named) + ", and again " + named[0] + ". Which has the highest revenue?"
    scope = classify_scope(question, FILER_KV)
    assert sorted(scope.entities) == sorted(named)  # 50 companies, the repeated one once
    kv = KnownValues(values={"company": {"Best Buy": 1, "Buy": 1, "Arena": 1, "The Arena Group Holdings, Inc.": 1}},
                     doc_count=4)
    assert classify_scope("What was Best Buy's revenue?", kv).entities == ("Best Buy",)
    assert set(classify_scope("Compare Best Buy and Buy.", kv).entities) == {"Best Buy", "Buy"}


def test_tickers_match_in_capitals_only() -> None:
    kv = KnownValues(values={"ticker": {"ON": 1, "ACNT": 1}}, doc_count=2)
    assert match_offline("Did ON grow revenue?", kv).conditions[0].value == ["ON"]
    assert not match_offline("What was revenue on average?", kv).conditions


def test_sub_question_topic_keeps_only_the_measure() -> None:
    question = ("Companies: Broad Street Realty, Inc., The Arena Group Holdings, Inc. and GRESHAM WORLDWIDE, INC. "
                "Please categorize the companies listed above by 'Cash and Cash Equivalents Balance' into the "
                "following groups: high (over $15,000 in thousands), low (below $10,000 in thousands).")
    scope = classify_scope(question, FILER_KV)
    assert len(scope.entities) == 3
    assert topic(question, scope) == "Cash Cash Equivalents Balance'"
    q2 = "What is the trend in ACME HOLDINGS, INC.'s Net Profit from 2022 to 2024?"
    assert topic(q2, classify_scope(q2, FILER_KV)) == "Net Profit"


def test_chinese_topic_is_the_measure_read_not_the_framing() -> None:
    """A Chinese question's sub-question asks for the measure read from it (its statement names), not for the
    words around it ("根据…的财报数据", "变化趋势是怎样的"); one no measure was read from keeps its Han words."""
    kv = KnownValues(values={"company": {"青山酿造": 3, "临江重工": 2}}, doc_count=5)
    q1 = "根据青山酿造从2019年第一季度到2022年第三季度的财报数据，扣非归母净利润是怎么变化的？"
    s1 = classify_scope(q1, kv)
    reading = read_question(q1, ["青山酿造", "临江重工"])
    assert topic(q1, s1, reading) == "归属于上市公司股东的扣除非经常性损益的净利润"
    q2 = "临江重工2021年和2022年的营收分别是多少？"
    s2 = classify_scope(q2, kv)
    assert topic(q2, s2, read_question(q2, ["青山酿造", "临江重工"])) == "营业总收入 营业收入"
    q3 = "临江重工2022年年度报告中提到的主要风险有哪些？"
    words = topic(q3, classify_scope(q3, kv), read_question(q3, ["青山酿造", "临江重工"]))
    assert "主要风险" in words and "临江重工" not in words and "2022" not in words
    # English: the measure's label joins the question's words when they do not name it
    q4 = "Compare the top line of Aurora Pharma and Northwind Energy in 2023."
    assert topic(q4, classify_scope(q4, KV), read_question(q4, ["Aurora Pharma", "Northwind Energy"])) == \
        "revenue top line"
    q5 = "Compare the 2023 revenue of Aurora Pharma and Northwind Energy."
    assert topic(q5, classify_scope(q5, KV), read_question(q5, ["Aurora Pharma", "Northwind Energy"])) == "revenue"
