"""GET /metrics in Prometheus text format (prometheus-client): requests by route/status/duration (litestar's
Prometheus middleware), query stage timings, LLM calls/tokens/errors (``kb.telemetry``), ingest pages/s and queue depth.

Protected like the read endpoints. Ingest figures are read from Postgres at scrape time, so every API
replica reports the shared queue.
"""

from __future__ import annotations

from litestar import Controller, get
from litestar.plugins.prometheus import PrometheusConfig
from litestar.response import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

from kb.api.common import read_guard
from kb.runtime import Runtime

SQL_INGEST_FIGURES = """
SELECT (SELECT count(*) FROM ingest_job_items WHERE status IN ('pending', 'running')) AS queue,
       coalesce(sum(pages), 0) AS pages, coalesce(sum(seconds), 0) AS seconds, coalesce(sum(llm_calls), 0) AS calls
FROM ingest_job_items WHERE status IN ('ok', 'replaced') AND finished_at > now() - interval '1 hour'"""

PROMETHEUS = PrometheusConfig(app_name="kb", prefix="kb", group_path=True, exclude=["/metrics"])
INGEST_QUEUE = Gauge("kb_ingest_queue_depth", "Ingest job items pending or running.")
INGEST_RATE = Gauge("kb_ingest_pages_per_second", "Pages per second of the files ingested in the last hour.")
INGEST_LLM = Gauge("kb_ingest_llm_calls_per_100_pages", "LLM calls per 100 pages ingested in the last hour.")


class MetricsController(Controller):
    """``GET /metrics``: refreshes the ingest gauges from Postgres, then renders every metric."""

    path = "/metrics"
    guards = [read_guard]
    include_in_schema = False

    @get("/")
    async def metrics(self, rt: Runtime) -> Response[bytes]:
        row = await rt.pool.fetchrow(SQL_INGEST_FIGURES)
        INGEST_QUEUE.set(int(row["queue"]))
        INGEST_RATE.set(float(row["pages"]) / float(row["seconds"]) if row["seconds"] else 0.0)
        INGEST_LLM.set(100 * float(row["calls"]) / float(row["pages"]) if row["pages"] else 0.0)
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
