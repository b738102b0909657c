"""Documents beyond SEC filings, written with pymupdf, with the truth of where every section starts.

Kinds, each drawn the way its real counterpart is typeset:

* ``lecture_notes`` — LaTeX lecture notes: chapters, sections and subsections numbered ``1``,
  ``1.1``, ``1.1.1``, set in a Type 3 font (glyph fragments, as dvips and ps2pdf write them), with or
  without a LaTeX table of contents (spaced dot leaders, the number in its own column).
* ``research_paper`` — a two-column paper: a full-width title block and abstract, then numbered
  sections and subsections in the columns, subsection headings bold at body size.
* ``annual_report`` — a central-bank style annual report (~200 pages): cover, a printed contents
  list over several roman-numbered pages (three levels, long titles wrapped), chapters in capitals
  in the body (title case in the contents), running headers, sections starting mid-page.
* ``regulatory_release`` — a regulator's release: ``I. INTRODUCTION`` / ``A. Scope`` headings,
  bold at body size.
* ``earnings_release`` — a quarterly earnings release: a handful of bold unnumbered headings,
  then statements whose titles are bold capitals.

Issue 27 added ``tex_article`` (LaTeX ``article`` through dvips and Ghostscript: ligature and dash titles,
subsubsections bold at body size), ``institutional_report`` (a central bank's report: two-page contents with
part dividers, unnumbered display chapters, sidebars, the chapter name as running head) and
``earnings_release_tables`` (financial tables under bold and display-size titles). Issue 41 added ``dvips_notes`` and
``dvips_notes_unnumbered``: 53 pages of lecture notes as dvipsk 5.58f and Ghostscript 9.06 write them (every word its
own block at size 0.12), with numbered headings or headings told only by size and spacing.

:func:`section_recall` scores a built tree against the truth: the share of the true sections found
as a node with the same title (after normalisation) starting within ``tolerance`` pages.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from kb.core.types import DocumentTree, TreeNode
from tests.pdfgen import (
    GS906,
    GS926,
    PAGE_H,
    PAGE_W,
    Dvips,
    _Op,
    _Type3Writer,
    _width,
    _wrap,
    paragraph,
    roman,
)
from tests.pdfgen import Sec as Section


@dataclass(frozen=True)
class Truth:
    """Where one section landed: title as printed in the body, level, 1-based physical page."""

    title: str
    level: int
    page: int


@dataclass(frozen=True)
class Style:
    columns: int = 1
    font: str = "helv"
    bold: str = "hebo"
    body: float = 10.0
    leading: float = 13.0
    sizes: tuple[float, ...] = (16.0, 13.0, 11.0)
    bold_levels: int = 3
    new_page_level: int = 1  # sections of this level or above start a new page (0: never)
    caps_levels: int = 0  # levels drawn in capitals in the body
    type3: bool = False
    dvips: Dvips = GS926  # which dvips + Ghostscript run writes the Type 3 text
    header: str = ""  # running header on body pages
    latex_heads: bool = False  # LaTeX book style: "CHAPTER 1. TITLE" / "1.2. SECTION" heads with the page number
    chapter_label: bool = False  # level 1 drawn as "Chapter N" above its (unnumbered) title
    margin: float = 72.0
    gap: float = 24.0


@dataclass
class Made:
    path: Path
    truth: list[Truth]
    page_count: int


def _body_title(sec: Section, style: Style) -> str:
    return sec.title.upper() if sec.level <= style.caps_levels else sec.title


class _Flow:
    """Lines flowing down columns and pages."""

    def __init__(self, style: Style, first_top: float) -> None:
        self.s = style
        self.pages: list[list[_Op]] = [[]]
        self.col = 0
        self.top = first_top
        self.y = first_top
        self.bottom = PAGE_H - style.margin - 10
        self.col_w = (PAGE_W - 2 * style.margin - style.gap * (style.columns - 1)) / style.columns

    @property
    def x(self) -> float:
        return self.s.margin + self.col * (self.col_w + self.s.gap)

    def new_page(self) -> None:
        self.pages.append([])
        self.col, self.top, self.y = 0, self.s.margin, self.s.margin

    def next_column(self) -> None:
        if self.col + 1 < self.s.columns:
            self.col += 1
            self.y = self.top
        else:
            self.new_page()

    def room(self, height: float) -> None:
        if self.y + height > self.bottom:
            self.next_column()

    def line(self, text: str, size: float, bold: bool, step: float) -> None:
        self.room(step)
        self.y += step
        self.pages[-1].append(_Op(self.y, text, size, bold, self.x))


def _lay_out(sections: Sequence[Section], style: Style, title_block: Sequence[tuple[str, float, bool]],
             ) -> tuple[list[list[_Op]], list[tuple[int, str]]]:
    """Body pages as draw operations, and (0-based body page, printed title) per section."""
    s = style
    y = s.margin
    wide = s.dvips.widths if s.type3 else 1.0  # lines wrapped to the widths drawn
    head: list[_Op] = []
    for text, size, bold in title_block:  # full width on the first page
        for ln in _wrap(text, (PAGE_W - 2 * s.margin) / wide, size, s.bold if bold else s.font):
            y += size * 1.3
            head.append(_Op(y, ln, size, bold, s.margin))
    flow = _Flow(s, y + (12 if head else 0))
    flow.pages[0].extend(head)
    where: list[tuple[int, str]] = []
    for i, sec in enumerate(sections):
        size = s.sizes[min(sec.level, len(s.sizes)) - 1]
        bold = sec.level <= s.bold_levels
        font = s.bold if bold else s.font
        title = _body_title(sec, s)
        label = ""
        if s.chapter_label and sec.level == 1:
            label, _, title = title.partition(" ")
            label = f"Chapter {label}"
        lines = _wrap(title, flow.col_w / wide, size, font)
        if sec.level <= s.new_page_level and len(flow.pages[-1]) > (len(head) if len(flow.pages) == 1 else 0):
            flow.new_page()  # unless the page holds nothing but the title block
        flow.room(len(lines) * size * 1.3 + size * 0.8 + 3 * s.leading)
        where.append((len(flow.pages) - 1, title))
        flow.y += size * 0.8
        if label:
            flow.line(label, size * 0.85, bold, size * 1.3)
            flow.y += size * 0.6
        for ln in lines:
            flow.line(ln, size, bold, size * 1.3)
        flow.y += s.leading * 0.3
        for k in range(sec.paragraphs):
            for ln in _wrap(paragraph(f"s{i}p{k}"), flow.col_w / wide, s.body, s.font):
                flow.line(ln, s.body, False, s.leading)
            flow.y += s.leading * 0.5
    return flow.pages, where


def _draw(doc: pymupdf.Document, pages: list[list[_Op]], style: Style, writer: _Type3Writer | None) -> None:
    for ops in pages:
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        if writer is not None:
            writer.draw(page, ops)
            continue
        for op in ops:
            page.insert_text((op.x, op.y), op.text, fontsize=op.size, fontname=style.bold if op.bold else style.font)


def _page_ops(ops: list[_Op], number: str, style: Style, header: str) -> list[_Op]:
    out = list(ops)
    out.append(_Op(PAGE_H - 40, number, 9.0, False, PAGE_W / 2 - 4))
    if header:
        out.append(_Op(40, header, 8.0, False, style.margin))
    return out


def _latex_heads(body: list[list[_Op]], sections: Sequence[Section], where: list[tuple[int, str]],
                 style: Style) -> list[list[_Op]]:
    """LaTeX ``book`` page heads: even pages "CHAPTER 2. TITLE", odd pages "2.3. SECTION TITLE", the page
    number at the outer edge; a chapter's first page has its number at the foot instead."""
    out = []
    starts = {bp for sec, (bp, _) in zip(sections, where, strict=True) if sec.level == 1}
    for b, ops in enumerate(body):
        number = str(b + 1)
        if b in starts:
            out.append(_page_ops(ops, number, style, ""))
            continue
        chapter = next(t for sec, (bp, t) in reversed(list(zip(sections, where, strict=True)))
                       if sec.level == 1 and bp <= b)
        section = next((sec.title for sec, (bp, _) in reversed(list(zip(sections, where, strict=True)))
                        if sec.level == 2 and bp <= b), chapter)
        c_num, _, c_title = chapter.partition(" ") if chapter[:1].isdigit() else ("", "", chapter)
        s_num, _, s_title = section.partition(" ")
        if (b + 1) % 2 == 0:
            head = [_Op(50, number, 10.0, False, style.margin),
                    _Op(50, f"CHAPTER {c_num}. {c_title.upper()}", 10.0, False, style.margin + 40)]
        else:
            text = f"{s_num}. {s_title.upper()}"
            head = [_Op(50, text, 10.0, False, PAGE_W - style.margin - 40 - _width(text, 10.0, style.font)),
                    _Op(50, number, 10.0, False, PAGE_W - style.margin - 10)]
        out.append(list(ops) + head)
    return out


def _toc_ops(entries: list[tuple[Section, int]], style: Style, latex: bool, title: str,
             number_first: bool = False) -> list[list[_Op]]:
    """Contents pages: one line per entry (wrapped when long), printed page number at the right (or, with
    ``number_first``, in a column at the left as designed reports set it: "12   Financial stability")."""
    s = style
    pages: list[list[_Op]] = [[_Op(s.margin + 30, title, 18.0, True, s.margin)]]
    y = s.margin + 60
    right = PAGE_W - s.margin
    for sec, printed in entries:
        indent = s.margin + (0 if latex else 16) * (sec.level - 1) + (14 * (sec.level - 1) if latex else 0)
        bold = sec.level == 1
        font = s.bold if bold else s.font
        number, text = "", sec.title
        if latex:
            m = re.match(r"^(\d+(?:\.\d+)*)\s+(.*)$", sec.title)
            if m:
                number, text = m.group(1), m.group(2)
        text_x = indent + (10 + 7 * number.count(".") + 16 if number else 0) + (40 if number_first else 0)
        lines = _wrap(text, right - 60 - text_x, s.body, font)
        if y + (len(lines) + 1) * 16 > PAGE_H - s.margin:
            pages.append([])
            y = s.margin + 20
        if bold:
            y += 6
        for k, ln in enumerate(lines):
            y += 15
            if k == 0 and number:
                pages[-1].append(_Op(y, number, s.body, bold, indent))
            pages[-1].append(_Op(y, ln, s.body, bold, text_x))
        num = str(printed)
        nw = _width(num, s.body, font)
        if number_first:
            pages[-1].append(_Op(y - 15 * (len(lines) - 1), num, s.body, bold, s.margin))
            continue
        end_x = text_x + _width(lines[-1], s.body, font)
        if not (latex and bold):  # LaTeX sets chapter lines without leaders
            leader = " ." if latex else "."
            step = _width(leader, s.body, s.font) + (0.1 * s.body if s.type3 else 0.0)
            count = int((right - nw - 10 - (end_x + 8)) / step)
            if count > 2:
                pages[-1].append(_Op(y, leader * count, s.body, False, end_x + 6))
        pages[-1].append(_Op(y, num, s.body, bold, right - nw))
    return pages


def make_document(path: str | Path, sections: Sequence[Section], style: Style, *,
                  title_block: Sequence[tuple[str, float, bool]] = (), cover: Sequence[str] = (),
                  toc: str | None = None, toc_levels: int = 9, toc_title: str = "Contents") -> Made:
    """Write the document; ``toc``: None, ``"pages"`` (dot leaders), ``"latex"`` (section numbers in a column)
    or ``"number_first"`` (page numbers in a column at the left)."""
    path = Path(path)
    body, where = _lay_out(sections, style, title_block)
    front: list[list[_Op]] = []
    if cover:
        front.append([_Op(220 + 40 * k, line, 26.0 if k == 0 else 14.0, k == 0, style.margin)
                      for k, line in enumerate(cover)])
    if toc:
        listed = [(sec, bp + 1) for sec, (bp, _) in zip(sections, where, strict=True) if sec.level <= toc_levels]
        front.extend(_toc_ops(listed, style, toc == "latex", toc_title, toc == "number_first"))
    pages = [_page_ops(ops, roman(i + 1), style, "") for i, ops in enumerate(front)]
    if style.latex_heads:
        pages += _latex_heads(body, sections, where, style)
    else:
        pages += [_page_ops(ops, str(b + 1), style, style.header if b else "") for b, ops in enumerate(body)]
    doc = pymupdf.open()
    writer = _Type3Writer(doc, [op for ops in pages for op in ops], run=style.dvips) if style.type3 else None
    _draw(doc, pages, style, writer)
    truth = [Truth(title, sec.level, len(front) + bp + 1) for sec, (bp, title) in zip(sections, where, strict=True)]
    made = Made(path, truth, doc.page_count)
    doc.save(path)
    doc.close()
    return made


# ---------------------------------------------------------------------------- the five kinds

_TOPICS = (
    "probability spaces", "random variables", "expectation", "conditional expectation", "martingales",
    "stopping times", "convergence theorems", "characteristic functions", "limit theorems", "markov chains",
    "stationary distributions", "ergodic theory", "brownian motion", "stochastic integrals", "diffusion processes",
    "large deviations", "concentration inequalities", "entropy", "coupling arguments", "mixing times",
    "branching processes", "renewal theory", "queueing models", "point processes", "poisson processes",
    "gaussian processes", "empirical processes", "sampling methods", "estimation", "hypothesis tests",
)


def _topic(rng: random.Random, used: set[str]) -> str:
    while True:
        a, b = rng.choice(_TOPICS), rng.choice(("basic properties", "examples", "applications", "proofs",
                                                 "definitions", "main results", "exercises", "extensions",
                                                 "a first look", "the general case", "special cases"))
        t = f"{a.capitalize()}: {b}" if rng.random() < 0.3 else f"{b.capitalize()} of {a}"
        if t not in used:
            used.add(t)
            return t


def _numbered(shape: Sequence[Sequence[int]], seed: int, paragraphs: tuple[int, int, int] = (2, 3, 2),
              chapter_titles: Sequence[str] = ()) -> list[Section]:
    """``shape[c][s]`` = subsections of section s of chapter c; titles numbered 1, 1.1, 1.1.1."""
    rng = random.Random(seed)
    used: set[str] = set()
    out = []
    for c, sections in enumerate(shape, 1):
        name = chapter_titles[c - 1] if c <= len(chapter_titles) else _topic(rng, used)
        out.append(Section(f"{c} {name}", 1, paragraphs[0]))
        for s, subs in enumerate(sections, 1):
            out.append(Section(f"{c}.{s} {_topic(rng, used)}", 2, paragraphs[1]))
            for u in range(1, subs + 1):
                out.append(Section(f"{c}.{s}.{u} {_topic(rng, used)}", 3, paragraphs[2]))
    return out


LATEX = Style(font="tiro", bold="tibo", sizes=(20.7, 14.4, 12.0), body=10.0, leading=12.0, new_page_level=1,
              type3=True, margin=90.0)


def lecture_notes(path: str | Path, *, toc: bool = False, book: bool = False) -> Made:
    """About 50 sections over ~25 pages of Type 3 text (LaTeX through dvips); ``book``: the ``book`` class
    look ("Chapter N" above the title, running heads with the chapter and section)."""
    shape = [[1, 0, 2], [0, 1, 0, 1], [2, 0, 1], [0, 0, 1, 0], [1, 1, 0], [0, 2, 0, 0], [1, 0], [0, 1, 1]]
    sections = _numbered(shape, 11, paragraphs=(3, 5, 3) if book else (2, 3, 2))
    style = LATEX_BOOK if book else LATEX
    return make_document(path, sections, style, toc="latex" if toc else None,
                         title_block=() if toc else (("Lecture Notes on Stochastic Processes", 17.3, False),
                                                     ("Autumn Term", 12.0, False)),
                         cover=("Lecture Notes on Stochastic Processes", "Autumn Term") if toc else ())


TEX_ARTICLE = Style(font="tiro", bold="tibo", sizes=(14.4, 12.0, 10.0), body=10.0, leading=12.0, new_page_level=0,
                    type3=True, margin=90.0)
_TEX_TOPICS = ("Definitions and first properties", "Efficient estimators", "Affine flows", "Fluctuation bounds",
               "Differential equations \u2013 the general case", "Finite-state modules", "Syntax of typed terms",
               "Lower bounds \u2264 upper bounds", "Four examples", "Laboratory notes", "Coefficients of expansions",
               "Sufficient statistics", "Conflict-free schedules", "Off-line algorithms", "Scaffolding")


def tex_article(path: str | Path) -> Made:
    """Lecture notes as the LaTeX ``article`` class sets them through dvips and Ghostscript (issue 27): sections
    at 14.4 pt, subsections at 12 pt and subsubsections bold at body size, none starting a page; titles with
    ligatures and dashes (OT1 codes), every word cut at its kerns."""
    shape = [[2, 0], [1, 0, 1], [0, 1], [2, 1], [0]]
    rng = random.Random(29)
    out: list[Section] = []
    topics = iter(rng.sample(_TEX_TOPICS, len(_TEX_TOPICS)))
    for c, sections in enumerate(shape, 1):
        out.append(Section(f"{c} {next(topics)}", 1, 3))
        for k, subs in enumerate(sections, 1):
            out.append(Section(f"{c}.{k} {next(topics, 'Proofs')}", 2, 4))
            for u in range(1, subs + 1):
                out.append(Section(f"{c}.{k}.{u} {_topic(rng, set())}", 3, 3))
    return make_document(path, out, TEX_ARTICLE, title_block=(
        ("Four Lectures on Modules and Syntax", 17.3, False), ("Laboratory for Foundations", 12.0, False)))


LATEX_BOOK = Style(font="tiro", bold="tibo", sizes=(24.8, 14.4, 12.0), body=10.0, leading=12.0, new_page_level=1,
                   type3=True, margin=90.0, latex_heads=True, chapter_label=True)


# The issue-41 file: algorithm lecture notes (LaTeX article class, 10 pt) through dvipsk 5.58f and Ghostscript 9.06,
# 53 sections and subsections on 53 pages, none starting a page, a running head in small print; sizes as measured
# there (mean glyph advances 5.3 pt in the body, 6.9 and 7.7 in the headings, 4.5 in small print).
DVIPS_NOTES = Style(font="tiro", bold="tibo", sizes=(13.5, 12.0, 10.0), body=10.0, leading=12.0, new_page_level=0,
                    type3=True, dvips=GS906, margin=90.0, header="Algorithms and Data Structures \u2013 Lecture Notes")
_ALGORITHMS = (
    ("Asymptotic analysis", ("Definitions of growth rates", "Recurrences", "The master theorem")),
    ("Priority queues", ("Binary heaps", "Binomial heaps", "Fibonacci heaps", "Amortised analysis")),
    ("Sorting", ("Merge sort", "Quicksort", "Comparison lower bounds \u2264 n log n", "Selection in linear time")),
    ("Search trees", ("Binary search trees", "AVL trees", "Red\u2013black trees", "Splay trees")),
    ("Hashing", ("Chaining", "Open addressing", "Universal hashing")),
    ("Graph traversal", ("Breadth-first search", "Depth-first search", "Topological order")),
    ("Shortest paths", ("Dijkstra's algorithm", "Bellman\u2013Ford", "All pairs")),
    ("Spanning trees", ("Kruskal's algorithm", "Prim's algorithm", "Union\u2013find")),
    ("Network flows", ("Flow networks", "Augmenting paths", "Efficient flow algorithms", "Bipartite matchings")),
    ("Dynamic programming", ("Optimal substructure", "Sequence alignment", "Knapsack")),
    ("Greedy algorithms", ("Interval scheduling", "Huffman codes", "Matroids")),
    ("Intractability", ("Reductions", "NP-completeness", "Approximation ratios", "Further reading")),
)


def dvips_notes(path: str | Path, *, numbered: bool = True) -> Made:
    """The lecture notes of issue 41 as dvipsk 5.58f and Ghostscript 9.06 write them (:data:`tests.pdfgen.GS906`:
    every word its own block at size 0.12): 12 sections at 13.5 pt and 41 subsections at 12 pt, bold, over 50+
    pages; numbered "1 Asymptotic analysis" / "1.2 Recurrences", or (``numbered=False``, as ``\\section*``)
    told from the body only by size and the space above."""
    rng = random.Random(41)
    sections: list[Section] = []
    for c, (title, subs) in enumerate(_ALGORITHMS, 1):
        sections.append(Section(f"{c} {title}" if numbered else title, 1, rng.randint(2, 4)))
        for k, sub in enumerate(subs, 1):
            sections.append(Section(f"{c}.{k} {sub}" if numbered else sub, 2, rng.randint(6, 9)))
    return make_document(path, sections, DVIPS_NOTES, title_block=(
        ("Algorithms and Data Structures", 17.3, False), ("Lecture Notes, Autumn Term", 12.0, False)))


PAPER = Style(columns=2, font="tiro", bold="tibo", sizes=(12.0, 10.0, 10.0), body=10.0, leading=11.5,
              new_page_level=0, margin=54.0, gap=18.0)


def research_paper(path: str | Path) -> Made:
    """Two columns: title block and abstract across the page, numbered sections in the columns."""
    shape = [[0], [2, 0, 1], [3, 0], [2, 2], [0, 1], []]
    titles = ("Introduction", "Related work", "Method", "Experiments", "Discussion", "Conclusion")
    sections = _numbered(shape, 23, paragraphs=(2, 3, 2), chapter_titles=titles)
    sections.append(Section("References", 1, 4))
    abstract = " ".join(paragraph(f"abstract{i}", 3) for i in range(2))
    return make_document(path, sections, PAPER, title_block=(
        ("Sparse Routing for Long-Document Retrieval", 16.0, True),
        ("A. Author, B. Author and C. Author", 11.0, False),
        ("Abstract", 10.0, True),
        (abstract, 9.0, False),
    ))


CENTRAL_BANK = Style(font="helv", bold="hebo", sizes=(18.0, 13.0, 10.5), body=10.0, leading=13.0, new_page_level=1,
                     caps_levels=1, header="Bank of Northland | Annual Report 2023")


def annual_report(path: str | Path, toc: str | None = "pages") -> Made:
    """About 200 pages: cover, a three-level contents list over several pages, chapters in capitals."""
    rng = random.Random(5)
    chapters = ("The economy and monetary policy in 2023", "Financial stability", "Payment systems and "
                "market infrastructure oversight", "Banknotes and coin", "Reserve management and foreign "
                "exchange operations", "Statistics and economic research", "International cooperation",
                "Organisation, staff and governance of the Bank", "Financial statements and notes to the "
                "annual accounts for the year ended 31 December 2023")
    words = ("developments", "inflation", "interest rates", "credit growth", "household lending", "liquidity",
             "supervision", "risk assessment", "settlement", "cyber resilience", "cash demand", "counterfeits",
             "portfolio", "investment policy", "data quality", "surveys", "research programme", "staff",
             "remuneration", "internal audit", "balance sheet", "income statement", "provisions", "pensions")
    used: set[str] = set()
    sections: list[Section] = []
    for c, title in enumerate(chapters, 1):
        sections.append(Section(f"{c} {title}", 1, 2))
        for s in range(1, rng.randint(3, 6) + 1):
            while True:
                t = f"{rng.choice(words).capitalize()} and {rng.choice(words)}"
                if rng.random() < 0.25:
                    t += " in the context of the medium-term outlook for the domestic economy"
                if t not in used:
                    used.add(t)
                    break
            sections.append(Section(f"{c}.{s} {t}", 2, rng.randint(12, 28)))
            for u in range(rng.choice((0, 0, 2, 3))):
                t2 = f"{rng.choice(words).capitalize()} ({rng.choice(('review', 'outlook', 'assessment'))} {u + 1})"
                sections.append(Section(t2, 3, rng.randint(5, 12)))
    return make_document(path, sections, CENTRAL_BANK, toc=toc, toc_levels=3,
                         cover=("Bank of Northland", "Annual Report 2023"))


RELEASE = Style(font="tiro", bold="tibo", sizes=(10.0, 10.0, 10.0), body=10.0, leading=12.5, new_page_level=0,
                caps_levels=1)


def regulatory_release(path: str | Path) -> Made:
    """Roman-numbered parts in capitals and lettered subsections, bold at body size."""
    parts = ("Introduction", "Background", "Discussion of the amendments", "Economic analysis",
             "Paperwork Reduction Act", "Regulatory flexibility act certification", "Statutory authority")
    rng = random.Random(3)
    subjects = ("scope", "definitions", "reporting requirements", "compliance dates", "comments received",
                "costs and benefits", "alternatives considered", "effects on competition", "baseline",
                "transition period", "exemptions")
    sections: list[Section] = []
    for i, p in enumerate(parts, 1):
        sections.append(Section(f"{roman(i).upper()}. {p}", 1, 2))
        subs = rng.sample(subjects, rng.choice((0, 2, 3, 4)))
        for k, t in enumerate(subs):
            sections.append(Section(f"{chr(65 + k)}. {t.capitalize()}", 2, rng.randint(3, 7)))
    return make_document(path, sections, RELEASE, title_block=(
        ("SECURITIES AND EXCHANGE COMMISSION", 12.0, True),
        ("Release No. 34-99999; File No. S7-01-23", 10.0, False),
        ("Amendments to Reporting Requirements for Registered Funds", 12.0, True),
        ("AGENCY: Securities and Exchange Commission. ACTION: Final rule.", 10.0, False),
    ))


EARNINGS = Style(font="helv", bold="hebo", sizes=(11.0, 10.0, 10.0), body=9.5, leading=12.0, new_page_level=0)


def earnings_release(path: str | Path) -> Made:
    """A handful of bold headings over six pages; statement titles in capitals."""
    sections = [Section(t, 1, n) for t, n in (
        ("Fourth Quarter 2023 Highlights", 4), ("Full Year 2023 Results", 5), ("Segment Results", 6),
        ("Balance Sheet and Cash Flow", 4), ("2024 Outlook", 3), ("Conference Call and Webcast", 2),
        ("Forward-Looking Statements", 6), ("CONSOLIDATED STATEMENTS OF INCOME", 4),
        ("CONSOLIDATED BALANCE SHEETS", 4), ("CONSOLIDATED STATEMENTS OF CASH FLOWS", 4),
    )]
    return make_document(path, sections, EARNINGS, title_block=(
        ("Northwind Industries Reports Fourth Quarter and Full Year 2023 Results", 14.0, True),
        ("HOUSTON, February 8, 2024 -- Northwind Industries, Inc. (NYSE: NWI) today reported results.", 9.5, False),
    ))


_INSTITUTION_PARTS = (
    ("The Year in Review", ("Governor's Foreword", "Highlights of the Year", "Strategic Priorities")),
    ("Monetary Policy and Markets", ("Monetary Policy Decisions", "Economic Developments", "Market Operations",
                                     "Foreign Reserves")),
    ("The Financial System", ("Financial Stability Assessment", "Banking Supervision", "Payments and Settlement")),
    ("Governance and Accounts", ("Board and Committees", "Our People", "Risk Management",
                                 "Financial Statements")),
)
_INSTITUTION_TOPICS = ("in Retail Banking", "at Home and Abroad", "of Households", "of Firms", "in Public Finance",
                       "in the Money Market", "across Regions", "in Housing", "since the Pandemic", "for Small Banks",
                       "in Energy Markets", "of Non-banks")
_INSTITUTION_SUBS = ("Overview", "Key Developments", "Inflation and Wages", "Credit Conditions", "Liquidity Support",
                     "Cyber Resilience", "Climate-related Risks", "Outlook for the Year Ahead", "Data and Research",
                     "Cooperation with Other Authorities", "Cash and Banknotes", "Remuneration", "Audit Findings")


def institutional_report(path: str | Path) -> Made:
    """A central bank's annual report (issue 27 item 2): ~150 pages; a contents list over several pages naming part
    dividers and unnumbered chapters; each part opens with a divider page ("Part 2" over its title, display size);
    chapters open a page with an unnumbered display heading, their sections are bold unnumbered headings; some
    chapters have a boxed sidebar beside the body ("Box 3: …", not a section); every page but a divider or a
    chapter opening carries the chapter's name as a running head, and a footer with the page number."""
    rng = random.Random(41)
    s = Style(font="helv", bold="hebo", body=9.5, leading=12.5, margin=64.0)
    pages: list[list[_Op]] = []
    truth: list[tuple[str, int, int]] = []  # title, level, 0-based body page
    heads: list[str] = []  # running head per body page ("" = none)
    y = 0.0
    bottom = PAGE_H - s.margin - 20
    box_no = 0

    def new_page(head: str) -> None:
        nonlocal y
        pages.append([])
        heads.append(head)
        y = s.margin + 20

    def body_lines(text: str, head: str, width: float) -> None:
        nonlocal y
        for ln in _wrap(text, width, s.body, s.font):
            if y + s.leading > bottom:
                new_page(head)
                width = PAGE_W - 2 * s.margin
            y += s.leading
            pages[-1].append(_Op(y, ln, s.body, False, s.margin))

    for p, (part, chapters) in enumerate(_INSTITUTION_PARTS, 1):
        new_page("")
        pages[-1] += [_Op(300, f"Part {p}", 30.0, True, s.margin), _Op(345, part, 24.0, True, s.margin)]
        truth.append((part, 1, len(pages) - 1))
        for c, chapter in enumerate(chapters):
            new_page("")
            heads[-1] = ""
            y += 30
            pages[-1].append(_Op(y, chapter, 22.0, True, s.margin))
            truth.append((chapter, 2, len(pages) - 1))
            heads_next = chapter
            y += 20
            width = PAGE_W - 2 * s.margin
            if (p + c) % 3 == 0:  # a boxed sidebar beside the body on the chapter's first page
                box_no += 1
                x0 = PAGE_W - s.margin - 150
                pages[-1].append(_Op(y + 12, f"Box {box_no}: {rng.choice(_INSTITUTION_SUBS)}", 9.5, True, x0 + 6))
                for k, ln in enumerate(_wrap(paragraph(f"box{box_no}", 5), 138, 8.0, s.font)):
                    pages[-1].append(_Op(y + 26 + 10.5 * k, ln, 8.0, False, x0 + 6))
                width = PAGE_W - 2 * s.margin - 170
            body_lines(" ".join(paragraph(f"i{p}{c}{k}") for k in range(3)), heads_next, width)
            for sub in [f"{a} {b}" for a, b in zip(rng.sample(_INSTITUTION_SUBS, 4), rng.sample(_INSTITUTION_TOPICS, 4),
                                                   strict=True)][: rng.randint(2, 4)]:
                if y + 60 > bottom:
                    new_page(heads_next)
                y += 22
                pages[-1].append(_Op(y, sub, 12.0, True, s.margin))
                truth.append((sub, 3, len(pages) - 1))
                y += 4
                for k in range(rng.randint(12, 24)):
                    body_lines(paragraph(f"b{p}{c}{sub}{k}"), heads_next, PAGE_W - 2 * s.margin)
                    y += 6
    body = []
    for b, ops in enumerate(pages):
        out = list(ops) + [_Op(PAGE_H - 36, f"Bank of Northland  Annual Report 2023   {b + 1}", 7.5, False, s.margin)]
        if heads[b]:
            out.append(_Op(40, heads[b], 8.0, False, s.margin))
        body.append(out)
    # contents: parts and chapters with printed page numbers, over several pages
    entries = [(Section(title, level), page + 1) for title, level, page in truth if level <= 2]
    entries += [(Section(title, 3), page + 1) for title, level, page in truth if level == 3][:0]
    front = [[_Op(260, "Bank of Northland", 28.0, True, s.margin), _Op(300, "Annual Report 2023", 18.0, False,
                                                                        s.margin)]]
    toc = _toc_ops(entries, s, False, "Contents")
    while len(toc) < 2:  # designed contents run over a spread at least: the second page lists the last parts
        cut = toc[0][len(toc[0]) // 2].y  # at a line: its title, leader and number move together
        toc = [[op for op in toc[0] if op.y < cut], [_Op(op.y - cut + s.margin + 40, op.text, op.size, op.bold, op.x)
                                                    for op in toc[0] if op.y >= cut]]
    front += toc
    all_pages = [_page_ops(ops, roman(i + 1), s, "") for i, ops in enumerate(front)] + body
    doc = pymupdf.open()
    _draw(doc, all_pages, s, None)
    made = Made(Path(path), [Truth(t, lv, len(front) + bp + 1) for t, lv, bp in truth], doc.page_count)
    doc.save(path)
    doc.close()
    return made


_STATEMENT_ROWS = {
    "Condensed Consolidated Statements of Operations": (
        ("Revenue:", None), ("Products", 1), ("Services", 1), ("Total revenue", 2), ("Operating expenses:", None),
        ("Cost of revenue", 1), ("Research and development", 1), ("Selling, general and administrative", 1),
        ("Total operating expenses", 2), ("Operating income", 2), ("Interest expense, net", 1),
        ("Income before income taxes", 1), ("Provision for income taxes", 1), ("Net income", 2),
        ("Earnings per share:", None), ("Basic", 1), ("Diluted", 1)),
    "Condensed Consolidated Balance Sheets": (
        ("Assets", None), ("Cash and cash equivalents", 1), ("Accounts receivable, net", 1), ("Inventories", 1),
        ("Total current assets", 2), ("Property and equipment, net", 1), ("Goodwill", 1), ("Total assets", 2),
        ("Liabilities and stockholders' equity", None), ("Accounts payable", 1), ("Accrued liabilities", 1),
        ("Long-term debt", 1), ("Total liabilities", 2), ("Total stockholders' equity", 2)),
    "Segment Information": (
        ("Industrial Solutions", None), ("Revenue", 1), ("Operating income", 1), ("Energy Services", None),
        ("Revenue", 1), ("Operating income", 1), ("Corporate and other", 1), ("Total operating income", 2)),
    "Reconciliation of GAAP to Non-GAAP Financial Measures": (
        ("GAAP operating income", 1), ("Stock-based compensation", 1), ("Amortization of intangibles", 1),
        ("Restructuring charges", 1), ("Non-GAAP operating income", 2), ("GAAP net income", 1),
        ("Tax effect of adjustments", 1), ("Non-GAAP net income", 2), ("Non-GAAP diluted EPS", 2)),
    "Reconciliation of Net Income to Adjusted EBITDA": (
        ("Net income", 1), ("Interest expense, net", 1), ("Provision for income taxes", 1),
        ("Depreciation and amortization", 1), ("Adjusted EBITDA", 2), ("Adjusted EBITDA margin", 2)),
}


def earnings_release_tables(path: str | Path) -> Made:
    """An earnings release as issued (issue 27 item 3): bold headings over prose, then financial tables, each under
    its own bold title (some in display size) with an unaudited note, bold column heads, bold group labels
    ("Operating expenses:") and bold total rows. The titles are sections; no table row is."""
    rng = random.Random(27)
    s = EARNINGS
    flow = _Flow(s, s.margin)
    truth: list[tuple[str, int]] = []
    for text, size, bold in (("Northwind Industries Reports Fourth Quarter 2023 Results", 14.0, True),
                             ("HOUSTON, February 8, 2024 -- Northwind Industries, Inc. (NYSE: NWI) today reported "
                              "results for the fourth quarter of 2023.", 9.5, False)):
        for ln in _wrap(text, flow.col_w, size, s.bold if bold else s.font):
            flow.line(ln, size, bold, size * 1.3)
    flow.y += 10
    for k, (title, n) in enumerate((("Fourth Quarter Highlights", 3), ("Full Year 2023 Results", 4),
                                    ("2024 Financial Outlook", 2), ("Use of Non-GAAP Financial Measures", 4),
                                    ("Conference Call Information", 1), ("About Northwind Industries", 1))):
        flow.room(11 * 1.3 + 4 * s.leading)
        flow.y += 8
        flow.line(title, 11.0, True, 11 * 1.3)
        truth.append((title, len(flow.pages)))
        for p in range(n):
            for ln in _wrap(paragraph(f"er{k}p{p}"), flow.col_w, s.body, s.font):
                flow.line(ln, s.body, False, s.leading)
            flow.y += s.leading * 0.5
    cols = [PAGE_W - s.margin - 60 * (3 - c) for c in range(4)]
    for t, (title, rows) in enumerate(_STATEMENT_ROWS.items()):
        size = 12.0 if t % 2 else 10.0  # a display-size title, or bold at body size
        flow.room(size * 1.3 + 3 * s.leading + len(rows) * 11.0)
        flow.y += 14
        flow.line(title, size, True, size * 1.3)
        truth.append((title, len(flow.pages)))
        flow.line("(in millions, except per share data; unaudited)", 8.0, False, 11.0)
        flow.y += 11.0
        for c, head in enumerate(("Q4 2023", "Q4 2022", "FY 2023", "FY 2022")):
            flow.pages[-1].append(_Op(flow.y, head, 8.0, True, cols[c] - _width(head, 8.0, s.bold)))
        for label, kind in rows:
            bold = kind != 1
            flow.line(label, 8.5, bold, 11.0)
            if kind is None:
                continue
            for c in range(4):
                num = f"{rng.randint(10, 9999):,}" if "EPS" not in label and "Basic" not in label else \
                    f"{rng.uniform(0.5, 4):.2f}"
                flow.pages[-1].append(_Op(flow.y, num, 8.5, bold, cols[c] - _width(num, 8.5, s.bold if bold else s.font)))
    pages = [_page_ops(ops, str(b + 1), s, "") for b, ops in enumerate(flow.pages)]
    doc = pymupdf.open()
    _draw(doc, pages, s, None)
    made = Made(Path(path), [Truth(title, 1, page) for title, page in truth], doc.page_count)
    doc.save(path)
    doc.close()
    return made


KINDS = {
    "lecture_notes": lecture_notes,
    "lecture_notes_toc": lambda p: lecture_notes(p, toc=True),
    "lecture_notes_book": lambda p: lecture_notes(p, book=True),
    "lecture_notes_book_toc": lambda p: lecture_notes(p, toc=True, book=True),
    "tex_article": tex_article,
    "dvips_notes": dvips_notes,
    "dvips_notes_unnumbered": lambda p: dvips_notes(p, numbered=False),
    "research_paper": research_paper,
    "annual_report": annual_report,
    "annual_report_number_first": lambda p: annual_report(p, toc="number_first"),
    "annual_report_no_toc": lambda p: annual_report(p, toc=None),
    "regulatory_release": regulatory_release,
    "earnings_release": earnings_release,
    "earnings_release_tables": earnings_release_tables,
    "institutional_report": institutional_report,
}


# ---------------------------------------------------------------------------- scoring


_LABEL = re.compile(r"^(?:(?:chapter|lecture|part)\s+\w+|[IVX]+\.|[A-Z]\.|\d+(?:\.\d+)*\.?)\s+", re.I)


def _split(title: str) -> tuple[str, str]:
    """(numbering label, rest), lower case, punctuation dropped: "1.2 Scope" → ("1 2", "scope")."""
    m = _LABEL.match(title.strip())
    label, rest = (m.group(0), title.strip()[m.end():]) if m and m.end() < len(title.strip()) else ("", title)

    def norm(t: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", t.lower()).split())

    return norm(label), norm(rest)


def similarity(node_title: str, truth_title: str) -> float:
    """0..1: 0 when both carry a different numbering label, else how alike the titles without it are."""
    (na, a), (nb, b) = _split(node_title), _split(truth_title)
    if na and nb and na.split()[-1:] != nb.split()[-1:] and na != nb:
        return 0.0
    return 1.0 if a == b else difflib.SequenceMatcher(None, a, b).ratio()


def matched(tree: DocumentTree, truth: Truth, tolerance: int = 1) -> bool:
    """A node with (nearly) the true title starting within ``tolerance`` pages of the true page."""
    return find(tree, truth, tolerance) is not None


def find(tree: DocumentTree, truth: Truth, tolerance: int = 1) -> TreeNode | None:
    """The node most like ``truth`` (title similarity ≥ 0.85) starting within ``tolerance`` pages."""
    scored = [(similarity(n.title, truth.title), n) for n in tree.nodes if abs(n.start - truth.page) <= tolerance]
    best = max(scored, key=lambda x: x[0], default=(0.0, None))
    return best[1] if best[0] >= 0.85 else None


def section_recall(tree: DocumentTree, truth: Sequence[Truth], tolerance: int = 1) -> float:
    """Share of the true sections found with the right start page (± ``tolerance``)."""
    return sum(matched(tree, t, tolerance) for t in truth) / len(truth) if truth else 0.0
