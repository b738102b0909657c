"""Financial vocabulary in one place: the document types (how a document shows one, how a question names or
implies one, how a description names one) and how a document states its period (dates, fiscal year and
quarter patterns; the periods a question states are read by ``kb.core.periods``).

ingest/ reads documents with it and router/ reads questions with it; adding a document type is one
``DocType`` in ``DOC_TYPES``. Order in ``DOC_TYPES`` matters: a question naming two types is matched on the
first, and the ``FORM`` alternation follows it.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import re
from collections.abc import Mapping
from typing import Literal

import msgspec

from kb.core.lexicon import HAN, MONTH_NAMES, MONTHS, QUARTER_WORDS, ZH_PLACES, is_zh
from kb.core.measures import CONCEPTS
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
    r"\b(incorporated|inc|corp|corporation|company|co|plc|p\.l\.c|ltd|limited|llc|lp|l\.p|group|holdings|the|sa|ag|nv)"
    r"\b\.?",
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


PINYIN_MIN_LETTERS = 5
"""A pinyin name shorter than this ("anda") is too likely an English word or another name to find a company by."""
_PINYIN_MAX_READINGS = 8


def zh_short(core: str) -> str:
    """A Chinese core name (``company_core``) without the place it starts with ("深圳市德赛电池" → "德赛电池")."""
    place = next((p for p in ZH_PLACES if core.startswith(p) and len(core) > len(p) + 1), "")
    return re.sub(r"^[市省]", "", core[len(place):])


@functools.lru_cache(maxsize=50_000)
def pinyin_names(company: str) -> tuple[str, ...]:
    """How a question in Latin script may write a Chinese company: the pinyin of its short name (``zh_short``) run together,
    without tones ("洋河" → "yanghe", "珠江啤酒" → "zhujiangpijiu"), and of its first two characters when the
    name is longer and they are not a place ("Zhujiang Brewery": "zhujiang"); a character read several ways gives each reading ("长盈" →
    "changying", "zhangying"). Names of fewer than ``PINYIN_MIN_LETTERS`` letters are left out."""
    core = company_core(company)
    if not is_zh(core):
        return ()
    import pypinyin  # its dictionaries load in ~0.3 s: only where a Chinese company name is read (not in parsers)

    short = zh_short(core)
    chars = "".join(ch for ch in (core if len(short) <= 2 < len(core) else short) if HAN.match(ch))  # not "pijiu" alone
    out: list[str] = []
    prefix = chars[:2] if len(chars) > 3 and chars[:2] not in ZH_PLACES else ""  # "Chongqing" names a city
    for part in dict.fromkeys(p for p in (chars, prefix) if len(p) >= 2):
        usual = pypinyin.lazy_pinyin(part, style=pypinyin.Style.NORMAL, errors="ignore")  # read as a phrase
        every = pypinyin.pinyin(part, style=pypinyin.Style.NORMAL, heteronym=True, errors="ignore")
        if len(usual) != len(part) or len(every) != len(part):
            continue
        readings = [list(dict.fromkeys([u, *e[:2]])) for u, e in zip(usual, every, strict=True)]  # the commoner two
        for combo in itertools.islice(itertools.product(*readings), _PINYIN_MAX_READINGS):
            word = "".join(combo).replace("ü", "v")
            if len(word) >= PINYIN_MIN_LETTERS and word.isascii():
                out.append(word)
    return tuple(dict.fromkeys(out))


# --------------------------------------------------------------------------- financial concepts (facts)


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
    text = re.sub(r"\bper (?!common\b|ordinary\b|basic\b|diluted\b|class\b)\w+ (common|ordinary) share\b", r"per \1 share", text)  # "per 3M
    # common share": the company's name is no part of the line
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


SAME_LINE = 0.8
"""Two Chinese line names are one line printed two ways when this share of their character pairs is shared
(Dice): "支付给职工以及为职工支付的现金" and "支付给职工及为职工支付的现金" 0.87; "短期借款" and "长期借款" 0.67."""


def han_pairs(text: str) -> frozenset[str]:
    """A text's pairs of adjacent Han characters (one character alone: itself)."""
    han = "".join(HAN.findall(text))
    return frozenset(han[i:i + 2] for i in range(len(han) - 1)) or frozenset(han)


def same_line(a: str, b: str) -> bool:
    """Two line names (``line_key``) that name one printed line: equal, or Chinese sharing nearly all their
    character pairs (a line printed with 以及 in one report and 及 in another)."""
    if a == b:
        return True
    if not (is_zh(a) and is_zh(b)):
        return False
    pa, pb = han_pairs(a), han_pairs(b)
    return bool(pa and pb) and 2 * len(pa & pb) / (len(pa) + len(pb)) >= SAME_LINE


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
