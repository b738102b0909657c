"""Financial statement pages: recognised at ingest (title line + figures; not a contents entry, an MD&A table
or the auditor's letter), marked on chunks and nodes, and used by the router when a question names one."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from ingest.pdf_read import read_pdf
from ingest.statements import page_statement, statement_pages
from kb.app import create_app
from kb.core.vocab import question_statements, statement_title
from kb.runtime import Runtime, build_pipeline
from router.types import QueryRequest
from tests.conftest import ingest
from tests.http import app_client, wire

PROSE = ("Management believes that the company's liquidity remains strong and that capital expenditure on new "
         "plants, equipment and warehouses will continue to support growth in every segment of the business.")


def _rows(prefix: str, n: int, base: int) -> list[str]:
    return [f"{prefix} line {i} {base + 37 * i:,} {base + 29 * i:,}" for i in range(n)]


PAGES: list[list[str]] = [
    ["FORM 10-K", "ACME WIDGETS INC", "For the fiscal year ended December 31, 2023"],
    ["Table of Contents", "Item 7. Management's Discussion and Analysis 3", "Item 8. Financial Statements 5",
     "Consolidated Statements of Income 5", "Consolidated Balance Sheets 6", "Consolidated Statements of Cash Flows 8",
     "Notes to Consolidated Financial Statements 9"],
    ["Item 7. Management's Discussion and Analysis", PROSE, "Cash Flows from Investing Activities:",
     "(Millions) 2023 2022", "Purchases of property and equipment $ (1,204) $ (1,377)",
     "Capital expenditure on plants and equipment rose in 2023 as we built two warehouses.",
     "Proceeds from sale of equipment 62 49", "Acquisitions, net of cash acquired (13) (2,023)",
     "Net cash used in investing activities $ (1,155) $ (3,351)", PROSE, PROSE],
    ["Report of Independent Registered Public Accounting Firm",
     "We have audited the accompanying consolidated balance sheets of Acme Widgets as of December 31, 2023,",
     "and the related consolidated statements of income and cash flows for each of the years then ended.",
     PROSE, PROSE, PROSE, PROSE, PROSE, PROSE],
    ["Item 8. Financial Statements and Supplementary Data", "ACME WIDGETS INC", "CONSOLIDATED STATEMENTS OF INCOME",
     "(In millions) 2023 2022", "Net sales $ 11,303 $ 11,503", "Cost of sales 7,772 7,468",
     *_rows("Operating expense", 8, 1_100), "Net income $ 1,906 $ 1,602"],
    ["ACME WIDGETS INC", "Consolidated Balance Sheets (Unaudited)", "(In millions) 2023 2022",
     *_rows("Current asset", 10, 2_000), "Total assets $ 30,775 $ 28,527"],
    ["(In millions) 2023 2022", *_rows("Liability", 10, 3_000), "Total liabilities and equity $ 30,775 $ 28,527"],
    ["Acme Widgets Inc and Subsidiaries", "Consolidated Statement of Cash Flow s", "Years ended December 31",
     "(Millions) 2023 2022", "Net income $ 1,906 $ 1,602", "Depreciation and amortization 1,488 1,544",
     *_rows("Working capital", 5, 300), "Purchases of property, plant and equipment (PP&E) (1,577) (1,373)",
     "Net cash used in investing activities (1,222) (3,086)", *_rows("Financing", 3, 400)],
    ["Notes to Consolidated Financial Statements", "Note 1. Debt", "(In millions) 2023 2022",
     *_rows("Term loan", 10, 500)],
]
EXPECTED = {5: "income", 6: "balance", 7: "balance", 8: "cash_flow"}


def write_10k(path: Path) -> Path:
    doc = pymupdf.open()
    for lines in PAGES:
        page = doc.new_page(width=612, height=792)
        y = 72.0
        for line in lines:
            page.insert_text((72, y), line, fontsize=9)
            y += 14
    doc.save(path)
    doc.close()
    return path


@pytest.mark.parametrize(("line", "kind"), [
    ("CONSOLIDATED STATEMENTS OF CASH FLOWS", "cash_flow"), ("Consolidated Statement of Cash Flow s", "cash_flow"),
    ("NIKE, Inc. Consolidated Statements of Income", "income"), ("INCOME STATEMENTS", "income"),
    ("Consolidated Statements of Operations (Unaudited)", "income"), ("Consolidated Statements of Earnings", "income"),
    ("Consolidated Statements of Income Corning Incorporated and Subsidiary Companies", "income"),
    ("Consolidated Statements of Financial Position", "balance"), ("BALANCE SHEETS", "balance"),
    ("Consolidated Statements of Comprehensive Income", "comprehensive_income"),
    ("COMPREHENSIVE INCOME STATEMENTS", "comprehensive_income"),
    ("Consolidated Statements of Changes in Shareholders' Equity", "equity"),
    ("Consolidated Statements of Cash Flows 8", ""),  # a contents entry
    ("Cash Flows from Investing Activities:", ""), ("Notes to Consolidated Financial Statements", ""),
    ("Results of Operations", ""),
])
def test_statement_titles(line: str, kind: str) -> None:
    assert statement_title(line) == kind


@pytest.mark.parametrize(("question", "kinds"), [
    ("What is the FY2018 capital expenditure? Rely on the details shown in the cash flow statement.", {"cash_flow"}),
    ("Using the income statement and the statement of financial position, compute ROA.", {"income", "balance"}),
    ("From the P&L and the statement of cash flows, what is the ratio?", {"income", "cash_flow"}),
    ("What does the statement of comprehensive income show?", {"comprehensive_income"}),
    ("What was the total revenue in 2022?", set()),
    ("Has the quick ratio improved between FY2022 and FY2023?", {"balance"}),  # measures point at statements
    ("Does Boeing have an improving gross margin profile?", {"income"}),
    ("Is 3M a capital-intensive business based on FY2022 data?", {"cash_flow"}),
    ("Using the balance sheet, what is the gross margin?", {"balance"}),  # a named statement wins
])
def test_questions_name_statements(question: str, kinds: set[str]) -> None:
    assert question_statements(question) == kinds


def test_statement_pages_of_a_report(tmp_path: Path) -> None:
    parsed = read_pdf(write_10k(tmp_path / "acme.pdf"))
    assert statement_pages(parsed.pages) == EXPECTED
    assert page_statement("Consolidated Balance Sheets\nassets 1,000\n") == ""  # too short to be a statement table


async def test_named_statement_reaches_the_evidence(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    write_10k(folder / "acme-2023-10k.pdf")
    job = await ingest(runtime, folder)
    assert job.counts == {"ok": 1}, [(i.name, i.error) for i in job.items]
    marks = {r["page"]: r["statement"] for r in await runtime.pool.fetch(
        "SELECT DISTINCT page, statement FROM chunks WHERE statement <> ''")}
    assert marks == EXPECTED
    async with app_client(create_app(runtime=runtime, run_worker=False)) as client:
        nodes = (await client.get("/kb/documents/1")).json()["tree"]
    assert {k for n in nodes for k in n["statements"]} == set(EXPECTED.values())

    question = "What was Acme's capital expenditure in 2023? Use the cash flow statement."
    result = await build_pipeline(runtime).run(QueryRequest(query=question, top_k=3, include_trace=True))
    assert result.citations[0].pages[0] <= 8 <= result.citations[0].pages[1], result.citations
    assert "1,577" in result.citations[0].text
    trace = wire(result.trace)
    assert trace is not None
    assert any("cash flow statement" in n["reason"] for n in trace["nodes"]), trace["nodes"]
    top = trace["chunks"][0]
    assert top["page"] == 8 and top["statement"] == "cash_flow", trace["chunks"]


def test_hostile_tables_chunk_within_bounds(tmp_path: Path) -> None:
    """Rotated pages, empty columns, merged-looking cells and hundreds of rows: statement detection and chunking
    finish, and no page yields more chunks than its text can fill."""
    from ingest import pipeline
    from kb.core.settings import IngestSettings
    from kb.core.text import count_tokens

    doc = pymupdf.open()
    for p in range(12):
        page = doc.new_page(width=612, height=792)
        if p % 4 == 3:
            page.set_rotation(90)
        title = "CONSOLIDATED BALANCE SHEETS" if p == 0 else f"Schedule {p}"
        page.insert_text((40, 30), title, fontsize=7)
        for r in range(110):  # rows packed at 7 pt: the most a page holds
            cells = ["", f"{r * 1000 + p:,}", "", "—", f"({r + 1})"] if r % 3 else [f"Merged cell spanning {r}"]
            page.insert_text((40, 40 + 6.8 * r), f"Row {r} " + "   ".join(cells), fontsize=6)
    path = tmp_path / "tables.pdf"
    doc.save(path)
    settings = IngestSettings()
    parsed = pipeline.parse_file(str(path), "pdf")
    pages = {p.number: p.text for p in parsed.pdf.pages}
    tree = pipeline._offline_tree(parsed, settings, "tables", pages)
    chunks = pipeline.chunk_tree(tree, settings, pages)
    marked_tree, marked = mark_statements_of(tree, chunks, parsed)
    per_page: dict[int, int] = {}
    for c in marked:
        per_page[c.page or 0] = per_page.get(c.page or 0, 0) + 1
    step = settings.chunk_tokens - settings.chunk_overlap_tokens
    for number, text in pages.items():
        assert per_page.get(number, 0) <= count_tokens(text) // step + 3, (number, per_page.get(number))
    assert {c.statement for c in marked if c.page == 1} <= {"balance"}
    assert len(marked_tree.nodes) == len(tree.nodes)


def mark_statements_of(tree, chunks, parsed):  # type: ignore[no-untyped-def]
    from ingest.statements import mark_statements

    return mark_statements(tree, chunks, statement_pages(parsed.pdf.pages))
