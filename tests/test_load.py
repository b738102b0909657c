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

from kb.bench.load import file_questions, profile_table, report, run_load, sample_questions, stage_profile
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
        stages = asyncio.run(stage_profile(srv.base, questions[:3], rounds=1))
        assert len(stages["total"]) == 3 and {"route", "facts", "synthesize"} <= set(stages), stages
        assert all(ms >= 0 for v in stages.values() for ms in v)
        print("\n".join(profile_table(stages)))
        result = asyncio.run(run_load(srv.base, clients=10, duration_s=5, questions=questions))
        print(report(result, url=srv.base, workers="kb serve --workers 2", command="tests/test_load.py"))
        assert result.requests > 10 and result.errors == 0, dict(result.statuses)
        assert httpx.get(f"{srv.base}/health", timeout=10).status_code == 200
    # Ctrl-C of the supervising process: the workers exit and the embedded Postgres it started stops too
    assert embedded_status(tmp_path / "data")["running"] is False


def test_load_questions_file_jsonl_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "q.jsonl"
    good.write_text('{"query": "What was revenue?", "strategy": "semantic"}\n\n{"question": "Who audits it?", '
                    '"strategy": "nonsense"}\n', encoding="utf-8")
    assert file_questions(good) == [("What was revenue?", "semantic"), ("Who audits it?", "auto")]
    shipped = file_questions(Path(__file__).resolve().parent.parent / "bench" / "load" / "filings.jsonl")
    assert len(shipped) >= 20
    for text, message in (("not json\n", "invalid JSON"), ('{"strategy": "auto"}\n', 'has no "query"'),
                          ("[1, 2]\n", "expected a JSON object"),
                          ("\n", "holds no questions")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(SystemExit, match=message):
            file_questions(bad)
