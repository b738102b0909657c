"""The load script in short form: concurrent clients against ``kb serve --workers 2`` on the sample
reports; every request answered (figures printed, not asserted: speed is measured by
``kb bench load``, see bench/results/load.md)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
import psutil
import pytest

from kb.bench.load import report, run_load, sample_questions
from kb.core.db import embedded_status
from tests.live import ingest_and_wait, live_server

pytestmark = pytest.mark.live
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_load_short_form_with_two_worker_processes(tmp_path: Path) -> None:
    shutil.copytree(SAMPLES / "reports", tmp_path / "reports")
    with live_server(tmp_path, workers=2) as srv:
        workers = [p for p in psutil.Process(srv.pid).children(recursive=True) if "python" in p.name().lower()]
        assert len([p for p in workers if "multiprocessing" in " ".join(p.cmdline())]) >= 2, \
            [p.cmdline() for p in workers]
        assert ingest_and_wait(srv, "reports")["counts"] == {"ok": 6}
        questions = sample_questions()
        assert len(questions) >= 10 and {s for _, s in questions} >= {"metadata", "semantic", "description"}
        result = asyncio.run(run_load(srv.base, clients=10, duration_s=5, questions=questions))
        print(report(result, url=srv.base, workers="kb serve --workers 2", command="tests/test_load.py"))
        assert result.requests > 10 and result.errors == 0, dict(result.statuses)
        assert httpx.get(f"{srv.base}/health", timeout=10).status_code == 200
    # Ctrl-C of the supervising process: the workers exit and the embedded Postgres it started stops too
    assert embedded_status(tmp_path / "data")["running"] is False
