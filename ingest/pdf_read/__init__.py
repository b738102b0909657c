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
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import pymupdf
import structlog

from ingest.pdf_read.lines import LineInfo, _letters, _Line, _make_line, _PageRecord, clean_text
from ingest.pdf_read.spans import _band_spans, _collect_spans, _Span
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


_PROSE = 20  # letters on one side of a gutter for a line of running text
_MIN_PROSE_LINES = 6  # such lines needed on each side
_GUTTER_STEP = 4.0  # pt between candidate gutter xs (a gutter is at least 1.2 em wide)


@dataclass(frozen=True)
class _Columns:
    """Where a page splits into two columns: the gutter's x, and the bands set in columns."""

    x: float
    rows: frozenset[int] | None = None  # None: every band that no span crosses x in

    def splits(self, band: int) -> bool:
        return self.rows is None or band in self.rows


def _column_split(bands: list[list[_Span]], width: float) -> _Columns | None:
    """The two columns of a page set in two prose columns (or a body and a sidebar), else None."""
    x = _paired_gutter(bands, width)
    return _Columns(x) if x is not None else _free_gutter(bands, width)


def _paired_gutter(bands: list[list[_Span]], width: float) -> float | None:
    """The gutter from wide gaps inside visual lines: columns whose lines share baselines."""
    mids: list[float] = []
    for band in bands:
        band = sorted(band, key=lambda s: s.x0)
        for a, b in zip(band, band[1:], strict=False):
            gap = b.x0 - a.x1
            if gap < 1.2 * max(a.size, 1.0):
                continue
            left = "".join(s.text for s in band if s.x1 <= a.x1 + 0.5)
            right = "".join(s.text for s in band if s.x0 >= b.x0 - 0.5)
            if _letters(left) >= _PROSE and _letters(right) >= _PROSE:
                mids.append((a.x1 + b.x0) / 2)
    if len(mids) < _MIN_PROSE_LINES or len(mids) < 0.3 * len(bands):
        return None
    mid = statistics.median(mids)
    close = sum(1 for m in mids if abs(m - mid) < 0.05 * width)
    if close < 0.7 * len(mids) or not (0.3 * width < mid < 0.7 * width):
        return None
    return mid


def _free_gutter(bands: list[list[_Span]], width: float) -> _Columns | None:
    """Columns found as an x that no line crosses, with running text on both sides.

    Finds columns whose lines do not share baselines (each with its own leading, or set off by
    half a line) and a sidebar beside the body, where :func:`_paired_gutter` sees no gaps inside
    lines. Candidate xs are ``_GUTTER_STEP`` apart across the middle 60% of the page; the x
    whose stretches in columns (:func:`_stretches_in_columns`) hold the most prose lines wins
    (the middle of the widest run of equal xs), and only those stretches are split.
    """
    if len(bands) < 2 * _MIN_PROSE_LINES:
        return None
    sides = _sides(bands, np.arange(0.2 * width, 0.8 * width, _GUTTER_STEP))
    if sides is None:
        return None
    xs, free, left, right = sides
    scored: list[tuple[int, float, frozenset[int]]] = []  # (prose lines, x, bands in columns)
    for j, x in enumerate(xs):
        score, rows = _stretches_in_columns(free[:, j], left.at(j), right.at(j))
        if score:
            scored.append((score, float(x), rows))
    if not scored:
        return None
    top = max(score for score, _, _ in scored)
    best = [(x, rows) for score, x, rows in scored if score == top]
    runs = np.split(
        np.arange(len(best)), np.flatnonzero(np.diff([x for x, _ in best]) > 1.5 * _GUTTER_STEP) + 1
    )
    run = max(runs, key=len)
    x, rows = best[int(run[len(run) // 2])]
    return _Columns(x, rows)


@dataclass(frozen=True)
class _Side:
    """What lies on one side of each candidate x, per band (rows) and x (columns)."""

    has: np.ndarray  # text on this side, and no span crossing x
    prose: np.ndarray  # a line of running text on this side
    base: np.ndarray  # its mean baseline

    def at(self, j: int) -> _Side:
        return _Side(self.has[:, j], self.prose[:, j], self.base[:, j])


def _sides(bands: list[list[_Span]], xs: np.ndarray) -> tuple[np.ndarray, np.ndarray, _Side, _Side] | None:
    """Per band × candidate x: no span crosses x (closer than 0.6 em), and what lies on each side.

    Only the xs with ``_MIN_PROSE_LINES`` prose lines on both sides are kept (returned first);
    None when no x has them.
    """
    spans = [s for band in bands for s in band]
    starts = np.cumsum([0] + [len(band) for band in bands[:-1]])
    pad = np.array([0.6 * max(s.size, 1.0) for s in spans])[:, None]
    letters = np.array([_letters(s.text) for s in spans])[:, None]
    left = np.array([s.x1 for s in spans])[:, None] + pad <= xs  # spans × xs
    right = np.array([s.x0 for s in spans])[:, None] - pad >= xs
    free = ~np.logical_or.reduceat(~(left | right), starts, axis=0)
    prose_left = (np.add.reduceat(letters * left, starts, axis=0) >= _PROSE) & free
    prose_right = (np.add.reduceat(letters * right, starts, axis=0) >= _PROSE) & free
    keep = np.minimum(prose_left.sum(axis=0), prose_right.sum(axis=0)) >= _MIN_PROSE_LINES
    if not keep.any():
        return None
    free, left, right = free[:, keep], left[:, keep], right[:, keep]
    base = np.array([s.base for s in spans])[:, None]

    def side(on: np.ndarray, prose: np.ndarray) -> _Side:
        count = np.add.reduceat(on.astype(np.int32), starts, axis=0)
        baseline = np.add.reduceat(base * on, starts, axis=0) / np.maximum(count, 1)
        return _Side((count > 0) & free, prose[:, keep], baseline)

    return xs[keep], free, side(left, prose_left), side(right, prose_right)


def _stretches_in_columns(free: np.ndarray, left: _Side, right: _Side) -> tuple[int, frozenset[int]]:
    """Prose lines (of the poorer side) in the stretches set in columns, and their bands.

    A stretch of bands between lines that cross x is set in columns when each side has
    ``_MIN_PROSE_LINES`` lines of running text making up most of its lines (not a column of
    figures) and the two sides do not line up as table rows (:func:`_table_rows`).
    """
    score, rows = 0, set()
    edges = np.flatnonzero(np.diff(np.r_[0, free.astype(np.int8), 0]))
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        on_left, on_right = left.has[a:b], right.has[a:b]
        n_left, n_right = int(left.prose[a:b].sum()), int(right.prose[a:b].sum())
        if (
            min(n_left, n_right) >= _MIN_PROSE_LINES
            and n_left >= 0.6 * on_left.sum()
            and n_right >= 0.6 * on_right.sum()
            and not _table_rows(left.base[a:b][on_left], right.base[a:b][on_right])
        ):
            score += min(n_left, n_right)
            rows.update(range(a, b))
    return score, frozenset(rows)


def _block_tops(baselines: np.ndarray) -> np.ndarray:
    """The baselines that start a block: the first, and each after a gap of over 1.25 leadings."""
    gaps = np.diff(baselines)
    if not len(gaps):
        return baselines
    return baselines[np.r_[True, gaps > 1.25 * float(np.median(gaps))]]


def _table_rows(left: np.ndarray, right: np.ndarray) -> bool:
    """Do two sides (their baselines) line up as the cells of table rows do?

    Either many lines sit level with a line of the other side (within 1 pt), or the blocks of
    the two sides start level (within 2 pt) even when their leading differs.
    """

    def level(ys: np.ndarray, others: np.ndarray, tol: float) -> int:
        return sum(1 for y in ys if np.abs(others - y).min() <= tol)

    if level(left, right, 1.0) >= 0.4 * min(len(left), len(right)):
        return True
    tops_left, tops_right = _block_tops(left), _block_tops(right)
    n = level(tops_left, tops_right, 2.0)
    return n >= 2 and n >= 0.5 * min(len(tops_left), len(tops_right))


def page_lines(page: pymupdf.Page) -> list[_Line]:
    """Visual lines of a page in reading order (two columns, or a body and a sidebar, one after the other)."""
    spans = _collect_spans(page)
    if not spans:
        return []
    bands = _band_spans(spans)
    columns = _column_split(bands, page.rect.width)
    if columns is None:
        return [_make_line(b) for b in bands]
    out: list[_Line] = []
    left: list[_Line] = []
    right: list[_Line] = []
    for i, band in enumerate(bands):
        lpart = [s for s in band if s.x1 <= columns.x]
        rpart = [s for s in band if s.x0 >= columns.x]
        if len(lpart) + len(rpart) < len(band) or not columns.splits(i):  # a full-width line
            out.extend(left)
            out.extend(right)
            left, right = [], []
            out.append(_make_line(band))
            continue
        if lpart:
            left.append(_make_line(lpart))
        if rpart:
            right.append(_make_line(rpart))
    out.extend(left)
    out.extend(right)
    return out


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
