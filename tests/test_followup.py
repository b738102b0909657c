"""Follow-ups (``router.followup.resolve``): what a turn leaves unstated — company, period, measure, operation — is
taken from the earlier turns, on conversations written for these tests (the samples' fictional companies and two
invented Chinese ones), never from a question that states its own; and ``router.state.retrieval_query`` routes by
the resolved text."""

from __future__ import annotations

import pytest

from router.followup import TURNS, FollowUp, period_words, resolve
from router.question import PeriodRef
from router.reading import read_question
from router.state import retrieval_query
from router.types import QueryRequest, Turn

FIRMS = ["Helios Robotics", "Aurora Pharma", "Northwind Energy", "Bluefin Foods", "Cobalt Logistics"]
ZH_FIRMS = ["星河精密制造股份有限公司", "蓝湾食品股份有限公司"]
HELIOS = "What was Helios Robotics' revenue in fiscal 2023?"


def _ask(*turns: str, companies: list[str] = FIRMS, answers: dict[int, str] | None = None) -> FollowUp:
    """The last turn resolved against the earlier ones (user turns, each with its answer when ``answers`` has one)."""
    history: list[Turn] = []
    for i, text in enumerate(turns[:-1]):
        history.append(Turn(role="user", content=text))
        history.append(Turn(role="assistant", content=(answers or {}).get(i, "I looked it up.")))
    f = resolve(turns[-1], history, companies)
    if f.inherited:  # the resolved text reads as the resolved question: routing and an LLM see the same subject
        again, q = read_question(f.text, companies), f.question
        assert (again.operation, again.entities, again.measures, again.periods) == (
            q.operation, q.entities, q.measures, q.periods), (f.text, again)
    return f


def _subject(f: FollowUp) -> tuple[str | None, list[str], tuple[str, ...], list[tuple[int | None, int]]]:
    q = f.question
    return q.operation, [m.name for m in q.measures], q.entities.names, [(p.year, p.quarter) for p in q.periods]


def _taken(f: FollowUp) -> dict[str, int]:
    return {i.part: i.turns_back for i in f.inherited}


def test_three_turns_take_the_company_from_the_first_and_the_measure_from_the_second() -> None:
    second = _ask(HELIOS, "And its net income?")
    assert _subject(second) == ("lookup", ["net_income"], ("Helios Robotics",), [(2023, 0)])
    assert second.text == "And its net income? [Helios Robotics, net income, fiscal 2023]"
    third = _ask(HELIOS, "And its net income?", "What about 2022?")
    assert _subject(third) == ("lookup", ["net_income"], ("Helios Robotics",), [(2022, 0)])
    assert _taken(third) == {"entities": 2, "measures": 1}  # the company stated two turns back, the measure one
    assert third.text == "What about 2022? [Helios Robotics, net income, fiscal 2022]"
    assert third.question.text == third.text and not third.question.unknown


def test_three_turns_over_the_collection_keep_the_ranking() -> None:
    f = _ask("Which company had the highest revenue in 2023?", "And net income?", "What about 2022?")
    assert _subject(f) == ("max", ["net_income"], (), [(2022, 0)])
    assert f.question.entities.scope == "collection"
    assert _taken(f) == {"measures": 1, "operation": 2}
    assert f.text == "What about 2022? [highest, net income, fiscal 2022]"


def test_a_switch_of_company_keeps_the_measure_and_the_period() -> None:
    f = _ask(HELIOS, "And its net income?", "How about Aurora?")
    assert _subject(f) == ("lookup", ["net_income"], ("Aurora Pharma",), [(2023, 0)])
    assert _taken(f) == {"periods": 2, "measures": 1} and f.own_subject
    g = _ask("How did Helios Robotics' revenue change from 2022 to 2023?", "Same for Northwind Energy?")
    assert _subject(g) == ("change", ["revenue"], ("Northwind Energy",), [(2022, 0), (2023, 0)])


def test_a_comparison_carries_its_companies_to_the_next_measure() -> None:
    f = _ask("Compare the 2023 revenue of Aurora Pharma and Northwind Energy.", "And net income?")
    assert _subject(f) == ("compare", ["net_income"], ("Aurora Pharma", "Northwind Energy"), [(2023, 0)])


@pytest.mark.parametrize("question", [
    "What was Northwind Energy's revenue in 2023?",
    "And what was Cobalt Logistics' net income in fiscal 2021?",  # a cue, but nothing left unstated
    "Which company had a product recall of frozen seafood?",  # over the collection, its own topic
    "What was Aurora Pharma's net income?",  # its own company and measure, no cue: the period is not carried over
])
def test_an_independent_question_stays_independent(question: str) -> None:
    f = _ask(HELIOS, "And its net income?", question)
    assert f.inherited == () and f.text == question and f.settled
    assert f.question == read_question(question, FIRMS)
    req = QueryRequest(query=question, history=[Turn(role="user", content=HELIOS)])
    assert retrieval_query(req, f) == question  # no "(context: …)": the earlier company does not leak in


def test_chinese_three_turns_and_a_switch() -> None:
    first = "星河精密2023年的营业收入是多少？"
    f = _ask(first, "它的净利润呢？", "那2022年呢？", companies=ZH_FIRMS)
    assert _subject(f) == ("lookup", ["net_income"], ("星河精密制造股份有限公司",), [(2022, 0)])
    assert f.text == "那2022年呢？[星河精密制造股份有限公司，净利润，2022年]"
    g = _ask(first, "蓝湾食品呢？", companies=ZH_FIRMS)
    assert _subject(g) == ("lookup", ["revenue"], ("蓝湾食品股份有限公司",), [(2023, 0)])
    assert g.text == "蓝湾食品呢？[蓝湾食品股份有限公司，营业收入，2023年]"
    h = _ask(first, "该公司同期的毛利润是多少？", companies=ZH_FIRMS)
    assert _subject(h) == ("lookup", ["gross_profit"], ("星河精密制造股份有限公司",), [(2023, 0)])


@pytest.mark.parametrize("question", ["其他应收款是多少？", "其中研发费用是多少？"])
def test_chinese_words_holding_a_reference_character_refer_to_nothing(question: str) -> None:
    assert _ask("星河精密2023年的营业收入是多少？", question, companies=ZH_FIRMS).inherited == ()


def test_the_answer_to_which_company_names_whom_its_refers_to() -> None:
    answers = {0: "Bluefin Foods recalled its Harbor Select frozen cod fillets in July 2023."}
    f = _ask("Which company recalled frozen fish?", "What were its net sales in Q3 2023?", answers=answers)
    assert _subject(f) == ("lookup", ["revenue"], ("Bluefin Foods",), [(2023, 3)])
    assert [(i.part, i.source) for i in f.inherited] == [("entities", "assistant")]
    g = _ask("Which company recalled frozen fish?", "What were its net sales in Q3 2023?", "And the second quarter?",
             answers=answers)
    assert _subject(g) == ("lookup", ["revenue"], ("Bluefin Foods",), [(2023, 2)])  # the year of the quarter too
    # without a reference the collection question stays one: no company is taken from its answer
    assert _ask("Which company recalled frozen fish?", "What about 2022?", answers=answers).inherited == ()


def test_words_of_its_own_keep_the_measure_out() -> None:
    f = _ask(HELIOS, "What about the warranty reserve?")
    assert _subject(f) == (None, [], ("Helios Robotics",), [(2023, 0)])
    assert _taken(f) == {"entities": 1, "periods": 1}


def test_nothing_to_take_keeps_the_previous_turn_as_context() -> None:
    first = "Which company had a product recall of frozen seafood?"
    f = _ask(first, "How many packages were affected?")
    assert not f.settled
    req = QueryRequest(query="How many packages were affected?", history=[Turn(role="user", content=first)])
    assert retrieval_query(req, f) == f"How many packages were affected? (context: {first})"


# every cue list of kb.core.lexicon's FOLLOWUP_*: two questions each, with what they take after HELIOS
CUES = [
    ("And in 2022?", {"entities", "measures"}),  # FOLLOWUP_OPENERS
    ("So what was net income?", {"entities", "periods"}),
    ("What about the gross profit?", {"entities", "periods"}),  # FOLLOWUP_ELLIPSIS
    ("How about Cobalt Logistics?", {"periods", "measures"}),
    ("Gross profit as well?", {"entities", "periods"}),
    ("How much did it spend on research and development?", {"entities", "periods"}),  # FOLLOWUP_ENTITY
    ("What was the company's operating income?", {"entities", "periods"}),
    ("What was Aurora Pharma's net income that year?", {"periods"}),  # FOLLOWUP_PERIOD
    ("Northwind Energy's operating income for the same period?", {"periods"}),
    ("What was that figure for Aurora Pharma in 2022?", {"measures"}),  # FOLLOWUP_MEASURE
    ("Give me the same measure for Northwind Energy.", {"periods", "measures"}),
    ("Aurora Pharma?", {"periods", "measures"}),  # a few words, no measure: a follow-up without a cue
    ("In 2022?", {"entities", "measures"}),
]


@pytest.mark.parametrize(("question", "parts"), CUES)
def test_each_cue_makes_a_follow_up(question: str, parts: set[str]) -> None:
    assert set(_taken(_ask(HELIOS, question))) == parts


def test_periods_are_written_as_the_reader_reads_them() -> None:
    for p in (PeriodRef(year=2023), PeriodRef(year=2023, quarter=3, months=3), PeriodRef(year=2023, months=9),
              PeriodRef(year=2023, months=6), PeriodRef(relative="latest"), PeriodRef(relative="last_n", n=3)):
        for lang in ("en", "zh"):
            assert read_question(f"revenue {period_words(p, lang)}").periods == (p,), (p, lang)


def test_no_history_reads_the_question_alone() -> None:
    f = resolve("What was Helios Robotics' revenue in fiscal 2023?", [], FIRMS)
    assert f.inherited == () and f.question == read_question(HELIOS, FIRMS) and f.text == HELIOS


def test_only_the_latest_turns_are_read() -> None:
    recalls = ["What about the warranty reserve?"] * TURNS  # each takes Helios and 2023 from the turns before it
    assert _taken(_ask(HELIOS, *recalls[1:], "And its net income?")) == {"entities": TURNS, "periods": TURNS}
    assert _ask(HELIOS, *recalls, "And its net income?").inherited == ()  # Helios is further back than that
