"""Heading signals: numbering prefixes, heading-like lines and wrapped headings, per page.

A line is a candidate when it is short, not a row of figures, and larger than the body, bold,
numbered (``Item 7.``, ``PART II``, ``Note 3``, ``1.2``) or in capitals; a candidate continued on the
next line is merged with it. The result is one :class:`HeadingCandidate` per heading.
"""

from __future__ import annotations

import re

import msgspec

from ingest.pdf_read.lines import _letters, _Line, _PageRecord


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

# Chinese report headings: 第一节 (chapter), 一、 (zhsec) and （一） (zhsub), which restart under each parent, and
# 1.1 glued to its title (dec); Chinese numerals become (zero-padded) digits so the numbering keys order them
_ZH_DIGIT = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0}
_ZH_NUMERAL = "零〇一二三四五六七八九十"
_ZH_NUMBERING = [
    ("chapter", re.compile(rf"^第([{_ZH_NUMERAL}]{{1,3}}|\d{{1,2}})(?:[节章篇]|部分)")),
    ("zhsec", re.compile(rf"^([{_ZH_NUMERAL}]{{1,3}})[、．]\s*(?=[\u4e00-\u9fff])")),
    ("zhsub", re.compile(rf"^[（(]([{_ZH_NUMERAL}]{{1,3}})[）)]\s*(?=[\u4e00-\u9fff])")),
    ("dec", re.compile(r"^(\d{1,2}(?:\.\d{1,2}){1,4})\s*(?=[\u4e00-\u9fff])")),
]


def _zh_int(numeral: str) -> int:
    """一 → 1, 十二 → 12, 二十 → 20, 二十三 → 23 (digits pass through)."""
    if numeral.isdigit():
        return int(numeral)
    if "十" in numeral:
        tens, _, ones = numeral.partition("十")
        return _ZH_DIGIT.get(tens, 1) * 10 + _ZH_DIGIT.get(ones, 0)
    return int("".join(str(_ZH_DIGIT[c]) for c in numeral))


def _zh_numbering(t: str) -> str:
    for kind, rx in _ZH_NUMBERING:
        m = rx.match(t)
        if m:
            value = m.group(1) if kind == "dec" else _zh_int(m.group(1))
            return f"{kind}:{value:02d}" if kind.startswith("zh") else f"{kind}:{value}"
    return ""


def numbering_of(text: str) -> str:
    """Numbering prefix of a heading as ``kind:value`` (e.g. ``item:7A``, ``dec:1.2``), or ""."""
    t = text.strip().replace("\u00a0", " ")
    if not t or t[0].islower():  # "section 1.2 of the Act …" is a sentence, not a heading
        return ""
    if "\u4e00" <= t[0] <= "\u9fff" or t[0] in "（(" or re.match(r"\d{1,2}\.\d{1,2}\s*[\u4e00-\u9fff]", t):
        if zh := _zh_numbering(t):
            return zh
    if not (t[0].isupper() or t[0].isdigit()):  # every pattern below starts with a capital or a digit (or a
        return ""  # keyword, matched ignoring case: a capital here, lower case was turned away above)
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


_NUMERIC_TOKEN = re.compile(r"^[\(\-–$€£%]*[\d,.]+[%)]*$")
_TERMINAL = re.compile(r"[.;:,]$")
_DIGIT = re.compile(r"\d")


def _numeric_heavy(text: str, numbering: str) -> bool:
    tokens = text.split()
    if numbering:
        tokens = tokens[1:] if numbering.startswith("dec") else tokens[2:]
    nums = sum(1 for t in tokens if _NUMERIC_TOKEN.match(t) and _DIGIT.search(t))  # not "..." or "(—)"
    return nums >= 2 and nums >= 0.3 * max(len(tokens), 1)


def _candidate(line: _Line, local_body: float) -> bool:
    """Short, with letters, larger than ``local_body``, bold, numbered or in capitals — and neither a row of
    figures nor cells of a table without numbering (the cheap tests first: most lines are body text)."""
    text = line.text
    if not (2 <= len(text) <= 160):
        return False
    letters = _letters(text)
    if letters < 2:
        return False
    numbering = numbering_of(text)
    if line.cells > 1 and not numbering:
        return False
    if not (line.size >= local_body + 0.5 or line.bold or numbering
            or (len(text) <= 80 and letters >= 4 and text.upper() == text)):
        return False
    return not _numeric_heavy(text, numbering)


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
