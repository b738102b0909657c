"""The measure table: every ratio and metric the answers compute, one row each — name, label, formula over
vocabulary measures (``kb.core.vocab.CONCEPTS``), unit — and, beside it, how a measure a statement does not
print is had: computed from two it prints (``DERIVED``) or stated by another line (``STANDS_FOR``,
``STAND_INS``). How questions name them (English and Chinese) is
``kb.core.lexicon.METRIC_SYNONYMS``. One calculator evaluates them (``router.calc``): ``router.metrics`` for
one company's fiscal years, ``router.facts`` for each period the reports print, across companies and in
Chinese; a new measure is one row.
"""

from __future__ import annotations

import msgspec

from kb.core import lexicon as lx
from kb.core.vocab import CONCEPTS, StandsFor, measure_phrases
from router.question import MeasureRef


class Metric(msgspec.Struct, frozen=True):
    """A metric: its formula over vocabulary measures and its unit (how a question names it:
    ``kb.core.lexicon.METRIC_SYNONYMS``).

    Formula language: ``v(c)`` the measure in the year (``opt(c)``: 0 when the statements print no such line),
    ``avg(c)`` its mean over the year and the one before,
    ``chg(c)`` its change from the year before, ``abs(x)``, numbers, ``+ - * /`` and parentheses."""

    name: str
    label: str
    formula: str
    unit: str  # "%" | "x" | "days" | "money"


CATALOG: tuple[Metric, ...] = (
    Metric("dpo", "days payable outstanding",
           "365 * avg(accounts_payable) / v(cost_of_revenue)", "days"),
    Metric("dso", "days sales outstanding",
           "365 * avg(accounts_receivable) / v(revenue)", "days"),
    Metric("dio", "days inventory outstanding",
           "365 * avg(inventory) / v(cost_of_revenue)", "days"),
    Metric("ccc", "cash conversion cycle",
           "365 * avg(inventory) / v(cost_of_revenue) + 365 * avg(accounts_receivable) / v(revenue)"
           " - 365 * avg(accounts_payable) / v(cost_of_revenue)", "days"),
    Metric("inventory_turnover", "inventory turnover",
           "v(cost_of_revenue) / avg(inventory)", "x"),
    Metric("receivables_turnover", "receivables turnover",
           "v(revenue) / avg(accounts_receivable)", "x"),
    Metric("fixed_asset_turnover", "fixed asset turnover",
           "v(revenue) / avg(ppe_net)", "x"),
    Metric("asset_turnover", "total asset turnover",
           "v(revenue) / avg(total_assets)", "x"),
    Metric("quick_ratio", "quick ratio",
           "(v(cash) + opt(short_term_investments) + v(accounts_receivable)) / v(current_liabilities)", "x"),
    Metric("current_ratio", "current ratio", "v(current_assets) / v(current_liabilities)", "x"),
    Metric("total_debt", "total debt (short-term, current and long-term)",
           "v(long_term_debt) + opt(short_term_debt) + opt(current_debt)", "money"),
    Metric("debt_to_assets", "total liabilities to total assets", "v(total_liabilities) / v(total_assets) * 100", "%"),
    Metric("debt_to_equity", "total liabilities to equity", "v(total_liabilities) / v(total_equity)", "x"),
    Metric("working_capital", "working capital",
           "v(current_assets) - v(current_liabilities)", "money"),
    Metric("ebitda_margin", "EBITDA margin",
           "(v(operating_income) + v(depreciation_amortization)) / v(revenue) * 100", "%"),
    Metric("ebitda", "EBITDA", "v(operating_income) + v(depreciation_amortization)", "money"),
    Metric("effective_tax_rate", "effective tax rate",
           "v(income_tax) / v(pretax_income) * 100", "%"),
    Metric("interest_coverage", "interest coverage",
           "v(operating_income) / v(interest_expense)", "x"),
    Metric("free_cash_flow", "free cash flow", "v(cfo) - abs(v(capex))", "money"),
    Metric("capex_to_revenue", "capital expenditure as a % of revenue",
           "abs(v(capex)) / v(revenue) * 100", "%"),
    Metric("capital_intensity", "capital intensity (total assets ÷ revenue)",
           "v(total_assets) / v(revenue)", "x"),
    Metric("dividend_payout", "dividend payout ratio",
           "abs(v(dividends_paid)) / v(net_income) * 100", "%"),
    Metric("gross_margin", "gross margin",
           "v(gross_profit) / v(revenue) * 100", "%"),
    Metric("operating_margin", "operating margin",
           "v(operating_income) / v(revenue) * 100", "%"),
    Metric("net_margin", "net profit margin",
           "v(net_income) / v(revenue) * 100", "%"),
    Metric("return_on_assets", "return on assets",
           "v(net_income) / avg(total_assets) * 100", "%"),
    Metric("return_on_equity", "return on equity",
           "v(net_income) / avg(total_equity) * 100", "%"),
)
"""Standard definitions (averages over the year and the one before where analysts use them); a definition the
question states wins over these."""


METRIC_BY_NAME = {m.name: m for m in CATALOG}


def measure_names() -> dict[str, MeasureRef]:
    """Every name of a measure (lower case): the table's names and the lexicon's metric words, the lexicon's
    synonyms of vocabulary measures and the vocabulary's printed labels — what a question names a measure with."""
    names: dict[str, MeasureRef] = {}
    for name, words in lx.METRIC_SYNONYMS.items():
        for w in words:
            names.setdefault(w.lower(), MeasureRef(name, "metric"))
    for name, words in lx.MEASURE_SYNONYMS.items():
        for w in words:
            names.setdefault(w.lower(), MeasureRef(name))
    for phrase, name in measure_phrases():
        names.setdefault(phrase, MeasureRef(name))
    return names


# ------------------------------------------------------------------------ measures a statement may not print

DERIVED: dict[str, tuple[str, ...]] = {c.name: c.derived for c in CONCEPTS if c.derived}
"""Measures a statement may not print, computed as the difference of two it prints (the table's ``derived``)."""
STANDS_FOR: dict[str, StandsFor] = {c.name: c.stands_for for c in CONCEPTS if c.stands_for is not None}
"""A measure a statement without it states by another line (the table's ``stands_for``)."""
STAND_INS = {c.name: c.stand_in for c in CONCEPTS if c.stand_in}
"""For the metric calculator: a measure read from another line when a statement prints no line of its own."""
