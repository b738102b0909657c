"""The one measure table (``kb.core.measures.MEASURES``): statement rows and formula rows in one place, every
name a row gives is how a question is read, every formula reads only the table's statement measures."""

from __future__ import annotations

import pytest

from kb.core import lexicon as lx
from kb.core.measures import CONCEPTS, MEASURE_BY_NAME, MEASURES, METRICS
from router.calc import catalog_formula, concepts
from router.reading import read_question


def test_one_row_per_name_and_no_name_on_two_rows() -> None:
    assert len(MEASURE_BY_NAME) == len(MEASURES) == len(CONCEPTS) + len(METRICS)
    owner: dict[str, str] = {}
    for m in MEASURES:
        for word in m.names:
            assert owner.setdefault(word.lower(), m.name) == m.name, f"{word!r} names {owner[word.lower()]} and {m.name}"


def test_formulas_read_only_statement_measures_of_the_table() -> None:
    statement = {c.name for c in CONCEPTS}
    for m in METRICS:
        formula = catalog_formula(m)
        terms = set(concepts(formula))
        assert terms and terms <= statement, (m.name, terms - statement)
        assert m.unit in {"%", "x", "days", "money"} and formula.unit == m.unit


def _ask(word: str) -> str:
    return f"Acme公司2023年的{word}是多少？" if lx.is_zh(word) else f"What was Acme's {word} in 2023?"


@pytest.mark.parametrize("row", MEASURES, ids=lambda m: m.name)
def test_every_name_of_a_row_reads_as_that_measure(row) -> None:  # noqa: ANN001
    kind = "metric" if row.formula else "concept"
    for word in row.names:
        read = read_question(_ask(word))
        assert (row.name, kind) in [(m.name, m.kind) for m in read.measures], word
