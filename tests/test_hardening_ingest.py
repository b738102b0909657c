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


async def test_a_file_of_a_cancelled_job_is_not_stored(runtime: Runtime, tmp_path: Path) -> None:
    """The store transaction looks at the job: a file that finishes after its job was cancelled (before the
    next heartbeat) stores nothing; the same file outside a job is stored (the control)."""
    from ingest.jobs import cancel_job, create_job
    from ingest.pipeline import ingest_file
    from kb.runtime import build_ingest_context

    path = _memo(tmp_path / "c" / "memo.md", "Memo", "The Osprey budget was 7 million euros.")
    job_id = await create_job(runtime.pool, collection_id=1, path=path)
    await cancel_job(runtime.pool, job_id)
    with build_ingest_context(runtime, processes=False) as ctx:
        out = await ingest_file(ctx, path, name="memo.md", collection_id=1, job_id=job_id)
        assert out.status == "cancelled" and "nothing was stored" in (out.error or ""), out
        assert await runtime.pool.fetchval("SELECT count(*) FROM documents") == 0
        out = await ingest_file(ctx, path, name="memo.md", collection_id=1)
        assert out.status == "ok" and await runtime.pool.fetchval("SELECT count(*) FROM documents") == 1


async def test_cancel_kills_the_parser_process(runtime: Runtime, tmp_path: Path, set_env) -> None:
    import asyncio

    from ingest.jobs import cancel_job, create_job, get_job, run_job
    from kb.runtime import build_ingest_context
    from tests.pdfgen import make_text_pdf, paragraph

    runtime.settings = set_env(KB_INGEST_WORKERS="1")
    (tmp_path / "slow").mkdir()
    path = make_text_pdf(tmp_path / "slow" / "slow.pdf",
                         [f"Section {i}. " + paragraph(f"ops-{i}", 14) for i in range(600)])
    job_id = await create_job(runtime.pool, collection_id=1, path=path)
    with build_ingest_context(runtime) as ctx:
        old = ctx.executor
        task = asyncio.create_task(run_job(ctx, job_id, stale_s=120))  # heartbeats 30 s apart
        async with asyncio.timeout(60):
            for _ in range(10**6):  # polling the database: there is no event to wait on
                if (await get_job(runtime.pool, job_id)).items[0].status == "running":
                    break
                await asyncio.sleep(0.1)
        parsers = list(getattr(old, "_processes", {}).values())
        assert parsers and all(p.is_alive() for p in parsers)
        started = asyncio.get_running_loop().time()
        await cancel_job(runtime.pool, job_id)
        job = await asyncio.wait_for(task, timeout=30)
        stopped_s = asyncio.get_running_loop().time() - started
        # Killed (SIGKILL). The pool's own thread joins the same processes: when it reaps one first, this
        # thread's waitpid sees ECHILD and reads "alive" until that thread has stored the exit code, so poll.
        for _ in range(300):  # 15 s of polling: no event tells when another thread has reaped a process
            if not any(p.is_alive() for p in parsers):
                break
            await asyncio.sleep(0.05)
        assert job.items[0].status == "cancelled" and job.status == "cancelled", job.items
        assert not any(p.is_alive() for p in parsers) and ctx.executor is not old
        assert await runtime.pool.fetchval("SELECT count(*) FROM documents") == 0
    print(f"cancelled file stopped {stopped_s:.1f} s after the cancel (heartbeat every 30 s)")


def test_docx_styles_are_resolved_once_with_the_same_outline() -> None:
    """Styles are looked up in a table built once per document (not by scanning every style per paragraph):
    a style based on a heading is a heading, a TOC entry is left out, a list style is a list, a paragraph
    without a style (or with an unknown one) takes the default style, and 300 unused styles change nothing."""
    import io

    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml.ns import qn

    from ingest.docx_read import read_docx

    d = docx.Document()
    for i in range(300):
        d.styles.add_style(f"Unused {i}", WD_STYLE_TYPE.PARAGRAPH)
    chapter = d.styles.add_style("Chapter Title", WD_STYLE_TYPE.PARAGRAPH)
    chapter.base_style = d.styles["Heading 2"]
    d.add_paragraph("Contents entry 1", style="TOC Heading")
    d.add_heading("Annual review", 1)
    d.add_paragraph("Fleet and routes", style="Chapter Title")
    d.add_paragraph("New route to Oslo", style="List Bullet")
    d.add_paragraph("Plain body text about routes.")
    orphan = d.add_paragraph("A paragraph naming a style that does not exist.")
    orphan._p.get_or_add_pPr().get_or_add_pStyle().set(qn("w:val"), "NoSuchStyle")
    buf = io.BytesIO()
    d.save(buf)
    outline = read_docx(buf.getvalue())
    assert [(b.text, b.level) for b in outline.blocks] == [
        ("Annual review", 1), ("Fleet and routes", 2), ("- New route to Oslo", None),
        ("Plain body text about routes.", None), ("A paragraph naming a style that does not exist.", None)]


def test_sidecar_nodes_spanning_the_whole_document_many_times_are_refused() -> None:
    """Each node keeps the text of its range: 20,000 nodes over the whole document (20,000 copies of it) are
    refused with the reason, while a normal nested tree of the same document passes."""
    import msgspec
    import pytest

    from ingest.pageindex import MAX_SPAN_FACTOR, PageIndexDocument, tree_from_pageindex
    from kb.core.errors import IngestError

    pages = {i: f"page {i} text " * 200 for i in range(1, 41)}
    whole = [{"title": f"All {i}", "start_index": 1, "end_index": 40} for i in range(20_000)]
    with pytest.raises(IngestError) as err:
        tree_from_pageindex(msgspec.convert({"structure": whole}, PageIndexDocument), unit="page", page_texts=pages)
    assert f"more than {MAX_SPAN_FACTOR} times the document's 40 pages" in err.value.detail
    nested = [{"title": f"Part {p}", "start_index": 10 * p + 1, "end_index": 10 * p + 10,
               "nodes": [{"title": f"Chapter {p}.{c}", "start_index": 10 * p + 2 * c + 1,
                          "end_index": 10 * p + 2 * c + 2} for c in range(5)]} for p in range(4)]
    tree = tree_from_pageindex(msgspec.convert({"structure": nested}, PageIndexDocument), unit="page",
                               page_texts=pages)
    assert len(tree.nodes) == 24 and tree.source_mode == "pageindex"


async def test_a_sidecar_nested_100000_levels_does_not_fail_the_file(runtime: Runtime, tmp_path: Path) -> None:
    from tests.conftest import ingest

    path = _memo(tmp_path / "deep" / "memo.md", "Memo", "The Kestrel fleet grew to 41 aircraft.")
    depth = 100_000
    node = '{"title": "a", "start_index": 1, "end_index": 1, "nodes": ['
    (path.parent / "memo.md.tree.json").write_text('{"structure": [' + node * depth + "]}" * depth + "]}")
    item = (await ingest(runtime, path.parent)).items[0]
    assert item.status == "ok" and "nested deeper than" in (item.error or ""), item
    row = await runtime.pool.fetchrow("SELECT tree_mode, warnings FROM documents")
    assert row["tree_mode"] != "pageindex" and any("memo.md.tree.json refused" in w for w in row["warnings"])


def _uploads(rt: Runtime) -> list[Path]:
    root = rt.settings.database.data_dir / "uploads"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_uploads_are_stored_once_and_leave_with_their_document(runtime: Runtime, tmp_path: Path) -> None:
    """The same bytes uploaded 5 times are one file; an upload skipped as a copy of a folder document is not
    kept, a failed one until its item is removed; deleting an uploaded document deletes its file (a
    folder-ingested file is never touched)."""
    memo = b"# Heron memo\n\nThe Heron programme spent 4.2 million dollars on tooling in 2024.\n"
    async with _client(runtime) as client:
        jobs = []
        for i in range(5):
            r = await client.post("/kb/admin/documents", files={"file": (f"heron-{i}.md", memo)})
            assert r.status_code == 202, r.text
            jobs.append(r.json()["job_id"])
        assert len(_uploads(runtime)) == 1
        for job_id in jobs:
            await finish_job(runtime, job_id)
        states = [(await client.get(f"/kb/admin/jobs/{j}")).json()["items"][0]["status"] for j in jobs]
        assert states == ["ok", "skipped", "skipped", "skipped", "skipped"]
        assert len(_uploads(runtime)) == 1  # the skipped ones share the stored document's file
        # a file already ingested from a folder, then uploaded: skipped, and its upload not kept
        folder_file = _memo(tmp_path / "docs" / "osprey.md", "Osprey", "The Osprey budget was 7 million euros.")
        await _ingest(client, runtime, "docs")
        r = await client.post("/kb/admin/documents", files={"file": ("osprey.md", folder_file.read_bytes())})
        up = (await finish_job(runtime, r.json()["job_id"])).items[0]
        assert up.status == "skipped" and len(_uploads(runtime)) == 1
        # a failed upload stays for a retry, and goes when its item is removed from the job
        r = await client.post("/kb/admin/documents", files={"file": ("empty.md", b"  \n")})
        failed = (await finish_job(runtime, r.json()["job_id"])).items[0]
        assert failed.status == "failed" and len(_uploads(runtime)) == 2
        r = await client.delete(f"/kb/admin/jobs/{r.json()['job_id']}/items/{failed.id}")
        assert r.status_code == 204 and len(_uploads(runtime)) == 1
        docs = {d["name"]: d for d in (await client.get("/kb/documents")).json()}
        uploaded = next(d for n, d in docs.items() if n.startswith("heron-0-"))
        assert (await client.delete(f"/kb/documents/{uploaded['id']}")).status_code == 204
        assert _uploads(runtime) == []
        assert (await client.delete(f"/kb/documents/{docs['docs/osprey.md']['id']}")).status_code == 204
        assert folder_file.exists()  # not an upload: the user's file stays
        assert (await client.get("/kb/documents")).json() == []


async def test_jobs_list_is_paged_with_a_total(runtime: Runtime, tmp_path: Path) -> None:
    for i in range(30):
        _memo(tmp_path / "many" / f"m{i:02d}.md", f"Memo {i}", f"Memo number {i} about the Falcon project.")
    _memo(tmp_path / "one" / "a.md", "A", "A memo about the Falcon project.")
    async with _client(runtime) as client:
        big = (await client.post("/kb/admin/ingest", json={"path": "many"})).json()["job_id"]
        small = [(await client.post("/kb/admin/ingest", json={"path": "one"})).json()["job_id"] for _ in range(3)]
        page = (await client.get("/kb/admin/jobs", params={"limit": 2, "items": 5})).json()
        assert page["total"] == 4 and page["limit"] == 2 and page["offset"] == 0
        assert [j["id"] for j in page["jobs"]] == small[::-1][:2]
        rest = (await client.get("/kb/admin/jobs", params={"limit": 2, "offset": 2, "items": 5})).json()
        assert [j["id"] for j in rest["jobs"]] == [small[0], big] and rest["total"] == 4
        listed = rest["jobs"][1]
        assert listed["files"] == 30 and listed["counts"] == {"pending": 30} and len(listed["items"]) == 5
        items = (await client.get(f"/kb/admin/jobs/{big}", params={"items_limit": 10, "items_offset": 25})).json()
        assert [i["name"] for i in items["items"]] == [f"many/m{i:02d}.md" for i in range(25, 30)]
        assert items["files"] == 30
        assert (await client.get("/kb/admin/jobs", params={"limit": 0})).status_code == 400
        assert (await client.get("/kb/admin/jobs", params={"limit": 201})).status_code == 400


async def test_a_large_document_is_deleted_in_batches_off_the_request(runtime: Runtime, tmp_path: Path) -> None:
    """More chunks than one batch: 202 at once, the document leaves listings and its name is free, its rows go
    in batches; a delete left half-way (the server stopped) is finished by a worker."""
    import asyncio

    import pytest

    from ingest import store
    from ingest.jobs import Worker
    from kb.api import catalog
    from kb.runtime import build_ingest_context

    lines = "\n\n".join(f"Paragraph {i}: the Falcon project shipped crate {i} to depot {i % 17}." for i in range(3000))
    _memo(tmp_path / "big" / "log.md", "Operations log", lines)
    _memo(tmp_path / "big" / "other.md", "Other", "Another memo about the Falcon project.")
    async with _client(runtime) as client:
        job = await _ingest(client, runtime, "big")
        doc = next(i for i in job["items"] if i["name"] == "big/log.md")
        assert doc["chunks"] > 100, doc
        lexemes = await runtime.pool.fetchval("SELECT sum(df) FROM lexeme_df")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(catalog, "DELETE_BATCH_ROWS", 100)  # the route's threshold: this document is "large"
            r = await client.delete(f"/kb/documents/{doc['document_id']}")
        assert r.status_code == 202 and r.json() == {"document_id": doc["document_id"], "status": "deleting",
                                                       "chunks": doc["chunks"]}
        assert [d["name"] for d in (await client.get("/kb/documents")).json()] == ["big/other.md"]
        async with asyncio.timeout(60):
            for _ in range(10**6):  # polling the database: there is no event to wait on
                if not await runtime.pool.fetchval("SELECT count(*) FROM documents WHERE id = $1", doc["document_id"]):
                    break
                await asyncio.sleep(0.1)
        assert await runtime.pool.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", doc["document_id"]) == 0
        assert await runtime.pool.fetchval("SELECT sum(df) FROM lexeme_df") < lexemes
    # a delete interrupted half-way: out of the collection, some rows left; a worker finishes it
    again = await finish_job(runtime, (await _start(runtime, "big")))
    doc_id = next(i.document_id for i in again.items if i.name == "big/log.md")
    deleting = await store.start_delete(runtime.pool, doc_id)
    await runtime.pool.execute("DELETE FROM chunks WHERE id IN (SELECT id FROM chunks WHERE document_id = $1 "
                               "LIMIT 50)", doc_id)
    await runtime.pool.execute("UPDATE documents SET updated_at = now() - interval '1 hour' WHERE id = $1", doc_id)
    assert deleting.chunks > 50
    with build_ingest_context(runtime, processes=False) as ctx:
        assert await Worker(ctx, stale_s=60).run_one() is False  # nothing to claim, but the delete is finished
    assert await runtime.pool.fetchval("SELECT count(*) FROM documents WHERE id = $1", doc_id) == 0
    assert await runtime.pool.fetchval("SELECT count(*) FROM nodes WHERE document_id = $1", doc_id) == 0


async def _start(rt: Runtime, path: str) -> int:
    from ingest.jobs import create_job

    return await create_job(rt.pool, collection_id=1, path=rt.settings.ingest.root / path,
                            name_root=rt.settings.ingest.root)


async def test_the_embedding_counter_counts_up_and_a_running_job_says_its_time_left(runtime: Runtime,
                                                                                    tmp_path: Path) -> None:
    """Progress that moves: a file of some hundred chunks reports chunks embedded before it stores them; a job
    with files left has an estimated time left, and none once it is done."""
    from ingest.jobs import create_job, get_job
    from ingest.pipeline import EMBED_STEP, ingest_file
    from kb.runtime import build_ingest_context

    body = "\n\n".join(f"## Section {i}\n\n" + f"The Osprey plant {i} made {i * 7} tonnes of pulp. " * 30
                       for i in range(60))
    path = _memo(tmp_path / "p" / "long.md", "Long", body)
    seen: list[tuple[str, int, int]] = []
    with build_ingest_context(runtime, processes=False) as ctx:
        out = await ingest_file(ctx, path, name="long.md", collection_id=1,
                                progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert out.status == "ok" and out.chunks > 2 * EMBED_STEP, out
    counts = [done for stage, done, total in seen if stage == "embedding"]
    assert any(0 < d < out.chunks for d in counts), seen  # counts up while it embeds, not 0 until storing
    assert counts == sorted(counts)
    for i in range(3):
        _memo(tmp_path / "q" / f"memo{i}.md", f"Memo {i}", f"The Osprey budget was {i} million euros.")
    job_id = await create_job(runtime.pool, collection_id=1, path=tmp_path / "q")
    await runtime.pool.execute("UPDATE ingest_jobs SET status='running', started_at=now() - interval '20 seconds' "
                               "WHERE id=$1", job_id)
    await runtime.pool.execute("UPDATE ingest_job_items SET status='ok', seconds=20 WHERE id = (SELECT min(id) FROM "
                               "ingest_job_items WHERE job_id=$1)", job_id)
    job = await get_job(runtime.pool, job_id)
    assert (job.files, job.files_done) == (3, 1) and job.seconds_left is not None
    assert 35 <= job.seconds_left <= 50, job.seconds_left  # two files left at about 20 s each
    await runtime.pool.execute("UPDATE ingest_job_items SET status='ok' WHERE job_id=$1", job_id)
    await runtime.pool.execute("UPDATE ingest_jobs SET status='done', finished_at=now() WHERE id=$1", job_id)
    assert (await get_job(runtime.pool, job_id)).seconds_left is None


async def _ingest_folder(rt: Runtime, folder: Path, name_root: Path) -> list[tuple[str, str]]:
    """What ``kb ingest FOLDER`` does: a job named under the ingest root ``name_root``, run to the end."""
    from ingest.jobs import create_job
    from kb.core.collections import ensure_collection

    coll = await ensure_collection(rt.pool, "default")
    job_id = await create_job(rt.pool, collection_id=coll.id, path=folder, name_root=name_root)
    return [(i.name, i.status) for i in (await finish_job(rt, job_id)).items]


async def test_two_folders_outside_the_root_with_the_same_file_name_make_two_documents(runtime: Runtime,
                                                                                      tmp_path: Path) -> None:
    """Issue 38: ``kb ingest`` of two folders outside ``KB_INGEST_ROOT`` that both hold ``annual.md`` made one
    document, the second replacing the first. Now the second takes its folder's name in front; each folder
    ingested again keeps its own document (skipped unchanged, replaced when changed)."""
    root = tmp_path / "root"
    root.mkdir()
    north = _memo(tmp_path / "north" / "annual.md", "Annual report North", "Revenue of North was 10 million kroner.")
    _memo(tmp_path / "south" / "annual.md", "Annual report South", "Revenue of South was 20 million kroner.")
    _memo(tmp_path / "far" / "south" / "annual.md", "Annual report Far South", "Revenue of Far South was 7 million.")
    assert await _ingest_folder(runtime, tmp_path / "north", root) == [("annual.md", "ok")]
    assert await _ingest_folder(runtime, tmp_path / "south", root) == [("south/annual.md", "ok")]
    assert await _ingest_folder(runtime, tmp_path / "far" / "south", root) == [("far/south/annual.md", "ok")]
    docs = {r["name"]: r["source_path"] for r in await runtime.pool.fetch("SELECT name, source_path FROM documents")}
    assert docs == {"annual.md": str(tmp_path / "north" / "annual.md"),
                    "south/annual.md": str(tmp_path / "south" / "annual.md"),
                    "far/south/annual.md": str(tmp_path / "far" / "south" / "annual.md")}
    # again: each keeps its name; a changed file replaces its own document, not another folder's
    assert await _ingest_folder(runtime, tmp_path / "south", root) == [("south/annual.md", "skipped")]
    north.write_text("# Annual report North\n\nRevenue of North was 11 million kroner (restated).\n")
    assert await _ingest_folder(runtime, tmp_path / "north", root) == [("annual.md", "replaced")]
    text = " ".join(r["text"] for r in await runtime.pool.fetch("SELECT text FROM chunks"))
    assert "11 million" in text and "20 million" in text and "7 million" in text and "10 million" not in text
