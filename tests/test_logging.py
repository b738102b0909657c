"""No secret reaches the log: tracebacks without locals, bearer tokens and secret settings redacted."""

from __future__ import annotations

import pytest
import structlog

from kb.app import create_app
from kb.core.logging import configure_logging
from kb.runtime import Runtime
from tests.conftest import SetEnv
from tests.http import app_client


@pytest.fixture
def console_logs(capsys: pytest.CaptureFixture[str]):
    configure_logging("console", "info")
    yield capsys
    configure_logging("console", "info")


async def test_unhandled_error_log_has_no_token_or_settings(runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
                                                            console_logs: pytest.CaptureFixture[str], set_env: SetEnv) -> None:
    runtime.settings = set_env(KB_API_TOKEN="reader-tok-7c1d", KB_ADMIN_TOKEN="admin-tok-9f2e")
    app = create_app(runtime=runtime, run_worker=False)

    async def boom(req, on_event=None):  # a crash deep in the pipeline, with secrets in its frames' locals
        settings, auth = runtime.settings, "Bearer reader-tok-7c1d"  # noqa: F841
        raise RuntimeError("pipeline exploded")

    async with app_client(app) as client:
        monkeypatch.setattr(app.state.runtime.pipeline, "run", boom)
        r = await client.post("/kb/query", json={"query": "x"}, headers={"Authorization": "Bearer reader-tok-7c1d"})
        assert r.status_code == 500 and "exploded" not in r.text
    err = console_logs.readouterr().err
    assert "api.unhandled" in err and "RuntimeError: pipeline exploded" in err  # the traceback is still there
    assert "reader-tok-7c1d" not in err and "admin-tok-9f2e" not in err
    assert "admin-tok-9f2e" not in repr(runtime.settings)  # nor in a settings repr


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_secret_fields_and_bearer_values_are_redacted(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(fmt, "info")
    try:
        log = structlog.get_logger("test")
        log.info("t.event", authorization="Bearer abc-secret-1", api_key="sk-secret-2",
                 detail="sent Authorization: Bearer abc-secret-3 to the server", headers={"x-api-key": "k-4"},
                 note="admin_token='adm-secret-5'")
        err = capsys.readouterr().err
    finally:
        configure_logging("console", "info")
    assert "t.event" in err
    for secret in ("abc-secret-1", "sk-secret-2", "abc-secret-3", "k-4", "adm-secret-5"):
        assert secret not in err, (secret, err)
    assert "***" in err
