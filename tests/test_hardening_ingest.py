"""Ingest hardening (issue 25): names by path under the ingest root, cancel, sidecar bounds, uploads, jobs
paging, hard links and batched deletes, against the real embedded Postgres over real HTTP."""

from __future__ import annotations

import os
from pathlib import Path

from kb.app import create_app
from kb.runtime import Runtime
from tests.conftest import finish_job
from tests.http import app_client


def _client(rt: Runtime):
    return app_client(create_app(runtime=rt, run_worker=False))


def _memo(path: Path, title: str, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n{body}\n")
    return path


async def _ingest(client, rt: Runtime, path: str, **body) -> dict:
    r = await client.post("/kb/admin/ingest", json={"path": path, **body})
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    await finish_job(rt, job_id)
    return (await client.get(f"/kb/admin/jobs/{job_id}")).json()


async def test_same_file_name_in_two_folders_makes_two_documents(runtime: Runtime, tmp_path: Path) -> None:
    """y2022/annual.md and y2023/annual.md are two documents; a changed file is reported as replaced."""
    _memo(tmp_path / "y2022" / "annual.md", "Annual report 2022", "Revenue in 2022 was 10 million kroner.")
    later = _memo(tmp_path / "y2023" / "annual.md", "Annual report 2023", "Revenue in 2023 was 12 million kroner.")
    async with _client(runtime) as client:
        first = await _ingest(client, runtime, "y2022")
        second = await _ingest(client, runtime, "y2023")
        assert [(i["name"], i["status"]) for i in first["items"]] == [("y2022/annual.md", "ok")]
        assert [(i["name"], i["status"]) for i in second["items"]] == [("y2023/annual.md", "ok")]
        ids = {first["items"][0]["document_id"], second["items"][0]["document_id"]}
        docs = {d["name"]: d["id"] for d in (await client.get("/kb/documents")).json()}
        assert docs == {"y2022/annual.md": first["items"][0]["document_id"],
                        "y2023/annual.md": second["items"][0]["document_id"]} and len(ids) == 2
        # the same file ingested on its own, or from the root recursively, keeps its name: unchanged → skipped
        alone = await _ingest(client, runtime, "y2023/annual.md")
        assert [(i["name"], i["status"]) for i in alone["items"]] == [("y2023/annual.md", "skipped")]
        # a real new version of one of them replaces only that one, and says so
        later.write_text("# Annual report 2023\n\nRevenue in 2023 was 13 million kroner (restated).\n")
        again = await _ingest(client, runtime, ".", recursive=True)
        states = {i["name"]: i["status"] for i in again["items"]}
        assert states == {"y2022/annual.md": "skipped", "y2023/annual.md": "replaced"}, again["items"]
        assert again["counts"] == {"skipped": 1, "replaced": 1}
        docs = {d["name"]: d["id"] for d in (await client.get("/kb/documents")).json()}
        assert docs["y2022/annual.md"] == first["items"][0]["document_id"] and len(docs) == 2
        text = " ".join(r["text"] for r in await runtime.pool.fetch("SELECT text FROM chunks"))
        assert "10 million" in text and "13 million" in text and "12 million" not in text


async def test_hard_link_to_a_file_outside_the_root_is_refused(runtime: Runtime, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-private"
    outside.mkdir()
    secret = _memo(outside / "secret.md", "Secret", "The vault code is 4711.")
    docs = tmp_path / "docs"
    _memo(docs / "public.md", "Public", "A public memo about the Falcon project.")
    os.link(secret, docs / "linked.md")
    async with _client(runtime) as client:
        job = await _ingest(client, runtime, "docs")
    states = {i["name"]: (i["status"], i["error"]) for i in job["items"]}
    assert states["docs/public.md"] == ("ok", None)
    status, error = states["docs/linked.md"]
    assert status == "unsupported" and "hard link" in error, states
    texts = " ".join(r["text"] for r in await runtime.pool.fetch("SELECT text FROM chunks"))
    assert "4711" not in texts and "Falcon" in texts
