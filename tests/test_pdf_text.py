"""Text from hard PDFs (tests/pdfgen.py): fragmented Type 3 glyphs and layout-heavy pages."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from ingest.pdf_read import read_pdf
from tests.pdfgen import (
    BODY_SIZE,
    LINE_H,
    MARGIN,
    PAGE_H,
    PAGE_W,
    Sec,
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


async def test_fragmented_type3_text_reads_as_whole_words(tmp_path: Path) -> None:
    """dvips-style Type 3 text (sizes reported as 0.1, words cut at kerns, OT1 ligatures and dashes)
    reads exactly like the same layout set in an ordinary font, and its headings make the tree."""
    layout = make_type3_report_pdf(tmp_path / "lectures.pdf", LECTURES)
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
