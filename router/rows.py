"""Table rows in evidence, read as a person reads them (issue 22 item 4).

A statement or table line ("Merchandise inventories 5,409 5,209", "| Net sales | 32,765 | 30,109 |") is a
label and its figures; the column header above it in the same passage ("February 2, 2019 February 3, 2018",
"2018 2017 2016") says which period each figure is for, and a scale line ("$ in millions", "(in thousands)")
the unit. ``best_row`` finds the row that states the asked measure for the asked period and ``render`` writes
it readably: "Merchandise inventories, February 2, 2019: $5,409 million".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kb.core import lexicon as lx
from kb.core.measures import CONCEPT_BY_NAME
from kb.core.periods import question_quarters, question_years, spans_named, stated_months
from kb.core.text import NO_FIGURE_CELLS, figure_token, tokenize
from kb.core.vocab import DATE_RE, line_concept, question_concept

_CELL = re.compile(r"^\(?-?\$?\(?\d[\d,]*(?:\.\d+)?\)?%?\)?$|^[—–-]$")
_YEAR = re.compile(r"\b((?:19|20)\d{2})\b")
_SCALE = re.compile(r"\bin\s+(thousands|millions|billions)\b|\b(thousands|millions|billions) of (?:u\.s\. )?dollars\b"
                    r"|\(\s*(?:\$|dollars|usd|us\$)?\s*(thousands?|millions?|billions?)\b"
                    r"|单位\s*[:：]\s*(?:人民币)?(万元|亿元|千元|元)", re.I)
_EXCEPT = re.compile(r"(?i)\bexcept\s+(?:for\s+)?([^)]{3,60})")
_EXCEPT_GENERIC = frozenset(tokenize("per share shares data amount amounts figures and or where noted otherwise "
                                     "indicated as stated information"))
"""Words of a scale's "except" clause that name no rows of their own ("except per-share data": the per-share
rule covers those)."""
def _excepted(clause: str) -> list[set[str]]:
    """The head noun of each item of a scale's "except" clause: "unit counts" → {"count"}, "number of stores" →
    {"number"} (not every row naming stores); the per-share rule covers per-share rows."""
    out = []
    for part in re.split(r",|;|\band\b|\bor\b", clause):
        head = re.split(r"\bof\b", part)[0]
        words = [t for t in tokenize(head) if t not in _EXCEPT_GENERIC]
        if words:
            out.append({words[-1]})
    return out


_NOTE_MARK = re.compile(r"\(\d{1,2}\)|\[\d{1,2}\]")
_SCALE_WORD = {"thousands": "thousand", "millions": "million", "billions": "billion"}  # and the singular as is
# words of a question that ask how, not what: they never name the measure
_ASKING = frozenset(tokenize(
    "what how much many was were is are the of for in at end year years fiscal fy total amount value figure "
    "answer response question usd dollars millions billions thousands units unit round decimal place places "
    "based base basis information provided shown primarily details judgments rely relying using statement "
    "statements balance sheet income cash flow flows consolidated report reported annual quarterly company "
    "please give state calculate compute assume analyst public equities line item quarter quarters first second "
    "third fourth three six nine twelve month months ended ending period periods date", keep_stopwords=True))


@dataclass(frozen=True)
class Row:
    """One table row: its label, its figures, and (when found) the column headers and unit over it."""

    label: str
    cells: tuple[str, ...]
    headers: tuple[str, ...]  # one per cell, or ()
    scale: str  # "million", "thousand", "万元", … or ""
    currency: bool
    line: str  # the row as printed


def _split_row(line: str) -> tuple[str, tuple[str, ...]] | None:
    """(label, figures) of a table line, or None when the line is not one."""
    if "|" in line:
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        label = next((p for p in parts if p and not _CELL.match(p.replace(" ", ""))), "")
        cells = tuple(p.replace(" ", "") for p in parts[parts.index(label) + 1:] if p) if label else ()
        if not all(_CELL.match(c) or _NOT_A_FIGURE.fullmatch(c) for c in cells):
            cells = tuple(c for c in cells if _CELL.match(c))
        elif not any(_CELL.match(c) for c in cells):
            cells = ()  # "n/m" and dashes keep their columns: a row of figures has one at least
    else:
        toks = line.split()
        cells_rev: list[str] = []
        i = len(toks)
        while i > 0 and (_CELL.match(figure_token(toks[i - 1])) or toks[i - 1] == "$"
                         or toks[i - 1] in NO_FIGURE_CELLS):
            if toks[i - 1] != "$":
                cells_rev.append(figure_token(toks[i - 1]))  # "402.5(1)": the figure, not its note mark
            i -= 1
        label = " ".join(toks[:i])
        cells = tuple(reversed(cells_rev))
        if not any(_CELL.match(c) and any(ch.isdigit() for ch in c) for c in cells):
            cells = ()  # "n/m" and dashes keep their columns: a row of figures has one at least
    label = label.strip(" .:$")
    if not cells or not re.search(r"[^\W\d_]{2}", label) or len(label) > 120:
        return None
    if all(_YEAR.fullmatch(c) for c in cells):  # a header row ("2019 2018"), not figures
        return None
    return label, cells


def _headers(line: str) -> tuple[str, ...]:
    """The period columns a header line names: written dates, else years."""
    dates = [m.group(0) for m in DATE_RE.finditer(line)]
    if dates and len(dates) >= len(_YEAR.findall(line)):
        return tuple(dates)
    if "|" in line:  # a pipe table's header: every column after the label's, when one names a period
        cells = [p.strip() for p in line.strip().strip("|").split("|")][1:]
        return tuple(cells) if any(_YEAR.search(c) and len(c) <= 40 for c in cells) else ()
    rest = DATE_RE.sub(" ", line) if not dates else line
    years = _YEAR.findall(rest)
    # a header line is mostly its years ("2018 2017 2016", "Fiscal 2019 Fiscal 2018"), maybe with a change column
    # after them ("2023 2022 Change", "2023 2022 % change")
    bare = re.sub(r"\([^)]*\)", " ", rest)  # "(in millions of US$, except per-share data) 2023 2022 Change"
    if years and len(re.findall(r"[^\W\d_]+", bare)) <= 2 * len(years) + 2:
        after = bare[bare.rfind(years[-1]) + len(years[-1]):].strip()
        return (*years, after) if after and _CHANGE_HEADER.fullmatch(after) else tuple(years)
    return ()


_CHANGE_HEADER = re.compile(r"(?i)%?\s*(?:change|chg\.?|variance|growth|increase|y/y|yoy)(?:\s*%|\s*\(%\))?|增减|变动")
_PER_SHARE = re.compile(r"(?i)^(?!.*(?:weighted|shares used|number of shares|shares outstanding|股数))"
                        r".*(?:\bper (?:[\w.-]+ ){0,2}share\b|\beps\b|每股)")  # "per 3M common share"
"""A row whose figures are per share: a table's "in millions" does not apply to it."""


_PARTIAL_DATE = re.compile(rf"(?i)\b({'|'.join(lx.MONTH_NAMES)})\.?\s+(\d{{1,2}})(?!\d),?(?!\s*,?\s*\d{{4}})")
"""A date without its year ("December 31,"): a header split over lines prints the year below."""


def _joined_header(held: str, line: str) -> tuple[str, ...]:
    """The columns of a header split over two lines: "March 31, 2024   December 31," above "(unaudited)   2023"
    is ("March 31, 2024", "December 31, 2023"); () when the lower line's years do not complete every date."""
    years = _YEAR.findall(line)
    if not years or _split_row(_YEAR.sub(" ", line)) is not None or re.search(r"\d", _YEAR.sub(" ", line)):
        return ()
    marks = sorted([(m.start(), m.group(0)) for m in DATE_RE.finditer(held)]
                   + [(m.start(), m) for m in _PARTIAL_DATE.finditer(held)], key=lambda x: x[0])
    partial = [m for _, m in marks if isinstance(m, re.Match)]
    if len(partial) != len(years):
        return ()
    fill = iter(years)
    return tuple(m if isinstance(m, str) else f"{m.group(1)} {m.group(2)}, {next(fill)}" for _, m in marks)


def rows_of(text: str) -> list[Row]:
    """Every table row of a passage, each with the nearest header above it that has one period per figure."""
    lines = text.splitlines()
    scale, currency = "", "$" in text or "dollar" in text.lower()
    out: list[Row] = []
    header: tuple[str, ...] = ()
    exempt: list[set[str]] = []  # "(Amounts in millions, except unit counts)": rows of unit counts keep their unit
    held = ""  # a header line with a date whose year is on the next line ("March 31, 2024   December 31,")
    for line in lines:
        if held and (joined := _joined_header(held, line)):
            header, held = joined, ""
            continue
        held = line if _PARTIAL_DATE.search(line) \
            and not re.search(r"\d", DATE_RE.sub(" ", _PARTIAL_DATE.sub(" ", line))) else ""
        if held:
            continue  # the header's upper line, no row
        if m := _SCALE.search(line):
            word = next(g for g in m.groups() if g)
            scale = _SCALE_WORD.get(word.lower(), word.lower() if word.isascii() else word)
            exempt = _excepted(e.group(1)) if (e := _EXCEPT.search(line)) else []
        h = _headers(line)
        if h and (not re.search(r"\d", _YEAR.sub(" ", DATE_RE.sub(" ", line))) or "|" in line and _split_row(line) is None):
            header = h
            continue
        split = _split_row(line)
        if split is None:
            if len(line.split()) > 12:  # prose between tables: the next table prints its own header
                header = ()
            continue
        label, cells = split
        heads = header if len(header) == len(cells) else ()
        words = set(tokenize(_NOTE_MARK.sub("", label)))
        own = any(item <= words for item in exempt)  # a row the scale's "except" names, every word of one item
        out.append(Row(label=label, cells=cells, headers=heads, scale="" if own else scale,
                       currency=currency and not own, line=line.strip()))
    return out


_QUOTED = re.compile(r"['‘’\"“”]([^'‘’\"“”]{3,80})['‘’\"“”]")
_WORD = re.compile(r"[A-Za-z][\w&.-]*(?:['’]s)?")


def question_names(question: str) -> set[str]:
    """Tokens of the question's names: a possessive ("AMCOR's"), and capitalised words inside a sentence
    ("Best Buy") unless the question is written in title case; acronyms ("EBITDA", "GAAP") are measures."""
    words = _WORD.findall(question)
    title_case = sum(w[0].isupper() for w in words) > len(words) / 2
    out = []
    for i, w in enumerate(words):
        if re.search(r"['’]s$", w):
            out.append(w)
        elif not title_case and i > 0 and w[0].isupper() and not w.isupper():
            out.append(w)
    return set(tokenize(" ".join(out)))


def measure_words(question: str, naming: set[str]) -> set[str]:
    """The question's words that may name the measure: not asking words, not the documents' names, no periods,
    not a name (``question_names``) unless quoted as the measure."""
    quoted = " ".join(m.group(1) for m in _QUOTED.finditer(question))
    names = question_names(_QUOTED.sub(" ", question)) - set(tokenize(quoted))
    out = set()
    for t in tokenize(question):
        if t in names:
            continue
        t = re.sub(r"['’]s$", "", t)
        if t not in _ASKING and t not in naming and not any(ch.isdigit() for ch in t):
            out.add(t)
    return out


@dataclass(frozen=True)
class RowMatch:
    chunk: int  # index of the evidence chunk
    row: Row
    column: int
    score: float


def best_row(question: str, texts: Sequence[str], naming: set[str], *, concept: str = "") -> RowMatch | None:
    """The row of the evidence that states the asked measure (its label's words are the question's, or it
    prints the asked vocabulary concept: ``concept`` when known, else the one the question's words name), in
    the asked period's column when the header says which."""
    words = measure_words(question, naming)
    asked = set(tokenize(question))
    concept = concept or question_concept(question)
    if not words and not concept:
        return None
    years = question_years(question)
    # words naming a part of the measure ("Services revenue"): the concept's total row is not what is asked
    qualified = bool(concept) and bool(words - _concept_words(concept))
    months = stated_months(question)
    months = 3 if months == 12 and question_quarters(question) else months
    within_year = months != 12  # a quarter, nine months
    best: RowMatch | None = None
    for ci, text in enumerate(texts):
        if within_year and not names_a_span(text):
            continue  # a table of years only: its figures are of another span than the quarter asked
        for row in rows_of(text):
            if _PAGE_FOOTER.search(row.line):
                continue  # "Apple Inc. | Q1 2023 Form 10-Q | 1": a page's footer, not a row of figures
            label = set(tokenize(row.label))
            if not label:
                continue
            hit = len(words & label)
            if hit and not (words & label) - GENERIC:
                hit = 0  # "Total revenues" for "retail units in total": a word every table has is no match
            if not hit and label <= asked - naming - GENERIC and not line_concept(row.label):
                hit = len(label)  # a part the question names with a capital ("Apple Services revenue": Services)
            same = bool(concept) and line_concept(row.label) == concept
            if not same and (hit == 0 or hit / len(label) < 0.5
                             or (hit < 2 and hit < len(label) and hit / len(words) < 0.5)):
                continue
            column, dated = 0, False
            if years and row.headers:
                of_year = [i for i, h in enumerate(row.headers) if any(str(y) in h for y in years)]
                if not of_year:
                    continue  # the table is of other periods
                # of the asked span when the headers name spans ("Q3 2023" and "9M 2023": nine months asked)
                column = next((i for i in of_year if _span_of(row.headers[i]) == months), of_year[0])
                dated = True
            bonus = 0.0 if not same else 0.5 if qualified and words - _concept_words(concept) - label else 2.0
            score = hit + bonus + hit / len(label) + (0.5 if dated else 0.0) + 0.3 / (1 + ci)
            if best is None or score > best.score:
                best = RowMatch(chunk=ci, row=row, column=column, score=score)
    return best


def row_of_sentence(sentence: str, text: str, question: str) -> RowMatch | None:
    """The table row a lead sentence is ("Unit counts at period end 11,501 11,361 11,718"), in the asked year's
    column, when its table prints a period over each figure; else None."""
    said = " ".join(_NOTE_MARK.sub("", sentence).split())
    years = question_years(question)
    for row in rows_of(text):
        if row.headers and " ".join(_NOTE_MARK.sub("", row.line).split()) == said:
            column = next((i for i, h in enumerate(row.headers) if any(str(y) in h for y in years)), 0)
            return RowMatch(chunk=0, row=row, column=column, score=0.0)
    return None


def render(match: RowMatch) -> str:
    """"Net sales, 2018: $32,765 million (2017: $30,109 million)" — the label, the column's period, the figure with
    its unit, then the other periods the row prints (at most two); a row
    whose header was not found keeps all its figures as printed ("Widgets shipped: 1,200, 900")."""
    row = match.row
    label = _NOTE_MARK.sub("", row.label).strip()  # "Unit counts at period end(1)": the note mark is no name
    if not row.headers:
        return f"{label}: " + ", ".join(_figure(row, i) for i in range(len(row.cells)))
    others = [f"{row.headers[i]}: {_figure(row, i)}" for i in range(len(row.cells))
              if i != match.column and _YEAR.search(row.headers[i])][:2]  # the periods beside it, for comparison
    beside = f" ({'; '.join(others)})" if others else ""
    return f"{label}, {row.headers[match.column]}: {_figure(row, match.column)}{beside}"


_NOT_A_FIGURE = re.compile(r"(?i)n/?m|n\.?m\.?|n/?a|n\.a\.|nil|—|–|-|\*")
"""A cell that holds no figure but a column's place ("n/m", "—"): kept so the row's figures keep their headers."""


def _figure(row: Row, i: int) -> str:
    cell = row.cells[i]
    if _NOT_A_FIGURE.fullmatch(cell) and cell not in "—–-":
        return cell
    negative = cell.startswith("(") and cell.endswith(")") or cell.startswith(("-", "−")) and len(cell) > 1
    figure = cell.strip("()$-−")
    if figure in "—–-":
        figure = "—"
    elif row.currency and not figure.endswith("%") and not row.scale.endswith("元"):
        figure = f"${figure}"
    if negative:
        figure = f"−{figure}"
    if _PER_SHARE.search(row.label) and figure != "—" and not figure.endswith("%"):
        return f"{figure}{'元/股' if row.scale.endswith('元') else ' per share'}"  # "except per-share data"
    if row.scale and figure != "—" and not figure.endswith("%"):
        figure = f"{figure}{row.scale}" if row.scale.endswith("元") else f"{figure} {row.scale}"
    return figure


def value(match: RowMatch) -> float | None:
    """The chosen figure in base units (scale applied, parentheses negative), or None for a dash or a percent."""
    cell = match.row.cells[match.column]
    body = cell.strip("()$%")
    if not body or body in "—–-" or cell.endswith("%"):
        return None
    try:
        number = float(body.replace(",", ""))
    except ValueError:
        return None
    sign = -1.0 if cell.startswith("(") and cell.endswith(")") or cell.startswith("-") else 1.0
    if _PER_SHARE.search(match.row.label):
        return sign * abs(number)  # a per-share row keeps its unit under an "in millions" table
    return sign * abs(number) * lx.SCALES.get(match.row.scale, 1.0)  # "元", "": 1


def change_of(match: RowMatch, question: str) -> str:
    """The row's change between the two years the question states, when its header prints both: "up $84.7
    million (+20.5%) from 2022 to 2023"; "" otherwise."""
    years = sorted(question_years(question))
    row = match.row
    if len(years) != 2 or not row.headers:
        return ""
    cols = {y: next((i for i, h in enumerate(row.headers) if str(y) in h), None) for y in years}
    if None in cols.values():
        return ""
    old, new = (value(RowMatch(match.chunk, row, cols[y], 0.0)) for y in years)  # type: ignore[arg-type]
    if old is None or new is None:
        return ""
    delta = new - old
    word = "up" if delta > 0 else "down" if delta < 0 else "unchanged"
    pct = f" ({delta / abs(old) * 100:+.1f}%)" if old and delta else ""
    digits = max((len(c.split(".")[1].strip(")%")) for c in (row.cells[cols[years[0]]], row.cells[cols[years[1]]])
                  if "." in c), default=0)  # as precise as the row prints
    by = f" {amount(abs(delta), match, digits)}" if delta else ""
    return f"{word}{by}{pct} from {years[0]} to {years[1]}"


def amount(x: float, like: RowMatch, digits: int | None = None) -> str:
    """``x`` (base units) written in the scale and currency of the row it compares (``digits``: decimals)."""
    scale = "" if _PER_SHARE.search(like.row.label) else like.row.scale
    shown = x / lx.SCALES.get(scale, 1.0)
    if digits is None:
        digits = 0 if abs(shown) >= 100 or shown == int(shown) else 2
    text = f"{abs(shown):,.{digits}f}"
    if like.row.currency and not scale.endswith("元"):
        text = f"${text}"
    if scale:
        text = f"{text}{scale}" if scale.endswith("元") else f"{text} {scale}"
    return text


def names_a_span(text: str) -> bool:
    """Does the passage name a span within a year (a quarter, nine months: ``kb.core.lexicon.SPANS``) or a
    quarter ("Q3", "第三季度")?"""
    return bool(spans_named(text)) or bool(question_quarters(text))


def _span_of(header: str) -> int:
    """The span a column header names: 9 for "9M 2023" / "Nine months", 3 for "Q3 2023" / "Three months", else 0."""
    low = header.lower()
    if re.search(r"\b9m\b", low) or stated_months(low) == 9:
        return 9
    if re.search(r"\b6m\b|\bh1\b", low) or stated_months(low) == 6:
        return 6
    if question_quarters(header) or any(w in low for w in lx.SPANS[3]):
        return 3
    return 0


GENERIC = frozenset({"total", "net", "other", "gross", "amount", "amounts"})
"""Row-label words that name no measure on their own."""

_PAGE_FOOTER = re.compile(r"(?i)\bform\s+(?:10-?[kq]|20-?f|8-?k)\b|\bpage\s+\d+\s+of\s+\d+\b")


def _concept_words(concept: str) -> set[str]:
    """The words the vocabulary names a measure with (its label, printed lines and asked words)."""
    spec = CONCEPT_BY_NAME.get(concept)
    if spec is None:
        return set()
    return {t for phrase in (spec.label, *spec.printed, *spec.asked) for t in tokenize(phrase)}
