"""The periods a question states, read in one place.

``find_periods`` reads every period a question writes, each as a ``Mention`` with where it stands: a year
("2023", "FY2023", "fiscal year 2023", "FY23", "2023年", "23年"), a quarter ("Q3", "3Q", "third quarter",
"third fiscal quarter", "第三季度", "一季"), a quarter of a year ("Q3 2023", "Q3 of FY2024", "2Q23",
"2023年第一季度"), a date ("March 31, 2024", "2023年9月30日"; after "nine months ended" a nine-month span), a
range of years ("2021–2023", "between FY 2019 and 2021", "从2015年到2018年"), a list or span of quarters
("Q1, Q2 and Q3", "first and second quarters", "Q1-Q3 2023"), and a Chinese stated span (半年度, "1-3月": the
quarter it ends). Each *form* reads the whole question by itself, so mentions of different forms may cover the same
text; a reader takes the forms it reads:

- ``router.reading`` (the typed question) takes the reader's forms in order of precedence, the first to claim a
  piece of text keeping it, and decides what is its own (a quarter without a year, every year's Q1, a series);
- ``question_years`` / ``question_quarters``: the years and quarters a question states (routing priors,
  metadata conditions, "no period stated");

These readings differ where they always have, and the differences are kept, each one a field of ``Mention`` or
a spelling test in the view (see ``question_years``, ``question_quarters``).

Also here: what else a question's period wording says — a stated span (``stated_months``: "nine months",
前三季度), a written range (``states_range``), "latest" (``LATEST``), a fiscal period named (``FISCAL_MARK``),
compact forms written out (``normalize_periods``), period words removed from a topic (``PERIOD_MENTION``,
``ZH_PERIOD_MENTION``). The words themselves (months, quarter words, spans) are ``kb.core.lexicon`` data.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from typing import Literal

import msgspec

from kb.core import lexicon as lx

YEAR = r"(?:19|20)\d{2}"
"""A four-digit year, 1900–2099."""

_FY = r"(?:fy|fiscal(?:\s+year)?)"
_QW = "|".join(lx.QUARTER_WORDS)
_ZH = lx.ZH_QUARTER_NUMERALS
_ZH_QUARTER = rf"第?([{_ZH}1-4])\s*季度"
_Q = rf"(?:q([1-4])|([1-4])q|({_QW})(?:\s+|-)(?:fiscal\s+)?quarter|{_ZH_QUARTER}|([{_ZH}])季)"
"""One quarter: "q3", "3q", "third (fiscal) quarter", "third-quarter", "第三季度", "3季度", "三季" (groups: q digit,
digit q, word, Chinese quarter, Chinese short form)."""
_MONTH = "|".join(sorted(lx.MONTHS, key=len, reverse=True))

_QUARTER_YEAR = re.compile(
    rf"(?i){_FY}?\s*'?({YEAR})\s*(?:年度?|财年)?\s*(?:的)?\s*{_Q}|"
    rf"{_Q}\s*(?:of\s+|,\s*)?{_FY}?\s*'?({YEAR}|\d{{2}}(?=\b))|"
    rf"(?<!\d)(\d{{2}})\s*年\s*{_Q}")
_DATE = re.compile(rf"(?i)\b({_MONTH})\.?\s+(?:(\d{{1,2}}),?\s+)?({YEAR})\b|"
                   rf"({YEAR})\s*年\s*(\d{{1,2}})\s*月(?:末|底|\d{{1,2}}日)?")
_YEAR_RANGE = re.compile(rf"(?i)(?:from\s+|between\s+)?{_FY}?\s*({YEAR})\s*年?\s*"
                         rf"(?:-|–|—|~|to|through|thru|until|and|至|到)\s*{_FY}?\s*({YEAR})")
_QUARTER_SPAN = re.compile(rf"(?i)\bq([1-4])\s*(?:({YEAR})\s*)?(?:-|–|through|to|until)\s*q([1-4])\b(?:\s*({YEAR}))?")
_QUARTER_LIST = re.compile(rf"(?i)\bq([1-4])((?:\s*(?:,|and|&)\s*(?:q)?[1-4]\b)+)|"
                           rf"\b({_QW})((?:\s*(?:,|and|&)\s*(?:{_QW}))+)\s+(?:fiscal\s+)?quarters\b")
_LISTED = re.compile(rf"(?i)[1-4]|{_QW}")
_QUARTER = re.compile(rf"(?i){_Q}")
_YEAR_ALONE = re.compile(rf"(?i)\b{_FY}\s*'?({YEAR}|\d{{2}})\b|({YEAR})(?!\d)|"
                         r"(?<!\d)(\d{2})\s*年(?!\s*[-—–~至到])")
_ZH_SPAN = re.compile(rf"{_ZH_QUARTER}|([1-4])\s*[—–\-~至]\s*([3691２]|12)\s*月|(半年度|上半年|中期)")

_FIRST_THREE = ("前三季度", "前三个季度")
_YEAR_AFTER_FY = re.compile(r"(?i)\b(?:fy|fiscal|year)\Z")
_RANGE = re.compile(r"(?i)(?:季度|q[1-4]|quarter)[^,，。;；]{0,8}?(?:到|至|through|to|until|[-–—~])\s*(?:fy\s*)?"
                    rf"(?:\d{{2,4}}|q[1-4])|{YEAR}\s*年?\s*(?:到|至|through|to|until|[-–—~])\s*(?:fy\s*)?{YEAR}")

Form = Literal["quarter_year", "date", "year_range", "quarter_span", "quarter_list", "quarter", "year", "zh_span"]
FORMS: tuple[Form, ...] = ("quarter_year", "date", "year_range", "quarter_span", "quarter_list", "quarter", "year",
                           "zh_span")
"""The forms, in the reader's order of precedence (``zh_span`` is not the reader's)."""


class Mention(msgspec.Struct, frozen=True):
    """One period a question writes: its form, where it stands (``start``, ``end``: the form's match, leading
    "from"/"FY"/spaces included as the form reads them) and what it names."""

    form: Form
    start: int
    end: int
    year: int | None = None
    """The year (a range: its first end as written); None: none written."""
    quarter: int = 0
    """The quarter (0: none; a Chinese span: the quarter it ends, 0 when its end is no quarter end)."""
    months: int = 12
    """The span in months: 3 a quarter, 12 a year, 9 or 6 a year-to-date date or the stated span
    (``stated_months``) of a year or a range of years."""
    last: int | None = None
    """A range of years: its other end as written."""
    quarters: tuple[int, ...] = ()
    """A list of quarters, or a span's quarters from first to last (empty when its first is not before its last)."""
    fiscal: bool = False
    """Written with "FY", "fiscal" or 财年."""
    short: bool = False
    """The year is written with two digits ("FY23", "23年", "2Q23")."""
    ends: dt.date | None = None
    """A date's day ("the quarter ended July 29, 2023"); a month written alone, its last day ("June 2023")."""
    zh: bool = False
    """Written the Chinese way: a quarter ("第三季度", "三季"), a date ("2023年9月30日"), a Chinese span, a year
    followed by 年 ("2023年")."""
    word: bool = False
    """A year or quarter standing as a word of its own: no letter, digit or "_" runs into it, except that a year
    may follow "FY", "fiscal" or "year" directly ("FY2023")."""
    attached: bool = False
    """A year a digit or "." runs into from the left ("1.2023", "12023年"): part of a longer number."""
    to_date: bool = False
    """A quarter that is the end of 前三季度 (the first three quarters), not a quarter of its own."""


def _word_char(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")


def _edge(text: str, i: int) -> bool:
    """Whether a word boundary (regex ``\\b``) stands before ``text[i]``."""
    return _word_char(text, i - 1) != _word_char(text, i)


def _quarter(groups: tuple[str | None, ...]) -> int:
    """The quarter of the first group matched: a digit, a Chinese numeral or a quarter word."""
    q = next(g for g in groups if g)
    return int(q) if q.isdigit() else _ZH.index(q) + 1 if q in _ZH else lx.QUARTER_WORDS[q.lower()]


def _year(digits: str) -> int:
    return int(digits) if len(digits) == 4 else 2000 + int(digits)


def _fiscal(text: str) -> bool:
    low = text.lower()
    return "fy" in low or "fiscal" in low or "财年" in low


def stated_months(text: str) -> int:
    """The span a question states for its years, in months: 9 for "nine months" / "year to date" / 前三季度, 6
    for "first half" / 上半年 (``kb.core.lexicon.SPANS``), unless negated ("not the first half"); else 12."""
    for months, words in lx.SPANS.items():
        if months == 3:
            continue
        for w in words:
            i = text.find(w)
            if i < 0 or lx.NEGATED_SPAN.search(text[max(0, i - 12):i]):
                continue
            if "不要" not in text[i:i + 12] and "not" not in text[i:i + 12]:  # not negated after it either
                return months
    return 12


def states_range(text: str) -> bool:
    """Whether a range of periods is written: "2021 to 2023", "2015年到2018年", "Q1 to Q3", "第三季度到2024年"."""
    return _RANGE.search(text) is not None


def _quarter_years(text: str) -> list[Mention]:
    out = []
    for m in _QUARTER_YEAR.finditer(text):
        g = m.groups()
        if g[0]:
            year, quarter, short = int(g[0]), _quarter(g[1:6]), False
        elif g[11]:
            year, quarter, short = _year(g[11]), _quarter(g[6:11]), len(g[11]) == 2
        else:
            year, quarter, short = 2000 + int(g[12]), _quarter(g[13:18]), True
        out.append(Mention("quarter_year", m.start(), m.end(), year, quarter, 3, fiscal=_fiscal(m.group(0)),
                           short=short))
    return out


def _dates(text: str) -> list[Mention]:
    out = []
    for m in _DATE.finditer(text):
        month = lx.MONTHS[m.group(1).lower()] if m.group(1) else int(m.group(5))
        year = int(m.group(3) or m.group(4))
        before = text[max(0, m.start() - 40):m.start()]
        span = _span_before(before.lower())
        if span == 9 and month in (3, 6, 9) and _year_to_date(before.lower()):
            span = month  # "YTD through June 2023": six months
        if span in (6, 9, 12):
            quarter, months = 0, span
        elif span != 3 and month == 12:
            quarter, months = 0, 12
        else:
            quarter, months = (month - 1) // 3 + 1, 3
        day = m.group(2) or (re.search(r"(\d{1,2})\s*日", m.group(0)) or [None, None])[1]
        try:  # a month without its day ("the June 2023 quarter"): the month's last day
            ends = dt.date(year, month, int(day) if day else calendar.monthrange(year, month)[1])
        except ValueError:  # "February 30": no such day
            ends = None
        out.append(Mention("date", m.start(), m.end(), year, quarter, months, ends=ends, zh=bool(m.group(4))))
    return out


def _year_to_date(before: str) -> bool:
    """Whether the span words nearest before a date are year-to-date words (``lexicon.YEAR_TO_DATE``), not
    "the nine months ended" written after them."""
    ytd = max((m.end() for w in lx.YEAR_TO_DATE for m in re.finditer(rf"\b{re.escape(w)}\b", before)), default=-1)
    other = max((before.rfind(w) + len(w) for months, words in lx.SPANS.items() for w in words
                 if w not in lx.YEAR_TO_DATE and (len(w) > 3 or not w.isascii()) and w in before), default=-1)
    return ytd > other


def _span_before(before: str) -> int:
    """The span the words nearest before a date state ("the nine months ended", "the fiscal year ended",
    "the quarter ended"), 0 when none does."""
    best = (-1, 0, 0)  # (where the words end, their length, months): the nearest, then the longest
    for months, words in (*lx.SPANS.items(), (12, lx.YEAR_SPAN)):
        for w in words:
            if len(w) < 3 and w.isascii():  # "h1", "9m": a header's words
                continue
            if (i := before.rfind(w)) >= 0 and (len(w) > 3 or not w.isascii() or re.search(rf"\b{w}\b", before)):
                best = max(best, (i + len(w), len(w), months))  # "ytd" as a word of its own
    return best[2]


DAY_REACH = 7
"""How many days a report's period end may lie from a day a question writes and still be that period ("the quarter
ended July 30, 2022": a 52/53-week quarter ends on a Saturday near the month's end)."""
QUARTER_REACH = (dt.timedelta(days=190), dt.timedelta(days=62))
"""How far before and after a calendar quarter's end a fiscal quarter of that name may end: a fiscal year ending
in June names its first quarter (July–September) after the next calendar year; one ending in January its third
quarter (to October) after the calendar year it mostly falls in."""


def quarter_end(year: int, quarter: int) -> dt.date:
    """The last day of a calendar quarter."""
    return dt.date(year, 3 * quarter, 30 if quarter in (2, 3) else 31)


def spans_named(text: str) -> set[int]:
    """The spans within a year a text names: 3 ("three months", "the third quarter"), 6, 9 (``lexicon.SPANS``;
    short Latin forms such as "9m" and "h1" only as words of a header, not here)."""
    low = text.lower()
    named = {months for months, words in lx.SPANS.items() if months != 12
             and any(w in low for w in words if not w.isascii() or len(w) > 3)}
    return named | _dated_spans(text)


_BETWEEN_DATES = re.compile(r"\s*(?:-|–|—|to|through|thru)\s*$", re.I)


def _dated_spans(text: str) -> set[int]:
    """Spans written as two dates ("May 7, 2023 to June 3, 2023": one month), in whole months under a year."""
    out: set[int] = set()
    dates = list(_DATE.finditer(text))
    for a, b in zip(dates, dates[1:], strict=False):
        if not _BETWEEN_DATES.match(text[a.end():b.start()]) or not (a.group(2) and b.group(2)):
            continue
        try:
            first = dt.date(int(a.group(3)), lx.MONTHS[a.group(1).lower()], int(a.group(2)))
            last = dt.date(int(b.group(3)), lx.MONTHS[b.group(1).lower()], int(b.group(2)))
        except (ValueError, KeyError, TypeError):
            continue
        months = round((last - first).days / 30.44)
        if 0 < months < 12:
            out.add(months)
    return out


def question_dates(text: str) -> tuple[dt.date, ...]:
    """The whole dates a question writes ("July 1, 2023", "Dec 31, 2022"): a report ending on one answers it."""
    out = []
    for m in _DATE.finditer(text):
        if m.group(1) and m.group(2):
            try:
                out.append(dt.date(int(m.group(3)), lx.MONTHS[m.group(1).lower()], int(m.group(2))))
            except ValueError:
                continue
    return tuple(out)


def _year_ranges(text: str, months: int) -> list[Mention]:
    return [Mention("year_range", m.start(), m.end(), int(m.group(1)), months=months, last=int(m.group(2)),
                    fiscal=_fiscal(m.group(0)))
            for m in _YEAR_RANGE.finditer(text)]


def _quarter_spans(text: str) -> list[Mention]:
    out = []
    for m in _QUARTER_SPAN.finditer(text):
        first, last, year = int(m.group(1)), int(m.group(3)), m.group(2) or m.group(4)
        out.append(Mention("quarter_span", m.start(), m.end(), int(year) if year else None, first, 3,
                           quarters=tuple(range(first, last + 1)) if first < last else ()))
    return out


def _quarter_lists(text: str) -> list[Mention]:
    out = []
    for m in _QUARTER_LIST.finditer(text):
        named = [m.group(1) or m.group(3), *_LISTED.findall(m.group(2) or m.group(4))]
        quarters = tuple(_quarter((q,)) for q in named)
        out.append(Mention("quarter_list", m.start(), m.end(), None, quarters[0], 3, quarters=quarters,
                           fiscal="fiscal" in m.group(0).lower()))
    return out


def _quarters(text: str) -> list[Mention]:
    out = []
    for m in _QUARTER.finditer(text):
        s, e = m.span()
        out.append(Mention("quarter", s, e, None, _quarter(m.groups()), 3, fiscal="fiscal" in m.group(0).lower(),
                           zh=bool(m.group(4) or m.group(5)), word=_edge(text, s) and _edge(text, e),
                           to_date=text[max(0, s - 1):e + 1].startswith(_FIRST_THREE)))
    return out


def _years(text: str, months: int) -> list[Mention]:
    out = []
    for m in _YEAR_ALONE.finditer(text):
        s, e = m.span()
        fy, bare, zh_short = m.groups()
        if fy:
            out.append(Mention("year", s, e, _year(fy), months=months, fiscal=True, short=len(fy) == 2, word=True))
        elif bare:
            word = _edge(text, e) and (_edge(text, s) or _YEAR_AFTER_FY.search(text, 0, s) is not None)
            attached = s > 0 and (text[s - 1].isdecimal() or text[s - 1] == ".")
            out.append(Mention("year", s, e, int(bare), months=months, word=word, attached=attached,
                               zh=text[e:].lstrip().startswith("年")))
        else:
            out.append(Mention("year", s, e, 2000 + int(zh_short), months=months, short=True, zh=True))
    return out


def _zh_spans(text: str) -> list[Mention]:
    out = []
    for m in _ZH_SPAN.finditer(text):
        if m.group(1):
            quarter, months = _quarter((m.group(1),)), 3
        elif m.group(2):
            end = m.group(3)
            quarter = int(end) // 3 if end.isdigit() and int(end) % 3 == 0 else 0
            months = max(0, int(end) - int(m.group(2)) + 1) if end.isascii() else 0
        else:
            quarter, months = 2, 6
        out.append(Mention("zh_span", m.start(), m.end(), None, quarter, months, zh=True,
                           to_date=text[max(0, m.start() - 1):m.end() + 1].startswith(_FIRST_THREE)))
    return out


@functools.lru_cache(maxsize=2048)
def find_periods(text: str) -> tuple[Mention, ...]:
    """Every period ``text`` writes, in every form (see the module), in the order they stand (at one place, in
    ``FORMS`` order). A year or a range of years spans ``stated_months(text)``."""
    months = stated_months(text)
    found = [*_quarter_years(text), *_dates(text), *_year_ranges(text, months), *_quarter_spans(text),
             *_quarter_lists(text), *_quarters(text), *_years(text, months), *_zh_spans(text)]
    return tuple(sorted(found, key=lambda m: (m.start, FORMS.index(m.form))))


def names_period(mentions: tuple[Mention, ...]) -> bool:
    """Whether the reader finds a year, a quarter of a year or a date among ``mentions``."""
    return any(m.form in ("quarter_year", "date") or m.form == "year" and not m.attached for m in mentions)


# ---------------------------------------------------------------------------- the years and quarters stated

_FY_SHORT = re.compile(r"(?i)fy\s?'?\d{2}")
_PLAIN_QUARTER = re.compile(rf"(?i)q[1-4]|[1-4]q|(?:{_QW}) quarter")


def question_years(question: str) -> set[int]:
    """Years a question states: "2023", "FY2023", "fiscal year 2023", "FY23" / "FY 23" / "FY'23" (one space at
    most), "2023年" — a four-digit year standing as a word, or followed by 年 (even run into a number:
    "12023年"). Unlike the reader: "1.2023" is 2023, "x2023" / "2023a" / "23年" / "fiscal 23" are none, and the
    two-digit years of compact forms ("2Q23", "Q2'23") only once ``normalize_periods`` wrote them "Q2 FY23"."""
    years: set[int] = set()
    for m in find_periods(question):
        if m.form != "year" or m.year is None:
            continue
        if m.fiscal:  # "FY2023", "fiscal year 2023"; two digits only as "FY23" / "FY 23" / "FY '23"
            stated = not m.short or _FY_SHORT.fullmatch(question, m.start, m.end) is not None
        else:  # "2023" as a word of its own, "2023年"; not "23年"
            stated = not m.short and (m.word or m.zh)
        if stated:
            years.add(m.year)
    return years


def question_quarters(question: str) -> set[int]:
    """Quarters a question states: "Q3", "3Q", "third quarter" (each a word of its own, one space), "第一季度",
    "一季度", a Chinese span by the quarter it ends ("1-3月": Q1, 半年度 / 上半年 / 中期: Q2). Unlike the reader:
    "third fiscal quarter", "三季" and "q3" run into other letters are none, 前三季度 is Q3, and the quarters of
    compact forms ("2Q23") only once ``normalize_periods`` wrote them "Q2 FY23"."""
    found: set[int] = set()
    for m in find_periods(question):
        if m.form == "quarter" and not m.zh and m.word and _PLAIN_QUARTER.fullmatch(question, m.start, m.end):
            found.add(m.quarter)
        elif m.form == "zh_span" and m.quarter:
            found.add(m.quarter)
    return found


def states_period(question: str) -> bool:
    """Whether a question states a year or a quarter (``question_years``, ``question_quarters``)."""
    return bool(question_years(question) or question_quarters(question))


# ---------------------------------------------------------------------------- fiscal years and quarters in order


class Period(msgspec.Struct, frozen=True):
    """A period a question names: fiscal year ``year`` (``quarter`` 0) or its quarter."""

    year: int
    quarter: int = 0

    def text(self) -> str:
        return f"Q{self.quarter} FY{self.year}" if self.quarter else f"FY{self.year}"


# ---------------------------------------------------------------------------- more period wording

LATEST = re.compile(r"\b(latest|most recent|most recently|current|newest|last reported)\b", re.I)
"""A question asking for the latest period ("the most recent quarter", "current")."""
COMPACT_PERIODS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"\b(fy\s?)?({YEAR})\s?q([1-4])\b", re.I), r"\1\2 Q\3"),  # FY2023Q1, FY 2023 Q1, 2023Q1
    (re.compile(rf"\bq([1-4])\s?(?:fy)?['-]?({YEAR})\b", re.I), r"Q\1 \2"),  # Q22023, Q2-2023
    (re.compile(r"\bq([1-4])\s?(?:fy)?'?(\d{2})\b", re.I), r"Q\1 FY\2"),  # Q2'23, Q2FY23
    (re.compile(r"\b([1-4])q\s?'?(\d{2})\b", re.I), r"Q\1 FY\2"),  # 2Q23
)
FISCAL_MARK = re.compile(r"\bfy\s?'?\d{2,4}\b|\bfiscal\b", re.I)
"""A question that names a fiscal period ("Q3 FY2024", "fiscal 2023 third quarter")."""
FISCAL_YEAR_NAMED_EARLIER_UNTIL = 5
"""A fiscal year ending in January to May mostly lies in the calendar year before its label: a bare
"Q3 2023" (no "FY", no "fiscal") names NVIDIA's fiscal 2024 third quarter (ended October 2023)."""
PERIOD_MENTION = re.compile(rf"(?i)\b(?:fy|q[1-4])?\s?'?{YEAR}\b|\bq[1-4]\b|\b(?:{_QW}) quarter\b")
"""A year or quarter mentioned in a question ("FY2023", "Q3", "third quarter"), removed from a topic."""
PERIOD_TOKEN = re.compile(r"(?:fy)?\d{2,4}|q[1-4]")
"""A tokenised year or quarter ("fy2023", "23", "q3")."""
ZH_PERIOD_MENTION = re.compile(rf"{YEAR}\s*年(?:度|第?[{_ZH}1-4]季度|[上下]半年|前三季度)?|第?[{_ZH}1-4]季度")
"""A Chinese year or quarter ("2023年第一季度", "2023年度", "2023年上半年", "第三季度"), removed from a topic."""
ZH_YEAR_RANGE = re.compile(rf"{YEAR}\s*年.{{0,16}}?(?:到|至|—|-|~)\s*{YEAR}\s*年")
"""Two Chinese years with a range word between ("2021年到2024年", "2017年第三季度至2024年")."""


def normalize_periods(question: str) -> str:
    """Compact period forms written out: "FY2023Q1" → "FY2023 Q1", "Q22023" → "Q2 2023", "2Q23" → "Q2 FY23"."""
    for pattern, repl in COMPACT_PERIODS:
        question = pattern.sub(repl, question)
    return question
