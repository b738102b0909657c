"""What ``kb bench`` runs: the routing strategies of ``router.types`` and the flat baselines as ``flat-<mode>``."""

from __future__ import annotations

from kb.core.errors import ValidationError
from router.types import FLAT_MODES, STRATEGIES

ROUTED: tuple[str, ...] = STRATEGIES
"""Strategies that go through ``QueryPipeline.retrieve`` (routing, tree search, in-node retrieval)."""
FLAT_PREFIX = "flat-"
FLAT: dict[str, str] = {FLAT_PREFIX + mode: mode for mode in FLAT_MODES}
"""Flat baselines: benchmark name → ``router.flat.FlatRetriever`` mode."""
BENCH_STRATEGIES: tuple[str, ...] = (*ROUTED, *FLAT)
"""Everything ``kb bench`` can run, in report order (the default of ``--strategies``)."""


def parse_strategies(raw: str) -> tuple[str, ...]:
    """``--strategies`` (comma-separated, duplicates dropped); unknown names are a ``ValidationError``."""
    items = tuple(dict.fromkeys(s.strip() for s in raw.split(",") if s.strip()))
    unknown = [s for s in items if s not in ROUTED and s not in FLAT]
    if unknown or not items:
        raise ValidationError(f"unknown strategies {unknown}; use any of {', '.join(BENCH_STRATEGIES)}")
    return items
