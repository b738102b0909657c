"""The number a PDF page prints in its header or footer, read with pymupdf (no database): the part of
``ingest.page_labels`` a parser process runs at ingest."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pymupdf

from ingest.pdf_read.spans import EdgeLine, edge_lines

_NUMBER = r"(\d{1,4}|[ivxlcdm]{1,7})"
PRINTED = (
    re.compile(rf"^(?:page|p\.)?\s*{_NUMBER}(?:\s*(?:of|/)\s*\d+)?$", re.I),
    re.compile(rf"^{_NUMBER}\s*[|·•–—-]\s+\S", re.I),
    re.compile(rf"\S\s+[|·•–—-]\s*{_NUMBER}$", re.I),
)


def _is_year(text: str) -> bool:
    return text.isdigit() and len(text) == 4 and text[:2] in {"19", "20"}


def edge_number(page: pymupdf.Page, edges: Sequence[EdgeLine] | None = None) -> str | None:
    """A page number printed in the header or footer lines of ``page`` (footer first), or None. ``edges``: those
    lines as the PDF reader already read them (else they are read from the page)."""
    if edges is None:
        edges = edge_lines(page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT), page.rect.height)
    for _, text in sorted(edges):
        for pattern in PRINTED:
            m = pattern.search(text)
            if m and not _is_year(m.group(1)):
                return m.group(1)
    return None


class PrintedLabels:
    """The printed labels of a document's pages, collected page by page as a reader goes through them: the
    PDF's page labels when it has them, else the number each page prints in its header or footer."""

    def __init__(self) -> None:
        self.labels: dict[int, str] = {}
        self._labelled: bool | None = None

    def add(self, page: pymupdf.Page, edges: Sequence[EdgeLine] | None = None) -> None:
        """Read ``page``'s label (``RuntimeError``/``ValueError`` from pymupdf pass through); ``edges`` as in
        :func:`edge_number`."""
        if self._labelled is None:
            doc = page.parent
            self._labelled = bool(doc.is_pdf and doc.get_page_labels())
        label = page.get_label() if self._labelled else edge_number(page, edges)
        if label:
            self.labels[page.number + 1] = label


def printed_labels(data: bytes) -> dict[int, str]:
    """Physical page (1-based) → the number it prints, for the pages that print one."""
    found = PrintedLabels()
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        for page in doc:
            found.add(page)
    return found.labels
