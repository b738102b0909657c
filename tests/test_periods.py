"""The one period parser (``kb.core.periods``): every period a question writes, found with where it stands, in
English and Chinese; and the views its callers read — the years and quarters stated, the typed question's
periods — each as it has always read a question, their differences pinned."""

from __future__ import annotations

import pytest

from kb.core.periods import (
    FORMS,
    Mention,
    find_periods,
    normalize_periods,
    question_quarters,
    question_years,
    stated_months,
    states_period,
    states_range,
)
from router.reading import read_question


def _of(text: str, form: str) -> list[Mention]:
    return [m for m in find_periods(text) if m.form == form]


def _said(text: str, m: Mention) -> str:
    return text[m.start:m.end]


def _read(text: str) -> list[tuple[int | None, int, int]]:
    """The typed question's periods of ``text`` asked about revenue: (year, quarter, months)."""
    question = f"{text}的营业收入是多少？" if any("\u4e00" <= c <= "\u9fff" for c in text) else f"What was revenue in {text}?"
    return [(p.year, p.quarter, p.months) for p in read_question(question).periods]


# ---------------------------------------------------------------------------- the mentions


def test_a_fiscal_year_in_each_spelling_is_one_year_mention() -> None:
    for text, said, short in (("FY2023", "FY2023", False), ("fiscal 2023", "fiscal 2023", False),
                              ("fiscal year 2023", "fiscal year 2023", False), ("FY23", "FY23", True),
                              ("FY '23", "FY '23", True)):
        (m,) = _of(f"Revenue in {text}?", "year")
        assert (m.year, m.fiscal, m.short, m.months, _said(f"Revenue in {text}?", m)) == (2023, True, short, 12, said)


def test_a_quarter_of_a_year_in_english() -> None:
    text = "Revenue in Q3 2023 and the third quarter of fiscal 2024?"
    assert [(m.year, m.quarter, m.months, m.fiscal, _said(text, m)) for m in _of(text, "quarter_year")] == [
        (2023, 3, 3, False, "Q3 2023"), (2024, 3, 3, True, "third quarter of fiscal 2024")]
    (first,) = _of("Revenue in 2023 Q3?", "quarter_year")  # a year-first match starts at the spaces before it
    assert (first.year, first.quarter, _said("Revenue in 2023 Q3?", first)) == (2023, 3, " 2023 Q3")
    (compact,) = _of("Revenue in 2Q23?", "quarter_year")
    assert (compact.year, compact.quarter, compact.short) == (2023, 2, True)


def test_a_quarter_of_a_year_in_chinese() -> None:
    (m,) = _of("2023年第一季度的营业收入", "quarter_year")
    assert (m.year, m.quarter, m.months, m.start, m.end) == (2023, 1, 3, 0, 9)
    (quarter,) = _of("2023年第一季度的营业收入", "quarter")
    assert (quarter.quarter, quarter.zh, quarter.to_date) == (1, True, False)


def test_nine_months_stated_in_both_languages() -> None:
    text = "Revenue for the nine months ended September 30, 2023"
    (date,) = _of(text, "date")
    assert (date.year, date.quarter, date.months) == (2023, 0, 9)
    assert stated_months(text) == 9 and stated_months("2023年前三季度的营业收入") == 9
    (year,) = _of("2023年前三季度的营业收入", "year")
    assert (year.year, year.months, year.zh) == (2023, 9, True)
    (q3,) = _of("2023年前三季度的营业收入", "quarter")  # the end of the first three quarters, not Q3
    assert (q3.quarter, q3.to_date) == (3, True)
    assert stated_months("not the first half of 2023") == 12


def test_a_chinese_range_of_quarters() -> None:
    text = "从2017年第三季度到2024年第一季度，营业收入的变化趋势"
    assert [(m.year, m.quarter) for m in _of(text, "quarter_year")] == [(2017, 3), (2024, 1)]
    assert states_range(text) and not states_range("2017年第三季度的营业收入")


def test_between_a_fiscal_year_and_a_quarter() -> None:
    text = "Was there any drop in cash between FY 2023 and Q2 of FY2024?"
    assert [(m.form, m.year, m.quarter) for m in find_periods(text) if m.form in ("year", "quarter_year")] == [
        ("year", 2023, 0), ("quarter_year", 2024, 2), ("year", 2024, 0)]
    (fy,) = [m for m in _of(text, "year") if m.year == 2023]
    assert _said(text, fy) == "FY 2023"


def test_ranges_lists_and_spans() -> None:
    (years,) = _of("revenue over 2021-2023", "year_range")
    assert (years.year, years.last) == (2021, 2023)
    (listed,) = _of("Q1, Q2 and Q3 of 2023", "quarter_list")
    assert listed.quarters == (1, 2, 3)
    (words,) = _of("First, Second and Third quarters of 2023", "quarter_list")
    assert words.quarters == (1, 2, 3)
    (span,) = _of("Q1-Q3 2023", "quarter_span")
    assert (span.year, span.quarters) == (2023, (1, 2, 3))
    (backwards,) = _of("Q3-Q1", "quarter_span")
    assert backwards.quarters == ()


def test_chinese_spans_name_the_quarter_they_end() -> None:
    assert [(m.quarter, m.months) for m in _of("2024年1-3月、上半年和1-9月", "zh_span")] == [(1, 3), (2, 6), (3, 9)]
    assert [(m.quarter, m.months) for m in _of("4-6月", "zh_span")] == [(2, 3)]


def test_mentions_stand_in_text_order_and_every_form_is_known() -> None:
    text = "从2017年第三季度到2024年第一季度 vs Q2 FY2023, March 31, 2024 and 2021–2023"
    found = find_periods(text)
    assert [m.start for m in found] == sorted(m.start for m in found)
    assert {m.form for m in found} <= set(FORMS)
    assert find_periods(text) is found  # read once per text


# ---------------------------------------------------------------------------- the views, as each caller reads


@pytest.mark.parametrize(("text", "years", "quarters"), [
    ("FY2023", {2023}, set()), ("fiscal 2023", {2023}, set()), ("FY23", {2023}, set()), ("Q3 2023", {2023}, {3}),
    ("third quarter of fiscal 2024", {2024}, {3}), ("2023年第一季度", {2023}, {1}), ("2023年前三季度", {2023}, {3}),
    ("nine months ended September 30, 2023", {2023}, set()),
    ("从2017年第三季度到2024年第一季度", {2017, 2024}, {1, 3}),
    ("between FY 2023 and Q2 of FY2024", {2023, 2024}, {2}), ("2024年1-3月", {2024}, {1}),
    ("2023年半年度", {2023}, {2}), ("first quarter, Q2, 3Q and the fourth quarter", set(), {1, 2, 3, 4}),
])
def test_the_years_and_quarters_a_question_states(text: str, years: set[int], quarters: set[int]) -> None:
    assert (question_years(text), question_quarters(text)) == (years, quarters)
    assert states_period(text) == bool(years or quarters)


def test_compact_forms_are_stated_once_written_out() -> None:
    assert normalize_periods("2Q23") == "Q2 FY23"
    assert (question_years("2Q23"), question_quarters("2Q23")) == (set(), set())
    assert (question_years(normalize_periods("2Q23")), question_quarters(normalize_periods("2Q23"))) == ({2023}, {2})


@pytest.mark.parametrize(("text", "read"), [
    ("FY2023", [(2023, 0, 12)]), ("fiscal 2023", [(2023, 0, 12)]), ("FY23", [(2023, 0, 12)]),
    ("Q3 2023", [(2023, 3, 3)]), ("third quarter of fiscal 2024", [(2024, 3, 3)]), ("2Q23", [(2023, 2, 3)]),
    ("2023年第一季度", [(2023, 1, 3)]), ("2023年前三季度", [(2023, 0, 9)]),
    ("nine months ended September 30, 2023", [(2023, 0, 9)]),
    ("从2017年第三季度到2024年第一季度", [(2017, 3, 3), (2024, 1, 3)]),
    ("between FY 2023 and Q2 of FY2024", [(2023, 0, 12), (2024, 2, 3)]),
    ("2023年半年度", [(2023, 0, 6)]),
])
def test_the_typed_question_reads_the_same_mentions(text: str, read: list[tuple[int | None, int, int]]) -> None:
    assert _read(text) == read


@pytest.mark.parametrize(("text", "years", "quarters", "read"), [
    # the reader reads any "FY"/"fiscal" two-digit year; the years stated only "FY23" with one space at most
    ("FY  23", set(), set(), [(2023, 0, 12)]),
    ("fiscal 23", set(), set(), [(2023, 0, 12)]),
    # a year run into a number: the years stated keep "1.2023" (and "12023年"), the reader none
    ("1.2023", {2023}, set(), []),
    # a year letters run into: the reader keeps it, the years stated do not
    ("x2023", set(), set(), [(2023, 0, 12)]),
    # the first three quarters: nine months to the reader, Q3 to the quarters stated
    ("2023年前三季度", {2023}, {3}, [(2023, 0, 9)]),
    # a Chinese span or half year: the quarter it ends to the quarters stated, a span (or nothing) to the reader
    ("2024年1-3月", {2024}, {1}, [(2024, 0, 12)]),
    ("2023年半年度", {2023}, {2}, [(2023, 0, 6)]),
    # "quarterly", "fiscal quarter", a quarter letters run into: the reader's quarters only
    ("first quarterly report", set(), set(), [(None, 1, 3)]),
    ("third fiscal quarter of 2023", {2023}, set(), [(2023, 3, 3)]),
    # a year then its quarter, a quarter without "of" before its year
    ("fiscal 2024 third quarter", {2024}, {3}, [(2024, 3, 3)]),
    ("third quarter 2024", {2024}, {3}, [(2024, 3, 3)]),
    # compact forms: the reader reads them, the years and quarters stated once written out
    ("2Q23", set(), set(), [(2023, 2, 3)]),
    ("Q3 FY24", {2024}, {3}, [(2024, 3, 3)]),
])
def test_where_the_views_read_a_question_differently(text: str, years: set[int], quarters: set[int],
                                                     read: list[tuple[int | None, int, int]]) -> None:
    assert (question_years(text), question_quarters(text), _read(text)) == (years, quarters, read)


def test_a_hyphenated_quarter_is_a_quarter() -> None:
    """"third-quarter 2023 net income" is the third quarter, as "third quarter" is (it was read as the year)."""
    assert _read("What was Orchard Lane's third-quarter 2023 net income?") == [(2023, 3, 3)]
    assert _read("Pelican Bay second-quarter 2022 revenue?") == [(2022, 2, 3)]


def test_a_span_written_as_two_dates_is_its_months() -> None:
    from kb.core.periods import spans_named

    assert spans_named("May 7, 2023 to June 3, 2023: open market purchases 21,876") == {1}
    assert spans_named("for the period January 1, 2024 through June 30, 2024") == {6}
    assert spans_named("January 1, 2023 through December 31, 2023") == set()  # a year: no span within one


def test_year_to_date_through_a_quarter_end_is_the_months_to_it() -> None:
    from kb.core.periods import find_periods

    spans = {t: [(m.months, m.ends) for m in find_periods(t) if m.ends] for t in (
        "How much did Orchard Lane earn YTD through June 2024?",
        "Pelican Bay's year-to-date revenue through September 30, 2024",
        "Revenue for the quarter ended September 30, 2024")}
    got = [v[0][0] for v in spans.values()]
    assert got == [6, 9, 3], spans


def test_year_to_date_words_yield_to_a_span_written_after_them() -> None:
    from kb.core.periods import find_periods

    dated = [m for m in find_periods("Pelican Bay's year-to-date results, for the nine months ended June 30, 2024")
             if m.ends]
    assert [m.months for m in dated] == [9]
    dated = [m for m in find_periods("Orchard Lane's YTD sales through March 2024") if m.ends]
    assert [m.months for m in dated] == [3]
