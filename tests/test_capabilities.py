"""``GET /kb/capabilities`` and the lists derived from it: formats from ``ingest.formats``, strategies from
``router.types``; the web UI and ``ingest.metadata`` hold no copy of them."""

from __future__ import annotations

import re
from pathlib import Path

from ingest.formats import FORMATS, SUPPORTED
from ingest.metadata import doc_key
from kb.api.capabilities import STRATEGY_LABELS
from kb.app import create_app
from kb.runtime import Runtime
from router.types import STRATEGIES
from tests.conftest import SetEnv
from tests.http import app_client

APP_JS = Path(__file__).resolve().parent.parent / "kb" / "ui" / "static" / "app.js"


def _client(rt: Runtime):
    return app_client(create_app(runtime=rt, bound_host="127.0.0.1", run_worker=False))


async def test_capabilities_come_from_the_registries(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        r = await client.get("/kb/capabilities")
        assert r.status_code == 200, r.text
        body = r.json()
        assert [(f["name"], tuple(f["suffixes"]), f["unit"]) for f in body["formats"]] == [
            (f.name, f.suffixes, f.unit) for f in FORMATS.values()]
        assert [s["name"] for s in body["strategies"]] == list(STRATEGIES)
        assert all(s["label"] and s["description"] for s in body["strategies"])
        assert body["default_strategy"] == "auto" and body["answer_mode"] == "offline"
        assert body["max_upload_mb"] == runtime.settings.ingest.max_upload_mb
        schema = (await client.get("/schema/openapi.json")).json()
        assert "/kb/capabilities" in schema["paths"] and "Capabilities" in schema["components"]["schemas"]


async def test_capabilities_are_a_read_endpoint(runtime: Runtime, set_env: SetEnv) -> None:
    runtime.settings = set_env(KB_API_TOKEN="reader")
    async with _client(runtime) as client:
        r = await client.get("/kb/capabilities")
        assert r.status_code == 401 and r.headers["content-type"].startswith("application/problem+json")
        r = await client.get("/kb/capabilities", headers={"Authorization": "Bearer reader"})
        assert r.status_code == 200 and r.json()["strategies"]


def test_every_strategy_has_a_label() -> None:
    assert set(STRATEGY_LABELS) == set(STRATEGIES)


def test_the_ui_reads_its_lists_from_the_server() -> None:
    js = APP_JS.read_text(encoding="utf-8")
    assert '"/kb/capabilities"' in js
    # no upload accept list and no strategy list of its own
    assert not re.search(r"accept:\s*[\"']", js)
    assert not any(f'"{suffix}"' in js or f"'{suffix}'" in js for suffix in SUPPORTED)
    literals = set(re.findall(r"[\"']([a-z]+)[\"']", js))
    assert not set(STRATEGIES) <= literals  # ("auto" and "metadata" are also a placeholder and a field name)
    assert not any(description in js for _, description in STRATEGY_LABELS.values())


def test_metadata_keys_drop_every_supported_suffix() -> None:
    for suffix in SUPPORTED:
        assert doc_key(f"reports/ACME 2023{suffix.upper()}") == "ACME 2023"
    assert doc_key("ACME 2023.csv") == "ACME 2023.csv"  # not a document format
