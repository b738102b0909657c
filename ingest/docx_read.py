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
from dataclasses import dataclass
from typing import Any

import docx
import structlog
from docx.document import Document as DocxDocument
from docx.enum.style import WD_STYLE_TYPE
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
from kb.core.errors import IngestError

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


@dataclass(frozen=True)
class _StyleInfo:
    """What a paragraph style means for the outline, worked out once per document."""

    toc: bool = False  # a table-of-contents entry (left out)
    level: int | None = None  # heading level (0: title), from the style or a style it is based on
    is_list: bool = False


class _Styles:
    """The paragraph styles of a document by id, each resolved once (python-docx looks a paragraph's style
    up by scanning all styles, and the default style on every paragraph without one: paragraphs × styles)."""

    def __init__(self, document: DocxDocument) -> None:
        styles = [s for s in document.styles if s.type == WD_STYLE_TYPE.PARAGRAPH]
        by_id = {s.style_id: s for s in styles if s.style_id}
        self._info = {style_id: _style_info(style, by_id) for style_id, style in by_id.items()}
        default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
        self._default = _style_info(default, by_id) if default is not None else _StyleInfo()

    def of(self, p: Paragraph) -> _StyleInfo:
        """The paragraph's style (its own ``w:pStyle``, or the default style when it has none or an unknown one)."""
        return self._info.get(p._p.style or "", self._default)


def _style_info(style: Any, by_id: dict[str, Any]) -> _StyleInfo:
    name = style.name or ""
    return _StyleInfo(toc=bool(_TOC.match(name)), level=_style_level(style, by_id),
                      is_list=name.lower().startswith("list"))


def _style_level(style: Any, by_id: dict[str, Any]) -> int | None:
    """0 for "Title", N for "Heading N" (the style or one it is based on), else its outline level; None for
    body text."""
    depth = 0
    while style is not None and depth < 10:
        name = style.name or ""
        if name.lower() == "title":
            return 0
        if m := _HEADING.match(name):
            return min(int(m.group(1)), MAX_HEADING_LEVEL)
        level = _outline_level(style.element.pPr)
        if level is not None:
            return level or None
        style, depth = by_id.get(style.element.basedOn_val or ""), depth + 1
    return None


def _blocks(document: DocxDocument) -> Iterator[Block]:
    body = document.element.body
    yield from _container_blocks(body, document._body, _Styles(document))


def _container_blocks(element: Any, parent: Any, styles: _Styles) -> Iterator[Block]:
    """Paragraphs and tables of ``element`` in order, descending into content controls."""
    for child in element.iterchildren():
        if child.tag == qn("w:p"):
            block = _paragraph_block(Paragraph(child, parent), styles)
            if block is not None:
                yield block
        elif child.tag == qn("w:tbl"):
            yield from _table_blocks(Table(child, parent))
        elif child.tag == qn("w:sdt"):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _container_blocks(content, parent, styles)


def _paragraph_block(p: Paragraph, styles: _Styles) -> Block | None:
    text = one_line(p.text)
    if not text:
        return None
    style = styles.of(p)
    if style.toc:
        return None  # a table-of-contents entry repeats a heading
    level = _heading_level(p, style)
    if level is not None:
        return Block(text=text, level=level)
    if _is_list_item(p, style):
        return Block(text=f"- {text}")
    return Block(text=text)


def _heading_level(p: Paragraph, style: _StyleInfo) -> int | None:
    """The paragraph's own outline level, else its style's heading level; None for body text."""
    own = _outline_level(p._p.pPr)
    if own is not None:
        return own or None
    return style.level


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


def _is_list_item(p: Paragraph, style: _StyleInfo) -> bool:
    ppr = p._p.pPr
    if ppr is not None and ppr.find(qn("w:numPr")) is not None:
        return True
    return style.is_list


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
