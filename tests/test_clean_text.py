"""Clean text (issue 22 item 3): running headers/footers and page numbers stay out of chunks; PDF lines
are joined back into sentences, which abbreviations and decimals do not end."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from ingest.chunker import chunk_tree
from ingest.pdf_read import read_pdf
from ingest.pdf_tree import build_pdf_tree
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from kb.core.text import split_sentences
from tests.pdfgen import MARGIN, PAGE_H, PAGE_W, paragraph, write_column

HEADER = "Northwind Industries | Annual Report 2023"
FOOTER = "Northwind Industries - Annual Report 2023"
DEAL = ("In March the Group completed the purchase of the coatings business of Southwind Holdings "
        "Inc. for $1.25 billion, its largest acquisition in the U.S. to date.")


def _report(path: Path, pages: int = 6) -> list[str]:
    """Pages with a running header, a footer with the page number and numbered section headings; the
    sentence ``DEAL`` is broken over two lines right before "Inc." on page 2. Returns the section titles."""
    doc = pymupdf.open()
    titles = []
    for n in range(1, pages + 1):
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_text((MARGIN, 40), HEADER, fontsize=8, fontname="helv")
        page.insert_text((MARGIN, PAGE_H - 36), f"{FOOTER}   {n}", fontsize=8, fontname="helv")
        page.insert_text((PAGE_W - MARGIN - 10, PAGE_H - 36), str(n), fontsize=8, fontname="helv")
        title = f"{n} {('Strategy', 'Acquisitions', 'Operations', 'Markets', 'People', 'Outlook')[n - 1]}"
        titles.append(title)
        page.insert_text((MARGIN, 100), title, fontsize=16, fontname="hebo")
        y = 130.0
        if n == 2:
            head, tail = DEAL.split(" Inc. ")
            page.insert_text((MARGIN, y), head, fontsize=10, fontname="helv")
            page.insert_text((MARGIN, y + 14), f"Inc. {tail}", fontsize=10, fontname="helv")
            y += 40
        write_column(page, MARGIN, y, PAGE_W - 2 * MARGIN, paragraph(f"page{n}", 8))
    doc.save(path)
    doc.close()
    return titles


async def test_running_heads_footers_and_page_numbers_stay_out_of_chunks(tmp_path: Path) -> None:
    titles = _report(tmp_path / "report.pdf")
    parsed = read_pdf(tmp_path / "report.pdf")
    raw = "\n".join(p.text for p in parsed.pages)
    assert raw.count(HEADER) == 6 and raw.count(FOOTER) == 6  # the page text keeps them (page images too)
    tree = await build_pdf_tree(parsed, OfflineChatModel(), IngestSettings())
    assert [n.title for n in tree.nodes] == titles  # a running head is never a section
    page_texts = {p.number: parsed.body_text(p.number) for p in parsed.pages}
    chunks = chunk_tree(tree, IngestSettings(), page_texts)
    assert chunks
    for c in chunks:
        assert "Annual Report 2023" not in c.text, c.text
        assert not any(line.strip().isdigit() for line in c.text.split("\n")), c.text  # no page number
    for n in tree.nodes:
        assert "Annual Report 2023" not in n.text
    text = "\n".join(c.text for c in chunks)
    assert DEAL in split_sentences(text)  # across the line break, past "Inc." and "U.S." and "$1.25"


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Revenue at Apple Inc. rose 5.2% to $3.5 billion. Costs fell.",
         ["Revenue at Apple Inc. rose 5.2% to $3.5 billion.", "Costs fell."]),
        ("Sales in the U.S. and the U.K. grew, e.g. in Texas. See Note No. 4 for details.",
         ["Sales in the U.S. and the U.K. grew, e.g. in Texas.", "See Note No. 4 for details."]),
        ("Acme Corp. and Beta Co. merged; the deal closed in Q3. Dr. Lee approved it!",
         ["Acme Corp. and Beta Co. merged;", "the deal closed in Q3.", "Dr. Lee approved it!"]),
        ("The agreement between the parties was signed by the lenders and the\nborrower in 2021. It runs "
         "until 2026.", ["The agreement between the parties was signed by the lenders and the borrower in 2021.",
                        "It runs until 2026."]),
        ("The review of the respon-\nsible units ended. Next year more.",
         ["The review of the responsible units ended.", "Next year more."]),
        ("Liquidity and Capital Resources\nOur cash and cash equivalents were ample at the end of the fiscal "
         "year as reported above.", ["Liquidity and Capital Resources",
                                     "Our cash and cash equivalents were ample at the end of the fiscal year as "
                                     "reported above."]),
        ("Net sales 1,234 1,100\nTotal assets 5,000 4,800", ["Net sales 1,234 1,100", "Total assets 5,000 4,800"]),
        ("First paragraph ends here.\n\nSecond one.", ["First paragraph ends here.", "Second one."]),
        ("• Lower costs\n• Higher prices", ["• Lower costs", "• Higher prices"]),
    ],
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences
