"""Reading a PDF into a :class:`ParsedPdf`: one pass over the pages, then margins, labels and headings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import msgspec
import pymupdf
import structlog

from ingest.pdf_read.columns import PageRead, read_page
from ingest.pdf_read.headings import HeadingCandidate, _candidate, _page_headings
from ingest.pdf_read.lines import LineInfo, _letters, _Line, _PageRecord, clean_text
from ingest.pdf_read.margins import _edge_kind, _margin_lines, _printed_label, running_lines
from ingest.pdf_read.ocr import OCR_UNAVAILABLE, UNREAD_PAGES, OcrEngine, needs_ocr, ocr_textpage
from ingest.pdf_read.spans import EdgeLine, PixelText
from kb.core.errors import IngestError
from kb.core.types import PageText

log = structlog.get_logger("ingest.pdf_read")

NO_TEXT_LAYER = "no readable text layer: one node per page"
TEX_MAX_PAGES = 2000  # pages of a file whose text in device pixels (TeX via dvips) is rebuilt glyph by glyph
TEX_UNREADABLE = ("TeX text in device pixels (dvips) whose lines or sizes cannot be rebuilt (Type 3 glyphs without "
                  "usable advances, or on one origin): one node per page")
TEX_TOO_LONG = (f"TeX text in device pixels (dvips) on more than {TEX_MAX_PAGES} pages: read word by word without "
                "rebuilding sizes, one node per page")
PAGES_ONLY = frozenset({NO_TEXT_LAYER, TEX_UNREADABLE, TEX_TOO_LONG})
"""Reader warnings after which the tree is one node per page."""
_PIXEL_SHARE = 0.5  # of a file's characters set in device pixels: a TeX file read from dvips
_PIXEL_BROKEN = 0.2  # of those that could not be rebuilt: its lines and sizes are not to be trusted
_MIN_LETTERS = 40  # fewer letters than this in the whole file: a scan
_MIN_LETTER_SHARE = 0.3  # fewer of the visible characters being letters: glyph codes that are not characters
_FIGURE_CHARS = frozenset("0123456789.,$%()-–")  # a table of figures is text too: these do not count as visible


def _visible(text: str) -> int:
    """How many characters of ``text`` are neither white space nor in ``_FIGURE_CHARS``."""
    solid = "".join(text.split())  # str.split() drops exactly the characters str.isspace() accepts
    return len(solid) - sum(map(solid.count, _FIGURE_CHARS))
LAYOUT_PAGES = 40  # pages whose full line layout is kept (printed-TOC detection)
_MuPdfError = pymupdf.mupdf.FzErrorBase


class ParsedPdf(msgspec.Struct, frozen=True):
    """Everything tree building needs from one PDF; no open file handles."""

    pages: tuple[PageText, ...]
    outline: tuple[tuple[int, str, int], ...]
    headings: tuple[HeadingCandidate, ...]
    body_font_size: float
    page_labels: tuple[str, ...] = ()  # per page: PDF page label, else printed page number, else ""
    margins: tuple[tuple[int, ...], ...] = ()  # per page: indexes of running header/footer lines
    running: tuple[tuple[int, ...], ...] = ()  # per page: those of them kept out of the text read (body_text)
    layout: tuple[tuple[LineInfo, ...], ...] = ()  # line layout of the first LAYOUT_PAGES pages
    total_pages: int = 0  # pages in the file (may exceed len(pages) with max_pages)
    warnings: tuple[str, ...] = ()  # e.g. NO_TEXT_LAYER: the pages' text is empty, the tree is one node per page

    @property
    def page_count(self) -> int:
        return len(self.pages)

    def body_text(self, number: int) -> str:
        """Page ``number``'s text without its running header/footer lines and printed page number: the text
        that nodes, chunks, answers and highlights hold (the page image keeps them)."""
        text = self.pages[number - 1].text
        running = self.running[number - 1] if number - 1 < len(self.running) else ()
        if not running:
            return text
        drop = set(running)
        return "\n".join(ln for j, ln in enumerate(text.split("\n")) if j not in drop)


def _record(lines: list[_Line], height: float, width: float) -> _PageRecord:
    sizes: Counter[float] = Counter()
    for ln in lines:
        sizes[ln.size] += len(ln.text)
    local = max(sizes.items(), key=lambda kv: kv[1])[0] if sizes else 0.0
    n = len(lines)
    kept = {
        j: ln for j, ln in enumerate(lines) if _edge_kind(ln, j, n, height) or _candidate(ln, local - 1.0)
    }
    return _PageRecord(height, width, n, kept, local)


def _open(source: Path | bytes) -> pymupdf.Document:
    try:
        if isinstance(source, bytes):
            doc = pymupdf.open(stream=source, filetype="pdf")
        else:
            doc = pymupdf.open(str(source), filetype="pdf")
    except (RuntimeError, ValueError, _MuPdfError) as exc:  # FileDataError, EmptyFileError are RuntimeErrors
        raise IngestError(f"corrupt or unreadable PDF: {exc}") from exc
    if doc.needs_pass:
        doc.close()
        raise IngestError("encrypted PDF; password required")
    return doc


def _pixel_warnings(pixels: PixelText, chars: int, rebuilt: bool) -> tuple[str, ...]:
    """:data:`TEX_TOO_LONG` or :data:`TEX_UNREADABLE` for a file set mostly in device pixels whose text was not
    rebuilt glyph by glyph, or came out broken; else nothing."""
    if not pixels.glyphs or pixels.glyphs < _PIXEL_SHARE * chars:
        return ()
    if not rebuilt:
        return (TEX_TOO_LONG,)
    return (TEX_UNREADABLE,) if pixels.broken > _PIXEL_BROKEN * pixels.glyphs else ()


class ScanCount:
    """The scanned pages of one document: read by OCR, or left empty for want of an engine (or by its failure)."""

    def __init__(self) -> None:
        self.read_by_ocr = 0
        self.unread = 0
        self.failed = 0

    def read(self, page: pymupdf.Page, read: PageRead, ocr: OcrEngine | None, rebuild: bool, label: str) -> PageRead:
        """The page read by OCR when there is an engine (its text layer's reading otherwise, or if OCR fails)."""
        if ocr is None:
            self.unread += 1
            return read
        try:
            found = read_page(page, rebuild, ocr_textpage(page, ocr))
        except (RuntimeError, ValueError, _MuPdfError) as exc:
            log.warning("ingest.pdf_ocr_failed", file=label, page=page.number + 1, error=str(exc))
            self.failed += 1
            return read
        self.read_by_ocr += 1
        return found

    def warnings(self, pages: int, ocr: OcrEngine | None) -> tuple[str, ...]:
        """What the reader says about them: how many pages were read by OCR, and how many have no text."""
        out = []
        if self.read_by_ocr:
            out.append(f"{self.read_by_ocr} of {pages} pages read by OCR (Tesseract, {ocr.languages if ocr else ''})")
        if self.unread:
            out.append(f"{self.unread} of {pages} {UNREAD_PAGES}; {OCR_UNAVAILABLE}")
        if self.failed:
            out.append(f"{self.failed} of {pages} {UNREAD_PAGES} and OCR failed on them (see the log)")
        return tuple(out)


PageHook = Callable[[int, int, "pymupdf.Page | None", tuple[EdgeLine, ...]], object]
"""``hook(number, total, page, edges)`` after each page is read (1-based; ``page`` None when it could not be
loaded): what else the parser's one pass over the pages does (printed labels, progress). ``edges`` are the
header and footer lines of the page's text layer as the reader read them (``spans.edge_lines``)."""


def read_pdf(
    source: str | Path | bytes, *, max_pages: int | None = None, layout_pages: int = LAYOUT_PAGES,
    on_page: PageHook | None = None, ocr: OcrEngine | None = None,
) -> ParsedPdf:
    """Read a PDF (a path, or its bytes) into a :class:`ParsedPdf`, one page at a time.

    Raises :class:`IngestError` for a corrupt/unreadable or encrypted PDF and a PDF with zero pages.
    A PDF without a usable text layer (a scan; Type 3 glyphs whose codes are not characters) is read
    as empty pages with the warning :data:`NO_TEXT_LAYER`. A file set mostly in device pixels (TeX via dvips)
    whose glyphs have no usable advances or lie on one origin has the warning :data:`TEX_UNREADABLE`, and one
    longer than :data:`TEX_MAX_PAGES` is read word by word with :data:`TEX_TOO_LONG`: their trees are one node
    per page (:data:`PAGES_ONLY`). ``on_page`` sees each page once it is read, while the document is open.
    A page whose text layer has no letters but shows an image (a scan) is read by OCR with ``ocr``; without an
    engine the warnings say how many pages could not be read (:func:`scan_warnings`).
    """
    if isinstance(source, bytes):
        label, doc = "(bytes)", _open(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise IngestError(f"corrupt or unreadable PDF: no such file {path.name}")
        label, doc = path.name, _open(path)
    pages: list[PageText] = []
    records: list[_PageRecord] = []
    layout: list[tuple[LineInfo, ...]] = []
    pdf_labels: list[str] = []
    size_chars: Counter[float] = Counter()
    letters = visible = chars = 0
    pixels = PixelText()
    scans = ScanCount()
    try:
        total = doc.page_count
        if total == 0:
            raise IngestError("PDF has zero pages")
        n = total if max_pages is None else max(1, min(total, max_pages))
        try:
            outline = tuple(
                (int(level), clean_text(str(title)), int(page))
                for level, title, page, *_ in doc.get_toc(simple=True)
                if 1 <= int(page) <= n and clean_text(str(title))
            )
        except (RuntimeError, ValueError) as exc:
            log.warning("ingest.pdf_outline_unreadable", file=label, error=str(exc))
            outline = ()
        rebuild = n <= TEX_MAX_PAGES
        for i in range(n):
            page = None
            edges: tuple[EdgeLine, ...] = ()
            try:
                page = doc.load_page(i)
                read = read_page(page, rebuild)
                edges = read.edges  # of the text layer, whatever OCR reads below
                if needs_ocr(page, any(_letters(ln.text) for ln in read.lines)):  # stops at the first letter
                    read = scans.read(page, read, ocr, rebuild, label)
                lines = read.lines
                pixels += read.pixels
                page_label = page.get_label() if doc.is_pdf else ""
                rect = page.rect
            except (RuntimeError, ValueError, _MuPdfError) as exc:
                log.warning("ingest.pdf_page_unreadable", file=label, page=i + 1, error=str(exc))
                lines, page_label, rect, page, edges = [], "", pymupdf.Rect(0, 0, 612, 792), None, ()
            if on_page is not None:
                on_page(i + 1, n, page, edges)
            text = "\n".join(ln.text for ln in lines)
            pages.append(PageText(number=i + 1, text=text))
            for ln in lines:
                size_chars[round(ln.size * 2) / 2] += len(ln.text)
            letters += _letters(text)  # of the page at once: its newlines are neither letters nor visible
            visible += _visible(text)
            chars += len(text) - max(len(lines) - 1, 0) - text.count(" ")  # the lines' characters but spaces
            if i < layout_pages:
                layout.append(tuple(LineInfo(ln.text, round(ln.x0, 1), ln.size, ln.bold) for ln in lines))
            pdf_labels.append(page_label or "")
            records.append(_record(lines, rect.height or 792.0, rect.width or 612.0))
    finally:
        doc.close()
    if letters < _MIN_LETTERS or letters < _MIN_LETTER_SHARE * visible:
        log.warning("ingest.pdf_no_text_layer", file=label, pages=len(pages), letters=letters, visible=visible)
        return ParsedPdf(
            pages=tuple(PageText(number=p.number, text="") for p in pages),
            outline=(), headings=(), body_font_size=10.0, page_labels=tuple(pdf_labels),
            margins=tuple(() for _ in pages), layout=(), total_pages=total,
            warnings=(NO_TEXT_LAYER, *scans.warnings(len(pages), ocr)),
        )
    tex = _pixel_warnings(pixels, chars, rebuild)
    warnings = (*tex, *scans.warnings(len(pages), ocr))
    if tex:
        log.warning("ingest.pdf_tex_pages_only", file=label, pages=len(pages), glyphs=pixels.glyphs,
                    unsized=pixels.unsized, flat=pixels.flat, stacked=pixels.stacked, reason=tex[0])
    body = max(size_chars.items(), key=lambda kv: kv[1])[0] if size_chars else 10.0
    margins = _margin_lines(records)
    headings: list[HeadingCandidate] = []
    for i, r in enumerate(records):
        headings.extend(_page_headings(i + 1, r, set(margins[i]), body))
    parsed = ParsedPdf(
        pages=tuple(pages),
        outline=outline,
        headings=tuple(headings),
        body_font_size=body,
        page_labels=tuple(pdf_labels[i] or _printed_label(r, margins[i]) for i, r in enumerate(records)),
        margins=tuple(tuple(m) for m in margins),
        running=tuple(tuple(m) for m in running_lines(records, margins)),
        layout=tuple(layout),
        total_pages=total,
        warnings=warnings,
    )
    log.debug("ingest.pdf_read", file=label, pages=len(pages), headings=len(headings), body_font=body)
    return parsed
