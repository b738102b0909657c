"""Which report answers: a look-up of a stated year that routing sends to the company's filing of that year
without statements (an 8-K) is answered from the company's report that prints the year — the balance at a past
year-end stands in the next annual report's comparative column — cited to it."""

from __future__ import annotations

import json
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
    meta = folder.parent / f"{folder.name}-meta.jsonl"
    meta.write_text("\n".join(json.dumps(m) for m in (
        {"name": "dunmore-2023-10k", "company": "Dunmore Tools Inc.", "doc_type": "10k", "fiscal_year": 2023},
        {"name": "dunmore-2022-8k", "company": "Dunmore Tools Inc.", "doc_type": "8k", "fiscal_year": 2022})))
    async with runtime_over(pg_uri, "facts_reports", folder, ok=2, metadata_path=meta) as rt:
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
