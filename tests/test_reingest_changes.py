"""Re-running a folder re-processes a file when what shaped its document changed (settings, embedder, LLM model,
given metadata), or on request; it says why; the stored version stays when re-processing fails."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ingest.jobs import JobStatus, create_job, run_job
from ingest.store import list_documents
from kb.app import create_app
from kb.runtime import Runtime, build_ingest_context
from tests.corpus import REPORTS, write_markdown
from tests.http import app_client, wait_for_job


def _with(rt: Runtime, **ingest: object) -> Runtime:
    """The runtime with other ingest settings (what a restart with other KB_* variables would have)."""
    settings = dataclasses.replace(rt.settings, ingest=dataclasses.replace(rt.settings.ingest, **ingest))
    return dataclasses.replace(rt, settings=settings)


async def _job(rt: Runtime, folder: Path, **job: object) -> JobStatus:
    job_id = await create_job(rt.pool, collection_id=1, path=folder, **job)
    return await run_job(build_ingest_context(rt, processes=False), job_id)


def _by_name(job: JobStatus) -> dict[str, tuple[str, str | None]]:
    return {i.name: (i.status, i.error) for i in job.items}


async def test_a_file_is_re_processed_when_what_shaped_it_changed(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    a, b = (write_markdown(r, folder) for r in REPORTS[:2])
    assert (await _job(runtime, folder)).counts == {"ok": 2}
    assert set((await _job(runtime, folder)).counts) == {"skipped"}  # nothing changed: nothing re-done
    before = {d.name: d for d in await list_documents(runtime.pool, "default")}

    smaller = _with(runtime, chunk_tokens=60, chunk_overlap_tokens=8)  # new chunking settings
    job = await _job(smaller, folder)
    assert _by_name(job) == {n: ("replaced", "re-processed: chunking settings changed since it was stored")
                             for n in (a.name, b.name)}
    after = {d.name: d for d in await list_documents(runtime.pool, "default")}
    assert all(after[n].chunk_count > before[n].chunk_count for n in after)  # really chunked anew
    assert set((await _job(smaller, folder)).counts) == {"skipped"}

    (folder / f"{a.stem}.meta.json").write_text(json.dumps({"fiscal_year": 2031}))  # new metadata for one file
    job = await _job(smaller, folder)
    assert _by_name(job) == {a.name: ("replaced", "re-processed: metadata changed since it was stored"),
                             b.name: ("skipped", "unchanged (same sha256)")}
    docs = {d.name: d for d in await list_documents(runtime.pool, "default")}
    assert docs[a.name].metadata["fiscal_year"] == 2031

    job = await _job(smaller, folder, force=True)  # on request, though nothing changed
    assert {s for s, _ in _by_name(job).values()} == {"replaced"}
    assert {e for _, e in _by_name(job).values()} == {"re-processed on request (--force)"}


async def test_a_failed_re_processing_keeps_the_stored_version(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "one"
    folder.mkdir()
    a = write_markdown(REPORTS[0], folder)
    await _job(runtime, folder)
    (stored,) = await list_documents(runtime.pool, "default")
    job = await _job(_with(runtime, max_chunks=1), folder, force=True)  # the new version fails
    assert job.items[0].status == "failed" and "KB_MAX_CHUNKS_PER_FILE" in (job.items[0].error or "")
    (kept,) = await list_documents(runtime.pool, "default")
    assert (kept.id, kept.name, kept.chunk_count) == (stored.id, a.name, stored.chunk_count)
    assert await runtime.pool.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", kept.id) == kept.chunk_count


async def test_the_admin_api_re_processes_one_document(runtime: Runtime, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    root = tmp_path / "root"
    folder = root / "reports"
    folder.mkdir(parents=True)
    a = write_markdown(REPORTS[0], folder)
    rt = _with(runtime, root=root)
    await _job(rt, folder, name_root=root, allowed_root=root)
    (stored,) = await list_documents(runtime.pool, "default")
    assert stored.name == f"reports/{a.name}"
    async with app_client(create_app(runtime=rt, run_worker=True)) as client:  # its own worker runs the job
        r = await client.post(f"/kb/admin/documents/{stored.id}/reingest")
        assert r.status_code == 202, r.text
        job = await wait_for_job(client, r.json()["job_id"])
        assert job["counts"] == {"replaced": 1}, job
        assert job["items"][0]["error"] == "re-processed on request (--force)"
        (again,) = await list_documents(runtime.pool, "default")
        assert again.name == stored.name and again.id != stored.id
        assert (await client.post("/kb/admin/documents/999999/reingest")).status_code == 404
        up = await client.post("/kb/admin/documents", data={"collection": "default"},
                               files={"file": ("memo.md", b"# Memo\n\nThe Falcon project budget is $4.2 million.")})
        await wait_for_job(client, up.json()["job_id"])
        memo = next(d for d in await list_documents(runtime.pool, "default") if d.name.startswith("memo"))
        redo = await wait_for_job(client, (await client.post(f"/kb/admin/documents/{memo.id}/reingest")).json()["job_id"])
        assert redo["counts"] == {"replaced": 1}, redo  # an upload too, from the uploads folder, under its name
        assert {d.name for d in await list_documents(runtime.pool, "default")} == {again.name, memo.name}
        a.unlink()
        gone = await client.post(f"/kb/admin/documents/{again.id}/reingest")
        assert gone.status_code == 409 and "source file is gone" in gone.json()["detail"]
