"""Statement facts of the synthetic filings of ``kb bench latency``.

Each synthetic 10-K and 10-Q prints three statements (operations, balance sheet, cash flows) for its period
and the comparative one, in millions of U.S. dollars except per-share data, and carries the matching
``FactDraft`` rows as ``ingest.facts`` would read them. A company's figures are a function of the company
and the period alone, so the prior-year column of one report equals the current column of the report before
it, and a fiscal year's quarters add up to the year. 8-K press releases carry none.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kb.core.types import FactDraft
from kb.core.vocab import line_concept

SCALE = 1e6  # printed in millions
_QUARTER_SHARE = (0.23, 0.24, 0.25, 0.28)
_MONTH_WORDS = {3: "Three", 6: "Six", 9: "Nine", 12: "Twelve"}

# statement kind -> the section key of the synthetic tree it is printed in, its line labels in order
STATEMENT_SECTIONS: Mapping[str, str] = {"income": "s1", "balance": "s2", "cash_flow": "s3"}
_LINES: Mapping[str, tuple[str, ...]] = {
    "income": ("Net sales", "Cost of sales", "Gross profit", "Operating income", "Income before income taxes",
               "Provision for income taxes", "Net income", "Basic earnings per share", "Diluted earnings per share"),
    "balance": ("Cash and cash equivalents", "Total current assets", "Total assets", "Total current liabilities",
                "Long-term debt", "Total liabilities", "Total stockholders' equity",
                "Total liabilities and stockholders' equity"),
    "cash_flow": ("Net cash provided by operating activities", "Purchases of property and equipment",
                  "Net cash used in investing activities", "Net cash used in financing activities"),
}
_CONCEPTS: Mapping[str, str] = {label: line_concept(label) for lines in _LINES.values() for label in lines}
assert all(_CONCEPTS.values()), "every synthetic statement line names a vocabulary concept"
FACTS_PER_REPORT = 2 * sum(len(v) for v in _LINES.values())
"""Fact rows of one synthetic 10-K or 10-Q: every line in two period columns."""


class _Company(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def revenue(self) -> float: ...


@dataclass(frozen=True)
class Profile:
    """A company's ratios (fixed across years; each year's figures add a little noise)."""

    gross_margin: float
    operating_margin: float
    tax_rate: float
    shares_m: float  # weighted average shares, millions
    asset_turnover: float  # total assets / annual revenue
    leverage: float  # total liabilities / total assets
    cash_share: float  # cash / total assets
    current_assets_share: float
    capex_share: float  # of revenue


def profile(co: _Company, seed: int) -> Profile:
    r = random.Random(f"profile-{seed}-{co.name}")
    gross = r.uniform(0.2, 0.65)
    return Profile(gross_margin=gross, operating_margin=r.uniform(-0.08, gross * 0.5), tax_rate=r.uniform(0.15, 0.28),
                   shares_m=round(r.uniform(40, 1500), 1), asset_turnover=r.uniform(0.6, 2.4),
                   leverage=r.uniform(0.3, 0.85), cash_share=r.uniform(0.03, 0.25),
                   current_assets_share=r.uniform(0.25, 0.55), capex_share=r.uniform(0.02, 0.09))


@dataclass(frozen=True)
class Period:
    end: dt.date
    months: int  # 0 for a balance at ``end``

    @property
    def label(self) -> str:
        day = f"{self.end:%B} {self.end.day}, {self.end.year}"
        if self.months == 0:
            return day
        if self.months == 12:
            return f"Year Ended {day}"
        return f"{_MONTH_WORDS[self.months]} Months Ended {day}"


def quarter_end(year: int, quarter: int) -> dt.date:
    return dt.date(year, 3 * quarter, 30 if quarter in (2, 3) else 31)


def _noise(seed: int, co: _Company, what: str, low: float = 0.96, high: float = 1.04) -> float:
    return random.Random(f"noise-{seed}-{co.name}-{what}").uniform(low, high)


def annual_revenue(co: _Company, year: int, seed: int) -> float:
    """Revenue of fiscal ``year`` ($M): 6 % a year from the company's fiscal 2017 revenue, give or take 4 %."""
    return co.revenue * 1.06 ** (year - 2017) * _noise(seed, co, f"rev-{year}")


def flow_figures(co: _Company, p: Profile, period: Period, seed: int) -> dict[str, float]:
    """Income statement and cash flow figures ($M, per share in $) for a period of 3, 6, 9 or 12 months
    ending at a calendar quarter end."""
    year, last_q = period.end.year, (period.end.month - 1) // 3 + 1
    quarters = range(last_q - period.months // 3 + 1, last_q + 1)
    revenue = annual_revenue(co, year, seed) * sum(_QUARTER_SHARE[q - 1] for q in quarters)
    op_margin = p.operating_margin + (_noise(seed, co, f"margin-{year}", 0.0, 0.04) - 0.02)
    cost = revenue * (1 - p.gross_margin)
    operating = revenue * op_margin
    pretax = operating - revenue * 0.01
    tax = max(0.0, pretax * p.tax_rate)
    net = pretax - tax
    cfo = net + revenue * 0.06
    capex = revenue * p.capex_share
    return {"Net sales": revenue, "Cost of sales": cost, "Gross profit": revenue - cost, "Operating income": operating,
            "Income before income taxes": pretax, "Provision for income taxes": tax, "Net income": net,
            "Basic earnings per share": net / p.shares_m, "Diluted earnings per share": net / (p.shares_m * 1.02),
            "Net cash provided by operating activities": cfo, "Purchases of property and equipment": -capex,
            "Net cash used in investing activities": -capex * 1.1,
            "Net cash used in financing activities": -cfo * 0.4}


def balance_figures(co: _Company, p: Profile, at: dt.date, seed: int) -> dict[str, float]:
    """Balance sheet figures ($M) at a quarter end: the company's size grown to that date."""
    years = at.year - 2017 + at.month / 12
    assets = co.revenue * p.asset_turnover * 1.06 ** years * _noise(seed, co, f"assets-{at}")
    liabilities = assets * p.leverage * _noise(seed, co, f"lev-{at}", 0.97, 1.03)
    return {"Cash and cash equivalents": assets * p.cash_share * _noise(seed, co, f"cash-{at}", 0.8, 1.2),
            "Total current assets": assets * p.current_assets_share, "Total assets": assets,
            "Total current liabilities": liabilities * 0.45, "Long-term debt": liabilities * 0.4,
            "Total liabilities": liabilities, "Total stockholders' equity": assets - liabilities,
            "Total liabilities and stockholders' equity": assets}


def report_periods(doc_type: str, fy: int, fq: int | None) -> dict[str, tuple[Period, Period]]:
    """(current, comparative) column per statement: a 10-K's fiscal year and the year before; a 10-Q's
    quarter and the prior year's, its balance at the quarter end and the last year end, its cash flows
    year to date."""
    if doc_type == "10k":
        end, prior = dt.date(fy, 12, 31), dt.date(fy - 1, 12, 31)
        return {"income": (Period(end, 12), Period(prior, 12)), "balance": (Period(end, 0), Period(prior, 0)),
                "cash_flow": (Period(end, 12), Period(prior, 12))}
    assert fq is not None
    end, prior = quarter_end(fy, fq), quarter_end(fy - 1, fq)
    return {"income": (Period(end, 3), Period(prior, 3)),
            "balance": (Period(end, 0), Period(dt.date(fy - 1, 12, 31), 0)),
            "cash_flow": (Period(end, 3 * fq), Period(prior, 3 * fq))}


def _printed(value: float, per_share: bool) -> str:
    text = f"{abs(value):,.2f}" if per_share else f"{abs(value):,.1f}"
    return f"({text})" if value < 0 else text


@dataclass(frozen=True)
class StatementTable:
    """One printed statement: its text (title, scale, column header, lines) and its facts. The facts'
    ``page`` and ``node_id`` are filled in by ``located`` once the document's pages are laid out."""

    kind: str
    text: str
    facts: tuple[FactDraft, ...]

    def located(self, page: int, node_id: str) -> tuple[FactDraft, ...]:
        import msgspec

        return tuple(msgspec.structs.replace(f, page=page, node_id=node_id) for f in self.facts)


def statement_tables(co: _Company, doc_type: str, fy: int, fq: int | None, seed: int,
                     titles: Callable[[str], str]) -> dict[str, StatementTable]:
    """The statements a synthetic report prints, keyed by the section key they stand in (none for an 8-K).
    ``titles`` gives a section key's title."""
    if doc_type not in ("10k", "10q"):
        return {}
    p = profile(co, seed)
    out: dict[str, StatementTable] = {}
    for kind, (now, prior) in report_periods(doc_type, fy, fq).items():
        cols = [balance_figures(co, p, x.end, seed) if kind == "balance" else flow_figures(co, p, x, seed)
                for x in (now, prior)]
        key = STATEMENT_SECTIONS[kind]
        lines = [co.name, titles(key), "(in millions of U.S. dollars, except per share data)",
                 f"{'':<46}{now.label:>36}{prior.label:>36}"]
        facts: list[FactDraft] = []
        for label in _LINES[kind]:
            per_share = label.endswith("per share")
            printed = [_printed(c[label], per_share) for c in cols]
            cells = [f"$ {x}" for x in printed]
            source = f"{label:<46}{cells[0]:>36}{cells[1]:>36}"
            lines.append(source)
            for column, (period, text) in enumerate(zip((now, prior), printed, strict=True)):
                number = float(text.strip("()").replace(",", "")) * (-1 if text.startswith("(") else 1)
                facts.append(FactDraft(
                    statement=kind, line_item=label, concept=_CONCEPTS[label], period_end=period.end,
                    months=period.months, period_label=period.label, value=number * (1.0 if per_share else SCALE),
                    printed=text, scale=1.0 if per_share else SCALE, unit="USD/share" if per_share else "USD",
                    page=None, line=None, node_id="", source=" ".join(source.split()), column=column))
        out[key] = StatementTable(kind, "\n".join(lines), tuple(facts))
    return out
