"""Prometheus metrics of the query path, observed for every answered query (API, streaming, MCP, traced or
not): stage timings and LLM usage. ``GET /metrics`` (``kb.api.metrics``) renders them. ``Clock`` times the
stages of a query or of a file's ingest."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import Counter, Histogram

from kb.core.types import LLMUsage

QUERY_STAGE = Histogram("kb_query_stage_seconds", "Query pipeline time per stage (LLM time included when used).",
                        ["stage"], buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
LLM_CALLS = Counter("kb_llm_calls", "LLM calls made by queries.", ["outcome"])
LLM_TOKENS = Counter("kb_llm_tokens", "LLM tokens used by queries.", ["direction"])


def observe_query(timings_ms: Mapping[str, float], usage: LLMUsage) -> None:
    """Record one answered query's stage timings and LLM usage."""
    for stage, ms in timings_ms.items():
        QUERY_STAGE.labels(stage=stage).observe(float(ms) / 1000)
    LLM_CALLS.labels(outcome="ok").inc(max(0, usage.calls - usage.failed))
    LLM_CALLS.labels(outcome="failed").inc(usage.failed)
    LLM_TOKENS.labels(direction="prompt").inc(usage.prompt_tokens)
    LLM_TOKENS.labels(direction="completion").inc(usage.completion_tokens)


@dataclass
class Clock:
    """Milliseconds per stage of one query or one file's ingest (``stage`` times a block, adding up when a stage
    comes back; ``total`` since the clock started)."""

    started: float = field(default_factory=time.perf_counter)
    ms: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t) * 1000

    def total(self) -> None:
        self.ms["total"] = (time.perf_counter() - self.started) * 1000
