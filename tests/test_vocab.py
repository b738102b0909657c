"""The financial vocabulary: every declared document type is recognised on a generated first page, named by
its description, matched by a question naming it; periods in their common forms parse alike."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from ingest.describe import offline_description
from ingest.metadata import extract_metadata
from kb.core import vocab
from kb.core.types import DocumentTree, TreeNode
from kb.core.vocab import DOC_TYPES, DocType
from router.metadata import KnownValues, implied_types, match_offline, question_period

_FORM_TYPES = [(t, form) for t in DOC_TYPES for form in t.forms]
_COVER_DATES = {
    "year_end": "For the fiscal year ended December 31, 2022",
    "quarter_end": "For the quarterly period ended September 30, 2023",
    "report_date": "Date of Report (Date of earliest event reported): March 3, 2023",
    "": "",
}
_IMPLYING = {"earnings": "What was adjusted EBITDA guidance?", "8k": "Which directors did shareholders vote for?"}
_TREE = DocumentTree(nodes=(TreeNode(node_id="0000", parent_id=None, ordinal=0, level=1, title="Risk Factors",
                                     start=1, end=1, text="t", summary="s", path=("Risk Factors",), is_leaf=True),),
                     page_count=1, source_mode="text")


def cover(form: str, date_line: str) -> str:
    return f"""UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
Washington, D.C. 20549
FORM {form}
{date_line}
Commission File Number: 001-12345
ORCHARD DEVICES, INC.
(Exact name of registrant as specified in its charter)
Delaware
"""


def test_declarations_are_consistent() -> None:
    names = [t.name for t in DOC_TYPES]
    assert len(names) == len(set(names))
    forms = [f for _, f in _FORM_TYPES]
    assert len(forms) == len(set(forms))
    assert all(re.fullmatch(r"[A-Z0-9][A-Z0-9 -]*", f) for f in forms)  # used in the FORM pattern unescaped
    assert all(t.forms for t in DOC_TYPES if t.cover_report or t.cover_date)
    assert set(_IMPLYING) == {t.name for t in DOC_TYPES if t.implied_by}


@pytest.mark.parametrize(("doc_type", "form"), _FORM_TYPES, ids=[f for _, f in _FORM_TYPES])
def test_each_form_is_recognised_on_a_cover_page(doc_type: DocType, form: str) -> None:
    meta = extract_metadata(cover(form, _COVER_DATES[doc_type.cover_date]), file_name="x.pdf")
    assert (meta["doc_type"], meta["form"], meta["company"]) == (doc_type.name, form, "Orchard Devices, Inc.")
    if doc_type.cover_date == "year_end":
        assert (meta["period_end_date"], meta["fiscal_year"]) == ("2022-12-31", 2022)
    elif doc_type.cover_date == "quarter_end":
        assert (meta["period_end_date"], meta["fiscal_quarter"], meta["fiscal_year"]) == ("2023-09-30", 3, 2023)
    elif doc_type.cover_date == "report_date":
        assert (meta["report_date"], meta["doc_period"]) == ("2023-03-03", 2023)
    if doc_type.title_phrase:
        assert meta["title"].startswith(f"Orchard Devices, Inc. Form {form} {doc_type.title_phrase} ")
    else:
        assert meta["title"].startswith(f"Orchard Devices, Inc. Form {form}")


@pytest.mark.parametrize("word", list(vocab.COVER_REPORT_FORMS))
def test_report_pursuant_line_shows_the_main_form(word: str) -> None:
    text = cover("", f"{word} REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934")
    meta = extract_metadata(text.replace("FORM \n", ""), file_name="x.pdf")
    assert meta["form"] == vocab.COVER_REPORT_FORMS[word]
    assert meta["doc_type"] == vocab.form_doc_type(meta["form"])


def test_documents_without_a_form_are_recognised_by_their_first_lines() -> None:
    headline = extract_metadata("Acme Corp reports third quarter fiscal 2023 results\nRevenue rose.", file_name="x")
    assert (headline["doc_type"], headline["company"], headline["fiscal_year"], headline["fiscal_quarter"]) == (
        "earnings", "Acme Corp", 2023, 3)
    annual = extract_metadata("Northwind Energy\nAnnual Report 2023\nLetter to shareholders", file_name="x")
    assert (annual["doc_type"], annual["fiscal_year"]) == ("annual_report", 2023)
    unformed = extract_metadata("Some Holdings Ltd\nFor the fiscal year ended June 30, 2021", file_name="x")
    assert (unformed["doc_type"], unformed["fiscal_year"]) == (vocab.UNFORMED_ANNUAL, 2021)


@pytest.mark.parametrize("doc_type", DOC_TYPES, ids=[t.name for t in DOC_TYPES])
def test_each_type_is_named_in_its_description(doc_type: DocType) -> None:
    meta = {"company": "Acme", "doc_type": doc_type.name, "period_end_date": "2023-09-30", "fiscal_year": 2023,
            "fiscal_quarter": 3}
    text = offline_description(_TREE, meta, "x.pdf")
    period = "fiscal quarter" if doc_type.cover_date == "quarter_end" else "fiscal year"
    assert text == f"Acme {doc_type.description_label} for the {period} ended September 30, 2023 (fiscal 2023" + (
        " Q3" if period == "fiscal quarter" else "") + "), covering Risk Factors."


@pytest.mark.parametrize("doc_type", [t for t in DOC_TYPES if t.question], ids=lambda t: t.name)
def test_a_question_naming_a_type_by_its_label_selects_it(doc_type: DocType) -> None:
    question = f"What does Acme's {doc_type.description_label} say about revenue?"
    assert question_period(question).doc_types == (doc_type.name,)
    others = {t.name: 1 for t in DOC_TYPES if t is not doc_type}
    kv = KnownValues(values={"doc_type": {doc_type.name: 2, **others}}, doc_count=2 + len(others))
    accepted = sorted({doc_type.name, *doc_type.accepts} & set(kv.values["doc_type"]))
    assert [c.value for c in match_offline(question, kv).conditions] == [accepted]


@pytest.mark.parametrize(("name", "question"), list(_IMPLYING.items()))
def test_wording_implies_a_type_when_none_is_named(name: str, question: str) -> None:
    assert implied_types(question) == (name,)
    assert question_period(question).implied == (name,)
    assert question_period(question + " in the 10-K").implied == ()


@pytest.mark.parametrize("text", ["Q3 2023", "Q3 FY2023", "FY2023 Q3", "FY2023Q3", "Q32023", "Q3-2023", "3Q23",
                                  "Q3'23", "Q3 FY23", "Q3FY23", "third quarter of fiscal 2023", "third quarter 2023",
                                  "fiscal year 2023 third quarter", "2023Q3", "2023 Q3", "FY 2023 Q3"])
def test_a_question_period_in_each_common_form_parses_alike(text: str) -> None:
    period = question_period(f"What was revenue in {text}?")
    assert (period.years, period.quarters) == ((2023,), (3,))


@pytest.mark.parametrize("text", ["third quarter of fiscal 2023", "third fiscal quarter of fiscal year 2023",
                                  "fiscal 2023 third quarter", "fiscal year 2023 third quarter", "Q3 FY23",
                                  "Q3 fiscal 2023", "Q3 FY'23", "Q3FY2023"])
def test_a_document_fiscal_quarter_in_each_common_form_parses_alike(text: str) -> None:
    assert vocab.fiscal_quarter(f"Results for the {text} were strong.") == (3, 2023)


@pytest.mark.parametrize("text", ["September 30, 2023", "Sept. 30, 2023", "Sep 30 2023", "sep. 30,2023",
                                  "SEPTEMBER 30, 2023"])
def test_a_written_date_parses_with_any_month_spelling(text: str) -> None:
    m = vocab.DATE_RE.search(f"for the period ended {text}")
    assert m and vocab.parse_date(*m.groups()) == dt.date(2023, 9, 30)


def test_month_names_and_quarter_words() -> None:
    assert [vocab.MONTHS[m] for m in vocab.MONTH_NAMES] == list(range(1, 13))
    assert vocab.parse_date("Feb", "30", "2023") is None
    assert vocab.question_quarters("first quarter, Q2, 3Q and the fourth quarter") == {1, 2, 3, 4}


@pytest.mark.parametrize("question", [
    "What was organic sales growth in constant currency?",
    "How much did sales change excluding the impact of FX movement and pass-through costs?",
])
def test_measures_stated_only_in_earnings_releases_imply_one(question: str) -> None:
    assert implied_types(question) == ("earnings",)
