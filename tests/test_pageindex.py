"""PageIndex JSON both ways: export (REST and `kb export`), the `<file>.tree.json` sidecar on ingest, the round trip."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ingest.pageindex import parse_pageindex, to_pageindex, tree_from_pageindex
from ingest.store import NodeInfo
from kb.app import create_app
from kb.core.collections import ensure_collection
from kb.core.errors import IngestError
from kb.runtime import Runtime
from tests.conftest import MODEL_DIR, ingest
from tests.http import app_client
from tests.pdfgen import Sec, make_report_pdf

SECTIONS = [
    Sec("Letter to Shareholders", 1, 4, True),
    Sec("Financial Review", 1, 2, True),
    Sec("Revenue", 2, 5),
    Sec("Costs", 2, 5),
    Sec("Outlook", 1, 3, True),
]


def _node(node_id: str, parent: str | None, title: str, start: int, end: int, summary: str = "") -> NodeInfo:
    return NodeInfo(node_id=node_id, parent_id=parent, ordinal=0, level=1, title=title, start_index=start,
                    end_index=end, unit="page", is_leaf=False, summary=summary)


async def _ingest(rt: Runtime, path: Path, collection: str = "default") -> Any:
    coll = await ensure_collection(rt.pool, collection)
    return await ingest(rt, path, collection_id=coll.id)


def _shape(structure: list[dict[str, Any]]) -> list[Any]:
    """Titles, pages, node ids and nesting of a PageIndex structure (summaries left out)."""
    return [(n["title"], n["node_id"], n["start_index"], n["end_index"], _shape(n.get("nodes", [])))
            for n in structure]


# --------------------------------------------------------------------------- pure functions


def test_export_is_nested_in_pageindex_key_order_without_empty_nodes() -> None:
    nodes = [_node("0000", None, "Report", 1, 3, "all"), _node("0001", "0000", "Intro", 1, 1),
             _node("0002", "0000", "Body", 2, 3), _node("0003", None, "Annex", 4, 4)]
    out = to_pageindex("r.pdf", "A report.", nodes)
    assert list(out) == ["doc_name", "doc_description", "structure"]
    root = out["structure"][0]
    assert list(root) == ["title", "node_id", "start_index", "end_index", "summary", "nodes"]
    assert [n["node_id"] for n in root["nodes"]] == ["0001", "0002"]
    assert "nodes" not in root["nodes"][0] and "nodes" not in out["structure"][1]


def _doc(structure: list[dict[str, Any]]) -> Any:
    return parse_pageindex(json.dumps({"doc_name": "x.pdf", "structure": structure}).encode())


PAGES = {1: "one", 2: "two", 3: "three"}


def test_sidecar_tree_takes_ids_titles_pages_and_text() -> None:
    doc = _doc([{"title": "A", "node_id": "a", "start_index": 1, "end_index": 3, "summary": "s",
                 "nodes": [{"title": "A.1", "start_index": 2, "end_index": 3, "text": "ignored"}]}])
    tree = tree_from_pageindex(doc, unit="page", page_texts=PAGES)
    assert tree.source_mode == "pageindex" and tree.page_count == 3
    a, a1 = tree.nodes
    assert (a.node_id, a.parent_id, a.level, a.is_leaf, a.summary) == ("a", None, 1, False, "s")
    assert (a1.node_id, a1.parent_id, a1.path, a1.is_leaf) == ("0000", "a", ("A", "A.1"), True)
    assert a1.text == "two\n\nthree" and (a1.start, a1.end) == (2, 3)


def test_markdown_sidecar_counts_lines_and_gives_parents_their_own_lines() -> None:
    text = "# Top\nintro line\n## Sub\nsub body\n"
    doc = _doc([{"title": "Top", "start_index": 1, "end_index": 4,
                 "nodes": [{"title": "Sub", "start_index": 3, "end_index": 4}]}])
    tree = tree_from_pageindex(doc, unit="line", text=text)
    assert tree.page_count == 4 and tree.unit == "line"
    assert tree.nodes[0].text == "# Top\nintro line" and tree.nodes[1].text == "## Sub\nsub body"


@pytest.mark.parametrize(
    ("structure", "reason"),
    [
        ([{"title": "A", "start_index": 1, "end_index": 9}], "which has 3 pages"),
        ([{"title": "A", "start_index": 0, "end_index": 1}], "outside the document"),
        ([{"title": "A", "start_index": 3, "end_index": 2}], "start_index 3 > end_index 2"),
        ([{"title": "  ", "start_index": 1, "end_index": 1}], "empty title"),
        ([{"title": "A", "node_id": "x", "start_index": 1, "end_index": 1},
          {"title": "B", "node_id": "x", "start_index": 2, "end_index": 2}], "duplicate node_id 'x'"),
        ([{"title": "A", "start_index": "one", "end_index": 1}], "Expected `int`"),
        ([{"title": "A\u0000", "start_index": 1, "end_index": 1}], "NUL"),
        ([], "structure is empty"),
    ],
)
def test_bad_sidecar_trees_are_refused_with_the_reason(structure: list[dict[str, Any]], reason: str) -> None:
    with pytest.raises(IngestError) as err:
        tree_from_pageindex(_doc(structure), unit="page", page_texts=PAGES)
    assert reason in err.value.detail


def test_not_pageindex_json_is_refused() -> None:
    for raw in (b"{not json", b"[1, 2]", b'{"structure": [{"title": "A"}]}'):
        with pytest.raises(IngestError):
            parse_pageindex(raw)


# --------------------------------------------------------------------------- end to end


async def test_round_trip_export_then_reingest_with_sidecar(runtime: Runtime, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    pdf = make_report_pdf(src / "report.pdf", SECTIONS, outline=True).path
    job = await _ingest(runtime, pdf)
    assert job.counts == {"ok": 1}, job.items
    doc_id = job.items[0].document_id
    async with app_client(create_app(runtime=runtime, bound_host="127.0.0.1", run_worker=False)) as client:
        r = await client.get(f"/kb/documents/{doc_id}/tree", params={"format": "pageindex"})
        assert r.status_code == 200, r.text
        exported = r.json()
        assert (await client.get(f"/kb/documents/{doc_id}/tree")).json() == exported  # pageindex is the default
        r = await client.get(f"/kb/documents/{doc_id}/tree", params={"format": "xml"})
        assert r.status_code == 400 and "format" in r.json()["detail"] and "xml" in r.json()["detail"]  # an enum in the schema
        assert (await client.get("/kb/documents/424242/tree")).status_code == 404
    assert exported["doc_name"] == "report.pdf" and exported["doc_description"]
    titles = [n["title"] for n in exported["structure"]]
    assert "Financial Review" in titles
    review = exported["structure"][titles.index("Financial Review")]
    assert [n["title"] for n in review["nodes"]] == ["Revenue", "Costs"]

    # `kb export` prints the same JSON
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATABASE_URL": runtime.database_url, "KB_EMBEDDING_MODEL": runtime.embedder.model_id,
                "KB_MODEL_DIR": str(MODEL_DIR)})
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "kb.cli", "export", str(doc_id)],
                                   env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert json.loads(proc.stdout) == exported
    missing = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "kb.cli", "export", "424242"],
                                      env=env, capture_output=True, timeout=120)
    assert missing.returncode == 1 and b"document 424242 does not exist" in missing.stderr

    # a copy of the PDF with the exported tree as its sidecar gets exactly that tree
    dst = tmp_path / "copy"
    dst.mkdir()
    shutil.copy(pdf, dst / "copy.pdf")
    (dst / "copy.pdf.tree.json").write_text(json.dumps(exported))
    job2 = await _ingest(runtime, dst)
    assert [(i.name, i.status, i.error) for i in job2.items] == [("copy.pdf", "ok", None)]  # sidecar not a document
    copy_id = job2.items[0].document_id
    row = await runtime.pool.fetchrow("SELECT tree_mode, chunk_count FROM documents WHERE id = $1", copy_id)
    assert row["tree_mode"] == "pageindex" and row["chunk_count"] > 0
    from ingest.pageindex import export_pageindex

    again = await export_pageindex(runtime.pool, copy_id)
    assert _shape(again["structure"]) == _shape(exported["structure"])
    assert again["structure"] == exported["structure"]  # summaries kept too
    assert await _chunks(runtime, copy_id) == await _chunks(runtime, doc_id)  # same node texts → same chunks


async def _chunks(rt: Runtime, doc_id: int) -> list[tuple[Any, ...]]:
    rows = await rt.pool.fetch("SELECT node_id, text, page, page_end FROM chunks WHERE document_id = $1 "
                               "ORDER BY ordinal", doc_id)
    return [tuple(r) for r in rows]


async def test_markdown_round_trip_in_lines(runtime: Runtime, tmp_path: Path) -> None:
    from ingest.pageindex import export_pageindex
    from tests.corpus import REPORTS, write_markdown

    src = tmp_path / "md"
    src.mkdir()
    md = write_markdown(REPORTS[1], src)
    job = await _ingest(runtime, md)
    doc_id = job.items[0].document_id
    exported = await export_pageindex(runtime.pool, doc_id)
    lines = md.read_text().count("\n") + 1
    assert 1 <= exported["structure"][0]["start_index"] and exported["structure"][-1]["end_index"] <= lines
    dst = tmp_path / "md-copy"
    dst.mkdir()
    shutil.copy(md, dst / "copy.md")
    (dst / "copy.md.tree.json").write_text(json.dumps(exported))
    job2 = await _ingest(runtime, dst)
    assert [(i.status, i.error) for i in job2.items] == [("ok", None)]
    copy_id = job2.items[0].document_id
    assert (await export_pageindex(runtime.pool, copy_id))["structure"] == exported["structure"]
    assert await _chunks(runtime, copy_id) == await _chunks(runtime, doc_id)


async def test_bad_sidecar_falls_back_to_our_tree_and_says_why(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = make_report_pdf(folder / "r.pdf", SECTIONS, outline=True)
    sidecar = {"doc_name": "r.pdf", "structure": [{"title": "Everything", "node_id": "0000", "start_index": 1,
                                                   "end_index": pdf.page_count + 5}]}
    (folder / "r.pdf.tree.json").write_text(json.dumps(sidecar))
    (folder / "notes.md").write_text("# Notes\n\nA memo about the Falcon project.\n")
    (folder / "notes.md.tree.json").write_text("{broken")
    job = await _ingest(runtime, folder)
    items = {i.name: i for i in job.items}
    assert set(items) == {"r.pdf", "notes.md"}
    assert items["r.pdf"].status == "ok" and items["notes.md"].status == "ok"
    assert f"which has {pdf.page_count} pages" in items["r.pdf"].error
    assert "built from the document" in items["r.pdf"].error
    assert "invalid JSON" in items["notes.md"].error
    row = await runtime.pool.fetchrow("SELECT tree_mode, node_count, warnings FROM documents WHERE name = 'r.pdf'")
    assert row["tree_mode"] != "pageindex" and row["node_count"] > 1
    assert any("r.pdf.tree.json refused" in w for w in row["warnings"])


async def test_adding_a_sidecar_reingests_an_unchanged_file(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "md"
    folder.mkdir()
    md = folder / "memo.md"
    md.write_text("# Memo\n\nFirst part about budgets.\n\n# Annex\n\nSecond part about staffing.\n")
    assert (await _ingest(runtime, folder)).counts == {"ok": 1}
    assert (await _ingest(runtime, folder)).counts == {"skipped": 1}
    tree = {"doc_name": "memo.md", "structure": [{"title": "Whole memo", "node_id": "m", "start_index": 1,
                                                  "end_index": 7, "summary": "The memo."}]}
    (folder / "memo.md.tree.json").write_text(json.dumps(tree))
    job = await _ingest(runtime, folder)
    assert job.counts == {"replaced": 1}, job.items  # a new version of the document
    rows = await runtime.pool.fetch("SELECT node_id, title, start_index, end_index, summary, unit FROM nodes")
    assert [tuple(r) for r in rows] == [("m", "Whole memo", 1, 7, "The memo.", "line")]
