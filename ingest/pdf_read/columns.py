"""Reading order: a page's visual lines, two columns (or a body and a sidebar) one after the other.

A page is in columns when wide gaps inside its lines line up (:func:`_paired_gutter`), or when an x
that no line crosses has running text on both sides (:func:`_free_gutter`: columns whose baselines do
not line up, a sidebar beside the body), unless the two sides line up as table rows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
import pymupdf

from ingest.pdf_read.lines import _letters, _Line, _make_line
from ingest.pdf_read.spans import _MIN_SIZE, EdgeLine, PixelText, _band_spans, _collect_spans, _Span

_PROSE = 20  # letters on one side of a gutter for a line of running text
_MIN_PROSE_LINES = 6  # such lines needed on each side
_GUTTER_STEP = 4.0  # pt between candidate gutter xs (a gutter is at least 1.2 em wide)
_STACKED = 0.1  # em: a glyph this close to the origin of the one before it on its line did not advance from it


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


@dataclass(frozen=True)
class PageRead:
    """A page's visual lines in reading order, what of its text is set in device pixels (TeX via dvips), and
    its header and footer lines as read (``spans.edge_lines``: where a printed page number is looked for)."""

    lines: list[_Line]
    pixels: PixelText
    edges: tuple[EdgeLine, ...] = ()


def page_lines(page: pymupdf.Page) -> list[_Line]:
    """Visual lines of a page in reading order (two columns, or a body and a sidebar, one after the other)."""
    return read_page(page).lines


def _stacked(bands: list[list[_Span]]) -> int:
    """Glyphs in device pixels on (nearly) the origin of the glyph before them on their line."""
    count = 0
    for band in bands:
        glyphs = sorted((s for s in band if s.pixel and s.size >= _MIN_SIZE), key=lambda s: s.x0)
        count += sum(1 for a, b in zip(glyphs, glyphs[1:], strict=False) if b.x0 - a.x0 < _STACKED * b.size)
    return count


def read_page(page: pymupdf.Page, rebuild: bool = True, textpage: pymupdf.TextPage | None = None) -> PageRead:
    """:func:`page_lines` with what the page holds in device pixels; ``rebuild=False`` takes such spans whole
    (no glyph-by-glyph reading: the cheap path for a file too long for it). ``textpage``: the page's text from
    elsewhere (OCR) instead of its text layer."""
    spans, pixels, edges = _collect_spans(page, rebuild, textpage)
    if not spans:
        return PageRead([], pixels, edges)
    bands = _band_spans(spans)
    if pixels.glyphs:
        pixels += PixelText(stacked=_stacked(bands))
    return PageRead(_ordered_lines(bands, page.rect.width), pixels, edges)


def _ordered_lines(bands: list[list[_Span]], width: float) -> list[_Line]:
    """Bands made lines in reading order: a page in two columns (or with a sidebar) one column after the other."""
    columns = _column_split(bands, width)
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
