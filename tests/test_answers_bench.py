"""`kb bench answers` scores an answer's lead: right, confidently wrong, silent or other
(``kb.bench.answers_bench``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.bench.answers_bench import (
    DEFAULT_QUESTIONS,
    AnswerCase,
    lead_of,
    load_cases,
    numbers,
    score,
    states,
    summarise,
)

pytestmark = pytest.mark.unit


def _case(kind: str = "figure", gold: tuple[str, ...] = ("792.5",)) -> AnswerCase:
    return AnswerCase(id="t1", corpus="samples", kind=kind, question="q", gold=gold)


def test_the_lead_is_the_first_sentence_or_a_headline_with_its_line() -> None:
    assert lead_of("Net sales were $792.5 million. The quarter's were $268.4 million.") == \
        "Net sales were $792.5 million."
    assert lead_of("Highest revenue, 2023, over 3 companies:\n1. Aurora Pharma: $2,146.8 million [1]\n"
                   "2. Helios: $497.3 million [2]\nSupporting evidence: …") == \
        "Highest revenue, 2023, over 3 companies: Aurora Pharma: $2,146.8 million [1] Helios: $497.3 million [2]"
    assert lead_of("Per document:\nThe first line.\nThe second line.") == "Per document: The first line."
    assert lead_of("洋河股份2020年第一季度营业收入为9,268,167,143.40元。其余……") == "洋河股份2020年第一季度营业收入为9,268,167,143.40元。"


def test_a_figure_is_stated_as_printed_or_in_another_scale() -> None:
    assert states("$792.5 million", "792.5") and states("792,500 thousand", "792.5")
    assert states("−$3,037 thousand", "3,037") and not states("$268.4 million", "792.5")
    assert states("5,305,400,971.85元", "5,305,400,971.85")
    assert states("35.82%", "35.8") and not states("35.86%", "35.8") and not states("35.42", "36")
    assert states("+6.55%", "6.6") and states("205.51%", "206") and not states("35.8", "35.82")


def test_outcomes() -> None:
    assert score(_case(), "Bluefin's nine-month net sales were $792.5 million [1].").outcome == "right"
    wrong = score(_case(), "Bluefin's net sales were $268.4 million [1]. For nine months: $792.5 million.")
    assert (wrong.outcome, wrong.buried) == ("confidently_wrong", True)
    assert score(_case(), "I could not determine this from the statement figures: …").outcome == "silent"
    assert score(_case(), "Evidence per document:\n- report.md: nothing about it").outcome == "other"
    assert score(_case("none", ()), "No evidence found in the reports.").outcome == "right"
    assert score(_case("none", ()), "Revenue was $1,060 million.").outcome == "confidently_wrong"
    both = _case("text", ("Cobalt", "Helios"))
    assert score(both, "Cobalt Logistics and Helios Robotics made acquisitions [1][2].").outcome == "right"
    assert score(both, "Cobalt Logistics acquired Meridian Cold Chain [1].").outcome == "confidently_wrong"


def test_the_gold_set_parses_and_the_summary_counts() -> None:
    cases = load_cases(Path(DEFAULT_QUESTIONS))
    assert len(cases) >= 50 and {c.kind for c in cases} == {"figure", "text", "none"}
    assert all(c.gold or c.kind == "none" for c in cases)
    report = summarise([score(_case(), "It was $792.5 million."), score(_case(), "It was $1.0 million.")])
    assert report["overall"]["right"] == 0.5 and report["overall"]["confidently_wrong"] == 0.5


def test_markers_years_and_abbreviations_are_no_figures_or_sentence_ends() -> None:
    assert numbers("The filing discusses revenue in 2023 [1].") == []
    assert score(_case(), "The filing discusses revenue in fiscal 2023 [1].").outcome == "other"
    assert lead_of("Apple Inc. reported $792.5 million. Then more.") == "Apple Inc. reported $792.5 million."
    assert not states("See note [3].", "3")
