"""Markdown tables of the ``kb bench`` reports (one way to write them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_RULE = {"l": "---", "r": "---:", "c": ":---:"}


def cell(v: Any) -> str:
    """A value as a table shows it: ``–`` for none, floats to 3 decimals (1 from 10 up), the rest as str."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def _row(cells: Sequence[str]) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> list[str]:
    """A markdown table, one line per item; values go through ``cell``.

    ``align`` holds one of ``l``/``r``/``c`` per column; without it, columns holding only numbers
    (or blanks) are right-aligned, except the first.
    """
    if align is None:
        numeric = [i > 0 and all(r[i] is None or isinstance(r[i], int | float) for r in rows)
                   for i in range(len(header))]
        align = "".join("r" if n else "l" for n in numeric)
    if len(align) != len(header):
        raise ValueError(f"align {align!r} does not match {len(header)} columns")
    return [_row(header), "|" + "|".join(_RULE[a] for a in align) + "|", *(_row([cell(c) for c in r]) for r in rows)]
