"""End to end: generated text filings ingested into the embedded Postgres store their statement facts; corpus
questions (highest, groups, trend, look-up) are answered from them over HTTP, offline, with citations to the
statement lines; ``GET /kb/documents/{id}/facts`` lists them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kb.app import create_app
from kb.runtime import Runtime
from tests.conftest import runtime_over
from tests.factgen import figures, text_filing
from tests.http import app_client, ask_json, wire

pytestmark = pytest.mark.slow

REPORTS = {
    "acme-2023.txt": ("Acme Holdings, Inc.", 2023, figures(1_500, -250, cash=320, liabilities=900, eps=-0.05),
                      figures(1_200, 80, cash=410, liabilities=700, eps=0.02)),
    "acme-2022.txt": ("Acme Holdings, Inc.", 2022, figures(1_200, 80, cash=410, liabilities=700, eps=0.02),
                      figures(1_000, 60, cash=300, liabilities=650, eps=0.01)),
    "bolt-2023.txt": ("Bolt Corp", 2023, {**figures(8_000, 900, cash=2_500, liabilities=4_000, eps=1.25),
                                          "inventory": 610},
                      figures(7_000, 700, cash=2_000, liabilities=3_500, eps=1.01)),
    "cinder-2023.txt": ("Cinder Ltd", 2023, figures(300, 10, cash=15_200, liabilities=250, eps=0.10),
                        figures(280, 12, cash=14_000, liabilities=240, eps=0.12)),
}


@pytest.fixture(scope="module")
async def filings(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    folder = tmp_path_factory.mktemp("filings")
    for name, (company, year, now, prior) in REPORTS.items():
        (folder / name).write_text(text_filing(company, year, now, prior))
    (folder / "memo.md").write_text("# Travel policy\n\nEmployees book economy class for flights under six hours.\n")
    async with runtime_over(pg_uri, "facts_query", folder, ok=5) as rt:
        yield rt



def _cited_lines(body: dict[str, Any]) -> set[tuple[str, str]]:
    """(document, cited line text) of every citation."""
    return {(c["doc_name"], c["text"].split("\n")[0]) for c in body["citations"]}


async def test_highest_among_named_companies_is_computed_and_cited(filings: Runtime) -> None:
    body = await ask_json(filings, "Companies: ACME HOLDINGS, INC., Bolt Corp and Cinder Ltd. "
                               "Which company has the highest 'Total Liabilities'?")
    answer = body["answer"]
    verdict = answer.strip().split("\n")[-1]
    assert verdict.startswith("Bolt Corp has the highest total liabilities: $4,000 thousand"), answer
    used = {(f["doc_name"], f["value"]) for f in body["facts"]}
    assert used == {("acme-2023.txt", 900_000), ("bolt-2023.txt", 4_000_000), ("cinder-2023.txt", 250_000)}
    for doc, line in _cited_lines(body):
        assert line.startswith("Total liabilities"), (doc, line)
    assert all(c["unit"] == "line" and c["pages"][0] > 0 for c in body["citations"])


async def test_groups_with_stated_bounds(filings: Runtime) -> None:
    body = await ask_json(filings, "Companies: Acme Holdings, Inc., Bolt Corp and Cinder Ltd. Please categorize the "
                               "companies by 'Cash and Cash Equivalents' into the following groups: high (over "
                               "$10,000 in thousands), medium (over $1,000 in thousands and below $10,000 in "
                               "thousands), and low (below $1,000 in thousands). Place companies into the same "
                               "collection for the same category.")
    tail = body["answer"].split("Grouped by")[1]
    assert "- high: Cinder Ltd" in tail and "- medium: Bolt Corp" in tail and "- low: Acme Holdings" in tail, tail


async def test_trend_over_two_annual_reports_states_the_change(filings: Runtime) -> None:
    body = await ask_json(filings, "How did Acme Holdings' revenue change from 2022 to 2023?")
    answer = body["answer"]
    assert "$1,200 thousand for the year ended December 31, 2022" in answer, answer
    assert "$1,500 thousand for the year ended December 31, 2023" in answer
    assert "increased by $300 thousand (+25.00%)" in answer
    assert {c["doc_name"] for c in body["citations"]} >= {"acme-2023.txt"}


async def test_lookup_of_one_company(filings: Runtime) -> None:
    body = await ask_json(filings, "What is the basic earnings per share of Bolt Corp?")
    assert body["answer"].startswith("Basic earnings per share of Bolt Corp: $1.25 per share"), body["answer"]
    assert [f["doc_name"] for f in body["facts"]] == ["bolt-2023.txt"]


async def test_question_outside_the_vocabulary_takes_the_text_path(filings: Runtime) -> None:
    body = await ask_json(filings, "Which class do employees book for short flights?")
    assert body["facts"] == [] and "economy" in body["answer"].lower()


async def test_document_facts_endpoint(filings: Runtime) -> None:
    async with app_client(create_app(runtime=filings, run_worker=False)) as client:
        docs = (await client.get("/kb/documents")).json()
        bolt = next(d["id"] for d in docs if d["name"] == "bolt-2023.txt")
        memo = next(d["id"] for d in docs if d["name"] == "memo.md")
        rows = (await client.get(f"/kb/documents/{bolt}/facts")).json()
        assert {r["statement"] for r in rows} == {"balance", "income", "cash_flow"}
        revenue = (await client.get(f"/kb/documents/{bolt}/facts", params={"concept": "revenue"})).json()
        assert {(r["period_end"], r["value"]) for r in revenue} == {("2023-12-31", 8_000_000),
                                                                      ("2022-12-31", 7_000_000)}
        assert all(r["line"] and r["printed"] in r["source"] for r in revenue)
        assert (await client.get(f"/kb/documents/{memo}/facts")).json() == []
        assert (await client.get("/kb/documents/999999/facts")).status_code == 404
        assert (await client.get(f"/kb/documents/{bolt}/facts", params={"concept": "x;drop"})).status_code == 400


async def test_fact_filters_and_screens(filings: Runtime) -> None:
    async with app_client(create_app(runtime=filings, run_worker=False)) as client:
        r = await client.post("/kb/query", json={
            "query": "What was the revenue?", "strategy": "metadata",
            "filters": {"fact": {"concept": "revenue", "period": "FY2023", "gte": 5e6}}})
        assert r.status_code == 200, r.text
        assert {d["name"] for d in r.json()["documents"]} == {"bolt-2023.txt"}
        for bad in ({"concept": "nonsense"}, {"concept": "revenue", "gte": "lots"},
                    {"concept": "revenue", "period": "last spring"}):
            r = await client.post("/kb/query", json={"query": "revenue?", "filters": {"fact": bad}})
            assert r.status_code == 400, (bad, r.text)
    body = await ask_json(filings, "Which companies had revenue above $1 million in 2023?")
    answer = body["answer"]
    assert answer.startswith("Companies past a bound on revenue, 2023, over 3 companies:\n2 of the 3 companies with a "
                             "revenue figure in 2023 have revenue above $1,000,000:"), \
        answer
    assert "Bolt Corp: $8,000 thousand" in answer and "Acme Holdings" in answer and "Cinder" not in answer


async def test_an_unknown_company_written_in_capitals_is_reported(filings: Runtime) -> None:
    body = await ask_json(filings, "Companies: ACME HOLDINGS, INC., ZORBLAX INDUSTRIES CORP and Bolt Corp. "
                               "Which company has the highest revenue?")
    assert "No document about ZORBLAX INDUSTRIES" in body["answer"], body["answer"]
    assert {f["doc_name"] for f in body["facts"]} == {"acme-2023.txt", "bolt-2023.txt"}
    assert body["answer"].strip().split("\n")[-1].startswith("Bolt Corp has the highest revenue")


async def test_weighted_average_shares_are_answered_from_their_printed_line(filings: Runtime) -> None:
    """A share count (a vocabulary measure since weighted average shares were added to it) is answered in
    shares, scaled, from its statement line."""
    body = await ask_json(filings, "What is the weighted average shares outstanding of Bolt Corp?")
    assert body["answer"].startswith("Weighted average basic shares outstanding of Bolt Corp: 5,000 thousand shares "
                                     "for the year ended December 31, 2023"), body["answer"]
    assert [f["line_item"] for f in body["facts"]] == ["Weighted average shares outstanding"]


async def test_streamed_answer_carries_the_facts_table(filings: Runtime) -> None:
    import json

    query = "Companies: Acme Holdings, Inc. and Bolt Corp. Which company has the highest 'Total Liabilities'?"
    async with app_client(create_app(runtime=filings, run_worker=False)) as client:
        r = await client.post("/kb/query", json={"query": query, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = {}
    for frame in r.text.replace("\r\n", "\n").split("\n\n"):
        lines = frame.split("\n")
        name = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("event:")), None)
        data = "\n".join(ln.split(":", 1)[1].lstrip() for ln in lines if ln.startswith("data:"))
        if name and data:
            events[name] = json.loads(data)
    facts = events["done"]["facts"]
    assert {(f["doc_name"], f["value"]) for f in facts} == {("acme-2023.txt", 900_000), ("bolt-2023.txt", 4_000_000)}
    assert {f["marker"] for f in facts} <= {c["marker"] for c in events["citations"]}



async def test_ratios_are_computed_from_both_lines(filings: Runtime) -> None:
    body = await ask_json(filings, "What is the current ratio of Bolt Corp?")
    assert body["answer"].startswith("Current ratio of Bolt Corp: 1.60 at December 31, 2023"), body["answer"]
    assert {f["line_item"] for f in body["facts"]} == {"Total current assets", "Total current liabilities"}
    body = await ask_json(filings, "What was the net margin of Bolt Corp in 2022?")
    assert body["answer"].startswith("Net profit margin of Bolt Corp: 10.00% for the year ended December 31, 2022"), \
        body["answer"]  # 700 / 7,000


async def test_average_over_stated_years(filings: Runtime) -> None:
    body = await ask_json(filings, "What is the average revenue of Bolt Corp over FY2022 and FY2023?")
    assert "Average over the 2 periods: $7,500 thousand." in body["answer"], body["answer"]


async def test_a_company_whose_statements_lack_the_measure_is_said_so_with_what_was_read(filings: Runtime) -> None:
    body = await ask_json(filings, "Companies: Acme Holdings, Inc., Bolt Corp and Cinder Ltd. "
                               "Which company has the highest inventories?")
    answer = body["answer"]
    assert "Bolt Corp: $610 thousand" in answer, answer
    assert "No inventories figure was found in the statements of: Acme Holdings, Inc., Cinder Ltd." in answer
    lines = [ln for ln in answer.split("\n") if "its statements do not state it" in ln]
    assert len(lines) == 2 and all(re.search(r"\[\d+\]$", ln) for ln in lines), answer
    assert {c["doc_name"] for c in body["citations"]} == {"acme-2023.txt", "bolt-2023.txt", "cinder-2023.txt"}


async def test_which_year_question_naming_no_company_reads_the_company_whose_reports_cover_the_years(
        filings: Runtime) -> None:
    """"Which year saw the largest increase … from 2022 to 2023" names no company: the one company whose reports
    reach both years (Acme, two annual reports) is read, every year's figure cited and the year named."""
    body = await ask_json(filings, "Considering the revenue from 2022 to 2023, which year saw the largest increase in "
                               "revenue compared to the previous year?")
    answer = body["answer"]
    assert "- The largest increase: 2023 vs 2022, increased by $300 thousand (+25.00%)" in answer, answer
    assert "$1,000 thousand for the year ended December 31, 2021" in answer
    assert {c["doc_name"] for c in body["citations"]} == {"acme-2022.txt", "acme-2023.txt"}, answer


async def test_a_computed_answer_the_reading_disagrees_with_states_no_verdict(filings: Runtime) -> None:
    """Right or silent: where the question as read (``router.question``) and the computed answer disagree, or the
    reading leaves something unplaced, the answer says what it could not determine and lists the figures it
    found, cited — no verdict; an answer both agree on leads with its verdict and the trace shows the reading."""
    body = await ask_json(filings, "Which of Acme Holdings, Bolt and Cinder posted the deepest net loss in 2023?")
    assert body["answer"].startswith("Lowest net income, 2023, over 3 companies:\n"), body["answer"]
    assert "Acme Holdings, Inc. has the lowest net income: −$250 thousand" in body["answer"]  # the loss, not a profit
    for question in ("Group Acme Holdings, Bolt and Cinder by 2023 revenue: under $5 billion and under $2 billion.",
                     "Group Acme Holdings, Bolt and Cinder by revenue and by net income: above $1 million, "
                     "below $1 million."):
        body = await ask_json(filings, question)
        answer = body["answer"]
        assert answer.startswith("I could not determine this from the statement figures: "), answer
        assert re.search(r"What the statements show: .*\[1\]", answer) and body["facts"], answer
        assert body["trace"]["question"]["unknown"] or body["trace"]["question"]["operation"] in ("min", "group")
    body = await ask_json(filings, "Which of Acme Holdings, Bolt and Cinder had the highest revenue in 2023?")
    assert "Bolt Corp has the highest revenue" in body["answer"] and "could not determine" not in body["answer"]
    reading = body["trace"]["question"]
    assert reading["operation"] == "max" and reading["measures"] == [{"name": "revenue", "kind": "concept"}]


async def test_companies_named_by_short_forms_are_all_read(filings: Runtime) -> None:
    """Who is asked about comes from the typed question: short names routing does not resolve ("Acme", "Cinder")
    still bring their reports into the computed answer (the stated year's report of a company with several)."""
    for question in ("Between Acme, Bolt and Cinder, whose 2023 cash pile is the largest?",
                     "Rank Cinder, Acme and Bolt on total liabilities for 2023, smallest first.",
                     "between acme, bolt and cinder, whose 2023 cash pile is the largest?"):
        body = await ask_json(filings, question)
        answer = body["answer"]
        assert answer.startswith(("Highest cash and cash equivalents, 2023, over 3 companies:",
                                  "Ranking by total liabilities, 2023, over 3 companies:")), answer  # nobody "missing"
        assert all(name in answer for name in ("Acme Holdings, Inc.", "Bolt Corp", "Cinder Ltd")), answer
        assert "acme-2022.txt" not in {f["doc_name"] for f in body["facts"]}, body["facts"]


async def test_one_definition_of_a_ratio_across_companies(filings: Runtime) -> None:
    """Return on assets is computed as the measure table defines it — net income over the mean of total assets at
    the year's start and end — for several companies as for one; each figure cites the three lines it uses."""
    body = await ask_json(filings, "Rank Acme Holdings, Bolt and Cinder by 2023 return on assets, best first.")
    answer = body["answer"]
    assert answer.startswith("Ranking by return on assets, 2023, over 3 companies:"), answer
    assert all(x in answer for x in ("Bolt Corp: 12.00%", "Cinder Ltd: 2.04%", "Acme Holdings, Inc.: -15.62%")), answer
    order = [answer.index(x) for x in ("Bolt Corp: 12.00%", "Cinder Ltd: 2.04%", "Acme Holdings, Inc.: -15.62%")]
    assert order == sorted(order), answer  # 900 / 7,500; 10 / 490; −250 / 1,600 (thousands)
    used = {(f["doc_name"], f["line_item"], str(f["period_end"])) for f in body["facts"]}
    assert ("bolt-2023.txt", "Total assets", "2022-12-31") in used and ("bolt-2023.txt", "Total assets",
                                                                          "2023-12-31") in used, used


async def test_every_metric_of_the_measure_table_is_computed_across_companies(filings: Runtime) -> None:
    """One calculator: a metric that is not one measure over another (free cash flow: operating cash flow less
    capital expenditure; working capital: a difference of two balances) is ranked across companies as it is
    computed for one, each figure cited to the lines it uses."""
    body = await ask_json(filings, "Which of Acme Holdings, Bolt and Cinder generated the most free cash flow in 2023?")
    answer = body["answer"]
    assert answer.startswith("Highest free cash flow, 2023, over 3 companies:"), answer
    assert "Bolt Corp has the highest free cash flow: $1,320 thousand" in answer, answer  # 1,350 − 30
    assert "Cinder Ltd: −$15 thousand" in answer and "Acme Holdings, Inc.: −$405 thousand" in answer, answer
    used = {(f["doc_name"], f["line_item"]) for f in body["facts"]}
    assert ("bolt-2023.txt", "Purchases of property and equipment") in used, used
    body = await ask_json(filings, "Rank Acme Holdings, Bolt and Cinder by working capital at the end of 2023.")
    answer = body["answer"]
    assert answer.startswith("Ranking by working capital, 2023, over 3 companies:"), answer
    order = [answer.index(x) for x in ("Bolt Corp: $1,200 thousand", "Acme Holdings, Inc.: $270 thousand",
                                       "Cinder Ltd: $75 thousand")]
    assert order == sorted(order), answer  # 3,200 − 2,000; 720 − 450; 200 − 125


async def test_a_year_over_year_change_of_one_period_is_against_the_same_period_a_year_before(
        filings: Runtime) -> None:
    """"YoY growth in 2023" is the stated period against the same period a year before (the prior-year column),
    not a series of every period of the year."""
    for question, expected in (
            ("How much did Acme Holdings' revenue grow year over year in 2023?",
             "increased by $300 thousand (+25.00%) from $1,200 thousand to $1,500 thousand"),
            ("Bolt Corp's YoY change in net income for 2023?",
             "increased by $200 thousand (+28.57%) from $700 thousand to $900 thousand")):
        answer = (await ask_json(filings, question))["answer"]
        assert answer.startswith("Year-over-year change in"), answer
        assert expected in answer.split("\n")[1], answer


def _llm_pipeline(rt: Runtime, fake: Any) -> Any:
    import dataclasses

    from kb.core.providers.chat import OpenAIChatModel
    from kb.core.settings import LLMSettings
    from router.pipeline import QueryPipeline

    chat = OpenAIChatModel(LLMSettings(base_url=fake.base_url, model="fake-model", api_key="k", timeout_s=5,
                                       max_retries=0, concurrency=4, cache=False))
    return QueryPipeline(rt.pool, rt.embedder, chat, dataclasses.replace(rt.settings.retrieval, max_iterations=1))


async def _ask_llm(rt: Runtime, fake: Any, question: str, typed: Any) -> Any:
    from router.prompts import METADATA
    from router.types import QueryRequest
    from tests.fake_openai import FakeReply

    fake.route({METADATA: FakeReply.json({"conditions": [], "question": typed})}, text="See the figures [1].")
    result = await _llm_pipeline(rt, fake).run(QueryRequest(query=question, strategy="auto", include_trace=True))
    return result, wire(result.trace)


async def test_with_an_llm_the_metadata_step_also_reads_the_typed_question(filings: Runtime, fake_openai: Any) -> None:
    """The metadata call returns the typed question too; validated, it is what is computed, and the trace shows it
    beside the rules' reading. An invalid one (unknown measure or company, a year out of range, bounds that are no
    numbers, not an object) is dropped or corrected as filters are, and the rules answer."""
    question = "Among Acme Holdings, Bolt and Cinder, who sat lowest on 2023 revenue?"
    typed = {"operation": "rank", "order": "asc", "limit": 2, "measures": [{"name": "revenue", "kind": "concept"}],
             "companies": ["Acme Holdings", "Bolt Corp", "Cinder Ltd"], "periods": [{"year": 2023}]}
    result, trace = await _ask_llm(filings, fake_openai, question, typed)
    read = trace["question"]
    assert (read["source"], read["operation"], read["order"], read["limit"]) == ("llm", "rank", "asc", 2), read
    assert read["rules"]["source"] == "rules" and read["rules"]["operation"] == "min"  # both shown
    assert sorted(read["entities"]["names"]) == ["Acme Holdings, Inc.", "Bolt Corp", "Cinder Ltd"]
    assert [f["entity"] for f in wire(result.facts)] == ["Cinder Ltd", "Acme Holdings, Inc."]  # the two lowest

    for bad in ({"operation": "max", "measures": [{"name": "happiness", "kind": "concept"}], "companies": ["Zeta"]},
                "the lowest revenue please", {"operation": "explode", "measures": [{"name": "revenue"}]}):
        result, trace = await _ask_llm(filings, fake_openai, question, bad)
        assert trace["question"]["source"] == "rules" and trace["question"]["operation"] == "min", bad
        assert "Cinder Ltd" in {f["entity"] for f in wire(result.facts)}

    odd = {"operation": "max", "measures": [{"name": "revenue", "kind": "concept"}, {"name": "vibes"}],
           "companies": ["Bolt", "Zeta Holdings"], "periods": [{"year": 3023}, {"year": 2023, "months": 12}],
           "bounds": {"gt": "lots"}, "limit": -4, "unit": "gazillion"}
    _, trace = await _ask_llm(filings, fake_openai, question, odd)
    read = trace["question"]
    assert read["source"] == "llm" and read["measures"] == [{"name": "revenue", "kind": "concept"}]
    assert read["entities"]["names"] == ["Bolt Corp"] and [p["year"] for p in read["periods"]] == [2023]
    assert (read["bounds"], read["limit"], read["unit"]) == ({}, None, "")
