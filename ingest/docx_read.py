"""Word ``.docx`` → :class:`~ingest.outline.Outline`, read with python-docx.

Body paragraphs and tables in document order, content controls (``w:sdt``, e.g. cover pages)
included; headers, footers, footnotes and table-of-contents entries are left out. A paragraph is a
heading when its style (or a style it is based on) is "Heading N" — or "Title", level 0 — or it
carries an outline level. List paragraphs become ``- item``; each table row is one unit with its
cells joined by ``" | "`` (merged cells once). Metadata comes from the core properties (title,
author, subject, keywords, category, created/modified) and ``docProps/app.xml`` (company).
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

import docx
import structlog
from docx.document import Document as DocxDocument
from docx.opc.exceptions import PackageNotFoundError
from docx.oxml.ns import qn
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph
from lxml import etree

from ingest.files import too_large
from ingest.outline import (
    MAX_HEADING_LEVEL,
    Block,
    Outline,
    date_fields,
    keyword_list,
    make_outline,
    one_line,
    table_row,
)
from kb.errors import IngestError

log = structlog.get_logger("ingest.docx_read")

CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""An OLE compound file: a legacy ``.doc``, or an encrypted (password-protected) Office document."""
_HEADING = re.compile(r"^heading\s*([1-9])$", re.I)
_TOC = re.compile(r"^toc(?:\s*\d|\s+heading)?$", re.I)
_APP_XML = "docProps/app.xml"
_STREAM_NAME = re.compile(r"file '<[^']*>' ")  # python-docx names the in-memory stream in some messages
_XML = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
_BROKEN = (PackageNotFoundError, KeyError, ValueError, AttributeError, zipfile.BadZipFile, zlib.error,
           etree.XMLSyntaxError, EOFError)


def read_docx(data: bytes, *, max_bytes: int | None = None) -> Outline:
    """The outline of a ``.docx`` file's bytes. Raises ``IngestError`` with the reason it cannot be read."""
    if not data:
        raise IngestError("empty file (0 bytes)")
    if data.startswith(CFB_MAGIC):
        raise IngestError("password-protected or legacy .doc file (an OLE compound file, not a .docx package); "
                          "remove the password or save it as .docx")
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise IngestError("malformed .docx: not a ZIP package")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
            if max_bytes is not None and unpacked > max_bytes:
                raise IngestError(too_large(unpacked, max_bytes, "unpacked .docx"))
            app_xml = zf.read(_APP_XML) if _APP_XML in zf.namelist() else None
        document = docx.Document(io.BytesIO(data))
        blocks = list(_blocks(document))
    except _BROKEN as exc:
        raise IngestError(f"malformed .docx: {_reason(exc)}") from exc
    warnings: list[str] = []
    properties = _properties(document, app_xml, warnings)
    return make_outline(blocks, properties, warnings=warnings, what=".docx document")


def _reason(exc: BaseException) -> str:
    text = one_line(_STREAM_NAME.sub("", str(exc))) or type(exc).__name__
    if isinstance(exc, KeyError):
        return f"a required part is missing ({text})"
    return text[:200]


# --------------------------------------------------------------------------- body


def _blocks(document: DocxDocument) -> Iterator[Block]:
    body = document.element.body
    yield from _container_blocks(body, document._body)


def _container_blocks(element: Any, parent: Any) -> Iterator[Block]:
    """Paragraphs and tables of ``element`` in order, descending into content controls."""
    for child in element.iterchildren():
        if child.tag == qn("w:p"):
            block = _paragraph_block(Paragraph(child, parent))
            if block is not None:
                yield block
        elif child.tag == qn("w:tbl"):
            yield from _table_blocks(Table(child, parent))
        elif child.tag == qn("w:sdt"):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _container_blocks(content, parent)


def _paragraph_block(p: Paragraph) -> Block | None:
    text = one_line(p.text)
    if not text:
        return None
    style = p.style
    if style is not None and _TOC.match(style.name or ""):
        return None  # a table-of-contents entry repeats a heading
    level = _heading_level(p)
    if level is not None:
        return Block(text=text, level=level)
    if _is_list_item(p):
        return Block(text=f"- {text}")
    return Block(text=text)


def _heading_level(p: Paragraph) -> int | None:
    """0 for "Title", N for "Heading N" (style or base style), else the outline level; None for body text."""
    own = _outline_level(p._p.pPr)
    if own is not None:
        return own or None
    style, depth = p.style, 0
    while style is not None and depth < 10:
        name = style.name or ""
        if name.lower() == "title":
            return 0
        if m := _HEADING.match(name):
            return min(int(m.group(1)), MAX_HEADING_LEVEL)
        level = _outline_level(style.element.pPr)
        if level is not None:
            return level or None
        style, depth = style.base_style, depth + 1
    return None


def _outline_level(ppr: Any) -> int | None:
    """``w:outlineLvl`` 0–8 → heading level 1–6; 9 (body text) → 0; absent → None."""
    if ppr is None:
        return None
    el = ppr.find(qn("w:outlineLvl"))
    if el is None:
        return None
    try:
        value = int(el.get(qn("w:val"), "9"))
    except ValueError:
        return None
    return 0 if value >= 9 else min(value + 1, MAX_HEADING_LEVEL)


def _is_list_item(p: Paragraph) -> bool:
    ppr = p._p.pPr
    if ppr is not None and ppr.find(qn("w:numPr")) is not None:
        return True
    return bool(p.style is not None and (p.style.name or "").lower().startswith("list"))


def _table_blocks(table: Table) -> Iterator[Block]:
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a horizontally merged cell is returned once per grid column
                continue
            seen.add(id(cell._tc))
            cells.append(_cell_text(cell))
        text = table_row(cells)
        if text:
            yield Block(text=text)


def _cell_text(cell: _Cell) -> str:
    parts: list[str] = []
    for item in cell.iter_inner_content():
        if isinstance(item, Paragraph):
            parts.append(item.text)
        else:  # a nested table: its rows, separated by semicolons
            parts.append("; ".join(b.text for b in _table_blocks(item)))
    return one_line(" ".join(parts))


# --------------------------------------------------------------------------- properties


def _properties(document: DocxDocument, app_xml: bytes | None, warnings: list[str]) -> dict[str, Any]:
    """Core properties and the company of ``docProps/app.xml`` as front-matter keys."""
    out: dict[str, Any] = {}
    try:
        cp = document.core_properties
        out.update(title=cp.title, author=cp.author, subject=cp.subject, keywords=keyword_list(cp.keywords),
                   category=cp.category, description=cp.comments, language=cp.language)
        out.update(date_fields(cp.created, cp.modified))
    except _BROKEN as exc:
        warnings.append(f"document properties unreadable ({_reason(exc)})")
        log.warning("ingest.docx_properties_unreadable", error=_reason(exc))
    if app_xml:
        try:
            root = etree.fromstring(app_xml, parser=_XML)
            company = root.findtext("{*}Company")
            if company:
                out["company"] = company
        except etree.XMLSyntaxError as exc:
            warnings.append(f"{_APP_XML} unreadable ({_reason(exc)})")
            log.warning("ingest.docx_app_xml_unreadable", error=_reason(exc))
    return out
