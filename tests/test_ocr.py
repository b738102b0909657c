"""Scanned PDF pages read by OCR (Tesseract through PyMuPDF) when its language data is installed; said plainly
when it is not."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from ingest import pipeline
from ingest.pdf_read import read_pdf
from ingest.pdf_read.ocr import find_engine
from ingest.render import find_marks
from kb.runtime import Runtime, build_ingest_context
from tests.pdfgen import MARGIN, make_scanned_pdf

ENGINE = find_engine(("eng", "chi_sim"), 300)
needs_engine = pytest.mark.skipif(ENGINE is None or "chi_sim" not in ENGINE.languages,
                                  reason="Tesseract with English and simplified-Chinese data is not installed")

ENGLISH = [
    "Results of operations\n\nNet revenue of Granite Harbor Shipping rose to 418 million dollars in fiscal 2024, "
    "driven by higher container volumes on the Baltic routes.",
    "Liquidity\n\nCash and cash equivalents were 96 million dollars at the end of the year.",
]
CHINESE = ["经营情况\n\n报告期内，本公司营业收入为十二亿元，同比增长百分之八；归属于上市公司股东的净利润为一亿五千万元。"
           "公司继续加大研发投入，新建两条生产线，产能提升明显。"]


@needs_engine
def test_a_scanned_pdf_is_read_by_ocr_with_its_words_where_they_are(tmp_path: Path) -> None:
    path = make_scanned_pdf(tmp_path / "scan.pdf", ENGLISH)
    with pymupdf.open(path) as doc:
        assert not doc[0].get_text().strip()  # no text layer at all
    parsed = read_pdf(path, ocr=ENGINE)
    text = " ".join(p.text for p in parsed.pages)
    for word in ("Granite", "Harbor", "418", "Baltic", "Liquidity", "96"):
        assert word in text, text
    assert parsed.warnings == ("2 of 2 pages read by OCR (Tesseract, eng+chi_sim)",)
    assert parsed.pages[0].text.startswith("Results of operations")  # the first line, in reading order
    # the words keep their boxes: a citation of the sentence is highlighted where it was drawn
    marks = find_marks(path.read_bytes(), 1, "Net revenue of Granite Harbor Shipping rose to 418 million dollars")
    assert marks.marks.highlights >= 1 and marks.boxes
    x0, y0, _, _ = marks.boxes[0]
    assert abs(x0 - MARGIN / 612) < 0.05 and 0.05 < y0 < 0.3, marks.boxes


@needs_engine
def test_a_scanned_chinese_page_is_read(tmp_path: Path) -> None:
    path = make_scanned_pdf(tmp_path / "scan-zh.pdf", CHINESE, font="china-s", size=16)
    parsed = read_pdf(path, ocr=ENGINE)
    text = "".join(parsed.pages[0].text.split())
    assert "营业收入" in text and "十二亿元" in text, text


def test_without_an_engine_the_pages_are_said_to_have_no_text(tmp_path: Path) -> None:
    path = make_scanned_pdf(tmp_path / "scan.pdf", ENGLISH)
    parsed = read_pdf(path, ocr=None)
    assert all(p.text == "" for p in parsed.pages)
    assert "2 of 2 pages have no text layer; OCR not available: see README (Scanned PDFs)" in parsed.warnings


async def test_a_scan_ingested_without_ocr_says_so_in_the_job_and_the_document(
        runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ingest.store import list_documents

    monkeypatch.setenv("KB_OCR", "false")
    from kb.core.settings import get_settings

    get_settings.cache_clear()
    try:
        path = make_scanned_pdf(tmp_path / "scan.pdf", ENGLISH)
        with build_ingest_context(runtime, processes=False) as ctx:
            outcome = await pipeline.ingest_file(ctx, path, name="scan.pdf", collection_id=1)
    finally:
        monkeypatch.delenv("KB_OCR")
        get_settings.cache_clear()
    assert outcome.status == "ok"
    assert outcome.error and "2 of 2 pages have no text layer; OCR not available" in outcome.error  # the job row
    (doc,) = await list_documents(runtime.pool, "default")
    assert any("OCR not available" in w for w in doc.warnings)  # the documents list and the API


@needs_engine
async def test_a_scan_ingested_with_ocr_answers_from_its_words(runtime: Runtime, tmp_path: Path) -> None:
    from kb.runtime import build_pipeline
    from router.types import QueryRequest

    path = make_scanned_pdf(tmp_path / "granite-harbor-2024.pdf", ENGLISH)
    with build_ingest_context(runtime, processes=True) as ctx:  # OCR in the parser process, like a job
        outcome = await pipeline.ingest_file(ctx, path, name="granite-harbor-2024.pdf", collection_id=1)
    assert outcome.status == "ok" and outcome.chunks >= 2 and outcome.error is None, outcome
    result = await build_pipeline(runtime).run(QueryRequest(query="What was Granite Harbor Shipping's net revenue?"))
    assert "418" in result.answer and result.citations[0].pages[0] == 1, result.answer


async def test_capabilities_say_whether_scans_are_read(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from kb.api.capabilities import capabilities

    caps = capabilities(runtime)
    assert caps.ocr_languages == (ENGINE.languages if ENGINE is not None else None)
    off = dataclasses.replace(runtime.settings, ingest=dataclasses.replace(runtime.settings.ingest, ocr=False))
    assert capabilities(dataclasses.replace(runtime, settings=off)).ocr_languages is None
