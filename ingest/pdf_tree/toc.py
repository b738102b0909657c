"""A printed table of contents found and parsed offline, by layout: which pages, and their entries with levels."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ingest.pdf_read import LineInfo, ParsedPdf, clean_text, numbering_of
from ingest.pdf_tree.entries import DetectedToc, Styled, TocItem, nest_levels, style_rank
from ingest.pdf_tree.matching import compact
from kb.core.text import normalize_title

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
    return _number_first(out)


_LEAD_NUM = re.compile(r"^(\d{1,4})\s+(?=\S)(?!\d{1,4}$)")


def _number_first(lines: list[tuple[str, LineInfo | None]]) -> list[tuple[str, LineInfo | None]]:
    """A contents page that prints the page number first ("12  Financial stability", as designed reports do)
    becomes "Financial stability 12", a wrapped title's next line joined to it. Recognised when most lines
    start with a number, the numbers never go down and outgrow the count of lines (page numbers, not section
    numbers "1 / 2 / 3"), and few lines end with one."""
    lead = {i: m for i, (t, _) in enumerate(lines) if (m := _LEAD_NUM.match(clean_text(t)))}
    nums = [int(m.group(1)) for m in lead.values()]
    if len(lead) < 4 or len(lead) < 0.5 * len(lines) or max(nums) <= len(lead):
        return lines
    if sum(b >= a for a, b in zip(nums, nums[1:], strict=False)) < 0.9 * (len(nums) - 1):
        return lines
    if sum(1 for t, _ in lines if re.search(r"(?:[.…·_]\s?){2,}\s*\d{1,4}$", t)) >= 0.3 * len(lines):
        return lines  # dot leaders to a number at the end: the usual layout
    out: list[tuple[str, LineInfo | None]] = []
    for i, (t, info) in enumerate(lines):
        t = clean_text(t)
        if (m := lead.get(i)) is not None:
            out.append((f"{t[m.end():]} {m.group(1)}", info))
        elif out and not _is_contents_heading(t) and out[-1][0][-1:].isdigit():
            title, _, num = out[-1][0].rpartition(" ")
            out[-1] = (f"{title} {t} {num}", out[-1][1])
        else:
            out.append((t, info))
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
            Styled(
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
