"""List questions about an event over the companies (issue 36, item 7): each routed document's best passage for
the event is read, the answer names the documents whose passage states it, and says "not found" only when none
does — through the real HTTP API over the bundled sample reports, and the decision "states the event vs. a
hedged mention" sentence by sentence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from kb.core import lexicon as lx
from kb.runtime import Runtime
from router.events import asked_event, event_answer, read_sentence
from router.types import QuestionScope, RetrievedChunk, ScopePlan, SubQuestion
from tests.http import app_client

EVENT = {e.name: e for e in lx.EVENTS}


# ------------------------------------------------------------------------------------ one sentence


@pytest.mark.parametrize(("event", "sentence", "verdict"), [
    ("acquisition", "In October we completed the acquisition of Meridian Cold Chain for $215 million.", "stated"),
    ("acquisition", "Second, in May we acquired Vantage Vision, a machine-vision start-up, for $58 million.",
     "stated"),  # "May" is the month, not a hedge
    ("acquisition", "We may pursue acquisitions of complementary businesses.", "hedged"),
    ("acquisition", "Future acquisitions could divert management attention and involve risks.", "hedged"),
    ("acquisition", "We did not complete any acquisitions in 2023.", "negated"),
    ("acquisition", "Amortisation of acquired intangible assets was $98.5 million.", "attributive"),
    ("acquisition", "Acquired product rights had a net carrying value of $912.0 million.", "attributive"),
    ("acquisition", "Integration of acquisitions.", "vague"),
    ("recall", "On July 18, 2023 we voluntarily recalled about 1.2 million packages of Harbor Select fillets.",
     "stated"),
    ("recall", "A defect that caused injury could result in liability claims and a physical recall.", "hedged"),
    ("recall", "Contamination of our products could require further recalls.", "hedged"),
    ("share_buyback", "In November 2023 we repurchased $50 million principal amount of our notes.", "incomplete"),
    ("share_buyback", "In March 2024 we repurchased 2.3 million shares for $41 million.", "stated"),
    ("share_buyback", "We did not repurchase shares during the quarter.", "negated"),
    ("auditor_change", "In June 2023 the audit committee dismissed Pratt & Lowe LLP and appointed Orrin Vale LLP "
     "as our independent auditor.", "stated"),
    ("auditor_change", "Pratt & Lowe LLP has served as our auditor since 2009.", "incomplete"),
    ("acquisition", "2023年5月，公司以5.8亿元收购了深圳市星河科技有限公司51%的股权。", "stated"),
    ("acquisition", "公司未来可能通过并购扩大业务规模。", "hedged"),
    ("recall", "如果产品存在质量缺陷，公司可能需要召回产品。", "hedged"),
    ("auditor_change", "报告期内，公司更换了会计师事务所，改聘安永华明会计师事务所为2023年度审计机构。", "stated"),
    ("auditor_change", "报告期内公司未更换会计师事务所。", "negated"),
])
def test_a_sentence_states_the_event_or_only_mentions_it(event: str, sentence: str, verdict: str) -> None:
    seen = read_sentence(sentence, EVENT[event])
    assert seen.verdict == verdict, seen


def test_the_decision_says_why() -> None:
    stated = read_sentence("In October we completed the acquisition of Meridian Cold Chain for $215 million.",
                           EVENT["acquisition"])
    assert (stated.word, stated.detail, stated.kinds) == ("acquisition", "Meridian Cold Chain", 3)
    hedged = read_sentence("We may pursue acquisitions of complementary businesses.", EVENT["acquisition"])
    assert hedged.detail == "pursue"  # the hedge nearest the event's word
    zh = read_sentence("2023年5月，公司以5.8亿元收购了深圳市星河科技有限公司51%的股权。", EVENT["acquisition"])
    assert zh.detail == "深圳市星河科技有限公司"


# ------------------------------------------------------------------------------------ the question


@pytest.mark.parametrize(("question", "event"), [
    ("Which companies made an acquisition?", "acquisition"),
    ("Did any of the companies buy back shares?", "share_buyback"),
    ("Has any company switched auditors?", "auditor_change"),
    ("Which firms recalled products?", "recall"),
    ("哪些公司更换了会计师事务所？", "auditor_change"),
    ("哪些公司回购了股份？", "share_buyback"),
    ("How much did the Meridian acquisition cost?", None),  # a figure, not the event
    ("Which company made the largest acquisition?", None),
    ("Who is the auditor of Aurora Pharma?", None),  # an auditor, no change of it
    ("Which companies repurchased notes?", None),  # a repurchase, not of shares
])
def test_the_event_a_question_asks_about(question: str, event: str | None) -> None:
    asked = asked_event(question)
    assert (asked.name if asked else None) == event


def _chunk(i: int, doc_id: int, text: str) -> RetrievedChunk:
    return RetrievedChunk(chunk_id=i, doc_id=doc_id, doc_name=f"doc-{doc_id}.md", node_id="0001", section_path="Notes",
                          text=text, page=None, pages=(1, 5), unit="line", dense=0.5, bm25=0.0, fused=0.5, score=0.5)


def _plan(*docs: tuple[int, str, str]) -> ScopePlan:
    return ScopePlan(scope=QuestionScope(kind="list", reason="test"), needed=tuple(d for d, _, _ in docs),
                     sub_questions=tuple(SubQuestion(doc_id=d, doc_name=f"doc-{d}.md", question="q", entity=e,
                                                     period=p) for d, e, p in docs))


def test_the_answer_names_only_the_documents_that_state_it() -> None:
    chunks = [_chunk(1, 1, "We may pursue acquisitions that complement our portfolio."),
              _chunk(2, 2, "In March 2023 we acquired Tallis Metering GmbH for $40 million."),
              _chunk(3, 3, "Revenue grew 4% on higher volumes.")]
    plan = _plan((1, "Orrin Foods", "FY2023"), (2, "Pellam Tools", "FY2023"), (3, "Quarry Bank", "FY2023"))
    asked = asked_event("Which companies made an acquisition?")
    assert asked is not None
    ans = event_answer("Which companies made an acquisition?", asked, chunks, plan)
    lead, *lines = ans.text.splitlines()
    # one document states it: the lead quotes its sentence
    assert lead == ("Pellam Tools (FY2023) states an acquisition: In March 2023 we acquired Tallis Metering GmbH for "
                    "$40 million. [1]")
    assert lines[0].startswith('- Orrin Foods (FY2023): names an acquisition only as a risk or possibility ("pursue")')
    assert lines[1] == "- Quarry Bank (FY2023): no acquisition stated in the passages read."
    assert [c.doc_id for c in ans.citations] == [2, 1] and not ans.not_found


def test_not_found_only_when_no_document_states_it() -> None:
    chunks = [_chunk(1, 1, "We may pursue acquisitions that complement our portfolio."),
              _chunk(2, 2, "Revenue grew 4% on higher volumes.")]
    plan = _plan((1, "Orrin Foods", "FY2023"), (2, "Pellam Tools", "FY2023"))
    asked = asked_event("哪些公司进行了收购？")
    assert asked is not None
    ans = event_answer("哪些公司进行了收购？", asked, chunks, plan)
    assert ans.text.splitlines()[0] == "未找到：所读2份文档均未载明收购。"
    assert ans.mode == "not_found" and ans.not_found


def test_an_event_of_another_year_is_said_to_be_of_that_year() -> None:
    chunks = [_chunk(1, 1, "In October we completed the acquisition of Halden Freight for $90 million."),
              _chunk(2, 2, "On May 15, 2023 we acquired all shares of Tallis Metering GmbH for $40 million.")]
    plan = _plan((1, "Orrin Foods", "FY2021"), (2, "Pellam Tools", "FY2023"))
    asked = asked_event("Which companies made an acquisition in 2023?")
    assert asked is not None and asked.years == {2023}
    lead, second = event_answer("Which companies made an acquisition in 2023?", asked, chunks, plan).text \
        .splitlines()
    assert lead.startswith("Pellam Tools (FY2023) states an acquisition in 2023: On May 15, 2023")
    # the sentence names no year: its report's period dates it
    assert second.startswith("- Orrin Foods (FY2021): states an acquisition in 2021, not in 2023:")
    in_2020 = asked_event("Which companies made an acquisition in 2020?")
    assert in_2020 is not None
    none = event_answer("Which companies made an acquisition in 2020?", in_2020, chunks, plan)
    assert none.mode == "not_found" and none.text.startswith("Not found: none of the 2 documents read states an acquisition in 2020.")


# ------------------------------------------------------------------------------------ the samples, over HTTP

QUESTIONS = (
    "Which companies made an acquisition?",
    "Which of the companies reported a product recall?",
    "Did any company change its auditor?",
    "Which companies announced a share buyback?",
    "哪些公司进行了收购？",
    "Which companies made an acquisition in 2023?",
)


@pytest.fixture(scope="module")
async def answers(samples_rt: Runtime) -> AsyncIterator[dict[str, dict[str, Any]]]:
    """``POST /kb/query`` (offline, ``auto``) for each question over the ingested sample reports."""
    from kb.app import create_app

    out = {}
    async with app_client(create_app(runtime=samples_rt, run_worker=False)) as client:
        for q in QUESTIONS:
            r = await client.post("/kb/query", json={"query": q, "include_trace": True})
            assert r.status_code == 200, r.text
            out[q] = r.json()
    yield out


def _cited(body: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {c["marker"]: c for c in body["citations"]}


async def test_which_companies_made_an_acquisition(answers: dict[str, dict[str, Any]]) -> None:
    body = answers["Which companies made an acquisition?"]
    lead, *lines = body["answer"].splitlines()
    assert lead == "Cobalt Logistics (FY2021) and Helios Robotics (FY2023) state an acquisition in the passages read."
    assert body["trace"]["scope"]["kind"] == "list" and len(body["trace"]["scope"]["needed"]) == 6
    cited = _cited(body)
    cobalt = next(ln for ln in lines if ln.startswith("- Cobalt Logistics (FY2021):"))
    helios = next(ln for ln in lines if ln.startswith("- Helios Robotics (FY2023):"))
    assert "Meridian Cold Chain" in cobalt and "Vantage Vision" in helios
    for line, stem in ((cobalt, "cobalt-logistics-2021"), (helios, "helios-robotics-2023")):
        marker = int(line.rsplit("[", 1)[1].rstrip("]"))
        assert cited[marker]["doc_name"].startswith(stem)
        assert " ".join(cited[marker]["quote"].split()) in " ".join(cited[marker]["text"].split())
    # Aurora's "acquired intangible assets" describes what it holds; Helios' 2022 report names no acquisition
    assert lines[-1].endswith(": no acquisition stated in the passages read.") and "Cobalt" not in lines[-1]
    assert all(x in lines[-1] for x in ("Aurora Pharma (FY2023)", "Bluefin Foods (Q3 FY2023)",
                                        "Helios Robotics (FY2022)", "Northwind Energy (FY2023)"))
    assert not body["not_found"]


async def test_a_recall_named_only_as_a_risk_is_no_recall(answers: dict[str, dict[str, Any]]) -> None:
    body = answers["Which of the companies reported a product recall?"]
    lead, *lines = body["answer"].splitlines()
    assert lead.startswith("Bluefin Foods (Q3 FY2023) states a product recall: On July 18, 2023") \
        and "Harbor Select" in lead, lead
    helios = next(ln for ln in lines if ln.startswith("- Helios Robotics (FY2023)"))
    assert "only as a risk or possibility" in helios and "physical recall" in helios
    assert {c["doc_name"].split("-")[0] for c in body["citations"]} == {"bluefin", "helios"}


async def test_nobody_changed_auditor_is_not_found(answers: dict[str, dict[str, Any]]) -> None:
    body = answers["Did any company change its auditor?"]
    lead, *lines = body["answer"].splitlines()
    assert lead == "Not found: none of the 6 documents read states a change of auditor."
    assert body["trace"]["scope"]["kind"] == "list"  # "did any company" asks over all of them
    assert body["not_found"] and body["citations"] == []
    assert len(lines) == 1 and lines[0].endswith("no change of auditor stated in the passages read.")


async def test_a_repurchase_of_notes_is_no_share_buyback(answers: dict[str, dict[str, Any]]) -> None:
    body = answers["Which companies announced a share buyback?"]
    lead, *lines = body["answer"].splitlines()
    assert lead == "Not found: none of the 6 documents read states a share buyback."
    helios = next(ln for ln in lines if ln.startswith("- Helios Robotics (FY2023)"))
    assert "but not of shares or stock" in helios and "convertible notes" in helios
    assert body["not_found"]


async def test_a_chinese_question_over_english_reports(answers: dict[str, dict[str, Any]]) -> None:
    body = answers["哪些公司进行了收购？"]
    lead = body["answer"].splitlines()[0]
    assert lead.endswith("在所读段落中载明了收购。") and "Cobalt Logistics（FY2021）" in lead \
        and "Helios Robotics（FY2023）" in lead and "FY2022" not in lead
    assert "Meridian Cold Chain" in body["answer"] and "Vantage Vision" in body["answer"]


async def test_an_acquisition_of_another_year_is_not_listed_for_the_year_asked(
        answers: dict[str, dict[str, Any]]) -> None:
    body = answers["Which companies made an acquisition in 2023?"]
    lead, *lines = body["answer"].splitlines()
    assert lead.startswith("Helios Robotics (FY2023) states an acquisition in 2023: On May 15, 2023"), lead
    cobalt = next(ln for ln in lines if ln.startswith("- Cobalt Logistics (FY2021)"))
    assert "states an acquisition in 2021, not in 2023" in cobalt and "Meridian Cold Chain" in cobalt


async def test_the_gold_answers_score_right(answers: dict[str, dict[str, Any]]) -> None:
    """The gold set's event list questions over the samples (``bench/answers/questions.jsonl``): each answer's
    lead is right — the stating companies named, or "not found" where none did."""
    from kb.bench.answers_bench import DEFAULT_QUESTIONS, load_cases, score

    cases = [c for c in load_cases(DEFAULT_QUESTIONS) if c.corpus == "samples" and c.question in answers]
    assert {c.id for c in cases} >= {"a033", "e001", "e002", "e003", "e004"}
    for case in cases:
        assert score(case, answers[case.question]["answer"]).outcome == "right", (case.id, case.question)


def test_an_event_asked_of_one_company_is_answered_by_the_document_stating_it() -> None:
    """"Which company had a recall?" (one company asked): the documents read are judged as for "which companies",
    and the lead quotes the sentence of the one stating it."""
    from router.synthesize import _offline

    chunks = [_chunk(1, 1, "Frozen entrées net sales were $141.2 million in the quarter, up 2.2%."),
              _chunk(2, 2, "On March 3, 2023 we recalled 40,000 Alder Peak blenders after reports of cracked jars.")]
    plan = msgspec.structs.replace(_plan((1, "Orrin Foods", "FY2023"), (2, "Pellam Tools", "FY2023")),
                                   scope=QuestionScope(kind="single", reason="test"))
    for question in ("Which company had a product recall of kitchen appliances?", "哪家公司发生了产品召回？"):
        lead = _offline(question, chunks, plan).text.splitlines()[0]
        assert lead.startswith(("Pellam Tools (FY2023) states a product recall: On March 3, 2023",
                                "Pellam Tools（FY2023）载明了")), (question, lead)
