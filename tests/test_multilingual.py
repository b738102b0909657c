"""Chinese, French and German reports in one collection, through the production ingest job and query pipeline
on the real embedded Postgres (issue 23 item 8): a GBK-encoded Chinese text report and a generated Chinese PDF
(pymupdf's bundled ``china-s`` font), each under a Chinese file name, beside accented French and German reports
and an English one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pymupdf
import pytest

from kb.app import create_app
from kb.runtime import Runtime, build_pipeline
from router import store
from router.types import QueryRequest
from tests.conftest import finish_job, runtime_over
from tests.http import app_client

pytestmark = pytest.mark.slow

ZH_TXT = "000423-2023-东阿阿胶-2023年年度报告.txt"
ZH_PDF = "000651-2024-格力电器-2024年第一季度报告.pdf"

ZH_REPORT = """证券代码：000423                    证券简称：东阿阿胶                    公告编号：2024-008
东阿阿胶股份有限公司2023年年度报告
第一节 重要提示
本公司董事会、监事会及董事、监事、高级管理人员保证年度报告内容的真实、准确、完整，不存在虚假记载。
第二节 公司简介和主要财务指标
一、公司信息
公司主营阿胶及系列产品的研发、生产和销售，主要产品包括阿胶块、复方阿胶浆和桃花姬阿胶糕。
二、主要会计数据和财务指标
|项目|2023年|2022年|本年比上年增减|
|---|---|---|---|
|营业收入（元）|4,715,194,352.87|4,041,660,404.77|16.66%|
|归属于上市公司股东的净利润（元）|1,150,554,218.22|780,054,017.43|47.50%|
第三节 财务报告
一、审计报告
公司2023年度财务报表已经审计，注册会计师出具了标准无保留意见的审计报告。
二、财务报表
（一）合并资产负债表
报告期末，公司持有的交易性金融资产余额为1,236,845,779.61元，较期初增加，主要系购买理财产品所致。
|项目|2023年12月31日|2022年12月31日|
|---|---|---|
|货币资金|2,431,152,837.22|2,066,393,410.10|
|交易性金融资产|1,236,845,779.61|1,012,456,108.95|
（二）合并利润表
本期营业成本为1,406,551,262.05元，销售费用为1,283,412,075.60元，主要系市场推广投入增加所致。
"""

FRENCH = """# Société Générale — Rapport annuel 2023

## Résultats financiers

Le produit net bancaire de la Société Générale s'élève à 25,1 milliards d'euros en 2023, en baisse de 9,6 %
par rapport à l'exercice précédent. Les frais de gestion atteignent 17,9 milliards d'euros.

## Stratégie et perspectives

La banque prévoit de réduire ses coûts et de renforcer sa rentabilité dans la banque de détail en France.
"""

GERMAN = """# Müller Präzisionstechnik AG — Geschäftsbericht 2023

## Ertragslage

Die Umsatzerlöse der Müller Präzisionstechnik AG stiegen im Geschäftsjahr 2023 auf 812,4 Mio. Euro.
Das Ergebnis vor Zinsen und Steuern (EBIT) betrug 96,3 Mio. Euro; die Eigenkapitalquote lag bei 41 %.

## Ausblick

Für 2024 erwartet der Vorstand ein moderates Wachstum in den Märkten Österreich und Schweiz.
"""

ENGLISH = """# Acme Robotics 2023 Annual Report

## Results of operations

Acme Robotics reported total revenue of $642.5 million for fiscal 2023, driven by warehouse automation.

## Liquidity

Cash and equivalents were $118.2 million at year end.
"""


def make_zh_pdf(path: Path) -> Path:
    """A Chinese quarterly report PDF: 第一节 / 一、 / （一） headings (larger type) over Chinese body text, each
    section on a page of its own (a PDF node's text is its pages: sections sharing a page share their chunks)."""
    doc = pymupdf.open()
    sections = [
        ("第一节 重要提示", 1, ["公司董事会及全体董事保证本报告内容的真实、准确和完整。"]),
        ("第二节 主要财务数据", 1, ["本报告期营业收入为36,364,527,835.25元，同比增长2.53%。"]),
        ("一、主要会计数据和财务指标", 2, ["归属于上市公司股东的净利润为5,675,172,587.41元。"]),
        ("二、资产负债情况", 2, []),
        ("（一）短期借款", 3, ["报告期末，公司短期借款余额为33,262,128,407.46元，主要系票据贴现增加所致。"]),
        ("（二）应付账款", 3, ["报告期末，公司应付账款余额为31,124,835,022.35元。"]),
        ("第三节 其他重要事项", 1, ["报告期内公司无其他需要披露的重要事项。"]),
    ]
    y, page = 72.0, doc.new_page()
    page.insert_text((72, y), "珠海格力电器股份有限公司2024年第一季度报告", fontname="china-s", fontsize=16)
    y += 40
    for k, (title, level, lines) in enumerate(sections):
        if k:
            page, y = doc.new_page(), 72.0
        page.insert_text((72, y), title, fontname="china-s", fontsize={1: 15, 2: 13, 3: 11.5}[level])
        y += 26
        for line in lines * 3:
            page.insert_text((72, y), line, fontname="china-s", fontsize=10)
            y += 16
        y += 8
    doc.save(path)
    return path


@pytest.fixture(scope="module")
async def mixed(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    folder = tmp_path_factory.mktemp("mixed")
    (folder / ZH_TXT).write_bytes(ZH_REPORT.encode("gbk"))  # a GBK file, as Chinese .txt often are
    make_zh_pdf(folder / ZH_PDF)
    (folder / "societe-generale-2023.md").write_text(FRENCH)
    (folder / "mueller-ag-2023.md").write_text(GERMAN)
    (folder / "acme-robotics-2023.md").write_text(ENGLISH)
    async with runtime_over(pg_uri, "multilingual", folder, ok=5) as rt:
        yield rt


async def _doc(rt: Runtime, name: str) -> dict:
    row = await rt.pool.fetchrow("SELECT id, name, title, description, metadata, warnings FROM documents "
                                 "WHERE name = $1", name)
    assert row is not None, name
    return {**dict(row), "metadata": json.loads(row["metadata"])}


async def _levels(rt: Runtime, doc_id: int) -> dict[str, int]:
    rows = await rt.pool.fetch("SELECT title, level FROM nodes WHERE document_id = $1", doc_id)
    return {r["title"].replace(" ", ""): r["level"] for r in rows}


async def test_chinese_text_report_is_decoded_read_and_described(mixed: Runtime) -> None:
    doc = await _doc(mixed, ZH_TXT)
    assert "not valid UTF-8; decoded as GB18030 (Chinese)" in doc["warnings"]
    levels = await _levels(mixed, doc["id"])
    assert levels["第一节重要提示"] < levels["二、主要会计数据和财务指标"] < levels["（一）合并资产负债表"]
    assert levels["第二节公司简介和主要财务指标"] == levels["第三节财务报告"]
    assert doc["description"].startswith("东阿阿胶（000423）2023年年度报告"), doc["description"]
    assert "财务报告" in doc["description"] and "Part 1" not in doc["description"]
    summaries = [r["summary"] for r in await mixed.pool.fetch(
        "SELECT summary FROM nodes WHERE document_id = $1", doc["id"])]
    assert any("交易性金融资产" in s for s in summaries)
    assert not any(" covering " in s or s.startswith("Covers") for s in summaries)


async def test_chinese_pdf_headings_nest(mixed: Runtime) -> None:
    doc = await _doc(mixed, ZH_PDF)
    levels = await _levels(mixed, doc["id"])
    assert levels["第二节主要财务数据"] < levels["二、资产负债情况"] < levels["(一)短期借款"], levels
    assert levels["第一节重要提示"] == levels["第三节其他重要事项"]
    assert doc["metadata"]["company"] == "格力电器" and doc["description"].startswith("格力电器"), doc


async def test_accented_words_are_indexed_whole(mixed: Runtime) -> None:
    tokens = {t for r in await mixed.pool.fetch("SELECT unnest(tokens) AS t FROM chunks") for t in [r["t"]]}
    assert {"société", "umsatzerlöse", "müller", "präzisionstechnik", "金融资产", "短期", "借款"} <= tokens
    terms = await store.query_terms(mixed.pool, 1, "Umsatzerlöse der Müller AG")
    assert "umsatzerlöse" in terms.lexemes


@pytest.mark.parametrize(("question", "document", "figure"), [
    ("东阿阿胶的交易性金融资产是多少？", ZH_TXT, "1,236,845,779.61"),
    ("格力电器2024年第一季度的短期借款是多少？", ZH_PDF, "33,262,128,407.46"),
    ("Quel est le produit net bancaire de la Société Générale ?", "societe-generale-2023.md", "25,1"),
    ("Wie hoch waren die Umsatzerlöse der Müller Präzisionstechnik AG?", "mueller-ag-2023.md", "812,4"),
    ("What was Acme Robotics' total revenue in fiscal 2023?", "acme-robotics-2023.md", "642.5"),
])
async def test_each_language_routes_and_cites(mixed: Runtime, question: str, document: str, figure: str) -> None:
    result = await build_pipeline(mixed).run(QueryRequest(query=question))
    assert result.documents[0].name == document, [d.name for d in result.documents]
    cited = " ".join(c.text for c in result.citations if c.doc_name == document)
    assert figure in cited, (result.answer, cited)


async def test_upload_with_a_chinese_file_name(mixed: Runtime) -> None:
    body = "# 贵州茅台2023年年度报告\n\n## 主要财务数据\n\n报告期内，公司营业总收入为1,505.60亿元，同比增长18.04%。\n"
    async with app_client(create_app(runtime=mixed, run_worker=False)) as client:
        r = await client.post("/kb/admin/documents", files={"file": ("贵州茅台 年报（2023）.md", body.encode())})
        assert r.status_code == 202, r.text
        job = await finish_job(mixed, r.json()["job_id"])
        assert job.counts == {"ok": 1}, job
        doc_id = job.items[0].document_id
        detail = await client.get(f"/kb/documents/{doc_id}")
        assert detail.status_code == 200, detail.text
        stored = detail.json()["document"]
        assert stored["name"].startswith("贵州茅台 年报_2023-") and stored["source_path"].startswith("uploads/"), stored
        assert [n["title"] for n in detail.json()["tree"]][-1] == "主要财务数据"
        tree = await client.get(f"/kb/documents/{doc_id}/tree")
        assert tree.status_code == 200, tree.text
