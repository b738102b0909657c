"""API skeleton over real HTTP (litestar test client) and the real embedded Postgres."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kb.app import create_app
from kb.core.settings import get_settings
from kb.runtime import Runtime
from tests.conftest import SetEnv, finish_job, ingest
from tests.http import app_client


def _client(rt: Runtime, *, bound_host: str = "127.0.0.1", peer: str = "127.0.0.1",
            base_url: str = "http://127.0.0.1:8000"):
    return app_client(create_app(runtime=rt, bound_host=bound_host, run_worker=False), peer=peer, base_url=base_url)


async def test_health_and_request_id(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        r = await client.get("/health")
        assert r.status_code == 200
        body = r.json()
        assert body["database"] is True and body["schema_version"] >= 1
        assert body["embedder"]["loaded"] and body["embedder"]["dimension"] == 384
        assert len(r.headers["x-request-id"]) >= 8
        r2 = await client.get("/health", headers={"X-Request-ID": "abc123"})
        assert r2.headers["x-request-id"] == "abc123"
        # an id that would put escape sequences on an operator's console (or is not an id) is replaced
        for hostile in ("evil\x1b[2J\x1b[31m", "a b", "x" * 65, "é"):
            r3 = await client.get("/health", headers={"X-Request-ID": hostile.encode("latin-1")})
            rid = r3.headers["x-request-id"]
            assert r3.status_code == 200 and rid != hostile and re.fullmatch(r"[0-9a-f]{16}", rid), rid


async def test_collections_crud_and_errors(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        r = await client.get("/kb/collections")
        assert [c["name"] for c in r.json()] == ["default"]
        r = await client.post("/kb/collections", json={"name": "reports-2024", "description": "x"})
        assert r.status_code == 201 and r.json()["name"] == "reports-2024"
        r = await client.post("/kb/collections", json={"name": "reports-2024"})
        assert r.status_code == 409 and r.headers["content-type"].startswith("application/problem+json")
        r = await client.post("/kb/collections", json={"name": "bad name!"})
        assert r.status_code == 400
        r = await client.get("/kb/documents", params={"collection": "nope"})
        assert r.status_code == 404
        body = r.json()
        assert body["status"] == 404 and "nope" in body["detail"] and body["title"]
        r = await client.get("/kb/documents", params={"collection": "reports-2024"})
        assert r.status_code == 200 and r.json() == []
        r = await client.get("/kb/documents/999999")
        assert r.status_code == 404
        r = await client.delete("/kb/documents/999999")
        assert r.status_code == 404


async def test_malformed_json_is_400_without_stack_trace(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        r = await client.post("/kb/collections", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400
        assert "Traceback" not in r.text and r.json()["status"] == 400
        r = await client.post("/kb/query", content=b"[1,2", headers={"Content-Type": "application/json"})
        assert r.status_code == 400


async def test_openapi_schema(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        r = await client.get("/schema/openapi.json")
        assert r.status_code == 200
        paths = r.json()["paths"]
        for p in ("/health", "/kb/query", "/kb/collections", "/kb/admin/ingest", "/kb/admin/jobs/{job_id}"):
            assert p in paths
        query = r.json()["components"]["schemas"]["QueryRequest"]["properties"]
        assert "in total" in query["top_k"]["description"]  # top_k's meaning is in the contract
        assert "scope" in query["top_docs"]["description"] and "default" not in query["top_docs"]
        schema = r.json()
        bearer = schema["components"]["securitySchemes"]["bearer"]
        assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
        # the document states the auth this server asks for: no token configured, none required
        assert "security" not in schema["paths"]["/kb/admin/ingest"]["post"]
        ok = schema["paths"]["/kb/query"]["post"]["responses"]["200"]["content"]
        assert set(ok) == {"application/json", "text/event-stream"}
        assert ok["application/json"]["schema"] == {"$ref": "#/components/schemas/QueryResult"}
        assert {"401", "403", "415"} <= set(schema["paths"]["/kb/admin/ingest"]["post"]["responses"])
        assert {"401", "409"} <= set(schema["paths"]["/kb/collections"]["post"]["responses"])
        for path, ops in schema["paths"].items():  # every documented error is problem details
            for op in ops.values():
                for code, resp in op["responses"].items():
                    if int(code) >= 400:
                        assert list(resp["content"]) == ["application/problem+json"], (path, code)


async def test_openapi_security_follows_the_tokens(runtime: Runtime, set_env: SetEnv) -> None:
    runtime.settings = set_env(KB_ADMIN_TOKEN="admin-t")
    async with _client(runtime) as client:
        schema = (await client.get("/schema/openapi.json")).json()
        assert schema["paths"]["/kb/admin/ingest"]["post"]["security"] == [{"bearer": []}]
        assert "security" not in schema["paths"]["/kb/collections"]["get"]  # reads stay open without KB_API_TOKEN


@pytest.mark.parametrize(
    ("header", "status"),
    [(None, 401), ("Bearer wrong", 401), ("Basic abc", 401), ("Bearer s3cret-token", 201)],
)
async def test_admin_token(runtime: Runtime, set_env: SetEnv, header: str | None, status: int) -> None:
    runtime.settings = set_env(KB_ADMIN_TOKEN="s3cret-token")
    headers = {"Authorization": header} if header else {}
    async with _client(runtime) as client:
        r = await client.post("/kb/collections", json={"name": "guarded"}, headers=headers)
        assert r.status_code == status, r.text
        # reads stay open without KB_API_TOKEN
        assert (await client.get("/kb/collections")).status_code == 200


async def test_no_admin_token_off_loopback_is_403(runtime: Runtime) -> None:
    """The decision follows the request's peer address, not the configured bind address."""
    for bound in ("127.0.0.1", "0.0.0.0"):
        async with _client(runtime, bound_host=bound, peer="203.0.113.7") as client:
            r = await client.post("/kb/collections", json={"name": "x1"})
            assert r.status_code == 403 and "KB_ADMIN_TOKEN" in r.json()["detail"]
            assert (await client.post("/kb/admin/ingest", json={"path": "."})).status_code == 403
            assert (await client.get("/kb/admin/jobs")).status_code == 403
            assert (await client.get("/kb/collections")).status_code == 200  # reads stay open
    async with _client(runtime, bound_host="0.0.0.0", peer="127.0.0.1") as client:
        assert (await client.post("/kb/collections", json={"name": "x1"})).status_code == 201
    async with _client(runtime, peer="::1", base_url="http://[::1]:8000") as client:
        assert (await client.get("/kb/admin/jobs")).status_code == 200


async def test_read_token_never_grants_admin(runtime: Runtime, set_env: SetEnv) -> None:
    """KB_API_TOKEN without KB_ADMIN_TOKEN: admin is disabled, even on loopback and with the read token."""
    runtime.settings = set_env(KB_API_TOKEN="reader")
    reader = {"Authorization": "Bearer reader"}
    async with _client(runtime) as client:
        for headers in ({}, reader):
            assert (await client.get("/kb/admin/jobs", headers=headers)).status_code == 403
            r = await client.post("/kb/admin/ingest", json={"path": "."}, headers=headers)
            assert r.status_code == 403 and "KB_ADMIN_TOKEN" in r.json()["detail"]
        assert (await client.post("/kb/collections", json={"name": "x2"}, headers=reader)).status_code == 403
        assert (await client.delete("/kb/documents/1", headers=reader)).status_code == 403
        assert (await client.get("/kb/collections", headers=reader)).status_code == 200


async def test_tokenless_admin_refuses_browser_requests(runtime: Runtime) -> None:
    """No token configured: a web page (CSRF) or a rebound DNS name cannot drive the admin API."""
    body = b'{"name": "csrf1"}'
    async with _client(runtime) as client:
        for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {"Content-Type": ctype} if ctype else {}
            r = await client.post("/kb/collections", content=body, headers=headers)
            assert r.status_code == 415, (ctype, r.text)
        r = await client.post("/kb/collections", json={"name": "csrf2"}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403 and "Origin" in r.json()["detail"]
        r = await client.post("/kb/collections", json={"name": "csrf3"}, headers={"Origin": "null"})
        assert r.status_code == 403
        files = {"file": ("a.md", b"# A\n\ntext")}
        r = await client.post("/kb/admin/documents", files=files, headers={"Origin": "http://localhost:8000"})
        assert r.status_code == 403
        r = await client.post("/kb/collections", json={"name": "prox"}, headers={"X-Forwarded-For": "198.51.100.2"})
        assert r.status_code == 403
        r = await client.post("/kb/collections", json={"name": "same"}, headers={"Origin": "http://127.0.0.1:8000"})
        assert r.status_code == 201, r.text
    async with _client(runtime, base_url="http://rebind.evil.example:8000") as client:  # DNS rebinding
        r = await client.post("/kb/collections", json={"name": "rebind"})
        assert r.status_code == 421 and "Host" in r.json()["detail"]  # every route checks Host
        assert (await client.get("/kb/admin/jobs")).status_code == 421
    async with _client(runtime, base_url="http://localhost:8000") as client:
        assert (await client.post("/kb/collections", json={"name": "local"})).status_code == 201


async def test_api_token_protects_reads(runtime: Runtime, set_env: SetEnv) -> None:
    runtime.settings = set_env(KB_API_TOKEN="reader", KB_ADMIN_TOKEN="admin")
    async with _client(runtime) as client:
        assert (await client.get("/kb/collections")).status_code == 401
        assert (await client.get("/kb/collections", headers={"Authorization": "Bearer reader"})).status_code == 200
        assert (await client.get("/kb/collections", headers={"Authorization": "Bearer admin"})).status_code == 200
        r = await client.post("/kb/query", json={"query": "x"}, headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401
        assert (await client.get("/health")).status_code == 200
        assert (await client.get("/metrics")).status_code == 401  # metrics are protected like reads
        assert (await client.get("/metrics", headers={"Authorization": "Bearer reader"})).status_code == 200


async def test_ingest_path_must_stay_inside_root(runtime: Runtime, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "a.md").write_text("# A\ntext")
    link = tmp_path / "escape"
    link.symlink_to(outside)
    async with _client(runtime) as client:
        for path in ("../" + outside.name, str(outside), "escape"):
            r = await client.post("/kb/admin/ingest", json={"path": path})
            assert r.status_code == 400, (path, r.text)
            assert "outside the ingest root" in r.json()["detail"]
        r = await client.post("/kb/admin/ingest", json={"path": "missing-dir"})
        assert r.status_code == 404
        r = await client.post("/kb/admin/ingest", json={"path": "a\u0000b"})
        assert r.status_code == 400
        r = await client.post("/kb/admin/ingest", json={"path": ".", "collection": "nope"})
        assert r.status_code == 404


async def test_json_logs_carry_request_id_and_duration(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kb.core.logging import configure_logging

    configure_logging("json", "info")
    try:
        async with _client(runtime) as client:
            r = await client.get("/kb/collections", headers={"X-Request-ID": "req-42"})
            assert r.status_code == 200
        lines = [json.loads(ln) for ln in capsys.readouterr().err.splitlines() if ln.startswith("{")]
        http = [ln for ln in lines if ln.get("event") == "http.request" and ln.get("path") == "/kb/collections"]
        assert http and http[0]["request_id"] == "req-42" and http[0]["duration_ms"] >= 0
        assert http[0]["status"] == 200 and http[0]["level"] == "info"
    finally:
        configure_logging("console", "info")


async def test_symlink_inside_ingest_folder_is_refused(runtime: Runtime, tmp_path: Path) -> None:
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.mkdir()
    (secret / "s.md").write_text("# Secret\n\nThe vault code is 1234.")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# Fine\n\nA public memo about the Falcon project.")
    (docs / "link.md").symlink_to(secret / "s.md")
    (docs / "meta.jsonl").write_text("{not json")
    async with _client(runtime) as client:
        r = await client.post("/kb/admin/ingest", json={"path": "docs", "metadata": "docs/meta.jsonl"})
        assert r.status_code == 400 and "metadata" in r.json()["detail"]
        r = await client.post("/kb/admin/ingest", json={"path": "docs"})
        assert r.status_code == 202
        job_id = r.json()["job_id"]
    job = await finish_job(runtime, job_id)
    states = {i.name: (i.status, i.error) for i in job.items}
    assert states["docs/link.md"][0] == "unsupported" and "outside the ingest root" in states["docs/link.md"][1]
    assert states["docs/ok.md"][0] == "ok"
    texts = " ".join(r["text"] for r in await runtime.pool.fetch("SELECT text FROM chunks"))
    assert "vault" not in texts


async def test_hostile_values_are_400_not_500(runtime: Runtime) -> None:
    async with _client(runtime) as client:
        for path in ("/kb/documents/99999999999999999999", "/kb/admin/jobs/99999999999999999999"):
            r = await client.get(path)
            assert r.status_code in {400, 404}, (path, r.status_code)
        r = await client.get("/kb/documents", params={"offset": str(10**12)})
        assert r.status_code == 400
        r = await client.post("/kb/collections", json={"name": "nul", "description": "a\u0000b"})
        assert r.status_code == 400
        for body in ({"query": "a\u0000b"}, {"query": "x", "filters": {"company": "a\u0000"}},
                     {"query": "x", "history": [{"role": "user", "content": "\u0000"}]}):
            r = await client.post("/kb/query", json=body)
            assert r.status_code == 400, (body, r.text)
        r = await client.post("/kb/query", json={"query": "x", "filters": {"fiscal_year": {"gte": "abc"}}})
        assert r.status_code == 400


async def test_api_output_hides_server_paths(runtime: Runtime, tmp_path: Path) -> None:
    """Paths are shown relative to KB_INGEST_ROOT (or uploads/); no absolute server path in output or errors."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "memo.md").write_text("# Memo\n\nA public memo about the Falcon project.")
    secret_root = str(tmp_path)
    async with _client(runtime) as client:
        r = await client.post("/kb/admin/ingest", json={"path": "docs"})
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        r = await client.post("/kb/admin/documents", files={"file": ("up.md", b"# Up\n\nAn uploaded memo text.")})
        assert r.status_code == 202, r.text
        up_id = r.json()["job_id"]
        await finish_job(runtime, job_id)
        await finish_job(runtime, up_id)
        job = (await client.get(f"/kb/admin/jobs/{job_id}")).json()
        assert job["root_path"] == "docs" and job["items"][0]["path"] == "docs/memo.md"
        up = (await client.get(f"/kb/admin/jobs/{up_id}")).json()
        assert up["items"][0]["path"].startswith("uploads/default/") and up["items"][0]["status"] == "ok"
        listing = await client.get("/kb/documents")
        assert {d["source_path"] for d in listing.json()} == {"docs/memo.md", up["items"][0]["path"]}
        detail = await client.get(f"/kb/documents/{listing.json()[0]['id']}")
        bad = [await client.post("/kb/admin/ingest", json={"path": p})
               for p in ("../elsewhere", "/etc")]
        bad.append(await client.post("/kb/admin/ingest", json={"path": "docs", "metadata": "docs"}))
        assert [b.status_code for b in bad] == [400, 400, 400], [b.text for b in bad]
        for resp in (listing, detail, await client.get("/kb/admin/jobs"), *bad):
            assert secret_root not in resp.text, resp.text


async def test_schema_needs_the_read_token_when_set(runtime: Runtime, set_env: SetEnv) -> None:
    runtime.settings = set_env(KB_API_TOKEN="reader")
    async with _client(runtime) as client:
        for path in ("/schema/openapi.json", "/schema/swagger"):
            assert (await client.get(path)).status_code == 401, path
        r = await client.get("/schema/openapi.json", headers={"Authorization": "Bearer reader"})
        assert r.status_code == 200 and "/kb/query" in r.json()["paths"]


async def test_http_protocol_details(runtime: Runtime, set_env: SetEnv) -> None:
    """401 names its scheme, 405 lists the allowed methods, JSON bodies are typed strictly."""
    async with _client(runtime) as client:
        r = await client.put("/kb/collections", json={"name": "x"})
        assert r.status_code == 405 and set(r.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}
        for path, body in (("/kb/admin/ingest", {"path": ".", "recursive": 0}),
                           ("/kb/admin/ingest", {"path": 1}),
                           ("/kb/collections", {"name": "n", "description": 5}),
                           ("/kb/query", {"query": "x", "include_trace": "yes"})):
            r = await client.post(path, json=body)
            assert r.status_code == 400 and "Expected" in r.json()["detail"], (path, body, r.text)
        assert (await client.post("/kb/collections", json={"name": "typed"})).status_code == 201
    runtime.settings = set_env(KB_ADMIN_TOKEN="adm")
    async with _client(runtime) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = await client.get("/kb/admin/jobs", headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")


def test_scrub_paths_keeps_sibling_folders_and_root_slash(kb_env: dict[str, str], tmp_path: Path) -> None:
    from kb.api.common import public_path, scrub_paths

    s = get_settings()
    text = f"cannot read {tmp_path}/docs/a.md; {tmp_path}-other/b.md untouched; root {tmp_path} end"
    assert scrub_paths(text, s) == f"cannot read docs/a.md; {tmp_path}-other/b.md untouched; root . end"
    assert scrub_paths(f"{tmp_path}/data/uploads/default/x.md", s) == "uploads/default/x.md"
    assert public_path(f"{tmp_path}/data/uploads/default/x.md", s) == "uploads/default/x.md"
    assert public_path("/etc/passwd", s) == "passwd" and public_path(str(tmp_path), s) == "."


async def test_a_query_request_is_validated_once(runtime: Runtime, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline admits a request once (bounds, collection, words, filters), whether answered, streamed or
    asked from Python; the stages and the stream reuse what was admitted."""
    import router.state
    from kb.runtime import build_pipeline
    from router.types import QueryRequest

    (tmp_path / "memo.md").write_text("# Memo\n\nThe Falcon project ships in May.\n")
    assert (await ingest(runtime, tmp_path / "memo.md")).counts == {"ok": 1}
    calls: list[str] = []
    real = router.state.checked
    monkeypatch.setattr(router.state, "checked", lambda req: calls.append(req.query) or real(req))
    async with _client(runtime) as client:
        assert (await client.post("/kb/query", json={"query": "When does Falcon ship?"})).status_code == 200
        r = await client.post("/kb/query", json={"query": "When does Falcon ship?", "stream": True})
        assert r.status_code == 200 and "event: done" in r.text
        r = await client.post("/kb/query", json={"query": "Falcon?", "collection": "nope", "stream": True})
        assert r.status_code == 404  # refused before the stream starts
    await build_pipeline(runtime).run(QueryRequest(query="When does Falcon ship?"))
    assert calls == ["When does Falcon ship?", "When does Falcon ship?", "Falcon?", "When does Falcon ship?"]
