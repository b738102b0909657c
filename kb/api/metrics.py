"""GET /metrics in Prometheus text format (prometheus-client): requests by route/status/duration (litestar's
Prometheus middleware), query stage timings, LLM calls/tokens/errors (``kb.core.telemetry``), ingest pages/s and queue depth.

Protected like the read endpoints. Ingest figures are read from Postgres at scrape time, so every API
replica reports the shared queue.
"""

from __future__ import annotations

import asyncio

import structlog
from litestar import Controller, get
from litestar.plugins.prometheus import PrometheusConfig
from litestar.response import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

from kb.api.common import read_guard
from kb.runtime import Runtime

log = structlog.get_logger("kb.api")
DB_WAIT_S = 2.0

SQL_INGEST_FIGURES = """
SELECT (SELECT count(*) FROM ingest_job_items WHERE status IN ('pending', 'running')) AS queue,
       coalesce(sum(pages), 0) AS pages, coalesce(sum(seconds), 0) AS seconds, coalesce(sum(llm_calls), 0) AS calls
FROM ingest_job_items WHERE status IN ('ok', 'replaced') AND finished_at > now() - interval '1 hour'"""

PROMETHEUS = PrometheusConfig(app_name="kb", prefix="kb", group_path=True, exclude=["/metrics"])
INGEST_QUEUE = Gauge("kb_ingest_queue_depth", "Ingest job items pending or running.")
INGEST_RATE = Gauge("kb_ingest_pages_per_second", "Pages per second of the files ingested in the last hour.")
DATABASE_UP = Gauge("kb_database_up", "1 when the last scrape read the ingest figures from the database.")
INGEST_LLM = Gauge("kb_ingest_llm_calls_per_100_pages", "LLM calls per 100 pages ingested in the last hour.")


class MetricsController(Controller):
    """``GET /metrics``: refreshes the ingest gauges from Postgres, then renders every metric."""

    path = "/metrics"
    guards = [read_guard]
    include_in_schema = False

    @get("/")
    async def metrics(self, rt: Runtime) -> Response[bytes]:
        """Every metric; the ingest figures only when the database answers within ``DB_WAIT_S``
        (``kb_database_up`` says whether it did), so a frozen database never holds a scrape."""
        row = None
        if rt.db_available:
            read = asyncio.ensure_future(rt.pool.fetchrow(SQL_INGEST_FIGURES))
            done, _ = await asyncio.wait({read}, timeout=DB_WAIT_S)
            if read in done and read.exception() is None:
                row = read.result()
            elif read in done:
                log.warning("metrics.db_failed", error=f"{type(read.exception()).__name__}"[:200])
            else:  # left to its own statement timeout, its outcome retrieved
                read.add_done_callback(lambda t: t.cancelled() or t.exception())
        DATABASE_UP.set(1 if row is not None else 0)
        if row is not None:
            INGEST_QUEUE.set(int(row["queue"]))
            INGEST_RATE.set(float(row["pages"]) / float(row["seconds"]) if row["seconds"] else 0.0)
            INGEST_LLM.set(100 * float(row["calls"]) / float(row["pages"]) if row["pages"] else 0.0)
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
