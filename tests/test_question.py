"""The typed question (``router.reading.read_question``): each capability on questions written for these tests
(not the dev sets' and not ``bench/parse/questions.jsonl``), bad input, and ``kb bench parse``'s scoring."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest

from kb.bench.parse_bench import ParseCase, compare, load_cases, score
from router.question import PeriodRef
from router.reading import read_question

FIRMS = ["Harbor Freight Logistics, Inc.", "Quillon Biotherapeutics Corp.", "The Marlow Group Holdings, Inc.",
         "Tessaract Semiconductor Ltd"]
ZH_FIRMS = ["上海晨光文具股份有限公司", "浙江龙盛集团股份有限公司", "深圳市汇川技术股份有限公司"]


def _q(text: str, companies: list[str] | dict[str, list[str]] = FIRMS):  # noqa: ANN202
    return read_question(text, companies)


CASES = """
max        | revenue             | Which of Harbor Freight and Quillon had the heftier top line in 2022?
max        | cfo                 | Who burned the least cash from operations last fiscal year among Marlow and Tessaract?
rank       | total_assets        | List every company here from smallest to largest total assets.
rank       | rd_expense          | Order the firms by R&D spend, biggest first.
screen     | revenue             | Which names reported sales above $2.5bn in 2023?
change     | cfo                 | Tessaract's operating cash flow in Q2 2023 versus Q2 2022 — how much did it swing?
series     | accounts_receivable | Walk me through Quillon's accounts receivable for 2020, 2021 and 2022.
compare    | inventory           | Put Marlow and Harbor Freight's inventories side by side for 2023.
lookup     | gross_margin        | What gross margin did Quillon post in fiscal 2021?
lookup     | revenue             | 晨光文具2023年的营收是多少？
max        | net_income_parent   | 这几家公司里哪家2022年归母净利润最高？
rank       | cfo                 | 把这几家公司按2023年经营现金流从低到高排个序
lookup     | cfo                 | How much cash did Quillon burn in operations during the first half of 2023?
lookup     | cfo                 | What was Marlow's operating cash burn in fiscal 2022?
lookup     | capex               | How much did Tessaract spend on property and equipment in 2021?
lookup     | capex               | What were Harbor Freight's purchases of property and equipment last year?
lookup     | capex               | How much did Quillon spend on property, plant and equipment in 2022?
lookup     | eps_basic           | What was Quillon's net loss per share in fiscal 2022?
lookup     | eps_basic           | Tessaract loss per share for the June quarter of 2023?
lookup     | eps_diluted         | What diluted loss per share did Marlow report for 2021?
lookup     | eps_basic           | Quillon's net loss per Class A share in Q1 2023?
lookup     | eps_diluted         | Marlow diluted earnings per ordinary share for 2022?
"""
"""operation | measure | question: one line a case."""


@pytest.mark.parametrize(("op", "measure", "text"), [tuple(x.strip() for x in line.split("|", 2))
                                                     for line in CASES.strip().splitlines()])
def test_each_operation_is_read_from_its_words(text: str, op: str, measure: str) -> None:
    q = _q(text, ZH_FIRMS if any("\u4e00" <= ch <= "\u9fff" for ch in text) else FIRMS)
    assert q.understood, q.unknown
    assert q.operation == op and [m.name for m in q.measures] == [measure], q


def test_a_loss_flips_the_extreme_and_marks_the_sign() -> None:
    q = _q("Which company posted the deepest net loss in 2023?")
    assert (q.operation, q.sign, q.measures[0].name) == ("min", "loss", "net_income")
    zh = _q("这几家里2023年哪家亏损最多？", ZH_FIRMS)
    assert (zh.operation, zh.sign, zh.measures[0].name) == ("min", "loss", "net_income")


def test_spans_quarters_and_ranges_of_years() -> None:
    assert _q("Harbor Freight revenue for the nine months ended September 30, 2023?").periods == (
        PeriodRef(year=2023, months=9, ends=dt.date(2023, 9, 30)),)
    assert _q("汇川技术2023年前三季度营业收入是多少", ZH_FIRMS).periods == (PeriodRef(year=2023, months=9),)
    assert _q("Tessaract inventories at June 30, 2024?").periods == (
        PeriodRef(year=2024, quarter=2, months=3, ends=dt.date(2024, 6, 30)),)
    series = _q("How has Quillon's cash moved over fiscal 2019-2022?")
    assert series.operation == "series" and [p.year for p in series.periods] == [2019, 2020, 2021, 2022]
    change = _q("By how much did Quillon's cash grow from fiscal 2019 to fiscal 2022?")
    assert change.operation == "change" and [p.year for p in change.periods] == [2019, 2022]
    quarters = _q("Marlow net income in each of Q1, Q2 and Q3 of 2023?")
    assert [(p.year, p.quarter) for p in quarters.periods] == [(2023, 1), (2023, 2), (2023, 3)]
    assert _q("晨光文具一季度营收多少", ZH_FIRMS).periods == (PeriodRef(quarter=1, months=3),)  # no year guessed
    assert _q("Quillon's latest cash balance?").periods == (PeriodRef(relative="latest"),)
    assert _q("龙盛近三年的净利润走势", ZH_FIRMS).periods == (PeriodRef(relative="last_n", n=3),)


def test_groups_and_bounds_in_english_and_chinese() -> None:
    q = _q("Sort the companies into three buckets by revenue: small (under $500M), mid ($500M to $2B "
           "inclusive) and large (over $2B).")
    assert q.operation == "group" and [(r.low, r.high) for r in q.ranges] == [
        (None, 5e8), (5e8, 2e9), (2e9, None)]
    assert q.ranges[1].high_inclusive and not q.ranges[0].high_inclusive
    zh = _q("把这几家按2023年营收分为三档：超过200亿元、50亿元（含）至200亿元、不足50亿元", ZH_FIRMS)
    assert zh.operation == "group" and sorted((r.low, r.high) for r in zh.ranges if r.low) == [(5e9, 2e10), (2e10, None)]
    signs = _q("Split the firms into profitable and loss-making camps on 2023 net income.")
    assert [r.direction for r in signs.ranges] == ["positive", "negative"] and signs.sign == ""
    screen = _q("Which companies had at least $1 billion of cash at the end of 2023?")
    assert screen.operation == "screen" and screen.bounds == {"gte": 1e9}  # "at least" is no superlative
    assert _q("2023年营收不低于50亿元的有哪几家？", ZH_FIRMS).bounds == {"gte": 5e9}  # 不低于, not 低于


def test_names_resolve_by_distinctive_words_aliases_and_short_names() -> None:
    assert _q("Tessaract's revenue in 2023?").entities.names == ("Tessaract Semiconductor Ltd",)
    assert _q("Marlow Group revenue in 2023?").entities.names == ("The Marlow Group Holdings, Inc.",)
    assert _q("HFL revenue in 2023?", {n: (["HFL"] if n.startswith("Harbor") else []) for n in FIRMS}) \
        .entities.names == ("Harbor Freight Logistics, Inc.",)
    assert _q("晨光和汇川2023年营收对比", ZH_FIRMS).entities.names == ("上海晨光文具股份有限公司", "深圳市汇川技术股份有限公司")
    which = _q("Which company had the highest revenue in 2023?")
    assert which.entities.scope == "collection" and not which.entities.names


@pytest.mark.parametrize("text", [
    "Which company has the friendliest culture?",          # no measure the reports state
    "What was Quillon's revenue in 2021 in fiscal 2023?",  # two periods conflict
    "Group the companies by revenue: under $5B and under $2B.",  # overlapping groups
    "what is the the of",                                  # stop words
    "Rank the firms by revenue and by net income in 2023.",  # two measures compete for one ranking
    "",
])
def test_what_is_not_understood_is_not_a_verdict(text: str) -> None:
    q = _q(text)
    assert not q.understood


def test_bad_input_is_bounded() -> None:
    many = [f"Company Number{i} Industries Inc." for i in range(50)]
    text = "Compare " + ", ".join(f"Number{i}" for i in range(50)) + " on revenue in 2023."
    started = time.perf_counter()
    q = read_question(text, many)
    assert len(q.entities.names) == 50 and q.operation == "compare"
    long = "revenue " * 3000 + "?"
    read_question(long, many)
    assert time.perf_counter() - started < 10


def test_scoring_separates_correct_misparsed_and_not_parsed(tmp_path: Path) -> None:
    lines = [
        {"id": "a", "capability": "max", "lang": "en", "source": "analyst", "companies": FIRMS,
         "question": "Which company had the highest revenue in 2023?",
         "expect": {"operation": "max", "measures": [{"name": "revenue"}], "periods": [{"year": 2023}]}},
        {"id": "b", "capability": "max", "lang": "en", "source": "analyst", "companies": FIRMS,
         "question": "Which company had the highest revenue in 2023?",
         "expect": {"operation": "min", "measures": [{"name": "revenue"}], "periods": [{"year": 2023}]}},
        {"id": "c", "capability": "abstain", "lang": "en", "source": "bad-input", "companies": FIRMS,
         "question": "Which company has the friendliest culture?", "expect": {"abstain": True}},
        {"id": "d", "capability": "abstain", "lang": "en", "source": "bad-input", "companies": FIRMS,
         "question": "Which company had the highest revenue in 2023?", "expect": {"abstain": True}},
        {"id": "e", "capability": "lookup", "lang": "en", "source": "analyst", "companies": FIRMS,
         "question": "Which company has the friendliest culture?", "expect": {"operation": "lookup"}},
    ]
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    outcomes = [score(c).outcome for c in load_cases(path)]
    assert outcomes == ["correct", "misparsed", "correct", "misparsed", "not_parsed"]
    assert compare({"operation": "max", "measures": [{"name": "revenue"}], "bounds": {"gt": 1e9}},
                   {"operation": "max", "measures": [{"name": "revenue", "kind": "concept"}],
                    "entities": {"scope": "collection", "names": []}, "periods": [], "change": "", "sign": "",
                    "order": "", "limit": None, "ranges": [], "bounds": {"gt": 1e9 * (1 + 1e-9)}}) == []


def test_the_shipped_question_set_reads() -> None:
    cases = load_cases(Path(__file__).resolve().parents[1] / "bench" / "parse" / "questions.jsonl")
    assert len(cases) >= 120 and all(isinstance(c, ParseCase) for c in cases)
    assert sum(c.lang == "zh" for c in cases) >= 40 and sum(c.source == "analyst" for c in cases) >= 60


def test_a_renamed_company_is_one_company_under_its_names() -> None:
    collection = {"American Ore Materials, Inc.": ("Boxcar Brands, Inc.",), "Quillon Biotherapeutics Corp.": ()}
    for text in ("What is the trend of American Ore Materials, Inc.'s share capital from 2020 to 2024?",
                 "Boxcar Brands share capital from 2020 to 2024?"):
        q = read_question(text, collection)
        assert q.entities.names == ("American Ore Materials, Inc.",) and not q.unknown, q


def test_a_computed_measure_must_be_the_one_asked() -> None:
    """``router.understood``: "revenue" computed for "deferred revenue" asked is another figure; a named
    formula ("inventory turnover ratio") is the metric asked ("inventory turnover")."""
    import datetime as dt

    from router.facts import FactsAnswer, FactUsed, MeasureAsk
    from router.understood import disagreement

    used = FactUsed(marker=1, doc_id=1, doc_name="d", entity="Quillon", concept="revenue", label="revenue",
                    period_end=dt.date(2023, 12, 31), months=12, value=1.0, printed="1", scale=1.0, unit="USD",
                    line_item="Revenue", statement="income", page=1, line=None)
    revenue = FactsAnswer(ask=MeasureAsk("revenue", "lookup"), text="t", citations=(), used=(used,), missing=())
    why = disagreement(read_question("Quillon's deferred revenue at the end of 2023?", FIRMS), revenue)
    assert why is not None and why.kind == "measure"
    assert disagreement(read_question("Quillon's revenue in 2023?", FIRMS), revenue) is None
    turnover = FactsAnswer(ask=MeasureAsk("metric:inventory turnover ratio", "metric"), text="t", citations=(),
                           used=(), missing=())
    assert disagreement(read_question("Quillon's inventory turnover in 2023?", FIRMS), turnover) is None


def test_an_extreme_over_one_company_s_periods_is_read_as_such() -> None:
    """"Which year …" asks for a period of one company's series; with a change word, for the largest step."""
    q = _q("In which year between 2018 and 2022 did Tessaract book its highest R&D spend?")
    assert (q.operation, q.over, q.change) == ("max", "periods", "")
    q = _q("Over 2019–2023, which fiscal year saw Harbor Freight's inventory fall the most from the year before?")
    assert (q.operation, q.over, q.change) == ("min", "periods", "absolute")  # the largest fall: the lowest step
    q = _q("浙江龙盛2019年至2023年哪一年的营业收入增长最多？", ZH_FIRMS)
    assert (q.operation, q.over, q.change) == ("max", "periods", "absolute")
    assert _q("Which company had the highest revenue in 2023?").over == ""


def test_an_average_over_stated_periods_is_a_series_with_its_mean() -> None:
    q = _q("What was Quillon's average cash balance across 2020, 2021 and 2022?")
    assert (q.operation, q.average, q.unknown) == ("series", True, ())
    q = _q("汇川技术2021年到2023年研发费用的平均值是多少？", ZH_FIRMS)
    assert (q.operation, q.average) == ("series", True)
    q = _q("Which company had the smallest weighted average diluted share count in 2023?")
    assert not q.average and q.operation == "min"  # "weighted average" names the measure


def test_one_measure_over_another_is_one_formula() -> None:
    from router.facts import task

    q = _q("What was the ratio of Marlow's current assets to its total assets at the end of 2023?")
    assert [(m.name, m.kind) for m in q.measures] == [("current_assets / total_assets", "formula")]
    q = _q("Tessaract's R&D expense as a share of revenue for fiscal 2022?")
    assert [(m.name, m.kind) for m in q.measures] == [("rd_expense / revenue * 100", "formula")]
    a = task(q)
    assert a is not None and a.concept == "metric:rd_expense / revenue * 100" and a.operation == "lookup"
    q = _q("晨光文具2023年销售费用占营业收入的比例是多少？", ZH_FIRMS)
    assert q.measures[0].kind == "formula" and q.measures[0].name.endswith("/ revenue * 100")


def test_an_amount_written_twice_for_one_bound_is_one_inclusive_bound() -> None:
    q = _q("把上述公司按2023年净利润分为：盈利较多（1亿元以上）、盈利较少（0以上且1亿元及1亿元以下）、亏损（0及0以下）。",
           ZH_FIRMS)
    assert [(x.low, x.low_inclusive, x.high, x.high_inclusive) for x in q.ranges] == [
        (1e8, False, None, False), (0.0, False, 1e8, True), (None, False, 0.0, True)]
    q = _q("按2023年经营活动现金流量净额给这几家公司分档：流入（0以上），流出（0或0以下）。", ZH_FIRMS)
    assert [(x.low, x.high, x.high_inclusive) for x in q.ranges] == [(0.0, None, False), (None, 0.0, True)]


def test_the_executor_runs_the_question_as_read() -> None:
    """The executor's task is the typed question's: operation, order, limit, periods and groups, one mapping."""
    from router.facts import task

    a = task(_q("Show the three companies with the lowest 2023 free-standing inventory, lowest first — top 3 only."))
    assert a is not None and (a.operation, a.ascending, a.limit) == ("rank", True, 3)
    a = task(_q("Did Quillon's receivables go up or down each year from 2020 to 2022, in percent?"))
    assert a is not None and (a.operation, a.percent, a.years) == ("trend", True, (2020, 2021, 2022))
    a = task(_q("Which of these firms lost the most money in 2023?"))
    assert a is not None and (a.operation, a.loss) == ("min", True)
    assert task(_q("Who chairs Quillon's board?")) is None


def test_direction_groups_keep_the_question_s_labels() -> None:
    q = _q("Did each firm's R&D spend go up or down versus 2022? File each one under grew, shrank or unchanged.")
    assert q.operation == "group" and [(x.label, x.direction) for x in q.ranges] == [
        ("grew", "increase"), ("shrank", "decrease"), ("unchanged", "other")]
    q = _q("File the companies by 2023 operating cash flow: cash generative (positive) vs cash burning (negative); "
           "net the others on the other side.")
    assert [x.direction for x in q.ranges][:2] == ["positive", "negative"]
    q = _q("按2023年净利润把这几家公司分为盈利、亏损两类", ZH_FIRMS)
    assert [(x.label, x.direction) for x in q.ranges] == [("盈利", "positive"), ("亏损", "negative")]


def test_opening_and_closing_cash_are_their_own_measures_and_unread_groups_abstain() -> None:
    assert [m.name for m in _q("Quillon's opening cash and cash equivalents for 2023?").measures] == ["cash_begin"]
    assert [m.name for m in _q("What were Marlow's closing cash and cash equivalents in 2022?").measures] == ["cash_end"]
    q = _q("Which of Marlow and Tessaract count as big spenders (R&D above $1bn), which as small (R&D at or below "
           "$1bn)?")
    assert q.operation == "group" and len(q.ranges) == 2
    q = _q("Rate Marlow and Quillon on inventory. Heavy: above $2bn. Light: $2bn or less. Put firms with the same "
           "rating together.")
    assert q.operation == "group" and not q.understood  # groups across sentences are not read yet: no verdict


def test_stability_over_time_is_a_series_and_a_defined_formula_is_a_formula() -> None:
    assert _q("Has Tessaract's operating margin been historically stable?").operation == "series"
    assert _q("Is Quillon's gross margin consistent from year to year?").operation == "series"
    q = _q("What is Marlow's FY2023 cash burn? Cash burn is defined as: operating cash flow + capital expenditure.")
    assert [(m.name, m.kind) for m in q.measures] == [("cash_burn", "formula")] and q.periods[0].year == 2023
    from router.metrics import metric_task

    a = metric_task(q)
    assert a is not None and a.formula.defined and {t.concept for t in a.formula.terms.values()} == {"cfo", "capex"}
    assert metric_task(_q("What was Marlow's adjusted EBITDA in 2023?")) is None  # the company's own measure


def test_pretax_profit_and_compound_nouns_are_read_as_written() -> None:
    assert [m.name for m in _q("What was Quillon's pre-tax profit in 2023?").measures] == ["pretax_income"]
    assert [m.name for m in _q("Tessaract's earnings before taxes for fiscal 2022?").measures] == ["pretax_income"]
    q = _q("Describe Marlow's revenue recognition policy.")  # a text question, not a revenue figure
    assert q.operation is None and not q.measures
    q = _q("What does Harbor Freight say about its inventory management?")
    assert q.operation is None and not q.measures


def test_a_screen_is_the_metadata_router_s_fact_condition() -> None:
    """The documents a screen filters are read from the typed question (no second reading of the bounds)."""
    from router.reading import fact_condition

    c = fact_condition(_q("Which names reported sales above $2.5bn in 2023?"))
    assert c is not None and c.value == {"concept": "revenue", "period": "FY2023", "gt": 2.5e9}
    c = fact_condition(_q("哪些公司2023年营收不低于50亿元？", ZH_FIRMS))
    assert c is not None and c.value == {"concept": "revenue", "period": "FY2023", "gte": 5e9}
    grouped = _q("Sort the companies into buckets by revenue: small (under $500M) and large (over $500M).")
    assert fact_condition(grouped) is None and fact_condition(_q("Which firm had the most cash in 2023?")) is None


def test_a_margin_of_a_measure_and_years_listed_with_commas() -> None:
    """"<measure> margin" is that measure over revenue (the table's own margin where it has one); years listed
    with commas are periods, never an amount ("over 2021, 2022 …" is no bound)."""
    assert [(m.name, m.kind) for m in _q("What was Marlow's operating income margin in 2023?").measures] == [
        ("operating_margin", "metric")]
    assert [(m.name, m.kind) for m in _q("Quillon's R&D % margin for fiscal 2022?").measures] == [
        ("rd_expense / revenue * 100", "formula")]
    q = _q("How did Tessaract's revenue move over 2021, 2022 and 2023?")
    assert q.operation == "series" and q.bounds == {} and [p.year for p in q.periods] == [2021, 2022, 2023]
    q = _q("Which of the firms had cash above 2,500,000 in 2023?")
    assert q.operation == "screen" and q.bounds == {"gt": 2_500_000.0}


def test_the_language_is_the_question_s_company_names_aside() -> None:
    assert _q("Which of 上海晨光文具股份有限公司 and 浙江龙盛 had the higher 2023 revenue?", ZH_FIRMS).lang == "en"
    assert _q("晨光文具和汇川技术哪家的 ROE 更高？", ZH_FIRMS).lang == "zh"
    assert _q("汇川技术 revenue 2023?", ZH_FIRMS).lang == "en"


def test_groups_labelled_with_if_or_when_and_chinese_words_left_over() -> None:
    q = _q("Label the firms by 2023 cash: rich if above $1bn, lean if $1bn or less.")
    assert q.operation == "group" and [(x.label, x.low, x.high) for x in q.ranges] == [
        ("rich", 1e9, None), ("lean", None, 1e9)]
    q = _q("Group the companies on 2023 revenue: big when over $5bn and small when under $5bn.")
    assert [(x.label, x.low, x.high) for x in q.ranges] == [("big", 5e9, None), ("small", None, 5e9)]
    from router.reading import unplaced_words

    assert unplaced_words("浙江龙盛2023年的员工人数是多少？", dict.fromkeys(ZH_FIRMS, ())) == ["职工人数"]  # as printed


def test_a_one_word_measure_beside_a_word_nothing_accounts_for_is_not_sure() -> None:
    """"unearned revenue" is not revenue, "debt extinguishment" not total debt: the reader says it is not sure
    (matching by meaning may settle it); words that leave the measure what it is ("balance", "reported",
    "merchandise"), superlatives and group labels do not."""
    firms = ["Orchard Lane Foods, Inc.", "Pelican Bay Marine Corp."]
    for question, phrase in (("Which company had the most unearned revenue in 2023?", "unearned revenue"),
                             ("How large was Orchard Lane's debt extinguishment charge in 2022?", "debt extinguishment"),
                             ("Which firm took the biggest goodwill write-down last year?", "goodwill write")):
        q = read_question(question, firms)
        assert len(q.unsure) == 1 and q.unsure[0][0] == phrase, (question, q.unsure)
        assert q.hard_unknown == () and not q.understood, q.unknown  # soft for routing, no verdict as read
    for question in ("What was Pelican Bay's inventory balance at the end of 2023?",
                     "Compare the reported revenue of Orchard Lane and Pelican Bay for 2023.",
                     "Which company held the larger merchandise inventories in 2023?",
                     "Which company had the biggest revenue in 2023?"):
        q = read_question(question, firms)
        assert q.unsure == () and q.understood, (question, q.unknown)


def test_a_span_stated_without_a_year_is_the_latest_period_s() -> None:
    """"its nine-month net sales", "year-to-date sales": the span of the latest period (a span stated without a
    year used to be dropped, and the quarter's figure answered)."""
    for question in ("What about its nine-month net sales?", "What were Quillon's year-to-date sales?",
                     "Harbor Freight's first-half revenue?"):
        q = _q(question)
        assert [(p.relative, p.months) for p in q.periods] == [("latest", 6 if "half" in question else 9)], q.periods
    assert [(p.relative, p.months) for p in _q("Quillon's latest revenue?").periods] == [("latest", 12)]


def test_a_year_naming_a_document_is_not_a_period_asked() -> None:
    """"as shown in the 2022 10-K": the year names the document; the period asked is the other one — or, when no
    other is stated, the document's year is it."""
    for question, year in (("Quillon's diluted EPS for 2021, as shown in the 2022 10-K?", 2021),
                           ("Per Marlow's FY2023 annual report, what was its 2022 revenue?", 2022),
                           ("What revenue did Tessaract report in its 2022 10-K?", 2022)):
        q = _q(question)
        assert q.operation == "lookup" and [p.year for p in q.periods] == [year], (question, q)


def test_a_quarter_asked_is_not_answered_with_another_quarter() -> None:
    """"Q4 2023" answered with the first quarter's figure (the only quarter the reports print) is another period:
    no verdict; a fiscal quarter of that name ending months before or after the calendar quarter is the one."""
    import datetime as dt

    from router.facts import FactsAnswer, FactUsed, MeasureAsk
    from router.understood import disagreement

    def answer(end: dt.date) -> FactsAnswer:
        used = FactUsed(marker=1, doc_id=1, doc_name="d", entity="Quillon", concept="revenue", label="revenue",
                        period_end=end, months=3, value=1.0, printed="1", scale=1.0, unit="USD",
                        line_item="Net sales", statement="income", page=1, line=None)
        return FactsAnswer(ask=MeasureAsk("revenue", "lookup"), text="t", citations=(), used=(used,), missing=())

    for question in ("What was Quillon's revenue for Q4 2023?", "Quillon's fourth-quarter 2023 sales?"):
        why = disagreement(_q(question), answer(dt.date(2023, 4, 1)))
        assert why is not None and why.kind == "period" and "Q4 2023" in why.text(), (question, why)
        assert disagreement(_q(question), answer(dt.date(2023, 12, 30))) is None
    # a fiscal year ending in June: its first quarter of fiscal 2024 ends September 30, 2023
    assert disagreement(_q("Quillon's revenue in Q1 FY2024?"), answer(dt.date(2023, 9, 30))) is None


def test_a_year_asked_is_not_answered_with_a_quarter() -> None:
    """A fiscal year asked and only a quarter's figure found — alone, or ranked against another company's year —
    is another span: no verdict; a nine-month figure asked is read from its own column."""
    import datetime as dt

    from router.facts import FactsAnswer, FactUsed, MeasureAsk, _pick, _Row
    from router.understood import disagreement

    def used(months: int, entity: str = "Quillon") -> FactUsed:
        return FactUsed(marker=1, doc_id=1, doc_name="d", entity=entity, concept="revenue", label="revenue",
                        period_end=dt.date(2023, 9, 30), months=months, value=1.0, printed="1", scale=1.0,
                        unit="USD", line_item="Net sales", statement="income", page=1, line=None)

    def answer(*rows: FactUsed, op: str = "lookup") -> FactsAnswer:
        return FactsAnswer(ask=MeasureAsk("revenue", op), text="t", citations=(), used=rows, missing=())

    why = disagreement(_q("Which company had the highest revenue in 2023?"),
                       answer(used(3), used(12, "Harbor"), op="max"))
    assert why is not None and why.kind == "span", why
    why = disagreement(_q("What was Quillon's revenue in 2023?"), answer(used(3)))
    assert why is not None and why.kind == "span"
    assert disagreement(_q("What was Quillon's revenue in 2023?"), answer(used(12))) is None

    def row(months: int, value: float) -> _Row:
        return _Row(statement="income", line_item="Net sales", concept="revenue", period_end=dt.date(2023, 9, 30),
                    months=months, period_label="", value=value, printed="", scale=1.0, unit="USD", page=None,
                    line=1, node_id="", source="", column=0, doc_id=1, ordinal=months)
    quarter_and_ytd = [row(3, 268.4), row(9, 792.5)]
    assert _pick(quarter_and_ytd, {"doc_type": "10q"}, (2023,), True, 9)[0].value == 792.5
    assert _pick(quarter_and_ytd, {"doc_type": "10q"}, (2023,), True)[0].value == 268.4  # none stated: the quarter


def test_an_amount_the_question_states_but_no_operation_reads_is_not_a_verdict() -> None:
    """A threshold no grouping or screen consumed ("among those with net income above $50 million") would be
    silently dropped: the reading says so instead of answering the question without it."""
    for text in ("Among companies with net income above $50 million in 2023, which had the highest revenue?",
                 "Did Quillon's revenue exceed $1.2 billion in 2023?",
                 "净利润超过1亿元的公司中，哪家2023年营业收入最高？"):
        q = read_question(text, FIRMS + ZH_FIRMS)
        assert not q.understood and any("amount" in u for u in q.unknown), (text, q.unknown)
    for text in ("What was 3M's revenue in 2023?", "Harbor Freight's revenue in the 2023 10-K",  # names, not amounts
                 "Which companies had revenue above $1 billion in 2023?"):  # a screen reads its bound
        q = read_question(text, [*FIRMS, "3M Company"])
        assert not any("amount" in u for u in q.unknown), (text, q.unknown)


def test_the_unit_asked_is_any_scale_word_standing_apart_from_an_amount() -> None:
    cases = {"Quillon's revenue for 2023, expressed in millions": "million",
             "Harbor Freight total assets at year-end 2023 ($ in billions)": "billion",
             "汇川技术2023年营业收入是多少亿元？": "亿",
             "Which companies had revenue above $1.5 billion in 2023?": ""}  # an amount's scale, not the unit
    for text, unit in cases.items():
        assert read_question(text, FIRMS + ZH_FIRMS).unit == unit, text


def test_a_date_s_span_is_the_words_nearest_before_it() -> None:
    """"the fiscal year ended January 31, 2019" is a year, not the first quarter; "the quarter ended July 29"
    a quarter; "the nine months ended" nine months."""
    cases = {"Harbor Freight's diluted EPS for the fiscal year ended January 31, 2019?": (2019, 0, 12),
             "Quillon revenue for the twelve months ended September 30, 2023": (2023, 0, 12),
             "Quillon revenue for the quarter ended July 29, 2023": (2023, 3, 3),
             "Quillon's net loss for the nine months ended June 30, 2024": (2024, 0, 9),
             "Quillon's revenue in the three months ended December 31, 2023": (2023, 4, 3)}
    for text, (year, quarter, months) in cases.items():
        (p,) = _q(text).periods
        assert (p.year, p.quarter, p.months) == (year, quarter, months), (text, p)


def test_a_period_end_day_written_picks_the_report_ending_that_day() -> None:
    """A 52/53-week company's quarter ended July 29, 2023 is read from the report ending that day, not from the
    annual report of the fiscal year of the same number; a day no report ends on leaves the routed report, and a
    figure of another period is then no verdict."""
    import datetime as dt
    from types import SimpleNamespace

    from router.facts import FactsAnswer, FactUsed, MeasureAsk, _of_day
    from router.understood import disagreement

    ends = {1: "2023-01-28", 2: "2023-07-29", 3: "2023-04-29", 4: "2017-01-28"}
    catalog = SimpleNamespace(docs={d: SimpleNamespace(metadata={"period_end_date": e}) for d, e in ends.items()},
                              company_reports=lambda d: (2, 3, 1, 4))
    assert _of_day(catalog, 1, dt.date(2023, 7, 29)) == 2  # type: ignore[arg-type]
    assert _of_day(catalog, 1, dt.date(2023, 4, 30)) == 3  # type: ignore[arg-type]
    assert _of_day(catalog, 4, dt.date(2022, 7, 30)) == 2  # type: ignore[arg-type]  # its prior-year column
    assert _of_day(catalog, 4, dt.date(2022, 10, 29)) == 4  # type: ignore[arg-type]  # nothing prints it

    from router.facts import _pick, _Row

    def row(end: dt.date, value: float) -> _Row:
        return _Row(statement="income", line_item="Revenue", concept="revenue", period_end=end, months=3,
                    period_label="", value=value, printed="", scale=1.0, unit="USD", page=None, line=1, node_id="",
                    source="", column=0, doc_id=2, ordinal=1)
    columns = [row(dt.date(2023, 7, 29), 9583.0), row(dt.date(2022, 7, 30), 10329.0)]
    assert _pick(columns, {"doc_type": "10q"}, (2022,), True, 3, dt.date(2022, 7, 30))[0].value == 10329.0
    assert _pick(columns, {"doc_type": "10q"}, (2023,), True, 3, dt.date(2023, 7, 29))[0].value == 9583.0

    def answer(end: dt.date) -> FactsAnswer:
        used = FactUsed(marker=1, doc_id=1, doc_name="d", entity="Quillon", concept="revenue", label="revenue",
                        period_end=end, months=3, value=1.0, printed="1", scale=1.0, unit="USD",
                        line_item="Net sales", statement="income", page=1, line=None)
        return FactsAnswer(ask=MeasureAsk("revenue", "lookup"), text="t", citations=(), used=(used,), missing=())

    q = _q("Quillon revenue for the quarter ended July 29, 2023")
    assert q.periods[0].ends == dt.date(2023, 7, 29)
    assert disagreement(q, answer(dt.date(2023, 7, 29))) is None
    why = disagreement(q, answer(dt.date(2023, 4, 29)))
    assert why is not None and why.kind == "period" and "2023-07-29" in why.text(), why


def test_an_amount_over_one_path_is_a_tolerance_the_series_shows() -> None:
    for text in ("Has Quillon's gross margin stayed within 2% from 2021 to 2023?",
                 "Did Harbor Freight's revenue grow by more than 10% between 2022 and 2023?"):
        q = read_question(text, FIRMS)
        assert q.operation in ("series", "change") and not any("amount" in u for u in q.unknown), (text, q)


def test_a_superlative_of_time_is_the_latest_period_and_no_extreme() -> None:
    for text in ("Where does Quillon's gross margin stand as of its newest filing?",
                 "Harbor Freight's cash in the freshest report on file?"):
        q = _q(text)
        assert q.operation == "lookup" and q.periods == (PeriodRef(relative="latest"),), (text, q)


def test_zero_as_a_bound_is_an_amount_stated() -> None:
    for text in ("Among the companies with operating cash flow above zero, which had the highest revenue in 2023?",
                 "经营活动现金流量净额在零以上的公司中，哪家2023年营业收入最高？"):
        q = read_question(text, FIRMS + ZH_FIRMS)
        assert not q.understood and any("amount" in u for u in q.unknown), (text, q.unknown)


def test_an_llm_reading_keeps_the_day_the_question_wrote() -> None:
    import datetime as dt

    from router.reading import from_llm, with_days

    text = "Quillon revenue for the quarter ended July 29, 2023"
    rules = _q(text)
    llm, _ = from_llm({"operation": "lookup", "measures": [{"name": "revenue"}], "companies": [FIRMS[1]],
                       "periods": [{"year": 2023, "quarter": 3, "months": 3}]}, text, {c: () for c in FIRMS})
    assert llm is not None and llm.periods[0].ends is None
    assert with_days(llm, rules).periods[0].ends == dt.date(2023, 7, 29)


def test_cash_with_an_activity_word_is_that_cash_flow_and_burning_it_is_an_outflow() -> None:
    """"cash … in operations" is the operating cash flow, not the cash balance; "burned the most" of it is the
    lowest (the most negative) figure."""
    burned = _q("Which of Quillon, Harbor Freight and Marlow burned the most cash in their operations in 2023?")
    assert (burned.operation, [m.name for m in burned.measures], burned.sign) == ("min", ["cfo"], "loss"), burned
    least = _q("Who consumed the least cash running its operations last year?")
    assert (least.operation, [m.name for m in least.measures]) == ("max", ["cfo"]), least
    spent = _q("How much cash did Tessaract spend on investing in 2023?")
    assert [m.name for m in spent.measures] == ["cfi"], spent
    balance = _q("Which had more cash on hand, Quillon or Marlow, in 2023?")
    assert [m.name for m in balance.measures] == ["cash"] and balance.sign == "", balance


def test_sga_is_named_as_analysts_write_it() -> None:
    which = _q("Which was bigger for Quillon in 2023: R&D or SG&A?")
    assert (which.operation, which.over, [m.name for m in which.measures]) == (
        "max", "measures", ["rd_expense", "sga_expense"]), which
    assert [m.name for m in _q("Rank Harbor Freight, Quillon and Marlow by SG&A in 2023").measures] == ["sga_expense"]
    from kb.core.vocab import line_concept

    assert line_concept("Research, development and engineering expenses") == "rd_expense"


def test_a_month_written_alone_ends_on_its_last_day_and_a_metric_not_computed_is_said() -> None:
    """"the June 2023 quarter" ends June 30, 2023 (a report ending July 1 is within a week of it; one ending
    December 31 is not); a ratio asked that the statements did not give is said, when the text's lead states
    no figure of its unit."""
    import datetime as dt

    from router.understood import uncomputed

    (p,) = _q("Quillon's gross margin in the June 2023 quarter?").periods
    assert (p.year, p.quarter, p.ends) == (2023, 2, dt.date(2023, 6, 30))
    ratio = _q("What is Quillon's debt to equity at March 31, 2024?")
    assert uncomputed(ratio, "The current maturities of the debt were $102,342 and $102,309.").startswith(
        "I could not compute")
    assert uncomputed(ratio, "Quillon's ratio of liabilities to equity was 1.84 at March 31, 2024.") == ""
    tax = _q("Harbor Freight's effective tax rate in 2023?")
    assert uncomputed(tax, "Our effective tax rate was 18% in 2023.") == ""
    assert uncomputed(tax, "Income taxes paid were $41.2 million.").startswith("I could not compute")
    assert uncomputed(_q("Harbor Freight's revenue in 2023?"), "Revenue was up.") == ""  # no metric asked


def test_an_owner_the_collection_does_not_hold_is_no_verdict() -> None:
    """"Pepsico's operating income" over a collection without PepsiCo is not the routed company's."""
    for text in ("What was Pepsico's operating income in 2022?", "How much cash did Tesla's operations generate in 2023?"):
        q = _q(text)
        assert not q.understood and any("names no company" in u for u in q.unknown), (text, q.unknown)
    for text in ("What was Quillon's operating income in 2022?", "What is the Company's revenue for 2023?"):
        assert not any("names no company" in u for u in _q(text).unknown), text


def test_profit_s_sign_asks_the_net_income_and_two_which_words_group_by_it() -> None:
    for text in ("Was Quillon profitable in the first quarter of 2024?", "晨光文具2023年是否盈利？"):
        q = _q(text, FIRMS + ZH_FIRMS)
        assert (q.operation, [m.name for m in q.measures]) == ("lookup", ["net_income"]), (text, q)
    for text in ("这几家公司2023年哪些盈利，哪些亏损？", "2023年这三家里哪家营收增长、哪家营收下降？"):
        q = _q(text, ZH_FIRMS)
        assert q.operation == "group" and len(q.ranges) == 2, (text, q)


def test_a_noun_ending_like_a_comparative_beside_a_measure_is_a_modifier() -> None:
    """"data center revenue", "partner revenue": "center" and "partner" are no comparatives, and no cue words —
    the segment's revenue may be another measure, so the reading is not sure."""
    for text in ("What was Quillon's data center revenue in 2023?", "How much partner revenue did Marlow book in 2023?"):
        q = _q(text)
        assert q.unsure and not q.understood, (text, q)


def test_cash_with_its_activity_a_few_words_later_is_that_cash_flow() -> None:
    """A company's name of two or three words between "cash" and its activity still names the cash flow."""
    for q in ("How much cash did Orchard Lane Holdings burn in its operations in 2024?",
              "How much cash did Pelican Bay Paper Co. generate from its core operations?"):
        assert [m.name for m in read_question(q).measures] == ["cfo"], q
