"""Text from hard PDFs (tests/pdfgen.py): fragmented Type 3 glyphs and layout-heavy pages."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pymupdf
import pytest

from ingest.pdf_read import TEX_MAX_PAGES, TEX_TOO_LONG, TEX_UNREADABLE, read_pdf, reader
from ingest.pdf_tree import build_pdf_tree
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from tests.docgen import KINDS
from tests.pdfgen import (
    BODY_SIZE,
    GS906,
    GS926,
    LINE_H,
    MARGIN,
    PAGE_H,
    PAGE_W,
    Dvips,
    Sec,
    make_broken_dvips_pdf,
    make_long_dvips_pdf,
    make_report_pdf,
    make_type3_report_pdf,
    paragraph,
    write_column,
)
from tests.test_pdf_tree import assert_matches_layout, build

LECTURES = [
    Sec("1 Introduction", 1, 3),
    Sec("1.1 Four Lectures on the Laboratory", 2, 3),
    Sec("2 Methods", 1, 4),
    Sec("2.1 Data Sources", 2, 3),
    Sec("2.2 Typography of Quickly Jumping Glyphs", 2, 2),
    Sec("2.3 Definitions of Efficient Modules \u2013 a First Look", 2, 2),
    Sec("2.3.1 Affine Flows and Syntax", 3, 2),
    Sec("3 Results", 1, 3),
]


def test_type3_emulation_is_what_dvips_and_ghostscript_write(tmp_path: Path) -> None:
    """The emulation has the four properties of the real TeX file (issue 27), read with pymupdf."""
    layout = make_type3_report_pdf(tmp_path / "lectures.pdf", LECTURES)
    doc = pymupdf.open(layout.path)
    assert "Ghostscript" in doc.metadata["producer"] and "dvips" in doc.metadata["creator"]
    assert doc.get_toc() == []
    page = doc[0]
    fonts = page.get_fonts(full=True)
    assert fonts and {f[2] for f in fonts} == {"Type3"}
    assert all(doc.xref_get_key(f[0], "ToUnicode")[0] == "null" for f in fonts)
    spans = [s for b in page.get_text("dict")["blocks"] for ln in b["lines"] for s in ln["spans"]]
    assert {round(s["size"], 2) for s in spans} == {0.1}
    text = "\n".join(p.get_text() for p in doc)
    assert "De\x0cnitions" in text and "A\x0c" not in text and "\x7b" in text  # OT1 ligature and dash codes
    assert "Lab\noratory" in text and "F\nour" in text and "Mo\ndules" in text  # a line per kerned piece
    assert "Four Lectures" not in text
    heading_font = next(s["font"] for s in spans if s["text"].startswith("Lab"))
    body_font = next(s["font"] for s in spans if s["text"].islower() and len(s["text"]) > 4)
    assert heading_font != body_font  # told apart by font and glyph size only: no bold flag
    assert not any(s["flags"] & 16 for s in spans)


@pytest.mark.parametrize("run", [GS926, GS906], ids=lambda run: run.name)
async def test_fragmented_type3_text_reads_as_whole_words(tmp_path: Path, run: Dvips) -> None:
    """dvips-style Type 3 text (sizes reported as 0.1, or 0.12 with every word its own block; words cut at
    kerns, OT1 ligatures and dashes) reads exactly like the same layout set in an ordinary font, and its
    headings make the tree."""
    layout = make_type3_report_pdf(tmp_path / "lectures.pdf", LECTURES, run=run)
    plain = read_pdf(make_report_pdf(tmp_path / "plain.pdf", LECTURES).path)
    parsed = read_pdf(layout.path)
    assert parsed.page_count == plain.page_count == layout.page_count
    for got, want in zip(parsed.pages, plain.pages, strict=True):
        assert got.text == want.text.replace("\u00b7", "\u2013"), got.number  # Base-14 helv draws "–" as "·"
    text = "\n".join(p.text for p in parsed.pages)
    assert "Four Lectures on the Laboratory" in text and "Lab\noratory" not in text
    assert "2.3 Definitions of Efficient Modules \u2013 a First Look" in text
    heads = {h.text: h for h in parsed.headings}
    assert [h.text for h in parsed.headings] == [h.text.replace("\u00b7", "\u2013") for h in plain.headings]
    assert heads["2.1 Data Sources"].numbering == "dec:2.1"
    body = parsed.body_font_size
    assert heads["1 Introduction"].size > heads["2.1 Data Sources"].size > body > 5.0

    tree, _ = await build(layout.path)
    assert tree.source_mode == "no_toc"
    assert [n.title for n in tree.nodes] == [s.title for s in LECTURES]
    assert_matches_layout(tree, layout)


def _mean_advances(doc: pymupdf.Document) -> dict[str, float]:
    """Per font: the mean distance between consecutive glyph origins inside a span, over the document."""
    steps: dict[str, list[float]] = {}
    for page in doc:
        for block in page.get_text("rawdict")["blocks"]:
            for span in (s for ln in block["lines"] for s in ln["spans"]):
                chars = span["chars"]
                steps.setdefault(span["font"], []).extend(
                    b["origin"][0] - a["origin"][0] for a, b in zip(chars, chars[1:], strict=False))
    return {font: sum(v) / len(v) for font, v in steps.items() if len(v) >= 10}


def test_dvips_gs906_emulation_has_the_measured_properties(tmp_path: Path) -> None:
    """The issue-41 lecture notes (dvipsk 5.58f, Ghostscript 9.06) as pymupdf reads the real file: every word
    its own block of one line and one span, size 0.12 and a box 0.1 pt high whatever the glyphs' size, words
    cut at kerns into blocks of their own, Type 3 fonts named by their object only, OT1 control characters,
    and fonts told apart by their glyph advances alone (≈ 5.3 pt body, 6.9 and 7.7 headings, 4.5 small)."""
    made = KINDS["dvips_notes"](tmp_path / "notes.pdf")
    doc = pymupdf.open(made.path)
    assert doc.page_count >= 50 and len(made.truth) >= 50 and {t.level for t in made.truth} == {1, 2}
    assert doc.metadata["producer"] == "GPL Ghostscript 9.06" and doc.metadata["creator"].startswith("dvipsk 5.58f")
    assert doc.get_toc() == []
    spans = []
    for page in doc:
        blocks = page.get_text("dict")["blocks"]
        assert all(len(b["lines"]) == 1 and len(b["lines"][0]["spans"]) == 1 for b in blocks), page.number
        spans += [b["lines"][0]["spans"][0] for b in blocks]
    assert not any(" " in s["text"] for s in spans)  # one block per word
    assert len(doc[2].get_text("dict")["blocks"]) > 400  # hundreds of them on a page
    assert {round(s["size"], 2) for s in spans} == {0.12}
    assert {round(s["bbox"][3] - s["bbox"][1], 1) for s in spans} == {0.1}
    assert all(re.fullmatch(r"Type3 \(\d+ 0 R\)", s["font"]) for s in spans)  # no face name
    assert not any(s["flags"] & 16 for s in spans)
    fonts = doc[2].get_fonts(full=True)
    assert {f[2] for f in fonts} == {"Type3"} and all(f[3] == "" and f[4] == f"R{f[0]}" for f in fonts)
    # fragments: a word cut at a kern is two blocks side by side ("gro" + "wth")
    texts = [s["text"] for s in spans]
    pieces = [(a, b) for a, b in zip(spans, spans[1:], strict=False)
              if abs(a["origin"][1] - b["origin"][1]) < 1 and -1 < b["bbox"][0] - a["bbox"][2] < 0.5]
    assert len(pieces) > 1000 and ("gro", "wth") in {(a["text"], b["text"]) for a, b in pieces}
    assert any("\x0c" in t or "\x0d" in t for t in texts) and "\x14" in texts  # ligatures; ≤ alone in its block
    advances = _mean_advances(doc)
    body = advances[max(advances, key=lambda f: sum(s["font"] == f for s in spans))]
    assert 5.0 <= body <= 5.6
    ratios = sorted(a / body for a in advances.values())
    for want in (4.5 / 5.3, 6.9 / 5.3, 7.7 / 5.3):  # the small print and the two heading fonts
        assert min(abs(r - want) for r in ratios) < 0.08, (want, ratios)


@pytest.mark.parametrize("flaw", ["no_widths", "equal_advances", "one_origin"])
async def test_dvips_text_that_cannot_be_rebuilt_gives_a_node_per_page(tmp_path: Path, flaw: str) -> None:
    """Ghostscript 9.06 text whose lines or sizes cannot be rebuilt (Type 3 fonts without widths, every glyph
    advancing alike, every word of a page on one origin): a node per page and the reason, never an exception."""
    layout = make_broken_dvips_pdf(tmp_path / "notes.pdf", LECTURES, flaw)
    parsed = read_pdf(layout.path)
    assert parsed.warnings == (TEX_UNREADABLE,)
    tree, _ = await build(layout.path)
    pages = range(1, layout.page_count + 1)
    assert [(n.title, n.start, n.end) for n in tree.nodes] == [(f"Page {p}", p, p) for p in pages]
    assert TEX_UNREADABLE in tree.warnings and tree.source_mode == "pages"


async def test_dvips_text_beyond_the_page_budget_is_read_word_by_word(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A dvips file longer than TEX_MAX_PAGES (made 3 here) is not read glyph by glyph: its words are taken whole,
    sized from their advances (the same text as the glyph-by-glyph reading), and its tree is a node per page."""
    layout = make_type3_report_pdf(tmp_path / "notes.pdf", LECTURES, run=GS906)
    rebuilt = read_pdf(layout.path)
    monkeypatch.setattr(reader, "TEX_MAX_PAGES", 3)
    cheap = read_pdf(layout.path)
    assert layout.page_count > 3 and not rebuilt.warnings and cheap.warnings == (TEX_TOO_LONG,)
    assert [p.text for p in cheap.pages] == [p.text for p in rebuilt.pages]
    tree = await build_pdf_tree(cheap, OfflineChatModel(), IngestSettings())
    assert [n.title for n in tree.nodes] == [f"Page {p}" for p in range(1, layout.page_count + 1)]
    assert TEX_TOO_LONG in tree.warnings


@pytest.mark.slow
async def test_a_3000_page_dvips_file_gives_a_node_per_page_in_time(tmp_path: Path) -> None:
    """3,000 pages of Ghostscript 9.06 text: read word by word (beyond TEX_MAX_PAGES), a node per page with the
    reason, well within the per-file time limit."""
    path = make_long_dvips_pdf(tmp_path / "long.pdf", 3000)
    started = time.perf_counter()
    parsed = read_pdf(path)
    tree = await build_pdf_tree(parsed, OfflineChatModel(), IngestSettings())
    seconds = time.perf_counter() - started
    assert parsed.page_count == 3000 > TEX_MAX_PAGES and parsed.warnings == (TEX_TOO_LONG,)
    assert "Lecture 2999" in parsed.pages[2998].text and "liquidity" in " ".join(p.text for p in parsed.pages[:50])
    assert len(tree.nodes) == 3000 and tree.source_mode == "pages" and TEX_TOO_LONG in tree.warnings
    assert seconds < min(120.0, IngestSettings().file_timeout_s), seconds


# ---------------------------------------------------------------------------- reading order


def _columns_page(path: Path, right_y: float, right_size: float, right_leading: float) -> list[str]:
    """A title across the page, two columns (the right one set apart), a paragraph across below."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_W, height=PAGE_H)
    page.insert_text((MARGIN, 90), "Quarterly Review of the Two Regions", fontsize=16, fontname="hebo")
    left = write_column(page, MARGIN, 120, 220, paragraph("westside", 9))
    right = write_column(
        page, 322, right_y, 218, paragraph("eastside", 9), size=right_size, leading=right_leading
    )
    below = max(120 + LINE_H * len(left), right_y + right_leading * len(right)) + 20
    after = write_column(page, MARGIN, below, PAGE_W - 2 * MARGIN, paragraph("closing", 2))
    doc.save(path)
    doc.close()
    return ["Quarterly Review of the Two Regions", *left, *right, *after]


@pytest.mark.parametrize(
    ("right_y", "right_size", "right_leading"),
    [(127.0, BODY_SIZE, LINE_H), (124.0, 9.0, 11.5)],
    ids=["set-off-half-a-line", "own-size-and-leading"],
)
def test_two_columns_read_column_by_column(
    tmp_path: Path, right_y: float, right_size: float, right_leading: float
) -> None:
    """Columns whose baselines do not line up are still read one after the other."""
    expected = _columns_page(tmp_path / "columns.pdf", right_y, right_size, right_leading)
    parsed = read_pdf(tmp_path / "columns.pdf")
    assert parsed.pages[0].text.split("\n") == expected


def test_sidebar_box_read_after_the_body(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_W, height=PAGE_H)
    body = write_column(page, MARGIN, 100, 320, paragraph("mainline", 9))
    page.draw_rect(pymupdf.Rect(410, 88, 550, 360), color=(0, 0, 0), fill=(0.9, 0.9, 0.9))
    page.insert_text((418, 106), "At a glance", fontsize=11, fontname="hebo")
    side = write_column(page, 418, 122, 124, paragraph("sidenote", 5), size=8.0, leading=11.0)
    doc.save(tmp_path / "sidebar.pdf")
    doc.close()
    parsed = read_pdf(tmp_path / "sidebar.pdf")
    assert parsed.pages[0].text.split("\n") == [*body, "At a glance", *side]


TERMS = (
    "Deferred revenue balances",
    "Operating lease liabilities",
    "Goodwill impairment testing",
    "Foreign currency translation",
    "Inventory valuation reserves",
    "Supplier finance programs",
)


def test_table_rows_are_not_taken_for_columns(tmp_path: Path) -> None:
    """A text table (a term, its definition over several lines) stays row by row.

    Too few rows pair text on both sides for the shared-baseline test, so this is the case
    where the gutter between the cells must be told from one between columns.
    """
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_W, height=PAGE_H)
    rows: list[str] = []
    y = 100.0
    for k, term in enumerate(TERMS):
        page.insert_text((MARGIN, y), term, fontsize=9.0, fontname="helv")
        text = write_column(page, 260, y, 280, paragraph(f"definition{k}", 3), size=9.0, leading=12.0)
        rows.extend([f"{term} {text[0]}", *text[1:]])
        y += 12.0 * len(text) + 8
    doc.save(tmp_path / "table.pdf")
    doc.close()
    parsed = read_pdf(tmp_path / "table.pdf")
    assert parsed.pages[0].text.split("\n") == rows


def _parse_in_pool(path: str) -> tuple[int, bool]:
    """In a parser process: the PDF's pages, and whether pymupdf's layout analyser module was loaded."""
    import sys

    from ingest.formats import parse_file

    parsed = parse_file(path, "pdf", None, None)
    assert parsed.pdf is not None
    return parsed.pdf.page_count, sys.modules.get("pymupdf.layout") is not None


def test_parser_processes_read_pdfs_without_pymupdfs_layout_model(tmp_path: Path) -> None:
    """pymupdf 2.0 loads an ONNX layout model when imported; a parser process reads PDFs without it."""
    from ingest.pipeline import make_executor, stop_executor
    from tests.pdfgen import Sec, make_report_pdf

    pdf = tmp_path / "report.pdf"
    make_report_pdf(pdf, [Sec("Overview", paragraphs=4), Sec("Results", paragraphs=4)], outline=True)
    pool = make_executor(1)
    assert pool is not None
    try:
        pages, layout_loaded = pool.submit(_parse_in_pool, str(pdf)).result(timeout=120)
    finally:
        stop_executor(pool)
    assert pages >= 1
    assert not layout_loaded
