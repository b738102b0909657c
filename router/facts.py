"""Answers from stored financial facts (issue 21): when a question asks for a measure of the concept
vocabulary (``kb.core.measures.CONCEPTS``) — a look-up, a comparison, the highest or lowest, a ranking, categories
over stated ranges or directions, a change over time — the figures come from the ``facts`` table
(``ingest.facts``) of the needed documents, and the maximum, ranking, categories and changes are computed
here, exactly, each figure cited to its statement line. Offline and deterministic; with an LLM the rows and
the computed result are its first evidence.

The stage reads: the question (``ask``), the plan's needed documents (or every document of the collection or
filter for "which companies …" questions that name none) and their facts. It answers nothing (``None``) when
the question names no vocabulary measure or no needed document has a fact of it: the question takes the
text path.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import asyncpg
import msgspec

from kb.core import lexicon as lx
from kb.core.measures import CONCEPT_BY_NAME, METRIC_BY_NAME, Measure
from kb.core.periods import DAY_REACH, quarter_end
from kb.core.types import FactDraft
from kb.core.vocab import (
    STATEMENT_LABELS,
    company_core,
    concept_label,
    line_key,
    same_line,
)
from router import store
from router.calc import Formula, Term, concepts, evaluate, standard
from router.catalog import Catalog
from router.crosslang import name_in
from router.measures import DERIVED, STAND_INS, STANDS_FOR, measure_inside
from router.metadata import company_aliases
from router.question import MeasureRef, Question, Range
from router.scope import doc_entity
from router.types import Answer, CitationOut, RetrievedChunk, ScopePlan
from router.wording import EN, ZH, Words, date_text

Operation = str  # lookup | max | min | rank | categories | trend | yoy | screen | metric
MAX_MISSING_NAMED = 12
"""Documents without the figure named in an answer; the rest are counted."""


Category = Range
"""One stated group: its label and bounds (base units), or a direction ("increase", "decrease", "positive",
"negative", "zero", "other") — the typed question's ``Range``."""


class MeasureAsk(msgspec.Struct, frozen=True):
    """What a question asks of the facts: the concept, the operation, the stated years and groups."""

    concept: str
    operation: Operation
    years: tuple[int, ...] = ()
    categories: tuple[Category, ...] = ()
    change: bool = False  # categories by the change against the previous period
    percent: bool = False  # a percentage change is asked
    average: bool = False  # trend: the mean over the periods is asked
    lang: str = "en"  # the question's language: the answer's connecting words (router.wording)
    bounds: dict[str, float] = {}  # a stated screen: {"gt": 1e9} for "revenue above $1 billion" (operation screen)
    extreme: str = ""  # trend: the period asked for — "increase"/"decrease" (largest change), "max"/"min" (value)
    quarterly: bool = False  # trend: quarters asked ("各季度", "each Q1 from 2021 to 2024"): every report's figure
    span: tuple[dt.date, dt.date] | None = None  # trend: the calendar quarters stated first and last (their ends)
    months: int = 0  # the span a look-up states ("nine months", a quarter): its figure is read; 0: none stated
    quarter: int = 0  # the one fiscal quarter a look-up states ("2018年9月末", "Q3 2023"): that quarter's report
    loss: bool = False  # a profit measure asked as a loss ("the deepest net loss": the lowest figure)
    ascending: bool = False  # rank: lowest first
    limit: int | None = None  # rank: the first N only ("top 5")
    ends: dt.date | None = None  # a look-up's period end as written ("the quarter ended July 29, 2023")


class FactUsed(msgspec.Struct, frozen=True):
    """A stored fact an answer used, as the answer's table lists it (``marker`` cites it)."""

    marker: int
    doc_id: int
    doc_name: str
    entity: str
    concept: str
    label: str
    period_end: dt.date
    months: int
    value: float
    printed: str
    scale: float
    unit: str
    line_item: str
    statement: str
    page: int | None
    line: int | None


class FactsAnswer(msgspec.Struct, frozen=True):
    """The computed answer: text with [n] markers, the citations, the facts used, documents without the fact."""

    ask: MeasureAsk
    text: str
    citations: tuple[CitationOut, ...]
    used: tuple[FactUsed, ...]
    missing: tuple[str, ...]
    missing_ids: tuple[int, ...] = ()  # the documents read that do not state the measure
    verdict: bool = True  # False: the reading disagreed or left something unplaced (router.understood.abstained)

    def evidence(self) -> list[RetrievedChunk]:
        """The fact rows and the computed result as evidence blocks for an LLM (block i = marker i)."""
        out = []
        for c in self.citations:
            out.append(RetrievedChunk(chunk_id=-c.marker, doc_id=c.doc_id, doc_name=c.doc_name, node_id=c.node_id,
                                      section_path=c.section_path, text=c.text, page=c.pages[0], pages=c.pages,
                                      unit=c.unit, dense=0.0, bm25=0.0, fused=0.0, score=1.0, source="fact"))
        if out:  # the computed result: not a source, but what the figures add up to
            out.append(RetrievedChunk(chunk_id=0, doc_id=out[0].doc_id, doc_name="computed from the fact rows above",
                                      node_id="", section_path="statement facts", text=self.text, page=None,
                                      pages=(0, 0), unit="page", dense=0.0, bm25=0.0, fused=0.0, score=1.0,
                                      source="fact"))
        return out


# ------------------------------------------------------------------------------------------- the question

EXECUTED: Mapping[str, Operation] = {"lookup": "lookup", "compare": "lookup", "max": "max", "min": "min",
                                     "rank": "rank", "screen": "screen", "group": "categories", "series": "trend",
                                     "change": "trend"}
"""The typed question's operation → the executor's."""


def measure_of(q: Question) -> str:
    """The executor's name of the question's measure: a vocabulary concept, ``metric:<name>`` for a catalogue
    metric or one measure over another (``router.calc``), ``line:<label>`` for a printed line outside the
    vocabulary; "" for a formula the question defines (``router.metrics`` computes it) or none."""
    if not q.measures:
        return ""
    m = q.measures[0]
    if m.kind == "concept" and m.name in CONCEPT_BY_NAME:
        return m.name
    if m.kind == "line":
        return f"line:{m.name}"
    return f"metric:{m.name}" if standard(m.kind, m.name) is not None else ""


def _quarter_span(q: Question) -> tuple[dt.date, dt.date] | None:
    """The ends of the first and last quarter a question states as a span ("从2017年第三季度到2024年第一季度"),
    read as calendar quarters; None unless both ends are quarters."""
    ends = sorted((p.year, p.quarter) for p in q.periods if p.year and p.quarter)
    if len(ends) < 2:
        return None
    (y1, q1), (y2, q2) = ends[0], ends[-1]

    return quarter_end(y1, q1), quarter_end(y2, q2)


def _stated_span(q: Question) -> int:
    """The one span in months the question's periods state (9 for "nine months", 3 for a quarter), 0 when it
    states none or several, or a year."""
    spans = {p.months for p in q.periods}
    return spans.pop() if len(spans) == 1 and 0 < next(iter(spans)) < 12 else 0


def task(q: Question) -> MeasureAsk | None:
    """What the executor computes for a typed question, or None when no operation on a measure was read."""
    op = EXECUTED.get(q.operation or "")
    concept = measure_of(q)
    if op is None or not concept or q.over == "measures":  # an extreme over one company's measures: metrics
        return None
    years = tuple(sorted({p.year for p in q.periods if p.year}))
    extreme = ""
    if q.over == "periods" and op in ("max", "min"):  # "which year saw the largest decrease / the highest …"
        extreme = ("increase" if op == "max" else "decrease") if q.change else op
        op = "trend"
    if op == "trend" and q.operation == "change" and q.change == "yoy" and len(q.periods) == 1 \
            and q.periods[0].year and not q.over:
        op = "yoy"  # "Q3 2023 YoY growth": the stated period against the same period a year before
    change = op == "categories" and any(c.direction in ("increase", "decrease") for c in q.ranges)
    return MeasureAsk(concept, op, years, q.ranges, change=change or q.change in ("yoy", "qoq") and op == "categories",
                      percent=q.change in ("percent", "yoy", "qoq", "cagr"), average=q.average,
                      lang=q.lang, bounds=dict(q.bounds), extreme=extreme, ascending=q.order == "asc",
                      limit=q.limit, loss=q.sign == "loss",
                      quarterly=op == "trend" and any(p.quarter or p.months == 3 for p in q.periods),
                      span=_quarter_span(q) if op == "trend" else None, months=_stated_span(q),
                      quarter=q.periods[0].quarter if len(q.periods) == 1 and q.periods[0].year else 0,
                      ends=q.periods[0].ends if len(q.periods) == 1 else None)



def _fits(c: Category, value: float) -> bool:
    if c.low is not None and (value < c.low or (value == c.low and not c.low_inclusive)):
        return False
    return not (c.high is not None and (value > c.high or (value == c.high and not c.high_inclusive)))


# ------------------------------------------------------------------------------------------- reading facts


class _Row(FactDraft, frozen=True):
    """A stored fact of one document as the answer reads it (``parts``: a computed figure's printed lines)."""

    doc_id: int
    ordinal: int
    parts: tuple[_Row, ...] = ()  # a computed figure: the printed lines it is computed from


def formula_rows(f: Formula, rows: Sequence[_Row]) -> list[_Row]:
    """The formula per period a document prints (``router.calc``): each term of the period's end — a flow over
    the same span, a balance at its end, the mean of (or change between) the balances at the period's start and
    end — cited to every line used. A period where a term is not printed (or a divisor is zero) has no figure;
    a formula over a year's days is computed for twelve-month periods only."""
    by: dict[str, list[_Row]] = {}
    for c in concepts(f):
        own = sorted((r for r in rows if r.concept == c), key=lambda r: r.ordinal)
        if not own and c in STAND_INS:
            own = sorted((r for r in rows if r.concept == STAND_INS[c]), key=lambda r: r.ordinal)
        by[c] = own
    terms = list(f.terms.values())
    anchor = next((t for t in terms if t.fn == "v" and CONCEPT_BY_NAME[t.concept].flow), None) \
        or next((t for t in terms if t.fn == "v"), terms[0])
    out: list[_Row] = []
    for a in by[anchor.concept]:
        if f.per_year and a.months != 12:
            continue
        used: dict[str, tuple[_Row, ...]] = {}

        def at_end(c: str, a: _Row = a) -> _Row | None:
            return next((d for d in by[c] if d.period_end == a.period_end
                         and (d.months == a.months or 0 in (d.months, a.months))), None)

        def balances(c: str, a: _Row = a) -> tuple[_Row, _Row] | None:
            start = _months_before(a.period_end, a.months or 12)
            first = next((d for d in by[c] if d.months == 0 and abs((d.period_end - start).days) <= 7), None)
            last = next((d for d in by[c] if d.months == 0 and d.period_end == a.period_end), None)
            return None if first is None or last is None else (first, last)

        def value(t: Term, a: _Row = a, used: dict[str, tuple[_Row, ...]] = used) -> float | None:
            key = next(k for k, v in f.terms.items() if v is t)
            if t.fn in ("v", "opt"):
                row = a if t is anchor else at_end(t.concept)
                if row is None:
                    return 0.0 if t.fn == "opt" else None
                used[key] = (row,)
                return row.value
            pair = balances(t.concept)
            if pair is None:
                return None  # the balance at the period's start is not printed: no average, no figure
            used[key] = pair
            return (pair[0].value + pair[1].value) / 2 if t.fn == "avg" else pair[1].value - pair[0].value

        computed = evaluate(f, value)
        if computed is None:
            continue
        parts = tuple(dict.fromkeys(r for k in f.terms if k in used for r in used[k]))
        unit = f.unit if f.unit in ("%", "x", "days") else a.unit
        out.append(msgspec.structs.replace(
            a, concept=f.name, value=computed, printed="", scale=a.scale if unit == a.unit else 1.0, unit=unit,
            line_item=f"computed: {_shown_formula(f, used)}", parts=parts))
    return out


def _shown_formula(f: Formula, used: Mapping[str, tuple[_Row, ...]]) -> str:
    """The formula in the lines it read ("Net income ÷ average of Total assets")."""
    def term(m: re.Match[str]) -> str:
        t, rows = f.terms[m.group(0)], used.get(m.group(0), ())
        name = rows[-1].line_item if rows else CONCEPT_BY_NAME[t.concept].label
        return {"avg": "average of ", "chg": "change in "}.get(t.fn, "") + name
    expr = re.sub(r"\bt\d+\b", term, f.expr.removesuffix(" * 100"))
    return expr.replace(" / ", " ÷ ").replace(" * ", " × ").replace(" - ", " − ")


def _months_before(end: dt.date, months: int) -> dt.date:
    """The date ``months`` before ``end`` (a month's last day stays its last day)."""
    y, m = divmod(end.year * 12 + end.month - 1 - months, 12)
    last = (dt.date(y + (m + 1) // 12, (m + 1) % 12 + 1, 1) - dt.timedelta(days=1)).day
    return dt.date(y, m + 1, min(end.day, last) if end.day < 28 else last)


def derive(concept: str, rows: Sequence[_Row]) -> list[_Row]:
    """``concept`` computed per period from its two ``DERIVED`` operands (the first printed line of each)."""
    a_name, b_name = DERIVED[concept]
    first: dict[tuple[str, dt.date, int], _Row] = {}
    last: dict[tuple[str, dt.date, int], _Row] = {}
    for r in sorted(rows, key=lambda r: r.ordinal):
        first.setdefault((r.concept, r.period_end, r.months), r)
        last[(r.concept, r.period_end, r.months)] = r
    if b_name == "total_equity":  # equity including non-controlling interests closes the equity section
        first = {k: (last[k] if k[0] == b_name else v) for k, v in first.items()}
    out = []
    for (name, end, months), a in first.items():
        b = first.get((b_name, end, months))
        if name != a_name or b is None:
            continue
        out.append(msgspec.structs.replace(
            a, concept=concept, value=a.value - b.value, printed="", ordinal=a.ordinal,
            line_item=f"computed: {a.line_item} − {b.line_item}", parts=(a, b)))
    return out


def _rows(records: Sequence[asyncpg.Record]) -> list[_Row]:
    return [_Row(doc_id=r["document_id"], **{k: v for k, v in r.items() if k != "document_id"}) for r in records]


def _own_end(meta: Mapping[str, Any]) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(meta.get("period_end_date"))[:10])
    except ValueError:
        return None


def _fiscal_year(row: _Row, meta: Mapping[str, Any]) -> int:
    """The fiscal year a fact's period belongs to: the document's own fiscal year shifted by the year
    difference to its own period end (a fiscal year ending in January is named after its start)."""
    own, fy = _own_end(meta), meta.get("fiscal_year")
    if own is not None and isinstance(fy, int):
        return fy - (own.year - row.period_end.year)
    return row.period_end.year


def _pick(rows: Sequence[_Row], meta: Mapping[str, Any], years: Sequence[int],
          flow: bool, months: int = 0, ends: dt.date | None = None) -> tuple[_Row | None, list[_Row]]:
    """The fact answering for one document: of the stated year (else the document's own, latest period) — of the
    day written (``ends``: a prior-year column of a later report) when the document prints it —, of the
    stated span (``months``: the nine months' column, not the quarter's), else the quarter column of a quarterly
    report (the shortest period), the first printed line; and the other values printed for that period."""
    if years:
        rows = [r for r in rows if _fiscal_year(r, meta) in years or r.period_end.year in years]
    if ends is not None:
        rows = [r for r in rows if abs((r.period_end - ends).days) <= DAY_REACH] or rows
    if not rows:
        return None, []
    latest = max(r.period_end for r in rows)
    at = [r for r in rows if r.period_end == latest]
    if flow:
        spans = [r.months for r in at if r.months]
        want = months if months in spans else (12 if 12 in spans and meta.get("doc_type") in ("10k", "annual_report")
                                               else min(spans)) if spans else 0
        at = [r for r in at if r.months == want] or at
    best = min(at, key=lambda r: (bool(_PART.search(r.line_item)), r.ordinal))  # the total over a part of it
    others = [r for r in at if r is not best and abs(r.value - best.value) > 1e-9 and not r.parts]
    return best, others


_PART = re.compile(r"(?i)\bactivities\b.*\bcontinuing operations\b")
"""A cash flow line of continuing operations only, printed beside the total."""


def _comparative(rows: Sequence[_Row], best: _Row) -> _Row | None:
    """The previous period's fact of the same statement line (the prior-year column)."""
    same = [r for r in rows if r.line_item == best.line_item and r.statement == best.statement
            and r.months == best.months and r.period_end < best.period_end]
    return max(same, key=lambda r: r.period_end) if same else None


# ------------------------------------------------------------------------------------------- the answer


def money(value: float, row: _Row, w: Words = EN) -> str:
    """A figure as a reader reads it: "$9,284 thousand", "−$0.54 per share", "CNY 4,204,361,492.83",
    "5,000 thousand shares"; in Chinese "4,204,361,492.83元", "1,234.50万元"."""
    per_share = row.unit.endswith("/share")
    if row.unit == "%":
        return f"{value:.2f}%"
    if row.unit == "x":
        return f"{value:.2f}"
    if row.unit == "days":
        return f"{value:,.1f}{'天' if w.lang == 'zh' else ' days'}"
    shown = value / row.scale if row.scale not in (0, 1) else value
    sign = "−" if value < 0 else ""
    if row.unit == "shares":
        scale = f" {word}" if (word := lx.SCALE_NAMES.get(row.scale, ("", ""))[0]) else ""
        if w.lang == "zh":
            scale = lx.SCALE_NAMES.get(row.scale, ("", ""))[1]
        return f"{sign}{abs(shown):,.0f}{scale}{w.shares}"
    decimals = 2 if per_share or (abs(shown) < 100 and shown != int(shown)) or row.printed.count(".") else 0
    if (printed := re.search(r"\.(\d{3,4})\b", row.printed)) and row.scale in (0, 1):
        decimals = len(printed.group(1))  # as printed: a per-share figure of four decimals keeps them (2.6564元)
    if w.lang == "zh" and row.unit.startswith("CNY"):
        unit = (lx.SCALE_NAMES[row.scale][1] if row.scale in (1e3, 1e4, 1e6, 1e8) else "") + "元"
        return f"{sign}{abs(shown):,.{decimals}f}{unit}{w.per_share if per_share else ''}"
    currency = "CNY " if row.unit.startswith("CNY") else "$"
    body = f"{currency}{abs(shown):,.{decimals}f}"
    en, zh = lx.SCALE_NAMES.get(row.scale, ("", ""))
    scale = f" {en}" if en else f" {zh}" if row.scale in (1e4, 1e8) else ""
    return f"{sign}{body}{scale}{w.per_share if per_share else ''}"


def _period(row: _Row, w: Words = EN) -> str:
    day = date_text(row.period_end, w)
    if row.months == 0:
        return w.at.format(date=day)
    if row.months == 12:
        return w.year_ended.format(date=day, year=row.period_end.year)
    return w.months_ended.format(date=day, m=row.months)


def _where(row: _Row, w: Words = EN) -> str:
    kind = w.statements.get(row.statement, row.statement)
    if row.page is not None:
        return w.where_page.format(kind=kind, item=row.line_item, n=row.page)
    if row.line is not None:
        return w.where_line.format(kind=kind, item=row.line_item, n=row.line)
    return f"{kind}, “{row.line_item}”"


class _Doc(msgspec.Struct, frozen=True):
    doc_id: int
    name: str
    entity: str
    meta: dict[str, Any]


class _Writer:
    """Collects cited facts (each row gets one marker) and words them in the question's language."""

    def __init__(self, spec: Measure, docs: Mapping[int, _Doc], paths: Mapping[tuple[int, str], str],
                 w: Words = EN) -> None:
        self.spec, self.docs, self.paths, self.w = spec, docs, paths, w
        self.markers: dict[tuple[int, int], int] = {}
        self.cites: list[CitationOut] = []
        self.used: list[FactUsed] = []

    def cite(self, row: _Row) -> str:
        if row.parts:
            return "".join(self.cite(p) for p in row.parts)
        key = (row.doc_id, row.ordinal)
        if key not in self.markers:
            marker = len(self.markers) + 1
            self.markers[key] = marker
            doc = self.docs[row.doc_id]
            pos = row.page if row.page is not None else row.line or 0
            self.cites.append(CitationOut(
                marker=marker, doc_id=row.doc_id, doc_name=doc.name, node_id=row.node_id,
                section_path=self.paths.get((row.doc_id, row.node_id), STATEMENT_LABELS.get(row.statement, "")),
                pages=(pos, pos), text=f"{row.source}\n({STATEMENT_LABELS.get(row.statement, row.statement)}, "
                f"{row.period_label or _period(row)}; {self._label(row)} = {money(row.value, row)})",
                unit="page" if row.page is not None else "line"))
            self.used.append(FactUsed(
                marker=marker, doc_id=row.doc_id, doc_name=doc.name, entity=doc.entity, concept=row.concept,
                label=self._label(row), period_end=row.period_end, months=row.months, value=row.value,
                printed=row.printed, scale=row.scale, unit=row.unit, line_item=row.line_item,
                statement=row.statement, page=row.page, line=row.line))
        return f"[{self.markers[key]}]"

    def _label(self, row: _Row) -> str:
        """The measure a cited row states: a ratio's operands are their own measures."""
        spec = CONCEPT_BY_NAME.get(row.concept)
        return spec.label if spec is not None and row.concept != self.spec.name else self.spec.label

    def value(self, row: _Row) -> str:
        return money(row.value, row, self.w)

    def period(self, row: _Row) -> str:
        return _period(row, self.w)

    def figure(self, doc: _Doc, row: _Row, others: Sequence[_Row] = (), label: str = "") -> str:
        """The figure of one document, cited, with where it is printed (in Chinese after "<company>的<label>"
        when ``label`` is given: a look-up names what it states)."""
        w = self.w
        if w.lang == "zh":
            text = f"{doc.entity}{'的' + label if label else ''}：{self.value(row)}{self.period(row)}{self.cite(row)}（{_where(row, w)}）"
        else:
            text = f"{doc.entity}: {self.value(row)} {self.period(row)} {self.cite(row)} ({_where(row, w)})"
        for o in others:
            text += w.also.format(value=self.value(o), cite=self.cite(o), where=_where(o, w))
        return text


def _change(old: _Row, new: _Row, *, percent: bool = True, w: Words = EN) -> str:
    delta = new.value - old.value
    if delta == 0:
        return w.unchanged.format(new=money(new.value, new, w))
    same = old.scale == new.scale
    shown = money(abs(delta), new if same else msgspec.structs.replace(new, scale=1.0), w)
    pct = f" ({delta / abs(old.value) * 100:+.2f}%)" if percent and old.value else ""
    if w.lang == "zh" and pct:
        pct = f"（{delta / abs(old.value) * 100:+.2f}%）"
    template = w.increased if delta > 0 else w.decreased
    return template.format(delta=shown, pct=pct, old=money(old.value, old, w), new=money(new.value, new, w))


def compose(ask_: MeasureAsk, docs: Sequence[_Doc], rows_by_doc: Mapping[int, list[_Row]],
            paths: Mapping[tuple[int, str], str], spec: Measure | None = None) -> FactsAnswer | None:
    """The answer text computed from the facts (None when no document has the measure); ``spec`` for a
    printed line item outside the vocabulary."""
    spec = spec or CONCEPT_BY_NAME[ask_.concept]
    by_id = {d.doc_id: d for d in docs}
    ww = ZH if ask_.lang == "zh" else EN
    w = _Writer(spec, by_id, paths, ww)
    picked: list[tuple[_Doc, _Row, list[_Row]]] = []
    missing: list[str] = []
    missing_ids: list[int] = []
    trend = ask_.operation == "trend"
    distinct_entities = len({x.entity for x in docs}) == len(docs)
    for d in docs:
        rows = rows_by_doc.get(d.doc_id, [])
        best, others = _pick(rows, d.meta, () if trend else ask_.years, spec.flow, ask_.months,
                             None if trend else ask_.ends)
        if best is None:
            missing.append(d.entity if distinct_entities else d.name)
            missing_ids.append(d.doc_id)
        else:
            picked.append((d, best, others))
    if not picked:
        return None
    label = spec.chinese[0] if ww.lang == "zh" and spec.chinese else spec.label
    sep = "、" if ww.lang == "zh" else " and "
    lines: list[str] = []
    if ask_.operation in ("max", "min", "rank"):
        ordered = sorted(picked, key=lambda x: x[1].value, reverse=ask_.operation != "min")
        if ask_.operation != "rank" and (len(ordered) > 1 or len(docs) > 1):  # the others lack it: said below
            top = ordered[0]
            tied = [x[0].entity for x in ordered if x[1].value == top[1].value]
            if ask_.loss and top[1].value >= 0:  # a loss asked: none was reported, said before the lowest profit
                lines.append(ww.no_loss.format(label=label))
            lines.append(ww.verdict.format(
                names=sep.join(tied), verb="have" if len(tied) > 1 else "has", label=label,
                word=ww.highest if ask_.operation == "max" else ww.lowest, value=w.value(top[1]),
                period=w.period(top[1]), cite=w.cite(top[1])))
            if missing:  # the verdict covers the ones found only, and says so
                lines[-1] = lines[-1][:-1] + ww.among_found.format(n=len(picked), total=len(docs))
        ascending = ask_.operation == "min" or ask_.ascending
        if ascending and ask_.operation == "rank":
            ordered.reverse()
        if ask_.operation == "rank" and ask_.limit:
            ordered = ordered[:ask_.limit]
        head = [ww.by_company_ordered.format(label=label.capitalize(),
                                             order=ww.ascending if ascending else ww.descending)]
        head += [f"{i}. {w.figure(d, r, o)}" for i, (d, r, o) in enumerate(ordered, 1)]
        lines[:0] = head  # the verdict (with its superlative) comes last
    elif ask_.operation == "categories":
        cats = list(ask_.categories)
        if ask_.change and not any(c.direction == "other" for c in cats):  # no previous figure, or unchanged
            cats.append(Category(ww.other, direction="other"))
        groups: dict[str, list[str]] = {c.label: [] for c in cats}
        figures: list[str] = []
        for d, r, o in picked:
            if ask_.change:
                prev = _comparative(rows_by_doc.get(d.doc_id, []), r)
                direction = "other" if prev is None else ("increase" if r.value > prev.value else
                                                          "decrease" if r.value < prev.value else "zero")
                cat = next((c for c in cats if c.direction == direction), None) or \
                    next((c for c in cats if c.direction == "other"), None)
                figures.append(f"- {w.figure(d, r, o)}" + (f"; {_change(prev, r, w=ww)} {w.cite(prev)}" if prev
                                                           else ww.no_previous))
            else:
                sign = "positive" if r.value > 0 else "negative" if r.value < 0 else "zero"
                cat = next((c for c in ask_.categories if (c.low is not None or c.high is not None)
                            and _fits(c, r.value)), None) or \
                    next((c for c in ask_.categories if c.direction == sign), None) or \
                    next((c for c in ask_.categories if c.direction == "negative" and sign == "zero"
                          and "zero" in c.label.lower()), None) or \
                    next((c for c in ask_.categories if c.direction == "other"), None)
                figures.append(f"- {w.figure(d, r, o)}")
            if cat is not None:
                groups[cat.label].append(d.entity)
        lines.append(ww.by_company.format(label=label.capitalize()))
        lines += figures
        lines.append(ww.grouped.format(label=label))
        lines += [f"- {name}: {', '.join(members) if members else ww.none}" for name, members in groups.items()]
    elif ask_.operation == "yoy":
        end = "。" if ww.lang == "zh" else "."
        for d, r, o in picked:
            prev = _comparative(rows_by_doc.get(d.doc_id, []), r)
            same_time = prev is not None and abs((r.period_end - prev.period_end).days - 365) <= 10
            lines.append(w.figure(d, r, o) + (f"; {_change(prev, r, w=ww)} {w.cite(prev)}" if prev and same_time
                                              else ww.no_previous) + end)
    elif trend:
        lines += _trend_lines(ask_, picked, rows_by_doc, w)
    elif ask_.operation == "screen":
        lines += _screen_lines(ask_, picked, w)
    else:
        end = "。" if ww.lang == "zh" else "."
        lines += [w.figure(d, r, o) + end for d, r, o in picked] if len(picked) > 1 else \
            [ww.lookup.format(label=label.capitalize(), figure=w.figure(*picked[0], label=label if ww.lang == "zh"
                                                                         else ""))]
    if ask_.operation != "lookup" or len(picked) > 1:
        lines.insert(0, _headline(ask_, label, len(picked), ww))
    if missing:
        shown = ", ".join(missing[:MAX_MISSING_NAMED]) + (ww.more.format(n=len(missing) - MAX_MISSING_NAMED)
                                                          if len(missing) > MAX_MISSING_NAMED else "")
        lines.append(ww.missing.format(label=label, docs=shown))
    return FactsAnswer(ask=ask_, text="\n".join(lines), citations=tuple(w.cites), used=tuple(w.used),
                       missing=tuple(missing), missing_ids=tuple(missing_ids))


def _headline(ask_: MeasureAsk, label: str, n: int, ww: Words) -> str:
    """What was computed, before the verdict: "Computed from the statement figures: highest net income, FY2023,
    over 14 companies." (the operation as the executor ran it, so a reader sees a misreading at once)."""
    what = ww.computed_ops.get(ask_.extreme if ask_.extreme else ask_.operation, "").format(label=label)
    if ask_.average:
        what = ww.computed_ops["average"].format(label=label)
    joined = ("、" if ww.lang == "zh" else ", ").join(str(y) for y in ask_.years)
    years = ww.computed_years.format(years=joined) if ask_.years else ""
    over = "" if ask_.operation == "trend" else ww.computed_over_one if n == 1 else ww.computed_over.format(n=n)
    what = what[:1].upper() + what[1:]
    return ww.computed.format(what=what, years=years, over=over)


_BOUND_TEXT = {"gt": "above", "gte": "at least", "lt": "below", "lte": "at most"}


_BOUND_ZH = {"gt": "高于", "gte": "不低于", "lt": "低于", "lte": "不高于"}


def _screen_lines(ask_: MeasureAsk, picked: Sequence[tuple[_Doc, _Row, list[_Row]]], w: _Writer) -> list[str]:
    """The companies whose figure meets the stated bounds, highest first, and how many were checked."""
    def meets(value: float) -> bool:
        return all({"gt": value > b, "gte": value >= b, "lt": value < b, "lte": value <= b}[k]
                   for k, b in ask_.bounds.items())
    hits = sorted((x for x in picked if meets(x[1].value)), key=lambda x: -x[1].value)
    unit = msgspec.structs.replace(picked[0][1], scale=1.0, unit=picked[0][1].unit)
    zh = w.w.lang == "zh"
    words_of = _BOUND_ZH if zh else _BOUND_TEXT
    condition = ("且" if zh else " and ").join(f"{words_of[k]}{'' if zh else ' '}{money(b, unit, w.w)}"
                                              for k, b in ask_.bounds.items())
    year = (f"{ask_.years[0]}年" if zh else f" in {ask_.years[0]}") if len(ask_.years) == 1 else ""
    label = w.spec.chinese[0] if zh and w.spec.chinese else w.spec.label
    head = w.w.screen.format(hits=len(hits), n=len(picked), label=label, year=year, condition=condition)
    lines = [head + ((":" if not zh else "：") if hits else ("." if not zh else "。"))]
    lines += [f"{i}. {w.figure(d, r, o)}" for i, (d, r, o) in enumerate(hits, 1)]
    return lines


def _trend_lines(ask_: MeasureAsk, picked: Sequence[tuple[_Doc, _Row, list[_Row]]],
                 rows_by_doc: Mapping[int, list[_Row]], w: _Writer) -> list[str]:
    """One series per company: each report's own figure (annual reports only, when there are any: a quarter is
    not a point of a yearly trend), the prior-year columns for years no report covers, within the stated
    years (and the year before them: a "2023 report" covers fiscal 2022); each step's change and the overall
    change."""
    lines: list[str] = []
    by_entity: dict[str, list[tuple[_Doc, _Row]]] = {}
    also: dict[tuple[int, int], list[_Row]] = {}  # a report's own figure: the other values it prints for it
    for d, r, o in picked:
        by_entity.setdefault(d.entity, []).append((d, r))
        also[(r.doc_id, r.ordinal)] = o
    for entity, items in by_entity.items():
        annual = [(d, r) for d, r in items if r.months == 12 or d.meta.get("doc_type") in ("10k", "annual_report")]
        if not ask_.quarterly:  # quarters asked: every report's own figure (a year-to-date one where it is
            items = annual or items  # the report's own: Chinese third-quarter reports print nine months)
        series: dict[dt.date, _Row] = {}
        for _, r in sorted(items, key=lambda x: x[1].period_end):
            series[r.period_end] = r
        for d, r in items:  # the comparative columns fill the years no report is about
            for o in rows_by_doc.get(d.doc_id, []):
                if o.line_item == r.line_item and o.statement == r.statement and o.months == r.months:
                    series.setdefault(o.period_end, o)
        points = [series[k] for k in sorted(series)]
        if ask_.years:
            low, high = min(ask_.years) - 1, max(ask_.years)
            kept = [p for p in points if low <= p.period_end.year <= high]
            points = kept if len(kept) >= 2 else points
        if ask_.span and w.w.lang == "zh":  # a span of calendar quarters (Chinese reports): its points only
            kept = [p for p in points if ask_.span[0] <= p.period_end <= ask_.span[1]]
            points = kept if len(kept) >= 2 else points
        ww = w.w
        label = w.spec.chinese[0] if ww.lang == "zh" and w.spec.chinese else w.spec.label
        lines.append(f"{entity} — {label}{'：' if ww.lang == 'zh' else ':'}")
        if ww.lang == "zh":
            lines += [f"- {w.value(p)}{w.period(p)}{w.cite(p)}（{_where(p, ww)}）" for p in points]
        else:
            lines += [f"- {w.value(p)} {w.period(p)} {w.cite(p)} ({_where(p, ww)})" + "".join(
                ww.also.format(value=w.value(o), cite=w.cite(o), where=_where(o, ww))
                for o in also.get((p.doc_id, p.ordinal), ())) for p in points]
        names = {p.period_end: _point(p, ask_.quarterly, ww.lang) for p in points}
        for a, b in zip(points, points[1:], strict=False):
            lines.append(ww.step.format(y2=names[b.period_end], y1=names[a.period_end], change=_change(a, b, w=ww)))
        if len(points) > 2:
            lines.append(ww.overall.format(y1=names[points[0].period_end], y2=names[points[-1].period_end],
                                           change=_change(points[0], points[-1], w=ww)))
        lines += _extreme_lines(ask_, points, w)
        if ask_.average and len(points) > 1:
            mean = sum(p.value for p in points) / len(points)
            lines.append(ww.average.format(n=len(points), value=money(mean, points[-1], ww)))
        if len(points) == 1:
            lines.append(ww.one_period)
    return lines


def _point(p: _Row, quarterly: bool, lang: str) -> str:
    """How a step names a point of a series: its year ("2023", "2023年"), a quarter's point by its end
    ("Sep 30, 2017"; a Chinese report's calendar quarter: "2017年第三季度")."""
    end = p.period_end
    if not quarterly:
        return f"{end.year}年" if lang == "zh" else str(end.year)
    if lang == "zh" and end.month % 3 == 0:
        return f"{end.year}年第{'一二三四'[end.month // 3 - 1]}季度"
    return f"{end:%b} {end.day}, {end.year}"


def _extreme_lines(ask_: MeasureAsk, points: Sequence[_Row], w: _Writer) -> list[str]:
    """The period a "which year saw the largest decrease / had the highest …" question asks for."""
    ww = w.w
    steps = list(zip(points, points[1:], strict=False))
    if ask_.extreme in ("increase", "decrease") and steps:
        sign = 1 if ask_.extreme == "increase" else -1
        a, b = max(steps, key=lambda ab: sign * (ab[1].value - ab[0].value))
        if sign * (b.value - a.value) <= 0:
            return []  # no step went that way
        what = ww.increase if sign > 0 else ww.decrease
        return [ww.largest_step.format(what=what, y2=_point(b, ask_.quarterly, ww.lang),
                                       y1=_point(a, ask_.quarterly, ww.lang),
                                       change=_change(a, b, w=ww))]
    if ask_.extreme in ("max", "min") and len(points) > 1:
        top = (max if ask_.extreme == "max" else min)(points, key=lambda p: p.value)
        label = w.spec.chinese[0] if ww.lang == "zh" and w.spec.chinese else w.spec.label
        return [ww.extreme_point.format(word=ww.highest if ask_.extreme == "max" else ww.lowest, label=label,
                                        value=w.value(top), period=w.period(top), cite=w.cite(top))]
    return []


def facts_table(facts: FactsAnswer | None, answer: Answer) -> list[FactUsed]:
    """The facts a query result lists: those its answer was computed from, numbered as the answer cites them."""
    return numbered(facts.used, answer.citations) if facts and answer.mode.startswith("facts") else []


def numbered(used: Sequence[FactUsed], citations: Sequence[CitationOut]) -> list[FactUsed]:
    """The facts an answer used with the markers its final text gives them (numbering is in reading order; an
    LLM answer may leave a fact uncited: marker 0)."""
    out = []
    for f in used:
        unit, where = ("page", f.page) if f.page is not None else ("line", f.line)
        same_place = [c for c in citations if c.doc_id == f.doc_id and c.unit == unit and c.pages[0] == where]
        marker = next((c.marker for c in same_place if c.text.startswith(f.line_item[:40])
                       or f"“{f.line_item}”" in c.text), same_place[0].marker if len(same_place) == 1 else 0)
        out.append(msgspec.structs.replace(f, marker=marker))
    return out


# ------------------------------------------------------------------------------------------- the stage


def with_named(plan: ScopePlan, q: Question, catalog: Catalog, within: Sequence[int] | None = None) -> ScopePlan:
    """The plan with every company the question names (as the reader resolved it: a short name, a ticker, 简称)
    that routing did not place among the needed documents: its report of a stated year, else its latest. The
    typed question decides who is asked about; a request's filter (``within``) still bounds the documents."""
    if q.entities.scope != "named":
        return plan
    cores = {catalog.known.entity(str(m.get("company") or "")) for m in catalog.metadata(list(plan.needed)).values()}
    years = {p.year for p in q.periods if p.year}
    allowed = set(within) if within is not None else None
    add: list[int] = []
    names: list[str] = []
    for name in q.entities.names:
        core = catalog.known.entity(name)
        reports = tuple(d for d in catalog.reports.get(core, ()) if allowed is None or d in allowed)
        if core in cores or not reports:
            continue
        add.append(next((d for d in reports if catalog.docs[d].metadata.get("fiscal_year") in years), reports[0]))
        names.append(name)
    resolved = {w for n in q.entities.names for w in company_core(n).lower().split() if len(w) >= 3}
    missing = tuple(m for m in plan.scope.missing if not resolved & set(company_core(m).lower().split()))
    if not add and missing == plan.scope.missing:
        return plan
    scope = msgspec.structs.replace(plan.scope, entities=(*plan.scope.entities, *names), missing=missing)
    return msgspec.structs.replace(plan, scope=scope, needed=(*plan.needed, *add), added=(*plan.added, *add))


async def answer_from_facts(pool: asyncpg.Pool, catalog: Catalog, q: Question, plan: ScopePlan, *,
                            within: Sequence[int] | None = None) -> FactsAnswer | None:
    """The facts answer to the typed question ``q`` for the plan's needed documents (every document of the
    collection or filter when a "which companies …" question names none), or None when it asks no operation
    on a measure the facts state."""
    a = task(q)
    if a is None:
        return await _line_answer(pool, catalog, q, plan) if q.operation and q.operation in EXECUTED else None
    if a.concept.startswith("line:"):
        found = await _line_answer(pool, catalog, q, plan, a)
        if found is None and (inner := measure_inside(a.concept[5:])) is not None:  # no report prints the line
            found = await answer_from_facts(pool, catalog, msgspec.structs.replace(q, measures=(inner,)), plan,
                                            within=within)
            if found is not None:
                found = msgspec.structs.replace(found, text=_instead(a.concept[5:], inner, q.lang) + found.text)
        return found
    formula = standard(q.measures[0].kind, q.measures[0].name) if a.concept.startswith("metric:") else None
    measures = list(concepts(formula)) if formula else [a.concept]
    concepts_read = list(dict.fromkeys(c for m in measures for c in (m, *DERIVED.get(m, ()), *_stands_for(m),
                                                                     *((STAND_INS[m],) if m in STAND_INS else ()))))
    corpus = plan.scope.kind == "list" and not plan.scope.entities and a.operation in (
        "max", "min", "rank", "categories", "screen")
    if corpus:
        records = await store.collection_facts(pool, catalog.collection_id, concepts_read, within)
    else:
        flows = [CONCEPT_BY_NAME[c].flow for c in measures if c in CONCEPT_BY_NAME]
        ids = _reading(plan, catalog, a, balance=bool(flows) and not any(flows))
        if a.operation == "trend" and not plan.scope.entities and len(set(a.years)) >= 2:
            ids = _covering(catalog, a.years, ids)
        if not ids:
            return None
        records = await store.document_facts(pool, ids, concepts_read)
    def measured(records: Sequence[asyncpg.Record]) -> dict[int, list[_Row]]:
        printed: dict[int, list[_Row]] = {}
        for r in _rows(records):
            printed.setdefault(r.doc_id, []).append(r)
        out: dict[int, list[_Row]] = {}
        for d, doc_rows in printed.items():
            if formula is None:
                out[d] = measure_rows(a.concept, doc_rows, q.text)
            else:
                operands = [r for c in concepts(formula) for r in measure_rows(c, doc_rows)]
                if STAND_INS.keys() & set(concepts(formula)):
                    operands += [r for c in concepts(formula) if c in STAND_INS
                                 for r in measure_rows(STAND_INS[c], doc_rows)]
                out[d] = formula_rows(formula, operands)
        return out

    rows_by_doc = measured(records)
    if not corpus and a.operation == "lookup" and a.years:
        async def read(doc_ids: list[int]) -> dict[int, list[_Row]]:
            return measured(await store.document_facts(pool, doc_ids, concepts_read))

        ids = await _stating_year(catalog, ids, rows_by_doc, a.years, read)
    doc_ids = _one_per_company(list(rows_by_doc), rows_by_doc, catalog, a.years) if corpus else ids
    if corpus:  # a company whose statements state no such figure is named, not silently left out
        doc_ids = [*doc_ids, *_without_figure(catalog, doc_ids, within, a.years)]
    spec = None
    if formula is not None:
        top = CONCEPT_BY_NAME[concepts(formula)[0]]
        spec = Measure(name=a.concept, label=formula.label, printed=(), chinese=_chinese_names(formula.name),
                       kinds=top.kinds, unit="ratio", flow=any(CONCEPT_BY_NAME[c].flow for c in concepts(formula)))
    return await _compose(pool, catalog, plan, a, {d: rows_by_doc.get(d, []) for d in doc_ids}, spec)


async def _stating_year(catalog: Catalog, ids: Sequence[int], rows_by_doc: dict[int, list[_Row]],
                        years: Sequence[int], read: Callable[[list[int]], Awaitable[dict[int, list[_Row]]]]) -> list[int]:
    """A look-up of a stated year whose report states no figure of that year (routing picked the company's 8-K
    of the year; the balance at June 30, 2022 is printed in the FY2023 10-K): the company's report that does —
    an annual report first, then the latest — in its place (its rows added to ``rows_by_doc``)."""
    out = list(ids)
    for i, d in enumerate(ids):
        if any(_in_years(r, catalog, years) for r in rows_by_doc.get(d, [])):
            continue
        others = [x for x in catalog.company_reports(d) if x not in ids]
        if not others:
            continue
        found = await read(others)
        stating = [x for x in others if any(_in_years(r, catalog, years) for r in found.get(x, []))]
        if not stating:
            continue
        meta = catalog.metadata(stating)
        best = max(stating, key=lambda x: (str(meta.get(x, {}).get("doc_type") or "") in ("10k", "annual_report"),
                                           str(meta.get(x, {}).get("period_end_date") or "")))
        rows_by_doc[best] = found[best]
        out[i] = best
    return list(dict.fromkeys(out))


def _in_years(r: _Row, catalog: Catalog, years: Sequence[int]) -> bool:
    """Is the row of one of the stated years (fiscal, or its period ending in one)?"""
    fields = catalog.docs.get(r.doc_id)
    return _fiscal_year(r, fields.metadata if fields else {}) in years or r.period_end.year in years


def _without_figure(catalog: Catalog, found: Sequence[int], within: Sequence[int] | None,
                    years: Sequence[int]) -> list[int]:
    """The companies of the collection (or of the filter ``within``) none of whose reports gave a figure: for
    each, its report of a stated year, else its latest one (documents without a company are not companies)."""
    def company(d: int) -> str:
        fields = catalog.docs.get(d)
        name = str(fields.metadata.get("company") or "") if fields else ""
        return catalog.known.entity(name) if name else ""

    have = {company(d) for d in found}
    groups: dict[str, list[int]] = {}
    for d in (within if within is not None else catalog.docs):
        if (c := company(d)) and c not in have:
            groups.setdefault(c, []).append(d)
    out = []
    for ds in groups.values():
        meta = catalog.metadata(ds)
        of_year = [d for d in ds if meta.get(d, {}).get("fiscal_year") in years] or ds
        out.append(max(of_year, key=lambda d: str(meta.get(d, {}).get("period_end_date") or "")))
    return sorted(out)


def _chinese_names(metric: str) -> tuple[str, ...]:
    """A metric's Chinese names (the measure table's ``names``): the first is how a Chinese answer names it."""
    return tuple(w for w in row.names if lx.is_zh(w)) if (row := METRIC_BY_NAME.get(metric)) else ()


def _one_per_company(doc_ids: Sequence[int], rows_by_doc: Mapping[int, list[_Row]], catalog: Catalog,
                     years: Sequence[int]) -> list[int]:
    """A corpus-wide question compares companies, not reports: per company (renamed companies as one) the
    report that answers — of the stated year, an annual report first; else its latest report with the
    measure. Documents without a company stand for themselves."""
    groups: dict[str, list[int]] = {}
    for d in doc_ids:
        fields = catalog.docs.get(d)
        company = str(fields.metadata.get("company") or "") if fields else ""
        groups.setdefault(catalog.known.entity(company) if company else f"#{d}", []).append(d)
    out = []
    for ds in groups.values():
        meta = catalog.metadata(ds)
        candidates = [d for d in ds if rows_by_doc.get(d)]
        if years:
            candidates = [d for d in candidates if any(r.period_end.year in years for r in rows_by_doc[d])] or candidates
        if not candidates:
            continue
        out.append(max(candidates, key=lambda d: (
            bool(years) and str(meta.get(d, {}).get("doc_type") or "") in ("10k", "annual_report"),
            str(meta.get(d, {}).get("period_end_date") or ""))))
    return out


def _stands_for(concept: str) -> tuple[str, ...]:
    """The further measures a document's rows of ``concept`` are read with (``STANDS_FOR``, the balance sheet's
    cash beside an end-of-period cash line)."""
    spec = STANDS_FOR.get(concept)
    return (spec.other, *spec.unless) if spec is not None else ()


_RESTRICTED = re.compile(r"(?i)\brestricted\b")


def _covers(catalog: Catalog, reports: Sequence[int], years: Sequence[int]) -> bool:
    """Do a company's reports reach the first and the last stated year (a report of fiscal year Y or Y − 1: a
    "2024 report" is often about fiscal 2023)?"""
    own = {fy for d in reports if (f := catalog.docs.get(d)) is not None
           and isinstance(fy := f.metadata.get("fiscal_year"), int)}
    return len(reports) >= 2 and all(y in own or y - 1 in own for y in (min(years), max(years)))


def _covering(catalog: Catalog, years: Sequence[int], ids: Sequence[int]) -> list[int]:
    """The reports a change over stated years that names no company reads: the routed company's when its reports
    cover the years, else those of the one company of the collection whose reports do (several: as routed)."""
    if any(_covers(catalog, catalog.company_reports(d), years) for d in ids):
        return list(ids)
    found = [r for r in catalog.reports.values() if _covers(catalog, r, years)]
    return list(found[0]) if len(found) == 1 else list(ids)


def measure_rows(concept: str, rows: Sequence[_Row], question: str = "") -> list[_Row]:
    """A document's rows of a measure: as printed, else computed (``DERIVED``), else the line that states it
    (``STANDS_FOR``). A question asking for the cash at the end of a period without naming restricted cash
    is answered by the balance sheet's "cash and cash equivalents" at the same dates when the cash flow
    statement's end-of-period line includes restricted cash."""
    own = [r for r in rows if r.concept == concept]
    if own and concept == "cash_end" and not _RESTRICTED.search(question) \
            and all(_RESTRICTED.search(r.line_item) for r in own):
        dates = {r.period_end for r in own}
        balance = [msgspec.structs.replace(r, concept=concept, line_item=f"{r.line_item} (balance sheet; the cash "
                                           "flow statement's end-of-period line includes restricted cash)")
                   for r in rows if r.concept == "cash" and r.statement == "balance" and r.period_end in dates]
        if {r.period_end for r in balance} == dates:
            return balance
    if not own and concept in DERIVED:
        own = derive(concept, rows)
    spec = STANDS_FOR.get(concept)
    if not own and spec is not None and not any(r.concept in spec.unless for r in rows):
        other = [r for r in rows if r.concept == spec.other]
        named = concept_label(CONCEPT_BY_NAME[spec.other].label)  # "Cash and cash equivalents" over a "Cash" part
        other = [r for r in other if concept_label(r.line_item) == named] or other
        own = [msgspec.structs.replace(r, concept=concept, line_item=f"{r.line_item} ({spec.note})") for r in other]
    return own


def _reading(plan: ScopePlan, catalog: Catalog, a: MeasureAsk, balance: bool = False) -> list[int]:
    """The documents whose facts answer: the needed ones — each in place of the same company's report of the
    stated year (and quarter: "2018年9月末" is the third quarter's report, not the first's; and the day, when written:
    the report ending that day) when it is of another one (routing may pick the neighbouring filing); for a change
    over time every report of the company."""
    ids, op, years, quarter, ends = list(plan.needed), a.operation, a.years, a.quarter, a.ends
    if op == "trend":
        return list(dict.fromkeys(x for d in ids for x in (*catalog.company_reports(d), d)))
    if len(set(years)) == 1:
        ids = list(dict.fromkeys(_of_year(catalog, d, years[0], balance and not quarter) for d in ids))
        if ends is not None:
            ids = list(dict.fromkeys(_of_day(catalog, d, ends) for d in ids))
        elif quarter:
            ids = list(dict.fromkeys(_of_quarter(catalog, d, years[0], quarter) for d in ids))
    return ids


def _period_end(catalog: Catalog, doc_id: int) -> dt.date | None:
    f = catalog.docs.get(doc_id)
    try:
        return dt.date.fromisoformat(str(f.metadata.get("period_end_date") or "")[:10]) if f else None
    except ValueError:
        return None


def _of_day(catalog: Catalog, doc_id: int, ends: dt.date) -> int:
    """The company's report whose period ends on the day written (within a week: "July 29" and "July 30" name
    one 52/53-week quarter), else the one ending a year or two after it (its prior-year columns print that
    period), when ``doc_id`` ends on neither; unchanged when none does."""
    def gap(d: int) -> int | None:
        e = _period_end(catalog, d)
        return (e - ends).days if e is not None else None

    def near(d: int) -> bool:
        g = gap(d)
        return g is not None and abs(g) <= DAY_REACH

    if near(doc_id):
        return doc_id
    reports = catalog.company_reports(doc_id) or (doc_id,)
    if (same := next((d for d in reports if near(d)), None)) is not None:
        return same
    for years in (1, 2):  # the same period a year or two later: its prior-year columns print the day's figures
        later = [d for d in reports if (g := gap(d)) is not None and abs(g - 365 * years) <= DAY_REACH]
        if later:
            return later[0]
    return doc_id


def _of_quarter(catalog: Catalog, doc_id: int, year: int, quarter: int) -> int:
    """The company's report ending in that calendar quarter ("2018年9月末": the third quarter's report) when
    ``doc_id`` ends outside it; unchanged when the periods cannot be told (a fiscal year that is not the
    calendar's: its quarters are not these months)."""
    def ends_in(d: int) -> bool | None:
        """Does the report end in that calendar quarter? None when its period is not a calendar quarter's (a
        52/53-week or offset fiscal year: NVIDIA's second quarter ends in July)."""
        e = _period_end(catalog, d)
        if e is None or not re.match(r"\d{4}-(?:03-3[01]|06-30|09-30|12-31)", e.isoformat()):
            return None
        return e.year == year and (e.month - 1) // 3 + 1 == quarter

    if ends_in(doc_id) is not False:
        return doc_id
    same = [d for d in catalog.company_reports(doc_id) if ends_in(d)]
    return same[0] if same else doc_id


def _of_year(catalog: Catalog, doc_id: int, year: int, balance: bool = False) -> int:
    """The company's report of fiscal ``year`` (an annual one first) when ``doc_id`` is of neither that fiscal
    year nor a period ending in that calendar year ("Q2 2023" of a company whose fiscal 2024 began in 2023)."""
    def fiscal(d: int) -> object:
        f = catalog.docs.get(d)
        return f.metadata.get("fiscal_year") if f else None
    own = catalog.docs.get(doc_id)
    ends = str(own.metadata.get("period_end_date") or "") if own else ""
    if fiscal(doc_id) in (year, None) or ends.startswith(str(year)):
        return doc_id
    same = [d for d in catalog.company_reports(doc_id) if fiscal(d) == year]
    annual = [d for d in same if str(catalog.docs[d].metadata.get("doc_type") or "") in ("10k", "annual_report")]
    if balance and not annual and fiscal(doc_id) == year + 1:
        return doc_id  # a quarterly balance sheet of the next year prints the year's end beside its own date
    return (annual or same or [doc_id])[0]


async def _compose(pool: asyncpg.Pool, catalog: Catalog, plan: ScopePlan, a: MeasureAsk,
                   rows_by_doc: Mapping[int, list[_Row]], spec: Measure | None = None) -> FactsAnswer | None:
    """The answer over ``rows_by_doc`` (every document read, in order; an empty list: no figure in it)."""
    doc_ids = list(rows_by_doc)
    if not any(rows_by_doc.get(d) for d in doc_ids):
        return None
    metas, names = catalog.metadata(doc_ids), catalog.names(doc_ids)
    docs = [_Doc(d, names.get(d, str(d)), _entity(d, plan, metas, names, catalog), dict(metas.get(d, {})))
            for d in doc_ids]
    if a.operation == "trend":  # a renamed company's reports are one series, named as its latest report names it
        entity = {d.doc_id: d.entity for d in docs}
        docs = [msgspec.structs.replace(d, entity=next((entity[r] for r in catalog.company_reports(d.doc_id)
                                                        if r in entity), d.entity)) for d in docs]
    keys = list({(r.doc_id, r.node_id) for rows in rows_by_doc.values() for r in rows if r.node_id})
    paths = await store.node_paths(pool, keys)
    return compose(a, docs, rows_by_doc, paths, spec)


def named_line(question: str, labels: Sequence[str]) -> str:
    """The longest line item (``line_key``) the question names: four Chinese characters or two words at least."""
    norm = " " + " ".join(re.sub(r"[^a-z0-9\u4e00-\u9fff]+", " ", question.lower()).split()) + " "
    zh = "".join(question.split())
    best = ""
    for key in set(labels):
        if not key or len(key) <= len(best):
            continue
        if lx.is_zh(key):
            if len(key) >= 4 and key in zh:
                best = key
        elif len(key.split()) >= 2 and f" {key} " in norm:
            best = key
    return best


def _instead(line: str, inner: MeasureRef, lang: str) -> str:
    """The lead of an answer given by the measure a line's name holds, when no report read prints the line."""
    label = name_in(inner, lang) or CONCEPT_BY_NAME[inner.name].label
    if lang == "zh":
        return f"所读报告均未列示“{line}”这一行，以下为{label}：\n"
    return f"No report read prints a “{line}” line; what they state is {label}:\n"


def _rows_of_line(keyed: Sequence[tuple[str, _Row]], label: str, *, by_lemmas: bool = False) -> dict[int, list[_Row]]:
    """Each document's rows of the printed line ``label`` (``line_key``): printed so, else as the report prints it
    another way ("及" for "以及"); ``by_lemmas``: English compared word by word by lemma ("assets" is "asset")."""
    rows_by_doc: dict[int, list[_Row]] = {}
    words = lx.lemma_words(label) if by_lemmas and not lx.is_zh(label) else None
    for k, r in keyed:
        if k == label or (words is not None and not lx.is_zh(k) and lx.lemma_words(k) == words):
            rows_by_doc.setdefault(r.doc_id, []).append(r)
    exact = set(rows_by_doc)
    for k, r in keyed:  # a report that prints the line another way ("及" for "以及"): its own printing
        if k != label and r.doc_id not in exact and same_line(k, label):
            rows_by_doc.setdefault(r.doc_id, []).append(r)
    return rows_by_doc


async def _line_answer(pool: asyncpg.Pool, catalog: Catalog, q: Question, plan: ScopePlan,
                       a: MeasureAsk | None = None) -> FactsAnswer | None:
    """A question naming a statement line outside the vocabulary ("交易性金融资产", "other current liabilities"):
    the same answer over the needed documents' facts of that printed line — the line the question names among
    the documents' own printed lines (the longest), else the line the reading named."""
    probe = a or MeasureAsk("line", EXECUTED[q.operation or "lookup"], lang=q.lang)
    ids = _reading(plan, catalog, msgspec.structs.replace(probe, years=(), quarter=0, ends=None))  # any report
    if not ids:
        return None
    rows = _rows(await store.document_lines(pool, ids))
    keyed = [(line_key(r.line_item), r) for r in rows]
    label = named_line(q.text, [k for k, _ in keyed])
    if not label and a is not None:
        label = line_key(a.concept[5:])
    if not label:
        return None
    rows_by_doc, asked = _rows_of_line(keyed, label), ""
    for other in () if rows_by_doc else lx.line_equivalents(label):  # the line in the reports' own language
        if rows_by_doc := _rows_of_line(keyed, line_key(other), by_lemmas=True):
            asked = label  # named as the question names it, then as printed: "trading financial asset (交易性金融资产)"
            break
    if not rows_by_doc:
        return None
    first = next(iter(rows_by_doc.values()))[0]
    printed = first.line_item.strip().rstrip(":：")
    spec = Measure(name=f"line:{label}", label=f"{asked} ({printed})" if asked else printed, printed=(),
                   kinds=(first.statement,), unit="per_share" if first.unit.endswith("/share") else "money",
                   flow=first.statement != "balance")
    probe = msgspec.structs.replace(probe, concept=spec.name)
    return await _compose(pool, catalog, plan, probe, {d: rows_by_doc.get(d, []) for d in ids}, spec)


def _entity(doc_id: int, plan: ScopePlan, metas: Mapping[int, Mapping[str, Any]], names: Mapping[int, str],
            catalog: Catalog) -> str:
    """How the answer names a document's company: the question's company it is (a renamed company's reports
    are one company's), else the document's company, else its name."""
    company = doc_entity(metas.get(doc_id, {}))
    aliases = company_aliases(company) if company else set()
    group = catalog.known.entity(company) if company else ""
    name = f" {company_core(names.get(doc_id, ''))} "
    for e in plan.scope.entities:
        if aliases & company_aliases(e) or (group and catalog.known.entity(e) == group) \
                or (len(core := company_core(e)) >= 4 and f" {core} " in name):
            return e
    sub = plan.sub_question(doc_id)
    if sub is not None and sub.entity:
        return sub.entity
    return doc_entity(metas.get(doc_id, {})) or names.get(doc_id, str(doc_id))
