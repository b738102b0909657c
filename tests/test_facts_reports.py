"""Which report answers: a look-up of a stated year that routing sends to the company's filing of that year
without statements (an 8-K) is answered from the company's report that prints the year — the balance at a past
year-end stands in the next annual report's comparative column — cited to it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import pytest

from kb.runtime import Runtime
from tests.conftest import runtime_over
from tests.factgen import figures, text_filing
from tests.http import ask_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def reports(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    folder = tmp_path_factory.mktemp("reports")
    (folder / "dunmore-2023-10k.txt").write_text(text_filing(
        "Dunmore Tools Inc.", 2023, figures(5_000, 400, cash=900, liabilities=2_000),
        figures(4_600, 350, cash=700, liabilities=1_800)))
    (folder / "dunmore-2022-8k.txt").write_text(
        "FORM 8-K\nCURRENT REPORT\nDunmore Tools Inc.\nDate of report: July 1, 2022\n\nItem 5.02 Departure of "
        "Directors or Certain Officers.\nOn July 1, 2022 the board of Dunmore Tools appointed Ana Ruiz chief "
        "financial officer. Her total equity award vests over four years.\n")
    (folder / "eldon-2023-annual.txt").write_text(
        "Eldon Mills Annual Report 2023\n\nLetter to shareholders\nEldon Mills had a year of steady progress. We "
        "opened two flour mills in Ohio and hired 120 people. Our statements are published separately.\n")
    meta = folder.parent / f"{folder.name}-meta.jsonl"
    meta.write_text("\n".join(json.dumps(m) for m in (
        {"name": "dunmore-2023-10k", "company": "Dunmore Tools Inc.", "doc_type": "10k", "fiscal_year": 2023},
        {"name": "dunmore-2022-8k", "company": "Dunmore Tools Inc.", "doc_type": "8k", "fiscal_year": 2022},
        {"name": "eldon-2023-annual", "company": "Eldon Mills", "doc_type": "annual_report", "fiscal_year": 2023})))
    async with runtime_over(pg_uri, "facts_reports", folder, ok=3, metadata_path=meta) as rt:
        yield rt


@pytest.mark.parametrize("question", [
    "Dunmore Tools' total liabilities at December 31, 2022?",
    "What was Dunmore Tools' revenue in 2022?",
])
async def test_a_year_is_answered_from_the_report_that_prints_it(reports: Runtime, question: str) -> None:
    body = await ask_json(reports, question)
    answer = body["answer"]
    expected = "$1,800 thousand at December 31, 2022" if "liabilities" in question else \
        "$4,600 thousand for the year ended December 31, 2022"
    assert expected in answer.split("\n")[0], answer
    assert {f["doc_name"] for f in body["facts"]} == {"dunmore-2023-10k.txt"}, body["facts"]


@pytest.mark.parametrize("question", [
    "Which company had the highest revenue in 2023?",
    "Who posted the biggest net income last year across all the companies?",
])
async def test_a_company_without_the_figure_is_named_and_the_verdict_says_whom_it_covers(
        reports: Runtime, question: str) -> None:
    """A collection-wide ranking names every company whose statements state no such figure, and its verdict says
    it covers only the companies found."""
    body = await ask_json(reports, question)
    answer = body["answer"]
    assert "Dunmore Tools Inc. has the highest" in answer and "— among the 1 of 2 whose figure was found." in answer, \
        answer
    assert re.search(r"No (?:revenue|net income) figure was found in the statements of: Eldon Mills", answer), answer
