"""List questions about an event over the companies (issue 36, item 7): each routed document's best passage for
the event is read, the answer names the documents whose passage states it, and says "not found" only when none
does — through the real HTTP API over the bundled sample reports, and the decision "states the event vs. a
hedged mention" sentence by sentence."""

from __future__ import annotations

import pytest

from kb.core import lexicon as lx
from router.events import asked_event, event_answer, read_sentence
from router.types import QuestionScope, RetrievedChunk, ScopePlan, SubQuestion

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
    assert lead == "Pellam Tools (FY2023) states an acquisition in the passages read."
    assert lines[0] == "- Pellam Tools (FY2023): In March 2023 we acquired Tallis Metering GmbH for $40 million. [1]"
    assert lines[1].startswith('- Orrin Foods (FY2023): names an acquisition only as a risk or possibility ("pursue")')
    assert lines[2] == "- Quarry Bank (FY2023): no acquisition stated in the passages read."
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
