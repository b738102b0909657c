"""Chinese measures by meaning (issue 35): MiniLM reads no Chinese, so a Chinese question's leftover words are
matched to the measure table's Chinese names and the collection's own printed lines by their characters
(``router.meaning.ZhNames``), colloquial words first put as statements print them; a line printed two ways
("以及" / "及") is one line, and words near no line get no figure."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kb.app import create_app
from kb.core.vocab import same_line
from kb.runtime import Runtime
from router.meaning import unplaced, zh_names
from router.reading import read_question, unplaced_words
from tests.conftest import runtime_over
from tests.factgen import chinese_report
from tests.http import app_client

STAFF = "支付给职工以及为职工支付的现金"
STAFF_SHORT = "支付给职工及为职工支付的现金"
FIRMS = {"德赛电池": (), "华胜天成": ()}


def _match(question: str, lines: tuple[str, ...] = ()) -> tuple[str, float]:
    q = read_question(question, FIRMS)
    assert not q.measures, q.measures  # no word of it names a measure
    found = zh_names(lines).match(unplaced(unplaced_words(question, FIRMS)))
    return (found.ref.name if found.ref is not None else ""), found.score


def test_colloquial_chinese_finds_the_printed_line() -> None:
    assert _match("德赛电池2024年一季度支付给员工的现金是多少？")[0] == STAFF
    assert _match("华胜天成一季度卖东西收到了多少钱？")[0] == "销售商品、提供劳务收到的现金"
    assert _match("德赛电池去年为还债付出去多少现金？")[0] == "偿还债务支付的现金"


def test_colloquial_verbs_name_their_measure() -> None:
    """"赚了多少钱" asks for the net profit, "研发花了多少" for the R&D expense; "第一季度" leaves nothing behind."""
    assert _match("德赛电池2024年第一季度赚了多少钱？")[0] == "net_income"
    assert _match("华胜天成一季度研发花了多少？")[0] == "rd_expense"
    assert _match("德赛电池第一季度交了多少税费？")[0] == "支付的各项税费"  # a long line holding the words asked
    assert unplaced_words("德赛电池2024年第一季度赚了多少钱？", FIRMS) == ["净利润"]


def test_who_earned_more_is_an_extreme_of_the_net_profit() -> None:
    for question, op in (("德赛电池和华胜天成2024年一季度谁赚得多？", "max"), ("德赛电池和华胜天成谁赚得少？", "min")):
        assert read_question(question, FIRMS).operation == op, question
        assert _match(question)[0] == "net_income", question


def test_words_near_no_line_find_nothing() -> None:
    for question in ("德赛电池2024年一季度交的税是多少？", "华胜天成的员工满意度如何？", "德赛电池一季度员工工资多少？"):
        assert _match(question)[0] == "", question


def test_a_line_printed_two_ways_is_no_rival() -> None:
    assert same_line(STAFF, STAFF_SHORT) and not same_line("短期借款", "长期借款")
    name, _ = _match("德赛电池2024年一季度支付给员工的现金是多少？", (STAFF_SHORT,))
    assert name in (STAFF, STAFF_SHORT)


def test_a_company_short_name_leaves_no_residue() -> None:
    assert unplaced_words("洋河股份2023年一季度支付给员工的现金有多少？", {"洋河股份": ()}) == ["支付给职工", "现金有"]
    assert unplaced_words("华友钴业2023年营收多少亿元", {"浙江华友钴业股份有限公司": ()}) == ["营收"]


@pytest.fixture(scope="module")
async def reports(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    folder = tmp_path_factory.mktemp("zh-meaning")
    (folder / "desay.txt").write_text(chinese_report("德赛电池", cash_flow={
        "销售商品、提供劳务收到的现金": "5,100,000,000.00", STAFF: "412,345,678.90"}), encoding="utf-8")
    (folder / "teamsun.txt").write_text(chinese_report("华胜天成", "1,250,000,000.00", cash_flow={
        "销售商品、提供劳务收到的现金": "1,400,000,000.00", STAFF_SHORT: "523,000,000.00"}), encoding="utf-8")
    async with runtime_over(pg_uri, "zh_by_meaning", folder, ok=2) as rt:
        yield rt


@pytest.mark.slow
async def test_a_chinese_line_in_other_words_is_answered(reports: Runtime) -> None:
    async with app_client(create_app(runtime=reports, run_worker=False)) as client:
        body = (await client.post("/kb/query", json={"query": "德赛电池2024年一季度支付给员工的现金是多少？",
                                                     "include_trace": True})).json()
        assert body["answer"].startswith("德赛电池的支付给职工以及为职工支付的现金：412,345,678.90元"), body["answer"]
        assert body["trace"]["question"]["meaning"].startswith("支付给职工"), body["trace"]["question"]  # 员工 as printed
        # over both reports, each printing the line its own way: the larger is 华胜天成's
        body = (await client.post("/kb/query", json={"query": "哪家公司2024年一季度付给员工的现金最多？"})).json()
        lead = body["answer"].strip().split("\n")[-1]
        assert "华胜天成" in lead and "523,000,000.00" in lead and "412,345,678.90" in body["answer"], body["answer"]
        body = (await client.post("/kb/query", json={"query": "德赛电池2024年一季度交的税是多少？"})).json()
        assert not body["facts"], body["answer"]
