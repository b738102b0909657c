"""Answers a reader can use (issue 22): the asked figure first, table rows read out, "not stated" when the
evidence does not state the asked measure, and evidence given as passages under a token budget."""

from __future__ import annotations

import msgspec
import pytest

from kb.runtime import Runtime
from router.passages import join_overlapping, passages
from router.rows import best_row, render, rows_of, value
from router.synthesize import AskedKind, extractive_answer, synthesize
from router.types import RetrievedChunk
from tests.fake_openai import FakeOpenAI, FakeReply, fake_openai_fixture  # noqa: F401
from tests.test_llm_openai import make_model

BALANCE = """Consolidated Balance Sheets
$ in millions, except per share and share amounts
February 2, 2019 February 3, 2018
Assets
Cash and cash equivalents $ 1,980 $ 1,101
Receivables, net 1,015 1,049
Merchandise inventories 5,409 5,209
Other current assets 466 438
Total current assets 8,870 9,829"""

PIPE = """Net sales by year (in thousands)
| Item | 2018 | 2017 |
|---|---|---|
| Net sales | 32,765 | 30,109 |
| Cost of sales | (16,682) | (15,118) |"""


def _chunk(i: int, text: str, doc: str = "acme-2019.pdf", doc_id: int = 1) -> RetrievedChunk:
    return RetrievedChunk(chunk_id=i, doc_id=doc_id, doc_name=doc, node_id="0001", section_path="Financial statements",
                          text=text, page=i, pages=(i, i), unit="page", dense=0.5, bm25=1.0, fused=0.5, score=0.5)


def test_a_statement_row_is_read_with_its_column_and_unit() -> None:
    m = best_row("What were Acme's inventories at the end of FY2019?", [BALANCE], {"acme"})
    assert m is not None and m.row.label == "Merchandise inventories"
    assert render(m) == ("Merchandise inventories, February 2, 2019: $5,409 million "
                         "(February 3, 2018: $5,209 million)")
    m = best_row("What were inventories in 2018?", [BALANCE], set())
    assert m is not None and render(m).startswith("Merchandise inventories, February 3, 2018: $5,209 million")
    m = best_row("What was cost of sales in 2017?", [PIPE], set())
    assert m is not None and render(m) == "Cost of sales, 2017: −15,118 thousand (2018: −16,682 thousand)"
    m = best_row("What was revenue in 2022?", ["| (in millions of US$, except per-share data) | 2022 | 2021 | Change |\n"
                                               "|---|--:|--:|--:|\n| Revenue | 412.6 | 348.5 | 18.4% |"], set())
    assert m is not None and render(m) == "Revenue, 2022: $412.6 million (2021: $348.5 million)"
    # a period the table does not print is not read from another column
    assert best_row("What were inventories in 2016?", [BALANCE], set()) is None


def test_a_table_without_header_keeps_its_row_without_invented_labels() -> None:
    rows = rows_of("Widgets shipped 1,200 900\nGadgets shipped 300 250")
    assert [r.headers for r in rows] == [(), ()]
    m = best_row("How many widgets were shipped?", ["Widgets shipped 1,200 900\nGadgets shipped 300 250"], set())
    assert m is not None and render(m) == "Widgets shipped: 1,200, 900"
    assert rows_of("2019 2018\nThe year was good.") == []  # a header line and prose are not rows


def test_the_offline_answer_leads_with_the_asked_row_then_at_most_two_supporting_sentences() -> None:
    chunks = [_chunk(1, "Inventory levels rose because we stocked up before the holiday season. Our stores are "
                        "large and well lit. Inventories are valued at the lower of cost or net realizable value."),
              _chunk(2, BALANCE)]
    ans = extractive_answer("What is the year end FY2019 total amount of inventories for Acme? Answer in USD "
                            "millions.", chunks)
    first = ans.text.splitlines()[0]
    assert first.startswith("Merchandise inventories, February 2, 2019: $5,409 million (February 3, 2018: $5,209 "
                            "million) [2]"), ans.text
    assert sum(1 for line in ans.text.splitlines() if line.startswith("- ")) <= 2
    assert {c.marker for c in ans.citations} >= {2}
    cited = next(c for c in ans.citations if c.chunk_id == 2)
    parts = cited.quote.split(" … ")  # what the answer cites of the passage, shown highlighted in it
    flat = " ".join(cited.text.split())  # sentences are quoted with their line breaks rejoined
    assert parts[0] == "Merchandise inventories 5,409 5,209" and all(" ".join(p.split()) in flat for p in parts)
    assert ans.mode == "extractive" and not ans.not_found


def test_a_question_without_a_figure_gets_a_sentence() -> None:
    chunks = [_chunk(1, "Acme designs and sells packaging for food and healthcare customers. It has 200 plants."),
              _chunk(2, BALANCE)]
    ans = extractive_answer("What industry does Acme primarily operate in?", chunks)
    assert ans.text.startswith("Acme designs and sells packaging"), ans.text


async def test_not_stated_is_an_answer_that_cites_what_was_read() -> None:
    """Asking a meeting notice for its revenue: the answer says the document does not state it and cites the
    passage it read, with the reason in ``not_found`` (offline), in English and Chinese."""
    from kb.core.providers.chat import OfflineChatModel

    notice = [_chunk(1, "Notice of annual general meeting. The meeting will be held on July 1, 2022 at 10 a.m. "
                        "Shareholders will vote on the election of directors.", doc="acme-8k-2022.pdf")]
    ans = await synthesize(OfflineChatModel(), "What was Acme's revenue in 2022?", notice)
    assert ans.mode == "not_found" and "revenue" in ans.not_found
    assert ans.text.startswith("acme-8k-2022.pdf: revenue for 2022 is not stated"), ans.text
    assert "[1]" in ans.text and [c.marker for c in ans.citations] == [1]
    zh = await synthesize(OfflineChatModel(), "该公司2022年的营业收入是多少？",
                          [_chunk(1, "关于召开2022年第一次临时股东大会的通知。会议将于2022年7月1日召开。", doc="通知.txt")])
    assert zh.mode == "not_found" and "未载明" in zh.text and "营业收入" in zh.text, zh.text
    # the same document asked about something it does state answers it
    ans = await synthesize(OfflineChatModel(), "When will Acme's annual general meeting be held?", notice)
    assert ans.mode == "extractive" and "July 1, 2022" in ans.text


async def test_an_llm_reply_saying_not_stated_is_marked_not_found(fake_openai: FakeOpenAI) -> None:
    """The prompt asks for "Not stated in the evidence" and the reply is checked for it."""
    fake_openai.script(FakeReply.text("Not stated in the evidence: the document is a meeting notice [1]."))
    chat = make_model(fake_openai)
    ans = await synthesize(chat, "What was Acme's revenue in 2022?", [_chunk(1, "Notice of annual meeting.")])
    assert ans.mode == "not_found" and ans.not_found and ans.citations
    assert "Not stated in the evidence" in fake_openai.requests[0].messages[0]["content"]


def test_overlapping_chunk_texts_join_without_repeating() -> None:
    a = "First sentence here. Second sentence is shared by both chunks."
    b = "Second sentence is shared by both chunks. Third sentence only in b."
    assert join_overlapping(a, b) == "First sentence here. Second sentence is shared by both chunks. Third " \
                                     "sentence only in b."
    assert join_overlapping("Alpha beta gamma delta.", "Epsilon zeta eta theta.") == \
        "Alpha beta gamma delta.\nEpsilon zeta eta theta."


@pytest.mark.slow
async def test_evidence_chunks_grow_into_passages_within_the_budget(samples_rt: Runtime) -> None:
    """A ranked chunk brings its neighbours of the same section (no text twice) while the token budget lasts;
    budget 0 leaves the chunks as they are; two evidence chunks of one section that meet become one passage."""
    pool = samples_rt.pool
    row = await pool.fetchrow(
        "SELECT c.document_id, c.node_id, min(c.ordinal) + 1 AS mid FROM chunks c GROUP BY c.document_id, c.node_id "
        "HAVING count(*) >= 3 ORDER BY count(*) DESC LIMIT 1")
    assert row is not None
    stored = await pool.fetch("SELECT id, ordinal, text, page, token_count FROM chunks WHERE document_id = $1 AND "
                              "node_id = $2 ORDER BY ordinal", row["document_id"], row["node_id"])
    mid = next(r for r in stored if r["ordinal"] == row["mid"])
    unit = "page" if mid["page"] is not None else "line"
    core = RetrievedChunk(chunk_id=mid["id"], doc_id=row["document_id"], doc_name="d", node_id=row["node_id"],
                          section_path="s", text=mid["text"], page=mid["page"], pages=(mid["page"] or 1,) * 2,
                          unit=unit, dense=0.5, bm25=1.0, fused=0.5, score=0.5)
    assert await passages(pool, [core], 0) == (core,)
    assert await passages(pool, [core], mid["token_count"]) == (core,)  # no room: the chunk alone
    (grown,) = await passages(pool, [core], 5000)
    before = next(r for r in stored if r["ordinal"] == row["mid"] - 1)
    after = next(r for r in stored if r["ordinal"] == row["mid"] + 1)
    assert mid["text"] in grown.text and before["text"][:60] in grown.text and after["text"][-60:] in grown.text
    assert grown.text.index(before["text"][:60]) < grown.text.index(mid["text"][:60])
    assert len(grown.text) < len(before["text"]) + len(mid["text"]) + len(after["text"]) + 3 * len(stored) + 400
    neighbour = RetrievedChunk(**{**{f: getattr(core, f) for f in core.__struct_fields__},
                                  "chunk_id": after["id"], "text": after["text"]})
    merged = await passages(pool, [core, neighbour], 5000)
    assert len(merged) == 1 and merged[0].chunk_id == core.chunk_id


def test_a_comparison_of_two_documents_states_each_figure_and_the_difference() -> None:
    """A measure outside the facts vocabulary ("backlog") compared across two reports: each report's row read
    out with its citation, then the difference in one unit and in %."""
    from router.synthesize import per_document_answer
    from router.types import QuestionScope, ScopePlan, SubQuestion

    a = _chunk(1, "Order book (in millions)\n2023 2022\nBacklog 1,250 1,100", doc="aurora-2023.pdf", doc_id=1)
    b = _chunk(2, "Order book (in millions)\n2023 2022\nBacklog 800 950", doc="northwind-2023.pdf", doc_id=2)
    plan = ScopePlan(scope=QuestionScope(kind="multi", reason="comparison", entities=("Aurora", "Northwind")),
                     needed=(1, 2), sub_questions=(
                         SubQuestion(doc_id=1, doc_name="aurora-2023.pdf", question="What was the backlog of Aurora in 2023?",
                                     entity="Aurora", period="2023"),
                         SubQuestion(doc_id=2, doc_name="northwind-2023.pdf",
                                     question="What was the backlog of Northwind in 2023?", entity="Northwind", period="2023")))
    ans = per_document_answer("Compare the 2023 backlog of Aurora and Northwind.", [a, b], plan)
    assert "Backlog, 2023: 1,250 million (2022: 1,100 million) [1]" in ans.text \
        and "Backlog, 2023: 800 million (2022: 950 million) [2]" in ans.text, ans.text
    assert "Difference: Aurora 2023 is 450 million higher than Northwind 2023 (56.2%)." in ans.text, ans.text


def test_a_comparison_from_sentences_computes_the_difference() -> None:
    """Without table rows, each report's sentence stating the measure gives its figure."""
    from router.synthesize import per_document_answer
    from router.types import QuestionScope, ScopePlan, SubQuestion

    a = _chunk(1, "The United States generated 61% of revenue. Total revenue increased 9.4% to $2,146.8 million "
                  "and net income rose to $402.5 million.", doc="aurora-2023.pdf", doc_id=1)
    b = _chunk(2, "For 2024 we expect revenue between $1,360 million and $1,420 million. "  # a plan: not read
                  "Revenue rose 11.2% to $1,284.6 million, and net income was $187.3 million.",
               doc="northwind-2023.pdf", doc_id=2)
    subs = tuple(SubQuestion(doc_id=i, doc_name=n, question=f"What was the revenue of {e} in 2023?", entity=e,
                             period="FY2023")
                 for i, n, e in ((1, "aurora-2023.pdf", "Aurora"), (2, "northwind-2023.pdf", "Northwind")))
    plan = ScopePlan(scope=QuestionScope(kind="multi", reason="comparison", entities=("Aurora", "Northwind")),
                     needed=(1, 2), sub_questions=subs)
    ans = per_document_answer("Compare the 2023 revenue of Aurora and Northwind.", [a, b], plan)
    assert "Difference: Aurora FY2023 is $862.2 million higher than Northwind FY2023 (67.1%)." in ans.text, ans.text
    assert "(Aurora, FY2023): Total revenue increased" in ans.text, ans.text  # the stating sentence first


def test_a_measure_the_evidence_never_mentions_is_not_stated() -> None:
    chunks = [_chunk(1, "Net sales for the third quarter rose 6.6% to $268.4 million. Gross margin was 24.7%.")]
    ans = extractive_answer("What was Bluefin Foods' goodwill impairment in the third quarter of 2023?", chunks)
    assert ans.mode == "not_found" and ans.text.startswith("acme-2019.pdf: goodwill impairment"), \
        ans.text
    ans = extractive_answer("What were net sales in the third quarter?", chunks)
    assert ans.mode == "extractive" and "268.4" in ans.text


def test_a_per_share_row_keeps_its_unit_and_a_change_column_is_named() -> None:
    """"(in millions, except per-share data)" does not apply to a per-share row ("$1.48 per share", never "$1.48
    million"); a header "2023 2022 Change" names the change column, so the row's figures keep their years."""
    pipe = ("| (in millions of US$, except per-share data) | 2023 | 2022 | Change |\n|---|--:|--:|--:|\n"
            "| Net income | 187.3 | 158.4 | 18.2% |\n| Dividend per share | 1.48 | 1.40 | 5.7% |")
    m = best_row("What was the dividend per share in 2023?", [pipe], set())
    assert m is not None and render(m) == "Dividend per share, 2023: $1.48 per share (2022: $1.40 per share)"
    assert value(m) == 1.48
    text = ("Financial highlights\n(in millions of US$, except per-share data) 2023 2022 Change\n"
            "Net income $ 402.5 $ 371.2 8.4%\nDiluted earnings per share 3.12 2.87 8.7%")
    assert [r.headers for r in rows_of(text)] == [("2023", "2022", "Change")] * 2
    m = best_row("What was net income in 2023?", [text], set())
    assert m is not None and render(m) == "Net income, 2023: $402.5 million (2022: $371.2 million)"
    m = best_row("Diluted earnings per share in 2023?", [text], set())
    assert m is not None and render(m).startswith("Diluted earnings per share, 2023: $3.12 per share")


def test_the_sentence_stating_the_kind_of_figure_asked_leads() -> None:
    """"How many …" leads with a count of the thing asked, "how much / cost" with an amount of money, "what share"
    with a percentage — not with the sentence that merely shares the most words."""
    from router.synthesize import asked_kind

    assert asked_kind("How many wind turbines did Pelican Bay install in 2023?") == AskedKind("count", "turbines")
    assert asked_kind("How many stores does Orchard Lane operate?") == AskedKind("count", "stores")
    assert asked_kind("How much did the flood cost Pelican Bay?").kind == "money"
    assert asked_kind("What did Orchard Lane pay for the Lakeside bakery?").kind == "money"
    assert asked_kind("What share of revenue came from Europe?").kind == "percent"
    assert asked_kind("Who is the chief executive?") is None
    stores = asked_kind("How many stores does Orchard Lane operate?")
    assert stores is not None and stores.stated_in("Store counts at period end(1) 1,204 1,187")  # a table row
    assert not stores.stated_in("Retail square feet at period end(1) 1,129 1,158")
    assert not stores.stated_in("Stores opened in 2023 were larger")  # a year is no count
    text = ("The new wind turbines raised output per site by 31% in the months they ran. "
            "We installed 240 new wind turbines across three coastal sites in 2023.")
    chunk = _chunk(1, text, "pelican.pdf")
    answer = extractive_answer("How many wind turbines did Pelican Bay install?", [chunk])
    assert answer.text.startswith("We installed 240 new wind turbines"), answer.text
    flood = ("The flood closed the Harbor plant for nine days in April. "
             "Repairs and lost output cost the company $8.2 million, partly covered by insurance.")
    chunk = msgspec.structs.replace(chunk, text=flood)
    answer = extractive_answer("How much did the flood cost Pelican Bay?", [chunk])
    assert answer.text.startswith("Repairs and lost output cost the company $8.2 million"), answer.text


def test_a_change_asked_of_one_row_is_computed_from_its_two_years() -> None:
    pipe = ("| (in millions of US$, except per-share data) | 2023 | 2022 | Change |\n|---|--:|--:|--:|\n"
            "| Revenue | 497.3 | 412.6 | 20.5% |\n| Net income (loss) | 6.1 | (23.8) | n/m |")
    chunk = _chunk(1, pipe, "orchard.md")
    answer = extractive_answer("By how much did Orchard Lane's revenue grow from 2022 to 2023?", [chunk])
    assert answer.text.startswith("Revenue, 2023: $497.3 million (2022: $412.6 million): up $84.7 million "
                                  "(+20.5%) from 2022 to 2023"), answer.text
    answer = extractive_answer("How did Orchard Lane's net income change between 2022 and 2023?", [chunk])
    assert "up $29.9 million" in answer.text.split("\n")[0], answer.text


def test_no_table_syntax_in_an_answer() -> None:
    from router.synthesize import readable

    assert readable("| (in millions) | 2023 | 2022 | |---|--:|--:| | Revenue | 497.3 | 412.6 | | Net income | 6.1 "
                    "| (23.8) |") == "(in millions); Revenue: 497.3 (2023), 412.6 (2022); Net income: 6.1 (2023), (23.8) (2022)"
    assert readable("|-|本报告期|上年同期| |---|---|---| |营业收入（元）|9,268.40|10,889.63|") == \
        "营业收入（元）: 9,268.40（本报告期）, 10,889.63（上年同期）"  # each figure with its column
    assert readable("| Segment | Q3 2024 | Q3 2023 |\n|---|---|---|\n| Cloud | 12.1 | - |") == "Cloud: 12.1 (Q3 2024)"
    assert readable("| a | b |\n| c | d |") == "a: b; c: d"  # no header row: the rows as they are
    assert readable("A sentence  with\nspaces | and one pipe.") == "A sentence with spaces | and one pipe."


def test_a_sentence_about_another_year_is_no_answer() -> None:
    """"Revenue in 2023" is not answered by "For 2022 we expect revenue …": not stated, the closest passage cited."""
    text = ("For 2022 we expect revenue between $3,300 million and $3,600 million. "
            "Orchard Lane opened four stores in the Midwest during the year.")
    chunk = _chunk(1, text, "orchard-2021.pdf")
    answer = extractive_answer("What was Orchard Lane's revenue in 2023?", [chunk])
    assert answer.mode == "not_found" and answer.text.startswith("orchard-2021.pdf: revenue for 2023 is not stated")
    answer = extractive_answer("How much revenue does Orchard Lane expect for 2022?", [chunk])
    assert answer.text.startswith("For 2022 we expect revenue between $3,300 million"), answer.text


def test_a_share_count_row_is_no_per_share_row() -> None:
    table = ("(in millions, except per share amounts) 2023 2022\n"
             "Weighted-average shares used in computing earnings per share 15,812 16,326\n"
             "Diluted earnings per share 6.13 6.11")
    m = best_row("How many weighted-average shares were used in computing earnings per share in 2023?", [table], set())
    assert m is not None and render(m) == ("Weighted-average shares used in computing earnings per share, 2023: "
                                           "15,812 million (2022: 16,326 million)"), render(m)
    assert value(m) == 15_812_000_000


def test_a_plan_for_another_year_gives_way_to_the_figures_read() -> None:
    """A forward-looking sentence about a year not asked does not lead; the figures read for the asked year do."""
    text = ("We expect to make approximately $200 million of pension contributions in 2023.\n"
            "Expected benefit payments 2024 1,097 862")
    chunk = _chunk(1, text, "pelican-2021.pdf")
    answer = extractive_answer("How much did Pelican Bay expect to pay in benefits in 2024?", [chunk])
    assert "1,097" in answer.text.split("\n")[0] and "$200 million" not in answer.text.split("\n")[0], answer.text


def test_a_question_about_a_plan_leads_with_the_plan() -> None:
    """"What does it guide to / expect for next year" is answered by the forward-looking sentence, not by the
    year's actual figure that shares more words with the question."""
    text = ("Net sales rose 6% to $1,210 million and diluted earnings per share were $2.45. "
            "For 2025 we expect diluted earnings per share between $2.60 and $2.75.")
    chunk = _chunk(1, text, "orchard-2024.pdf")
    for question in ("What diluted EPS range does Orchard Lane guide to for 2025?",
                     "What diluted earnings per share does Orchard Lane expect next year?"):
        answer = extractive_answer(question, [chunk])
        assert answer.text.startswith("For 2025 we expect diluted earnings per share"), (question, answer.text)
    answer = extractive_answer("What were Orchard Lane's diluted earnings per share?", [chunk])
    assert answer.text.startswith("Net sales rose 6%"), answer.text
    from router.synthesize import forward_looking

    assert forward_looking("We target a 40% payout in 2026.") and forward_looking("Guidance for 2025 is unchanged.")
    assert not forward_looking("Leverage ended the year at 2.9x, within our target range.")
    assert not forward_looking("The guidelines of the board were followed.")


def test_a_quarter_or_nine_months_asked_is_read_from_its_own_column_or_not_stated() -> None:
    """A quarter asked of an annual report's table of years, or of a letter's sentences about the year, is not
    stated; a table printing the quarter and nine months beside each other answers from the asked span's column;
    a plan alone is no reported figure; "higher than expected" looks back."""
    annual = _chunk(1, "Selected figures (in millions) 2023 2022\nRevenue 497.3 412.6\n"
                       "Revenue grew 20.5% to $497.3 million in the year.", "orchard-2023.pdf")
    for question in ("What was Orchard Lane's Q3 2023 revenue?", "Orchard Lane revenue for the nine months of 2023?"):
        answer = extractive_answer(question, [annual])
        assert answer.mode == "not_found" and "is not stated" in answer.text.split("\n")[0], (question, answer.text)
    table = _chunk(1, "(in millions, except per share)\n| | Q3 2023 | Q3 2022 | 9M 2023 |\n|---|---|---|---|\n"
                      "| Diluted earnings per share | 0.41 | 0.57 | 1.39 |", "pelican-q3.md")
    nine = extractive_answer("Pelican Bay's diluted EPS for the nine months of 2023?", [table])
    assert nine.text.startswith("Diluted earnings per share, 9M 2023: 1.39 per share"), nine.text
    quarter = extractive_answer("Pelican Bay's diluted EPS in Q3 2023?", [table])
    assert quarter.text.startswith("Diluted earnings per share, Q3 2023: 0.41 per share"), quarter.text
    plan = _chunk(1, "For 2024 we expect revenue between $480 million and $500 million.", "orchard-2023.pdf")
    assert extractive_answer("What was Orchard Lane's revenue in 2024?", [plan]).mode == "not_found"
    from router.synthesize import forward_looking

    assert not forward_looking("Revenue of $310 million was higher than expected.")
    assert not forward_looking("Margins recovered as expected in the second half.")


def test_a_figure_asked_is_not_answered_by_a_header_a_remark_or_another_year() -> None:
    """A figure asked: a header line of years, a remark without a figure, a sentence about other years only, or a
    row sharing only "total" with the question is no answer — not stated, the closest passage cited; a row of
    the measure's part ("Services") is read before the concept's total; a page footer is no row."""
    header = _chunk(1, "Fiscal Years Ended January 31, (Amounts in millions, except unit counts) 2020 2019 2018\n"
                       "Orchard Lane typically declares and pays dividends in the same quarter.", "orchard-2020.pdf")
    for question in ("How many stores did Orchard Lane operate in total at January 31, 2020?",
                     "What dividend per share did Orchard Lane pay in 2019?"):
        answer = extractive_answer(question, [header])
        assert answer.mode == "not_found", (question, answer.text)
    other = _chunk(1, "Revenue reconciling amounts for fiscal year 2014 included a net $349 million of deferrals.",
                   "pelican-2015.pdf")
    assert extractive_answer("What was Pelican Bay's revenue in fiscal 2010?", [other]).mode == "not_found"
    totals = _chunk(1, "Total revenues $ 523,964 $ 514,405 $ 500,343", "orchard-2020.pdf")
    assert extractive_answer("How many retail units did Orchard Lane run in total?", [totals]).mode == "not_found"
    table = _chunk(1, "(in millions) 2023 2022\nProducts 60,584 63,355\nServices 21,213 19,604\n"
                      "Total net sales 81,797 82,959\nPelican Bay Inc. | Q3 2023 Form 10-Q | 1", "pelican-q3.pdf")
    answer = extractive_answer("What was Pelican Bay's Services revenue in 2023?", [table])
    assert answer.text.startswith("Services, 2023: 21,213 million"), answer.text
    answer = extractive_answer("Pelican Bay Products revenue for 2023?", [table])  # the part named with a capital
    assert answer.text.startswith("Products, 2023: 60,584 million"), answer.text
    footer = "(in millions) 2023 2022\nPelican Bay Annual Report | Page 12 of 96 | 12\n"
    assert best_row("What did the Pelican Bay Annual Report show for 2023?", [footer], set()) is None
    nets = _chunk(1, "Net 1,204 1,115\nOther, net 88 91", "orchard-2020.pdf")
    answer = extractive_answer("How many warehouses did Orchard Lane run, net of closures?", [nets])
    assert answer.text.startswith("The retrieved evidence does not clearly answer"), answer.text  # no "Net" row


def test_plain_words_find_how_filings_write_them_and_a_sentence_of_another_span_is_no_answer() -> None:
    """"buy back" is read as filings write it ("repurchased"); nine months asked are not answered by a sentence
    naming only the quarter (then not stated), and are by one naming the nine months."""
    text = ("The Company repurchased $18.0 billion of its common stock during the third quarter of 2023. "
            "During the nine months ended July 1, 2023, the Company repurchased $56.1 billion of its common stock. "
            "Stock compensation expense was $2.9 billion.")
    chunk = _chunk(1, text, "pelican-q3.pdf")
    for question in ("How much stock did Pelican Bay buy back in the first nine months of 2023?",
                     "What did Pelican Bay spend on buybacks in the nine months to July 2023?"):
        answer = extractive_answer(question, [chunk])
        assert answer.text.startswith("During the nine months ended July 1, 2023, the Company repurchased $56.1"), \
            (question, answer.text)
    quarter_only = _chunk(1, text.split(". During")[0] + ".", "pelican-q3.pdf")
    answer = extractive_answer("How much stock did Pelican Bay buy back in the first nine months of 2023?",
                               [quarter_only])
    assert answer.mode == "not_found", answer.text


def test_a_thing_the_question_names_inside_the_report_and_a_figure_beside_the_asked_word_lead() -> None:
    """A capitalised name that is not the documents' ("the Saltmarsh Solar Park" in pelican-bay-2023) is the
    thing asked about, not the routing company; and of the sentences naming it, the one with a figure beside
    the asked word ("180 MW of capacity") leads — though a better-ranked passage shares the asked word."""
    cases = [("pelican-bay-2023.pdf", "What is the capacity of the Saltmarsh Solar Park?",
              "Operations review. The fleet-wide solar capacity factor was 24.1% (2022: 23.0%).",
              "Saltmarsh adds 180 MW of capacity in the Sonoran desert and began operating in May 2023. "
              "The Saltmarsh Solar Park agreement runs fifteen years at a fixed price of $38.00 per MWh.",
              "Saltmarsh adds 180 MW of capacity"),
             ("orchard-lane-2023.pdf", "How much floor space does the Ridgeview depot have, in square feet?",
              "Logistics. Company-wide, warehouse floor space utilisation averaged 87% during the year.",
              "The Ridgeview depot lease runs until 2031 and is renewable twice at $4.2 million a year. "
              "It spans 640,000 square feet of floor space across two buildings.",
              "It spans 640,000 square feet")]
    for doc, question, better_ranked, naming_it, lead in cases:
        answer = extractive_answer(question, [_chunk(1, better_ranked, doc), _chunk(2, naming_it, doc)])
        assert answer.text.startswith(lead), answer.text


def test_a_sentence_two_passages_repeat_is_read_once() -> None:
    said = "Our effective tax rate was 18% and 19% for the three months ended September 30, 2023 and 2022."
    chunks = [_chunk(1, f"Income taxes. {said}", "pelican-q1.pdf"), _chunk(2, f"Note 10. {said}", "pelican-q1.pdf"),
              _chunk(3, "Uncertain tax positions are measured at the largest benefit with a greater than 50% "
                        "likelihood of being realized.", "pelican-q1.pdf")]
    answer = extractive_answer("What was Pelican Bay's effective tax rate in the quarter?", chunks)
    assert answer.text.count("effective tax rate was 18%") == 1 and "50%" in answer.text, answer.text


def test_a_figure_of_another_measure_in_the_asked_word_s_compound_does_not_lead() -> None:
    """"Deferred revenue was $44.8 million", "Services revenue was $46.2 million", "28.8% of revenue" and
    "$6.6 billion of revenue deferrals" are not the revenue asked: the year's revenue sentence leads."""
    text = ("Deferred revenue was $44.8 million at year end. Services revenue was $46.2 million, up 21.9%. "
            "We invested $61.8 million in research, 12.4% of revenue. "
            "Pelican Bay grew revenue 9.1% in 2023 to $497.3 million on stronger harbour volumes.")
    answer = extractive_answer("What was Pelican Bay's revenue in 2023?", [_chunk(1, text, "pelican-bay-2023.pdf")])
    assert answer.text.startswith("Pelican Bay grew revenue 9.1% in 2023 to $497.3 million"), answer.text


def test_a_name_the_question_capitalises_is_no_measure_word_a_figure_stands_beside() -> None:
    text = ("Terminal revenue was $310.2 million, up 9.0%, including $12.1 million from Harbor Cold Storage after "
            "its acquisition. In May we completed the acquisition of Harbor Cold Storage for $88 million in cash.")
    answer = extractive_answer("How much did Pelican Bay pay for Harbor Cold Storage?",
                               [_chunk(1, text, "pelican-bay-2023.pdf")])
    assert answer.text.startswith("In May we completed the acquisition of Harbor Cold Storage for $88 million"), \
        answer.text


def test_the_typed_measure_leads_over_another_figure_and_a_year_of_reference_is_no_period() -> None:
    """The measure the typed question reads ("generate from operations": cfo) names the lead sentence; "since
    2019" does not make a sentence one about 2019."""
    from router.reading import read_question

    assert read_question("How much cash did Pelican Bay generate from operations in 2024?").concept == "cfo"
    text = ("Cash decreased because of the Harbor acquisition and capital expenditures of $41.2 million, mostly "
            "for the new mill. Cash provided by operating activities was $14.9 million, the first positive year "
            "since 2018. Inventories fell to $63.0 million.")
    chunk = _chunk(1, text, "pelican.md")
    answer = extractive_answer("How much cash did Pelican Bay generate from operations in 2024?", [chunk],
                               concept="cfo")
    assert answer.text.startswith("Cash provided by operating activities was $14.9 million"), answer.text
    free = _chunk(1, "Free cash flow reached $30.1 million in the year, the highest since 2015. The board met "
                     "eleven times.", "orchard.md")
    answer = extractive_answer("What was Orchard Lane's free cash flow in 2024?", [free])
    assert answer.text.startswith("Free cash flow reached $30.1 million"), answer.text


def test_a_question_for_the_members_of_a_list_is_answered_with_their_names() -> None:
    text = ("Segment results\nWe report four segments. Corporate costs were $12.5 million in 2024.\nPulp\n"
            "Pulp revenue was $310.2 million.\nPackaging Board\nPackaging Board revenue was $205.0 million.\n"
            "Tissue\nTissue revenue rose 4% to $98.1 million, helped by new lines in\nOhio and Kentucky\n"
            "and lower costs.\nRecycling Services\nRecycling Services earned $41.7 million.")
    chunk = _chunk(1, text, "pelican.pdf")
    answer = extractive_answer("What segments does Pelican Bay report?", [chunk])
    assert answer.text.startswith("We report four segments: Pulp, Packaging Board, Tissue, Recycling Services."), \
        answer.text
    two = _chunk(1, "Orchard Lane has two reportable segments, Groceries and Pharmacy, each with its own "
                    "manager. Segment profit excludes $8.1 million of corporate costs.", "orchard.md")
    answer = extractive_answer("Which reportable segments does Orchard Lane have?", [two])
    assert answer.text.startswith("Orchard Lane has two reportable segments, Groceries and Pharmacy"), answer.text


def test_a_scale_applies_only_to_the_rows_it_covers() -> None:
    """"in millions, except per share amounts" / "except unit counts": those rows keep their own unit."""
    table = ("(Dollars in millions, except per share amounts) 2024 2023 2022\n"
             "Net sales $ 4,210 $ 3,980 $ 3,702\n"
             "Cash dividends paid per Acme common share 2.40 2.20 2.00\n"
             "Store counts at period end(1) 1,204 1,187 1,150")
    chunk = _chunk(1, table, "acme.pdf")
    answer = extractive_answer("What dividend per share did Acme pay in 2024?", [chunk],
                               concept="dividends_per_share")
    assert answer.text.startswith("Cash dividends paid per Acme common share, 2024: $2.40 per share"), answer.text
    rows = {r.label: r for r in rows_of(table.replace("per share amounts", "per share amounts and unit counts"))}
    store = rows["Store counts at period end(1)"]
    assert store.scale == "" and not store.currency
    assert rows["Net sales"].scale == "million"


def test_the_whole_asked_is_not_answered_with_a_segment_and_a_row_keeps_its_columns() -> None:
    us = _chunk(1, "Orchard Lane U.S. Segment\nFiscal Years Ended January 31,\n(Amounts in millions, except unit "
                   "counts) 2024 2023\nStore counts at period end 2,310 2,295\nNet sales $ 41,200 $ 39,870", "o.pdf")
    total = _chunk(2, "Consolidated Results of Operations\nFiscal Years Ended January 31,\n(Amounts in millions, "
                      "except unit counts) 2024 2023\nTotal revenues $ 60,100 $ 58,020\n"
                      "Store counts at period end(1) 4,112 4,090\nRetail square feet at period end(1) 402 398",
                   "o.pdf")
    answer = extractive_answer("How many stores did Orchard Lane operate in total at January 31, 2024?", [us, total])
    assert answer.text.startswith("Store counts at period end, 2024: 4,112 (2023: 4,090)"), answer.text
    answer = extractive_answer("Overall, how many stores did Orchard Lane have in 2024?", [us, total])
    assert answer.text.startswith("Store counts at period end, 2024: 4,112"), answer.text


def test_a_second_thing_asked_is_answered_in_the_lead() -> None:
    text = ("In March 2024 we announced that we would close 14 older stores by year end. During the quarter ended "
            "June 30, 2024 we recorded $22.5 million of lease impairment charges for these closures. Our "
            "remaining stores performed well.")
    chunk = _chunk(1, text, "orchard.md")
    answer = extractive_answer("How many stores did Orchard Lane say it would close, and how much did it record "
                               "in impairment charges?", [chunk])
    lead = answer.text.split("\n")[0]
    assert "14 older stores" in lead and "$22.5 million" in lead, answer.text
    assert "by year end [1]; during the quarter ended June 30, 2024" in lead  # one sentence
    answer = extractive_answer("How many stores will Orchard Lane close and what impairment did it book?",
                               [chunk])
    assert "$22.5 million" in answer.text.split("\n")[0], answer.text


def test_bad_cells_are_read_in_their_own_columns() -> None:
    table = ("(in millions) 2024 2023\nNet income 402.5(1) 371.2\nOperating loss (23.8)(2) 14.6-\n"
             "Other income n/m 3.1")
    rows = {r.label: r for r in rows_of(table)}
    assert rows["Net income"].cells == ("402.5", "371.2")
    assert render(best_row("What was net income in 2024?", [table], set())).startswith(
        "Net income, 2024: 402.5 million (2023: 371.2 million)")
    assert "2023: −14.6 million" in render(best_row("What was the operating loss in 2024?", [table], set()))
    assert rows["Other income"].cells == ("n/m", "3.1")


def test_a_text_figure_carries_its_span_and_another_span_is_not_the_answer() -> None:
    """The lead's figure is typed with its span ("for each quarter": 3 months); asked for the year, the answer
    says the year's figure was not found and labels what the passage states."""
    from router.textfigure import asked_span, text_figure

    assert text_figure("Operating cash flow for the nine months was $48.2 million.").months == 9
    assert text_figure("Revenue for the year was $1,204.5 million.").months == 12
    assert text_figure("We employed 2,300 people at the end of the third quarter.").months == 0  # a count
    dated = text_figure("During the three months ended June 30, 2024, we recorded $22.5 million of charges.")
    assert dated is not None and dated.months == 3 and str(dated.ends) == "2024-06-30"
    assert [asked_span(q) for q in ("Orchard Lane's revenue in fiscal 2024?", "Pelican Bay's Q2 2024 sales?",
                                    "Orchard Lane's first-half 2024 revenue?", "Cash at March 31, 2024?")] \
        == [12, 3, 6, 0]
    chunk = _chunk(1, "Pelican Bay's board declared cash dividends of $0.42 per share for each quarter in 2024, "
                      "up from $0.40 in 2023. Dividends are paid in the month after they are declared.", "p.md")
    year = extractive_answer("What dividend did Pelican Bay pay per share in 2024?", [chunk])
    assert year.text.startswith("I could not find the figure for the year asked; the passage read states one for "
                                "a quarter:"), year.text
    assert year.lead is not None and year.lead.months == 3 and year.not_found
    quarter = extractive_answer("What dividend per share did Pelican Bay pay in the second quarter of 2024?",
                                [chunk])
    assert quarter.text.startswith("Pelican Bay's board declared cash dividends of $0.42"), quarter.text
    assert not quarter.not_found


def test_a_header_split_over_two_lines_gives_each_row_its_dates() -> None:
    table = ("CONDENSED CONSOLIDATED BALANCE SHEETS\n                    As of\n"
             "          June 30, 2024        December 31,\n          (unaudited)                 2023\nASSETS\n"
             "Cash        $   512,300   $   498,010\nTotal assets   $ 9,301,200   $ 9,118,400")
    rows = {r.label: r for r in rows_of(table)}
    assert rows["Total assets"].headers == ("June 30, 2024", "December 31, 2023")
    assert "March" not in " ".join(rows)  # the header's upper line is no row
    two = "        September 30,     December 31,\n        2024              2023\nInventories  1,200  1,150"
    assert rows_of(two)[0].headers == ("September 30, 2024", "December 31, 2023")
    assert render(best_row("What were total assets at June 30, 2024?", [table], set())).startswith(
        "Total assets, June 30, 2024: $9,301,200 (December 31, 2023: $9,118,400)")


def test_review_cases_of_the_lead_rules_stay_right() -> None:
    """Edges of the lead rules: a run of dashes after a measure's name, a span of odd months, a measure asked as
    "what were the …", a total written in prose, a second ask the evidence does not answer, and a scale's
    "except" item of two words."""
    dashes = _chunk(1, "| Net cash from operating activities | " + "-" * 60 + " |\n| Net cash | 1,234 |", "a.md")
    assert extractive_answer("How much cash did Acme generate from operations?", [dashes], concept="cfo").text
    odd = _chunk(1, "Revenue for the period May 7, 2024 to June 3, 2024 was $5.0 million.", "a.md")
    answer = extractive_answer("What was Acme's revenue in 2024?", [odd])
    assert answer.lead is not None and answer.lead.months == 0
    sales = _chunk(1, "We completed three sales of non-core businesses in 2024 for $120 million. Net sales were "
                      "$2,410.5 million in 2024.", "a.md")
    answer = extractive_answer("What were the net sales of Acme in 2024?", [sales], concept="revenue")
    assert answer.text.startswith("Net sales were $2,410.5 million"), answer.text
    prose = _chunk(1, "Acme manages its business in two segments, Retail and Wholesale. At year end Acme operated "
                      "1,150 stores, of which the Retail segment operated 900.", "a.md")
    answer = extractive_answer("How many stores did Acme operate in total?", [prose])
    assert answer.text.startswith("At year end Acme operated 1,150 stores"), answer.text
    plan = _chunk(1, "Acme will cut 1,200 jobs under the plan. The plan covers 14 countries.", "a.md")
    answer = extractive_answer("How many jobs will Acme cut, and what will the plan cost?", [plan])
    assert "14 countries" not in answer.text.split("\n")[0], answer.text
    table = "(In thousands, except per share data and number of stores) 2024 2023\nStore operating expenses " \
            "1,200 1,100\nNumber of stores 410 400"
    rows = {r.label: r for r in rows_of(table)}
    assert rows["Store operating expenses"].scale == "thousand" and rows["Number of stores"].scale == ""


def test_a_measure_named_in_the_plural_is_named() -> None:
    """"interest expenses", "dividends per share": the name's last word in the plural still names the measure."""
    chunk = _chunk(1, "Interest expenses were $41.2 million in 2024, up from $38.0 million, on higher rates.", "a.md")
    answer = extractive_answer("What were Orchard Lane's interest expenses in 2024?", [chunk],
                               concept="interest_expense")
    assert answer.text.startswith("Interest expenses were $41.2 million"), answer.text
    answer = extractive_answer("How much interest expense did Orchard Lane report for 2024?", [chunk],
                               concept="interest_expense")
    assert answer.text.startswith("Interest expenses were $41.2 million"), answer.text
