"""schemathesis over the server's own OpenAPI document (every check, examples + coverage + fuzzing +
stateful), against a live server on the real embedded Postgres: no 5xx, no conformance failure.

Short form here (``KB_SCHEMATHESIS_EXAMPLES``, default 10 per operation); the long form is
``KB_SCHEMATHESIS_EXAMPLES=200 pytest tests/test_schemathesis.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import ingest_and_wait, live_server

pytestmark = pytest.mark.live
CONFIG = Path(__file__).resolve().parent.parent / "schemathesis.toml"
EXAMPLES = os.environ.get("KB_SCHEMATHESIS_EXAMPLES", "10")


def _schemathesis() -> list[str]:
    exe = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    return [exe]


@pytest.mark.parametrize("tokens", [False, True], ids=["no-token", "tokens"])
def test_schemathesis_finds_nothing(tmp_path: Path, tokens: bool) -> None:
    (tmp_path / "memo.md").write_text("# Falcon memo\n\nThe Falcon project revenue was 12 million dollars in 2023.\n")
    env = {"KB_API_TOKEN": "read-token", "KB_ADMIN_TOKEN": "admin-token"} if tokens else {}
    headers = {"Authorization": "Bearer admin-token"} if tokens else {}
    with live_server(tmp_path, **env) as srv:
        assert ingest_and_wait(srv, "memo.md", headers)["status"] == "done"
        cmd = [*_schemathesis(), "--config-file", str(CONFIG), "run", f"{srv.base}/schema/openapi.json",
               "--max-examples", EXAMPLES, "--phases", "examples,coverage,fuzzing,stateful", "--workers", "1",
               "--seed", "20261125", "--no-color"]
        if tokens:
            cmd += ["--header", "Authorization: Bearer admin-token"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
        report = out.stdout + out.stderr
        assert out.returncode == 0, report[-6000:]
        assert " passed" in report and "failures" not in report.split("SUMMARY")[-1].lower(), report[-3000:]
        summary = report.split("SUMMARY")[-1]
        print(f"schemathesis ({'tokens' if tokens else 'no token'}, {EXAMPLES} examples):",
              " ".join(ln.strip() for ln in summary.splitlines() if ln.strip())[:600])
