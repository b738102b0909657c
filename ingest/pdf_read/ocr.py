"""Pages without a text layer (scans) read by OCR: Tesseract, built into PyMuPDF, with the language data the
system's Tesseract installed (``apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim``).

Nothing is downloaded: without language data there is no engine, and the reader says how many pages it could not
read. An OCR'd page is read like any other (its words keep their boxes, in the page's own coordinates), so its
headings, lines and citations work as for a text PDF.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pymupdf
import structlog

log = structlog.get_logger("ingest.pdf_read")

OCR_UNAVAILABLE = "OCR not available: see README (Scanned PDFs)"
UNREAD_PAGES = "pages have no text layer"  # in the reader's warning about scanned pages it could not read


def unread_pages_note(warning: str) -> bool:
    """Whether a reader warning says pages were left without text (no OCR engine, or OCR failed): a job says it."""
    return UNREAD_PAGES in warning


@dataclass(frozen=True)
class OcrEngine:
    """Where Tesseract's language data is and what a page is read with."""

    tessdata: str
    languages: str  # Tesseract's "eng+chi_sim"
    dpi: int


def _tessdata() -> str | None:
    """Tesseract's language data folder: ``TESSDATA_PREFIX``, else what the installed ``tesseract`` reports."""
    if os.environ.get("TESSDATA_PREFIX"):
        return os.environ["TESSDATA_PREFIX"]
    try:
        out = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.stdout.splitlines():
        if line.startswith("List of available languages in"):
            return line.split('"')[1] if '"' in line else None
    return None


@functools.cache
def find_engine(languages: tuple[str, ...], dpi: int) -> OcrEngine | None:
    """The OCR engine with those of ``languages`` whose data is installed, or None (no Tesseract data, or none of
    the languages). Looked for once per process."""
    folder = _tessdata()
    if folder is None or not Path(folder).is_dir():
        return None
    have = {p.name.removesuffix(".traineddata") for p in Path(folder).glob("*.traineddata")}
    usable = [lang for lang in languages if lang in have]
    if not usable:
        log.warning("ingest.ocr_no_languages", tessdata=folder, wanted=list(languages), installed=sorted(have))
        return None
    return OcrEngine(tessdata=folder, languages="+".join(usable), dpi=dpi)


def engine_for(enabled: bool, languages: Sequence[str], dpi: int) -> OcrEngine | None:
    """``find_engine`` when OCR is enabled (``KB_OCR``), else None."""
    return find_engine(tuple(languages), dpi) if enabled else None


def ocr_textpage(page: pymupdf.Page, engine: OcrEngine) -> pymupdf.TextPage:
    """The page's text as OCR reads its image, in the page's coordinates (``RuntimeError`` when it fails)."""
    return page.get_textpage_ocr(flags=pymupdf.TEXTFLAGS_TEXT, language=engine.languages, dpi=engine.dpi, full=True,
                                 tessdata=engine.tessdata)


SCAN_COVER = 0.5  # of the page's area an image must cover for a page without text to be a scan


def needs_ocr(page: pymupdf.Page, letters: bool) -> bool:
    """A page with no ``letters`` in its text layer whose images cover at least ``SCAN_COVER`` of it: a scanned
    page (a page showing only a logo, a chart or a photo is not read by OCR)."""
    if letters or not page.get_images(full=False):
        return False
    area = abs(page.rect) or 1.0
    covered = sum(abs(pymupdf.Rect(info["bbox"]) & page.rect) for info in page.get_image_info())
    return covered >= SCAN_COVER * area
