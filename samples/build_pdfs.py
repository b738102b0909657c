"""Render three sample reports (``samples/pdf-src/*.md``) to PDFs in ``samples/reports/``.

One PDF per tree-building mode the ingester must handle:

* ``outline``     — embedded PDF outline (bookmarks) set with ``doc.set_toc``; each ``##``
  section starts a new page;
* ``printed_toc`` — a cover page with a printed table of contents (dot leaders, printed page
  numbers) and no outline; content pages are numbered from 1 in the footer, so printed page n is
  physical page n + 1;
* ``plain``       — neither: continuous flow, sections recognisable only by heading font size.

The Markdown is parsed with markdown-it-py and laid out page by page with ``pymupdf.TextWriter``
(plain text, no ligatures, so extracted text matches the source). Run with
``.venv/bin/python samples/build_pdfs.py``; the output is byte-for-byte deterministic for a given
PyMuPDF version (fixed metadata, no new file ID).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf
import structlog
from markdown_it import MarkdownIt
from markdown_it.token import Token

log = structlog.get_logger("samples.build_pdfs")

HERE = Path(__file__).resolve().parent
SRC_DIR = HERE / "pdf-src"
OUT_DIR = HERE / "reports"
STYLES = {
    "aurora-pharma-2023-annual-report": "outline",
    "cobalt-logistics-2021-annual-report": "printed_toc",
    "northwind-energy-2023-annual-report": "plain",
}

PAGE = pymupdf.paper_rect("letter")
LEFT, RIGHT, TOP, BOTTOM = 72.0, PAGE.width - 72.0, 72.0, PAGE.height - 64.0
REGULAR, BOLD = pymupdf.Font("helv"), pymupdf.Font("hebo")
BODY_SIZE, TABLE_SIZE, FOOTER_SIZE = 10.0, 9.0, 8.0
HEADING_SIZE = {1: 20.0, 2: 15.0, 3: 12.0, 4: 10.5}
SPACE_BEFORE = {1: 0.0, 2: 14.0, 3: 8.0, 4: 6.0}
GREY = (0.4, 0.4, 0.4)


# ------------------------------------------------------------------ source and blocks
@dataclass(frozen=True)
class Source:
    stem: str
    meta: dict[str, str]
    body: str  # Markdown without front matter


@dataclass(frozen=True)
class Block:
    kind: str  # "heading" | "paragraph" | "bullet" | "table"
    text: str = ""
    level: int = 0
    rows: tuple[tuple[str, ...], ...] = ()  # table: header row first
    right_aligned: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Heading:
    level: int  # Markdown level: 1 = report title, 2 = section, 3 = subsection
    title: str
    page: int  # 1-based page of the content document


def read_source(path: Path) -> Source:
    """Split flat ``key: value`` front matter from the Markdown body."""
    text = path.read_text(encoding="utf-8")
    m = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    if not m:
        raise ValueError(f"{path}: missing front matter")
    meta = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return Source(path.stem, meta, text[m.end():])


def _inline_text(token: Token) -> str:
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts).strip()


def parse_blocks(markdown: str) -> list[Block]:
    """Markdown → flat block list (headings, paragraphs, bullet items, tables)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    blocks: list[Block] = []
    in_list = 0
    row: list[str] = []
    rows: list[tuple[str, ...]] = []
    align: list[bool] = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            blocks.append(Block("heading", _inline_text(tokens[i + 1]), level=int(tok.tag[1])))
        elif tok.type == "bullet_list_open":
            in_list += 1
        elif tok.type == "bullet_list_close":
            in_list -= 1
        elif tok.type == "paragraph_open":
            blocks.append(Block("bullet" if in_list else "paragraph", _inline_text(tokens[i + 1])))
        elif tok.type == "table_open":
            rows, align = [], []
        elif tok.type == "tr_open":
            row = []
        elif tok.type in ("th_open", "td_open"):
            row.append(_inline_text(tokens[i + 1]))
            if tok.type == "th_open":
                align.append("text-align:right" in str(tok.attrGet("style") or ""))
        elif tok.type == "tr_close":
            rows.append(tuple(row))
        elif tok.type == "table_close":
            blocks.append(Block("table", rows=tuple(rows), right_aligned=tuple(align)))
    return blocks


# ------------------------------------------------------------------ layout
def wrap(text: str, font: pymupdf.Font, size: float, width: float) -> list[str]:
    """Greedy word wrap to ``width`` points."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and font.text_length(candidate, fontsize=size) > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


@dataclass
class Layout:
    """Writes blocks onto pages of ``doc`` top to bottom; records where headings land."""

    doc: pymupdf.Document = field(default_factory=pymupdf.open)
    headings: list[Heading] = field(default_factory=list)
    y: float = BOTTOM
    _writers: list[pymupdf.TextWriter] = field(default_factory=list)

    def new_page(self) -> None:
        self.doc.new_page(width=PAGE.width, height=PAGE.height)
        self._writers.append(pymupdf.TextWriter(PAGE))
        self.y = TOP

    def ensure(self, height: float) -> None:
        if self.y + height > BOTTOM:
            self.new_page()

    def text(self, x: float, text: str, font: pymupdf.Font, size: float) -> None:
        self._writers[-1].append((x, self.y + size), text, font=font, fontsize=size)

    def heading(self, level: int, title: str) -> None:
        size = HEADING_SIZE[level]
        lines = wrap(title, BOLD, size, RIGHT - LEFT)
        if self.y > TOP:
            self.y += SPACE_BEFORE[level]
        self.ensure(len(lines) * size * 1.25 + 3 * BODY_SIZE * 1.4)  # keep with the next lines
        self.headings.append(Heading(level, title, self.doc.page_count))
        for line in lines:
            self.text(LEFT, line, BOLD, size)
            self.y += size * 1.25
        self.y += size * 0.35

    def paragraph(self, text: str, indent: float = 0.0, bullet: bool = False) -> None:
        for n, line in enumerate(wrap(text, REGULAR, BODY_SIZE, RIGHT - LEFT - indent)):
            self.ensure(BODY_SIZE * 1.4)
            if bullet and n == 0:
                self.text(LEFT + indent - 10, "•", REGULAR, BODY_SIZE)
            self.text(LEFT + indent, line, REGULAR, BODY_SIZE)
            self.y += BODY_SIZE * 1.4
        self.y += 4 if not bullet else 1

    def table(self, rows: tuple[tuple[str, ...], ...], right_aligned: tuple[bool, ...]) -> None:
        size, pad, line_h = TABLE_SIZE, 18.0, TABLE_SIZE * 1.5
        ncols = len(rows[0])
        widths = [max(BOLD.text_length(r[c], fontsize=size) for r in rows) + pad for c in range(1, ncols)]
        first_w = RIGHT - LEFT - sum(widths)
        self.y += 2
        for r, cells in enumerate(rows):
            font = BOLD if r == 0 else REGULAR
            first_lines = wrap(cells[0], font, size, first_w - pad)
            self.ensure(len(first_lines) * line_h + 2)
            for k, line in enumerate(first_lines):
                self.text(LEFT, line, font, size)
                if k < len(first_lines) - 1:
                    self.y += line_h
            x = LEFT + first_w
            for c, cell in enumerate(cells[1:], start=1):
                w = widths[c - 1]
                cx = x + w - font.text_length(cell, fontsize=size) if right_aligned[c] else x + pad
                self.text(cx, cell, font, size)
                x += w
            self.y += line_h
            if r == 0:
                self.doc[-1].draw_line((LEFT, self.y - 3), (RIGHT, self.y - 3), color=GREY, width=0.5)
        self.doc[-1].draw_line((LEFT, self.y), (RIGHT, self.y), color=GREY, width=0.5)
        self.y += 10

    def add(self, block: Block, new_page_per_section: bool) -> None:
        if block.kind == "heading":
            if new_page_per_section and block.level == 2:
                self.new_page()
            self.heading(block.level, block.text)
        elif block.kind == "paragraph":
            self.paragraph(block.text)
        elif block.kind == "bullet":
            self.paragraph(block.text, indent=14, bullet=True)
        elif block.kind == "table":
            self.table(block.rows, block.right_aligned)

    def finish(self) -> pymupdf.Document:
        for page, writer in zip(self.doc, self._writers, strict=True):
            writer.write_text(page)
        return self.doc


def add_footers(doc: pymupdf.Document, label: str, first_page: int, offset: int) -> None:
    """Print ``label`` and the printed page number (physical - ``offset``) from ``first_page`` on."""
    y = PAGE.height - 36
    for page in doc:
        if page.number + 1 < first_page:
            continue
        number = str(page.number + 1 - offset)
        writer = pymupdf.TextWriter(PAGE, color=GREY)
        writer.append((LEFT, y), label, font=REGULAR, fontsize=FOOTER_SIZE)
        writer.append((RIGHT - REGULAR.text_length(number, fontsize=FOOTER_SIZE), y), number,
                      font=REGULAR, fontsize=FOOTER_SIZE)
        writer.write_text(page)


def insert_toc_page(doc: pymupdf.Document, src: Source, headings: list[Heading]) -> None:
    """Insert a cover page with a printed contents list (dot leaders, printed page numbers)."""
    page = doc.new_page(0, width=PAGE.width, height=PAGE.height)
    writer = pymupdf.TextWriter(PAGE)
    writer.append((LEFT, 110), src.meta["company"], font=BOLD, fontsize=26)
    writer.append((LEFT, 140), f"Annual Report {src.meta['fiscal_year']}", font=REGULAR, fontsize=16)
    writer.append((LEFT, 200), "Contents", font=BOLD, fontsize=15)
    y = 232.0
    for h in headings:
        if h.level not in (2, 3):
            continue
        x, font, size = (LEFT, BOLD, 10.5) if h.level == 2 else (LEFT + 18, REGULAR, 10.0)
        number = str(h.page)  # the content page's printed number
        fixed = font.text_length(f"{h.title} ", fontsize=size) + font.text_length(f" {number}", fontsize=size)
        dots = "." * max(3, int((RIGHT - x - fixed) / font.text_length(".", fontsize=size)))
        writer.append((x, y), f"{h.title} {dots} {number}", font=font, fontsize=size)
        y += 20 if h.level == 2 else 16
    writer.write_text(page)


def build(src: Source, style: str) -> bytes:
    """Render one source in one style and return the PDF bytes."""
    if style not in ("outline", "printed_toc", "plain"):
        raise ValueError(f"unknown style {style!r}")
    layout = Layout()
    layout.new_page()
    for block in parse_blocks(src.body):
        layout.add(block, new_page_per_section=style != "plain")
    doc = layout.finish()
    if doc[0].get_text().strip() == "":  # the first section started a fresh page
        doc.delete_page(0)
        layout.headings = [Heading(h.level, h.title, h.page - 1) for h in layout.headings]
    label = f"{src.meta['company']} — {src.meta['title'].split('—', 1)[-1].strip()}"
    if style == "printed_toc":
        insert_toc_page(doc, src, layout.headings)
        add_footers(doc, label, first_page=2, offset=1)
    else:
        add_footers(doc, label, first_page=1, offset=0)
    if style == "outline":
        doc.set_toc([[h.level - 1, h.title, h.page] for h in layout.headings if h.level > 1])
    stamp = f"D:{int(src.meta['fiscal_year']) + 1}0315090000Z"
    doc.set_metadata({
        "title": src.meta["title"], "author": src.meta["company"],
        "subject": f"{src.meta['company']} annual report, fiscal year {src.meta['fiscal_year']}",
        "keywords": "fictional sample", "creator": "samples/build_pdfs.py", "producer": "PyMuPDF",
        "creationDate": stamp, "modDate": stamp,
    })
    doc.subset_fonts()
    return doc.tobytes(garbage=4, deflate=True, no_new_id=True)


def main() -> int:
    for stem, style in STYLES.items():
        data = build(read_source(SRC_DIR / f"{stem}.md"), style)
        out = OUT_DIR / f"{stem}.pdf"
        out.write_bytes(data)
        with pymupdf.open(out) as doc:
            log.info("samples.pdf_built", path=str(out.relative_to(HERE.parent)), style=style,
                     pages=doc.page_count, outline_entries=len(doc.get_toc()), bytes=len(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
