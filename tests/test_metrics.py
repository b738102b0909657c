"""Financial metrics computed from stored statement facts (``router.metrics``): a formula the question defines or
a standard one it names, over the company's reports (prior-year columns included), for a year, an N-year average
or a change — each input cited to its statement line; money restated in the unit asked. The parsing is checked
on its own; the answers end to end over generated text filings in the embedded Postgres, over HTTP, offline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kb.runtime import Runtime
from router.metrics import MetricAsk, metric_task, parse_formula
from router.question import MeasureRef
from router.reading import listed_measures, read_question
from tests.conftest import runtime_over
from tests.factgen import figures, text_filing
from tests.http import ask_json


def metric_ask(question: str) -> MetricAsk | None:
    """What the metric calculator computes for a question as the reader reads it."""
    return metric_task(read_question(question, ["Walmart Inc.", "Bolt Corp"]))


def _year(revenue: float, cogs: float, net_income: float, da: float, inventory: float, ap: float) -> dict[str, float]:
    return {**figures(revenue, net_income, cash=700, liabilities=5_000), "cogs": cogs, "da": da,
            "inventory": inventory, "ap": ap}


FY2023 = _year(10_000, 6_000, 1_000, 300, 1_100, 900)  # operating income 1,200; current assets 4,000, liabilities 2,500
FY2022 = _year(8_100, 5_000, 800, 250, 900, 700)  # operating income 960
FY2021 = _year(7_000, 4_500, 500, 200, 800, 650)  # operating income 600


# ------------------------------------------------------------------------------------------- parsing


@pytest.mark.unit
def test_a_defined_formula_is_parsed_into_cited_terms() -> None:
    f = parse_formula("365 * (average accounts payable between FY2019 and FY2020) / "
                      "(FY2020 COGS + change in inventory between FY2019 and FY2020)")
    assert f is not None
    terms = sorted((t.fn, t.concept, t.years) for t in f.terms.values())
    assert terms == [("avg", "accounts_payable", (2019, 2020)), ("chg", "inventory", (2019, 2020)),
                     ("v", "cost_of_revenue", (2020,))]
    assert parse_formula("365 * (average happiness between FY2019 and FY2020)") is None  # no such measure
    assert parse_formula("__import__('os') + revenue") is None


@pytest.mark.unit
def test_what_a_question_asks_of_a_metric() -> None:
    a = metric_ask("What is the FY2018 - FY2020 3 year average unadjusted EBITDA % margin for Walmart? Define "
                   "unadjusted EBITDA as unadjusted operating income + depreciation and amortization from the cash "
                   "flow statement. Answer in units of percents and round to one decimal place.")
    assert a is not None and a.formula.defined and a.formula.unit == "%"
    assert (a.years, a.aggregate, a.decimals) == ((2018, 2019, 2020), "average", 1)
    assert {t.concept for t in a.formula.terms.values()} == {"operating_income", "depreciation_amortization",
                                                             "revenue"}
    a = metric_ask("Has the quick ratio improved or declined between FY2023 and FY2022?")
    assert a is not None and (a.formula.name, a.years, a.aggregate) == ("quick_ratio", (2022, 2023), "change")
    a = metric_ask("Does the company have an improving gross margin profile as of FY2023?")
    assert a is not None and (a.years, a.aggregate) == ((2022, 2023), "change")
    a = metric_ask("what is the three year average of cost of goods sold as a % of revenue from FY2016 to FY2018?")
    assert a is not None and a.formula.name == "cost_of_revenue / revenue * 100" and a.years == (2016, 2017, 2018)
    a = metric_ask("What is the FY2022 working capital? Answer in USD millions.")
    assert a is not None and a.scale == 1e6
    a = metric_ask("Has the company increased its debt on balance sheet between FY2023 and the FY2022 period?")
    assert a is not None and (a.formula.name, a.aggregate) == ("total_debt", "change")
    assert metric_ask("What was the Adjusted Non GAAP EBITDA for FY 2023?") is None  # the company's own measure
    assert metric_ask("What is the current ratio of Bolt Corp?") is None  # one period: router.facts answers
    assert metric_ask("公司2023年的毛利率是多少？") is None
    assert metric_ask("Who are the company's primary customers?") is None


@pytest.mark.unit
def test_a_list_of_measures_shares_its_head_noun() -> None:
    """An extreme over the measures a question lists for one company is read as such (``over="measures"``)."""
    firms = ["Acme Holdings, Inc.", "Bolt Corp"]
    q = read_question("Among operations, investing, and financing activities, which brought in the most for Acme "
                      "Holdings in 2023?", firms)
    assert (q.operation, q.over, [m.name for m in q.measures]) == ("max", "measures", ["cfo", "cfi", "cff"])
    q = read_question("For Bolt in 2022, which was smaller: research and development or cost of sales?", firms)
    assert (q.operation, q.over, [m.name for m in q.measures]) == ("min", "measures", ["rd_expense",
                                                                                      "cost_of_revenue"])
    assert listed_measures("which is larger: revenue, cost of sales or operating income?") == \
        [MeasureRef("revenue"), MeasureRef("cost_of_revenue"), MeasureRef("operating_income")]
    q = read_question("Which company has the highest revenue, Acme or Bolt?", firms)
    assert q.over == "" and [m.name for m in q.measures] == ["revenue"]


# ------------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
async def delta(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    folder = tmp_path_factory.mktemp("metrics")
    (folder / "delta-2023.txt").write_text(text_filing("Delta Corp", 2023, FY2023, FY2022))
    (folder / "delta-2022.txt").write_text(text_filing("Delta Corp", 2022, FY2022, FY2021))
    async with runtime_over(pg_uri, "metrics", folder, ok=2) as rt:
        yield rt



@pytest.mark.slow
async def test_a_defined_formula_is_computed_from_cited_lines(delta: Runtime) -> None:
    body = await ask_json(delta, "What is the FY2023 inventory turnover ratio for Delta Corp? Inventory turnover ratio "
                             "is defined as: (FY2023 COGS) / (average inventory between FY2022 and FY2023). Round "
                             "your answer to two decimal places.")
    answer = body["answer"]
    assert answer.startswith("Delta Corp — Inventory turnover ratio, FY2023: 6.00."), answer  # 6,000 / 1,000
    assert "Computed as the question defines it" in answer
    used = sorted((f["line_item"], f["value"]) for f in body["facts"])
    assert used == [("Cost of sales", 6_000_000), ("Inventories", 900_000), ("Inventories", 1_100_000)], used
    assert all(f["marker"] > 0 for f in body["facts"])
    body = await ask_json(delta, "What is FY2023 days payable outstanding (DPO) for Delta Corp? DPO is defined as: 365 * "
                             "(average accounts payable between FY2022 and FY2023) / (FY2023 COGS + change in "
                             "inventory between FY2022 and FY2023).")
    assert body["answer"].startswith("Delta Corp — DPO, FY2023: 47.10 days."), body["answer"]  # 365*800/6,200


@pytest.mark.slow
async def test_a_standard_metric_averaged_over_stated_years(delta: Runtime) -> None:
    body = await ask_json(delta, "What is the FY2022 - FY2023 2 year average EBITDA % margin for Delta Corp?")
    answer = body["answer"]
    # FY2022 (960 + 250) / 8,100 = 14.938%; FY2023 (1,200 + 300) / 10,000 = 15.00%
    assert answer.startswith("Delta Corp — 2-year average EBITDA margin, FY2022–FY2023: 14.97% "
                             "(FY2022 14.94%; FY2023 15.00%)."), answer
    assert "Depreciation and amortization of property and equipment" in answer


@pytest.mark.slow
async def test_a_change_reads_the_prior_years_from_the_older_report(delta: Runtime) -> None:
    body = await ask_json(delta, "Has Delta Corp's operating margin improved between FY2021 and FY2023?")
    answer = body["answer"]
    assert answer.startswith("Delta Corp — operating margin increased by 3.43 percentage points: FY2021 8.57% → "
                             "FY2023 12.00%."), answer  # 600 / 7,000 → 1,200 / 10,000
    assert "- FY2021 → FY2022: increased by 3.28 percentage points (8.57% → 11.85%)" in answer  # 960 / 8,100
    assert {f["doc_name"] for f in body["facts"] if f["period_end"].startswith("2021")} == {"delta-2022.txt"}


@pytest.mark.slow
async def test_money_in_the_unit_asked_and_inputs_not_stated(delta: Runtime) -> None:
    body = await ask_json(delta, "What is Delta Corp's working capital in FY2023? Answer in USD millions.")
    assert body["answer"].startswith("Delta Corp — working capital, FY2023: $1.50 million."), body["answer"]
    body = await ask_json(delta, "What is Delta Corp's total assets in FY2023? Answer in USD millions.")
    assert "In millions, as asked: $10.00 million." in body["answer"], body["answer"]
    body = await ask_json(delta, "What is the FY2021 - FY2022 2 year average days inventory outstanding for Delta Corp?")
    answer = body["answer"]  # FY2021 needs the FY2020 inventory, which no report prints
    assert "Delta Corp — days inventory outstanding, FY2022: 62.05 days." in answer, answer  # 365 × 850 / 5,000
    assert "Not stated in the statements read: inventories (FY2020)." in answer, answer


@pytest.mark.slow
async def test_a_company_defined_measure_is_not_computed(delta: Runtime) -> None:
    body = await ask_json(delta, "What was Delta Corp's adjusted EBITDA for FY2023?")
    assert "Computed as" not in body["answer"], body["answer"]


@pytest.mark.slow
async def test_a_history_without_stated_years(delta: Runtime) -> None:
    body = await ask_json(delta, "Are Delta Corp's gross margins historically consistent?")
    answer = body["answer"]  # the routed report's years, gross profit computed as revenue − cost of sales
    assert answer.startswith("Delta Corp — gross margin ") and "percentage points: FY20" in answer, answer
    assert any(f["line_item"] == "Cost of sales" for f in body["facts"]), body["facts"]


@pytest.mark.slow
async def test_which_of_several_measures_is_highest(delta: Runtime) -> None:
    body = await ask_json(delta, "Among operating, investing and financing activities, which brought in the most cash "
                             "for Delta Corp in FY2023?")
    answer = body["answer"]  # operating 1,500; financing 100; investing −30 (thousands)
    assert answer.startswith("Delta Corp, FY2023: net cash from operating activities is the highest: "
                             "$1,500 thousand [1]."), answer
    assert answer.index("financing activities: $100 thousand") < answer.index("investing activities: −$30 thousand")


def _quarterly_filing(company: str, cash: float, prior_cash: float) -> str:
    """A 10-Q for the quarter ended June 30, 2024 with a condensed balance sheet against December 31, 2023."""
    def row(label: str, a: str, b: str) -> str:
        return f"{label:<60}{a:>16}{b:>16}"
    return "\n".join([
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION", "FORM 10-Q",
        "For the quarterly period ended June 30, 2024", company.upper(),
        "(Exact name of registrant as specified in its charter)", "", "Item 1. Financial Statements", "",
        company, "Condensed Consolidated Balance Sheets", "(in thousands)", "",
        row("", "June 30,", "December 31,"), row("", "2024", "2023"),
        row("Cash and cash equivalents", f"$ {cash:,.0f}", f"$ {prior_cash:,.0f}"),
        row("Total current assets", "3,500", "4,000"), row("Total assets", "$ 9,800", "$ 10,000"),
        row("Total current liabilities", "2,400", "2,500"), row("Total liabilities", "4,900", "5,000"),
        row("Total stockholders' equity", "4,900", "5,000"),
        row("Total liabilities and stockholders' equity", "$ 9,800", "$ 10,000"), "",
        "Notes to Condensed Consolidated Financial Statements", f"{company} makes things.", ""]) + "\n"


@pytest.mark.unit
def test_the_periods_a_question_names() -> None:
    def periods(text: str) -> list[tuple[int | None, int]]:
        return [(p.year, p.quarter) for p in read_question(text).periods]

    assert periods("Was there any drop in cash between FY 2023 and Q2 of FY2024?") == [(2023, 0), (2024, 2)]
    assert periods("How did inventories change from fiscal 2022 to the third quarter of fiscal 2023?") == \
        [(2022, 0), (2023, 3)]


@pytest.mark.slow
async def test_a_balance_between_a_year_end_and_a_quarter_end(pg_uri: str, tmp_path: Path) -> None:
    folder = tmp_path / "quarters"
    folder.mkdir()
    (folder / "delta-2023.txt").write_text(text_filing("Delta Corp", 2023, FY2023, FY2022))
    (folder / "delta-2024-q2.txt").write_text(_quarterly_filing("Delta Corp", 450, 700))
    async with runtime_over(pg_uri, "metrics_quarters", folder, ok=2) as rt:
        body = await ask_json(rt, "Was there any drop in Delta Corp's cash and cash equivalents between FY 2023 and "
                              "Q2 of FY2024?")
    answer = body["answer"]
    assert answer.startswith("Delta Corp — cash and cash equivalents decreased by $250 thousand (-35.7%) from "
                             "FY2023 to Q2 FY2024: $700 thousand at December 31, 2023 [1] → $450 thousand at "
                             "June 30, 2024 [2]."), answer
    assert {f["doc_name"] for f in body["facts"]} <= {"delta-2023.txt", "delta-2024-q2.txt"}
