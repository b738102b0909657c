"""The number a PDF page prints in its header or footer, read with pymupdf (no database): the part of
``ingest.page_labels`` a parser process runs at ingest."""

from __future__ import annotations

import re

import pymupdf

EDGE = 0.1  # header / footer: the top and bottom tenth of the page
_NUMBER = r"(\d{1,4}|[ivxlcdm]{1,7})"
PRINTED = (
    re.compile(rf"^(?:page|p\.)?\s*{_NUMBER}(?:\s*(?:of|/)\s*\d+)?$", re.I),
    re.compile(rf"^{_NUMBER}\s*[|·•–—-]\s+\S", re.I),
    re.compile(rf"\S\s+[|·•–—-]\s*{_NUMBER}$", re.I),
)


def _is_year(text: str) -> bool:
    return text.isdigit() and len(text) == 4 and text[:2] in {"19", "20"}


def edge_number(page: pymupdf.Page) -> str | None:
    """A page number printed in the header or footer lines of ``page`` (footer first), or None."""
    height = page.rect.height or 1.0
    lines: list[tuple[float, str]] = []
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            y0, y1 = line["bbox"][1], line["bbox"][3]
            if y1 <= EDGE * height or y0 >= (1 - EDGE) * height:
                text = "".join(s["text"] for s in line["spans"]).strip()
                lines.append((-y0, text))  # bottom lines first
    for _, text in sorted(lines):
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

    def add(self, page: pymupdf.Page) -> None:
        """Read ``page``'s label (``RuntimeError``/``ValueError`` from pymupdf pass through)."""
        if self._labelled is None:
            doc = page.parent
            self._labelled = bool(doc.is_pdf and doc.get_page_labels())
        label = page.get_label() if self._labelled else edge_number(page)
        if label:
            self.labels[page.number + 1] = label


def printed_labels(data: bytes) -> dict[int, str]:
    """Physical page (1-based) → the number it prints, for the pages that print one."""
    found = PrintedLabels()
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        for page in doc:
            found.add(page)
    return found.labels
