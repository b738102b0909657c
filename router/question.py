"""The typed question: what a corpus-wide question asks, read once, as one frozen value.

A question names measures (a vocabulary concept such as ``revenue``, a ratio or metric such as
``return_on_equity``, a printed line item, or a formula the question defines), entities (named companies, or
the whole collection or filter), periods (fiscal years, quarters, stated spans such as nine months / 前三季度,
or relative: latest, last N years), one operation (look-up, compare, max, min, rank, screen, group into
ranges, series, change), how a change is measured, a sign ("largest loss"), whether an extreme is over
periods ("which year saw the largest decrease": ``over="periods"``, ``change`` set, operation ``min``), whether
the mean over the periods is asked, an order and a limit, ranges or
bounds, and the unit and decimals asked. What the reader (``router.reading``) could not place is kept in
``unknown``: a question with anything there is not answered with a verdict.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

import msgspec

Operation = Literal["lookup", "compare", "max", "min", "rank", "screen", "group", "series", "change"]
OPERATIONS: tuple[str, ...] = ("lookup", "compare", "max", "min", "rank", "screen", "group", "series", "change")
ChangeBasis = Literal["", "absolute", "percent", "yoy", "qoq", "cagr"]
MeasureKind = Literal["concept", "metric", "line", "formula"]
EntityScope = Literal["named", "collection", "filter"]


NO_MEASURE = "no measure the reports state was found"
"""What the reader leaves in ``unknown`` when no word names a measure: soft — a printed line of the collection's
own reports, or a measure found by meaning, may still name it."""
SOFT = (NO_MEASURE,)
"""What the reading may miss that the executor still finds."""


def unsure_of(phrase: str, measure: str) -> str:
    """What the reading says of a one-word measure in a phrase that may name another measure."""
    return f"not sure that '{phrase}' is {measure.replace('_', ' ')}"


class MeasureRef(msgspec.Struct, frozen=True):
    """A measure: a row of the measure table by name (``revenue``, ``return_on_equity``), or a printed line
    item (``kind="line"``, its label) or a formula the question defines (``kind="formula"``, its name)."""

    name: str
    kind: MeasureKind = "concept"


class Entities(msgspec.Struct, frozen=True):
    """Who is asked about: named companies (as the collection names them), or every company of the
    collection or of the request's filter."""

    scope: EntityScope = "collection"
    names: tuple[str, ...] = ()


class PeriodRef(msgspec.Struct, frozen=True):
    """A period: fiscal ``year`` with ``quarter`` (0: none) and the span in ``months`` (12 a year, 3 a quarter,
    6 a half year, 9 the first nine months); or relative: ``latest`` (the most recent reported) or ``last_n``
    (the last ``n`` fiscal years)."""

    year: int | None = None
    quarter: int = 0
    months: int = 12
    relative: Literal["", "latest", "last_n"] = ""
    n: int = 0
    ends: dt.date | None = None  # the day the period ends, when the question writes it ("quarter ended July 29, 2023")


class Range(msgspec.Struct, frozen=True):
    """One group of a categorisation: its label and bounds in base units (a share in percent points), or a
    direction of change (``increase``, ``decrease``, ``positive``, ``negative``, ``zero``)."""

    label: str
    low: float | None = None
    low_inclusive: bool = False
    high: float | None = None
    high_inclusive: bool = False
    direction: str = ""


class Question(msgspec.Struct, frozen=True):
    """One question as understood. ``operation`` None: no operation on stored figures was understood (the
    text path answers). ``unknown``: what was not understood — an operation word left unused, two measures
    competing, a range that cannot be read, a name the collection does not hold — said to the reader instead
    of a verdict."""

    text: str
    lang: Literal["en", "zh"] = "en"
    operation: Operation | None = None
    measures: tuple[MeasureRef, ...] = ()
    entities: Entities = Entities()
    periods: tuple[PeriodRef, ...] = ()
    change: ChangeBasis = ""
    sign: Literal["", "loss"] = ""
    order: Literal["", "asc", "desc"] = ""
    over: Literal["", "periods", "measures"] = ""  # the extreme is over one company's periods ("which year …")
    # or over the measures it lists ("which of cost of revenue, opex and net income was the largest"), not companies
    average: bool = False  # the mean over the stated periods is asked
    limit: int | None = None
    ranges: tuple[Range, ...] = ()
    bounds: dict[str, float] = {}
    unit: str = ""
    decimals: int | None = None
    unknown: tuple[str, ...] = ()
    meaning: str = ""  # a measure found by meaning: "phrase ~ measure (similarity)" (router.meaning)
    unsure: tuple[tuple[str, str], ...] = ()  # (phrase, measure): a one-word measure with a word beside it
    # that nothing accounts for ("unearned revenue", revenue) — named in ``unknown``; matching by meaning decides
    source: Literal["rules", "llm"] = "rules"  # who read it: the rules (router.reading) or the LLM, validated
    rules: Question | None = None  # an LLM reading: the rules' reading beside it (the trace shows both)

    @property
    def understood(self) -> bool:
        """An operation on at least one measure, with nothing left over."""
        return self.operation is not None and bool(self.measures) and not self.unknown

    @property
    def hard_unknown(self) -> tuple[str, ...]:
        """What was not understood that neither the executor nor matching by meaning may still settle."""
        soft = {*SOFT, *(unsure_of(p, m) for p, m in self.unsure)}
        return tuple(u for u in self.unknown if u not in soft)

    @property
    def concept(self) -> str:
        """The one measure-table row asked for ("How much cash did Helios generate from operations": cfo), the
        measure a text answer looks for; "" when it asks for none, several, a printed line or a formula."""
        concepts = {m.name for m in self.measures if m.kind == "concept"}
        return next(iter(concepts)) if len(concepts) == 1 and len(self.measures) == 1 else ""
