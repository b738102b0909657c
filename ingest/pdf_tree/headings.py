"""No printed TOC: the section list from the body's own headings (numbering, font size, bold), offline."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ingest.pdf_read import HeadingCandidate, ParsedPdf
from ingest.pdf_tree.entries import FlatEntry, Styled, codes_from_levels, nest_levels, style_rank
from ingest.pdf_tree.matching import compact


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


def _rank_or(numbering: str, default: int) -> int:
    rank = style_rank(numbering)
    return default if rank is None else rank


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


def _look(h: HeadingCandidate) -> tuple[float, bool]:
    """Font size to the half point, and weight: how alike two headings are set."""
    return (round(h.size * 2) / 2, h.bold)


RESTARTING = frozenset({"alpha", "zhsec", "zhsub"})
"""Numbering kinds that start again under each parent ("I. Background / A. Scope / B. … / II. … / A. …")."""


def _segments(hs: list[HeadingCandidate], raw: list[HeadingCandidate], body: float) -> dict[HeadingCandidate, int]:
    """For a restarting numbering: how many visual headings of a higher numbered rank come before each one."""
    rank = style_rank(hs[0].numbering) if hs else None
    if rank is None:
        return dict.fromkeys(hs, 0)
    parents = sorted(
        (h.page, h.line)
        for h in raw
        if (r := style_rank(h.numbering)) is not None and r < rank and (h.bold or h.size >= body + 0.5)
    )
    return {h: bisect.bisect_left(parents, (h.page, h.line)) for h in hs}


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
            key = f"plain:{_look(h)[0]}:{int(h.bold)}:{int(h.caps)}"
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
            segment = _segments(hs, raw, body) if key in RESTARTING else dict.fromkeys(hs, 0)
            seen: set[tuple[int, str]] = set()
            uniq = []
            for h in hs:
                if (segment[h], h.numbering) in seen:
                    continue
                seen.add((segment[h], h.numbering))
                uniq.append(h)
            cands = [_Cand(h, key, float(_rank_or(h.numbering, 9)), h.text) for h in uniq]
            cands = _lis(cands, lambda c, seg=segment: (seg[c.h], *_num_key(c.h.numbering)))
        if cands:
            styles.append((cands[0].rank, cands))
    styles.sort(key=lambda s: (s[0], -len(s[1])))
    return [c for _, c in styles]


BACK_MATTER = re.compile(
    r"^(?:abstract|references|bibliography|acknowledge?ments?|appendix|appendices|conclusions?|summary|glossary"
    r"|index)$",
    re.I,
)
"""Unnumbered headings a numbered document sets in the look of its numbered sections."""


def _same_look(every: list[list[_Cand]], chosen: list[list[_Cand]], body: float) -> list[_Cand]:
    """Unnumbered headings ("References", "Acknowledgements", a larger unnumbered chapter) set exactly like a
    chosen numbered style join it as siblings: the back-matter words above anywhere, other headings only when
    larger than the body and after the first numbered heading (not the title block)."""
    looks: dict[tuple[float, bool], _Cand] = {}
    for s in chosen:
        if not s[0].style.startswith("plain"):
            common = max({_look(c.h) for c in s}, key=lambda lk: sum(_look(c.h) == lk for c in s))
            looks.setdefault(common, s[0])
    taken = {id(s) for s in chosen}
    first = min(((c.h.page, c.h.line) for s in chosen if not s[0].style.startswith("plain") for c in s),
                default=(0, 0))
    out = []
    for s in every:
        if id(s) in taken or not s[0].style.startswith("plain"):
            continue
        for c in s:
            ref = looks.get(_look(c.h))
            if ref is None:
                continue
            if BACK_MATTER.match(c.title.strip()) or (c.h.size >= body + 1.0 and (c.h.page, c.h.line) > first):
                out.append(_Cand(c.h, ref.style, ref.rank, c.title))
    return out


def _below(styles: list[list[_Cand]], numbered: list[list[_Cand]], body: float) -> list[list[_Cand]]:
    """Unnumbered bold or larger headings below numbered sections ("1.2 Credit" / "Household lending"): the
    most used such style, when it appears on three pages or more after the first numbered heading."""
    first = min((c.h.page, c.h.line) for s in numbered for c in s)
    below = [
        s
        for s in styles
        if s[0].style.startswith("plain") and s[0].rank >= 0 and (s[0].h.bold or s[0].h.size >= body + 0.5)
        and len({c.h.page for c in s if (c.h.page, c.h.line) > first}) >= 3
    ]
    return sorted(below, key=lambda s: -len(s))[:1]


def _has_parent(numbering: str, decimals: set[str]) -> bool:
    """A lone "2.3.1" heading is a section when "2.3" is a heading too (a single subsection is still one)."""
    parent = numbering.rpartition(".")[0]
    return numbering.startswith("dec:") and "." in numbering and parent in decimals


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
    every = heading_styles(parsed, lo, hi, after=after, skip_pages=skip_pages)
    styles = [
        s
        for s in every
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
        chosen += _below(styles, numbered, parsed.body_font_size)[: max_levels - len(chosen)]
    else:
        body = parsed.body_font_size
        big = [s for s in styles if s[0].style.startswith("plain") and s[0].h.size >= body + 0.5]
        chosen = (big or styles)[:max_levels]
    decimals = {c.h.numbering for s in chosen for c in s if c.h.numbering.startswith("dec:")}
    lone = [s for s in every if len(s) == 1 and s not in styles and _has_parent(s[0].h.numbering, decimals)]
    chosen += lone[: max(0, max_levels - len(chosen))]  # a single "2.3.1" under a chosen "2.3", when there is room
    cands = sorted([*(c for s in chosen for c in s), *_same_look(every, chosen, parsed.body_font_size)],
                   key=lambda c: (c.h.page, c.h.line))
    styled = [
        Styled(
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
