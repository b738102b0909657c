"""PDF reading: per-page text, outline, page labels and layout signals for tree building.

One pass over the pages with pymupdf (``get_text("dict")``): spans are grouped into
visual lines (so a printed-TOC row "Item 7 ..... 34" or a table row stays one line),
spans whose reported font size is wrong (Type 3 fonts from LaTeX via dvips) are taken
glyph by glyph and their words rejoined from the gaps, two-column pages (also when the
columns' baselines do not line up, or a sidebar stands beside the body) are read column
by column, running headers/footers are marked, and lines that look like headings
(larger font, bold, numbering such as ``Item 7.``, ``PART II``, ``Note 3``, ``1.2``) are
kept as :class:`HeadingCandidate`. The result is a frozen, picklable :class:`ParsedPdf`;
the document is closed before returning.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import msgspec
import pymupdf
import structlog

from ingest.pdf_read.columns import page_lines
from ingest.pdf_read.lines import LineInfo, _letters, _Line, _PageRecord, clean_text
from kb.errors import IngestError
from kb.text import count_tokens, normalize_title
from kb.types import PageText

__all__ = [
    "DISPLAY_SIZE",
    "HeadingCandidate",
    "LAYOUT_PAGES",
    "LineInfo",
    "ParsedPdf",
    "clean_text",
    "numbering_of",
    "page_lines",
    "printed_page_number",
    "read_pdf",
]


log = structlog.get_logger("ingest.pdf_read")

LAYOUT_PAGES = 40  # pages whose full line layout is kept (printed-TOC detection)
_MARGIN_TOP = 0.15
_MARGIN_BOTTOM = 0.88
_MIN_REPEAT = 3  # a margin line repeated on this many pages is a running header/footer
_MuPdfError = pymupdf.mupdf.FzErrorBase


class HeadingCandidate(msgspec.Struct, frozen=True):
    """A line that looks like a heading; ``line`` indexes ``page.text.splitlines()``."""

    page: int
    line: int
    text: str
    size: float
    bold: bool
    caps: bool
    y: float  # top of the line, 0..1 of the page height
    x: float  # left of the line, 0..1 of the page width
    numbering: str = ""  # "part:II", "item:7A", "note:3", "dec:1.2", "chapter:4", … or ""


class ParsedPdf(msgspec.Struct, frozen=True):
    """Everything tree building needs from one PDF; no open file handles."""

    pages: tuple[PageText, ...]
    outline: tuple[tuple[int, str, int], ...]
    headings: tuple[HeadingCandidate, ...]
    body_font_size: float
    page_labels: tuple[str, ...] = ()  # per page: PDF page label, else printed page number, else ""
    margins: tuple[tuple[int, ...], ...] = ()  # per page: indexes of running header/footer lines
    layout: tuple[tuple[LineInfo, ...], ...] = ()  # line layout of the first LAYOUT_PAGES pages
    total_pages: int = 0  # pages in the file (may exceed len(pages) with max_pages)

    @property
    def page_count(self) -> int:
        return len(self.pages)


_ROMAN = r"(?:x{0,3}(?:ix|iv|v?i{0,3}))"
_NUMBERING = [
    ("part", re.compile(r"^part\s+(" + _ROMAN + r"|\d{1,2}|one|two|three|four|five|six)\b(?!\.\d)", re.I)),
    ("item", re.compile(r"^item\s*(\d{1,2}[a-z]?)(?:\b|(?=[.:\-–—]))", re.I)),
    ("note", re.compile(r"^notes?\s+(\d{1,2}|[a-z])\b(?!\.\d)(?!,)", re.I)),
    ("chapter", re.compile(r"^(?:chapter|article)\s+(\d{1,3}|" + _ROMAN + r")\b", re.I)),
    ("section", re.compile(r"^section\s+(\d{1,3}(?:\.\d{1,3})*)\b", re.I)),
    (
        "appendix",
        re.compile(r"^(?:appendix|annex|schedule|exhibit)\s+([a-z0-9]{1,3}(?:[.\-]\d{1,3})?)\b", re.I),
    ),
    ("dec", re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,4})(?:\.|\)|:)?\s+(?=[A-Z\u00c0-\u00de\u4e00-\u9fff])")),
    ("roman", re.compile(r"^((?:X{0,3})(?:IX|IV|V?I{0,3}))[.)]\s+(?=[A-Z])")),
    ("alpha", re.compile(r"^([A-Z])[.)]\s+(?=[A-Z])")),
]


_KEYWORD_KINDS = frozenset({"part", "item", "note", "chapter", "section", "appendix"})


def numbering_of(text: str) -> str:
    """Numbering prefix of a heading as ``kind:value`` (e.g. ``item:7A``, ``dec:1.2``), or ""."""
    t = text.strip().replace("\u00a0", " ")
    if not t or t[0].islower():  # "section 1.2 of the Act …" is a sentence, not a heading
        return ""
    for kind, rx in _NUMBERING:
        m = rx.match(t)
        if m and m.group(1):
            value = m.group(1)
            rest = t[m.end() :].lstrip()
            if kind in _KEYWORD_KINDS and rest and re.match(r"[a-z(,;]", rest):
                return ""  # "Note 13 (Pension …) for the service cost", "Exhibit 10.2 of …": a reference
            if kind == "dec" and int(value.split(".")[0]) == 0:
                continue
            return f"{kind}:{value.upper() if kind in ('part', 'item', 'roman', 'chapter') else value}"
    return ""


_PAGE_NUM = re.compile(
    r"^(?:page\s+)?[-–—(\[]?\s*(\d{1,4}|[ivxlcdm]{1,7}|[A-Z]{1,2}-\d{1,3})\s*[-–—)\]]?(?:\s+of\s+\d+)?$", re.I
)
_NUMERIC_TOKEN = re.compile(r"^[\(\-–$€£%]*[\d,.]+[%)]*$")
_TERMINAL = re.compile(r"[.;:,]$")


def printed_page_number(text: str) -> str | None:
    """The page number printed in a header/footer line (``"12"``, ``"iv"``, ``"F-3"``), or None."""
    m = _PAGE_NUM.match(text.strip())
    if not m:
        return None
    token = m.group(1)
    if token.isalpha() and not token.islower() and not re.fullmatch(r"[IVXLCDM]+", token):
        return None
    return token


def _numeric_heavy(text: str, numbering: str) -> bool:
    tokens = text.split()
    if numbering:
        tokens = tokens[1:] if numbering.startswith("dec") else tokens[2:]
    nums = sum(1 for t in tokens if _NUMERIC_TOKEN.match(t) and any(c.isdigit() for c in t))
    return nums >= 2 and nums >= 0.3 * max(len(tokens), 1)


def _candidate(line: _Line, local_body: float) -> bool:
    text = line.text
    if not (2 <= len(text) <= 160) or _letters(text) < 2:
        return False
    numbering = numbering_of(text)
    if _numeric_heavy(text, numbering):
        return False
    if line.cells > 1 and not numbering:
        return False
    caps = text.upper() == text and _letters(text) >= 4
    return bool(line.size >= local_body + 0.5 or line.bold or numbering or (caps and len(text) <= 80))


DISPLAY_SIZE = 1.6
"""A heading at least this many times the body size is display type: a line in the same size right below it
continues it ("3 PAYMENT SYSTEMS AND MARKET" / "INFRASTRUCTURE OVERSIGHT")."""


def _continues(prev: _Line, line: _Line, body: float) -> bool:
    """Is ``line`` the second line of a heading that wrapped from ``prev``?"""
    if abs(prev.size - line.size) > 0.2 or prev.bold != line.bold or numbering_of(line.text):
        return False
    if line.y0 - prev.y0 > 1.8 * max(prev.size, 1.0) or len(prev.text) + len(line.text) > 200:
        return False
    first = line.text[:1]
    return bool(
        first.islower()
        or re.search(r"(,|-|–|&|\b(?:of|and|the|for|to|in|on|with|by|or|from|its|our|an?))$", prev.text, re.I)
        or (body > 0 and prev.size >= DISPLAY_SIZE * body and prev.text.isupper() == line.text.isupper())
    )


def _edge_kind(ln: _Line, j: int, n: int, height: float) -> str:
    """ "top"/"bottom" when line ``j`` of ``n`` can be a running header/footer, else ""."""
    if ln.yc > _MARGIN_BOTTOM * height or j >= n - 2:
        return "bottom"
    if ln.yc < _MARGIN_TOP * height or j < 2:
        return "top"
    return ""


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


def read_pdf(
    source: str | Path | bytes, *, max_pages: int | None = None, layout_pages: int = LAYOUT_PAGES
) -> ParsedPdf:
    """Read a PDF (a path, or its bytes) into a :class:`ParsedPdf`, one page at a time.

    Raises :class:`IngestError` for a corrupt/unreadable or encrypted PDF, a PDF with zero
    pages, and a PDF without a text layer.
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
    letters = 0
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
        for i in range(n):
            try:
                page = doc.load_page(i)
                lines = page_lines(page)
                label = page.get_label() if doc.is_pdf else ""
                rect = page.rect
            except (RuntimeError, ValueError, _MuPdfError) as exc:
                log.warning("ingest.pdf_page_unreadable", file=label, page=i + 1, error=str(exc))
                lines, label, rect = [], "", pymupdf.Rect(0, 0, 612, 792)
            text = "\n".join(ln.text for ln in lines)
            pages.append(PageText(number=i + 1, text=text, tokens=count_tokens(text)))
            for ln in lines:
                size_chars[round(ln.size * 2) / 2] += len(ln.text)
                letters += _letters(ln.text)
            if i < layout_pages:
                layout.append(tuple(LineInfo(ln.text, round(ln.x0, 1), ln.size, ln.bold) for ln in lines))
            pdf_labels.append(label or "")
            records.append(_record(lines, rect.height or 792.0, rect.width or 612.0))
    finally:
        doc.close()
    if letters < 40:
        raise IngestError("no text layer; OCR not configured")
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
        layout=tuple(layout),
        total_pages=total,
    )
    log.debug("ingest.pdf_read", file=label, pages=len(pages), headings=len(headings), body_font=body)
    return parsed


def _margin_key(text: str, edge: str) -> str:
    if printed_page_number(text):
        return "#pagenumber#"
    norm = normalize_title(text)
    return re.sub(r"\d+", "#", norm) if edge == "bottom" and len(norm) <= 60 else norm


def _margin_lines(records: list[_PageRecord]) -> list[list[int]]:
    """Indexes of running headers/footers: edge lines repeated on several pages."""
    keys: list[list[tuple[int, tuple[str, int]]]] = []
    counts: Counter[tuple[str, int]] = Counter()
    for r in records:
        page_keys: list[tuple[int, tuple[str, int]]] = []
        seen: set[tuple[str, int]] = set()
        for j, ln in sorted(r.kept.items()):
            edge = _edge_kind(ln, j, r.n_lines, r.height)
            if not edge:
                continue
            key = (_margin_key(ln.text, edge), int(round(ln.yc / 6.0)))
            page_keys.append((j, key))
            if key not in seen:
                seen.add(key)
                counts[key] += 1
        keys.append(page_keys)
    out: list[list[int]] = []
    many = len(records) >= _MIN_REPEAT
    for page_keys in keys:
        idx: list[int] = []
        for j, (norm, bucket) in page_keys:
            n = counts[(norm, bucket)] + counts[(norm, bucket - 1)] + counts[(norm, bucket + 1)]
            if norm == "#pagenumber#" or (many and n >= _MIN_REPEAT and norm):
                idx.append(j)
        out.append(idx)
    return out


_FOOTER_NUM = re.compile(r"^(?:(\d{1,4})\s+[A-Z][\w.,&'’\- |]{1,50}|[A-Z][\w.,&'’\- |]{1,50}?\s+(\d{1,4}))$")


def _printed_label(r: _PageRecord, margin: list[int]) -> str:
    """Page number printed on the page (footer/header), or ""."""
    for j in margin:
        text = r.kept[j].text
        num = printed_page_number(text)
        if num:
            return num
        m = _FOOTER_NUM.match(text)
        if m:
            return m.group(1) or m.group(2)
    n = r.n_lines
    for j in [*range(max(0, n - 2), n), *range(min(2, n))]:
        num = printed_page_number(r.kept[j].text) if j in r.kept else None
        if num:
            return num
    return ""


def _page_headings(number: int, r: _PageRecord, margin: set[int], body: float) -> list[HeadingCandidate]:
    local_body = min(body, r.local_body) if r.local_body else body
    out: list[HeadingCandidate] = []
    pending: tuple[int, _Line, str] | None = None  # (line index, first line, merged text)

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        j, ln, text = pending
        pending = None
        text = re.sub(r"\s*\((?:continued|cont'd|cont\.)\)\s*$", "", text, flags=re.I).strip()
        if _letters(text) < 2:
            return
        out.append(
            HeadingCandidate(
                page=number,
                line=j,
                text=text,
                size=ln.size,
                bold=ln.bold,
                caps=text.upper() == text and _letters(text) >= 4,
                y=round(ln.y0 / r.height, 4),
                x=round(ln.x0 / r.width, 4),
                numbering=numbering_of(text),
            )
        )

    prev: _Line | None = None
    last = -1
    for j, ln in sorted(r.kept.items()):
        if j in margin:
            continue
        if any(k not in margin for k in range(last + 1, j)):  # a body line in between
            flush()
            prev = None
        last = j
        if pending is not None and prev is not None and _continues(prev, ln, local_body) and _candidate(ln, local_body):
            pending = (pending[0], pending[1], f"{pending[2]} {ln.text}")
            prev = ln
            continue
        flush()
        if _candidate(ln, max(local_body, body - 0.5)):
            pending = (j, ln, ln.text)
        prev = ln
    flush()
    return out
