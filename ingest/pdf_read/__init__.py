"""PDF reading: per-page text, outline, page labels and layout signals for tree building.

One pass over the pages with pymupdf (``get_text("dict")``): spans are grouped into
visual lines (so a printed-TOC row "Item 7 ..... 34" or a table row stays one line),
spans whose reported font size is wrong (Type 3 fonts from LaTeX via dvips, also in device
pixels with every word its own block) are taken glyph by glyph, sized from their advances,
and their words rejoined from the gaps (a file whose glyphs cannot be rebuilt, or too long for
it, is flagged so that its tree is one node per page: :data:`PAGES_ONLY`), two-column pages (also when the
columns' baselines do not line up, or a sidebar stands beside the body) are read column
by column, running headers/footers are marked, and lines that look like headings
(larger font, bold, numbering such as ``Item 7.``, ``PART II``, ``Note 3``, ``1.2``) are
kept as :class:`HeadingCandidate`. The result is a frozen, picklable :class:`ParsedPdf`;
the document is closed before returning.

Modules: ``spans`` (spans, the glyph-by-glyph re-reading, bands), ``lines`` (visual lines,
:func:`clean_text`), ``columns`` (reading order: columns, free gutters, sidebars), ``headings``
(numbering, heading candidates), ``margins`` (running headers/footers, printed page numbers) and
``reader`` (:func:`read_pdf` and :class:`ParsedPdf`, the flow above).
"""

from ingest.pdf_read.columns import page_lines
from ingest.pdf_read.headings import DISPLAY_SIZE, HeadingCandidate, numbering_of
from ingest.pdf_read.lines import LineInfo, clean_text
from ingest.pdf_read.margins import printed_page_number
from ingest.pdf_read.reader import (
    LAYOUT_PAGES,
    NO_TEXT_LAYER,
    PAGES_ONLY,
    TEX_MAX_PAGES,
    TEX_TOO_LONG,
    TEX_UNREADABLE,
    ParsedPdf,
    read_pdf,
)

__all__ = [
    "DISPLAY_SIZE",
    "HeadingCandidate",
    "LAYOUT_PAGES",
    "LineInfo",
    "NO_TEXT_LAYER",
    "PAGES_ONLY",
    "ParsedPdf",
    "TEX_MAX_PAGES",
    "TEX_TOO_LONG",
    "TEX_UNREADABLE",
    "clean_text",
    "numbering_of",
    "page_lines",
    "printed_page_number",
    "read_pdf",
]
