"""Text from hard PDFs (tests/pdfgen.py): fragmented Type 3 glyphs and layout-heavy pages."""

from __future__ import annotations

from pathlib import Path

from ingest.pdf_read import read_pdf
from tests.pdfgen import Sec, make_report_pdf, make_type3_report_pdf
from tests.test_pdf_tree import assert_matches_layout, build

LECTURES = [
    Sec("1 Introduction", 1, 3),
    Sec("1.1 Four Lectures on the Laboratory", 2, 3),
    Sec("2 Methods", 1, 4),
    Sec("2.1 Data Sources", 2, 3),
    Sec("2.2 Typography of Quickly Jumping Glyphs", 2, 2),
    Sec("3 Results", 1, 3),
]


async def test_fragmented_type3_text_reads_as_whole_words(tmp_path: Path) -> None:
    """dvips-style Type 3 text (sizes reported near 0.1, shuffled glyph fragments with pixel drift)
    reads exactly like the same layout set in an ordinary font, and its headings make the tree."""
    layout = make_type3_report_pdf(tmp_path / "lectures.pdf", LECTURES)
    plain = read_pdf(make_report_pdf(tmp_path / "plain.pdf", LECTURES).path)
    parsed = read_pdf(layout.path)
    assert parsed.page_count == plain.page_count == layout.page_count
    for got, want in zip(parsed.pages, plain.pages, strict=True):
        assert got.text == want.text, got.number
    text = "\n".join(p.text for p in parsed.pages)
    assert "Four Lectures on the Laboratory" in text and "Lab\noratory" not in text
    heads = {h.text: h for h in parsed.headings}
    assert [h.text for h in parsed.headings] == [h.text for h in plain.headings]
    assert heads["2.1 Data Sources"].numbering == "dec:2.1"
    body = parsed.body_font_size
    assert heads["1 Introduction"].size > heads["2.1 Data Sources"].size > body > 5.0

    tree, _ = await build(layout.path)
    assert tree.source_mode == "no_toc"
    assert [n.title for n in tree.nodes] == [s.title for s in LECTURES]
    assert_matches_layout(tree, layout)
