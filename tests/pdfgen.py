"""Synthetic PDFs for tests, written with pymupdf.

``make_report_pdf`` lays out a report from a list of :class:`Sec` (title, level, number of
paragraphs, whether it starts on a new page) and returns where every section landed, so
tests can compare a built tree with the truth. Options add an embedded outline, a
printed table of contents (with or without page numbers) on roman-numbered front-matter
pages, PDF page labels, and SEC-style headings (bold, body size). ``make_type3_report_pdf``
draws the same layout the way TeX through dvips and GPL Ghostscript does (see :class:`_Type3Writer`:
Type 3 fonts in device pixels, OT1 ligature codes, a piece per kern, no ToUnicode), as two runs (:class:`Dvips`):
the issue-27 one at size 0.1 and the issue-41 one (Ghostscript 9.06) at size 0.12 with every word its own block.
``write_column`` sets text in columns for layout pages. Helpers write the broken inputs: encrypted,
corrupt, zero-page, truncated, image-only PDFs and Type 3 glyph codes that are not characters.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

PAGE_W, PAGE_H = 612.0, 792.0
MARGIN = 72.0
BODY_SIZE = 10.0
LINE_H = 14.0
_WORDS = (
    "revenue margin segment growth capital liquidity customer product market operating income tax cash "
    "flow equity debt lease asset liability pension supply demand region volume price cost expense "
    "investment acquisition goodwill inventory receivable contract backlog risk currency interest"
).split()


@dataclass(frozen=True)
class Sec:
    """One section: ``paragraphs`` paragraphs of ~5 lines; ``new_page`` None = only level 1."""

    title: str
    level: int = 1
    paragraphs: int = 3
    new_page: bool | None = None


@dataclass
class Placed:
    """Where a section landed: 1-based physical page, printed body page number, top of page?"""

    title: str
    level: int
    page: int
    printed: int
    at_top: bool


@dataclass
class Layout:
    path: Path
    page_count: int
    front_pages: int
    sections: list[Placed] = field(default_factory=list)

    def page_of(self, title: str) -> int:
        return next(s.page for s in self.sections if s.title == title)


def roman(n: int) -> str:
    vals = [(10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")]
    out = ""
    for v, s in vals:
        while n >= v:
            out += s
            n -= v
    return out


def paragraph(seed: str, sentences: int = 5) -> str:
    """Deterministic filler text; ``seed`` words are woven in so pages can be told apart."""
    rng = random.Random(seed)
    out = []
    for _ in range(sentences):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(10, 16))]
        words.insert(rng.randint(1, len(words) - 1), seed)
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


@functools.cache
def _width(word: str, size: float, font: str) -> float:
    return pymupdf.get_text_length(word, fontname=font, fontsize=size)


def _wrap(text: str, width: float, size: float, font: str = "helv") -> list[str]:
    space = _width(" ", size, font)
    lines: list[list[str]] = []
    cur: list[str] = []
    used = 0.0
    for word in text.split():
        w = _width(word, size, font)
        if cur and used + space + w > width:
            lines.append(cur)
            cur, used = [], 0.0
        used += (space if cur else 0.0) + w
        cur.append(word)
    if cur:
        lines.append(cur)
    return [" ".join(line) for line in lines]


@dataclass
class _Op:
    y: float
    text: str
    size: float
    bold: bool
    x: float = MARGIN


def _layout_body(
    sections: list[Sec], heading_sizes: tuple[float, ...], sec_style: bool
) -> tuple[list[list[_Op]], list[tuple[int, bool]]]:
    """Body pages as draw operations, and (0-based body page, at top) per section."""
    pages: list[list[_Op]] = [[]]
    y = MARGIN
    where: list[tuple[int, bool]] = []
    bottom = PAGE_H - MARGIN - 20
    for i, sec in enumerate(sections):
        new_page = sec.new_page if sec.new_page is not None else sec.level == 1
        size = BODY_SIZE if sec_style else heading_sizes[min(sec.level, len(heading_sizes)) - 1]
        if (new_page and pages[-1]) or y + 3 * size + 2 * LINE_H > bottom:
            pages.append([])
            y = MARGIN
        where.append((len(pages) - 1, not pages[-1]))
        y += size * 1.2
        pages[-1].append(_Op(y, sec.title, size, True))
        y += LINE_H * 0.8
        for k in range(sec.paragraphs):
            for line in _wrap(paragraph(f"s{i}p{k}"), PAGE_W - 2 * MARGIN, BODY_SIZE):
                if y + LINE_H > bottom:
                    pages.append([])
                    y = MARGIN
                y += LINE_H
                pages[-1].append(_Op(y, line, BODY_SIZE, False))
            y += LINE_H * 0.6
    return pages, where


def _placed(sections: list[Sec], where: list[tuple[int, bool]], front: int) -> list[Placed]:
    return [
        Placed(sec.title, sec.level, front + bp + 1, bp + 1, top)
        for sec, (bp, top) in zip(sections, where, strict=True)
    ]


def _draw(page: pymupdf.Page, ops: list[_Op]) -> None:
    for op in ops:
        page.insert_text((op.x, op.y), op.text, fontsize=op.size, fontname="hebo" if op.bold else "helv")


def make_report_pdf(
    path: str | Path,
    sections: list[Sec],
    *,
    outline: bool = False,
    printed_toc: str | None = None,
    toc_levels: int = 9,
    front_matter_pages: int = 0,
    page_labels: bool = False,
    title: str = "Annual Report 2024",
    heading_sizes: tuple[float, ...] = (18.0, 14.0, 12.0),
    sec_style: bool = False,
    page_numbers: bool = True,
) -> Layout:
    """Write a report PDF and return where each section landed.

    ``printed_toc``: ``"pages"`` (titles with printed page numbers and dot leaders),
    ``"no_pages"`` (titles only) or None. The TOC goes on the last front-matter page
    (front matter is numbered i, ii, …; the body is numbered from 1). With
    ``front_matter_pages=0`` a TOC gets its own page before the body anyway.
    ``sec_style`` draws headings bold at body size, as SEC filings do.
    """
    path = Path(path)
    body, where = _layout_body(sections, heading_sizes, sec_style)
    front = front_matter_pages if not printed_toc else max(1, front_matter_pages)
    doc = pymupdf.open()
    for f in range(front):
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        is_toc_page = printed_toc is not None and f == front - 1
        if f == 0 and not (is_toc_page and front == 1):
            page.insert_text((MARGIN, 200), title, fontsize=24, fontname="hebo")
            page.insert_text((MARGIN, 240), "Prepared for the shareholders", fontsize=12, fontname="helv")
        if is_toc_page:
            y = MARGIN + 20
            page.insert_text((MARGIN, y), "Table of Contents", fontsize=16, fontname="hebo")
            y += 30
            for sec, (bp, _) in zip(sections, where, strict=True):
                if sec.level > toc_levels:
                    continue
                x = MARGIN + 18 * (sec.level - 1)
                page.insert_text((x, y), sec.title, fontsize=BODY_SIZE, fontname="helv")
                if printed_toc == "pages":
                    num = str(bp + 1)
                    tw = pymupdf.get_text_length(sec.title, fontname="helv", fontsize=BODY_SIZE)
                    nw = pymupdf.get_text_length(num, fontname="helv", fontsize=BODY_SIZE)
                    dots = "." * max(3, int((PAGE_W - MARGIN - nw - 8 - (x + tw + 8)) / 2.8))
                    page.insert_text((x + tw + 6, y), dots, fontsize=BODY_SIZE, fontname="helv")
                    page.insert_text((PAGE_W - MARGIN - nw, y), num, fontsize=BODY_SIZE, fontname="helv")
                y += 18
        if page_numbers:
            page.insert_text((PAGE_W / 2, PAGE_H - 40), roman(f + 1), fontsize=9, fontname="helv")
    for b, ops in enumerate(body):
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        _draw(page, ops)
        if page_numbers:
            page.insert_text((PAGE_W / 2, PAGE_H - 40), str(b + 1), fontsize=9, fontname="helv")
    if page_labels and front:
        doc.set_page_labels(
            [
                {"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1},
                {"startpage": front, "prefix": "", "style": "D", "firstpagenum": 1},
            ]
        )
    placed = _placed(sections, where, front)
    if outline:
        doc.set_toc([[p.level, p.title, p.page] for p in placed])
    layout = Layout(path, doc.page_count, front, placed)
    doc.save(path)
    doc.close()
    return layout


# ---------------------------------------------------------------------------- Type 3 text (TeX via dvips)

_DEVICE_PX = 72 / 600  # dvips positions glyphs on the pixels of a 600-dpi printer; glyph units are those pixels
_T3_ASCENDERS = frozenset("bdfhklt0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ()[]/\x0b\x0c\x0d\x0e\x0f")
_T3_DESCENDERS = frozenset("gjpqy,;()[]/")
# OT1 (the TeX text encoding): ligatures and dashes sit in the control and brace slots
_OT1 = (("ffi", "\x0e"), ("ffl", "\x0f"), ("ff", "\x0b"), ("fi", "\x0c"), ("fl", "\x0d"),
        ("\u2014", "\x7c"), ("\u2013", "\x7b"), ("\u2264", "\x14"))
_OT1_TEXT = {code: text for text, code in _OT1}
# letter pairs TeX kerns (cmr): dvips starts a new positioned fragment at each ("Mo dules", "Lab oratory")
_KERNS = frozenset({"od", "nt", "bo", "Fo", "Av", "To", "Te", "Wa", "Va", "ov", "ow", "oy", "ox", "ck", "ax", "Ta"})


def ot1(text: str) -> str:
    """``text`` in OT1 codes: "Definition" → "De\\x0cnition", an en dash → ``\\x7b``."""
    for plain, code in _OT1:
        text = text.replace(plain, code)
    return text


@dataclass(frozen=True)
class Dvips:
    """How one TeX → dvips → GPL Ghostscript run writes its text, as pymupdf reads it back.

    ``gs926`` is the issue-27 emulation: every font at ``0.1 Tf`` (MuPDF reports size 0.1) with a FontMatrix
    scaling glyph pixels to text space, glyph boxes as tall as the glyphs, pieces of a line in one block.
    ``gs906`` is the issue-41 file (53 pages of lecture notes, "GPL Ghostscript 9.06" / "dvipsk 5.58f"):
    text space is the 600-dpi device's pixels (``1 Tf`` and a ``0.12`` text matrix: MuPDF reports size 0.12),
    the FontBBox is one pixel tall (every glyph box is 0.12 pt high), and the words of a line sit a device
    pixel above or below its baseline in turn, so MuPDF makes every word and every kerned piece its own
    block (it opens a block when a glyph is more than 1.5 × size off the last one's baseline). Computer
    Modern is about a fifth wider than the Times metrics drawn here (``widths``).
    """

    name: str
    producer: str
    creator: str
    tf: float  # the Tf operand
    widths: float = 1.0  # advance widths as a multiple of Times'
    word_blocks: bool = False  # every piece its own text object, a pixel off the baseline in turn


GS926 = Dvips("gs926", "GPL Ghostscript 9.26", "dvips(k) 5.998 Copyright 2018 Radical Eye Software", 0.1)
GS906 = Dvips("gs906", "GPL Ghostscript 9.06", "dvipsk 5.58f Copyright 1986, 1994 Radical Eye Software", 1.0,
              widths=1.2, word_blocks=True)


class _Type3Writer:
    """Text the way TeX → dvips → GPL Ghostscript writes it (:class:`Dvips` says which run), read with pymupdf:

    * one Type 3 font per face and size, glyphs in device pixels, no ToUnicode map and glyph names that mean
      nothing (``/a12``); the producer and creator name Ghostscript and dvipsk, and there is no outline;
    * OT1 codes: ligatures come out as control characters ("De\\x0cnition"), dashes as ``{``/``|``, ≤ as ``\\x14``;
    * each word is cut at its kerns and each piece placed on its own, so MuPDF makes every piece its own
      span and line ("Lab" / "oratory"), and with ``word_blocks`` its own block;
    * headings differ from the body only in the glyphs' size and font (bold is a second font, not a flag);
      fonts are named by their object only (``/R12``: pymupdf reports ``Type3 (12 0 R)``, no face name).
    """

    def __init__(self, doc: pymupdf.Document, ops: list[_Op], seed: int = 7, run: Dvips = GS926) -> None:
        self.doc, self.rng, self.run = doc, random.Random(seed), run
        faces: dict[tuple[bool, float], set[str]] = {}
        for op in ops:
            faces.setdefault((op.bold, op.size), set()).update(ot1(op.text).replace(" ", ""))
        self.fonts = {key: self._font(key, codes) for key, codes in sorted(faces.items())}
        if run.word_blocks:
            self.names = {key: f"R{xref}" for key, xref in self.fonts.items()}
        else:
            self.names = {key: f"R{k + 7}" for k, key in enumerate(self.fonts)}
        doc.set_metadata({"producer": run.producer, "creator": run.creator})

    def advance(self, text: str, size: float, bold: bool) -> float:
        """Width in pt of OT1 ``text`` (Times metrics, times ``widths``, stand in for Computer Modern)."""
        return self.run.widths * sum(_width(_OT1_TEXT.get(c, c), size, "tibo" if bold else "tiro") for c in text)

    def _font(self, key: tuple[bool, float], codes: set[str]) -> int:
        bold, size = key
        px = size / _DEVICE_PX  # pixels per em
        procs, widths, boxes = [], {}, []
        for c in sorted(codes):
            w = round(self.advance(c, size, bold) / _DEVICE_PX, 2)
            top = round(px * (0.7 if c in _T3_ASCENDERS else 0.45))
            bottom = -round(px * (0.2 if c in _T3_DESCENDERS else 0.0))
            boxes.append((0, bottom, w, top))
            widths[ord(c)] = w
            procs.append(f"/a{ord(c)} {self._stream(f'{w} 0 0 {bottom} {w} {top} d1 0 {bottom} {w} {top - bottom} re f')} 0 R")
        first, last = min(widths), max(widths)
        if self.run.word_blocks:  # text space in pixels; a box one pixel tall
            bbox, scale = (0, 0, max(b[2] for b in boxes), 1), 1.0
        else:
            bbox = (0, min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))
            scale = _DEVICE_PX / self.run.tf
        font = self.doc.get_new_xref()
        self.doc.update_object(
            font,
            f"<< /Type /Font /Subtype /Type3 /FontBBox [{' '.join(str(round(v)) for v in bbox)}] "
            f"/FontMatrix [{scale:.4f} 0 0 {scale:.4f} 0 0] /CharProcs << {' '.join(procs)} >> "
            f"/Encoding << /Type /Encoding /Differences [{' '.join(f'{k} /a{k}' for k in sorted(widths))}] >> "
            f"/FirstChar {first} /LastChar {last} "
            f"/Widths [{' '.join(str(widths.get(i, 0)) for i in range(first, last + 1))}] /Resources << >> >>",
        )
        return font

    def _stream(self, content: str) -> int:
        xref = self.doc.get_new_xref()
        self.doc.update_object(xref, "<< >>")
        self.doc.update_stream(xref, content.encode("latin-1"))
        return xref

    def _pieces(self, word: str) -> list[str]:
        """A word cut at its kerned letter pairs."""
        out, start = [], 0
        for i in range(1, len(word)):
            if word[i - 1 : i + 1] in _KERNS:
                out.append(word[start:i])
                start = i
        return [*out, word[start:]]

    def _show(self, name: str, x: float, y: float, piece: str, k: int) -> str:
        """One positioned piece: at ``0.1 Tf`` in one text object (gs926), or in a text object of its own in
        pixel units, a pixel above or below the baseline in turn (gs906)."""
        data = piece.encode("latin-1").hex()
        if not self.run.word_blocks:
            return f"/{name} {self.run.tf} Tf 1 0 0 1 {x:.3f} {y:.3f} Tm <{data}> Tj"
        y += _DEVICE_PX if k % 2 else -_DEVICE_PX
        return f"BT /{name} {self.run.tf:g} Tf {_DEVICE_PX:.2f} 0 0 {_DEVICE_PX:.2f} {x:.2f} {y:.2f} Tm <{data}> Tj ET"

    def _line(self, op: _Op) -> list[str]:
        name = self.names[(op.bold, op.size)]
        x = op.x
        commands = []
        for word in ot1(op.text).split(" "):
            for k, piece in enumerate(self._pieces(word) if word else []):
                if k:
                    x += self.rng.choice((-0.028, 0.028)) * op.size  # the kern
                fx = round(x / _DEVICE_PX) * _DEVICE_PX
                commands.append(self._show(name, fx, PAGE_H - op.y, piece, len(commands)))
                x += self.advance(piece, op.size, op.bold)
            x += 0.333 * op.size * self.run.widths
        return commands

    def draw(self, page: pymupdf.Page, ops: list[_Op]) -> None:
        commands = [cmd for op in ops for cmd in self._line(op)]
        content = self._stream("\n".join(commands if self.run.word_blocks else ["BT", *commands, "ET"]))
        fonts = " ".join(f"/{self.names[key]} {xref} 0 R" for key, xref in self.fonts.items())
        self.doc.xref_set_key(page.xref, "Contents", f"{content} 0 R")
        self.doc.xref_set_key(page.xref, "Resources", f"<< /Font << {fonts} >> >>")


def make_type3_report_pdf(
    path: str | Path, sections: list[Sec], *, heading_sizes: tuple[float, ...] = (18.0, 14.0, 12.0),
    run: Dvips = GS926,
) -> Layout:
    """The body of :func:`make_report_pdf` (page numbers included) in fragmented Type 3 text, as ``run`` writes it."""
    path = Path(path)
    body, where = _layout_body(sections, heading_sizes, False)
    for b, ops in enumerate(body):
        ops.append(_Op(PAGE_H - 40, str(b + 1), 9.0, False, PAGE_W / 2))
    doc = pymupdf.open()
    writer = _Type3Writer(doc, [op for ops in body for op in ops], run=run)
    for ops in body:
        writer.draw(doc.new_page(width=PAGE_W, height=PAGE_H), ops)
    layout = Layout(path, doc.page_count, 0, _placed(sections, where, 0))
    doc.save(path)
    doc.close()
    return layout


def make_broken_dvips_pdf(path: str | Path, sections: list[Sec], flaw: str) -> Layout:
    """:func:`make_type3_report_pdf` as Ghostscript 9.06 writes it, then broken: ``no_widths`` (Type 3 fonts
    without /Widths), ``equal_advances`` (every glyph of every font 50 pixels wide) or ``one_origin`` (every
    word of a page placed at the same point)."""
    path = Path(path)
    layout = make_type3_report_pdf(path, sections, run=GS906)
    doc = pymupdf.open(path)
    for xref in range(1, doc.xref_length()):
        if doc.xref_get_key(xref, "Subtype")[1] != "/Type3":
            continue
        if flaw == "no_widths":
            for key in ("Widths", "FirstChar", "LastChar"):
                doc.xref_set_key(xref, key, "null")
        elif flaw == "equal_advances":
            count = len(doc.xref_get_key(xref, "Widths")[1].strip("[]").split())
            doc.xref_set_key(xref, "Widths", f"[{' '.join(['50'] * count)}]")
    if flaw == "one_origin":
        for page in doc:
            for xref in page.get_contents():
                content = doc.xref_stream(xref).decode("latin-1")
                doc.update_stream(xref, re.sub(r"(Tf [\d.]+ 0 0 [\d.]+) [\d.]+ [\d.]+ Tm", r"\1 200 400 Tm",
                                               content).encode("latin-1"))
    doc.save(path.with_suffix(".tmp"))
    doc.close()
    path.with_suffix(".tmp").replace(path)
    return layout


def make_long_dvips_pdf(path: str | Path, pages: int) -> Path:
    """A dvips file (Ghostscript 9.06) of ``pages`` pages, each a numbered section heading and a short paragraph."""
    path = Path(path)
    body = [[_Op(MARGIN + 20, f"{p + 1} Lecture {p + 1}", 14.4, True),
             *(_Op(MARGIN + 50 + LINE_H * k, line, BODY_SIZE, False)
               for k, line in enumerate(_wrap(paragraph(f"p{p % 50}", 2), 400, BODY_SIZE, "tiro"))),
             _Op(PAGE_H - 40, str(p + 1), 9.0, False, PAGE_W / 2)] for p in range(pages)]
    doc = pymupdf.open()
    writer = _Type3Writer(doc, [op for ops in body[:50] for op in ops] + [op for ops in body for op in ops[:1]],
                          run=GS906)
    for ops in body:
        writer.draw(doc.new_page(width=PAGE_W, height=PAGE_H), ops)
    doc.save(path)
    doc.close()
    return path


def make_text_pdf(path: str | Path, pages: list[str], *, size: float = BODY_SIZE) -> Path:
    """One page per string (plain text, wrapped)."""
    path = Path(path)
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_textbox(
            pymupdf.Rect(MARGIN, MARGIN, PAGE_W - MARGIN, PAGE_H - MARGIN), text, fontsize=size
        )
    doc.save(path)
    doc.close()
    return path


def write_column(
    page: pymupdf.Page,
    x: float,
    y: float,
    width: float,
    text: str,
    *,
    size: float = BODY_SIZE,
    leading: float = LINE_H,
    font: str = "helv",
) -> list[str]:
    """Wrap ``text`` into a column ``width`` wide, first baseline at ``y``; returns its lines."""
    lines = _wrap(text, width, size, font)
    for k, line in enumerate(lines):
        page.insert_text((x, y + k * leading), line, fontsize=size, fontname=font)
    return lines


def make_encrypted_pdf(path: str | Path) -> Path:
    path = Path(path)
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Secret quarterly numbers", fontsize=12)
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="user-secret", owner_pw="owner-secret")
    doc.close()
    return path


def make_image_only_pdf(path: str | Path, pages: int = 2) -> Path:
    """Scanned-looking pages: an image each, no text layer."""
    path = Path(path)
    doc = pymupdf.open()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 120, 160), False)
    pix.set_rect(pix.irect, (230, 230, 230))
    pix.set_rect(pymupdf.IRect(10, 20, 110, 30), (20, 20, 20))  # a "line of text" drawn as pixels
    for _ in range(pages):
        doc.new_page().insert_image(pymupdf.Rect(72, 72, 540, 720), pixmap=pix)
    doc.save(path)
    doc.close()
    return path


def make_glyph_code_pdf(path: str | Path, pages: int = 3) -> Path:
    """Every glyph in a Type 3 font without a ToUnicode map whose codes are glyph numbers (1, 2, 3, …), not
    characters: the text layer reads as control characters."""
    path = Path(path)
    doc = pymupdf.open()

    def stream(content: str) -> int:
        xref = doc.get_new_xref()
        doc.update_object(xref, "<< >>")
        doc.update_stream(xref, content.encode())
        return xref

    letters = "abcdefghijklmnopqrstuvwxyz"
    procs = " ".join(f"/g{k} {stream('500 0 0 0 450 700 d1 0 0 450 700 re f')} 0 R" for k in range(1, 27))
    font = doc.get_new_xref()
    doc.update_object(font, "<< /Type /Font /Subtype /Type3 /FontBBox [0 0 500 700] /FontMatrix [0.001 0 0 0.001 0 0] "
                      f"/CharProcs << {procs} >> /Encoding << /Type /Encoding /Differences [1 "
                      f"{' '.join(f'/g{k}' for k in range(1, 27))}] >> /FirstChar 1 /LastChar 26 "
                      f"/Widths [{' '.join(['500'] * 26)}] /Resources << >> >>")
    for n in range(pages):
        words = [w for w in paragraph(f"page{n}", 12).lower().split() if w.isalpha()]
        commands = ["BT /G 10 Tf"]
        for k in range(0, len(words), 10):
            codes = " ".join(w for w in words[k : k + 10])
            data = "".join(f"{letters.index(c) + 1:02x}" if c in letters else "" for c in codes)
            commands.append(f"1 0 0 1 {MARGIN} {PAGE_H - MARGIN - 14 * k / 10:.1f} Tm <{data}> Tj")
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        doc.xref_set_key(page.xref, "Contents", f"{stream(chr(10).join([*commands, 'ET']))} 0 R")
        doc.xref_set_key(page.xref, "Resources", f"<< /Font << /G {font} 0 R >> >>")
    doc.save(path)
    doc.close()
    return path


def make_corrupt_pdf(path: str | Path) -> Path:
    path = Path(path)
    path.write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\nthis is not a real pdf body\n" + bytes(range(256)) * 4)
    return path


def make_truncated_pdf(path: str | Path, source: str | Path) -> Path:
    """The first 300 bytes of a real PDF."""
    path = Path(path)
    path.write_bytes(Path(source).read_bytes()[:300])
    return path


def make_zero_page_pdf(path: str | Path) -> Path:
    """A syntactically valid PDF whose page tree is empty (pymupdf refuses to save one)."""
    path = Path(path)
    path.write_bytes(
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
        b"2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n"
        b"trailer << /Root 1 0 R >>\n%%EOF\n"
    )
    return path


def make_scanned_pdf(path: str | Path, pages: list[str], *, font: str = "helv", size: float = 13.0,
                     dpi: int = 150) -> Path:
    """Scanned pages: each string typeset on a page, the page photographed (rendered at ``dpi``) and only the
    picture kept — no text layer, the words where they were drawn. ``font="china-s"`` for Chinese."""
    path = Path(path)
    out = pymupdf.open()
    for text in pages:
        src = pymupdf.open()
        page = src.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_textbox(pymupdf.Rect(MARGIN, MARGIN, PAGE_W - MARGIN, PAGE_H - MARGIN), text, fontsize=size,
                            fontname=font)
        pix = page.get_pixmap(dpi=dpi, alpha=False)
        out.new_page(width=PAGE_W, height=PAGE_H).insert_image(pymupdf.Rect(0, 0, PAGE_W, PAGE_H), pixmap=pix)
        src.close()
    out.save(path)
    out.close()
    return path


SEGMENTS = ("Industrial", "Consumer", "Energy")


def segments_pdf(notes_page: bool = False) -> tuple[bytes, dict[str, float]]:
    """A page of three segment paragraphs that share their wording (and, with ``notes_page``, a second page of
    notes); the PDF and the top of each paragraph as a fraction of the page height."""
    doc = pymupdf.open()
    page = doc.new_page()
    tops, y = {}, 72.0
    for i, name in enumerate(SEGMENTS):
        tops[name] = y / page.rect.height
        for line in (f"{name} segment", f"Segment operating income of the {name} segment was {100 + i}.5 million,",
                     "up from the prior year on higher volumes and pricing.",
                     f"The {name} segment employed {1200 + i} people at the end of the year."):
            page.insert_text((72, y), line, fontsize=10)
            y += 16
        y += 40
    if notes_page:
        doc.new_page().insert_text((72, 72), "Notes. Nothing about segments here.", fontsize=10)
    return doc.tobytes(), tops
