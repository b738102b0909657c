"""Folder ingest jobs against the real embedded Postgres: bad input, re-ingest, resume, concurrent workers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pymupdf
import pytest

from ingest.jobs import JobStatus, create_job, get_job
from ingest.pdf_read import NO_TEXT_LAYER
from ingest.store import list_documents
from kb.app import create_app
from kb.core.collections import ensure_collection
from kb.runtime import Runtime
from tests.conftest import finish_job, ingest
from tests.corpus import REPORTS, Report, write_markdown, write_pdf
from tests.http import app_client, wait_for_job


def _bad_files(folder: Path) -> dict[str, str]:
    """Write one file per kind of bad input; return name → expected error fragment."""
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<>> garbage \x00\x01 not a pdf")
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "secret text")
    doc.save(folder / "encrypted.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="pw", owner_pw="pw")
    doc.close()
    doc = pymupdf.open()
    page = doc.new_page()
    page.draw_rect(pymupdf.Rect(50, 50, 300, 300), color=(0, 0, 0), fill=(0.5, 0.5, 0.5))
    doc.save(folder / "scanned.pdf")
    doc.close()
    (folder / "empty.md").write_text("   \n\n")
    (folder / "binary.md").write_bytes(bytes(range(256)) * 8)
    (folder / "notes.xlsx").write_bytes(b"PK\x03\x04")
    return {
        "corrupt.pdf": "", "encrypted.pdf": "encrypt",
        "empty.md": "empty", "binary.md": "binary",
    }


async def _run_job(rt: Runtime, folder: Path, *, recursive: bool = False) -> JobStatus:
    coll = await ensure_collection(rt.pool, "default")
    return await ingest(rt, folder, collection_id=coll.id, recursive=recursive)


def _write_markdown(folder: Path, reports: Sequence[Report]) -> Path:
    folder.mkdir()
    for r in reports:
        write_markdown(r, folder)
    return folder


async def _markdown_job(rt: Runtime, folder: Path, reports: Sequence[Report]) -> int:
    """A job (not yet run) over Markdown versions of ``reports`` written into ``folder``."""
    _write_markdown(folder, reports)
    coll = await ensure_collection(rt.pool, "default")
    return await create_job(rt.pool, collection_id=coll.id, path=folder)


async def test_bad_input_fails_alone_with_reasons(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    expected = _bad_files(folder)
    write_markdown(REPORTS[0], folder)
    write_pdf(REPORTS[2], folder)
    (folder / "late-nul.md").write_bytes(b"# Log\n\n" + b"Shipment recorded. " * 4000 + b"\x00 end of log.")
    (folder / "latin1.txt").write_bytes("Caf\xe9 report\n\nRevenue grew in the caf\xe9 segment.".encode("latin-1"))
    job = await _run_job(runtime, folder)
    assert job.status == "done"
    by_name = {i.name: i for i in job.items}
    for name, fragment in expected.items():
        assert by_name[name].status == "failed", (name, by_name[name])
        assert by_name[name].error and fragment in by_name[name].error.lower(), (name, by_name[name].error)
    assert by_name["notes.xlsx"].status == "unsupported"
    scan = by_name["scanned.pdf"]  # no text layer: stored page by page, with the reason (issue 27)
    assert scan.status == "ok" and scan.pages == 1, scan
    assert by_name[f"{REPORTS[0].stem}.md"].status == "ok"
    assert by_name[f"{REPORTS[2].stem}.pdf"].status == "ok"
    assert by_name["latin1.txt"].status == "ok"
    assert by_name["late-nul.md"].status == "ok", by_name["late-nul.md"].error  # Postgres text rejects NUL
    docs = {d.name: d for d in await list_documents(runtime.pool, "default")}
    assert set(docs) == {f"{REPORTS[0].stem}.md", f"{REPORTS[2].stem}.pdf", "latin1.txt", "late-nul.md", "scanned.pdf"}
    assert any("replacement" in w for w in docs["latin1.txt"].warnings)
    assert NO_TEXT_LAYER in docs["scanned.pdf"].warnings  # with OCR too: its picture holds no words
    assert job.pages > 0 and job.chunks > 0


async def test_reingest_skips_unchanged_and_replaces_changed(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    path = write_markdown(REPORTS[0], folder)
    await _run_job(runtime, folder)
    first = (await list_documents(runtime.pool, "default"))[0]
    job = await _run_job(runtime, folder)
    assert job.items[0].status == "skipped"
    path.write_text(path.read_text().replace("$412.7 million", "$999.9 million"))
    job = await _run_job(runtime, folder)
    assert job.items[0].status == "replaced" and job.pages == 0 and job.chunks > 0
    docs = await list_documents(runtime.pool, "default")
    assert len(docs) == 1 and docs[0].id != first.id and docs[0].sha256 != first.sha256
    texts = [r["text"] for r in await runtime.pool.fetch("SELECT text FROM chunks")]
    assert any("999.9" in t for t in texts) and not any("412.7" in t for t in texts)
    assert await runtime.pool.fetchval("SELECT count(*) FROM nodes WHERE document_id = $1", first.id) == 0


async def test_duplicate_names_in_subfolders(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "dups"
    for sub, report in (("a", REPORTS[0]), ("b", REPORTS[1])):
        (folder / sub).mkdir(parents=True)
        p = write_markdown(report, folder / sub)
        p.rename(folder / sub / "report.md")
    job = await _run_job(runtime, folder, recursive=True)
    assert sorted(i.name for i in job.items) == ["a/report.md", "b/report.md"]
    assert {i.status for i in job.items} == {"ok"}


async def test_file_vanishing_mid_job(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "v"
    folder.mkdir()
    write_markdown(REPORTS[0], folder)
    gone = write_markdown(REPORTS[1], folder)
    coll = await ensure_collection(runtime.pool, "default")
    job_id = await create_job(runtime.pool, collection_id=coll.id, path=folder)
    gone.unlink()
    job = await finish_job(runtime, job_id)
    states = {i.name: (i.status, i.error) for i in job.items}
    assert states[gone.name][0] == "failed" and "vanished" in states[gone.name][1]
    assert states[f"{REPORTS[0].stem}.md"][0] == "ok"


async def test_job_resumes_after_a_killed_worker(runtime: Runtime, tmp_path: Path) -> None:
    job_id = await _markdown_job(runtime, tmp_path / "k", REPORTS[:2])
    # a worker claimed the first item and died (no heartbeat since)
    await runtime.pool.execute(
        "UPDATE ingest_job_items SET status='running', worker='dead:1', attempts=1, "
        "heartbeat_at = now() - interval '1 hour' WHERE id = (SELECT min(id) FROM ingest_job_items WHERE job_id=$1)",
        job_id)
    await runtime.pool.execute("UPDATE ingest_jobs SET status='running', started_at=now() WHERE id=$1", job_id)
    job = await finish_job(runtime, job_id, stale_s=60)
    assert job.status == "done" and {i.status for i in job.items} == {"ok"}
    assert sorted(i.attempts for i in job.items) == [1, 2]


async def test_concurrent_workers_never_ingest_a_file_twice(runtime: Runtime, tmp_path: Path) -> None:
    job_id = await _markdown_job(runtime, tmp_path / "c", REPORTS)
    ends = await asyncio.gather(*(finish_job(runtime, job_id) for _ in range(3)))  # three workers
    job = await get_job(runtime.pool, job_id)
    assert [j.status for j in ends] == ["done"] * 3 and {i.status for i in job.items} == {"ok"}
    assert [i.attempts for i in job.items] == [1] * len(REPORTS)  # each file claimed once
    assert len(await list_documents(runtime.pool, "default")) == len(REPORTS)


async def test_admin_ingest_api_and_upload(runtime: Runtime, tmp_path: Path, kb_env: dict[str, str]) -> None:
    folder = tmp_path / "api"
    folder.mkdir()
    write_markdown(REPORTS[3], folder)
    write_pdf(REPORTS[2], folder)
    (folder / "metadata.jsonl").write_text(json.dumps({"name": REPORTS[3].stem, "region": "Nordics"}) + "\n")
    app = create_app(runtime=runtime, run_worker=True)
    async with app_client(app) as client:
        r = await client.post("/kb/admin/ingest", json={"path": "api", "collection": "default"})
        assert r.status_code == 202, r.text
        job = await wait_for_job(client, r.json()["job_id"])
        assert job["status"] == "done" and job["counts"] == {"ok": 2}
        assert job["pages"] == len(REPORTS[2].sections) and job["pages_per_s"] > 0
        assert all(i["chunks"] > 0 for i in job["items"])
        docs = [d for d in (await client.get("/kb/documents")).json() if d["name"].endswith(".md")]
        assert docs[0]["metadata"]["region"] == "Nordics" and docs[0]["metadata"]["company"] == "Kestrel Airlines"
        detail = (await client.get(f"/kb/documents/{docs[0]['id']}")).json()
        assert detail["tree"] and "text" not in detail["tree"][0]
        assert detail["document"]["description"]
        # upload a file
        files = {"file": ("upload.md", b"# Uploaded\n\nThe uploaded memo mentions the Falcon project budget.")}
        r = await client.post("/kb/admin/documents", files=files, data={"collection": "default"})
        assert r.status_code == 202, r.text
        job = await wait_for_job(client, r.json()["job_id"])
        assert job["counts"] == {"ok": 1}, job
        r = await client.post("/kb/admin/documents", files={"file": ("evil.exe", b"MZ")})
        assert r.status_code == 400
        # delete cascades to nodes and chunks
        doc_id = docs[0]["id"]
        assert (await client.delete(f"/kb/documents/{doc_id}")).status_code == 204
        assert await runtime.pool.fetchval("SELECT count(*) FROM chunks WHERE document_id=$1", doc_id) == 0
        assert await runtime.pool.fetchval("SELECT count(*) FROM nodes WHERE document_id=$1", doc_id) == 0


@pytest.mark.parametrize("pages", [2000])
async def test_large_pdf_ingests(runtime: Runtime, tmp_path: Path, pages: int) -> None:
    """A 2,000-page PDF works (bounded memory is measured by the benchmark, not here)."""
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page()
        if i % 100 == 0:
            page.insert_text((72, 72), f"Chapter {i // 100 + 1}", fontsize=20)
        page.insert_text((72, 120), f"Page {i + 1} of the operations log. Item {i} shipped.", fontsize=10)
    path = tmp_path / "big" / "big.pdf"
    path.parent.mkdir()
    doc.save(path)
    doc.close()
    runtime_embedder = runtime.embedder
    from kb.core.providers.embed import HashEmbedder

    runtime.embedder = HashEmbedder(runtime_embedder.dimension)  # keep the test fast: hashing, same dimension
    try:
        job = await _run_job(runtime, path.parent)
    finally:
        runtime.embedder = runtime_embedder
    assert job.items[0].status == "ok", job.items[0].error
    assert job.pages == pages
    nodes = await runtime.pool.fetch("SELECT start_index, end_index, is_leaf FROM nodes")
    assert all(n["end_index"] - n["start_index"] + 1 <= 10 for n in nodes if n["is_leaf"])


async def test_symlink_swapped_in_after_job_creation_is_refused(runtime: Runtime, tmp_path: Path) -> None:
    """Confinement holds at read time: a file or folder replaced by a link to outside fails that file alone."""
    secret = tmp_path.parent / f"{tmp_path.name}-vault"
    (secret / "sub").mkdir(parents=True)
    (secret / "swap.md").write_text("# Vault\n\nThe vault code is 98765 and it is secret.")
    (secret / "sub" / "inner.md").write_text("# Inner vault\n\nThe inner vault code is 55555.")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "ok.md").write_text("# Fine\n\nA public memo about the Falcon project.")
    (docs / "swap.md").write_text("# Harmless\n\nA harmless memo.")
    (docs / "sub" / "inner.md").write_text("# Harmless inner\n\nAnother harmless memo.")
    app = create_app(runtime=runtime, run_worker=False)
    async with app_client(app) as client:
        r = await client.post("/kb/admin/ingest", json={"path": "docs", "recursive": True})
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
    (docs / "swap.md").unlink()
    (docs / "swap.md").symlink_to(secret / "swap.md")  # the file becomes a link
    (docs / "sub" / "inner.md").unlink()
    (docs / "sub").rmdir()
    (docs / "sub").symlink_to(secret / "sub")  # a parent folder becomes a link
    job = await finish_job(runtime, job_id)
    states = {i.name: (i.status, i.error) for i in job.items}
    assert states["docs/ok.md"][0] == "ok"  # named by its path under the ingest root
    for name in ("docs/swap.md", "docs/sub/inner.md"):
        assert states[name][0] == "failed" and "outside the ingest root" in (states[name][1] or ""), states
    texts = " ".join(r["text"] for r in await runtime.pool.fetch("SELECT text FROM chunks"))
    assert "98765" not in texts and "55555" not in texts and "Falcon" in texts


async def test_recursive_ingest_skips_hidden_files_and_folders(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    for rel in (".git/notes.md", ".venv/lib/site/readme.md", ".kb/uploads/default/u.md", "sub/.draft.md",
                ".hidden.txt", "sub/ok.md", "top.md"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("# Note\n\nSome text about the Falcon project.")
    coll = await ensure_collection(runtime.pool, "default")
    job = await get_job(runtime.pool, await create_job(runtime.pool, collection_id=coll.id, path=folder,
                                                       recursive=True))
    assert sorted(i.name for i in job.items) == ["sub/ok.md", "top.md"]


async def test_uploads_with_colliding_safe_names_never_replace_each_other(runtime: Runtime) -> None:
    uploads = [("報告.md", "# 報告\n\nRevenue of the Osprey unit grew to 12 million."),
               ("財務.md", "# 財務\n\nThe Heron unit reported a loss of 3 million."),
               ("report.md", "# Report\n\nThe Falcon project budget doubled."),
               ("report.md", "# Report\n\nThe Kite project was cancelled.")]
    app = create_app(runtime=runtime, run_worker=False)
    async with app_client(app) as client:
        jobs = []
        for name, text in uploads:
            r = await client.post("/kb/admin/documents", files={"file": (name, text.encode())})
            assert r.status_code == 202, r.text
            jobs.append(r.json()["job_id"])
        for job_id in jobs:
            await finish_job(runtime, job_id)
        items = [(await client.get(f"/kb/admin/jobs/{j}")).json()["items"][0] for j in jobs]
        assert [i["status"] for i in items] == ["ok"] * 4, items
        docs = {d["id"]: d["name"] for d in (await client.get("/kb/documents")).json()}
    assert sorted(docs) == sorted(i["document_id"] for i in items)  # every job's document still exists
    names = sorted(docs.values())
    assert len(set(names)) == 4 and names[2].startswith("報告-") and names[3].startswith("財務-")
    assert all(n.endswith(".md") for n in names)


def test_upload_names_are_safe_and_short() -> None:
    from kb.api.admin import upload_name

    assert upload_name("../../etc/報告.MD", b"a").startswith("報告-") and upload_name("x.md", b"a").endswith(".md")
    assert upload_name("a b?*.md", b"1") != upload_name("a b?*.md", b"2")
    assert upload_name("???.txt", b"").startswith("upload-")
    long = upload_name("長" * 300 + ".pdf", b"x")
    assert len(long.encode()) <= 255 and long.endswith(".pdf")


async def test_folder_metadata_swapped_for_a_link_is_refused(runtime: Runtime, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-meta"
    outside.mkdir()
    (outside / "m.jsonl").write_text(json.dumps({"name": "memo", "leak": "outside-value-31337"}) + "\n")
    docs = tmp_path / "mdocs"
    docs.mkdir()
    (docs / "memo.md").write_text("# Memo\n\nA public memo about the Falcon project.")
    (docs / "metadata.jsonl").write_text(json.dumps({"name": "memo", "region": "Nordics"}) + "\n")
    async with app_client(create_app(runtime=runtime, run_worker=False)) as client:
        r = await client.post("/kb/admin/ingest", json={"path": "mdocs"})
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
    (docs / "metadata.jsonl").unlink()
    (docs / "metadata.jsonl").symlink_to(outside / "m.jsonl")
    item = (await finish_job(runtime, job_id)).items[0]
    assert item.status == "failed" and "outside the ingest root" in (item.error or ""), item
    rows = await runtime.pool.fetch("SELECT metadata::text AS m FROM documents")
    assert not any("31337" in r["m"] for r in rows)


async def test_a_running_job_row_is_written_once_not_per_file(runtime: Runtime, tmp_path: Path) -> None:
    """Workers taking a job's files one after another mark it running once: its row is not rewritten (no row
    lock to queue on) per file, and a job cancelled meanwhile stays cancelled."""
    from ingest.store import SQL_JOB_RUNNING

    job_id = await _markdown_job(runtime, tmp_path / "once", REPORTS[:3])
    version = "SELECT xmin::text || ctid::text FROM ingest_jobs WHERE id = $1"
    await runtime.pool.execute(SQL_JOB_RUNNING, job_id)
    first = await runtime.pool.fetchval(version, job_id)
    started = await runtime.pool.fetchval("SELECT started_at FROM ingest_jobs WHERE id = $1", job_id)
    await runtime.pool.execute(SQL_JOB_RUNNING, job_id)
    assert await runtime.pool.fetchval(version, job_id) == first  # no new row version: nothing written
    assert await runtime.pool.fetchval("SELECT started_at FROM ingest_jobs WHERE id = $1", job_id) == started
    job = await finish_job(runtime, job_id)
    assert job.status == "done" and job.counts == {"ok": 3}, job
    await runtime.pool.execute("UPDATE ingest_jobs SET status = 'cancelled' WHERE id = $1", job_id)
    await runtime.pool.execute(SQL_JOB_RUNNING, job_id)
    assert (await get_job(runtime.pool, job_id)).status == "cancelled"
