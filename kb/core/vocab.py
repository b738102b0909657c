"""Financial vocabulary in one place: the document types (how a document shows one, how a question names or
implies one, how a description names one) and how a document states its period (dates, fiscal year and
quarter patterns; the periods a question states are read by ``kb.core.periods``).

ingest/ reads documents with it and router/ reads questions with it; adding a document type is one
``DocType`` in ``DOC_TYPES``. Order in ``DOC_TYPES`` matters: a question naming two types is matched on the
first, and the ``FORM`` alternation follows it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Literal

import msgspec

from kb.core.lexicon import MONTH_NAMES, MONTHS, QUARTER_WORDS, is_zh
from kb.core.periods import YEAR as _YEAR
from kb.core.periods import question_quarters as question_quarters  # re-exported: tests import them from here
from kb.core.periods import question_years as question_years

CoverDate = Literal["", "quarter_end", "year_end", "report_date"]
Cadence = Literal["", "annual", "quarterly"]


class DocType(msgspec.Struct, frozen=True):
    """One document type and the words that recognise, name and describe it (empty: none)."""

    name: str
    """The normalised ``doc_type`` metadata value ("10k")."""
    label: str = ""
    """How a description names it ("Form 10-K annual report"); empty: the name with spaces for underscores."""
    forms: tuple[str, ...] = ()
    """SEC form names on a cover page, the main one first ("10-K", "10-KT"); a space matches any whitespace."""
    cover_report: str = ""
    """The word before "REPORT PURSUANT TO SECTION 13 OR 15(d)" that shows the main form without a form line."""
    cover_date: CoverDate = ""
    """Which cover-page date sets the period: the quarter end, the fiscal year end or the date of report."""
    title_phrase: str = ""
    """How a title states the period end after the form ("for the fiscal year ended")."""
    headline: str = ""
    """A first line announcing it: "<Company> reports … results" (groups ``company`` and ``rest``; case-sensitive)."""
    head_words: str = ""
    """Words in the first lines that show it (case-insensitive; group 1, when present, the year)."""
    spellings: tuple[str, ...] = ()
    """Other spellings of the metadata value ("10-k", "annual report")."""
    question: str = ""
    """Words naming it in a question (case-insensitive)."""
    accepts: tuple[str, ...] = ()
    """Further metadata values a question naming it accepts (a 10-K question accepts an "annual_report")."""
    implied_by: str = ""
    """Question wording that implies it when no type is named (case-insensitive)."""
    cadence: Cadence = ""
    """A periodic report the router prefers for annual / quarter questions when no type is named."""

    @property
    def description_label(self) -> str:
        return self.label or self.name.replace("_", " ")


DOC_TYPES: tuple[DocType, ...] = (
    DocType("10k", label="Form 10-K annual report", forms=("10-K", "10-KT"), cover_report="ANNUAL",
            cover_date="year_end", title_phrase="for the fiscal year ended", spellings=("10-k",),
            question=r"\b10-?k\b|\bannual report\b|\bannual filing\b", accepts=("annual_report",), cadence="annual"),
    DocType("10q", label="Form 10-Q quarterly report", forms=("10-Q", "10-QT"), cover_report="QUARTERLY",
            cover_date="quarter_end", title_phrase="for the quarterly period ended", spellings=("10-q",),
            question=r"\b10-?q\b|\bquarterly report\b", accepts=("quarterly_report",), cadence="quarterly"),
    DocType("8k", label="Form 8-K current report", forms=("8-K",), cover_date="report_date", spellings=("8-k",),
            question=r"\b8-?k\b",
            implied_by=r"\b(?:shareholders? vote[ds]?|voted|annual meeting|special meeting|(?:appointed|resigned"
            r"|departure)\b.{0,40}\b(?:officer|director|ceo|cfo))\b"),
    DocType("earnings", label="earnings release",
            headline=r"^(?P<company>[A-Z][\w.&'’-]*(?:\s+[A-Z][\w.&'’-]*){0,4})\s+"
            r"(?:reports|announces|reported|posts|delivers)\b(?P<rest>.*\b(?:results|earnings)\b.*)$",
            question=r"\bearnings (?:release|call|report)\b", accepts=("earnings_release",),
            implied_by=r"\b(?:non[- ]?gaap|adjusted (?:ebitda|eps|earnings|operating (?:income|profit))|guidance"
            r"|constant currency|pass-?through costs?|exclud\w* (?:the )?(?:impact|effect)s? of (?:fx|foreign exchange"
            r"|currency))\b"),
    DocType("annual_report", label="annual report", head_words=rf"\bannual report\b(?:\s+(?:for\s+)?({_YEAR}))?",
            spellings=("annual report",), cadence="annual"),
    DocType("quarterly_report", spellings=("quarterly report", "季度报告"), cadence="quarterly"),
    DocType("semiannual_report", label="half-year report", spellings=("half-year report", "interim report",
                                                                      "半年度报告"), cadence=""),
    DocType("20f", label="Form 20-F annual report", forms=("20-F",), cover_date="year_end", spellings=("20-f",),
            cadence="annual"),
    DocType("40f", forms=("40-F",), cover_date="year_end"),
    DocType("6k", forms=("6-K",), cover_date="report_date"),
    DocType("s1", forms=("S-1",)),
    DocType("proxy", label="proxy statement", forms=("DEF 14A",)),
)
"""Every document type, in matching order."""

UNFORMED_ANNUAL = "annual_report"
"""The type of a document that states a fiscal year end but shows no SEC form."""

_BY_NAME: Mapping[str, DocType] = {t.name: t for t in DOC_TYPES}


def doc_type(name: str | None) -> DocType | None:
    """The declared type with this exact ``doc_type`` value (None: not declared)."""
    return _BY_NAME.get(name) if name else None


def description_label(value: str) -> str:
    """How a description names a ``doc_type`` value: its label, else the value with spaces."""
    declared = doc_type(value)
    return declared.description_label if declared else value.replace("_", " ")


# --------------------------------------------------------------------------- document side: SEC cover pages

_FORMS = [f for t in DOC_TYPES for f in t.forms]
FORM = re.compile(  # the form name on a line of its own, as on SEC cover pages
    r"^\s*FORM\s+(" + "|".join(f.replace(" ", r"\s*") for f in _FORMS) + r")(?:/A)?\s*(?:\(.*\))?\s*$", re.I | re.M
)
FORM_NAMES: Mapping[str, str] = {f.replace(" ", ""): f for f in _FORMS}
"""A matched form (upper case, spaces removed) → its display name ("DEF14A" → "DEF 14A")."""
_FORM_TYPES: Mapping[str, str] = {f.replace(" ", ""): t.name for t in DOC_TYPES for f in t.forms}
COVER_REPORT_FORMS: Mapping[str, str] = {t.cover_report: t.forms[0] for t in DOC_TYPES if t.cover_report}
"""The word before "REPORT PURSUANT TO SECTION 13…" → the form it shows ("ANNUAL" → "10-K")."""
REPORT_PURSUANT = re.compile(
    r"\b(" + "|".join(COVER_REPORT_FORMS) + r") REPORT PURSUANT TO SECTION 13 OR 15\s*\(d\)", re.I
)
HEADLINES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(t.headline), t.name) for t in DOC_TYPES if t.headline
)
HEAD_WORDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(t.head_words, re.I), t.name) for t in DOC_TYPES if t.head_words
)


def form_doc_type(form: str) -> str:
    """The ``doc_type`` of a matched form (upper case, spaces removed): "10-KT" → "10k"."""
    return _FORM_TYPES.get(form, form.lower().replace("-", ""))


def cover_date(value: str | None) -> CoverDate:
    """Which cover-page date sets the period of a ``doc_type`` value ("" when none or not declared)."""
    declared = doc_type(value)
    return declared.cover_date if declared else ""


# --------------------------------------------------------------------------- question side

QUESTION_TYPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(t.question, re.I), (t.name, *t.accepts, *t.spellings)) for t in DOC_TYPES if t.question
)
"""(words naming a type, the metadata values it accepts — its name first), in matching order."""
IMPLIED_TYPES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(t.implied_by, re.I), t.name) for t in DOC_TYPES if t.implied_by
)
ANNUAL_TYPES = frozenset(v for t in DOC_TYPES if t.cadence == "annual" for v in (t.name, *t.spellings))
QUARTERLY_TYPES = frozenset(v for t in DOC_TYPES if t.cadence == "quarterly" for v in (t.name, *t.spellings))

# --------------------------------------------------------------------------- financial statements


class StatementKind(msgspec.Struct, frozen=True):
    """One primary financial statement: how its page title reads and how a question names it."""

    name: str
    """The stored kind ("cash_flow")."""
    label: str
    """How traces and trees name it ("cash flow statement")."""
    title: str
    """The statement's page title, matched on the title line with everything but letters removed and lower
    case ("Consolidated Statement of Cash Flow s" → "consolidatedstatementofcashflows")."""
    question: str
    """Words naming it in a question (case-insensitive)."""
    measures: str = ""
    """Measures computed from its lines, which point a question at it when it names no statement
    (case-insensitive): common financial ratios, not company-specific line names."""


STATEMENTS: tuple[StatementKind, ...] = (
    StatementKind("comprehensive_income", "statement of comprehensive income",
                  title=r"statements?of(?:consolidated)?comprehensive(?:income|loss|earnings)"
                  r"|comprehensive(?:income|loss|earnings)statements?",
                  question=r"\bstatements? of comprehensive (?:income|loss)\b"),
    StatementKind("income", "income statement",
                  title=r"statements?of(?:consolidated)?(?:income|operations|earnings)|incomestatements?"
                  r"|statements?of(?:consolidated)?results?ofoperations",
                  question=r"\bincome statements?\b|\bstatements? of (?:consolidated )?(?:income|operations|earnings)\b"
                  r"|\bp ?& ?l\b|\bprofit and loss\b",
                  measures=r"\b(?:gross|operating|net(?: profit)?|ebitda) margins?\b|\bebitda\b|\binterest coverage\b"
                  r"|\bdays (?:payable|sales|inventory) outstanding\b|\binventory turnover\b"),
    StatementKind("balance", "balance sheet",
                  title=r"balancesheets?|statements?of(?:consolidated)?financial(?:position|condition)",
                  question=r"\bbalance sheets?\b|\bstatements? of financial (?:position|condition)\b",
                  measures=r"\b(?:quick|current|debt[- ]to[- ]equity|leverage) ratios?\b|\bworking capital\b"
                  r"|\bdays (?:payable|sales|inventory) outstanding\b|\breturn on (?:assets|equity)\b"),
    StatementKind("cash_flow", "cash flow statement",
                  title=r"statements?of(?:consolidated)?cashflows?|cashflows?statements?",
                  question=r"\bcash ?flows? statements?\b|\bstatements? of (?:consolidated )?cash ?flows?\b",
                  measures=r"\bcapital[- ]intensive\b|\bcapital expenditures?\b|\bcapex\b|\bfree cash flows?\b"
                  r"|\bdividend payout\b"),
    StatementKind("equity", "statement of equity",
                  title=r"statements?of(?:changesin)?(?:consolidated)?(?:share|stock)(?:holders|owners)s?equity"
                  r"|statements?of(?:changesin)?equity",
                  question=r"\bstatements? of (?:changes in )?(?:(?:share|stock)(?:holders|owners)['’]? )?equity\b"),
)
"""The statement kinds, in matching order (comprehensive income before income)."""

_STATEMENT_TITLE = re.compile(
    r"^[a-z]{0,40}?(?:condensed)?(?:consolidated)?(?:condensed)?(?:" + "|".join(
        f"(?P<{k.name}>{k.title})" for k in STATEMENTS) + r")[a-z]{0,60}$")
_STATEMENT_QUESTION = tuple((re.compile(k.question, re.I), k.name) for k in STATEMENTS)
_STATEMENT_MEASURES = tuple((re.compile(k.measures, re.I), k.name) for k in STATEMENTS if k.measures)
STATEMENT_LABELS: Mapping[str, str] = {**{k.name: k.label for k in STATEMENTS}, "key_figures": "key figures table"}
"""How traces and citations name a stored statement kind (``key_figures``: a Chinese report's 主要会计数据和财务指标)."""


def statement_title(line: str) -> str:
    """The statement kind a title line names ("NIKE, Inc. Consolidated Statements of Income" → "income"),
    else "". Up to 40 letters may stand before the title (the company) and 60 after it ("… and Subsidiary
    Companies", "(Unaudited)"); a line with digits (a contents entry with its page number) or over 100
    characters names none."""
    if len(line) > 100 or re.search(r"\d", line):
        return ""
    m = _STATEMENT_TITLE.match(re.sub(r"[^a-z]", "", line.lower()))
    return next((k for k, v in m.groupdict().items() if v), "") if m else ""


def question_statements(question: str) -> frozenset[str]:
    """The statement kinds a question names ("… shown in the cash flow statement" → {"cash_flow"}), else those
    its measures are computed from ("quick ratio" → {"balance"})."""
    found = set()
    for pattern, name in _STATEMENT_QUESTION:
        if pattern.search(question):
            found.add(name)
    if "comprehensive_income" in found and not re.search(r"(?i)\bincome statements?\b|\bp ?& ?l\b", question):
        found.discard("income")  # "statement of comprehensive income" names one statement, not two
    if not found:  # "quick ratio", "gross margin", "capital expenditure": the statements they are computed from
        found = {name for pattern, name in _STATEMENT_MEASURES if pattern.search(question)}
    return frozenset(found)


# --------------------------------------------------------------------------- period words

_QW = "|".join(QUARTER_WORDS)

DATE = r"((?:" + "|".join(m[:3] for m in MONTH_NAMES) + rf")[a-z]*)\.?\s+(\d{{1,2}})\s*,?\s*({_YEAR})"
"""A written date ("Sept. 30, 2023"): groups month, day, year."""
DATE_RE = re.compile(DATE, re.I)
FISCAL_YEAR_ENDED = re.compile(r"for the fiscal year ended:?\s*" + DATE, re.I)
QUARTER_ENDED = re.compile(r"for the quarterly period ended:?\s*" + DATE, re.I)
DATE_OF_REPORT = re.compile(r"date of report[^:]{0,60}:\s*" + DATE, re.I)

YTD_QUARTERS: Mapping[str, int] = {
    "three": 1, "six": 2, "nine": 3, "3": 1, "6": 2, "9": 3, "thirteen": 1, "twenty-six": 2, "thirty-nine": 3,
    "13": 1, "26": 2, "39": 3,
}
"""A statement column's span ("Nine Months Ended", "26 weeks ended") → the fiscal quarter it reaches."""
YTD = re.compile(r"\b(" + "|".join(YTD_QUARTERS) + r")[- ](months|weeks)\s+ended", re.I)
FISCAL_QUARTER = re.compile(
    rf"\b({_QW}) (?:fiscal )?quarter (?:of )?fiscal(?: year)? ({_YEAR})\b"
    rf"|\bfiscal(?: year)? ({_YEAR}) ({_QW}) quarter\b"
    r"|\bQ([1-4])\s*(?:FY|fiscal\s*)'?(\d{2}(?:\d{2})?)\b",
    re.I,
)
FISCAL_YEAR_WORDS = re.compile(rf"\b(?:fiscal(?: year)?|FY)\s*'?({_YEAR})\b", re.I)
YEAR = re.compile(rf"\b({_YEAR})\b")
QUARTER_NAMED = re.compile(rf"\b({_QW}) quarter\b|\bQ([1-4])\b", re.I)
"""A quarter in a headline: group 1 the word, group 2 the digit."""


def parse_date(month: str, day: str, year: str) -> dt.date | None:
    """The date of a written month (name or abbreviation), day and year; None when invalid."""
    m = MONTHS.get(month.lower()[:3] if month.lower() not in MONTHS else month.lower())
    if m is None:
        return None
    try:
        return dt.date(int(year), m, int(day))
    except ValueError:
        return None


def fiscal_quarter(text: str) -> tuple[int, int] | None:
    """(quarter, fiscal year) of the first "third quarter of fiscal 2023" / "fiscal 2023 third quarter" /
    "Q3 FY23" in the text."""
    m = FISCAL_QUARTER.search(text)
    if not m:
        return None
    if m.group(1):
        return QUARTER_WORDS[m.group(1).lower()], int(m.group(2))
    if m.group(3):
        return QUARTER_WORDS[m.group(4).lower()], int(m.group(3))
    year = int(m.group(6))
    return int(m.group(5)), year + 2000 if year < 100 else year


# --------------------------------------------------------------------------- Chinese reports

ZH_REPORT = re.compile(r"((?:19|20)\d{2})\s*年\s*(第?[一二三四1-4]\s*季度|半年度|年度|中期)\s*报告")
"""An A-share report's title: "2024年第一季度报告", "2023年年度报告", "2024年半年度报告"."""
ZH_CODE = re.compile(r"(?:证券|股票|公司)代码\s*[:：]\s*(\d{6})(?!\d)")
ZH_SHORT_NAME = re.compile(r"(?:证券|股票|公司|A股)简称\s*[:：]\s*(\*?(?:ST)?[\u4e00-\u9fffA-Za-z0-9]{2,12}?)"
                           r"(?=\s|公告|债券|证券|编号|[|,，;；]|$)")
ZH_FULL_NAME = re.compile(r"([\u4e00-\u9fff（）()]{2,40}?(?:股份有限公司|有限责任公司|有限公司))")
ZH_CORP_SUFFIX = re.compile(r"(?:集团)?(?:股份有限公司|有限责任公司|有限公司|股份公司|集团公司|股份|集团|公司)$")


def zh_report_period(text: str) -> tuple[int, int, str] | None:
    """(fiscal year, quarter (0 for a year), ISO period end) of a Chinese report title in ``text``."""
    m = ZH_REPORT.search(text)
    if not m:
        return None
    year, span = int(m.group(1)), re.sub(r"\s|第", "", m.group(2))
    quarter = {"一季度": 1, "1季度": 1, "二季度": 2, "2季度": 2, "三季度": 3, "3季度": 3, "四季度": 4,
               "4季度": 4, "半年度": 2, "中期": 2}.get(span, 0)
    month = {1: 3, 2: 6, 3: 9, 4: 12}.get(quarter, 12)
    end = dt.date(year, month, 30 if month in (6, 9) else 31)
    return year, quarter, end.isoformat()


# --------------------------------------------------------------------------- company names

CORP_SUFFIX = re.compile(
    r"\b(incorporated|inc|corp|corporation|company|co|plc|ltd|limited|llc|lp|l\.p|group|holdings|the|sa|ag|nv)\b\.?",
    re.I,
)
"""Legal-form words (and "The") that a question may leave out of a company's name."""
STATE_SUFFIX = re.compile(r"[\\/][A-Za-z]{2}[\\/]")
"""EDGAR's state of incorporation after a name: "FOO CORP \\DE\\", "BAR INC /NV/"."""


def company_core(name: str) -> str:
    """A company name without legal forms, state suffix, case and punctuation: "The Arena Group Holdings, Inc."
    → "arena", "江苏洋河酒厂股份有限公司" → "江苏洋河酒厂", "洋河股份" → "洋河"; the key two spellings of one
    company share."""
    name = ZH_CORP_SUFFIX.sub("", re.sub(r"^\*?ST", "", name.strip())) if is_zh(name) else name
    text = re.sub(r"\s+and (?:its )?subsidiaries\b.*$", "", STATE_SUFFIX.sub(" ", name), flags=re.I)
    return " ".join(re.sub(r"[^0-9a-z\u4e00-\u9fff]+", " ", CORP_SUFFIX.sub(" ", text).lower()).split())


# --------------------------------------------------------------------------- financial concepts (facts)


class StandsFor(msgspec.Struct, frozen=True):
    """A line that states a measure a document does not print: ``other``, when the document prints none of
    ``unless`` either; ``note`` says so beside the line item. A company without discontinued operations prints
    no "income from continuing operations" (its net income is that); a fund that presents no cash flow statement
    states its cash at the period end on its balance sheet; a balance sheet that classifies nothing as current
    (funds, real estate companies) owes all its liabilities as one total."""

    other: str
    note: str
    unless: tuple[str, ...] = ()


class Concept(msgspec.Struct, frozen=True):
    """One measure stored as a fact: how statement lines print it and how a question names it.

    ``printed`` are statement line labels after ``concept_label`` normalisation (lower case, "(loss)",
    "(deficit)", "net of …", footnote marks and punctuation removed), matched whole; ``chinese`` the Chinese
    line labels, matched whole after removing spaces and a leading "其中：" / "一、" / "加：". ``asked`` are
    extra words a question may use (matched case-insensitively as words). ``kinds`` are the statements the
    line may stand on (a "Cash and cash equivalents" line of a cash flow statement is not the balance).
    ``unit``: "money", "per_share" or "shares". ``flow``: a measure over a period (income, cash flow) rather
    than a balance at a date.
    """

    name: str
    label: str
    printed: tuple[str, ...]
    chinese: tuple[str, ...] = ()
    asked: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ("income",)
    unit: str = "money"
    flow: bool = True
    derived: tuple[str, ...] = ()
    """When no statement prints it: the difference of these two measures (cited to both)."""
    stands_for: StandsFor | None = None
    """When no statement prints it: the line that states it, said beside the figure."""
    stand_in: str = ""
    """For the metric calculator: the measure read when a statement prints no line of its own."""


_IS = ("income", "comprehensive_income")
_BS = ("balance",)
_CF = ("cash_flow",)

CONCEPTS: tuple[Concept, ...] = (
    Concept("revenue", "revenue", (
        "revenue", "revenues", "total revenue", "total revenues", "net revenue", "net revenues", "total net revenue",
        "total net revenues", "net sales", "total net sales", "sales", "net sales and revenue", "operating revenues",
        "total operating revenues", "revenues net", "revenue net", "sales net", "net revenue total",
        "total revenues net", "revenue from contracts with customers", "total sales"),
        ("营业总收入", "营业收入"), ("revenue", "revenues", "sales", "net sales", "turnover", "top line"), _IS),
    Concept("cost_of_revenue", "cost of revenue", (
        "cost of revenue", "cost of revenues", "cost of sales", "cost of goods sold", "total cost of revenue",
        "total cost of revenues", "total cost of sales", "cost of products sold"),
        ("营业成本",), ("cogs",), _IS),
    Concept("gross_profit", "gross profit", ("gross profit", "gross margin", "gross profit loss", "gross loss"),
            ("毛利",), (), _IS,
            derived=("revenue", "cost_of_revenue")),
    Concept("operating_expenses", "total operating expenses", (
        "total operating expenses", "total operating costs and expenses", "total costs and expenses",
        "operating expenses total", "total expenses"), ("营业总成本",), ("operating expenses",), _IS),
    Concept("rd_expense", "research and development expense", (
        "research and development", "research and development expenses", "research and development expense"),
        ("研发费用", "研发支出"), ("r&d",), _IS),
    Concept("sga_expense", "selling, general and administrative expense", (
        "selling general and administrative", "selling general and administrative expenses",
        "selling general and administrative expense", "sg a"), (), ("sg&a",), _IS),
    Concept("admin_expense", "general and administrative expense", (
        "general and administrative", "general and administrative expenses", "general and administrative expense",
        "administrative expenses", "administrative"), ("管理费用",), ("administrative expenses",), _IS),
    Concept("selling_expense", "selling expense", ("selling expenses", "selling and marketing",
                                                   "sales and marketing", "selling"),
            ("销售费用",), (), _IS),
    Concept("operating_income", "operating income", (
        "operating income", "income from operations", "operating profit", "operating loss", "loss from operations",
        "total operating income", "operating income loss", "income loss from operations",
        "operating loss from continuing operations", "operating income from continuing operations",
        "income from continuing operations before interest and taxes"),
        ("营业利润",), ("operating profit", "operating income", "ebit"), _IS),
    Concept("interest_expense", "interest expense", ("interest expense", "interest expense net"),
            ("利息费用",), (), _IS),
    Concept("pretax_income", "income before income taxes", (
        "income before income taxes", "income before taxes", "loss before income taxes",
        "income before provision for income taxes", "income loss before income taxes", "pretax income",
        "income before income tax", "loss before income tax", "earnings before income taxes",
        "loss from continuing operations before income taxes", "income from continuing operations before income taxes",
        "income loss from continuing operations before income taxes", "earnings before income tax expense",
        "income before income tax expense", "loss before income tax expense", "loss before provision for income taxes",
        "income loss before provision for income taxes", "loss before income taxes and equity in losses"),
        ("利润总额",), ("pre-tax income", "pretax income", "profit before tax"), _IS),
    Concept("income_tax", "income tax expense", (
        "income tax expense", "provision for income taxes", "income taxes", "income tax provision",
        "income tax benefit", "provision for benefit from income taxes", "income tax expense benefit",
        "benefit from income taxes", "provision benefit for income taxes"),
        ("所得税费用",), ("tax expense",), _IS),
    Concept("net_income_continuing", "net income from continuing operations", (
        "income from continuing operations", "net income from continuing operations",
        "loss from continuing operations", "net loss from continuing operations",
        "income from continuing operations net of tax", "net income loss from continuing operations"),
        ("持续经营净利润",), ("profit from continuing operations",), _IS,
            stands_for=StandsFor("net_income", "no discontinued operations line printed: net income")),
    Concept("net_income", "net income", (
        "net income", "net loss", "net earnings", "net income loss", "net loss income", "net profit",
        "net loss and comprehensive loss", "net income and comprehensive income", "net loss for the period",
        "net loss for the year", "net income for the year", "net income for the period",
        "net income including noncontrolling interest", "net income including noncontrolling interests",
        "net income including non controlling interests", "net loss including noncontrolling interests",
        "consolidated net income", "net income loss including noncontrolling interests"),
        ("净利润",), ("net income", "net profit", "net loss", "profit", "earnings", "bottom line"), (*_IS, "cash_flow"),
            stand_in="net_income_parent"),
    Concept("net_income_parent", "net income attributable to the parent", (),
            ("归属于母公司所有者的净利润", "归属于母公司股东的净利润"), ("attributable to",), _IS),
    Concept("eps_basic", "basic earnings per share", (
        "basic", "basic earnings per share", "basic net income per share", "basic net loss per share",
        "earnings per share basic", "net income per share basic", "net loss per share basic",
        "basic earnings loss per share", "basic income per share", "basic loss per share"),
        ("基本每股收益",), ("basic eps", "basic earnings per share"), _IS, "per_share"),
    Concept("eps_diluted", "diluted earnings per share", (
        "diluted", "diluted earnings per share", "diluted net income per share", "diluted net loss per share",
        "earnings per share diluted", "net income per share diluted", "net loss per share diluted",
        "diluted earnings loss per share", "diluted income per share", "diluted loss per share"),
        ("稀释每股收益",), ("diluted eps", "diluted earnings per share"), _IS, "per_share"),
    Concept("weighted_shares_basic", "weighted average basic shares outstanding", (), (),
            ("weighted average shares", "weighted average shares outstanding", "weighted average basic shares",
             "weighted average number of shares", "basic weighted average shares"), _IS, "shares"),
    Concept("weighted_shares_diluted", "weighted average diluted shares outstanding", (), (),
            ("weighted average diluted shares", "diluted weighted average shares", "diluted shares outstanding"),
            _IS, "shares"),
    Concept("shares_outstanding", "shares outstanding", (
        "shares outstanding", "common shares outstanding", "number of shares outstanding",
        "shares of common stock outstanding", "total shares outstanding"), (),
        ("shares outstanding", "outstanding shares", "share count"), (*_IS, *_BS), "shares",
        flow=False,
            stands_for=StandsFor("weighted_shares_basic", "no period-end share count printed in the statements: "
                                 "weighted average basic shares")),
    Concept("cash", "cash and cash equivalents", (
        "cash and cash equivalents", "cash", "cash and equivalents", "cash and cash equivalents at carrying value"),
        ("货币资金",), ("cash and cash equivalents", "cash balance", "cash"), _BS, flow=False),
    Concept("short_term_investments", "short-term investments", (
        "short term investments", "short term marketable securities", "marketable securities",
        "marketable securities current", "current marketable securities", "short term investments current",
        "investments short term"),
        (), ("short-term investments", "marketable securities"), _BS, flow=False),
    Concept("accounts_receivable", "accounts receivable", (
        "accounts receivable", "accounts receivable net", "trade receivables", "trade accounts receivable",
        "receivables", "trade receivables net", "accounts receivable trade"),
        ("应收账款",), ("receivables",), _BS, flow=False),
    Concept("inventory", "inventories", ("inventories", "inventory", "inventories net", "inventory net",
                                         "total inventories", "total inventories net", "total inventory"),
            ("存货",), ("inventories", "inventory"), _BS, flow=False),
    Concept("current_assets", "total current assets", ("total current assets",), ("流动资产合计",),
            ("current assets",), _BS, flow=False),
    Concept("noncurrent_assets", "total non-current assets", (
        "total non current assets", "total noncurrent assets", "total long term assets", "total other assets"),
        ("非流动资产合计",), ("non-current assets", "noncurrent assets", "long-term assets"), _BS, flow=False,
            derived=("total_assets", "current_assets")),
    Concept("right_of_use_assets", "right-of-use assets", (
        "right of use assets", "operating lease right of use assets", "right of use assets operating leases",
        "operating lease right of use asset", "right of use asset"), ("使用权资产",), (), _BS, flow=False),
    Concept("ppe_net", "property, plant and equipment, net", (
        "property plant and equipment net", "property and equipment net", "total property plant and equipment net",
        "net property plant and equipment", "property plant and equipment total net", "net property and equipment"),
        ("固定资产",), ("ppe", "pp and e", "ppne", "net ppe", "net ppne", "fixed assets", "property plant and equipment"),
        _BS,
        flow=False),
    Concept("total_assets", "total assets", ("total assets",), ("资产总计", "资产合计"), ("total assets",),
            _BS, flow=False),
    Concept("accounts_payable", "accounts payable", (
        "accounts payable", "trade accounts payable", "accounts payable trade", "trade payables"),
        ("应付账款",), ("payables",), _BS, flow=False),
    Concept("other_current_liabilities", "other current liabilities", ("other current liabilities",),
            ("其他流动负债",), (), _BS, flow=False),
    Concept("current_liabilities", "total current liabilities", ("total current liabilities",),
            ("流动负债合计",), ("current liabilities",), _BS, flow=False,
            stands_for=StandsFor("total_liabilities", "an unclassified balance sheet (no current and non-current "
                                 "split): total liabilities", ("current_assets", "noncurrent_liabilities"))),
    Concept("short_term_debt", "short-term debt", (
        "short term debt", "short term borrowings", "short term notes payable", "commercial paper"),
        (), ("short-term debt", "short-term borrowings"), _BS, flow=False),
    Concept("current_debt", "current portion of long-term debt", (
        "current portion of long term debt", "current maturities of long term debt", "debt maturing within one year",
        "current portion of long term borrowings", "long term debt current portion", "long term debt current",
        "current portion of long term debt and finance leases"),
        (), ("current portion of long-term debt",), _BS, flow=False),
    Concept("long_term_debt", "long-term debt", (
        "long term debt", "long term debt net of current portion", "long term debt less current portion",
        "long term borrowings", "long term debt net", "notes payable net of current portion",
        "long term notes payable", "mortgage and other indebtedness", "mortgages and other indebtedness",
        "mortgage notes payable", "mortgages payable", "mortgage loans payable", "mortgages and notes payable",
        "mortgage notes payable net", "mortgages payable net"),
        ("长期借款",), ("long-term borrowings", "long-term debt"), _BS, flow=False),
    Concept("noncurrent_liabilities", "total non-current liabilities", (
        "total non current liabilities", "total noncurrent liabilities", "total long term liabilities"),
        ("非流动负债合计",), ("non-current liabilities", "noncurrent liabilities", "long-term liabilities"),
        _BS, flow=False,
            derived=("total_liabilities", "current_liabilities")),
    Concept("total_liabilities", "total liabilities", ("total liabilities",), ("负债合计",),
            ("total liabilities", "liabilities"), _BS, flow=False,
            derived=("liabilities_and_equity", "total_equity")),
    Concept("share_capital", "share capital", ("common stock", "share capital", "common shares"),
            ("股本", "实收资本或股本", "实收资本"), ("share capital", "common stock"), _BS, flow=False),
    Concept("retained_earnings", "retained earnings", (
        "retained earnings", "accumulated deficit", "retained earnings accumulated deficit",
        "accumulated deficit retained earnings"), ("未分配利润",), ("accumulated deficit",), _BS, flow=False),
    Concept("total_equity", "total equity", (
        "total stockholders equity", "total shareholders equity", "total equity", "total stockholders deficit",
        "total shareholders deficit", "total stockholders equity deficit", "total partners capital",
        "total owners equity", "total members equity", "total net assets", "net assets",
        "total stockholders deficit equity", "total equity deficit", "total deficit",
        "total shareholders equity deficit"),
        ("所有者权益合计", "股东权益合计", "所有者权益或股东权益合计", "净资产"),
        ("equity", "owners' equity", "shareholders' equity", "stockholders' equity", "net assets", "book value"),
        _BS, flow=False),
    Concept("liabilities_and_equity", "total liabilities and equity", (
        "total liabilities and stockholders equity", "total liabilities and shareholders equity",
        "total liabilities and equity", "total liabilities and stockholders deficit",
        "total liabilities and partners capital", "total liabilities and owners equity",
        "total liabilities and stockholders equity deficit", "total liabilities and shareholders deficit",
        "total liabilities and members equity", "total liabilities and net assets",
        "total liabilities and deficit"),
        ("负债和所有者权益总计", "负债和股东权益总计", "负债和所有者权益或股东权益总计"),
        ("total liabilities and equity",), _BS, flow=False),
    Concept("cfo", "net cash from operating activities", (
        "net cash provided by operating activities", "net cash used in operating activities",
        "net cash provided by used in operating activities", "net cash used in provided by operating activities",
        "net cash from operating activities", "cash provided by operating activities",
        "net cash flows from operating activities", "net cash flow from operating activities",
        "cash flows from operating activities", "net cash provided by operations", "cash provided by operations",
        "cash provided by operating activities", "net cash provided by operating activities total"),
        ("经营活动产生的现金流量净额",), ("operating cash flow", "cash flow from operations",
                                  "cash from operations", "operating activities"), _CF),
    Concept("cfi", "net cash from investing activities", (
        "net cash provided by investing activities", "net cash used in investing activities",
        "net cash provided by used in investing activities", "net cash used in provided by investing activities",
        "net cash from investing activities", "cash used in investing activities",
        "net cash flows from investing activities", "net cash flow from investing activities",
        "cash flows from investing activities", "cash provided by investing activities",
        "cash used by investing activities"),
        ("投资活动产生的现金流量净额",), ("investing activities", "investing cash flow"), _CF),
    Concept("cff", "net cash from financing activities", (
        "net cash provided by financing activities", "net cash used in financing activities",
        "net cash provided by used in financing activities", "net cash used in provided by financing activities",
        "net cash from financing activities", "cash provided by financing activities",
        "net cash flows from financing activities", "net cash flow from financing activities",
        "cash flows from financing activities", "cash provided by financing activities",
        "cash used by financing activities"),
        ("筹资活动产生的现金流量净额",), ("financing activities", "financing cash flow"), _CF),
    Concept("capex", "capital expenditure", (
        "purchases of property and equipment", "purchase of property and equipment",
        "purchases of property plant and equipment", "purchase of property plant and equipment",
        "capital expenditures", "additions to property and equipment", "additions to property plant and equipment",
        "payments for property and equipment", "acquisition of property and equipment",
        "purchases of fixed assets", "purchase of fixed assets", "capital expenditure"),
        ("购建固定资产、无形资产和其他长期资产支付的现金",), ("capex", "capital expenditure", "capital expenditures"), _CF),
    Concept("depreciation_amortization", "depreciation and amortization", (
        "depreciation and amortization", "depreciation amortization and impairment", "depreciation",
        "depreciation and amortization expense", "depreciation depletion and amortization",
        "depreciation amortization and depletion", "depreciation and amortization of property and equipment",
        "depreciation of property plant and equipment"),
        (), ("d and a", "depreciation and amortization"), _CF + _IS),
    Concept("dividends_paid", "dividends paid", (
        "dividends paid", "cash dividends paid", "dividends paid to shareholders", "dividends paid to stockholders",
        "payments of dividends", "payment of dividends", "dividends paid on common stock",
        "cash dividends paid to shareholders", "cash dividends paid to stockholders"),
        (), ("dividends paid",), _CF),
    Concept("net_change_in_cash", "net change in cash", (
        "net increase decrease in cash and cash equivalents", "net decrease increase in cash and cash equivalents",
        "net increase in cash and cash equivalents", "net decrease in cash and cash equivalents",
        "net change in cash and cash equivalents", "net increase decrease in cash",
        "net decrease in cash", "net increase in cash", "net change in cash",
        "net increase decrease in cash cash equivalents and restricted cash",
        "net decrease increase in cash cash equivalents and restricted cash",
        "net increase in cash cash equivalents and restricted cash",
        "net decrease in cash cash equivalents and restricted cash",
        "net change in cash cash equivalents and restricted cash", "net increase in cash and equivalents",
        "net decrease in cash and equivalents", "net change in cash and equivalents"),
        ("现金及现金等价物净增加额",), ("net increase in cash", "net decrease in cash", "change in cash"), _CF),
    Concept("cash_begin", "cash at beginning of period", (
        "cash and cash equivalents beginning of period", "cash and cash equivalents beginning of year",
        "cash beginning of period", "cash beginning of year", "cash and cash equivalents at beginning of period",
        "cash and cash equivalents at beginning of year", "cash at beginning of period", "cash at beginning of year",
        "cash cash equivalents and restricted cash beginning of period",
        "cash cash equivalents and restricted cash beginning of year",
        "cash cash equivalents and restricted cash at beginning of period",
        "cash cash equivalents and restricted cash at beginning of year",
        "cash and restricted cash beginning of period", "cash and restricted cash beginning of year",
        "beginning of period", "beginning of year", "cash and cash equivalents beginning of the period",
        "cash and cash equivalents beginning of the year", "cash and equivalents beginning of year",
        "cash and equivalents beginning of period", "cash and equivalents at beginning of year"),
        ("期初现金及现金等价物余额", "加：期初现金及现金等价物余额"),
        ("beginning balance of cash", "cash at the beginning", "beginning cash", "beginning of the period",
         "beginning of period", "beginning of year", "beginning balance"), _CF),
    Concept("cash_end", "cash at end of period", (
        "cash and cash equivalents end of period", "cash and cash equivalents end of year",
        "cash end of period", "cash end of year", "cash and cash equivalents at end of period",
        "cash and cash equivalents at end of year", "cash at end of period", "cash at end of year",
        "cash cash equivalents and restricted cash end of period",
        "cash cash equivalents and restricted cash end of year",
        "cash cash equivalents and restricted cash at end of period",
        "cash cash equivalents and restricted cash at end of year",
        "cash and restricted cash end of period", "cash and restricted cash end of year",
        "end of period", "end of year", "cash and cash equivalents end of the period",
        "cash and cash equivalents end of the year", "cash and equivalents end of year",
        "cash and equivalents end of period", "cash and equivalents at end of year"),
        ("期末现金及现金等价物余额", "现金及现金等价物余额", "现金及现金等价物期末余额"),
        ("cash at end of period", "cash at the end", "ending cash", "end of period", "end of year",
         "ending balance"), _CF,
            stands_for=StandsFor("cash", "no end-of-period line of a cash flow statement: the balance sheet's "
                                 "cash")),
)
"""The concept vocabulary, in question-matching order (longer, more specific names before shorter ones)."""

CONCEPT_BY_NAME: Mapping[str, Concept] = {c.name: c for c in CONCEPTS}
_NOISE = re.compile(
    r"\((?:loss|losses|deficit|income|gain|benefit|decrease|increase|used in|provided by|used|provided|pp ?& ?e"
    r"|note \w+|notes? [\d, and]+"
    r"|unaudited|restated|in thousands|in millions)\)"
    r"|\bnote \d+\w?\b|\(\w\)$|\*+|\bof which\b|^less[: ]|^add[: ]|^plus[: ]",
    re.I)


def concept_label(label: str) -> str:
    """A printed line label reduced for matching: "Net (loss) income, net of tax (Note 4):" →
    "net income net of tax"; "Cash and cash equivalents – end of period" → "cash and cash equivalents end of
    period"."""
    text = _NOISE.sub(" ", label.strip().lower().replace("’", "'"))
    text = re.sub(r"['‘]s?\b", "", text)
    text = re.sub(r",?\s*(?:net of|less allowances? (?:of|for))\b.*$", " net", text)
    text = re.sub(r"[^a-z0-9]+", " ", text)
    return " ".join(text.split())


_ZH_LINE_NOISE = re.compile(r"^(?:其中[:：]|加[:：]|减[:：]|[一二三四五六七八九十]+、|[（(][一二三四五六七八九十\d]+[）)]|\d+[.、])|"
                            r"[（(][^）)]*[）)]$|[\s:：]")


def line_key(label: str) -> str:
    """A printed line item as a question would name it: Chinese without its numbering, "其中：" and the
    trailing note ("（亏损以“－”号填列）"); English lower case without punctuation."""
    if is_zh(label):
        previous = None
        while previous != label:
            previous, label = label, _ZH_LINE_NOISE.sub("", label)
        return re.sub(r"(?:小计|合计)$", "", label) if len(label) > 6 else label  # "经营活动现金流入小计"
    return concept_label(label)


_BY_PRINTED: Mapping[str, str] = {p: c.name for c in reversed(CONCEPTS) for p in c.printed}
_BY_CHINESE: Mapping[str, str] = {p: c.name for c in reversed(CONCEPTS) for p in c.chinese}
_ZH_PREFIX = re.compile(r"^(?:其中[:：]|[一二三四五六七八九十]+、|加[:：]|减[:：]|\d+\.|（[一二三四五六七八九十\d]+）)")


def line_concept(label: str) -> str:
    """The concept a statement line's label names ("Total stockholders' deficit" → "total_equity"), else ""."""
    if is_zh(label):
        text = re.sub(r"\s+|[（(][^）)]*[）)]$", "", label)
        return _BY_CHINESE.get(_ZH_PREFIX.sub("", text), "") or _BY_CHINESE.get(text, "")
    found = _BY_PRINTED.get(concept_label(label), "")
    if not found and (m := _HEAD.match(label)):  # "Common stock, $0.001 par value; 200,000,000 shares …"
        found = _BY_PRINTED.get(concept_label(m.group(1)), "")
    if not found and "(" in label:  # "Total liabilities and partners' capital (net asset value)"
        found = _BY_PRINTED.get(concept_label(re.sub(r"\([^)]*\)", " ", label)), "")
    if not found:
        found = next((name for pattern, name in _LABEL_PATTERNS if pattern.match(concept_label(label))), "")
    return found


_LABEL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^net (?:income|earnings|loss|income loss|loss income) attributable to (?!.*\b(?:non ?controlling|minority|participating|redeemable|preferred)\b)"
                r"(?:\w+ ){0,7}\w+$"), "net_income_parent"),
    (re.compile(r"^net (?:income|earnings|loss) including non ?controlling interests?$"), "net_income"),
    (re.compile(r"^(?:total |net )?(?:cash|cash flows?) (?:provided|used|generated|from|by|in|for|\s)*operating activities"
                r"(?: total)?$"), "cfo"),
    (re.compile(r"^(?:total |net )?(?:cash|cash flows?) (?:provided|used|generated|from|by|in|for|\s)*investing activities"
                r"(?: total)?$"), "cfi"),
    (re.compile(r"^(?:total |net )?(?:cash|cash flows?) (?:provided|used|generated|from|by|in|for|\s)*financing activities"
                r"(?: total)?$"), "cff"),
    (re.compile(r"^depreciation(?: and|,)? amortization(?: and \w+)?(?: of [a-z ]{3,60})?$"), "depreciation_amortization"),
    (re.compile(r"^(?:purchases?|acquisitions?|additions?|payments? for)(?: of)?(?: and (?:deposits on|additions to))?"
                r" property(?: plant)? and equipment$"), "capex"),
)
"""Printed labels that name a company or an asset list ("Net earnings attributable to Best Buy Co., Inc.
shareholders", "Depreciation and amortization of property, equipment and intangibles"), matched after
``concept_label`` normalisation when no whole label matches."""


_HEAD = re.compile(r"^([^,;(]{3,60})[,;(]\s*(?:net\b|par value|\$|no par|less\b|at cost|including|excluding|see note"
                   r"|\d[\d,.]* par value)", re.I)


# --------------------------------------------------------------------------- questions naming a concept

_NORM = re.compile(r"[^a-z0-9]+")
_QUOTED = re.compile(r"['‘’\"“”]([^'‘’\"“”]{3,80})['‘’\"“”]")


def _norm(text: str) -> str:
    text = text.lower().replace("’", "'").replace("'s ", " ").replace("&", " and ")
    return " " + " ".join(_NORM.sub(" ", text).split()) + " "


def _phrases() -> list[tuple[str, str]]:
    out = []
    for c in CONCEPTS:
        for p in (*c.printed, *c.asked, c.label):
            n = _norm(p).strip()
            if n and n not in ("basic", "diluted", "cash", "sales", "profit", "earnings", "liabilities", "equity", "depreciation",
                               "beginning of period", "end of period", "beginning of year", "end of year"):
                out.append((n, c.name))
        for p in c.chinese:
            out.append((p, c.name))
    return sorted(out, key=lambda x: -len(x[0]))


_PHRASES = _phrases()


def measure_phrases() -> list[tuple[str, str]]:
    """Every phrase a question may name a vocabulary concept with (normalised, longest first) and its concept."""
    return list(_PHRASES)
_EPS = re.compile(r"(?i)\b(?:earnings|income|loss) per share\b|\beps\b")


def question_concept(question: str) -> str:
    """The vocabulary measure a question asks for ("Which company has the highest 'Total Liabilities'?" →
    "total_liabilities"), preferring a quoted measure; the longest matching name wins; else ""."""
    for text in [*(m.group(1) for m in _QUOTED.finditer(question)), question]:
        found = _concept_in(text)
        if found:
            return found
    return ""


def _concept_in(text: str) -> str:
    text = re.sub(r"(?i)\((?:or )?(?:decrease|increase|loss|deficit|used in|provided by)\)", " ", text)
    if _EPS.search(text):
        return "eps_diluted" if re.search(r"(?i)\bdiluted\b", text) else "eps_basic"
    norm = _norm(text)
    if is_zh(text):
        return next((c for p, c in _PHRASES if not p.isascii() and p in text), "")
    best = next((c for p, c in _PHRASES if p.isascii() and f" {p} " in norm), "")
    if best == "cash" and re.search(r"(?i)\bbeginning\b", text):
        return "cash_begin"
    if best == "cash" and re.search(r"(?i)\bend of (?:the )?(?:period|year)\b", text):
        return "cash_end"
    if not best and re.search(r"(?i)\bcash (?:and cash equivalents )?balance\b|\bbalance of cash\b", text):
        return "cash"
    return best
