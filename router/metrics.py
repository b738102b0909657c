"""Financial metrics computed from stored statement facts: a formula the question defines ("DPO is defined as:
365 * (average accounts payable between FY2019 and FY2020) / (FY2020 COGS + change in inventory between FY2019
and FY2020)") or a standard one it names (quick ratio, working capital, EBITDA margin, effective tax rate,
inventory turnover, days payable outstanding, "<measure> % margin", "<A> as a % of <B>", …), for one company,
for a stated year, an N-year average or a change between two years.

Every input is a printed statement line of the company's reports (``facts``, ``ingest.facts``), cited; the
answer leads with the computed figure, then the formula with each input. A money figure is also restated in
the unit the question asks for ("Answer in USD millions"). Offline and deterministic; with an LLM the inputs
and the computed result are its first evidence (``router.synthesize``). Questions outside (several companies,
Chinese questions, a term no vocabulary measure names) take the ``router.facts`` or text path.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
import msgspec

from kb.core.measures import CONCEPT_BY_NAME, METRIC_BY_NAME, Measure
from kb.core.periods import Period
from kb.core.vocab import line_concept, question_concept
from router import store
from router.calc import Formula, Term, catalog_formula, check, evaluate, quotient
from router.catalog import Catalog
from router.facts import (
    FactsAnswer,
    MeasureAsk,
    _Doc,
    _entity,
    _fiscal_year,
    _period,
    _Row,
    _rows,
    _where,
    _Writer,
    derive,
    money,
)
from router.measures import DERIVED, STAND_INS
from router.question import Question
from router.types import ScopePlan
from router.wording import EN

_LABELS = {"v": "", "opt": "", "avg": "average ", "chg": "change in "}


class MetricAsk(msgspec.Struct, frozen=True):
    """What the question asks: the formula, the years, the aggregation and how to show the figure."""

    formula: Formula
    years: tuple[int, ...]
    aggregate: str  # "each" | "average" | "change" | "history" (every year stated, as a change)
    decimals: int | None
    scale: float | None  # a money figure in the asked unit (1e6 for "in USD millions")


# ------------------------------------------------------------------------------------------- the question

_DEFINED = re.compile(r"(?i)\b(?:is|are|be)\s+(?:defined|calculated|computed|measured)\s+as\s*:?\s*"
                      r"|\bdefine\s+(?:the\s+)?(?P<name>[\w% &/-]{2,50}?)\s+as\s*:?\s*")
_DEF_END = re.compile(r"(?<![\d.])\.(?:\s+|$)(?![\d])|\?|;|\n")
_OPS = re.compile(r"(\*|×|/|÷|\+|(?<=\s)-(?=\s)|−|–|\(|\))")
_YEAR_IN = re.compile(r"(?i)\b(?:fy|fiscal(?: year)?)?\s*'?((?:19|20)\d{2})\b")
_FROM = re.compile(r"(?i)\s*(?:from|on|in|of)\s+the\s+(?:cash flows?|income|balance sheet|p&l)[\w ]*$|\s*\([^)]*\)\s*$")


def _term_concept(phrase: str) -> str:
    """The vocabulary measure a formula term names ("FY2020 COGS" → cost_of_revenue), "" when none."""
    text = re.sub(r"(?i)\b(?:unadjusted|reported|total|gaap|net|the|of|year[- ]end|fiscal)\b", " ", phrase)
    return question_concept(phrase) or question_concept(text)


def _term(phrase: str) -> Term | None:
    phrase = _FROM.sub("", phrase.strip())
    years = tuple(sorted({int(y) for y in _YEAR_IN.findall(phrase)}))
    body = _YEAR_IN.sub(" ", phrase)
    body = re.sub(r"(?i)\b(?:between|and|from|to)\s*$|\bbetween\b.*$", " ", body).strip()
    fn = "v"
    if re.match(r"(?i)(?:the\s+)?(?:average|mean)\b", body):
        fn, body = "avg", re.sub(r"(?i)^(?:the\s+)?(?:average|mean)\s+(?:of\s+)?", "", body)
    elif re.match(r"(?i)(?:the\s+)?(?:change|increase|decrease)\s+in\b", body):
        fn, body = "chg", re.sub(r"(?i)^(?:the\s+)?(?:change|increase|decrease)\s+in\s+", "", body)
    concept = _term_concept(body)
    if not concept:
        return None
    if fn == "v" and len(years) > 1:
        return None
    return Term(fn, concept, years)


def parse_formula(text: str, name: str = "metric", label: str = "", unit: str = "x") -> Formula | None:
    """A formula written in words ("365 * (average accounts payable between FY2019 and FY2020) / (FY2020 COGS +
    change in inventory between FY2019 and FY2020)"), or None when a term names no vocabulary measure."""
    parts = [p for p in _OPS.split(text) if p and p.strip()]
    expr: list[str] = []
    terms: dict[str, Term] = {}
    for p in parts:
        p = p.strip()
        if p in ("*", "×"):
            expr.append("*")
        elif p in ("/", "÷"):
            expr.append("/")
        elif p in ("+",):
            expr.append("+")
        elif p in ("-", "−", "–"):
            expr.append("-")
        elif p in ("(", ")"):
            expr.append(p)
        elif re.fullmatch(r"[\d,]*\d(?:\.\d+)?%?", p):
            expr.append(str(float(p.rstrip("%").replace(",", "")) / (100 if p.endswith("%") else 1)))
        else:
            t = _term(p)
            if t is None:
                return None
            key = f"t{len(terms)}"
            terms[key] = t
            expr.append(key)
    if not terms:
        return None
    source = " ".join(expr)
    try:
        check(ast.parse(source, mode="eval"), set(terms))
    except (SyntaxError, ValueError):
        return None
    return Formula(name, label or name, source, terms, unit, defined=True)


def definitions(question: str) -> tuple[dict[str, Formula], str]:
    """The formulas the question states, by the name they define ("" for "X is defined as: …"), and the question
    without them."""
    found: dict[str, Formula] = {}
    rest = question
    for m in list(_DEFINED.finditer(question)):
        end = _DEF_END.search(question, m.end())
        body = question[m.end(): end.start() if end else len(question)]
        label = (m.group("name") or "").strip()
        if not label:  # "DPO is defined as": the words before
            before = re.findall(r"([\w%&/-]+(?:\s+[\w%&/-]+){0,5})\s*$", question[:m.start()])
            label = before[0] if before else ""
        name = label.lower()
        f = parse_formula(body, name=re.sub(r"\W+", "_", name)[:40] or "metric", label=label or "the defined metric",
                          unit=_defined_unit(name, body))
        if f is not None and f.unit == "%" and not re.search(r"\b100\b", body):
            f = msgspec.structs.replace(f, expr=f"({f.expr}) * 100")
        if f is not None:
            found[name] = f
            rest = rest.replace(question[m.start(): end.end() if end else len(question)], " ")
    return found, rest


def _defined_unit(name: str, body: str) -> str:
    """The unit of a defined metric: days for a "365 × …" or "days …" metric, percent for a margin or rate,
    money for a sum or difference of money measures, else a plain ratio."""
    if re.search(r"\bdays?\b|\bd[psi]o\b", name) or re.match(r"\s*\(?\s*36[05]\b", body):
        return "days"
    if re.search(r"%|\bmargin\b|\bpercent|\brate\b|\breturn on\b", name):
        return "%"
    if not re.search(r"[/÷]", body):
        return "money"
    return "x"


def named_formula(text: str, defined: Mapping[str, Formula]) -> Formula | None:
    """The metric the question names: a defined one, a catalogue one, "<measure> % margin" or "<A> as a % of
    <B>"."""
    low = text.lower()
    for name, f in defined.items():
        if name and re.search(rf"\b{re.escape(name)}\s*(?:%\s*)?margin\b", low) and "margin" not in name:
            return _margin_of(f)
    for name, f in defined.items():
        if name and name in low:
            return f
    if len(defined) == 1 and "" in defined:
        return defined[""]
    return None


def _margin_of(f: Formula) -> Formula:
    terms = {**f.terms, "rev": Term("v", "revenue")}
    return Formula(f"{f.name}_margin", f"{f.label} margin", f"({f.expr}) / rev * 100", terms, "%", defined=True)


_SCALE_OF_UNIT = {"thousand": 1e3, "million": 1e6, "billion": 1e9}


def formula_of(q: Question) -> Formula | None:
    """The formula of the typed question's measure: one the question defines (by the name the reader gave it),
    a catalogue metric, or one measure over another ("a / b * 100"); None for a plain measure."""
    if not q.measures:
        return None
    m = q.measures[0]
    if m.kind == "metric" and m.name in METRIC_BY_NAME:
        return catalog_formula(METRIC_BY_NAME[m.name])
    if m.kind != "formula":
        return None
    defined, rest = definitions(q.text)
    if defined and (f := named_formula(rest, defined)) is not None and f.name == m.name:
        return f
    return quotient(m.name)


def metric_task(q: Question) -> MetricAsk | None:
    """What the metric calculator computes for a typed question about one company: the formula, the years and
    how they are aggregated (each, the mean, the change between the first and last, or every year printed);
    None when the question asks no metric (or one period of a plain ratio: ``router.facts`` answers it)."""
    formula = formula_of(q)
    if formula is None or q.operation is None or q.lang == "zh" or q.unknown:
        return None  # what the reading could not place: not computed (the text path answers)
    years = sorted({p.year for p in q.periods if p.year})
    moved = q.operation in ("change", "series") or (q.operation == "compare" and len(years) >= 2)
    if not formula.defined and formula.name in METRIC_BY_NAME and formula.one_over_another\
            and len(years) <= 1 and not moved:
        return None
    explicit = sorted({y for t in formula.terms.values() for y in t.years})
    if not years and explicit:
        years = [max(explicit)]
    aggregate = "each"
    if len(years) >= 2 and q.average:
        years, aggregate = list(range(years[0], years[-1] + 1)), "average"
    elif len(years) >= 2 and moved:
        years, aggregate = (list(range(years[0], years[-1] + 1)) if years[-1] - years[0] <= 5 else years), "change"
    elif len(years) == 1 and q.operation == "change" and not explicit:  # "improving as of FY2023": against FY2022
        years, aggregate = [years[0] - 1, years[0]], "change"
    elif not years and q.operation == "series":
        aggregate = "history"
    return MetricAsk(formula, tuple(years), aggregate, q.decimals, _SCALE_OF_UNIT.get(q.unit))


async def answer_which(pool: asyncpg.Pool, catalog: Catalog, q: Question, plan: ScopePlan) -> FactsAnswer | None:
    """"Which of A, B and C is the largest / lost the least" for one company (an extreme over the measures the
    question lists): each measure's figure for the year, cited, and the verdict."""
    concepts = [m.name for m in q.measures if m.kind == "concept"] \
        if q.over == "measures" and q.operation in ("max", "min") else []
    most = q.operation == "max"
    if len(concepts) < 2 or len({CONCEPT_BY_NAME[c].flow for c in concepts}) > 1:
        return None
    co = await _Company.read(pool, catalog, plan)
    years = sorted({p.year for p in q.periods if p.year}) or [co.metas.get(co.first, {}).get("fiscal_year")]
    if not isinstance(years[-1], int):
        return None
    got = [(c, co.values.get(c, years[-1])) for c in concepts]
    found = [(c, r) for c, r in got if r is not None]
    if len(found) < 2:
        return None
    w = _Writer(Measure(name="which", label="measure", printed=()), co.docs, {}, EN)
    best = max(found, key=lambda x: x[1].value) if most else min(found, key=lambda x: x[1].value)
    word = "the highest" if most else "the lowest"
    lines = [f"{co.entity}, FY{years[-1]}: {CONCEPT_BY_NAME[best[0]].label} is {word}: "
             f"{money(best[1].value, best[1])} {w.cite(best[1])}."]
    for c, r in sorted(found, key=lambda x: -x[1].value):
        lines.append(f"- {CONCEPT_BY_NAME[c].label}: {money(r.value, r)} {_period(r)} {w.cite(r)} ({_where(r)})")
    lines += [f"- {CONCEPT_BY_NAME[c].label}: not stated for FY{years[-1]}" for c, r in got if r is None]
    ask_ = MeasureAsk(concept="which", operation="metric", years=(years[-1],))
    return FactsAnswer(ask=ask_, text="\n".join(lines), citations=tuple(w.cites), used=tuple(w.used), missing=())


async def answer_period_change(pool: asyncpg.Pool, catalog: Catalog, q: Question,
                               plan: ScopePlan) -> FactsAnswer | None:
    """A balance compared between a fiscal year's end and a quarter's ("any drop in cash between FY2023 and Q2 of
    FY2024?" read as a change between two periods, one a quarter): each period's end date from the company's own
    report for it (annual or quarterly), the balance at each date from any of its reports' columns, cited, and
    the change (absolute and %)."""
    periods = [Period(p.year, p.quarter) for p in q.periods if p.year]
    concept = q.measures[0].name if len(q.measures) == 1 and q.measures[0].kind == "concept" else ""
    if q.operation not in ("change", "compare") or len(periods) != 2 or not any(p.quarter for p in periods) \
            or concept not in CONCEPT_BY_NAME or CONCEPT_BY_NAME[concept].flow or q.lang != "en":
        return None
    ids = company_reports(catalog, plan)
    metas = catalog.metadata(ids)

    def end_of(p: Period) -> dt.date | None:
        for d in ids:
            m = metas.get(d, {})
            annual = str(m.get("doc_type") or "") in ("10k", "annual_report")
            if m.get("fiscal_year") == p.year and (annual if not p.quarter else m.get("fiscal_quarter") == p.quarter):
                try:
                    return dt.date.fromisoformat(str(m.get("period_end_date"))[:10])
                except ValueError:
                    return None
        return None

    ends = [end_of(p) for p in periods]
    if any(e is None for e in ends):
        return None
    co = await _Company.read(pool, catalog, plan, ids)
    rows: list[_Row] = []
    for end in ends:
        at = [r for r in co.values.rows.get(concept, []) if r.period_end == end and r.months == 0
              and r.statement in CONCEPT_BY_NAME[concept].kinds]
        if not at:
            return None
        rows.append(min(at, key=lambda r: (co.values.rank.get(r.doc_id, 99), r.ordinal)))
    spec = CONCEPT_BY_NAME[concept]
    w = _Writer(spec, co.docs, {}, EN)
    old, new = rows
    delta = new.value - old.value
    verb = "increased" if delta > 0 else "decreased" if delta < 0 else "was unchanged"
    by = f" by {money(abs(delta), new)}" + (f" ({delta / abs(old.value) * 100:+.1f}%)" if old.value else "") \
        if delta else ""
    lines = [f"{co.entity} — {spec.label} {verb}{by} from {periods[0].text()} to {periods[1].text()}: "
             f"{money(old.value, old)} {_period(old)} {w.cite(old)} → {money(new.value, new)} {_period(new)} "
             f"{w.cite(new)}.",
             f"- {periods[0].text()}: {money(old.value, old)} ({_where(old)})",
             f"- {periods[1].text()}: {money(new.value, new)} ({_where(new)})"]
    ask_ = MeasureAsk(concept=concept, operation="metric")
    return FactsAnswer(ask=ask_, text="\n".join(lines), citations=tuple(w.cites), used=tuple(w.used), missing=())


# ------------------------------------------------------------------------------------------- the values


class _Values:
    """The company's printed lines by measure and fiscal year, the routed report's first."""

    def __init__(self, rows: Sequence[_Row], metas: Mapping[int, Mapping[str, Any]], order: Sequence[int]) -> None:
        self.metas = metas
        self.rank = {d: i for i, d in enumerate(order)}
        self.first = order[0] if order else None
        self.rows: dict[str, list[_Row]] = {}
        for r in rows:
            concept = r.concept or line_concept(r.line_item)
            if concept:
                self.rows.setdefault(concept, []).append(msgspec.structs.replace(r, concept=concept))
        for name in DERIVED:  # computed per report: each report's own lines
            printed_in = {r.doc_id for r in self.rows.get(name, [])}
            operands: dict[int, list[_Row]] = {}
            for r in (r for c in DERIVED[name] for r in self.rows.get(c, [])):
                if r.doc_id not in printed_in:
                    operands.setdefault(r.doc_id, []).append(r)
            for rows_of_doc in operands.values():
                self.rows.setdefault(name, []).extend(derive(name, rows_of_doc))

    def get(self, concept: str, year: int) -> _Row | None:
        """The line stating ``concept`` for fiscal ``year`` (a flow over the year, a balance at its end); net
        income is the parent's share when no consolidated line is printed."""
        found = self._get(concept, year)
        if found is None and concept in STAND_INS:
            found = self._get(STAND_INS[concept], year)
        return found

    def years(self, concept: str) -> list[int]:
        """The fiscal years the routed report states ``concept`` for."""
        spec = CONCEPT_BY_NAME[concept]
        return sorted({_fiscal_year(r, self.metas.get(r.doc_id, {})) for r in self.rows.get(concept, [])
                       if r.doc_id == self.first and (r.months == 12 if spec.flow else r.months == 0)})

    def _get(self, concept: str, year: int) -> _Row | None:
        spec = CONCEPT_BY_NAME[concept]
        candidates = [r for r in self.rows.get(concept, [])
                      if _fiscal_year(r, self.metas.get(r.doc_id, {})) == year
                      and (r.months == 12 if spec.flow else r.months == 0)
                      and (not spec.kinds or r.statement in spec.kinds or r.parts)]
        if not candidates:
            return None

        def key(r: _Row) -> tuple[int, int, int]:
            own = self.metas.get(r.doc_id, {}).get("fiscal_year")
            return (self.rank.get(r.doc_id, 99), abs(own - year) if isinstance(own, int) else 99, r.ordinal)
        return min(candidates, key=key)


class _Company:
    """One company's reports for a question: the routed report first, then the company's others; their
    statement lines (``_Values``) and how the answer names and cites them."""

    def __init__(self, catalog: Catalog, plan: ScopePlan, rows: Sequence[_Row], ids: Sequence[int]) -> None:
        self.first = ids[0]
        self.ids = list(ids)
        self.metas, names = catalog.metadata(self.ids), catalog.names(self.ids)
        self.values = _Values(rows, self.metas, self.ids)
        self.docs = {d: _Doc(d, names.get(d, str(d)), _entity(d, plan, self.metas, names, catalog),
                             dict(self.metas.get(d, {}))) for d in self.ids}
        self.entity = self.docs[self.first].entity

    @classmethod
    async def read(cls, pool: asyncpg.Pool, catalog: Catalog, plan: ScopePlan,
                   ids: Sequence[int] | None = None) -> _Company:
        """``ids``: ``company_reports(catalog, plan)`` when the caller already has them."""
        ids = company_reports(catalog, plan) if ids is None else ids
        return cls(catalog, plan, _rows(await store.document_lines(pool, ids)), ids)


def company_reports(catalog: Catalog, plan: ScopePlan) -> list[int]:
    """The routed report first, then the company's other reports."""
    return list(dict.fromkeys([*plan.needed, *catalog.company_reports(plan.needed[0])]))


class _Computed(msgspec.Struct, frozen=True):
    year: int
    value: float | None
    inputs: tuple[tuple[Term, tuple[_Row, ...]], ...]
    missing: tuple[str, ...]


def _evaluate(formula: Formula, year: int, values: _Values) -> _Computed:
    inputs: list[tuple[Term, tuple[_Row, ...]]] = []
    missing: list[str] = []

    def term_value(t: Term) -> float | None:
        if t.fn in ("v", "opt"):
            ys = t.years or (year,)
        else:
            ys = t.years if len(t.years) == 2 else (year - 1, year)
        rows = [values.get(t.concept, y) for y in ys]
        if t.fn == "opt" and rows[0] is None:
            return 0.0
        if any(r is None for r in rows):
            missing.extend(f"{CONCEPT_BY_NAME[t.concept].label} (FY{y})" for y, r in zip(ys, rows, strict=True)
                           if r is None)
            return None
        got = tuple(r for r in rows if r is not None)
        inputs.append((t, got))
        if t.fn in ("v", "opt"):
            return got[0].value
        if t.fn == "avg":
            return sum(r.value for r in got) / len(got)
        return got[-1].value - got[0].value

    value = evaluate(formula, term_value)
    return _Computed(year, value, tuple(inputs), tuple(dict.fromkeys(missing)))


# ------------------------------------------------------------------------------------------- the answer


def _shown(value: float, a: MetricAsk, unit: str, like: _Row | None) -> str:
    if unit == "%":
        return f"{value:.{2 if a.decimals is None else a.decimals}f}%"
    if unit in ("x", "days"):
        text = f"{value:,.{2 if a.decimals is None else a.decimals}f}"
        return f"{text} days" if unit == "days" else text
    return in_asked_unit(value, like, a.scale, a.decimals)


def in_asked_unit(value: float, like: _Row | None, scale: float | None, decimals: int | None = None) -> str:
    """A money figure in the unit asked ("$5,466 million" for "in USD millions"), else as its lines print it."""
    if scale is None:
        if like is None:
            return f"${value:,.0f}"
        return money(value, msgspec.structs.replace(like, printed="", unit=like.unit or "USD"))
    shown = value / scale
    digits = decimals if decimals is not None else (2 if abs(shown) < 100 else 0)
    word = {1e3: "thousand", 1e6: "million", 1e9: "billion"}[scale]
    sign = "−" if value < 0 else ""
    return f"{sign}${abs(shown):,.{digits}f} {word}"


def _input_text(t: Term, rows: Sequence[_Row], w: _Writer) -> str:
    label = _LABELS[t.fn] + CONCEPT_BY_NAME[t.concept].label
    shown = "; ".join(f"{money(r.value, r)} {_period(r)} {w.cite(r)} ({_where(r)})" for r in rows)
    return f"- {label}: {shown}"


def compose_metric(a: MetricAsk, entity: str, computed: Sequence[_Computed], w: _Writer) -> str:
    """The answer text: the asked figure first, then how it is computed, then each input cited."""
    f = a.formula
    done = [c for c in computed if c.value is not None]
    like = next((rows[0] for c in done for _, rows in c.inputs), None)
    lines: list[str] = []
    if a.aggregate == "average" and len(done) == len(computed) and done:
        mean = sum(c.value for c in done if c.value is not None) / len(done)
        each = "; ".join(f"FY{c.year} {_shown(c.value, a, f.unit, like)}" for c in done if c.value is not None)
        lines.append(f"{entity} — {len(done)}-year average {f.label}, FY{done[0].year}–FY{done[-1].year}: "
                     f"{_shown(mean, a, f.unit, like)} ({each}).")
    elif a.aggregate == "change" and len(done) >= 2:
        first, last = done[0], done[-1]
        assert first.value is not None and last.value is not None
        lines.append(f"{entity} — {f.label} {_moved(first.value, last.value, a, f.unit, like)}: "
                     f"FY{first.year} {_shown(first.value, a, f.unit, like)} → "
                     f"FY{last.year} {_shown(last.value, a, f.unit, like)}.")
        if len(done) > 2:  # each year's step
            for old, new in zip(done, done[1:], strict=False):
                assert old.value is not None and new.value is not None
                lines.append(f"- FY{old.year} → FY{new.year}: {_moved(old.value, new.value, a, f.unit, like)} "
                             f"({_shown(old.value, a, f.unit, like)} → {_shown(new.value, a, f.unit, like)})")
    else:
        for c in done:
            assert c.value is not None
            lines.append(f"{entity} — {f.label}, FY{c.year}: {_shown(c.value, a, f.unit, like)}.")
    if not lines:
        return ""
    lines.append(f"Computed as {'the question defines it' if f.defined else 'usual'}: {_formula_text(f)}.")
    for c in computed:
        if len(computed) > 1:
            lines.append(f"FY{c.year}:")
        lines += [_input_text(t, rows, w) for t, rows in c.inputs]
    gaps = [m for c in computed for m in c.missing]
    if gaps:
        lines.append("Not stated in the statements read: " + ", ".join(dict.fromkeys(gaps)) + ".")
    return "\n".join(lines)


def _moved(old: float, new: float, a: MetricAsk, unit: str, like: _Row | None) -> str:
    """"increased by 0.12 percentage points", "decreased by $413 million", "was unchanged"."""
    delta = new - old
    if not delta:
        return "was unchanged"
    verb = "increased" if delta > 0 else "decreased"
    if unit == "%":
        return f"{verb} by {abs(delta):.2f} percentage points"
    pct = f" ({delta / abs(old) * 100:+.1f}%)" if old else ""
    return f"{verb} by {_shown(abs(delta), a, unit, like)}{pct}"


def _formula_text(f: Formula) -> str:
    text = f.expr
    for key, t in sorted(f.terms.items(), key=lambda kv: -len(kv[0])):
        years = f" between FY{t.years[0]} and FY{t.years[-1]}" if len(t.years) == 2 else \
            f" FY{t.years[0]}" if t.years else ""
        text = re.sub(rf"\b{key}\b", _LABELS[t.fn] + CONCEPT_BY_NAME[t.concept].label + years, text)
    text = re.sub(r"\b(\d+)\.0\b", r"\1", text)
    return text.replace("*", "×").replace("/", "÷").replace("( ", "(").replace(" )", ")")


async def answer_metric(pool: asyncpg.Pool, catalog: Catalog, q: Question, plan: ScopePlan) -> FactsAnswer | None:
    """The metric's answer to the typed question about one company, or None (another path answers)."""
    if not plan.needed or len({catalog.known.entity(str(m.get("company") or ""))
                               for m in catalog.metadata(list(plan.needed)).values()}) > 1:
        return None  # several companies: router.facts compares them
    a = metric_task(q)
    if a is None:
        return await answer_which(pool, catalog, q, plan) or await answer_period_change(pool, catalog, q, plan)
    co = await _Company.read(pool, catalog, plan)
    years = list(a.years)
    if not years and a.aggregate == "history":  # every year the routed report's statements show
        stated = [set(co.values.years(t.concept)) for t in a.formula.terms.values() if t.fn != "opt"]
        years = sorted(set.intersection(*stated)) if stated else []
        a = msgspec.structs.replace(a, aggregate="change")
    if not years:
        own = co.metas.get(co.first, {}).get("fiscal_year")
        if not isinstance(own, int):
            return None
        years = [own]
    if a.aggregate == "each" and len(years) > 1:
        years = years[-1:]
    computed = [_evaluate(a.formula, y, co.values) for y in years]
    if not any(c.value is not None for c in computed):
        return None
    used_rows = [r for c in computed for _, rs in c.inputs for r in rs]
    keys = list({(r.doc_id, r.node_id) for r in used_rows if r.node_id})
    paths = await store.node_paths(pool, keys)
    spec = Measure(name=f"metric:{a.formula.name}", label=a.formula.label, printed=(), unit="ratio")
    w = _Writer(spec, co.docs, paths, EN)
    text = compose_metric(a, co.entity, computed, w)
    if not text:
        return None
    ask_ = MeasureAsk(concept=spec.name, operation="metric", years=tuple(years))
    return FactsAnswer(ask=ask_, text=text, citations=tuple(w.cites), used=tuple(w.used), missing=())


def restate(facts: FactsAnswer | None, q: Question) -> FactsAnswer | None:
    """A one-figure look-up in the unit the question asks for ("in USD millions": "$5,466,312 thousand" is also
    "$5,466 million")."""
    if facts is None or facts.ask.operation != "lookup" or len(facts.used) != 1:
        return facts
    scale = _SCALE_OF_UNIT.get(q.unit)
    used = facts.used[0]
    if scale is None or used.scale == scale or used.unit.endswith("/share") or used.unit in ("%", "x", "shares"):
        return facts
    line = f"In {q.unit}s, as asked: {in_asked_unit(used.value, None, scale, q.decimals)}."
    return msgspec.structs.replace(facts, text=f"{facts.text}\n{line}")
