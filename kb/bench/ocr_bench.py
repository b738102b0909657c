"""`kb bench ocr`: scanned pages read by OCR — pages/s and how many of the typeset words come back.

Pages are made here (no data needed): report-like English and Chinese paragraphs typeset on a page, the page
rendered at 150 dpi and only the picture kept (a scan with no text layer), then read by the product's reader
(``ingest.pdf_read.read_pdf`` with the configured engine: ``KB_OCR_LANGUAGES``, ``KB_OCR_DPI``). Word recall: the
share of the typeset words (English) or characters (Chinese) found in the page's read text.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import msgspec
import pymupdf

from ingest.pdf_read import read_pdf
from ingest.pdf_read.ocr import engine_for
from kb.core.settings import get_settings

ENGLISH = ("Results of operations. Net revenue rose to {n} million dollars in fiscal {y}, driven by higher volumes "
           "in the industrial segment and stable prices. Operating income was {m} million dollars and the operating "
           "margin improved by {p} percentage points. Cash and cash equivalents at the end of the year were {c} "
           "million dollars; the company repaid part of its term loan and paid a dividend of {d} cents per share.")
CHINESE = ("报告期内，公司实现营业收入{n}亿元，同比增长百分之{p}；归属于上市公司股东的净利润{m}亿元。公司持续加大研发投入，"
           "新建生产线{d}条，期末货币资金余额{c}亿元，资产负债率保持稳定。")


class OcrRun(msgspec.Struct, frozen=True):
    language: str
    pages: int
    seconds: float
    pages_per_s: float
    recall: float  # of the typeset words (en) or characters (zh) found in the read text


def _scan(path: Path, texts: list[str], font: str) -> None:
    out = pymupdf.open()
    for text in texts:
        src = pymupdf.open()
        page = src.new_page(width=612, height=792)
        page.insert_textbox(pymupdf.Rect(72, 72, 540, 720), text, fontsize=12, fontname=font)
        pix = page.get_pixmap(dpi=150, alpha=False)
        out.new_page(width=612, height=792).insert_image(pymupdf.Rect(0, 0, 612, 792), pixmap=pix)
        src.close()
    out.save(path)
    out.close()


def _page_texts(template: str, pages: int) -> list[str]:
    return ["\n\n".join(template.format(n=100 + 7 * i + k, y=2015 + i % 9, m=20 + i + k, p=1 + (i + k) % 9,
                                        c=40 + 3 * i, d=5 + k) for k in range(3)) for i in range(pages)]


def measure(language: str, pages: int, folder: Path) -> OcrRun:
    s = get_settings().ingest
    engine = engine_for(True, s.ocr_languages.split("+"), s.ocr_dpi)
    if engine is None:
        raise SystemExit("kb bench ocr: no OCR engine (Tesseract language data not found; README: Scanned PDFs)")
    texts = _page_texts(ENGLISH if language == "en" else CHINESE, pages)
    path = folder / f"scan-{language}.pdf"
    _scan(path, texts, "helv" if language == "en" else "china-s")
    started = time.perf_counter()
    parsed = read_pdf(path, ocr=engine)
    seconds = time.perf_counter() - started
    found = hits = 0
    for text, page in zip(texts, parsed.pages, strict=True):
        read = page.text if language == "en" else "".join(page.text.split())
        units = text.replace(".", " ").replace(",", " ").replace(";", " ").split() if language == "en" \
            else [c for c in text if "\u4e00" <= c <= "\u9fff"]
        found += len(units)
        hits += sum(1 for u in units if u in read)
    return OcrRun(language, pages, round(seconds, 2), round(pages / seconds, 3), round(hits / max(found, 1), 4))


def run_cli(args: argparse.Namespace) -> int:
    pages = args.limit or 10
    with tempfile.TemporaryDirectory(prefix="kb-bench-ocr-") as tmp:
        runs = [measure(lang, pages, Path(tmp)) for lang in ("en", "zh")]
    s = get_settings().ingest
    print(f"OCR: {s.ocr_languages} at {s.ocr_dpi} dpi, {os.cpu_count()} cores, one process")
    print("| language | pages | seconds | pages/s | words found |\n|---|---:|---:|---:|---:|")
    for r in runs:
        print(f"| {r.language} | {r.pages} | {r.seconds} | {r.pages_per_s} | {r.recall:.3f} |")
    if args.json_out:
        args.json_out.write_text(json.dumps(msgspec.to_builtins(runs), indent=2))
    return 0
