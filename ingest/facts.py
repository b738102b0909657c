"""Financial facts at ingest (issue 21): one row per statement line item and period column.

A statement is found by its title (``kb.core.vocab.statement_title``; Chinese 合并资产负债表 / 合并利润表 /
合并现金流量表): on a PDF statement page (``ingest.statements``), or in a text filing from the title line
until the next statement title or notes. Inside it:

- **period columns** come from header lines — lines made of dates, years and "Three Months Ended" words
  ("March 31, 2024   December 31, 2023"; "Three Months Ended December 31, Six Months Ended December 31," then
  "2022 2021 2022 2021"; Chinese 期末余额 / 本期发生额 read against the report's own period);
- **the scale** from the statement's heading ("(in thousands, except per share data)", 单位：万元); per-share
  lines are never scaled;
- **a row** is a label followed by exactly one figure per period column ("$ 1,299", "(9,242)" negative, "—"
  empty). A row with another count of figures (merged or shifted columns) is not stored, so no value is ever
  filed under a wrong period.

The label is matched whole against the concept vocabulary (``kb.core.vocab.line_concept``); lines outside it are
kept with an empty concept (they still answer "what does line X say"). Tables that are not statements (a
five-year summary, segment tables) have no statement title and are not read; a statement of equity is
skipped (its columns are components, not periods). Offline and deterministic.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

import msgspec

from kb.core import lexicon as lx
from kb.core.measures import CONCEPT_BY_NAME
from kb.core.text import NO_FIGURE_CELLS, figure_token
from kb.core.types import DocumentTree, FactDraft, PageText
from kb.core.vocab import (
    line_concept,
    parse_date,
    statement_title,
    zh_report_period,
)

MAX_ROWS = 400
"""Lines read after a statement title in a text filing before the statement is taken to have ended."""
MAX_HEADER_GAP = 40
"""Non-empty lines after a title within which the period header must appear."""
MAX_COLUMNS = 6
"""More period columns than this is a multi-year summary, not a statement."""

_ZH_TITLES = {"资产负债表": "balance", "利润表": "income", "现金流量表": "cash_flow", "损益表": "income"}
_ZH_OTHER = re.compile(r"^(?:\d+[、.]\s*)?(?:母公司|合并所有者权益|合并股东权益|所有者权益变动表)")
_ZH_TITLE = re.compile(r"^(?:\d+[、.．]\s*)?合并(本报告期|年初到报告期末|年初至报告期末)?(资产负债表|利润表|现金流量表|损益表)\s*$")
_ZH_SPAN = re.compile(r"((?:19|20)\d{2})\s*年\s*(\d{1,2})\s*月?\s*[—–\-~至]\s*(\d{1,2})\s*月")
_ZH_QUARTER = re.compile(r"((?:19|20)\d{2})\s*年\s*(?:第?([一二三四1-4])季度|(半年度|上半年)|(年度|全年))")
_NOTES = re.compile(r"^\s*(?:notes? to (?:the )?(?:condensed )?(?:consolidated )?financial statements|财务报表附注)",
                    re.I)
_MONTHS = "|".join(m[:3] for m in lx.MONTH_NAMES)
_DATE = re.compile(rf"\b({_MONTHS})[a-z]*\.?\s+(\d{{1,2}})\s*,?\s*((?:19|20)\d{{2}})?", re.I)
_YEAR = re.compile(r"(?<![\d,.$])((?:19|20)\d{2})(?![\d,])")
_DURATION = re.compile(
    r"\b(three|six|nine|twelve|3|6|9|12|thirteen|twenty[- ]six|thirty[- ]nine|fifty[- ]two|fifty[- ]three|13|26|39|52|53)"
    r"[- ](months?|weeks?)\b|\b(?:fiscal )?years? ended\b|\byears?\b|\bquarters? ended\b", re.I)
_DURATION_MONTHS = {"three": 3, "3": 3, "six": 6, "6": 6, "nine": 9, "9": 9, "twelve": 12, "12": 12,
                    "thirteen": 3, "13": 3, "twenty-six": 6, "twenty six": 6, "26": 6, "thirty-nine": 9,
                    "thirty nine": 9, "39": 9, "fifty-two": 12, "fifty two": 12, "52": 12, "fifty-three": 12,
                    "fifty three": 12, "53": 12}
_HEADER_NOISE = re.compile(
    r"\((?:[^)]*\b(?:thousands|millions|billions|unaudited|audited|restated|except|note)\b[^)]*)\)"
    r"|\b(?:unaudited|audited|as restated|restated|as adjusted|as of|as at|at|for the|and|ended|ending|end|"
    r"months?|weeks?|years?|fiscal|quarters?|period|three|six|nine|twelve|successor|predecessor|to|from|"
    r"through|in|thousands|millions|except|per|share|data|amounts|dollars|usd|notes?|"
    + _MONTHS + r")[a-z]*\b|[\d$,.()*/-]", re.I)
_SCALE = re.compile(r"\bin (thousands|millions|billions)\b|\(\s*(thousands|millions|billions)\b|\((?:\$|usd)?\s*(?:000|000s|000's)\)"
                    r"|\$\s*(?:in\s+)?(thousands|millions|billions)|单位\s*[:：]\s*(?:人民币)?\s*(元|千元|万元|百万元|亿元)",
                    re.I)
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_VALUE = re.compile(rf"^\((?:{_NUM})\)%?$|^[-−]?(?:{_NUM})%?$|^[—–−-]+$")
_EN_QUARTER = re.compile(r"(?i)\bQ([1-4])\s*(?:FY\s*)?'?((?:19|20)\d{2}|\d{2})\b")
_EN_SPAN = re.compile(r"(?i)\b(\d{1,2}|three|six|nine|twelve)\s*(?:M|months?)\s+(?:ended\s+)?(?:FY\s*)?((?:19|20)\d{2})\b")
KEY_FIGURES = "key_figures"
"""The stored kind of a Chinese report's key-figures table (主要会计数据和财务指标): its rows are stored as
printed lines — 扣除非经常性损益的净利润 is printed nowhere else."""
_KEY_TITLE = re.compile(r"^(?:[一二三四五六七八九十]+[、.．]|[（(][一二三四五六七八九十\d]+[）)]|\d+[、.．])?\s*"
                        r"主要(?:会计|财务)数据(?:和|及|与)?(?:主要)?(?:财务指标)?\s*$")
_CHANGE_COLUMN = re.compile(r"增减|变动|增长率|比上年|比年初")
_ZH_BALANCE_COLUMN = re.compile(r"期末|年末|年度末")
_ZH_CURRENT = re.compile(r"期末|本期|本报告期|年末|报告期末|本年")
_ZH_PRIOR = re.compile(r"期初|上期|上年|年初|上年同期")
_ZH_DATE = re.compile(r"((?:19|20)\d{2})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日")
_SHARES = re.compile(r"(?i)^weighted[- ]average\b|\bshares outstanding\b|\bnumber of (?:common )?shares\b"
                     r"|加权平均股数|股本总数")
_PER_SHARE = re.compile(r"per (?:common )?share|每股|per unit\b", re.I)
_WEIGHTED = re.compile(r"(?i)\bweighted[- ]average\b.*\b(?:shares|units)\b|\b(?:shares|units)\b.*\bweighted[- ]average\b"
                       r"|加权平均股数")
_WEIGHTED_CONTEXT = re.compile(r"(?i)\bweighted[- ]average\b.*\bshares\b|\bshares outstanding\b|\bnumber of (?:common )?shares\b")
_NOT_A_COUNT = re.compile(r"(?i)\b(?:value|price|remaining|term|exercise|fair|rate)\b")
_CONTINUING = re.compile(r"(?i)^(.*?\bactivities)[\s,:–—-]*(?:from |of |in )?continuing operations\s*$")
"""A cash flow total split by operations ("Net cash provided by operating activities - continuing operations")."""
_BASIC_DILUTED = {"basic", "diluted", "basic and diluted", "basic & diluted", "basic and fully diluted"}


class Period(msgspec.Struct, frozen=True):
    """One period column: its end date, its length in months (0: a balance at the date), the header text."""

    end: dt.date
    months: int
    label: str


class _Doc(msgspec.Struct, frozen=True):
    period_end: dt.date | None
    months: int  # the document's own period length: 12 annual, 3/6/9 quarterly reports; 0 unknown


def _safe_date(year: str, month: str, day: str) -> dt.date | None:
    """A printed date, or None for an impossible one ("2024年2月30日")."""
    try:
        return dt.date(int(year), int(month), int(day))
    except ValueError:
        return None


def _month_end(year: int, month: int) -> dt.date:
    month = min(12, max(1, month))
    return (dt.date(year + month // 12, month % 12 + 1, 1) - dt.timedelta(days=1))


def _month_day(year: int, like: dt.date | None) -> dt.date:
    """A year-only column's end date: the document's own month and day in that year, else 31 December."""
    if like is None:
        return dt.date(year, 12, 31)
    try:
        return dt.date(year, like.month, like.day)
    except ValueError:  # 29 February
        return dt.date(year, like.month, 28)


def _durations(text: str) -> list[int]:
    """The period lengths a header names, in order: "Three Months Ended … Nine Months Ended" → [3, 9]."""
    out = []
    for m in _DURATION.finditer(text):
        if m.group(1):
            word = m.group(1).lower().replace(" ", "-")
            months = _DURATION_MONTHS.get(word) or _DURATION_MONTHS.get(word.replace("-", " ")) or 0
        else:
            months = 3 if "quarter" in m.group(0).lower() else 12
        if months:
            out.append(months)
    return out


def header_periods(text: str, kind: str, doc: _Doc) -> list[Period]:
    """The period columns a statement header names, in order ("Three Months Ended March 31, 2024 2023")."""
    dates = list(_DATE.finditer(text))
    full = [d for d in dates if d.group(3)]
    years = [int(y) for y in _YEAR.findall(text)]
    out: list[Period] = []
    if full and len(full) == len(years):  # "March 31, 2024   December 31, 2023"
        for m in full:
            end = parse_date(m.group(1), m.group(2), m.group(3) or "")
            if end is not None:
                out.append(Period(end, 0, m.group(0).strip()))
    else:  # "December 31," (or nothing) above "2024  2023"
        for i, year in enumerate(years):
            anchor = dates[i * len(dates) // len(years)] if dates else None
            end = (parse_date(anchor.group(1), anchor.group(2), str(year)) if anchor else None) \
                or _month_day(year, doc.period_end)
            label = f"{anchor.group(1)} {anchor.group(2)}, {year}" if anchor else str(year)
            out.append(Period(end, 0, label))
    if kind == "balance" or not out:
        return out
    durations = _durations(text)
    if durations and len(out) % len(durations) == 0:  # "Three Months … Six Months …": each spans its share
        per = len(out) // len(durations)
        return [msgspec.structs.replace(p, months=durations[i // per]) for i, p in enumerate(out)]
    if durations:
        return []  # columns and period words do not line up: not stored rather than stored under a guess
    return [msgspec.structs.replace(p, months=doc.months or 12) for p in out]


def _spans_by_size(periods: list[Period], values: Sequence[str]) -> list[Period]:
    """The header's spans checked against the first row's figures: a PDF may read "Nine Months Ended" above
    "Three Months Ended" when the two stand side by side a point apart, and a year-to-date column then reads
    as the quarter. When every figure of the first row (all positive: sales) is smaller under the longer span
    than at the same place under the shorter one, the spans are swapped."""
    spans = [p.months for p in periods]
    groups = sorted(set(spans))
    numbers = [_number(v) for v in values[: len(periods)]]
    if len(groups) != 2 or len(numbers) != len(periods) or any(n is None or n <= 0 for n in numbers):
        return periods
    short = [n for n, m in zip(numbers, spans, strict=True) if m == groups[0]]
    long = [n for n, m in zip(numbers, spans, strict=True) if m == groups[1]]
    if len(short) != len(long) or not all(b < a for a, b in zip(short, long, strict=True)):  # type: ignore[operator]
        return periods
    swap = {groups[0]: groups[1], groups[1]: groups[0]}
    return [msgspec.structs.replace(p, months=swap[p.months]) for p in periods]


def _is_header(line: str) -> bool:
    """A line of dates, years and period words (the column header), not a labelled row."""
    if not (_YEAR.search(line) or _DATE.search(line) or _DURATION.search(line)):
        return False
    rest = _HEADER_NOISE.sub(" ", line)
    letters = len(re.sub(r"[^A-Za-z]", "", rest))
    if letters <= 3:
        return True
    dated = sum(1 for m in _DATE.finditer(line) if m.group(3))  # "ASSETS   March 31, 2024   December 31, 2023"
    if dated >= 2 and letters <= 25 and len(rest.split()) <= 3:
        return True
    label, values = _split(line)  # "Assets   2021   2020": a section word over the years
    return bool(values) and all(re.fullmatch(r"(?:19|20)\d{2}", v) for v in values) and len(label.split()) <= 3 \
        and not line_concept(label)


def _number(token: str) -> float | None:
    token = token.strip()
    if re.fullmatch(r"[—–−-]+", token):
        return None
    negative = token.startswith("(") or token.startswith("-") or token.startswith("−")
    digits = re.sub(r"[^\d.]", "", token)
    if not digits or digits == ".":
        return None
    value = float(digits)
    return -value if negative else value


def trailing_values(line: str) -> list[str]:
    """The figure tokens a line ends in ("Net sales $ 3,642 $ (3,507)" → ["3,642", "(3,507)"])."""
    return _split(line)[1]


def _split(line: str) -> tuple[str, list[str]]:
    tokens = line.replace("$", " $ ").split()
    values: list[str] = []
    i = len(tokens)
    while i > 0:
        tok = tokens[i - 1]
        if tok == "$":
            i -= 1
            continue
        if tok == ")" and i >= 2 and tokens[i - 2].startswith("("):  # "(9,242 )"
            tok = tokens[i - 2] + ")"
            i -= 1
        elif tok.endswith(")") and not tok.startswith("(") and i >= 2 and tokens[i - 2] == "(":  # "( 9,242)"
            tok = "(" + tok
            i -= 1
        tok = "—" if tok in NO_FIGURE_CELLS else figure_token(tok)  # "n/m", "402.5(1)", "23.8-"
        if not _VALUE.match(tok):
            break
        values.append(tok)
        i -= 1
    values.reverse()
    return " ".join(tokens[:i]).rstrip(" $:").strip(), values


def split_row(line: str, columns: int) -> tuple[str, list[str]] | None:
    """A row's label and its ``columns`` figure tokens ("Net sales $ 3,642 $ 3,507" → ("Net sales",
    ["3,642", "3,507"])), or None when the line does not end in exactly that many figures. In a
    whitespace-aligned row the label ends where the figure columns start, so a label ending in numbers
    ("… 3,245,556,528 and 335,778,778      3,245,555      335,778") keeps them."""
    label, values = _split(line)
    if len(values) > columns and "  " in line.strip():
        segments = re.split(r"\s{2,}", line.strip())
        for i in range(1, len(segments)):
            tail = " ".join(segments[i:])
            _, tail_values = _split(tail)
            if len(tail_values) == columns and not re.sub(r"[\s$]", "", _split(tail)[0]) \
                    and re.search(r"[A-Za-z\u4e00-\u9fff]", segments[i - 1]):  # the label ends in words
                label, values = " ".join(segments[:i]).rstrip(" $:"), tail_values
                break
    if len(values) != columns or not re.search(r"[A-Za-z\u4e00-\u9fff]", label):
        if len(values) > columns and re.search(r"[A-Za-z\u4e00-\u9fff]", label):
            extra = values[: len(values) - columns]  # a note number before the figures ("Inventories 4 1,200 900")
            if len(extra) == 1 and re.fullmatch(r"\d{1,2}", extra[0]):
                return label, values[len(values) - columns:]
        return None
    if all(re.fullmatch(r"[—–−-]+", v) for v in values) or re.search(r"(?:\s[—–−-]){2,}$", " " + label):
        return None  # empty cells before the figures: the row has more columns than the header
    return label, values


def _scale(text: str) -> float:
    m = _SCALE.search(text)
    if not m:
        return 1.0
    word = next(g for g in m.groups() if g) if any(m.groups()) else "thousands"
    return lx.SCALES.get(word.lower(), lx.SCALES.get(word, 1.0))  # "元": 1


class _Table:
    """Reads one statement's lines into facts."""

    def __init__(self, kind: str, doc: _Doc, *, chinese: bool, span: str = "") -> None:
        self.kind, self.doc, self.chinese, self.span = kind, doc, chinese, span
        self.end: dt.date | None = None  # a Chinese statement's own date line ("2018年 09月 30日", "2024年 1—3月")
        self.months = 0
        self.scale = 1.0
        self.note_column: list[int] = []
        self.wrapped = False  # the last row's label ends mid-phrase: its next lines continue it
        self.periods: list[Period] = []
        self.pending: list[str] = []
        self.context = ""  # the last label-only line ("Net loss per share:"), for "Basic" / "Diluted" rows
        self.section: list[list[float]] = []  # the figures of the rows under ``context`` (an unlabelled total)
        self.unlabelled: set[int] = set()  # indexes in ``facts`` of unlabelled totals
        self.facts: list[FactDraft] = []
        self.closed = False

    def feed(self, line: str, *, page: int | None, line_no: int | None, node_id: str) -> None:
        stripped = clean_line(line)
        if not stripped or self.closed:
            return
        if self.kind == KEY_FIGURES and not stripped.startswith("|") and self.facts:
            self.closed = True  # the key figures end with their table ("非经常性损益项目和金额" follows)
            return
        if scale := _SCALE.search(stripped):
            self.scale = _scale(scale.group(0))
        if stripped.startswith("|"):
            self._pipe_row(stripped, page=page, line_no=line_no, node_id=node_id)
            return
        if self.chinese and not self.periods:
            if m := _ZH_SPAN.search(stripped):
                self.end = _month_end(int(m.group(1)), int(m.group(3)))
                self.months = int(m.group(3)) - int(m.group(2)) + 1
            elif m := _ZH_DATE.search(stripped):
                self.end = _safe_date(m.group(1), m.group(2), m.group(3)) or self.end
        count = len(trailing_values(stripped))
        if re.match(r"\d{1,2},\s", stripped) and count == 0:  # "31, 2024 and December 31,": a date split over lines
            self.wrapped = True
        if self.wrapped and (count == 0 or _is_header(stripped)):
            return  # the wrapped end of the last row's label ("… outstanding as of March 31," / "2024 and …")
        if _is_header(stripped):
            self.pending.append(stripped)
            return
        if count == 0:
            if re.search(r"[A-Za-z]", stripped) and not re.search(r"\d", stripped):
                self.context, self.section = stripped, []
            if self.periods and re.search(r"(?i)(?:,|\b(?:of|as of|at|and|in|to|for|from|through))$", stripped):
                self.wrapped = True  # a label running on over lines: what follows continues it ("As of" over the
                # header's dates, before any row, is the header's first line)
            return
        if self.pending:
            resolved = self._resolve(count)
            if resolved:
                self.periods, self.pending = _spans_by_size(resolved, trailing_values(stripped)), []
            elif self.periods:  # a fragment that fits no column count keeps the header in force
                self.pending = []
            # else: the header waits for a row whose figures fit it (a first row with a merged column)
        if not self.periods:
            return
        row = split_row(stripped, len(self.periods))
        self.wrapped = False
        if row is None:
            self._unlabelled_total(stripped, page=page, line_no=line_no, node_id=node_id)
            return
        self.wrapped = bool(re.search(r"(?i)(?:,|\b(?:of|as of|at|and|in|to|for|from|through))$", row[0])) \
            or row[0].count("(") > row[0].count(")")
        label, values = row
        self._add(label, values, self.periods, stripped, page=page, line_no=line_no, node_id=node_id)
        self.section.append([_number(v) or 0.0 for v in values])

    def _unlabelled_total(self, line: str, *, page: int | None, line_no: int | None, node_id: str) -> None:
        """A row of figures without a label under a section line ending in a colon ("Operating revenues:" /
        "Fee revenue 26,738" / "Reimbursable revenue 4,846" / "31,584"): stored as "Total <section>" when, in
        every column, it is the sum of the section's rows (to one printed unit); else not stored."""
        label, values = _split(line)
        rows, section = self.section, self.context.rstrip(" $").strip()
        self.section = []
        if not section.endswith(":"):  # a heading without a colon may be a sub-section of one that has one
            return
        section = section.rstrip(" :")
        if label or len(values) != len(self.periods) or len(rows) < 2 or not section or len(section.split()) > 6 \
                or re.search(r"(?i)\b(?:is|are|were|follows|following)\b", section) \
                or section.lower().startswith("total") or _PER_SHARE.search(section):
            return
        numbers = [_number(v) for v in values]
        if any(n is None for n in numbers) or any(
                abs(sum(r[i] for r in rows) - (n or 0.0)) > 1.0 for i, n in enumerate(numbers)):
            return
        before = len(self.facts)
        self._add(f"Total {section[0].lower()}{section[1:]}", values, self.periods, line, page=page,
                  line_no=line_no, node_id=node_id)
        self.unlabelled.update(range(before, len(self.facts)))

    def result(self) -> list[FactDraft]:
        """The statement's facts; an unlabelled total is dropped when a printed line of the statement states its
        measure (a subtotal above "Less treasury stock" is not the "Total shareholders' equity" printed below)."""
        printed = {f.concept for i, f in enumerate(self.facts) if i not in self.unlabelled and f.concept}
        return [f for i, f in enumerate(self.facts) if i not in self.unlabelled or f.concept not in printed]

    def _resolve(self, count: int) -> list[Period]:
        """The header lines' periods that match the first row's figure count: the whole header, else its last
        lines ("AS OF MARCH 31, 2024 AND DECEMBER 31, 2023" above "March 31, December 31," / "2024 2023")."""
        for k in range(len(self.pending)):
            periods = header_periods(" ".join(self.pending[k:]), self.kind, self.doc)
            if len(periods) == count and count <= MAX_COLUMNS:
                return periods
        return []

    def _pipe_row(self, line: str, *, page: int | None, line_no: int | None, node_id: str) -> None:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells or set("".join(cells)) <= set("-: "):
            return
        label, rest = cells[0], cells[1:]
        if label in {"项目", "科目"} or (any(c not in {"附注", ""} for c in rest) and all(
                _ZH_CURRENT.search(c) or _ZH_PRIOR.search(c) or _ZH_DATE.search(c) or _YEAR.search(c)
                or c in {"附注", ""} for c in rest)):
            if self.kind == KEY_FIGURES:  # change columns and a merged column printed twice are no periods
                self.note_column = [i for i, c in enumerate(rest) if c in {"附注", ""} or _CHANGE_COLUMN.search(c)
                                    or (i and c == rest[i - 1])]
                self.periods = self._key_periods([c for i, c in enumerate(rest) if i not in self.note_column])
                return
            self.note_column = [i for i, c in enumerate(rest) if c == "附注"]
            self.periods = self._zh_periods([c for i, c in enumerate(rest) if i not in self.note_column])
            return
        if not self.periods:
            return
        values = [c for i, c in enumerate(rest) if i not in self.note_column]
        if len(values) < len(self.periods):
            return
        values = values[: len(self.periods)]
        if not all(_VALUE.match(v.replace(" ", "")) for v in values if v) or all(_number(v) is None for v in values):
            return
        self._add(label, [v.replace(" ", "") or "-" for v in values], self.periods, line, page=page,
                  line_no=line_no, node_id=node_id)

    def _zh_periods(self, headers: Sequence[str]) -> list[Period]:
        """Periods of a pipe table's header cells: dates ("2023年12月31日", "December 31, 2023"), quarters
        ("2024年第一季度"), years, or 期末 / 期初 / 本期 / 上期 read against the statement's own date line (else
        the report's period). A flow without a stated length runs from the start of the year (a Q3 report's
        statement covers nine months), a 本报告期 statement three months."""
        end, balance = self.end or self.doc.period_end, self.kind == "balance"
        span = 3 if self.span == "3" else self.months or (end.month if end and self.chinese else 0) \
            or self.doc.months or 12
        out: list[Period] = []
        for h in headers:
            months = 0 if balance else (_durations(h) or [span])[0]
            if (m := _ZH_DATE.search(h)) and (day := _safe_date(m.group(1), m.group(2), m.group(3))):
                out.append(Period(day, months, h))
            elif m := _ZH_SPAN.search(h):
                out.append(Period(_month_end(int(m.group(1)), int(m.group(3))),
                                  0 if balance else int(m.group(3)) - int(m.group(2)) + 1, h))
            elif m := _ZH_QUARTER.search(h):
                year = int(m.group(1))
                if m.group(2):
                    q = "一二三四".find(m.group(2)) + 1 or int(m.group(2))
                    out.append(Period(_month_end(year, 3 * q), 0 if balance else 3, h))
                else:
                    out.append(Period(_month_end(year, 6 if m.group(3) else 12), 0 if balance else
                                      6 if m.group(3) else 12, h))
            elif (d := _DATE.search(h)) and d.group(3) and (day := parse_date(d.group(1), d.group(2), d.group(3))):
                out.append(Period(day, months, h))
            elif q := _EN_QUARTER.search(h):  # "Q3 2023", "Q3 FY2023"
                year = int(q.group(2)) + (2000 if len(q.group(2)) == 2 else 0)
                out.append(Period(_month_end(year, 3 * int(q.group(1))), 0 if balance else 3, h))
            elif n := _EN_SPAN.search(h):  # "9M 2023", "Nine months 2023"
                word, year = n.group(1).lower(), int(n.group(2))
                length = int(word) if word.isdigit() else _DURATION_MONTHS.get(word, 0)
                day = _month_day(year, end) if end else _month_end(year, length or 12)
                out.append(Period(day, 0 if balance else length or 12, h))
            elif y := _YEAR.search(h):
                out.append(Period(_month_day(int(y.group(1)), end), months, h))
            elif end is None:
                return []
            elif _ZH_CURRENT.search(h):
                out.append(Period(end, months, h))
            elif _ZH_PRIOR.search(h):
                prior = dt.date(end.year - 1, 12, 31) if balance else _month_day(end.year - 1, end)
                out.append(Period(prior, months, h))
            else:
                return []
        return out if len(out) <= MAX_COLUMNS else []

    def _key_periods(self, headers: Sequence[str]) -> list[Period]:
        """Periods of a key-figures table's columns (主要会计数据和财务指标): 本报告期 is the report's own
        quarter, half year or year, 年初至报告期末 the year to date, 上年同期 the column before it a year
        earlier, 本报告期末 / 上年度末 balances at the report's end and the last year end; [] when a header is
        none of these or the report's period is unknown."""
        end, months = self.doc.period_end, self.doc.months
        if end is None or not months:
            return []
        own = 3 if months in (3, 9) else months  # a quarterly report's 本报告期 is its quarter
        out: list[Period] = []
        for h in headers:
            if y := _YEAR.search(h):  # "2022年末", "2023年": that year's end, or the year
                year = int(y.group(1))
                out.append(Period(dt.date(year, 12, 31), 0 if _ZH_BALANCE_COLUMN.search(h) else 12, h))
            elif "年初至" in h:
                out.append(Period(end, months, h))
            elif _ZH_BALANCE_COLUMN.search(h):
                prior = _ZH_PRIOR.search(h)
                out.append(Period(dt.date(end.year - 1, 12, 31) if prior else end, 0, h))
            elif _ZH_PRIOR.search(h) and out:
                before = out[-1]
                out.append(Period(_month_day(end.year - 1, end), before.months, h))
            elif _ZH_CURRENT.search(h):
                out.append(Period(end, own, h))
            else:
                return []
        return out if len(out) <= MAX_COLUMNS else []

    def _concepts(self, label: str) -> tuple[str, ...]:
        bare = label.strip().lower().rstrip(":").strip()
        per_share_context = bool(_PER_SHARE.search(self.context))
        if self.kind == "income" and not _NOT_A_COUNT.search(label) and (_WEIGHTED.search(label) or (
                bare in _BASIC_DILUTED and _WEIGHTED_CONTEXT.search(self.context)
                and (not per_share_context or _WEIGHTED.search(self.context)))):
            # "Basic" under "Weighted-average shares used in computation of earnings per share:" is a count
            # "Weighted average shares outstanding – basic", "Basic" under "Weighted average number of … shares:"
            basic, diluted = bool(re.search(r"\bbasic\b", bare)), bool(re.search(r"\bdilut(?:ed|ion|ive)\b", bare))
            if basic and diluted:
                return ("weighted_shares_basic", "weighted_shares_diluted")
            return ("weighted_shares_diluted",) if diluted else ("weighted_shares_basic",)
        if re.fullmatch(r"basic (?:and|&) diluted", bare) or (
                _PER_SHARE.search(label) and re.search(r"\bbasic\b", bare) and re.search(r"\bdiluted\b", bare)):
            if re.search(r"(?i)continuing|discontinued", label + " " + self.context):
                return ("",)
            return ("eps_basic", "eps_diluted") if per_share_context or _PER_SHARE.search(label) else ("",)
        concept = line_concept(label)
        if not concept and (part := _CONTINUING.match(label)) and line_concept(part.group(1)) in ("cfo", "cfi", "cff"):
            concept = line_concept(part.group(1))  # the continuing-operations part; answers prefer the total
        if not concept and _PER_SHARE.search(label) and not re.search(r"(?i)weighted|dividend|book value|cash flow",
                                                                        label):
            # "Earnings per share attributable to 3M common shareholders — basic", "Basic income per share of …"
            if re.search(r"(?i)continuing|discontinued", label):
                return ("",)
            if re.search(r"\bbasic\b", bare):
                return ("eps_basic",)
            if re.search(r"\bdiluted\b", bare):
                return ("eps_diluted",)
        if concept in ("eps_basic", "eps_diluted") and bare in ("basic", "diluted") and (
                not per_share_context or re.search(r"(?i)continuing|discontinued", self.context)):
            return ("",)  # "Basic" under "… per share from continuing operations" is not the EPS
        spec = CONCEPT_BY_NAME.get(concept)
        if spec is not None and self.kind not in spec.kinds:
            return ("",)
        return (concept,)

    def _add(self, label: str, values: Sequence[str], periods: Sequence[Period], source: str, *,
             page: int | None, line_no: int | None, node_id: str) -> None:
        if any(v.endswith("%") for v in values):
            return  # a ratio row, not an amount
        # a key-figures row is a printed line: the statements state the vocabulary's measures
        concepts = self._concepts(label) if self.kind != KEY_FIGURES else ("",)
        spec = CONCEPT_BY_NAME.get(concepts[0]) if concepts else None
        count = spec is not None and spec.unit == "shares"  # a share count, even "… for basic earnings per share"
        per_share = not count and ((spec is not None and spec.unit == "per_share") or bool(_PER_SHARE.search(label))
                                   or (bool(_PER_SHARE.search(self.context))
                                       and label.strip().lower().startswith(("basic", "diluted"))))
        scale = 1.0 if per_share else self.scale
        shares = count or (not per_share and bool(_SHARES.search(label)) and "share_capital" not in concepts)
        unit = "shares" if shares else ("CNY" if self.chinese else "USD") + ("/share" if per_share else "")
        for column, (printed, period) in enumerate(zip(values, periods, strict=True)):
            number = _number(printed)
            if number is None:
                continue
            for name in concepts:
                flow = spec.flow if spec is not None else self.kind != "balance"
                self.facts.append(FactDraft(
                    statement=self.kind, line_item=label[:200], concept=name, period_end=period.end,
                    months=period.months if flow and self.kind != "balance" else 0,
                    period_label=period.label[:80], value=round(number * scale, 6), printed=printed, scale=scale,
                    unit=unit,
                    page=page, line=line_no, node_id=node_id, source=" ".join(source.split())[:300], column=column,
                ))


def _zh_title(line: str) -> str | None:
    """The kind a Chinese statement title names ("key_figures" for 主要会计数据和财务指标), "" for another
    statement (母公司…), None for no title."""
    text = line.strip().replace(" ", "")
    if _KEY_TITLE.match(text):
        return KEY_FIGURES
    if m := _ZH_TITLE.match(text):
        return _ZH_TITLES[m.group(2)] + (":3" if m.group(1) == "本报告期" else ":ytd" if m.group(1) else "")
    if _ZH_OTHER.match(text) and text.endswith("表") and len(text) <= 20:
        return ""
    return None


def clean_line(line: str) -> str:
    """A line with zero-width characters and no-break spaces (EDGAR text exports) made plain spaces."""
    return line.translate(_INVISIBLE).strip()


_INVISIBLE = str.maketrans({"\u200b": " ", "\u200c": " ", "\u200d": " ", "\ufeff": " ", "\xa0": " ",
                            "\u2009": " ", "\u202f": " "})


def _title(line: str) -> str | None:
    stripped = clean_line(line)
    if not stripped or len(stripped) > 100:
        return None
    if lx.is_zh(stripped):
        return _zh_title(stripped)
    kind = statement_title(stripped)
    if kind:
        return "" if kind == "equity" else ("income" if kind == "comprehensive_income" else kind)
    if _OTHER_STATEMENT.search(stripped) and not re.search(r"\d{2}", re.sub(r"\([^)]*\)", "", stripped)):
        return ""  # "Statement of Redeemable Preferred Stock and Stockholders' Equity": another statement begins
    return "" if _NOTES.match(stripped) else None


_OTHER_STATEMENT = re.compile(r"(?i)^(?:[\w.,’' -]{0,60}\s)?statements? of\b.{0,80}\b(?:equity|deficit|partners[’']? capital"
                              r"|changes in|net assets)\b")


def _node_at(tree: DocumentTree, position: int) -> str:
    """The deepest node whose range holds a page or line."""
    best, level = "", -1
    for n in tree.nodes:
        if n.start <= position <= n.end and n.level > level:
            best, level = n.node_id, n.level
    return best


def document_period(text: str, period_end: str | None, doc_type: str | None, name: str = "") -> _Doc:
    """The document's own period: its end date and its length in months, from metadata or (Chinese reports)
    from the report's title in its text or its file name ("2024年一季度报告" → 2024-03-31, 3 months)."""
    end: dt.date | None = None
    if period_end:
        try:
            end = dt.date.fromisoformat(period_end[:10])
        except ValueError:
            end = None
    months = 12 if doc_type in ("10k", "annual_report", "20f", "40f") else 0
    if report := zh_report_period(text[:20000]) or zh_report_period(name):
        _, quarter, report_end = report
        months = 3 * quarter if 0 < quarter < 4 else 12
        end = end or dt.date.fromisoformat(report_end)
    if end is not None and not months and doc_type in ("10q",):
        months = 3
    return _Doc(end, months)


def _facts_of_lines(lines: Sequence[tuple[str, int | None, int | None]], tree: DocumentTree, doc: _Doc,
                    *, unit_is_page: bool) -> list[FactDraft]:
    out: list[FactDraft] = []
    table: _Table | None = None
    since_title = 0
    last_end: dt.date | None = None  # a Chinese statement's date line holds for the statements after it
    for text, page, line_no in _unjoined(lines):
        title = _title(text)
        if title is not None:
            if table is not None:
                out.extend(table.result())
                last_end = table.end or last_end
            table, since_title = None, 0
            if title:
                kind, _, span = title.partition(":")
                table = _Table(kind, doc, chinese=lx.is_zh(text), span=span)
                table.end = last_end if table.chinese and doc.period_end is None else None
                if scale := _SCALE.search(clean_line(text)):  # "Statements of Cash Flows (in thousands)"
                    table.scale = _scale(scale.group(0))
            continue
        if table is None:
            continue
        if text.strip():
            since_title += 1
        if since_title > MAX_ROWS or (not table.periods and since_title > MAX_HEADER_GAP):
            out.extend(table.result())
            table = None
            continue
        position = page if unit_is_page else line_no
        table.feed(text, page=page, line_no=line_no, node_id=_node_at(tree, position or 0))
    if table is not None:
        out.extend(table.result())
    return out


def _unjoined(lines: Sequence[tuple[str, int | None, int | None]]) -> list[tuple[str, int | None, int | None]]:
    """Lines with a table row and the next title run together ("|（二）稀释每股收益|-|-|7、合并…现金流量表")
    split in two."""
    out = []
    for text, page, line_no in lines:
        stripped = text.strip()
        if stripped.startswith("|") and not stripped.endswith("|") and "|" in stripped[1:]:
            head, _, tail = stripped.rpartition("|")
            out += [(head + "|", page, line_no), (tail, page, line_no)]
        else:
            out.append((text, page, line_no))
    return out


def extract_facts(tree: DocumentTree, *, pages: Sequence[PageText] | None = None, text: str | None = None,
                  statement_pages: dict[int, str] | None = None, period_end: str | None = None,
                  doc_type: str | None = None, name: str = "") -> list[FactDraft]:
    """The facts of a document's statements: from its statement pages (PDF) or its text (text filings,
    Markdown, Chinese reports); ``name`` (the file's) may state a Chinese report's period."""
    if pages is not None:
        head = "\n".join(p.text for p in pages[:3])
        doc = document_period(head, period_end, doc_type, name)
        wanted = sorted(statement_pages or {})
        lines: list[tuple[str, int | None, int | None]] = []
        previous = None
        for number in wanted:
            page = next((p for p in pages if p.number == number), None)
            if page is None:
                continue
            if previous is not None and number != previous + 1:
                lines.append(("Notes to financial statements", number, None))  # a gap ends the statement
            body = page.text.split("\n")  # a continuation page without a title goes on with the statement
            lines.extend((ln, number, None) for ln in body)
            previous = number
        return _dedupe(_facts_of_lines(lines, tree, doc, unit_is_page=True))
    source = (text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    doc = document_period("\n".join(source[:400]), period_end, doc_type, name)
    return _dedupe(_facts_of_lines([(ln, None, i) for i, ln in enumerate(source, 1)], tree, doc, unit_is_page=False))


def _dedupe(facts: list[FactDraft]) -> list[FactDraft]:
    """One row per (line, column): a statement read twice (a repeated page header) is stored once."""
    seen: set[tuple[object, ...]] = set()
    out: list[FactDraft] = []
    for f in facts:
        key = (f.page, f.line, f.source, f.column, f.line_item, f.concept)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
