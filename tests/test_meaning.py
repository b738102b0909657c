"""Measures by meaning (``router.meaning``): the words a question leaves unplaced, embedded by the bundled
MiniLM and matched to every measure name — taken only when clearly nearest, else no measure (and no verdict)."""

from __future__ import annotations

import asyncio

import pytest

from kb.core.providers.embed import build_embedder
from router.meaning import MeaningIndex, unplaced
from router.reading import read_question, unplaced_words

FIRMS = {"Harbor Freight Logistics, Inc.": (), "Quillon Biotherapeutics Corp.": (), "Tessaract Semiconductor Ltd": ()}


@pytest.fixture(scope="module")
def index() -> MeaningIndex:
    return MeaningIndex(build_embedder("all-MiniLM-L6-v2"))


def _match(index: MeaningIndex, question: str):  # noqa: ANN202
    q = read_question(question, FIRMS)
    assert not q.measures, q.measures  # no word of it names a measure
    phrase = unplaced(unplaced_words(question, FIRMS))
    return q, asyncio.run(index.match(phrase, index.embedder.embed_batch([phrase])[0]))


def test_a_measure_in_other_words_is_found_by_meaning(index: MeaningIndex) -> None:
    q, found = _match(index, "Rank Harbor Freight, Quillon and Tessaract by money generated from operations in 2023")
    assert q.operation == "rank" and found.ref is not None and found.ref.name == "cfo", found
    _, found = _match(index, "Whose operating money was the largest in 2023?")
    assert found.ref is not None and found.ref.name == "cfo", found


def test_no_measure_is_guessed_below_the_threshold(index: MeaningIndex) -> None:
    for question in ("Which company had the largest headcount in 2023?", "Who chairs Quillon's board?",
                     "How much did Tessaract pay out to shareholders in 2023?"):  # dividends, not equity: unsure
        _, found = _match(index, question)
        assert found.ref is None, (question, found)


def test_unplaced_words_leave_out_companies_periods_and_cues() -> None:
    assert unplaced_words("Which company had the largest headcount in Q3 2023?", FIRMS) == ["headcount"]
    assert unplaced_words("Rank Quillon and Tessaract by staff costs, highest first", FIRMS) == ["staff", "costs"]
    assert unplaced_words("哪家公司2023年的人工成本最高？", FIRMS) == ["人工成本"]
