"""Configuration and frozen results of ``kb bench latency`` (shared by its loader, measuring loop and report)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LatencyConfig:
    docs: int
    chunks_per_doc: int
    queries: int
    collection: str
    json_out: Path | None
    reuse: bool
    drop: bool = False  # delete the collection after measuring
    warmup: int = 5
    seed: int = 7


@dataclass(frozen=True)
class Stat:
    """Milliseconds over the measured queries."""

    n: int
    median: float
    p95: float
    mean: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        if not values:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        arr = np.asarray(values, dtype=float)
        return cls(len(values), round(float(np.median(arr)), 2), round(float(np.percentile(arr, 95)), 2),
                   round(float(arr.mean()), 2), round(float(arr.min()), 2), round(float(arr.max()), 2))


@dataclass(frozen=True)
class StrategyLatency:
    strategy: str
    total: Stat
    stages: dict[str, Stat]
    docs_routed: float  # mean documents routed per query
    chunks_returned: float  # mean chunks in the outcome
    company_hit_rate: float | None  # questions naming a company: share whose routed docs include it


@dataclass(frozen=True)
class FactsLatency:
    """The corpus-wide facts question, answered whole (retrieval and offline synthesis)."""

    total: Stat
    stages: dict[str, Stat]  # route, facts, tree_search, retrieve, synthesize
    answered_from_facts: float  # share of the questions whose answer was computed from facts
    docs_routed: float  # mean documents routed (tree search and retrieval)
    facts_docs: float  # mean documents whose facts an answer used
    facts_docs_min: int
    facts_used: float  # mean fact rows an answer used (cited)
    questions: tuple[str, ...]


@dataclass(frozen=True)
class LoadReport:
    generated: bool
    seconds_generate_and_write: float = 0.0
    seconds_clear: float = 0.0
    seconds_index_build: dict[str, float] = field(default_factory=dict)
    seconds_vacuum_analyze: float = 0.0
    indexes_dropped_for_load: bool = False
    resumed_docs: int = 0  # documents an interrupted run had written (kept)


@dataclass(frozen=True)
class CollectionSize:
    docs: int
    nodes: int
    chunks: int
    relations: dict[str, dict[str, Any]]  # name -> {kind, bytes, total_bytes}
    facts: int = 0


@dataclass(frozen=True)
class LatencyReport:
    date: str
    config: dict[str, Any]
    machine: dict[str, Any]
    postgres: dict[str, Any]
    retrieval_settings: dict[str, Any]
    collection: CollectionSize
    load: LoadReport
    strategies: list[StrategyLatency]
    reference: Stat
    reference_plan: str
    goal_ms: float
    goal_met: dict[str, bool]
    wall_seconds: float
    facts_question: FactsLatency | None = None
    facts_goal_ms: float = 500.0
    targets: dict[str, bool] = field(default_factory=dict)  # issue 26: p50/p95 targets → met
    memory: dict[str, Any] = field(default_factory=dict)  # RAM: machine, Postgres processes, this process

