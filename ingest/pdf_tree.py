"""PageIndex tree building for PDFs (spec 000 §3.1–3.7), offline first, LLM optional.

The flat section list ("structure code, title, start page") comes from, in order of
preference: the embedded outline, a printed table of contents (with page numbers, or
without them), or the body's own headings ("no TOC"). Every list is verified (does the
title appear on its page?), fixed (search between correct neighbours) or abandoned for
the next mode. Then, identically for all modes: a ``Preface`` is inserted when the first
section starts after page 1, ``appear_start`` decides whether the previous section ends on
the page before, the list becomes a tree by structure codes, and nodes over the page or
token limit are subdivided with the no-TOC method on their own page range (page windows
when there is no heading inside). Node ids are assigned depth first.

Every LLM step has an offline implementation (layout heuristics and fuzzy title
matching), the default. With a real model (``chat.offline`` False) the LLM detects the
printed TOC (one batched call for the first pages) and transforms it (one call), locates
titles the offline search missed, generates the structure group by group when there is no
TOC, and generates the sub-structure of large nodes. Verification and ``appear_start``
stay offline. Calls run under a semaphore, within a budget of about 14 calls per 100 pages,
and stop after three provider errors in a row; a failed or malformed reply falls back to
the offline step for that piece.
"""

from __future__ import annotations

import asyncio
import difflib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import msgspec
import structlog

from ingest.pdf_read import HeadingCandidate, LineInfo, ParsedPdf, clean_text, numbering_of, read_pdf
from ingest.prompts import (
    GENERATE,
    LOCATE,
    TOC_DETECT,
    TOC_TRANSFORM,
    GenEntry,
    generate_prompt,
    locate_prompt,
    toc_detect_prompt,
    toc_transform_prompt,
)
from kb.errors import LLMError
from kb.providers import ChatModel
from kb.providers.chat import CountingChat
from kb.providers.steps import InvalidReply, LLMStep, ask
from kb.settings import IngestSettings
from kb.text import count_tokens, normalize_title, truncate_tokens
from kb.types import DocumentTree, TreeNode

__all__ = ["DocumentTree", "ParsedPdf", "build_pdf_tree", "read_pdf"]

log = structlog.get_logger("ingest.pdf_tree")

LLM_CONCURRENCY = 4
LLM_CALLS_PER_100_PAGES = 14
MAX_DEPTH = 8
PREFACE = "Preface"


# ============================================================================ flat entries


@dataclass(frozen=True)
class FlatEntry:
    """One entry of the flat section list. ``line`` is the title's line on ``page`` if known."""

    structure: str
    title: str
    page: int | None
    line: int | None = None
    appear_start: bool = True
    verified: bool = False

    @property
    def level(self) -> int:
        return self.structure.count(".") + 1


@dataclass(frozen=True)
class TocItem:
    """A printed-TOC entry before page mapping: printed page token ("12", "iv", "F-3") or None."""

    title: str
    printed: str | None
    level: int
    style: str = ""


@dataclass(frozen=True)
class DetectedToc:
    pages: tuple[int, ...]
    items: tuple[TocItem, ...]
    with_page_numbers: bool


@dataclass
class _Node:
    title: str
    start: int
    end: int
    line: int | None = None
    stop: tuple[int, int] | None = None  # (page, line) where the next section starts, if on ``end``
    children: list[_Node] = field(default_factory=list)


# ============================================================================ text matching


def compact(text: str) -> str:
    """Title key for fuzzy matching: accents stripped, lowercase alphanumerics only, no spaces."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(ch for ch in t if not unicodedata.combining(ch))
    return normalize_title(t).replace(" ", "")


@dataclass(frozen=True)
class Match:
    line: int
    tail: int  # characters of the last matched line after the title
    fuzzy: bool


class PageLines:
    """Compact per-line keys of every page, built lazily, for title look-ups."""

    def __init__(self, parsed: ParsedPdf) -> None:
        self.parsed = parsed
        self.n = len(parsed.pages)
        self._keys: dict[int, list[str]] = {}
        self._raw: dict[int, list[str]] = {}

    def raw(self, page: int) -> list[str]:
        if page not in self._raw:
            self._raw[page] = self.parsed.pages[page - 1].text.split("\n")
        return self._raw[page]

    def keys(self, page: int) -> list[str]:
        if page not in self._keys:
            self._keys[page] = [compact(x) for x in self.raw(page)]
        return self._keys[page]

    def margin(self, page: int) -> frozenset[int]:
        m = self.parsed.margins
        return frozenset(m[page - 1]) if page - 1 < len(m) else frozenset()

    def find(self, title: str, page: int, *, strict: bool = False, relaxed: bool = False) -> Match | None:
        """Where ``title`` starts a line of ``page`` (content lines first, then running headers)."""
        if not 1 <= page <= self.n:
            return None
        t = compact(title)
        if len(t) < 2:
            return None
        keys = self.keys(page)
        margin = self.margin(page)
        for use_margin in (False, True):
            for i, k in enumerate(keys):
                if (i in margin) != use_margin or not k:
                    continue
                m = self._match_at(keys, i, t, strict, relaxed)
                if m is not None:
                    return m
        return None

    @staticmethod
    def _match_at(keys: list[str], i: int, t: str, strict: bool, relaxed: bool) -> Match | None:
        if keys[i][:1] != t[:1]:
            return None
        window = keys[i]
        j = i
        while len(window) < len(t) and j + 1 < len(keys) and j - i < 3:
            j += 1
            window += keys[j]
        limit = max(8, len(t) // 3)
        if window.startswith(t):
            tail = len(window) - len(t)  # rest of the last line after the title
            if not strict or tail <= limit:
                return Match(i, tail, False)
            return None
        if len(t) >= 8:
            head = window[: len(t)]
            sm = difflib.SequenceMatcher(None, t, head, autojunk=False)
            if sm.real_quick_ratio() >= 0.85 and sm.quick_ratio() >= 0.85 and sm.ratio() >= 0.85:
                tail = max(0, len(window) - len(t))
                if not strict or tail <= limit:
                    return Match(i, tail, True)
        if relaxed and len(t) >= 30:
            prefix = t[: max(24, len(t) // 3)]
            if window.startswith(prefix):
                return Match(i, 0, True)
        return None

    def scan(self, title: str, lo: int, hi: int, *, strict: bool = True) -> tuple[int, Match] | None:
        """First page in ``lo..hi`` whose content lines start with ``title``."""
        for p in range(max(1, lo), min(self.n, hi) + 1):
            m = self.find(title, p, strict=strict)
            if m is not None:
                return p, m
        return None

    def at_top(self, page: int, line: int | None) -> bool:
        """Does the content before ``line`` on ``page`` amount to no more than a page header?"""
        if line is None:
            return False
        raw = self.raw(page)
        margin = self.margin(page)
        before = [raw[i] for i in range(min(line, len(raw))) if i not in margin]
        return sum(len(x) for x in before) <= 200 and all(len(x) <= 100 for x in before)


# ============================================================================ structure codes


_RANKS = {"part": 0, "chapter": 1, "appendix": 1, "roman": 2, "item": 2, "section": 3, "note": 5, "alpha": 6}


def style_rank(numbering: str) -> int | None:
    """Intrinsic nesting rank of a numbering kind (smaller = closer to the top), None if unnumbered."""
    if not numbering:
        return None
    kind, _, value = numbering.partition(":")
    if kind == "dec":
        return 3 + value.count(".")
    return _RANKS.get(kind)


def _rank_or(numbering: str, default: int) -> int:
    rank = style_rank(numbering)
    return default if rank is None else rank


def codes_from_levels(levels: Sequence[int]) -> list[str]:
    """Structure codes (``1``, ``1.1``, ``2``…) from nesting levels (1 = top), clamping jumps."""
    counters: list[int] = []
    out: list[str] = []
    for lvl in levels:
        lvl = max(1, min(lvl, len(counters) + 1))
        del counters[lvl:]
        if len(counters) < lvl:
            counters.append(0)
        counters[lvl - 1] += 1
        out.append(".".join(str(c) for c in counters))
    return out


@dataclass(frozen=True)
class _Styled:
    """An item to nest: intrinsic rank (numbered) or None, indentation x, visual weight."""

    rank: int | None
    x: float
    weight: tuple[float, int, int]  # (font size, bold, caps)
    key: str


def nest_levels(items: Sequence[_Styled], *, use_indent: bool) -> list[int]:
    """Levels by a style stack: numbered ranks, then indentation, then visual weight, then first use."""
    stack: list[_Styled] = []
    seen_level: dict[str, int] = {}
    levels: list[int] = []

    def shallower(top: _Styled, cur: _Styled) -> bool:
        if top.key == cur.key:
            return False
        if top.rank is not None and cur.rank is not None:
            return top.rank < cur.rank
        if use_indent and abs(top.x - cur.x) > 4.0:
            return top.x < cur.x
        if top.weight != cur.weight:
            if top.weight[0] - cur.weight[0] > 0.4:
                return True
            if cur.weight[0] - top.weight[0] > 0.4:
                return False
            if top.weight[1:] != cur.weight[1:]:
                return top.weight[1:] > cur.weight[1:]
        if top.rank is not None and cur.rank is None:
            return not use_indent
        if top.rank is None and cur.rank is not None:
            return False
        # same look, both unnumbered: a style already placed keeps its level
        return cur.key not in seen_level or seen_level[cur.key] > seen_level.get(top.key, 0)

    for it in items:
        while stack and not shallower(stack[-1], it):
            stack.pop()
        stack.append(it)
        levels.append(len(stack))
        seen_level.setdefault(it.key, len(stack))
    return levels


# ============================================================================ printed TOC (offline)

_CONTENTS = re.compile(r"^(?:table of contents|contents|index|toc|index to .{0,40}|目录|目次)$")
_TOC_LINE = re.compile(
    r"^(?P<title>.*?[^\s.…·_\-])"
    r"(?:\s*(?:[.…·•_]\s?){2,}\s*|\s*-{3,}\s*|\.?\s+)"
    r"(?P<num>\d{1,4}|[ivxlc]{1,7}|[A-Z]{1,2}-\d{1,3})$"
)
_LIST_MARK = re.compile(r"^(?:\(?[a-z]\)|\(?[ivx]{1,4}\)|[•●▪■\-–\uf0b7])\s+")
_KEYWORD_ONLY = re.compile(
    r"^(?:part|item|note|notes|chapter|section|article|appendix|schedule|exhibit|page)$", re.I
)
_CONNECTOR_END = re.compile(r"(?:,|-|–|&|\b(?:of|and|the|for|to|in|on|with|by|or|from|its|our|an?))$", re.I)


@dataclass(frozen=True)
class _TocLine:
    title: str
    num: str | None
    x: float
    size: float
    bold: bool


def _parse_toc_line(text: str, info: LineInfo | None, max_page: int) -> _TocLine | None:
    t = clean_text(text)
    t = re.sub(r"\s+pages?$", "", t, flags=re.I)
    if not t or normalize_title(t) in {
        "page",
        "pages",
        "beginning",
        "beginning page",
        "page no",
        "page number",
    }:
        return None
    if re.search(r"\((?:continued|cont'd|cont\.)\)", t, re.I):
        return None  # repeated group header on a continuation page
    x = info.x if info else 0.0
    size = info.size if info else 0.0
    bold = info.bold if info else False
    m = _TOC_LINE.match(t)
    if m:
        title, num = m.group("title").strip(), m.group("num")
        title = re.sub(r"(?:\s*[.…·_]){2,}$", "", title).strip()
        plausible = not num.isdigit() or int(num) <= max_page + 50
        if not _KEYWORD_ONLY.match(title) and plausible:
            # a title without letters ("30, 2022 3") is the tail of a wrapped entry
            return _TocLine(title, num, x, size, bold)
    if re.fullmatch(r"\d{1,4}", t):
        return _TocLine("", t, x, size, bold)
    return _TocLine(t, None, x, size, bold)


def _is_contents_heading(text: str) -> bool:
    return bool(_CONTENTS.match(normalize_title(text)))


def _page_toc_lines(parsed: ParsedPdf, page: int) -> list[tuple[str, LineInfo | None]]:
    raw = parsed.pages[page - 1].text.split("\n")
    layout = parsed.layout[page - 1] if page - 1 < len(parsed.layout) else None
    margin = set(parsed.margins[page - 1]) if page - 1 < len(parsed.margins) else set()
    out = []
    for i, text in enumerate(raw):
        if i in margin or not text.strip():
            continue
        out.append((text, layout[i] if layout is not None and i < len(layout) else None))
    return out


def _toc_page_score(
    parsed: ParsedPdf, page: int, continuing: bool, later_heads: set[str]
) -> tuple[bool, bool]:
    """(is a TOC page, has page numbers) for one page, by layout heuristics."""
    lines = _page_toc_lines(parsed, page)
    if not lines:
        return False, False
    heading = any(_is_contents_heading(t) for t, _ in lines[:8])
    parsed_lines = [_parse_toc_line(t, info, len(parsed.pages)) for t, info in lines]
    entries = [p for p in parsed_lines if p is not None and p.title]
    numbered = [p for p in entries if p.num]
    arabic = [int(p.num) for p in numbered if p.num and p.num.isdigit()]
    pairs = list(zip(arabic, arabic[1:], strict=False))
    monotonic = not pairs or sum(1 for a, b in pairs if b >= a) >= 0.75 * len(pairs)
    # prose lines (long, sentence-like) weigh against a TOC page
    prose = sum(1 for t, _ in lines if len(t) > 100)
    ratio = len(numbered) / max(1, len(lines))
    if monotonic and numbered:
        if len(numbered) >= 4 and ratio >= 0.3 and prose <= len(numbered):
            return True, True
        if (heading or continuing) and len(numbered) >= 2 and ratio >= 0.2:
            return True, True
    if heading and later_heads:
        short = [p.title for p in entries if len(p.title) <= 90 and not p.num]
        hits = sum(1 for s in short if compact(s) in later_heads)
        if len(short) >= 4 and hits >= max(3, 0.5 * len(short)):
            return True, False
    return False, False


def detect_toc_offline(parsed: ParsedPdf, check_pages: int) -> DetectedToc | None:
    """Printed TOC in the first ``check_pages`` pages: detected pages and parsed items."""
    n = min(check_pages, len(parsed.pages))
    later_heads = {compact(h.text) for h in parsed.headings if h.page > 1}
    pages: list[int] = []
    flags: list[bool] = []
    for p in range(1, n + 1):
        is_toc, with_nums = _toc_page_score(parsed, p, bool(pages), later_heads)
        if is_toc:
            pages.append(p)
            flags.append(with_nums)
        elif pages:
            break
    if not pages:
        return None
    items = parse_toc_items(parsed, pages)
    if len(items) < 2:
        return None
    with_nums = sum(1 for it in items if it.printed) >= 0.5 * len(items)
    return DetectedToc(tuple(pages), tuple(items), with_nums)


def parse_toc_items(parsed: ParsedPdf, pages: Iterable[int]) -> list[TocItem]:
    """Turn printed-TOC lines into items with levels (wrapped titles joined, prose skipped)."""
    lines: list[_TocLine] = []
    for p in pages:
        for text, info in _page_toc_lines(parsed, p):
            if _is_contents_heading(text):
                continue
            tl = _parse_toc_line(text, info, len(parsed.pages))
            if tl is None:
                continue
            if not tl.title:  # a bare number: the page of the previous, number-less line
                if lines and lines[-1].num is None:
                    lines[-1] = replace(lines[-1], num=tl.num)
                continue
            lines.append(tl)
    merged: list[_TocLine] = []
    pending: _TocLine | None = None
    for tl in lines:
        tl = replace(tl, title=_LIST_MARK.sub("", tl.title))
        long_prose = len(tl.title) > 130 or (re.search(r"[.:]$", tl.title) and len(tl.title.split()) > 6)
        if tl.num is None and long_prose and not numbering_of(tl.title):
            pending = None  # explanatory prose inside the TOC
            continue
        if pending is not None:
            wrap = not numbering_of(tl.title) and (
                not tl.title[:1].isupper()
                or _CONNECTOR_END.search(pending.title) is not None
                or (tl.x > pending.x + 3.0 and tl.num is not None and len(pending.title) >= 50)
            )
            if wrap:
                merged[-1] = replace(pending, title=f"{pending.title} {tl.title}", num=tl.num)
                pending = merged[-1] if tl.num is None else None
                continue
        if sum(ch.isalpha() for ch in tl.title) < 2:
            continue  # a stray number line
        merged.append(tl)
        pending = tl if tl.num is None else None
    numbered = [i for i, tl in enumerate(merged) if tl.num]
    if len(numbered) >= 3 and len(numbered) >= 0.3 * len(merged):
        # with page numbers, number-less lines before the first / after the last numbered one are not entries
        merged = [
            tl for i, tl in enumerate(merged) if numbered[0] <= i <= numbered[-1] or numbering_of(tl.title)
        ]
    styled = []
    for tl in merged:
        num = numbering_of(tl.title)
        kind = num.split(":")[0] + (str(num.count(".")) if num.startswith("dec") else "") if num else ""
        styled.append(
            _Styled(
                style_rank(num), tl.x, (round(tl.size, 1), int(tl.bold), 0), kind or f"plain{round(tl.x)}"
            )
        )
    levels = nest_levels(styled, use_indent=True)
    items = [
        TocItem(tl.title, tl.num, lvl, st.key) for tl, lvl, st in zip(merged, levels, styled, strict=True)
    ]
    if len(numbered) >= 3 and len(numbered) >= 0.3 * len(merged):
        # a number-less line is an entry only as a group header (deeper entries follow) or when numbered
        items = [
            it
            for i, it in enumerate(items)
            if it.printed or numbering_of(it.title) or (i + 1 < len(items) and items[i + 1].level > it.level)
        ]
    return items


# ============================================================================ no-TOC headings (offline)


@dataclass(frozen=True)
class _Cand:
    h: HeadingCandidate
    style: str
    rank: float
    title: str


def _num_key(numbering: str) -> tuple:
    kind, _, value = numbering.partition(":")
    if kind in ("part", "chapter", "roman"):
        romans = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
        if value.isdigit():
            return (int(value),)
        words = {"ONE": 1, "TWO": 2, "THREE": 3, "FOUR": 4, "FIVE": 5, "SIX": 6}
        if value in words:
            return (words[value],)
        total = 0
        for a, b in zip(value, [*value[1:], ""], strict=True):
            va, vb = romans.get(a, 0), romans.get(b, 0)
            total += -va if va < vb else va
        return (total,)
    if kind == "item":
        m = re.match(r"(\d+)([A-Z]?)", value)
        return (int(m.group(1)), m.group(2)) if m else (0, "")
    if kind in ("dec", "section"):
        return tuple(int(x) for x in value.split(".") if x.isdigit())
    if kind == "note":
        return (int(value),) if value.isdigit() else (ord(value.upper()[0]) - 64,)
    return (value,)


def _lis(cands: list[_Cand], key) -> list[_Cand]:
    """Longest strictly increasing subsequence by ``key`` (keeps order; drops stray references)."""
    if not cands:
        return []
    tails: list[int] = []
    prev: list[int] = [-1] * len(cands)
    keys = [key(c) for c in cands]
    for i, k in enumerate(keys):
        lo, hi = 0, len(tails)
        while lo < hi:
            mid = (lo + hi) // 2
            if keys[tails[mid]] < k:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0:
            prev[i] = tails[lo - 1]
        if lo == len(tails):
            tails.append(i)
        else:
            tails[lo] = i
    out = []
    i = tails[-1]
    while i >= 0:
        out.append(cands[i])
        i = prev[i]
    return out[::-1]


_SENTENCE_END = re.compile(r"[.;:]$")


def _plain_ok(h: HeadingCandidate) -> bool:
    t = h.text
    words = t.split()
    if len(t) > 110 or len(words) > 16 or not (t[:1].isupper() or t[:1].isdigit()):
        return False
    if (_SENTENCE_END.search(t) and len(words) > 6) or t.endswith(",") or (t.endswith(":") and len(t) <= 12):
        return False  # a sentence, a salutation ("Dear Sir,"), a form label ("Title:")
    if re.match(
        r"^(?:\(?in (?:millions|thousands|billions)|years? ended|as of|for the (?:years?|three|six|nine))",
        t,
        re.I,
    ):
        return False
    return sum(ch.isalpha() for ch in t) >= 3


def heading_styles(
    parsed: ParsedPdf,
    lo: int,
    hi: int,
    *,
    after: tuple[int, int] | None,
    skip_pages: frozenset[int],
    before: tuple[int, int] | None = None,
) -> list[list[_Cand]]:
    """Heading candidates of pages ``lo..hi`` (strictly between ``after`` and ``before``) by style, top style first."""
    body = parsed.body_font_size
    raw = [
        h
        for h in parsed.headings
        if lo <= h.page <= hi
        and h.page not in skip_pages
        and (after is None or (h.page, h.line) > after)
        and (before is None or (h.page, h.line) < before)
    ]
    groups: dict[str, list[HeadingCandidate]] = {}
    for h in raw:
        if h.numbering:
            kind = h.numbering.split(":")[0]
            key = kind + (str(h.numbering.count(".")) if kind == "dec" else "")
        else:
            if not (h.bold or h.size >= body + 0.5) or not _plain_ok(h):
                continue
            key = f"plain:{round(h.size * 2) / 2}:{int(h.bold)}:{int(h.caps)}"
        groups.setdefault(key, []).append(h)
    styles: list[tuple[float, list[_Cand]]] = []
    numbered_sizes = [h.size for k, hs in groups.items() if not k.startswith("plain") for h in hs]
    top_numbered = max(numbered_sizes) if numbered_sizes else 0.0
    for key, hs in groups.items():
        if key.startswith("plain"):
            size = hs[0].size
            kept: list[HeadingCandidate] = []
            for h in hs:  # drop "(continued)" repeats of the previous heading of this style
                if kept and compact(kept[-1].text) == compact(h.text):
                    continue
                kept.append(h)
            if len(kept) > 4 and len({compact(h.text) for h in kept}) < 0.5 * len(kept):
                continue  # repeated labels ("Assets", "Notifications"), not section headings
            big = size >= body + 0.5
            # unnumbered styles nest below numbered ones, unless clearly larger ("above"); bigger = higher
            if numbered_sizes and size > top_numbered + 1.0:
                rank = -100.0 - size
            else:
                rank = 20.0 + (50.0 - size) + (0 if big else 5)
            rank -= 0.5 * kept[0].bold + 0.25 * kept[0].caps
            cands = [_Cand(h, key, rank, h.text) for h in kept]
        else:
            visual = [h for h in hs if h.bold or h.size >= body + 0.5]
            if (len(visual) >= 2 and len(visual) >= 0.5 * len(hs)) or key.split(":")[0][:3] in (
                "dec",
                "rom",
                "alp",
            ):
                hs = visual  # bare "1 Title", "A. Title" lines are headings only when they look like one
            hs = [h for h in hs if len(h.text) <= 160 and not re.search(r"\s\d{1,3}$", h.text)]
            seen: set[str] = set()
            uniq = []
            for h in hs:
                if h.numbering in seen:
                    continue
                seen.add(h.numbering)
                uniq.append(h)
            cands = [_Cand(h, key, float(_rank_or(h.numbering, 9)), h.text) for h in uniq]
            cands = _lis(cands, lambda c: _num_key(c.h.numbering))
        if cands:
            styles.append((cands[0].rank, cands))
    styles.sort(key=lambda s: (s[0], -len(s[1])))
    return [c for _, c in styles]


def no_toc_entries(
    parsed: ParsedPdf,
    lo: int,
    hi: int,
    *,
    after: tuple[int, int] | None = None,
    skip_pages: frozenset[int] = frozenset(),
    max_levels: int = 3,
) -> list[FlatEntry]:
    """Section list of pages ``lo..hi`` from layout signals (numbering, font size, bold)."""
    styles = heading_styles(parsed, lo, hi, after=after, skip_pages=skip_pages)
    styles = [
        s
        for s in styles
        if (len({c.h.page for c in s}) >= 2 or not s[0].style.startswith("plain"))
        and (len(s) >= 2 or s[0].style.split(":")[0] in ("part", "item"))
    ]
    if not styles:
        return []
    # styles that only start late (appended exhibits, a plan attached at the end) come last
    late = lo + 0.6 * (hi - lo + 1)
    styles = [s for s in styles if s[0].h.page <= late] + [s for s in styles if s[0].h.page > late]
    numbered = [s for s in styles if not s[0].style.startswith("plain")]
    chosen: list[list[_Cand]]
    if sum(len(s) for s in numbered) >= 3:
        above = [
            s for s in styles if s[0].style.startswith("plain") and s[0].rank < 0 and s[0].h.page <= late
        ]
        chosen = (above + numbered)[:max_levels]
    else:
        body = parsed.body_font_size
        big = [s for s in styles if s[0].style.startswith("plain") and s[0].h.size >= body + 0.5]
        chosen = (big or styles)[:max_levels]
    cands = sorted((c for s in chosen for c in s), key=lambda c: (c.h.page, c.h.line))
    styled = [
        _Styled(
            None if c.style.startswith("plain") else int(c.rank),
            c.h.x,
            (round(c.h.size, 1), int(c.h.bold), int(c.h.caps)),
            c.style,
        )
        for c in cands
    ]
    levels = nest_levels(styled, use_indent=False)
    codes = codes_from_levels(levels)
    return [
        FlatEntry(code, c.title, c.h.page, c.h.line, verified=True)
        for code, c in zip(codes, cands, strict=True)
    ]


def split_entries(
    parsed: ParsedPdf,
    lo: int,
    hi: int,
    *,
    after: tuple[int, int] | None,
    before: tuple[int, int] | None = None,
    skip_pages: frozenset[int] = frozenset(),
) -> list[FlatEntry]:
    """One level of sections that divides ``lo..hi`` (for subdividing a large node), or []."""
    pages = hi - lo + 1
    for style in heading_styles(parsed, lo, hi, after=after, before=before, skip_pages=skip_pages):
        if len(style) < 2 and not (style and style[0].h.page > lo):
            continue
        starts = [lo] + [c.h.page for c in style] + [hi + 1]
        biggest = max(b - a for a, b in zip(starts, starts[1:], strict=False))
        if biggest >= pages and pages > 1:
            continue  # does not divide the range
        if len(style) > max(12, 2 * pages) and style[0].style.startswith("plain"):
            continue  # too fine-grained to be sections
        return [
            FlatEntry(str(i + 1), c.title, c.h.page, c.h.line, verified=True) for i, c in enumerate(style)
        ]
    return []


# ============================================================================ LLM steps


R = TypeVar("R")


class LlmSteps:
    """Budgeted, bounded, failure-tolerant JSON calls; ``None`` means: use the offline step.

    After ``MAX_ERRORS_IN_A_ROW`` provider errors (not malformed replies) the LLM is no
    longer asked for this document.
    """

    MAX_ERRORS_IN_A_ROW = 3

    def __init__(self, chat: ChatModel, budget: int) -> None:
        self.chat = chat
        self.budget = budget
        self.calls = 0
        self.failures = 0
        self.errors_in_a_row = 0
        self._sem = asyncio.Semaphore(LLM_CONCURRENCY)

    @property
    def remaining(self) -> int:
        if self.chat.offline or self.errors_in_a_row >= self.MAX_ERRORS_IN_A_ROW:
            return 0
        return max(0, self.budget - self.calls)

    @property
    def available(self) -> bool:
        return self.remaining > 0

    async def ask(self, step: LLMStep[R], prompt: str) -> R | None:
        """The step's typed reply, or None (budget spent, provider failing, or a reply of the wrong shape)."""
        if not self.available:
            return None
        counted = CountingChat(self.chat)
        async with self._sem:
            try:
                reply = await ask(counted, step, prompt)
            except InvalidReply as exc:
                self.calls += counted.calls
                self.failures += 1
                log.warning("ingest.tree_llm_bad_reply", purpose=step.purpose, error=str(exc)[:300])
                return None
            except LLMError as exc:
                self.calls += max(1, counted.calls)
                self.failures += 1
                self.errors_in_a_row += 1
                log.warning("ingest.tree_llm_failed", purpose=step.purpose, error=str(exc)[:300])
                if self.errors_in_a_row == self.MAX_ERRORS_IN_A_ROW:
                    log.warning("ingest.tree_llm_disabled", calls=self.calls)
                return None
        self.calls += counted.calls
        self.errors_in_a_row = 0
        return reply


def _tagged(parsed: ParsedPdf, pages: Iterable[int], max_tokens: int) -> str:
    parts = []
    for p in pages:
        text = parsed.pages[p - 1].text
        if parsed.pages[p - 1].tokens > max_tokens:
            text = truncate_tokens(text, max_tokens)
        parts.append(f"<physical_index_{p}>\n{text}\n</physical_index_{p}>")
    return "\n".join(parts)


def page_groups(parsed: ParsedPdf, lo: int, hi: int, max_tokens: int) -> list[list[int]]:
    """Consecutive page groups of at most ``max_tokens`` tokens, overlapping by one page."""
    groups: list[list[int]] = []
    cur: list[int] = []
    tokens = 0
    for p in range(lo, hi + 1):
        t = min(parsed.pages[p - 1].tokens, max_tokens) + 12
        if cur and tokens + t > max_tokens:
            groups.append(cur)
            last = cur[-1]
            cur, tokens = [last], min(parsed.pages[last - 1].tokens, max_tokens) + 12
            if tokens + t > max_tokens:
                cur, tokens = [], 0
        cur.append(p)
        tokens += t
    if cur and (not groups or cur != groups[-1][-1:]):
        groups.append(cur)
    return groups


def _loose_on_page(title: str, text: str) -> bool:
    """Most of the title's words occur on the page (to accept an LLM's answer)."""
    words = [w for w in normalize_title(title).split() if len(w) >= 3]
    if not words:
        return compact(title) in compact(text)
    page_words = set(normalize_title(text).split())
    return sum(1 for w in words if w in page_words) >= 0.7 * len(words)


# ============================================================================ builder


class _Builder:
    def __init__(self, parsed: ParsedPdf, chat: ChatModel, settings: IngestSettings) -> None:
        self.parsed = parsed
        self.settings = settings
        self.n = len(parsed.pages)
        self.lines = PageLines(parsed)
        self.llm = LlmSteps(chat, max(4, LLM_CALLS_PER_100_PAGES * self.n // 100))
        self.warnings: list[str] = []
        self.toc_pages: frozenset[int] = frozenset()
        self.body_start = 1

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    # ------------------------------------------------------------------ main flow

    async def build(self) -> DocumentTree:
        entries, mode = await self.flat_list()
        entries = self.with_preface(entries)
        entries = self.appear_start(entries)
        roots = self.to_tree(entries, self.n)
        if not roots:
            roots = [_Node(self._doc_title(), 1, self.n)]
        await asyncio.gather(*(self.subdivide(r, 0) for r in roots))
        nodes = self.emit(roots)
        log.info(
            "ingest.tree_built",
            mode=mode,
            pages=self.n,
            nodes=len(nodes),
            llm_calls=self.llm.calls,
            warnings=len(self.warnings),
        )
        return DocumentTree(
            nodes=tuple(nodes),
            page_count=self.n,
            source_mode=mode,
            unit="page",
            warnings=tuple(self.warnings),
            llm_calls=self.llm.calls,
        )

    async def flat_list(self) -> tuple[list[FlatEntry], str]:
        outline = self.outline_entries()
        if outline:
            ok, entries = await self.check(outline, "outline")
            if ok:
                return entries, "outline"
        toc = await self.detect_toc()
        if toc is not None:
            self.toc_pages = frozenset(toc.pages)
            self.body_start = max(toc.pages) + 1 if max(toc.pages) < self.n else 1
            log.info(
                "ingest.toc_detected",
                pages=list(toc.pages),
                items=len(toc.items),
                numbered=toc.with_page_numbers,
            )
            if toc.with_page_numbers:
                ok, entries = await self.check(await self.map_printed_pages(toc), "toc_pages")
                if ok:
                    return entries, "toc_pages"
            ok, entries = await self.check(await self.locate_titles(toc), "toc_no_pages")
            if ok:
                return entries, "toc_no_pages"
        if self.llm.available:
            generated = await self.llm_generate(1, self.n)
            if generated:
                ok, entries = await self.check(generated, "no_toc")
                if ok:
                    return entries, "no_toc"
        entries = no_toc_entries(self.parsed, 1, self.n, skip_pages=self.toc_pages)
        return entries, "no_toc"

    # ------------------------------------------------------------------ mode 0: outline

    def outline_entries(self) -> list[FlatEntry]:
        items = [
            (lvl, clean_text(t), p) for lvl, t, p in self.parsed.outline if 1 <= p <= self.n and clean_text(t)
        ]
        if len(items) < 2:
            return []
        pages = [p for _, _, p in items]
        if self.n > 3 and max(pages) - min(pages) + 1 < 0.5 * self.n:
            self.warn("embedded outline covers too little of the document; ignored")
            return []
        codes = codes_from_levels([lvl for lvl, _, _ in items])
        return [FlatEntry(code, t, p) for code, (_, t, p) in zip(codes, items, strict=True)]

    # ------------------------------------------------------------------ verification and fixing

    def verify(self, entries: list[FlatEntry]) -> tuple[float, list[FlatEntry]]:
        out = []
        for e in entries:
            if e.page is None:
                out.append(replace(e, verified=False))
                continue
            m = self.lines.find(e.title, e.page, relaxed=True)
            out.append(replace(e, verified=m is not None, line=m.line if m else e.line))
        accuracy = sum(1 for e in out if e.verified) / len(out) if out else 0.0
        return accuracy, out

    async def check(self, entries: list[FlatEntry], mode: str) -> tuple[bool, list[FlatEntry]]:
        """Verify; accuracy 1 → accept, > 0.6 → fix wrong entries, else give the mode up."""
        if not entries:
            return False, []
        accuracy, entries = self.verify(entries)
        log.info("ingest.toc_verified", mode=mode, entries=len(entries), accuracy=round(accuracy, 3))
        if accuracy <= 0.6:
            self.warn(
                f"{mode}: {len(entries)} entries failed verification (accuracy {accuracy:.2f}); fell back"
            )
            return False, []
        if accuracy < 1.0:
            entries = await self.fix(entries)
        entries = self.clean(entries, mode)
        return bool(entries), entries

    def _bounds(self, entries: list[FlatEntry], i: int) -> tuple[int, int]:
        lo = next((e.page for e in reversed(entries[:i]) if e.verified and e.page), self.body_start)
        hi = next((e.page for e in entries[i + 1 :] if e.verified and e.page), self.n)
        return lo or 1, max(lo or 1, hi or self.n)

    async def fix(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        """Search wrong entries between their correct neighbours (offline, then LLM), ≤ 3 rounds."""
        for _ in range(3):
            wrong = [i for i, e in enumerate(entries) if not e.verified]
            if not wrong:
                break
            progress = False
            for i in wrong:
                lo, hi = self._bounds(entries, i)
                found = self.lines.scan(entries[i].title, lo, hi, strict=True)
                if found is None:
                    for p in range(lo, hi + 1):
                        m = self.lines.find(entries[i].title, p, relaxed=True)
                        if m is not None:
                            found = (p, m)
                            break
                if found is not None:
                    entries[i] = replace(entries[i], page=found[0], line=found[1].line, verified=True)
                    progress = True
            wrong = [i for i, e in enumerate(entries) if not e.verified]
            if wrong and self.llm.available:
                progress = await self.llm_fix(entries, wrong) or progress
            if not progress:
                break
        left = sum(1 for e in entries if not e.verified)
        if left:
            log.info("ingest.toc_fix_incomplete", unresolved=left)
        return entries

    async def llm_fix(self, entries: list[FlatEntry], wrong: list[int]) -> bool:
        by_range: dict[tuple[int, int], list[int]] = {}
        for i in wrong:
            by_range.setdefault(self._bounds(entries, i), []).append(i)
        progress = False
        jobs = []
        for (lo, hi), idxs in by_range.items():
            groups = page_groups(self.parsed, lo, hi, self.settings.max_token_num_each_node)
            if len(groups) > 2:
                continue  # too wide to ask about cheaply
            jobs.append((idxs, self.llm_locate([entries[i].title for i in idxs], lo, hi, "tree.fix")))
        results = await asyncio.gather(*(job for _, job in jobs))
        for (idxs, _), found in zip(jobs, results, strict=True):
            for k, page in found.items():
                i = idxs[k]
                if _loose_on_page(entries[i].title, self.parsed.pages[page - 1].text):
                    m = self.lines.find(entries[i].title, page, relaxed=True)
                    entries[i] = replace(entries[i], page=page, line=m.line if m else None, verified=True)
                    progress = True
        return progress

    def clean(self, entries: list[FlatEntry], mode: str) -> list[FlatEntry]:
        """Drop unresolved entries (keeping estimated pages for page-numbered modes) and out-of-order ones."""
        keep_unverified = mode in ("outline", "toc_pages")
        out: list[FlatEntry] = []
        dropped = 0
        for e in entries:
            if e.page is None or not (1 <= e.page <= self.n) or (not e.verified and not keep_unverified):
                dropped += 1
                continue
            if out and e.page < out[-1].page:  # type: ignore[operator]
                if not e.verified:
                    dropped += 1
                    continue
                while out and out[-1].page > e.page and not out[-1].verified:  # type: ignore[operator]
                    out.pop()
                    dropped += 1
                if out and out[-1].page > e.page:  # type: ignore[operator]
                    dropped += 1
                    continue
            out.append(e)
        if dropped:
            self.warn(f"{mode}: {dropped} of {len(entries)} entries could not be placed and were dropped")
        return out

    # ------------------------------------------------------------------ modes 1/2: printed TOC

    async def detect_toc(self) -> DetectedToc | None:
        check = self.settings.toc_check_page_num
        offline = detect_toc_offline(self.parsed, check)
        if not self.llm.available:
            return offline
        found = await self.llm_detect_toc(check)
        if found is None:
            return offline
        pages, numbered = found
        if not pages:
            if offline is not None:
                self.warn("LLM saw no table of contents; using the one found by layout")
            return offline
        items = await self.llm_transform(pages)
        if items is None:
            items = parse_toc_items(self.parsed, pages)
            numbered = sum(1 for it in items if it.printed) >= 0.5 * max(1, len(items))
        if len(items) < 2:
            return offline
        return DetectedToc(tuple(pages), tuple(items), numbered)

    async def llm_detect_toc(self, check: int) -> tuple[list[int], bool] | None:
        pages = range(1, min(check, self.n) + 1)
        body = "\n".join(
            f"<page_{p}>\n{truncate_tokens(self.parsed.pages[p - 1].text, 500)}\n</page_{p}>" for p in pages
        )
        reply = await self.llm.ask(TOC_DETECT, toc_detect_prompt(body))
        if reply is None:
            return None
        yes = sorted({p.page for p in reply.pages if p.is_toc and 1 <= p.page <= self.n})
        run: list[int] = []
        for p in yes:
            if run and p != run[-1] + 1:
                break  # the TOC ended
            run.append(p)
        return run, bool(reply.page_numbers_given)

    async def llm_transform(self, pages: Sequence[int]) -> list[TocItem] | None:
        text = "\n".join(self.parsed.pages[p - 1].text for p in pages)
        text = re.sub(r"(?:\s*[.…·_]){3,}\s*", ": ", text)
        if count_tokens(text) > 15000:
            return None
        reply = await self.llm.ask(TOC_TRANSFORM, toc_transform_prompt(text))
        if reply is None:
            return None
        items = []
        for e in reply.entries:
            title = clean_text(e.title)
            if not title or not re.fullmatch(r"\d+(?:\.\d+)*", e.structure.strip()):
                continue
            printed = str(e.page) if e.page is not None and e.page > 0 else None
            items.append(TocItem(title, printed, e.structure.strip().count(".") + 1, "llm"))
        return items if len(items) >= 2 else None

    async def map_printed_pages(self, toc: DetectedToc) -> list[FlatEntry]:
        """Printed TOC page numbers → physical pages by the most common offset (titles and page labels)."""
        votes: Counter[int] = Counter()
        for it in toc.items:
            if not (it.printed and it.printed.isdigit()):
                continue
            p = int(it.printed)
            offsets = set()
            for phys in range(max(self.body_start, p - 5), min(self.n, p + 60) + 1):
                if self.lines.find(it.title, phys, strict=True) is not None:
                    offsets.add(phys - p)
            votes.update(offsets)
        label_votes: Counter[int] = Counter()
        for phys, label in enumerate(self.parsed.page_labels, start=1):
            if phys >= self.body_start and label.isdigit():
                label_votes[phys - int(label)] += 1
        if not votes and self.llm.available:
            votes = await self.llm_offset_votes(toc)
        if votes:
            offset = max(votes, key=lambda o: (votes[o], label_votes[o], -abs(o)))
        elif label_votes:
            offset = label_votes.most_common(1)[0][0]
        else:
            offset = 0
        log.info("ingest.toc_offset", offset=offset, votes=votes[offset] if votes else 0)
        arabic_pages: dict[int, int] = {}
        other_pages: dict[str, int] = {}
        for phys, label in enumerate(self.parsed.page_labels, start=1):
            if phys < self.body_start or not label:
                continue
            if label.isdigit():
                arabic_pages.setdefault(int(label), phys)
            else:
                other_pages.setdefault(label.lower(), phys)
        codes = codes_from_levels([it.level for it in toc.items])
        out = []
        current = offset  # the offset can change inside a document (unnumbered inserted pages)
        for code, it in zip(codes, toc.items, strict=True):
            page: int | None = None
            line: int | None = None
            if it.printed and it.printed.isdigit():
                p = int(it.printed)
                tries = [arabic_pages.get(p), p + current, p + offset]
                for phys in tries:
                    if phys is None or not 1 <= phys <= self.n:
                        continue
                    m = self.lines.find(it.title, phys, relaxed=True)
                    if m is not None:
                        page, line = phys, m.line
                        current = phys - p
                        break
                if page is None:
                    page = next((x for x in tries if x is not None and 1 <= x <= self.n), None)
            elif it.printed:
                page = other_pages.get(it.printed.lower())
            out.append(FlatEntry(code, it.title, page, line))
        return self._fill_missing(out)

    def _fill_missing(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        """Entries without a page (e.g. ``PART II``): the first page of the next entry with one."""
        out = list(entries)
        for i in range(len(out) - 1, -1, -1):
            if out[i].page is None:
                nxt = next((e.page for e in out[i + 1 :] if e.page is not None), None)
                if nxt is not None:
                    out[i] = replace(out[i], page=nxt)
        return out

    async def llm_offset_votes(self, toc: DetectedToc) -> Counter[int]:
        groups = page_groups(self.parsed, self.body_start, self.n, self.settings.max_token_num_each_node)
        if not groups:
            return Counter()
        numbered = [it for it in toc.items if it.printed and it.printed.isdigit()]
        found = await self.llm_locate(
            [it.title for it in numbered], groups[0][0], groups[0][-1], "tree.toc_index"
        )
        votes: Counter[int] = Counter()
        for k, phys in found.items():
            votes[phys - int(numbered[k].printed or 0)] += 1
        return votes

    async def locate_titles(self, toc: DetectedToc) -> list[FlatEntry]:
        """TOC without page numbers: each title's first page, scanning forward in order."""
        codes = codes_from_levels([it.level for it in toc.items])
        out: list[FlatEntry] = []
        cursor = self.body_start
        for code, it in zip(codes, toc.items, strict=True):
            found = self.lines.scan(it.title, cursor, self.n, strict=True)
            if found is None:
                out.append(FlatEntry(code, it.title, None))
                continue
            page, m = found
            out.append(FlatEntry(code, it.title, page, m.line, verified=True))
            cursor = page
        missing = [i for i, e in enumerate(out) if e.page is None]
        if missing and self.llm.available:
            found_llm = await self.llm_locate(
                [out[i].title for i in missing], self.body_start, self.n, "tree.toc_locate"
            )
            for k, page in found_llm.items():
                i = missing[k]
                m = self.lines.find(out[i].title, page, relaxed=True)
                out[i] = replace(out[i], page=page, line=m.line if m else None, verified=m is not None)
        return out

    async def llm_locate(self, titles: list[str], lo: int, hi: int, purpose: str) -> dict[int, int]:
        """Ask, page group by page group, where each title starts; index → physical page."""
        if not titles:
            return {}
        groups = page_groups(self.parsed, lo, hi, self.settings.max_token_num_each_node)
        groups = groups[: self.llm.remaining]
        listing = "\n".join(f"{i}. {t}" for i, t in enumerate(titles))

        async def one(group: list[int]) -> list[tuple[int, int]]:
            prompt = locate_prompt(listing, _tagged(self.parsed, group, self.settings.max_token_num_each_node))
            reply = await self.llm.ask(LOCATE[purpose], prompt)
            if reply is None:
                return []
            return [
                (e.index, e.physical_index)
                for e in reply.entries
                if 0 <= e.index < len(titles)
                and e.physical_index is not None
                and group[0] <= e.physical_index <= group[-1]
            ]

        results = await asyncio.gather(*(one(g) for g in groups))
        found: dict[int, int] = {}
        for pairs in results:
            for idx, page in pairs:
                found.setdefault(idx, page)
        return found

    # ------------------------------------------------------------------ mode 3: no TOC (LLM)

    async def llm_generate(self, lo: int, hi: int) -> list[FlatEntry] | None:
        """Group-by-group structure generation (first group creates, later groups continue)."""
        groups = page_groups(self.parsed, lo, hi, self.settings.max_token_num_each_node)
        if not groups or len(groups) > self.llm.remaining:
            return None
        raw: list[GenEntry] = []
        for k, group in enumerate(groups):
            text = _tagged(self.parsed, group, self.settings.max_token_num_each_node)
            previous = None if k == 0 else msgspec.json.encode(
                [{"structure": e.structure, "title": e.title, "physical_index": e.physical_index} for e in raw[-60:]]
            ).decode()
            reply = await self.llm.ask(GENERATE, generate_prompt(text, previous))
            if reply is None:
                self.warn(
                    f"LLM structure generation failed for pages {group[0]}-{group[-1]}; used layout headings"
                )
                return None
            for e in reply.entries:
                if e.physical_index is None or not group[0] <= e.physical_index <= group[-1]:
                    continue
                if not re.fullmatch(r"\d+(?:\.\d+)*", e.structure.strip()) or not clean_text(e.title):
                    continue
                if (
                    raw
                    and compact(raw[-1].title) == compact(e.title)
                    and raw[-1].physical_index == e.physical_index
                ):
                    continue
                raw.append(e)
        if not raw:
            return None
        codes = codes_from_levels([e.structure.strip().count(".") + 1 for e in raw])
        return [FlatEntry(c, clean_text(e.title), e.physical_index) for c, e in zip(codes, raw, strict=True)]

    # ------------------------------------------------------------------ shared post-processing

    def with_preface(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        if entries and entries[0].page and entries[0].page > 1:
            return [FlatEntry("0", PREFACE, 1, None, True, True), *entries]
        return entries

    def appear_start(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        """Does each section start at the top of its start page? (offline layout check)"""
        out = []
        for e in entries:
            if e.title == PREFACE and e.page == 1 and e.structure == "0":
                out.append(e)
                continue
            line = e.line
            if line is None and e.page is not None:
                m = self.lines.find(e.title, e.page, relaxed=True)
                line = m.line if m else None
            at_top = self.lines.at_top(e.page, line) if (e.page is not None and line is not None) else False
            out.append(replace(e, line=line, appear_start=at_top))
        return out

    def to_tree(
        self, entries: list[FlatEntry], last_page: int, stop: tuple[int, int] | None = None
    ) -> list[_Node]:
        """Start/end pages (spec 3.5.3) and nesting by structure codes (spec 3.5.4)."""
        entries = [e for e in entries if e.page is not None]
        roots: list[_Node] = []
        by_code: dict[str, _Node] = {}
        for i, e in enumerate(entries):
            start = int(e.page or 1)
            node_stop = stop
            if i + 1 < len(entries):
                nxt = entries[i + 1]
                end = int(nxt.page or start) - (1 if nxt.appear_start else 0)
                node_stop = (int(nxt.page or start), nxt.line) if nxt.line is not None else None
            else:
                end = last_page
            node = _Node(_title(e.title), start, max(start, min(end, last_page)), e.line, node_stop)
            parent = None
            code = e.structure
            while "." in code and parent is None:
                code = code.rsplit(".", 1)[0]
                parent = by_code.get(code)
            (parent.children if parent is not None else roots).append(node)
            by_code[e.structure] = node
        return roots

    # ------------------------------------------------------------------ large nodes

    def _tokens(self, lo: int, hi: int) -> int:
        return sum(self.parsed.pages[p - 1].tokens for p in range(lo, hi + 1))

    def _too_big(self, start: int, end: int) -> bool:
        return end > start and (
            end - start + 1 > self.settings.max_page_num_each_node
            or self._tokens(start, end) > self.settings.max_token_num_each_node
        )

    async def subdivide(self, node: _Node, depth: int) -> None:
        """Split a node over the page or token limit on its own range, then recurse (spec 3.6)."""
        if self._too_big(node.start, node.end) and depth < MAX_DEPTH:
            new, own_end = await self.split(node)
            if new:
                node.end = own_end
                if self._too_big(node.start, node.end):  # a long stretch before the first heading
                    lead = self.windows(node)
                    if lead:
                        node.end = node.start
                        new = lead + new
                node.children = new + node.children
        await asyncio.gather(*(self.subdivide(c, depth + 1) for c in node.children))

    async def split(self, node: _Node) -> tuple[list[_Node], int]:
        """Children covering the node's own range, and the node's narrowed end page."""
        lo, hi = node.start, node.end
        after = (lo, node.line) if node.line is not None else None
        key = compact(node.title)
        entries: list[FlatEntry] | None = None
        if self.llm.available:
            generated = await self.llm_generate(lo, hi)
            if generated:
                _, checked = self.verify(generated)
                entries = [e for e in checked if e.verified]
        if not entries:
            entries = split_entries(
                self.parsed, lo, hi, after=after, before=node.stop, skip_pages=self.toc_pages
            )
        entries = [
            e
            for e in entries
            if e.page is not None
            and lo <= e.page <= hi
            and (node.stop is None or (e.page, e.line if e.line is not None else -1) < node.stop)
        ]
        while entries and entries[0].page == lo and compact(entries[0].title) == key:
            entries = entries[1:]
        if entries:
            entries = self.appear_start(entries)
            children = self.to_tree(entries, hi, node.stop)
            if children and not (len(children) == 1 and children[0].start == lo and children[0].end == hi):
                first = entries[0]
                own_end = int(first.page or lo) - (1 if first.appear_start else 0)
                return children, max(lo, own_end)
        return self.windows(node), lo

    def windows(self, node: _Node) -> list[_Node]:
        """Split a range without headings into page windows "<title> (pp. a–b)"."""
        lo, hi = node.start, node.end
        limit_pages = self.settings.max_page_num_each_node
        limit_tokens = self.settings.max_token_num_each_node
        spans: list[tuple[int, int]] = []
        a = lo
        tokens = 0
        for p in range(lo, hi + 1):
            t = self.parsed.pages[p - 1].tokens
            if p > a and (p - a >= limit_pages or tokens + t > limit_tokens):
                spans.append((a, p - 1))
                a, tokens = p, 0
            tokens += t
        spans.append((a, hi))
        if len(spans) < 2:
            return []
        base = re.sub(r"\s*\(pp?\. [^)]*\)$", "", node.title)
        return [
            _Node(
                f"{base} (p. {s})" if s == e else f"{base} (pp. {s}–{e})", s, e, None if s > lo else node.line
            )
            for s, e in spans
        ]

    # ------------------------------------------------------------------ output

    def _doc_title(self) -> str:
        for line in self.parsed.pages[0].text.split("\n"):
            if 3 <= len(line) <= 80 and sum(ch.isalpha() for ch in line) >= 3:
                return line
        return "Document"

    def emit(self, roots: list[_Node]) -> list[TreeNode]:
        out: list[TreeNode] = []
        pages = self.parsed.pages

        def walk(node: _Node, parent_id: str | None, level: int, path: tuple[str, ...]) -> None:
            node_id = f"{len(out):04d}"
            my_path = (*path, node.title)
            text = "\n\n".join(pages[p - 1].text for p in range(node.start, node.end + 1))
            out.append(
                TreeNode(
                    node_id=node_id,
                    parent_id=parent_id,
                    ordinal=len(out),
                    level=level,
                    title=node.title,
                    start=node.start,
                    end=node.end,
                    text=text,
                    summary="",
                    path=my_path,
                    is_leaf=not node.children,
                    unit="page",
                )
            )
            for child in node.children:
                walk(child, node_id, level + 1, my_path)

        for r in roots:
            walk(r, None, 1, ())
        return out


def _title(text: str) -> str:
    t = clean_text(text)
    t = re.sub(r"(?:\s*[.…·_]){2,}\s*\d*$", "", t).strip()
    return t[:200] or "Untitled"


async def build_pdf_tree(parsed: ParsedPdf, chat: ChatModel, settings: IngestSettings) -> DocumentTree:
    """Build the PageIndex tree of a parsed PDF (see the module docstring)."""
    return await _Builder(parsed, chat, settings).build()
