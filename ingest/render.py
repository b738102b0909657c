"""Evidence previews of stored documents: a PDF page as a PNG with a chunk's text highlighted (cached on
disk), or the cited lines of any other source (Markdown/text lines; the paragraphs of a .docx or HTML file,
which are the lines of the parser's rendering). Sources are read through the same confinement as their
ingest and must still have the bytes that were ingested (sha256)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from pathlib import Path

import asyncpg
import msgspec
import pymupdf
import structlog

from ingest.files import read_confined
from ingest.pipeline import parse_file
from kb.errors import ConflictError, IngestError, NotFoundError, ValidationError

log = structlog.get_logger("ingest.render")

PAGE_DPI = 110  # readable text on a laptop screen; an A4 page is about 910×1290 px
MAX_SIDE_PX = 2400  # a poster-sized page is scaled down to this
MAX_LINES = 400  # lines returned for one Markdown/text preview
_FRAGMENT_MIN, _FRAGMENT_MAX, _MAX_FRAGMENTS = 12, 90, 60
_HIGHLIGHT_RGB = (1.0, 0.85, 0.2)

SQL_DOCUMENT_SOURCE = """
SELECT d.id, d.name, d.source_path, d.sha256, d.file_type, d.page_count,
       (SELECT j.allowed_root FROM ingest_job_items i JOIN ingest_jobs j ON j.id = i.job_id
         WHERE i.document_id = d.id ORDER BY i.id DESC LIMIT 1) AS allowed_root
  FROM documents d WHERE d.id = $1
"""
SQL_CHUNK = "SELECT id, document_id, text, page, COALESCE(page_end, page) AS page_end FROM chunks WHERE id = $1"
SQL_NODE_OF_CHUNK = """
SELECT n.start_index, n.end_index FROM chunks c
  JOIN nodes n ON n.document_id = c.document_id AND n.node_id = c.node_id WHERE c.id = $1
"""


class SourceDoc(msgspec.Struct, frozen=True):
    doc_id: int
    name: str
    source_path: str
    sha256: str
    file_type: str
    page_count: int
    allowed_root: str | None

    @property
    def is_pdf(self) -> bool:
        return self.file_type == "pdf"


class ChunkRef(msgspec.Struct, frozen=True):
    chunk_id: int
    doc_id: int
    text: str
    page: int | None
    page_end: int | None


class Marks(msgspec.Struct, frozen=True):
    """Where a page image is highlighted (kept beside the cached PNG)."""

    highlights: int = 0  # rectangles marked (0: no chunk asked, or its text was not found on the page)
    top: float | None = None  # top of the first one, 0..1 of the page height (the viewer scrolls there)


class PageImage(msgspec.Struct, frozen=True):
    png: bytes
    marks: Marks
    cached: bool


class SourceLine(msgspec.Struct, frozen=True):
    n: int
    text: str
    cited: bool


class SourceLines(msgspec.Struct, frozen=True):
    document_id: int
    name: str
    start: int
    end: int
    total: int
    lines: list[SourceLine]


async def load_source(pool: asyncpg.Pool, doc_id: int) -> SourceDoc:
    row = await pool.fetchrow(SQL_DOCUMENT_SOURCE, doc_id)
    if row is None:
        raise NotFoundError(f"document {doc_id} does not exist")
    return SourceDoc(doc_id=row["id"], name=row["name"], source_path=row["source_path"], sha256=row["sha256"],
                     file_type=row["file_type"], page_count=row["page_count"], allowed_root=row["allowed_root"])


async def load_chunk(pool: asyncpg.Pool, doc: SourceDoc, chunk_id: int) -> ChunkRef:
    """The chunk ``chunk_id`` of ``doc``; one of another document is not found there."""
    row = await pool.fetchrow(SQL_CHUNK, chunk_id)
    if row is None:
        raise NotFoundError(f"chunk {chunk_id} does not exist")
    if row["document_id"] != doc.doc_id:
        raise NotFoundError(f"chunk {chunk_id} is not part of document {doc.doc_id}")
    return ChunkRef(chunk_id=row["id"], doc_id=row["document_id"], text=row["text"], page=row["page"],
                    page_end=row["page_end"])


def check_page(doc: SourceDoc, page: int) -> None:
    """``page`` is a 1-based physical page of a PDF document."""
    if not doc.is_pdf:
        raise NotFoundError(f"document {doc.doc_id} is a {doc.file_type} file without pages; "
                            f"its cited lines are at /kb/documents/{doc.doc_id}/lines")
    if page < 1:
        raise ValidationError(f"page must be 1 or more, got {page}")
    if page > doc.page_count:
        raise NotFoundError(f"page {page} does not exist: document {doc.doc_id} has {doc.page_count} pages")


def read_source(doc: SourceDoc) -> bytes:
    """The ingested bytes of ``doc``, read confined to its job's folder; gone or changed files are errors."""
    try:
        data = read_confined(Path(doc.source_path), Path(doc.allowed_root) if doc.allowed_root else None)
    except IngestError as exc:
        raise NotFoundError(f"the source file of document {doc.doc_id} cannot be read: {exc.detail}") from exc
    if hashlib.sha256(data).hexdigest() != doc.sha256:
        raise ConflictError(f"the source file of document {doc.doc_id} changed since it was ingested; "
                            "re-ingest it to preview its pages")
    return data


def fragments(text: str) -> list[str]:
    """Search strings for a chunk's text: its lines and sentences, cut to what a page search can match."""
    out: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", line.lstrip("#>*-| ")).strip()
        for part in re.split(r"(?<=[.;:!?])\s+|\s+\|\s+", line):
            part = part.strip(" |")
            while len(part) >= _FRAGMENT_MIN and len(out) < _MAX_FRAGMENTS:
                cut = part[:_FRAGMENT_MAX]
                if len(part) > _FRAGMENT_MAX and " " in cut:
                    cut = cut.rsplit(" ", 1)[0]
                out.append(cut)
                part = part[len(cut):].strip()
    return out


def render_page(pdf: bytes, page: int, highlight: str | None, dpi: int = PAGE_DPI) -> tuple[bytes, Marks]:
    """PNG of 1-based ``page`` with every fragment of ``highlight`` found on it marked."""
    with pymupdf.open(stream=pdf, filetype="pdf") as pdf_doc:
        pg = pdf_doc[page - 1]
        rects: list[pymupdf.Rect] = []
        for frag in fragments(highlight or ""):  # a fragment repeated in the chunk is marked once
            rects.extend(r for r in pg.search_for(frag) if not any(r.intersects(o) for o in rects))
        if rects:
            annot = pg.add_highlight_annot(rects)
            annot.set_colors(stroke=_HIGHLIGHT_RGB)
            annot.update()
        zoom = min(dpi / 72, MAX_SIDE_PX / max(pg.rect.width, pg.rect.height, 1))
        pix = pg.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        top = round(min(r.y0 for r in rects) / pg.rect.height, 4) if rects else None
        return pix.tobytes("png"), Marks(highlights=len(rects), top=top)


class PageCache:
    """PNGs on disk under ``<data dir>/pages``, keyed by document, its sha256, page, chunk and DPI."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def drop(self, doc_id: int) -> None:
        """Forget every cached page of a deleted document."""
        shutil.rmtree(self.root / str(doc_id), ignore_errors=True)

    def path(self, doc: SourceDoc, page: int, chunk_id: int | None, dpi: int) -> Path:
        return self.root / str(doc.doc_id) / doc.sha256[:16] / f"p{page}-c{chunk_id or 0}-d{dpi}.png"

    def get(self, doc: SourceDoc, page: int, chunk: ChunkRef | None, dpi: int = PAGE_DPI) -> PageImage:
        """The page image from the cache, or rendered from the source and stored (blocking: run in a thread)."""
        target = self.path(doc, page, chunk.chunk_id if chunk else None, dpi)
        meta = target.with_suffix(".json")
        if target.is_file():
            marks = msgspec.json.decode(meta.read_bytes(), type=Marks) if meta.is_file() else Marks()
            return PageImage(png=target.read_bytes(), marks=marks, cached=True)
        png, marks = render_page(read_source(doc), page, chunk.text if chunk else None, dpi)
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(meta, msgspec.json.encode(marks))  # the PNG last: once it exists, both are complete
        _write_atomic(target, png)
        log.info("render.page", doc_id=doc.doc_id, page=page, chunk_id=chunk.chunk_id if chunk else None,
                 highlights=marks.highlights, bytes=len(png))
        return PageImage(png=png, marks=marks, cached=False)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _norm(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def source_lines(doc: SourceDoc, data: bytes, max_bytes: int | None = None) -> list[str]:
    """The lines citations of ``doc`` count: the text the ingest parser made of its bytes."""
    return (parse_file(data, doc.file_type, max_bytes).text or "").splitlines()


def cited_lines(doc: SourceDoc, lines: list[str], start: int, end: int, chunk: ChunkRef | None) -> SourceLines:
    """Lines ``start..end`` (1-based, inclusive, at most MAX_LINES) of a source's ``lines``; the lines of
    ``chunk``'s text are marked ``cited``."""
    total = len(lines)
    if start < 1 or end < start:
        raise ValidationError(f"need 1 ≤ start ≤ end, got start={start}, end={end}")
    if start > total:
        raise NotFoundError(f"line {start} does not exist: document {doc.doc_id} has {total} lines")
    end = min(end, total, start + MAX_LINES - 1)
    wanted = {_norm(s) for s in (chunk.text.splitlines() if chunk else []) if len(_norm(s)) >= 3}
    out = [SourceLine(n=n, text=lines[n - 1], cited=_norm(lines[n - 1]) in wanted) for n in range(start, end + 1)]
    return SourceLines(document_id=doc.doc_id, name=doc.name, start=start, end=end, total=total, lines=out)


async def chunk_lines(pool: asyncpg.Pool, chunk: ChunkRef) -> tuple[int, int]:
    """The line range of the node that holds a Markdown/text chunk."""
    row = await pool.fetchrow(SQL_NODE_OF_CHUNK, chunk.chunk_id)
    if row is None:
        raise NotFoundError(f"chunk {chunk.chunk_id} has no node")
    return row["start_index"], row["end_index"]
