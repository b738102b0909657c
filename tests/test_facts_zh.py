"""End to end, Chinese: A-share quarterly reports ingested with their metadata (证券简称, period) and statement
facts; a Chinese question is routed by the company names written inside it and answered in Chinese."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kb.app import create_app
from kb.runtime import Runtime
from tests.conftest import runtime_over
from tests.factgen import chinese_report
from tests.http import app_client

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def reports(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    folder = tmp_path_factory.mktemp("zh")
    (folder / "desay.txt").write_text(chinese_report("德赛电池", "4,094,687,499.12"), encoding="utf-8")
    (folder / "teamsun.txt").write_text(chinese_report("华胜天成", "1,250,000,000.00"), encoding="utf-8")
    async with runtime_over(pg_uri, "facts_zh", folder, ok=2) as rt:
        yield rt


async def test_a_chinese_comparison_is_answered_in_chinese(reports: Runtime) -> None:
    async with app_client(create_app(runtime=reports, run_worker=False)) as client:
        docs = (await client.get("/kb/documents")).json()
        assert {d["metadata"]["company"] for d in docs} == {"德赛电池", "华胜天成"}
        assert {d["metadata"]["period_end_date"] for d in docs} == {"2024-03-31"}
        r = await client.post("/kb/query", json={"query": "公司：德赛电池、华胜天成。哪家公司的营业收入最高？"})
        body = r.json()
    answer = body["answer"]
    assert answer.strip().split("\n")[-1].startswith("德赛电池的营业总收入最高：4,094,687,499.12元（截至2024年3月31日的3个月）"), \
        answer
    assert "各公司营业总收入（降序）：" in answer and "华胜天成：1,250,000,000.00元" in answer
    assert {f["doc_name"] for f in body["facts"]} == {"desay.txt", "teamsun.txt"}


async def test_a_measure_asked_in_english_over_chinese_reports(reports: Runtime) -> None:
    """The measure is a concept, not a word of the documents' language: an English question over Chinese reports
    is computed from their statement lines (answered in English); a measure no language of the vocabulary knows is
    said to be not understood, with no verdict."""
    async with app_client(create_app(runtime=reports, run_worker=False)) as client:
        r = await client.post("/kb/query", json={"query": "Which of 德赛电池 and 华胜天成 had the higher revenue?",
                                                 "include_trace": True})
        body = r.json()
        assert body["answer"].startswith("Highest revenue, over 2 companies:"), body["answer"]
        assert "德赛电池 has the highest revenue: CNY 4,094,687,499.12" in body["answer"], body["answer"]
        r = await client.post("/kb/query", json={"query": "哪家公司的 employee satisfaction 最高？", "include_trace": True})
        body = r.json()
        assert r.status_code == 200 and not body["facts"], body["answer"]
        assert not body["trace"]["question"]["measures"], body["trace"]["question"]


async def test_a_metric_of_the_one_measure_table_is_computed_and_named_in_chinese(reports: Runtime) -> None:
    """A catalogue metric is one row of the measure table: asked in Chinese it is computed from the reports' lines
    (a difference as well as a ratio) and named by its Chinese name."""
    async with app_client(create_app(runtime=reports, run_worker=False)) as client:
        body = (await client.post("/kb/query", json={"query": "德赛电池的营运资金是多少？"})).json()
        assert body["answer"].startswith("德赛电池的营运资金：2,000万元（截至2024年3月31日）"), body["answer"]
        assert {f["line_item"] for f in body["facts"]} == {"流动资产合计", "流动负债合计"}, body["facts"]
        body = (await client.post("/kb/query", json={"query": "德赛电池和华胜天成哪家的净利率更高？"})).json()
        verdict = body["answer"].strip().split("\n")[-1]
        assert verdict.startswith("德赛电池的净利率最高：-0.80%"), body["answer"]  # −32,954,030.06 / 4,094,687,499.12
