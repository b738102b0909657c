"""The flat section list every mode produces (structure code, title, start page) and its structure codes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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



def neighbour_range(entries: list[FlatEntry], i: int, first: int, last: int) -> tuple[int, int]:
    """Pages between the verified neighbours of entry ``i`` (``first``/``last`` where there is none)."""
    lo = next((e.page for e in reversed(entries[:i]) if e.verified and e.page), first)
    hi = next((e.page for e in entries[i + 1 :] if e.verified and e.page), last)
    return lo or 1, max(lo or 1, hi or last)


# ============================================================================ structure codes


_RANKS = {"part": 0, "chapter": 1, "appendix": 1, "roman": 2, "item": 2, "section": 3, "note": 5, "alpha": 6,
          "zhsec": 2, "zhsub": 3}  # Chinese 一、 and （一）


def style_rank(numbering: str) -> int | None:
    """Intrinsic nesting rank of a numbering kind (smaller = closer to the top), None if unnumbered."""
    if not numbering:
        return None
    kind, _, value = numbering.partition(":")
    if kind == "dec":
        return 3 + value.count(".")
    return _RANKS.get(kind)


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
class Styled:
    """An item to nest: intrinsic rank (numbered) or None, indentation x, visual weight."""

    rank: int | None
    x: float
    weight: tuple[float, int, int]  # (font size, bold, caps)
    key: str


def nest_levels(items: Sequence[Styled], *, use_indent: bool) -> list[int]:
    """Levels by a style stack: numbered ranks, then indentation, then visual weight, then first use."""
    stack: list[Styled] = []
    seen_level: dict[str, int] = {}
    levels: list[int] = []

    def shallower(top: Styled, cur: Styled) -> bool:
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
