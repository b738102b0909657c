"""Page margins: running headers/footers (edge lines repeated on several pages) and printed page numbers."""

from __future__ import annotations

import re
from collections import Counter

from ingest.pdf_read.lines import _Line, _PageRecord
from kb.core.text import normalize_title

_MARGIN_TOP = 0.15
_MARGIN_BOTTOM = 0.88
_MIN_REPEAT = 3  # a margin line repeated on this many pages is a running header/footer


_PAGE_NUM = re.compile(
    r"^(?:page\s+)?[-–—(\[]?\s*(\d{1,4}|[ivxlcdm]{1,7}|[A-Z]{1,2}-\d{1,3})\s*[-–—)\]]?(?:\s+of\s+\d+)?$", re.I
)


def printed_page_number(text: str) -> str | None:
    """The page number printed in a header/footer line (``"12"``, ``"iv"``, ``"F-3"``), or None."""
    m = _PAGE_NUM.match(text.strip())
    if not m:
        return None
    token = m.group(1)
    if token.isalpha() and not token.islower() and not re.fullmatch(r"[IVXLCDM]+", token):
        return None
    return token


def _edge_kind(ln: _Line, j: int, n: int, height: float) -> str:
    """ "top"/"bottom" when line ``j`` of ``n`` can be a running header/footer, else ""."""
    if ln.yc > _MARGIN_BOTTOM * height or j >= n - 2:
        return "bottom"
    if ln.yc < _MARGIN_TOP * height or j < 2:
        return "top"
    return ""


def _margin_key(text: str, edge: str) -> str:
    if printed_page_number(text):
        return "#pagenumber#"
    norm = normalize_title(text)
    if len(norm) > 60:
        return norm
    if edge == "bottom":
        return re.sub(r"\d+", "#", norm)
    # a running head with the page number at either end ("Annual Report 2023 | 12"), not "EXHIBIT 10.32"
    if len(norm.split()) < 3 or _NUMBERED_HEAD.search(norm) or not _HEAD_PAGE_NUMBER.search(text.strip()):
        return norm  # "Item 7", "Note 3 Revenue": a numbered heading, not a page number
    return normalize_title(_HEAD_PAGE_NUMBER.sub("", text.strip())) + " #"


_HEAD_PAGE_NUMBER = re.compile(r"^\d{1,3}(?=\s+[^\d\s])|(?<=[^\d.,\s])\s+\d{1,3}$")
_NUMBERED_HEAD = re.compile(r"\b(?:item|note|part|chapter|section|article|exhibit|schedule|appendix|annex)\s+\d", re.I)


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


_OUTER_BAND = 0.09  # running heads and footers sit in the outer 9% of the page; a table's head starts lower
_TABLE_HEAD = re.compile(
    r"\b(?:in (?:millions|thousands|billions)|unaudited|(?:months|weeks|years?|quarters?) ended|as of|% change)\b"
    r"|^[\d\s,.$%()\-–]*(?:19|20)\d\d[\d\s,.$%()\-–]*$",
    re.I,
)


def running_lines(records: list[_PageRecord], margins: list[list[int]]) -> list[list[int]]:
    """The margin lines that are running heads, footers or page numbers, to keep out of the text that is read.

    A repeated edge line is one only in the outer band of the page and when it is not a table's head (a scale
    "(in millions)", a period "Three Months Ended", a row of years), which repeats at the top of statement pages.
    """
    out: list[list[int]] = []
    for r, idx in zip(records, margins, strict=True):
        keep = []
        for j in idx:
            ln = r.kept[j]
            outer = ln.yc < _OUTER_BAND * r.height or ln.yc > (1 - _OUTER_BAND) * r.height
            if printed_page_number(ln.text) or (outer and not _TABLE_HEAD.search(ln.text)):
                keep.append(j)
        out.append(keep)
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
