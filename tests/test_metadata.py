"""Metadata: automatic extraction from SEC-style cover pages, front matter, folder files, sidecars,
precedence, and document descriptions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pymupdf
import pytest

from ingest.describe import describe_document, offline_description
from ingest.front_matter import parse_front_matter
from ingest.markdown_tree import build_markdown_tree
from ingest.metadata import (
    extract_metadata,
    load_folder_metadata,
    merge_metadata,
    merge_with_sources,
    read_sidecar,
)
from ingest.prompts import DOC_DESCRIPTION
from kb.core.errors import IngestError, LLMError
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from tests.fakes import Malformed, ScriptedChat


def cover_10q(company: str = "ORCHARD DEVICES, INC.", period: str = "July 1, 2023", ytd: str = "Nine") -> str:
    return f"""UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
Washington, D.C. 20549
FORM 10-Q
(Mark One)
☒ QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
For the quarterly period ended
{period}
or
☐ TRANSITION REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
Commission File Number: 001-12345
{company}
(Exact name of Registrant as
specified in its charter)
Delaware
12-3456789
Securities registered pursuant to Section 12(b) of the Act:
Title of each class
Trading symbol(s)
Name of each exchange on which registered
Common Stock, $0.001 par value per share
ORCH
The Nasdaq Stock Market LLC
Indicate by check mark whether the Registrant (1) has filed all reports required to be filed.
Yes ☒ No ☐
PART I — FINANCIAL INFORMATION
CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)
Three Months Ended
{ytd} Months Ended
Net sales
$ 81,797
"""


def test_10q_cover_page_with_fiscal_calendar_from_ytd_columns() -> None:
    meta = extract_metadata(cover_10q(), file_name="whatever.pdf")
    assert meta["company"] == "Orchard Devices, Inc."
    assert meta["ticker"] == "ORCH"
    assert meta["doc_type"] == "10q" and meta["form"] == "10-Q"
    assert meta["period_end_date"] == "2023-07-01"
    # "Nine Months Ended" → fiscal Q3; a 52/53-week quarter ending July 1 belongs to June → FY ends September
    assert (meta["fiscal_year"], meta["fiscal_quarter"], meta["doc_period"]) == (2023, 3, 2023)
    assert meta["title"] == "Orchard Devices, Inc. Form 10-Q for the quarterly period ended July 1, 2023"


def test_ticker_from_merged_table_rows_and_forms_named_in_prose() -> None:
    merged = cover_10q().replace(
        "Title of each class\nTrading symbol(s)\nName of each exchange on which registered\n"
        "Common Stock, $0.001 par value per share\nORCH\nThe Nasdaq Stock Market LLC\n",
        "Title of each class Trading symbol(s) Name of each exchange on which registered\n"
        "Class A Common Stock ORCH NEW YORK STOCK EXCHANGE\n",
    )
    assert "ORCH\n" not in merged
    assert extract_metadata(merged, file_name="x.pdf")["ticker"] == "ORCH"
    prose = "Sustainability Report 2022\n\nAs described in our FORM 10-K filed in March, revenue grew.\n"
    meta = extract_metadata(prose, file_name="x.pdf")
    assert "doc_type" not in meta and "form" not in meta


def test_10q_fiscal_year_differs_from_calendar_year() -> None:
    # quarter ended October 29, 2023 with nine-month columns: fiscal year ends in January 2024
    meta = extract_metadata(cover_10q(period="October 29, 2023"), file_name="x.pdf")
    assert (meta["fiscal_year"], meta["fiscal_quarter"]) == (2024, 3)
    # September 30 with only three-month columns: the first quarter of a year ending in June
    meta = extract_metadata(cover_10q(period="September 30, 2022", ytd="Three"), file_name="x.pdf")
    assert (meta["fiscal_year"], meta["fiscal_quarter"]) == (2023, 1)


def test_10q_cover_only_falls_back_to_calendar_quarter() -> None:
    cover = cover_10q(period="April 1, 2023").split("PART I")[0]
    meta = extract_metadata(cover, file_name="x.pdf")
    assert (meta["fiscal_year"], meta["fiscal_quarter"]) == (2023, 1)  # April 1 closes the March quarter
    meta = extract_metadata(cover + "\nresults for the second quarter of fiscal 2024 were", file_name="x.pdf")
    assert (meta["fiscal_year"], meta["fiscal_quarter"]) == (2024, 2)


def test_10k_and_8k_and_earnings_release() -> None:
    k = """FORM 10-K
ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d)
For the fiscal year ended January 28, 2023
Commission file number 1-9595
BIGBOX RETAIL CO., INC.
(Exact name of registrant as specified in its charter)
"""
    meta = extract_metadata(k, file_name="2022.pdf")
    assert meta["company"] == "Bigbox Retail Co., Inc."
    assert (meta["doc_type"], meta["fiscal_year"], meta["doc_period"]) == ("10k", 2023, 2023)
    assert "ticker" not in meta
    # a 52/53-week year ending in the first days of January belongs to the previous year
    meta = extract_metadata(k.replace("January 28, 2023", "January 2, 2021"), file_name="x.pdf")
    assert meta["fiscal_year"] == 2020
    # no "(Exact name …)" caption: the line after the commission file number
    meta = extract_metadata(k.replace("(Exact name of registrant as specified in its charter)\n", ""),
                            file_name="x.pdf")
    assert meta["company"] == "Bigbox Retail Co., Inc."

    eight = """FORM 8-K
CURRENT REPORT
Date of Report (Date of earliest event
reported): July 1, 2022 (June 30, 2022)
PACKCO
PLC
(Exact
name of registrant as specified in its charter)
"""
    meta = extract_metadata(eight, file_name="x.pdf")
    assert meta["company"] == "Packco PLC" and meta["doc_type"] == "8k"
    assert meta["report_date"] == "2022-07-01" and meta["doc_period"] == 2022

    release = "Packco reports fiscal 2023 results and provides outlook for fiscal 2024\nJune 2023 quarter:\n"
    meta = extract_metadata(release, file_name="x.pdf")
    assert (meta["company"], meta["doc_type"], meta["fiscal_year"]) == ("Packco", "earnings", 2023)
    assert meta["title"].startswith("Packco reports fiscal 2023 results")


def test_extract_metadata_from_a_generated_pdf_cover_and_not_from_the_file_name() -> None:
    doc = pymupdf.open()
    y = 60
    page = doc.new_page()
    for line in cover_10q(company="GLOBEX CORPORATION", period="March 31, 2023", ytd="Nine").split("\n"):
        page.insert_text((40, y), line, fontsize=8)
        y += 11
    text = doc[0].get_text()
    doc.close()
    meta = extract_metadata(text, file_name="2021 Q1 WRONG.pdf")
    assert meta["company"] == "Globex Corporation"
    assert (meta["fiscal_year"], meta["fiscal_quarter"]) == (2023, 3)
    plain = extract_metadata("Meeting notes\n\nWe discussed the roadmap.", file_name="2021 Q1 WRONG.pdf",
                             title_hint="Roadmap Meeting Notes")
    assert plain == {"title": "Roadmap Meeting Notes"}


def test_front_matter_yaml_and_fallback_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    text = '---\ntitle: "Q3 Review"\nyear: 2023\nratio: 0.5\ndraft: false\ntags: [finance, "q3"]\nauthors:\n  - Ann\n  - Bo\ndate: 2023-09-30\n---\n# Body\n'
    meta, body = parse_front_matter(text)
    expected = {"title": "Q3 Review", "year": 2023, "ratio": 0.5, "draft": False, "tags": ["finance", "q3"],
                "authors": ["Ann", "Bo"], "date": "2023-09-30"}
    assert meta == expected and body == "# Body\n"
    monkeypatch.setitem(sys.modules, "yaml", None)  # PyYAML unavailable → built-in parser
    assert parse_front_matter(text) == (expected, "# Body\n")
    assert parse_front_matter("# No front matter\n---\n") == ({}, "# No front matter\n---\n")
    assert parse_front_matter("---\nunterminated: 1\n") == ({}, "---\nunterminated: 1\n")


def test_folder_metadata_jsonl_csv_and_explicit_financebench(tmp_path: Path) -> None:
    (tmp_path / "metadata.csv").write_text("file,company,year\nreport.pdf,CsvCo,2020\nother.md,OtherCo,\n")
    (tmp_path / "metadata.jsonl").write_text(
        json.dumps({"file": "docs/report.pdf", "company": "JsonCo"}) + "\n\n"
        + json.dumps({"name": "notes", "topic": "ops"}) + "\n"
    )
    meta = load_folder_metadata(tmp_path)
    assert meta["report"] == {"company": "JsonCo", "year": 2020}  # jsonl wins per key, csv fills the rest
    assert meta["other"] == {"company": "OtherCo"} and meta["notes"] == {"name": "notes", "topic": "ops"}

    fb = tmp_path / "documents.jsonl"
    fb.write_text(json.dumps({"doc_name": "3M_2018_10K", "company": "3M", "doc_type": "10k", "doc_period": 2018,
                              "gics_sector": "Industrials"}) + "\n")
    rows = load_folder_metadata(tmp_path, explicit=fb)
    assert rows == {"3M_2018_10K": {"doc_name": "3M_2018_10K", "company": "3M", "doc_type": "10k",
                                    "doc_period": 2018, "gics_sector": "Industrials"}}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "a"}\n{oops\n')
    with pytest.raises(IngestError, match="line 2"):
        load_folder_metadata(tmp_path, explicit=bad)


def test_sidecar_and_precedence(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    assert read_sidecar(pdf) == {}
    (tmp_path / "report.meta.json").write_text(json.dumps({"company": "Stem", "region": "EU"}))
    assert read_sidecar(pdf) == {"company": "Stem", "region": "EU"}
    (tmp_path / "report.pdf.meta.json").write_text(json.dumps({"company": "Full", "doc_type": "10k"}))
    sidecar = read_sidecar(pdf)
    assert sidecar == {"company": "Full", "doc_type": "10k"}
    (tmp_path / "report.pdf.meta.json").write_text("[1, 2]")
    with pytest.raises(IngestError, match="JSON object"):
        read_sidecar(pdf)

    folder = {"company": "Folder Inc", "year": None}
    front = {"company": "Front", "year": 2021, "team": "ops"}
    auto = {"company": "Auto", "year": 2020, "doc_type": "10q", "team": ""}
    assert merge_metadata(folder, sidecar, front, auto) == {
        "company": "Folder Inc", "doc_type": "10k", "year": 2021, "team": "ops"}
    merged = merge_with_sources([("folder", folder), ("sidecar", sidecar), ("front_matter", front), ("auto", auto)])
    assert merged.sources == {"company": "folder", "doc_type": "sidecar", "year": "front_matter", "team": "front_matter"}


# --------------------------------------------------------------------------- descriptions


MD = """# PART I — FINANCIAL INFORMATION
## Item 1. Financial Statements
text
## Item 2. Management's Discussion and Analysis of Financial Condition and Results of Operations
text
## Item 3. Quantitative and Qualitative Disclosures About Market Risk
text
# PART II — OTHER INFORMATION
## Item 1. Legal Proceedings
text
## Item 6. Exhibits
text
"""


async def test_describe_document_offline_and_with_llm() -> None:
    tree = build_markdown_tree(MD, IngestSettings(min_node_token=0), title="q")
    meta = extract_metadata(cover_10q(), file_name="x.pdf")
    text = await describe_document(tree, meta, "x.pdf", OfflineChatModel())
    assert text == (
        "Orchard Devices, Inc. Form 10-Q quarterly report for the fiscal quarter ended July 1, 2023 (fiscal 2023 Q3), "
        "covering Financial Statements, Management's Discussion and Analysis of Financial Condition and Results "
        "of Operations, Quantitative and Qualitative Disclosures About Market Risk and Legal Proceedings."
    )
    assert offline_description(tree, {}, "notes.md").startswith("notes, covering Financial Statements, ")
    said = "Orchard's fiscal Q3 2023 quarterly report with statements and risks."
    chat = ScriptedChat({DOC_DESCRIPTION: {"description": said}})
    assert await describe_document(tree, meta, "x.pdf", chat) == said
    assert "Item 2. Management's Discussion" in chat.prompts[0] and "Orchard Devices" in chat.prompts[0]
    for reply in (Malformed({"wrong": 1}), {"description": ""}, LLMError("down")):
        assert await describe_document(tree, meta, "x.pdf", ScriptedChat({DOC_DESCRIPTION: reply})) == text


# --------------------------------------------------------------------------- calendar-named quarters

NVDA_Q3_FY24 = {"fiscal_year": 2024, "fiscal_quarter": 3, "period_end_date": "2023-10-29", "doc_type": "10q"}
NVDA_Q3_FY23 = {"fiscal_year": 2023, "fiscal_quarter": 3, "period_end_date": "2022-10-30", "doc_type": "10q"}
AAPL_Q1_FY23 = {"fiscal_year": 2023, "fiscal_quarter": 1, "period_end_date": "2022-12-31", "doc_type": "10q"}


def test_calendar_named_year_of_a_fiscal_year() -> None:
    from router.metadata import calendar_named_year

    assert calendar_named_year(NVDA_Q3_FY24) == 2023  # fiscal 2024 ends January 2024
    assert calendar_named_year(NVDA_Q3_FY23) == 2022
    assert calendar_named_year(AAPL_Q1_FY23) == 2023  # fiscal 2023 ends September 2023
    assert calendar_named_year({"fiscal_year": 2023, "fiscal_quarter": 1, "period_end_date": "2022-09-30"}) == 2023
    assert calendar_named_year({"fiscal_year": 2023}) is None
    intel_q1 = {"fiscal_year": 2023, "fiscal_quarter": 1, "period_end_date": "2023-04-01"}  # 52/53-week quarters
    assert calendar_named_year(intel_q1) == 2023
    assert calendar_named_year({"fiscal_year": 2022, "fiscal_quarter": 3, "period_end_date": "2022-10-01"}) == 2022


@pytest.mark.parametrize(("question", "winner"), [
    ("What was NVIDIA's data center revenue in Q3 2023?", "fy24"),  # bare: the calendar-named year
    ("What was NVIDIA's data center revenue in Q3 FY2023?", "fy23"),  # the company's fiscal label
    ("What was NVIDIA's revenue in the third quarter of fiscal 2023?", "fy23"),
])
def test_a_bare_quarter_names_the_calendar_year(question: str, winner: str) -> None:
    from router.metadata import doc_year, period_prior, question_period

    period = question_period(question)
    metas = {"fy24": NVDA_Q3_FY24, "fy23": NVDA_Q3_FY23}
    years = sorted({y for m in metas.values() if (y := doc_year(period, m)) is not None})
    scores = {k: period_prior(period, m, years)[0] for k, m in metas.items()}
    assert max(scores, key=scores.get) == winner and scores["fy24"] != scores["fy23"], scores


_K16 = {"fiscal_year": 2016, "doc_type": "10k", "period_end_date": "2016-06-30"}
_K23 = {"fiscal_year": 2023, "doc_type": "10k", "period_end_date": "2023-06-30"}
_K20 = {"fiscal_year": 2020, "doc_type": "10k", "period_end_date": "2020-12-31"}


@pytest.mark.parametrize(("question", "metas", "winner"), [
    # a year no report is of: the later report restates it as a comparative …
    ("What were Contoso's basic earnings per share for fiscal 2022?", {"k16": _K16, "k23": _K23}, "k23"),
    ("How much did Contoso spend on research in FY2021?", {"k16": _K16, "k23": _K23}, "k23"),
    # … a plan or forecast for it is stated in an earlier one
    ("What revenue growth did Contoso expect for fiscal 2022?", {"k20": _K20, "k23": _K23}, "k20"),
    ("Contoso's capital expenditure guidance for 2021?", {"k20": _K20, "k23": _K23}, "k20"),
    # too far from any later report: the closest earlier one
    ("What was Contoso's revenue in 2019?", {"k16": _K16, "k23": _K23}, "k16"),
])
def test_a_year_no_report_is_of_is_read_in_the_report_that_states_it(question: str, metas: dict, winner: str) -> None:
    from router.metadata import doc_year, period_prior, question_period

    period = question_period(question)
    years = sorted({y for m in metas.values() if (y := doc_year(period, m)) is not None})
    scores = {k: period_prior(period, m, years)[0] for k, m in metas.items()}
    assert max(scores, key=scores.get) == winner and len(set(scores.values())) > 1, scores


@pytest.mark.parametrize(("question", "winner"), [
    ("How much stock did Contoso buy back in the nine months through July 1, 2023?", "q3"),
    ("Contoso's cash and equivalents as of April 1, 2023?", "q2"),
])
def test_a_report_ending_on_a_date_the_question_writes_answers_it(question: str, winner: str) -> None:
    from router.metadata import doc_year, period_prior, question_period

    metas = {"q2": {"fiscal_year": 2023, "fiscal_quarter": 2, "doc_type": "10q", "period_end_date": "2023-04-01"},
             "q3": {"fiscal_year": 2023, "fiscal_quarter": 3, "doc_type": "10q", "period_end_date": "2023-07-01"}}
    period = question_period(question)
    years = sorted({y for m in metas.values() if (y := doc_year(period, m)) is not None})
    scores = {k: period_prior(period, m, years)[0] for k, m in metas.items()}
    assert max(scores, key=scores.get) == winner and len(set(scores.values())) > 1, scores


def test_a_company_named_by_its_web_address_is_found_by_its_name() -> None:
    from router.metadata import KnownValues, match_offline

    kv = KnownValues(values={"company": {"Amazon.com, Inc.": 4, "Apple Inc.": 4}}, doc_count=8)
    match = match_offline("What was Amazon's gross margin in the most recent 10-Q?", kv)
    assert [c.value for c in match.conditions if c.key == "company"] == [["Amazon.com, Inc."]]


@pytest.mark.parametrize(("lines", "company"), [
    ("NORTHWIND HARVEST FUND\nLIMITED PARTNERSHIP", "Northwind Harvest Fund Limited Partnership"),
    ("BLUE HERON CAPITAL TRUST\nL.L.C.", "Blue Heron Capital Trust L.L.C."),
    ("SILVER MAPLE PARTNERS,\nLP", "Silver Maple Partners, LP"),
    ("REDWOOD HOLDINGS\nCORPORATION", "Redwood Holdings Corporation"),
])
def test_a_name_wrapped_before_its_legal_form_words_is_read_whole(lines: str, company: str) -> None:
    """A cover whose name breaks before its legal form ("… FUND" / "LIMITED PARTNERSHIP") names the whole
    company, not the legal form alone."""
    meta = extract_metadata(cover_10q(company=lines), file_name="x.txt")
    assert meta["company"] == company


def test_an_8k_description_keeps_its_item_titles_whole() -> None:
    """Form 8-K items are numbered "Item 8.01": the whole number goes, not half of it ("01 Other Events")."""
    md = ("# Form 8-K\n## Item 2.02 Results of Operations and Financial Condition\ntext\n"
          "## Item 8.01. Other Events\ntext\n## Item 9.01 Financial Statements and Exhibits\ntext\n")
    tree = build_markdown_tree(md, IngestSettings(min_node_token=0), title="8-K")
    text = offline_description(tree, {}, "amcor-8k.md")
    assert text == ("Form 8-K, covering Results of Operations and Financial Condition, Other Events and Financial "
                    "Statements and Exhibits."), text
