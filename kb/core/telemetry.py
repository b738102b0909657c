"""Prometheus metrics of the query path, observed for every answered query (API, streaming, MCP, traced or
not): stage timings and LLM usage. ``GET /metrics`` (``kb.api.metrics``) renders them."""

from __future__ import annotations

from collections.abc import Mapping

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
