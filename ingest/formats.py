"""The file formats ingest reads: one :class:`Format` entry per format, the one list of what is supported.

An entry names the format (stored as ``documents.file_type``), its file suffixes, the unit its trees
cite (``"page"``, ``"line"`` or ``"paragraph"``), how a file is read (in a worker process) and how the
parsed file becomes a tree. Uploads, folder jobs, the parser and the tree step all go through
:data:`FORMATS`; adding a format means one entry here and its reader/tree builder module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ingest.docx_read import read_docx
from ingest.front_matter import parse_front_matter
from ingest.html_read import read_html
from ingest.markdown_tree import build_markdown_tree, build_text_tree, decode_text_file
from ingest.outline import UNIT as OUTLINE_UNIT
from ingest.outline import Outline, outline_tree
from ingest.parse_progress import PageCounter
from ingest.pdf_read.ocr import engine_for
from ingest.pdf_read.spans import EdgeLine
from ingest.pdf_tree import ParsedPdf, build_pdf_tree, read_pdf
from ingest.printed import PrintedLabels
from kb.core.errors import IngestError
from kb.core.providers import ChatModel
from kb.core.settings import IngestSettings, get_settings
from kb.core.types import DocumentTree

if TYPE_CHECKING:
    import pymupdf


class ParsedFile(msgspec.Struct, frozen=True):
    """What the parser process returns (picklable)."""

    kind: str
    pdf: ParsedPdf | None = None
    text: str | None = None  # Markdown/text as read; Word/HTML: the outline's one-line-per-unit rendering
    outline: Outline | None = None
    front_matter: dict[str, Any] = {}
    warnings: tuple[str, ...] = ()
    printed_pages: dict[int, str] | None = None  # a PDF's printed page labels (ingest.printed); None otherwise


Reader = Callable[[bytes | Path, int | None, PageCounter | None], ParsedFile]
"""``(file path or bytes, max_bytes, pages read so far) -> ParsedFile``; runs in a worker process, raises
``IngestError``. A reader of pages counts them on the counter as it reads them."""

TreeBuilder = Callable[[ParsedFile, ChatModel, IngestSettings, str], Awaitable[DocumentTree]]
"""``(parsed, chat, settings, title) -> DocumentTree``."""


@dataclass(frozen=True)
class Format:
    """One file format: its suffixes, the unit its trees cite, its reader and its tree builder."""

    name: str
    suffixes: tuple[str, ...]
    unit: str
    read: Reader
    build_tree: TreeBuilder


def _file_bytes(source: bytes | Path) -> bytes:
    if isinstance(source, bytes):
        return source
    try:
        return source.read_bytes()
    except FileNotFoundError as exc:
        raise IngestError("file vanished before it could be read") from exc


# ---------------------------------------------------------------------------- readers


def _read_pdf(source: bytes | Path, max_bytes: int | None, counter: PageCounter | None = None) -> ParsedFile:
    """The PDF's pages (its IngestError says what is wrong with the file) and, in the same pass, the numbers
    its pages print (``ingest.printed``; left to the first query citing it when they cannot be read)."""
    printed: PrintedLabels | None = PrintedLabels()

    def on_page(number: int, total: int, page: pymupdf.Page | None, edges: tuple[EdgeLine, ...]) -> None:
        nonlocal printed
        if printed is not None and page is not None:
            try:
                printed.add(page, edges)
            except (RuntimeError, ValueError):
                printed = None
        if counter is not None:
            counter.write(number, total)

    settings = get_settings().ingest  # in the parser process: the same KB_* variables as its parent
    ocr = engine_for(settings.ocr, settings.ocr_languages.split("+"), settings.ocr_dpi)
    pdf = read_pdf(source, on_page=on_page, ocr=ocr)
    return ParsedFile(kind="pdf", pdf=pdf, printed_pages=printed.labels if printed is not None else None)


def _read_markdown(source: bytes | Path, max_bytes: int | None, counter: PageCounter | None = None) -> ParsedFile:
    text, warnings = decode_text_file(_file_bytes(source))
    front, _ = parse_front_matter(text)
    return ParsedFile(kind="markdown", text=text, front_matter=front, warnings=tuple(warnings))


def _read_text(source: bytes | Path, max_bytes: int | None, counter: PageCounter | None = None) -> ParsedFile:
    text, warnings = decode_text_file(_file_bytes(source))
    return ParsedFile(kind="text", text=text, front_matter={}, warnings=tuple(warnings))


def _outline_file(kind: str, outline: Outline) -> ParsedFile:
    return ParsedFile(kind=kind, text=outline.render(), outline=outline, front_matter=dict(outline.properties))


def _read_docx(source: bytes | Path, max_bytes: int | None, counter: PageCounter | None = None) -> ParsedFile:
    return _outline_file("docx", read_docx(_file_bytes(source), max_bytes=max_bytes))


def _read_html(source: bytes | Path, max_bytes: int | None, counter: PageCounter | None = None) -> ParsedFile:
    return _outline_file("html", read_html(_file_bytes(source)))


# ---------------------------------------------------------------------------- tree builders


async def _pdf_tree(parsed: ParsedFile, chat: ChatModel, settings: IngestSettings, title: str) -> DocumentTree:
    assert parsed.pdf is not None
    return await build_pdf_tree(parsed.pdf, chat, settings)


async def _markdown_tree(parsed: ParsedFile, chat: ChatModel, settings: IngestSettings, title: str) -> DocumentTree:
    return build_markdown_tree(parsed.text or "", settings, title=title)


async def _text_tree(parsed: ParsedFile, chat: ChatModel, settings: IngestSettings, title: str) -> DocumentTree:
    return build_text_tree(parsed.text or "", settings, title=title)


async def _outline_tree(parsed: ParsedFile, chat: ChatModel, settings: IngestSettings, title: str) -> DocumentTree:
    assert parsed.outline is not None
    return outline_tree(parsed.outline, settings, title=title, mode=parsed.kind)


# ---------------------------------------------------------------------------- the registry


FORMATS: Mapping[str, Format] = {f.name: f for f in (
    Format("pdf", (".pdf",), "page", _read_pdf, _pdf_tree),
    Format("markdown", (".md", ".markdown"), "line", _read_markdown, _markdown_tree),
    Format("text", (".txt",), "line", _read_text, _text_tree),
    Format("docx", (".docx",), OUTLINE_UNIT, _read_docx, _outline_tree),
    Format("html", (".html", ".htm"), OUTLINE_UNIT, _read_html, _outline_tree),
)}
"""Format name → format: the one list of formats (uploads, folder jobs, the parser and the tree step read it)."""

SUPPORTED: Mapping[str, str] = {s: f.name for f in FORMATS.values() for s in f.suffixes}
"""File suffix (lowercase, with the dot) → format name."""


def format_of(path: Path | str) -> Format | None:
    """The format of a file by its suffix (case-insensitive), or None when it is not supported."""
    name = SUPPORTED.get(Path(path).suffix.lower())
    return FORMATS[name] if name is not None else None


def parse_file(source: str | bytes, kind: str, max_bytes: int | None = None,
               counter: PageCounter | None = None) -> ParsedFile:
    """Parse a file (a path, or its bytes) of format ``kind`` into pages, text or an outline. Runs in a
    worker process; raises ``IngestError``. ``max_bytes`` bounds what a .docx may unpack to; ``counter`` hears
    the pages read so far (PDF)."""
    fmt = FORMATS.get(kind)
    if fmt is None:
        raise IngestError(f"unsupported file type {kind!r}")
    try:
        return fmt.read(source if isinstance(source, bytes) else Path(source), max_bytes, counter)
    finally:
        if counter is not None:
            counter.close()


async def build_tree(parsed: ParsedFile, chat: ChatModel, settings: IngestSettings, title: str) -> DocumentTree:
    """The tree of a parsed file, by its format's builder, with the reader's warnings added."""
    tree = await FORMATS[parsed.kind].build_tree(parsed, chat, settings, title)
    if parsed.warnings:
        tree = msgspec.structs.replace(tree, warnings=tuple(tree.warnings) + parsed.warnings)
    return tree
