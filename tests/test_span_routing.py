"""A change over a stated span reads the reports of that span (``router.planning.span_routing``): a routed report
that ends before the span gives its place to the company's report inside it, or is dropped."""

from __future__ import annotations

import pytest

from router.planning import span_routing
from router.reading import read_question
from router.types import DocCandidate, RoutingResult

pytestmark = pytest.mark.unit

# doc id → (fiscal year, quarter; 4 for an annual report); one company, latest first
PERIODS = {1: (2016, 3), 2: (2017, 1), 3: (2017, 3), 4: (2018, 1), 5: (2019, 1), 6: (2020, 1), 7: (2021, 1)}
LATEST_FIRST = tuple(sorted(PERIODS, key=lambda d: PERIODS[d], reverse=True))


def _routing(*ids: int) -> RoutingResult:
    return RoutingResult(documents=tuple(DocCandidate(d, f"r{d}", 1.0 - d / 100, "routed") for d in ids),
                         strategy_used="metadata")


def _route(question: str, *ids: int) -> list[int]:
    q = read_question(question, ["青石酿造", "Harbor Freight Logistics, Inc."])
    out = span_routing(q, _routing(*ids), PERIODS.get, lambda d: LATEST_FIRST, lambda d: f"r{d}")
    return [d.doc_id for d in out.documents]


def test_reports_before_the_span_give_their_places_to_reports_inside_it() -> None:
    # 2016 Q3 and 2017 Q1 end before 2017 Q3: replaced by the missed 2020 and 2021 first quarters
    assert _route("青石酿造从2017年第三季度到2021年第一季度的营业收入是怎么变化的？", 1, 2, 3, 4, 5) == [7, 6, 3, 4, 5]
    assert _route("How did Harbor Freight's revenue develop from Q3 2017 to Q1 2021?", 1, 3, 4, 5, 6, 7) == \
        [3, 4, 5, 6, 7]  # nothing left to add: the report before the span is dropped


def test_a_question_without_a_span_keeps_its_routing() -> None:
    assert _route("How did Harbor Freight's revenue develop over time?", 1, 2, 3) == [1, 2, 3]
    assert _route("What was Harbor Freight's revenue in Q1 2019?", 1, 5) == [1, 5]
