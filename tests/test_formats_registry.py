"""The format registry (``ingest.formats``): one entry per format, and every path that takes files in
(parser, tree step, folder jobs, uploads) goes through it."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from pathlib import Path
from typing import cast

import docx
import pymupdf
import pytest

from ingest.formats import FORMATS, SUPPORTED, build_tree, format_of, parse_file
from ingest.jobs import create_job, get_job
from ingest.pipeline import IngestContext, file_kind, ingest_file
from kb.app import create_app
from kb.core.collections import ensure_collection
from kb.core.errors import IngestError
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import get_settings
from kb.runtime import Runtime
from tests.http import app_client

BODY = "Revenue grew by twelve percent, driven by the new terminals and a longer season."


def _pdf() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Annual report", fontsize=18)
    page.insert_text((72, 110), BODY, fontsize=10)
    data = doc.tobytes()
    doc.close()
    return data


def _docx() -> bytes:
    d = docx.Document()
    d.add_heading("Annual report", 1)
    d.add_paragraph(BODY)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


SAMPLES: dict[str, Callable[[], bytes]] = {
    "pdf": _pdf,
    "markdown": lambda: f"---\ntitle: Annual report\n---\n# Annual report\n\n{BODY}\n".encode(),
    "text": lambda: f"ANNUAL REPORT\n\n{BODY}\n".encode(),
    "docx": _docx,
    "html": lambda: f"<html><body><h1>Annual report</h1><p>{BODY}</p></body></html>".encode(),
}
"""A small file of each registered format (a new format needs one here)."""


def test_registry_is_consistent() -> None:
    assert set(SAMPLES) == set(FORMATS)
    suffixes = [s for f in FORMATS.values() for s in f.suffixes]
    assert len(suffixes) == len(set(suffixes)), "a suffix belongs to one format"
    assert all(s.startswith(".") and s == s.lower() for s in suffixes)
    assert SUPPORTED == {s: f.name for f in FORMATS.values() for s in f.suffixes}
    assert all(name == f.name and f.unit in {"page", "line", "paragraph"} for name, f in FORMATS.items())


@pytest.mark.parametrize("suffix", sorted(SUPPORTED))
def test_every_suffix_dispatches_to_its_reader_and_tree_builder(suffix: str, tmp_path: Path,
                                                                kb_env: dict[str, str]) -> None:
    fmt = format_of(Path(f"Report{suffix.upper()}"))  # suffixes match case-insensitively
    assert fmt is not None and fmt is FORMATS[SUPPORTED[suffix]]
    assert file_kind(Path(f"report{suffix}")) == fmt.name
    data = SAMPLES[fmt.name]()
    parsed = parse_file(data, fmt.name, 2**20)
    assert parsed.kind == fmt.name
    path = tmp_path / f"report{suffix}"
    path.write_bytes(data)
    assert parse_file(str(path), fmt.name, 2**20) == parsed  # a path reads like its bytes
    tree = asyncio.run(build_tree(parsed, OfflineChatModel(), get_settings().ingest, "report"))
    assert tree.nodes and tree.unit == fmt.unit and {n.unit for n in tree.nodes} == {fmt.unit}
    assert any("Revenue grew" in n.text for n in tree.nodes)


def test_unknown_suffix_is_unsupported() -> None:
    assert format_of(Path("notes.xlsx")) is None and format_of(Path("README")) is None
    assert file_kind(Path("notes.xlsx")) is None
    # refused before anything is read: no context is needed
    outcome = asyncio.run(ingest_file(cast(IngestContext, None), Path("notes.xlsx"), name="notes.xlsx",
                                      collection_id=1))
    assert outcome.status == "unsupported" and outcome.error == "unsupported file type .xlsx"
    with pytest.raises(IngestError):
        parse_file(b"PK\x03\x04", "xlsx")


async def test_folder_jobs_and_uploads_accept_exactly_the_registry(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "formats"
    folder.mkdir()
    for suffix in SUPPORTED:
        (folder / f"doc{suffix}").write_bytes(b"x")  # only listed here: the worker does not run
    (folder / "notes.xlsx").write_bytes(b"PK\x03\x04")
    coll = await ensure_collection(runtime.pool, "default")
    job = await get_job(runtime.pool, await create_job(runtime.pool, collection_id=coll.id, path=folder))
    assert {i.name: i.status for i in job.items} == {
        **{f"doc{s}": "pending" for s in SUPPORTED}, "notes.xlsx": "unsupported"}
    app = create_app(runtime=runtime, run_worker=False)
    async with app_client(app) as client:
        for suffix in SUPPORTED:
            r = await client.post("/kb/admin/documents", files={"file": (f"upload{suffix.upper()}", b"x")})
            assert r.status_code == 202, (suffix, r.text)
        r = await client.post("/kb/admin/documents", files={"file": ("notes.xlsx", b"PK\x03\x04")})
        assert r.status_code == 400 and ", ".join(sorted(SUPPORTED)) in r.text
