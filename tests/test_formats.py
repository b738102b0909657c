"""Word (.docx) and HTML documents become trees: real files written here, ingested through the real job
path on the embedded Postgres, read back and queried over real HTTP."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import docx
import pytest

from ingest.pipeline import parse_file
from kb.app import create_app
from kb.core.collections import ensure_collection
from kb.core.settings import get_settings
from kb.runtime import Runtime
from tests.conftest import SetEnv, ingest
from tests.http import app_client, wait_for_job

FILLER = ("The figures were reviewed by the audit committee, compared with the plan approved in the spring, "
          "and discussed with the works council before publication.")


def write_docx(path: Path, *, company: str | None = "Orion Freight GmbH") -> list[str]:
    """A report with a title, headings of levels 1–3, paragraphs and a table; returns its units in order."""
    d = docx.Document()
    cp = d.core_properties
    cp.title, cp.author, cp.subject = "Orion Freight Annual Review 2023", "Marta Keller", "Annual review"
    cp.keywords, cp.comments = "logistics, rail; terminals", "Yearly review of the inland freight business"
    cp.created, cp.modified = dt.datetime(2024, 2, 15, 9, 30), dt.datetime(2024, 2, 20, 17, 0)
    units: list[str] = []

    def heading(text: str, level: int) -> None:
        d.add_heading(text, level)
        units.append(text)

    def para(text: str) -> None:
        d.add_paragraph(text)
        units.append(text)

    heading("Orion Freight 2023 Annual Review", 0)
    para(f"Orion Freight runs three inland container terminals in Central Europe. {FILLER}")
    heading("Operations", 1)
    para(f"Orion Freight moved 4.2 million containers through its inland terminals in 2023. {FILLER}")
    heading("Terminal volumes", 2)
    para(f"Volumes by terminal, in thousands of containers, with average crane utilisation. {FILLER}")
    rows = [("Terminal", "Containers", "Utilisation"), ("Duisburg", "1,840", "91%"), ("Linz", "1,310", "84%"),
            ("Brno", "1,050", "77%")]
    table = d.add_table(rows=len(rows), cols=3)
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
        units.append(" | ".join(row))
    heading("Rail connections", 3)
    para(f"Daily shuttle trains connect Duisburg with the seaports of Rotterdam and Antwerp. {FILLER}")
    heading("Finance", 1)
    para(f"Revenue rose to 612 million euros while the operating margin held at 9.4 percent. {FILLER}")
    heading("Debt", 2)
    para(f"A green bond of 150 million euros refinanced the terminal loans due in 2025. {FILLER}")
    buf = io.BytesIO()
    d.save(buf)
    path.write_bytes(_with_company(buf.getvalue(), company) if company else buf.getvalue())
    return units


def _with_company(data: bytes, company: str) -> bytes:
    """The package with ``<Company>`` set in docProps/app.xml (python-docx does not write it)."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "docProps/app.xml":
                assert b"<Company/>" in body
                body = body.replace(b"<Company/>", f"<Company>{company}</Company>".encode())
            dst.writestr(info, body)
    return out.getvalue()


HTML = f"""<!DOCTYPE html>
<html lang="en-GB"><head><meta charset="utf-8">
<title>Lumen Bakeries Store Report 2022</title>
<meta name="description" content="How the Lumen bakery chain grew its stores by region">
<meta name="author" content="Priya Natarajan">
<meta name="keywords" content="bakeries, retail, stores">
<meta name="dcterms.created" content="2023-01-10">
<style>body {{ font-family: serif }} .secretstyle {{ color: red }}</style>
<script>var trackingPixel = "collect-visitor-data";</script>
</head><body>
<header><a href="/">Lumen home</a> <a href="/careers">Careers portal</a></header>
<nav><ul><li>Shop locator</li><li>Gift vouchers</li></ul></nav>
<main><article>
<header><h1>Store report</h1></header>
<p>Lumen Bakeries ended 2022 with 118 stores across four regions. {FILLER}</p>
<h2>Regions</h2>
<p>Store counts and bread sales by region at the end of the year. {FILLER}</p>
<table><caption>Stores by region</caption>
<thead><tr><th>Region</th><th>Stores</th><th>Sales</th></tr></thead>
<tbody><tr><td>Northshire</td><td>42</td><td>8.1m loaves</td></tr>
<tr><td>Eastvale</td><td>31</td><td>6.0m loaves</td></tr>
<tr><td>Southmoor</td><td>27</td><td>5.2m loaves</td></tr></tbody></table>
<h3>Northshire openings</h3>
<p>Nine new Northshire shops opened beside railway stations in the autumn. {FILLER}</p>
<h2>Outlook</h2>
<p>The chain plans a sourdough line for supermarkets in 2023.<br>Flour prices remain the main risk. {FILLER}</p>
</article></main>
<aside>Subscribe to our newsletter for weekly offers</aside>
<noscript>Enable scripts for the store map</noscript>
<footer>Copyright Lumen Bakeries plc</footer>
</body></html>
"""


async def _run_job(rt: Runtime, folder: Path) -> Any:
    coll = await ensure_collection(rt.pool, "default")
    return await ingest(rt, folder, collection_id=coll.id)


async def test_word_and_html_become_trees_with_metadata_and_cited_answers(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    units = write_docx(folder / "orion.docx")
    (folder / "lumen.html").write_text(HTML, encoding="utf-8")
    job = await _run_job(runtime, folder)
    assert job.counts == {"ok": 2}, [(i.name, i.error) for i in job.items]
    async with app_client(create_app(runtime=runtime, run_worker=False)) as client:
        docs = {d["name"]: d for d in (await client.get("/kb/documents")).json()}
        word, page = docs["orion.docx"], docs["lumen.html"]
        assert (word["file_type"], page["file_type"]) == ("docx", "html")

        # metadata from the core properties and app.xml / from <title>, <meta> and lang
        assert word["title"] == "Orion Freight Annual Review 2023"
        meta = word["metadata"]
        assert (meta["author"], meta["company"], meta["subject"]) == ("Marta Keller", "Orion Freight GmbH",
                                                                       "Annual review")
        assert meta["keywords"] == ["logistics", "rail", "terminals"]
        assert (meta["created"], meta["modified"], meta["year"]) == ("2024-02-15", "2024-02-20", 2024)
        assert page["title"] == "Lumen Bakeries Store Report 2022"
        meta = page["metadata"]
        assert meta["description"] == "How the Lumen bakery chain grew its stores by region"
        assert (meta["author"], meta["keywords"]) == ("Priya Natarajan", ["bakeries", "retail", "stores"])
        assert (meta["created"], meta["year"], meta["language"]) == ("2023-01-10", 2023, "en-GB")

        # the Word tree: Title style → root, Heading 1–3 nested below it, in paragraph units
        tree = (await client.get(f"/kb/documents/{word['id']}")).json()["tree"]
        by_title = {n["title"]: n for n in tree}
        assert [n["title"] for n in tree] == ["Orion Freight 2023 Annual Review", "Operations", "Terminal volumes",
                                               "Rail connections", "Finance", "Debt"]
        assert [n["level"] for n in tree] == [1, 2, 3, 4, 2, 3]
        parent = {n["title"]: next((p["title"] for p in tree if p["node_id"] == n["parent_id"]), None) for n in tree}
        assert parent["Rail connections"] == "Terminal volumes" and parent["Debt"] == "Finance"
        assert {n["unit"] for n in tree} == {"paragraph"}
        assert word["page_count"] == len(units)
        volumes = by_title["Terminal volumes"]
        row = units.index("Duisburg | 1,840 | 91%") + 1  # 1-based paragraph number of the table row
        assert volumes["start_index"] == units.index("Terminal volumes") + 1
        assert volumes["start_index"] < row <= volumes["end_index"]

        # the HTML tree: h1–h3; navigation, page header/footer, aside, scripts and styles are gone
        tree = (await client.get(f"/kb/documents/{page['id']}")).json()["tree"]
        assert [(n["title"], n["level"]) for n in tree] == [("Store report", 1), ("Regions", 2),
                                                             ("Northshire openings", 3), ("Outlook", 2)]
        text = " ".join(await runtime.pool.fetchval(
            "SELECT array_agg(text) FROM chunks WHERE document_id = $1", page["id"]))
        assert "Northshire | 42 | 8.1m loaves" in text and "Stores by region" in text
        for dropped in ("trackingPixel", "secretstyle", "Careers portal", "Gift vouchers", "newsletter",
                        "Enable scripts", "Copyright Lumen"):
            assert dropped not in text, dropped

        # a table row is retrievable, and the answer cites the document in paragraph units
        r = await client.post("/kb/query", json={"query": "How many containers did the Duisburg terminal handle?"})
        assert r.status_code == 200, r.text
        body = r.json()
        cited = [c for c in body["citations"] if c["doc_name"] == "orion.docx" and "Duisburg | 1,840" in c["text"]]
        assert cited, body["citations"]
        assert cited[0]["unit"] == "paragraph" and cited[0]["pages"][0] <= row <= cited[0]["pages"][1]
        assert f"[{cited[0]['marker']}]" in body["answer"]
        r = await client.post("/kb/query", json={"query": "How many Lumen stores were in the Eastvale region?"})
        html_cites = [c for c in r.json()["citations"] if c["doc_name"] == "lumen.html"]
        assert any("Eastvale | 31" in c["text"] for c in html_cites), r.json()["citations"]


async def test_uploads_accept_word_and_html(runtime: Runtime, tmp_path: Path) -> None:
    write_docx(tmp_path / "up.docx", company=None)
    async with app_client(create_app(runtime=runtime, run_worker=True)) as client:
        for name, content in (("report.docx", (tmp_path / "up.docx").read_bytes()),
                              ("page.htm", HTML.encode())):
            r = await client.post("/kb/admin/documents", files={"file": (name, content)},
                                  data={"collection": "default"})
            assert r.status_code == 202, r.text
            job = await wait_for_job(client, r.json()["job_id"])
            assert job["counts"] == {"ok": 1}, job
        r = await client.post("/kb/admin/documents", files={"file": ("old.doc", b"\xd0\xcf\x11\xe0")})
        assert r.status_code == 400 and ".docx" in r.json()["detail"]
        types = sorted(d["file_type"] for d in (await client.get("/kb/documents")).json())
        assert types == ["docx", "html"]


@pytest.fixture
def one_mb_files(kb_env: dict[str, str], set_env: SetEnv) -> None:
    """KB_MAX_FILE_MB=1, set before the runtime reads its settings."""
    set_env(KB_MAX_FILE_MB="1")


def _bad_files(folder: Path) -> dict[str, str]:
    """One file per kind of bad Word/HTML input; returns name → expected reason fragment."""
    (folder / "random.docx").write_bytes(bytes(range(256)) * 16)
    with zipfile.ZipFile(folder / "not-word.docx", "w") as zf:
        zf.writestr("readme.txt", "a zip file, but no Word document inside")
    (folder / "locked.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 2048)
    (folder / "empty.docx").write_bytes(b"")
    (folder / "empty.html").write_bytes(b"")
    (folder / "script-only.html").write_text("<html><head><script>alert('hi')</script><style>p{}</style></head>"
                                             "<body><script>document.write('x')</script><nav>Menu</nav></body></html>")
    (folder / "binary.htm").write_bytes(b"<html>" + bytes(range(256)) * 64)
    (folder / "huge.html").write_text("<html><body>" + "<p>Another paragraph of text.</p>\n" * 40000 + "</body></html>")
    src = io.BytesIO()
    docx.Document().save(src)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(folder / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
        zout.writestr("word/media/padding.bin", b"\x00" * (3 * 2**20))  # 3 MB unpacked, a few KB packed
    assert (folder / "bomb.docx").stat().st_size < 2**20 and (folder / "huge.html").stat().st_size > 2**20
    return {
        "random.docx": "not a zip", "not-word.docx": "malformed .docx", "locked.docx": "password-protected",
        "empty.docx": "empty", "empty.html": "empty", "script-only.html": "no readable text",
        "binary.htm": "binary", "huge.html": "too large", "bomb.docx": "unpacked .docx too large",
    }


async def test_bad_word_and_html_fail_alone_with_reasons(one_mb_files: None, runtime: Runtime,
                                                         tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    expected = _bad_files(folder)
    write_docx(folder / "good.docx")
    (folder / "good.html").write_text(HTML, encoding="utf-8")
    job = await _run_job(runtime, folder)
    assert job.status == "done"
    items = {i.name: i for i in job.items}
    for name, fragment in expected.items():
        assert items[name].status == "failed", (name, items[name])
        assert items[name].error and fragment in items[name].error.lower(), (name, items[name].error)
    assert items["good.docx"].status == "ok" and items["good.html"].status == "ok"
    names = {r["name"] for r in await runtime.pool.fetch("SELECT name FROM documents")}
    assert names == {"good.docx", "good.html"}
    orphans = await runtime.pool.fetchval(
        "SELECT count(*) FROM nodes n LEFT JOIN documents d ON d.id = n.document_id WHERE d.id IS NULL")
    assert orphans == 0


def test_word_paragraph_that_looks_like_markdown_stays_a_paragraph(kb_env: dict[str, str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Headings come from styles, not from text: '# …', '---' and '```' paragraphs are body text."""
    monkeypatch.setenv("KB_MIN_NODE_TOKEN", "0")  # keep the small subsection a node of its own
    get_settings.cache_clear()
    d = docx.Document()
    d.add_heading("Release notes", 1)
    for text in ("# not a heading", "---", "```", "Setext underline follows", "==="):
        d.add_paragraph(text)
    d.add_heading("Known issues", 2)
    d.add_paragraph("Printing fails on A3 paper.", style="List Bullet")
    buf = io.BytesIO()
    d.save(buf)
    parsed = parse_file(buf.getvalue(), "docx")
    assert pickle.loads(pickle.dumps(parsed)) == parsed  # crosses the parser process boundary
    assert parsed.text is not None and parsed.text.split("\n") == [
        "# Release notes", "# not a heading", "---", "```", "Setext underline follows", "===",
        "## Known issues", "- Printing fails on A3 paper."]
    from ingest.pipeline import build_tree
    from kb.core.providers.chat import OfflineChatModel

    tree = asyncio.run(build_tree(parsed, OfflineChatModel(), get_settings().ingest, "notes"))
    assert [(n.title, n.level, n.start, n.end) for n in tree.nodes] == [("Release notes", 1, 1, 8),
                                                                         ("Known issues", 2, 7, 8)]
    assert all(n.unit == "paragraph" for n in tree.nodes)


def test_html_encoding_declared_or_legacy(tmp_path: Path) -> None:
    """A declared charset is honoured; an undeclared page that is not UTF-8 is read as windows-1252."""
    declared = parse_file('<meta charset="iso-8859-15"><h1>Prix</h1><p>Caf\u00e9 \u20ac 3</p>'.encode("iso-8859-15"),
                          "html")
    legacy = parse_file("<h1>Prix</h1><p>Caf\u00e9 \u20ac 3</p>".encode("windows-1252"), "html")
    utf8 = parse_file("<h1>Prix</h1><p>Caf\u00e9 \u20ac 3</p>".encode(), "html")
    assert declared.text == legacy.text == utf8.text == "# Prix\nCaf\u00e9 \u20ac 3"
    assert declared.outline and legacy.outline and utf8.outline
    assert not declared.outline.warnings and not utf8.outline.warnings
    assert any("windows-1252" in w for w in legacy.outline.warnings)
