"""Text spans of a page: read with pymupdf, glyph by glyph where the font size is wrong, banded into lines.

A span whose reported size fits neither its box height nor its glyph advances (a Type 3 font from
LaTeX via dvips), or is below 1 pt with advances many times larger (dvips text in device pixels, where
every word is its own block at size 0.12 and its box as high), is read again from ``rawdict`` as one
span per glyph, sized from its advances; :func:`_band_spans` groups spans into horizontal bands (visual
lines) by vertical centre, so the words of a line join again whatever block MuPDF put them in.
"""

from __future__ import annotations

import functools
import re
import statistics
from dataclasses import dataclass

import pymupdf


@dataclass
class _Span:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float
    bold: bool
    base: float  # baseline y
    pixel: bool = False  # a glyph (or word) of text set in device pixels, sized from its advances

    @property
    def yc(self) -> float:
        return (self.y0 + self.y1) / 2


@dataclass(frozen=True)
class PixelText:
    """How much of a page's text is set in device pixels (spans below 1 pt: TeX via dvips), and how much of
    that could not be rebuilt: glyphs with no usable advance (a Type 3 font without widths), in a font whose
    advances are all equal (they tell no size), or on the origin of the glyph before them on their line."""

    glyphs: int = 0
    unsized: int = 0
    flat: int = 0
    stacked: int = 0

    def __add__(self, other: PixelText) -> PixelText:
        return PixelText(self.glyphs + other.glyphs, self.unsized + other.unsized, self.flat + other.flat,
                         self.stacked + other.stacked)

    @property
    def broken(self) -> int:
        return self.unsized + self.flat + self.stacked


@functools.lru_cache(maxsize=1024)
def _bold_font(font: str) -> bool:
    """A font whose name says it is bold (a document uses a few fonts: each name judged once)."""
    name = font.lower()
    return any(k in name for k in ("bold", "black", "heavy", "semibold", ",b"))


def _is_bold(span: dict) -> bool:
    return bool(span.get("flags", 0) & 16) or _bold_font(str(span.get("font", "")))


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


# A span's box height over its reported font size: 0.9–1.8 on every page of the dev PDFs. When
# neither the height nor the glyph advances (about half an em each) fit the size, the size is
# wrong, as for a Type 3 font in pixel units drawn at ``1 Tf`` with the scale in the text matrix
# (LaTeX via dvips): MuPDF then reports sizes near 0.1 and, judging gaps by that size, breaks
# words into fragments ("Lect ures", "Lab" / "oratory").
_SANE_HEIGHT = (0.5, 3.0)
_SANE_ADVANCE = (0.1, 2.0)
# No text is set below 1 pt. A smaller size whose glyph advances are many times larger is in device pixels,
# as Ghostscript 9.06 writes dvips text (1 Tf, a 0.12 text matrix: size 0.12 for every font); MuPDF then takes
# the glyph boxes from the same wrong size (0.12 pt high), so the height fits and only the advances tell.
_MIN_SIZE = 1.0


def _span_text(span: dict) -> str:
    return span["text"] if "text" in span else "".join(ch["c"] for ch in span.get("chars", []))


def _size_is_wrong(line: dict, span: dict) -> bool:
    if line.get("dir", (1.0, 0.0))[0] < 0.99:  # rotated text: its box height is not its size
        return False
    x0, y0, x1, y1 = span["bbox"]
    n = len(_span_text(span))
    if y1 <= y0 or not n:
        return False
    size = float(span.get("size", 0.0))
    advance = (x1 - x0) / n
    if 0 < size < _MIN_SIZE and advance > _SANE_ADVANCE[1] * size:
        return True
    return not (_SANE_HEIGHT[0] * size <= y1 - y0 <= _SANE_HEIGHT[1] * size) and not (
        _SANE_ADVANCE[0] * size <= advance <= _SANE_ADVANCE[1] * size
    )


def _dict_spans(data: dict) -> list[tuple[dict, dict]]:
    return [(ln, s) for b in data.get("blocks", []) for ln in b.get("lines", []) for s in ln.get("spans", [])]


# OT1, the TeX text encoding, as dvips leaves it in a Type 3 font without a ToUnicode map: ligatures
# in the control slots, the dashes in the brace slots (and ≤ from the symbol font's slot 0x14).
_OT1 = str.maketrans({"\x0b": "ff", "\x0c": "fi", "\x0d": "fl", "\x0e": "ffi", "\x0f": "ffl",
                      "\x14": "\u2264", "{": "\u2013", "|": "\u2014"})
# Advance widths in em of Computer Modern Roman (cmr10): a glyph's advance over its width here is the
# size its font is set in. Bold (cmbx) is about 15% wider and so reads a little larger, as it looks.
_EM_WIDTHS = dict(zip("abcdefghijklmnopqrstuvwxyz0123456789", (
    0.5, 0.5556, 0.4444, 0.5556, 0.4444, 0.3056, 0.5, 0.5556, 0.2778, 0.3056, 0.5278, 0.2778, 0.8333,
    0.5556, 0.5, 0.5556, 0.5278, 0.3917, 0.3944, 0.3889, 0.5556, 0.5278, 0.7222, 0.5278, 0.5278, 0.4444,
    *[0.5] * 10), strict=True))
_EM_WIDTHS.update({"\x0b": 0.5833, "\x0c": 0.5556, "\x0d": 0.5556, "\x0e": 0.8333, "\x0f": 0.8333})
_MIN_SIZED_GLYPHS = 3  # glyphs of a font with a known width needed to size it from its advances


def _glyph_sizes(spans: list[dict]) -> dict[str, float]:
    """Per font (MuPDF's name, unique per font object): the size its glyphs are set in, from their advances.

    A Type 3 font's box is the union of its glyphs' boxes (a heading font without descenders gets a
    short box), so the advances size it better: the median of advance / Computer Modern width over its
    lower-case letters and digits. Fonts with fewer such glyphs are left out (sized by their box).
    """
    ratios: dict[str, list[float]] = {}
    for s in spans:
        for ch in s.get("chars", []):
            em = _EM_WIDTHS.get(ch["c"])
            if em:
                ratios.setdefault(str(s.get("font", "")), []).append((ch["bbox"][2] - ch["bbox"][0]) / em)
    return {
        font: round(statistics.median(r), 1) for font, r in ratios.items() if len(r) >= _MIN_SIZED_GLYPHS
    }


def _advance_size(s: dict) -> float:
    """The size a span's glyphs are set in from their advances alone: an average glyph is half an em wide."""
    widths = [ch["bbox"][2] - ch["bbox"][0] for ch in s.get("chars", [])]
    return round(2 * statistics.median(widths), 1) if widths else 0.0


def _glyph_spans(s: dict, size: float | None) -> list[_Span]:
    """A span whose size is wrong, as one span per glyph sized by ``size`` (else its box) on the baseline.

    MuPDF's spaces inside such a span are guesses made with the wrong size; they are dropped, and
    :func:`_make_line` puts spaces back from the gaps between glyphs. OT1 codes become letters.
    """
    height = s["bbox"][3] - s["bbox"][1]
    if height < _MIN_SIZE:  # a box as small as the wrong size (device pixels): sized by the advances instead
        size = size or _advance_size(s)
        height = size
    size, bold = size or round(height, 1), _is_bold(s)
    out: list[_Span] = []
    for ch in s.get("chars", []):
        text = _CONTROL.sub("", ch["c"].translate(_OT1))
        if text.strip():
            x0, _, x1, _ = ch["bbox"]
            base = ch["origin"][1]
            out.append(_Span(x0, base - 0.8 * height, x1, base + 0.2 * height, text, size, bold, base, True))
    return out


def _word_sizes(spans: list[tuple[dict, dict]]) -> dict[str, float]:
    """Per font: the size its words in device pixels are set in, from their mean glyph advance (half an em)."""
    advances: dict[str, list[float]] = {}
    for ln, s in spans:
        n = len(_span_text(s))
        if n and _is_pixel(s) and _size_is_wrong(ln, s):
            advances.setdefault(str(s.get("font", "")), []).append((s["bbox"][2] - s["bbox"][0]) / n)
    return {font: round(2 * statistics.median(a), 1) for font, a in advances.items()}


def _pixel_word(s: dict, size: float) -> _Span | None:
    """A span in device pixels taken whole (too many pages to read glyph by glyph), set in ``size``."""
    text = _CONTROL.sub("", _span_text(s).translate(_OT1))
    if not text.strip():
        return None
    x0, _, x1, _ = s["bbox"]
    base = float(s["origin"][1])
    return _Span(x0, base - 0.8 * size, x1, base + 0.2 * size, text, size, _is_bold(s), base, True)


_FLAT_CHARS = 4  # distinct characters of equal advance that make a font's advances tell no size


def _flat_fonts(spans: list[dict]) -> set[str]:
    """Fonts (of re-read spans) whose glyphs all advance alike over at least ``_FLAT_CHARS`` characters."""
    widths: dict[str, dict[str, float]] = {}
    for s in spans:
        for ch in s.get("chars", []):
            if ch["c"].isalnum():
                widths.setdefault(str(s.get("font", "")), {})[ch["c"]] = ch["bbox"][2] - ch["bbox"][0]
    return {font for font, w in widths.items()
            if len(w) >= _FLAT_CHARS and max(w.values()) - min(w.values()) <= 0.02 * max(w.values())}


def _is_pixel(span: dict) -> bool:
    return 0 < float(span.get("size", 0.0)) < _MIN_SIZE


def _plain_span(s: dict) -> list[_Span]:
    """A span as MuPDF reads it (none when it holds no text)."""
    text = _CONTROL.sub("", _span_text(s))  # NUL and friends: Postgres text rejects \x00
    if not text.strip():
        return []
    x0, y0, x1, y1 = s["bbox"]
    return [_Span(x0, y0, x1, y1, text, round(float(s.get("size", 0.0)), 1), _is_bold(s), float(s["origin"][1]))]


def _pixel_count(s: dict, read: list[_Span], flat: set[str]) -> PixelText:
    """What a span read as ``read`` adds to the page's text in device pixels."""
    if not _is_pixel(s):
        return PixelText()
    n = sum(len(r.text) for r in read)
    unsized = sum(len(r.text) for r in read if r.size < _MIN_SIZE)  # no usable advance: left below 1 pt
    return PixelText(n, unsized, n if str(s.get("font", "")) in flat else 0)


EDGE = 0.1  # header / footer: the top and bottom tenth of the page
EdgeLine = tuple[float, str]
"""A header or footer line: minus its top (bottom lines sort first) and its text as MuPDF reads it."""


def edge_lines(layer: dict, height: float) -> tuple[EdgeLine, ...]:
    """The lines of a page's text (``page.get_text("dict")``) in its top or bottom :data:`EDGE` of ``height``.
    Read with the reader's flags (no image blocks): a footer an image splits in two with pymupdf's default
    "dict" flags ("Page", an icon, "12") is one line here."""
    height = height or 1.0
    out: list[EdgeLine] = []
    for block in layer["blocks"]:
        for line in block.get("lines", []):
            y0, y1 = line["bbox"][1], line["bbox"][3]
            if y1 <= EDGE * height or y0 >= (1 - EDGE) * height:
                out.append((-y0, "".join(s["text"] for s in line["spans"]).strip()))
    return tuple(out)


def _collect_spans(page: pymupdf.Page, rebuild: bool = True,
                   textpage: pymupdf.TextPage | None = None) -> tuple[list[_Span], PixelText, tuple[EdgeLine, ...]]:
    """Text spans of a page; a page with wrongly sized spans is read again glyph by glyph (spans in device
    pixels only with ``rebuild``: else each is taken whole, sized from its advances). Also what of the page is
    set in device pixels, and how much of that could not be rebuilt; and the header and footer lines
    (:func:`edge_lines`) of the same reading, so that nothing reads the page's text twice."""
    layer = page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT, textpage=textpage)
    edges = edge_lines(layer, page.rect.height)
    spans = _dict_spans(layer)
    glyphs = any(_size_is_wrong(ln, s) and (rebuild or not _is_pixel(s)) for ln, s in spans)
    sizes: dict[str, float] = {}
    words = {} if rebuild else _word_sizes(spans)
    flat: set[str] = set()
    if glyphs:  # the same spans, with their glyphs instead of their text
        spans = _dict_spans(page.get_text("rawdict", flags=pymupdf.TEXTFLAGS_TEXT, textpage=textpage))
        wrong = [s for ln, s in spans if _size_is_wrong(ln, s)]
        sizes, flat = _glyph_sizes(wrong), _flat_fonts(wrong)
    out: list[_Span] = []
    pixels = PixelText()
    for ln, s in spans:
        font = str(s.get("font", ""))
        if glyphs and _size_is_wrong(ln, s) and (rebuild or not _is_pixel(s)):
            read = _glyph_spans(s, sizes.get(font))
        elif _is_pixel(s) and _size_is_wrong(ln, s):
            read = [w for w in [_pixel_word(s, words.get(font, 0.0))] if w is not None]
        else:
            read = _plain_span(s)
        out.extend(read)
        if _is_pixel(s):  # the rest add nothing (most pages: no span)
            pixels += _pixel_count(s, read, flat)
    return out, pixels, edges


def _band_spans(spans: list[_Span]) -> list[list[_Span]]:
    """Group spans into horizontal bands (visual lines) by vertical centre."""
    spans = sorted(spans, key=lambda s: (round(s.yc, 1), s.x0))
    bands: list[list[_Span]] = []
    centres: list[float] = []
    for s in spans:
        tol = max(2.0, 0.35 * max(s.size, 1.0))
        if bands and abs(centres[-1] - s.yc) <= tol:
            bands[-1].append(s)
        else:
            bands.append([s])
            centres.append(s.yc)
    return bands
