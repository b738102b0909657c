"""Views of the one measure table (``kb.core.measures.MEASURES``) for the router: every name a question may
give a measure (``measure_names``) and how a measure a statement does not print is had — computed from two it
prints (``DERIVED``) or stated by another line (``STANDS_FOR``, ``STAND_INS``). One calculator evaluates the
table's formulas (``router.calc``): ``router.metrics`` for one company's fiscal years, ``router.facts`` for each
period the reports print, across companies and in Chinese.
"""

from __future__ import annotations

from kb.core import lexicon as lx
from kb.core.measures import CONCEPTS, METRICS, StandsFor
from kb.core.vocab import measure_phrases
from router.question import MeasureRef


def measure_names() -> dict[str, MeasureRef]:
    """Every name of a measure (lower case): the metrics' names, the statement measures' names and their printed
    labels — what a question names a measure with."""
    names: dict[str, MeasureRef] = {}
    for m in METRICS:
        for w in m.names:
            names.setdefault(w.lower(), MeasureRef(m.name, "metric"))
    for c in CONCEPTS:
        for w in c.names:
            names.setdefault(w.lower(), MeasureRef(c.name))
    for phrase, name in measure_phrases():
        names.setdefault(phrase, MeasureRef(name))
    return names


def measure_inside(line: str) -> MeasureRef | None:
    """The longest statement measure of two words or more named inside a printed line's name, word by word by
    lemma ("financing activities" in "cash inflow from financing activities"), or None unless every other word of
    the name is one of ``_ONLY_AROUND``."""
    words = lx.lemma_words(line)
    for phrase, ref in _CONCEPT_PHRASES:
        n = len(phrase)
        for i in range(len(words) - n + 1):
            if n < len(words) and words[i:i + n] == phrase and set(words[:i] + words[i + n:]) <= _ONLY_AROUND:
                return ref
    return None


_ONLY_AROUND = frozenset({"cash", "inflow", "outflow", "from", "of", "the"})
"""The words a line's name may hold besides the measure for the measure to stand in for it ("cash inflow from
financing activities"); any other word makes it another measure ("deferred income tax liability" is no income
tax, "net profit from discontinued operation" no net profit)."""

_CONCEPT_PHRASES = sorted({(lx.lemma_words(p), r) for p, r in measure_names().items()
                           if r.kind == "concept" and not lx.is_zh(p) and len(lx.lemma_words(p)) > 1},
                          key=lambda x: (-len(x[0]), x[0]))


# ------------------------------------------------------------------------ measures a statement may not print

DERIVED: dict[str, tuple[str, ...]] = {c.name: c.derived for c in CONCEPTS if c.derived}
"""Measures a statement may not print, computed as the difference of two it prints (the table's ``derived``)."""
STANDS_FOR: dict[str, StandsFor] = {c.name: c.stands_for for c in CONCEPTS if c.stands_for is not None}
"""A measure a statement without it states by another line (the table's ``stands_for``)."""
STAND_INS = {c.name: c.stand_in for c in CONCEPTS if c.stand_in}
"""For the metric calculator: a measure read from another line when a statement prints no line of its own."""
