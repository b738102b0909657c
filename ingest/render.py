"""Evidence previews of stored documents: a PDF page as a PNG with a chunk's text highlighted (the plain
page cached on disk, bounded in size), or the cited lines of any other source (Markdown/text lines; the paragraphs of a .docx or HTML file,
which are the lines of the parser's rendering). Sources are read through the same confinement as their
ingest and must still have the bytes that were ingested (sha256)."""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import os
import re
import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import asyncpg
import msgspec
import numpy as np
import pymupdf
import structlog

from ingest import store
from ingest.files import open_confined
from ingest.pdf_read.ocr import engine_for, needs_ocr, ocr_textpage
from ingest.pipeline import parse_file
from kb.core.errors import ConflictError, IngestError, NotFoundError, UnavailableError, ValidationError
from kb.core.settings import get_settings

log = structlog.get_logger("ingest.render")

PAGE_DPI = 110  # readable text on a laptop screen; an A4 page is about 910×1290 px
MAX_SIDE_PX = 2400  # a poster-sized page is scaled down to this
MAX_LINES = 400  # lines returned for one Markdown/text preview
_HIGHLIGHT_RGB = (1.0, 0.85, 0.2)


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
    """Where a page image is highlighted."""

    highlights: int = 0  # rectangles marked (0: no chunk asked, or its text was not found on the page)
    top: float | None = None  # top of the first one, 0..1 of the page height (the viewer scrolls there)
    found: bool = False  # the page holds the chunk (a quote elsewhere in it may still mark nothing here)


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
    row = await store.document_source(pool, doc_id)
    if row is None:
        raise NotFoundError(f"document {doc_id} does not exist")
    return SourceDoc(doc_id=row["id"], name=row["name"], source_path=row["source_path"], sha256=row["sha256"],
                     file_type=row["file_type"], page_count=row["page_count"], allowed_root=row["allowed_root"])


async def load_chunk(pool: asyncpg.Pool, doc: SourceDoc, chunk_id: int) -> ChunkRef:
    """The chunk ``chunk_id`` of ``doc``; one of another document is not found there."""
    row = await store.chunk_ref(pool, chunk_id)
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


def _source_file(doc: SourceDoc) -> BinaryIO:
    """The ingested file of ``doc`` opened confined to its job's folder; a gone file is ``NotFoundError``."""
    try:
        return open_confined(Path(doc.source_path), Path(doc.allowed_root) if doc.allowed_root else None)
    except IngestError as exc:
        raise NotFoundError(f"the source file of document {doc.doc_id} cannot be read: {exc.detail}") from exc


def _check_digest(doc: SourceDoc, digest: str) -> None:
    if digest != doc.sha256:
        raise ConflictError(f"the source file of document {doc.doc_id} changed since it was ingested; "
                            "re-ingest it to preview its pages")


def read_source(doc: SourceDoc) -> bytes:
    """The ingested bytes of ``doc``, read once; gone or changed files are errors."""
    with _source_file(doc) as fh:
        data = fh.read()
    _check_digest(doc, hashlib.sha256(data).hexdigest())
    return data


SOURCE_CHUNK = 256 * 1024
"""Bytes per read of a source file sent to a client (what one slow reader can hold besides the socket's buffer)."""


def open_source(doc: SourceDoc) -> tuple[BinaryIO, int]:
    """The ingested file of ``doc`` opened at its start, checked against its digest by reading it once in pieces
    (never whole in memory), and its size; gone or changed files are errors."""
    fh = _source_file(doc)
    try:
        _check_digest(doc, hashlib.file_digest(fh, "sha256").hexdigest())
        size = fh.tell()
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh, size


def _highlight_rects(pg: pymupdf.Page, highlight: str, quote: str = "") -> tuple[list[pymupdf.Rect], bool]:
    """Where ``highlight`` (a chunk's text) is on the page — only its ``quote`` part when given: in its text layer,
    or, when that holds none of it and the page is a scan, in the text OCR reads from it (the same engine and
    settings as at ingest, so the same words in the same places)."""
    rects, found = _rects(pg, highlight, None, quote)
    if not found and (textpage := _scan_textpage(pg)) is not None:
        rects, found = _rects(pg, highlight, textpage, quote)
    return rects, found


def quote_words(text: str, quote: str) -> set[int]:
    """Positions, among the words of ``text``, of the words of each part of ``quote`` (" … "-separated, as
    citations write it) found in ``text`` — by its place in the text, not by its wording elsewhere."""
    flat = " ".join(text.split())
    out: set[int] = set()
    for part in (p.strip() for p in quote.split(" … ")):
        words = [t for t in (_TOKEN.sub("", w.lower()) for w in part.split()) if t]
        at = flat.find(" ".join(part.split()))
        if not words or at < 0:
            continue
        start = sum(1 for w in flat[:at].split() if _TOKEN.sub("", w.lower()))
        out.update(range(start, start + len(words)))
    return out


_TOKEN = re.compile(r"[^\w]+")
MIN_RUN = 4
"""Words in a row the page must share with the cited text, in its order, for a run to count as the passage."""
MIN_SHARE = 0.5
"""Of the cited text's words (at most ``MIN_WORDS``), the share a page must hold in runs to be highlighted."""
MIN_WORDS = 24
MIN_LONGEST = 8
"""The longest run must hold this many words (or the whole cited text)."""


def _rects(pg: pymupdf.Page, highlight: str, textpage: pymupdf.TextPage | None,
           quote: str = "") -> tuple[list[pymupdf.Rect], bool]:
    """The cited text where it stands on the page: its words aligned in order with the page's words (runs of
    ``MIN_RUN`` or more), so that a phrase the page repeats elsewhere ("Segment operating income" under every
    segment) is not marked there; one box per line; with ``quote``, only the words of the quoted part (by their
    place in the chunk). None when the page does not hold the text (a file changed since the citation was made):
    nothing else is marked instead."""
    words = pg.get_text("words", textpage=textpage)
    page = [_TOKEN.sub("", w[4].lower()) for w in words]
    cited = [t for t in (_TOKEN.sub("", w.lower()) for w in highlight.split()) if t]
    if not page or not cited:
        return [], False
    matcher = difflib.SequenceMatcher(None, page, cited, autojunk=False)
    runs = [b for b in matcher.get_matching_blocks() if b.size >= min(MIN_RUN, len(cited))]
    if sum(b.size for b in runs) < MIN_SHARE * min(len(cited), MIN_WORDS) or \
            max((b.size for b in runs), default=0) < min(MIN_LONGEST, len(cited)):
        return [], False  # boilerplate in common is not the passage
    quoted = quote_words(highlight, quote) if quote else set()
    lines: dict[tuple[int, int], pymupdf.Rect] = {}
    for b in runs:
        for k, w in enumerate(words[b.a: b.a + b.size]):
            if quoted and b.b + k not in quoted:
                continue
            key = (w[5], w[6])  # block and line: one box per line
            lines[key] = lines[key] | pymupdf.Rect(w[:4]) if key in lines else pymupdf.Rect(w[:4])
    return list(lines.values()), True


def _scan_textpage(pg: pymupdf.Page) -> pymupdf.TextPage | None:
    """The OCR text of a scanned page (``ingest.pdf_read.ocr.needs_ocr``) when an engine is installed; else None."""
    if not needs_ocr(pg, any(c.isalpha() for c in pg.get_text("text"))):
        return None
    s = get_settings().ingest
    engine = engine_for(s.ocr, s.ocr_languages.split("+"), s.ocr_dpi)
    if engine is None:
        return None
    try:
        return ocr_textpage(pg, engine)
    except (RuntimeError, ValueError):
        return None


def render_page(pdf: bytes, page: int, dpi: int = PAGE_DPI) -> bytes:
    """PNG of 1-based ``page``, unmarked."""
    with pymupdf.open(stream=pdf, filetype="pdf") as pdf_doc:
        pg = pdf_doc[page - 1]
        zoom = min(dpi / 72, MAX_SIDE_PX / max(pg.rect.width, pg.rect.height, 1))
        return pg.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False).tobytes("png")


class PageMarks(msgspec.Struct, frozen=True):
    """Where a chunk's text is on a page: rectangles as fractions (x0, y0, x1, y1) of the page size."""

    marks: Marks
    boxes: tuple[tuple[float, float, float, float], ...] = ()


def find_marks(pdf: bytes, page: int, highlight: str, quote: str = "") -> PageMarks:
    """Where ``highlight`` (its ``quote`` part when given, else all of it) stands on 1-based ``page``."""
    with pymupdf.open(stream=pdf, filetype="pdf") as pdf_doc:
        pg = pdf_doc[page - 1]
        rects, found = _highlight_rects(pg, highlight, quote)
        w, h = max(pg.rect.width, 1), max(pg.rect.height, 1)
        top = round(min(r.y0 for r in rects) / h, 4) if rects else None
        boxes = tuple((r.x0 / w, r.y0 / h, r.x1 / w, r.y1 / h) for r in rects)
        return PageMarks(marks=Marks(highlights=len(rects), top=top, found=found), boxes=boxes)


def draw_marks(png: bytes, boxes: tuple[tuple[float, float, float, float], ...]) -> bytes:
    """``png`` with ``boxes`` (fractions of the page) tinted like a highlighter (multiplied by yellow)."""
    if not boxes:
        return png
    pix = pymupdf.Pixmap(png)
    if pix.alpha or pix.n != 3:
        pix = pymupdf.Pixmap(pymupdf.csRGB, pix, 0)
    w, h = pix.width, pix.height
    img = np.frombuffer(pix.samples, dtype=np.uint8).reshape(h, pix.stride // 3, 3)[:, :w].copy()
    tint = np.asarray(_HIGHLIGHT_RGB, dtype=np.float32)
    done = np.zeros((h, w), dtype=bool)  # overlapping boxes are tinted once
    for x0, y0, x1, y1 in boxes:
        c0, r0 = max(0, int(x0 * w)), max(0, int(y0 * h))
        c1, r1 = min(w, int(np.ceil(x1 * w))), min(h, int(np.ceil(y1 * h)))
        region, fresh = img[r0:r1, c0:c1], ~done[r0:r1, c0:c1]
        region[fresh] = (region[fresh] * tint).astype(np.uint8)
        done[r0:r1, c0:c1] = True
    out = pymupdf.Pixmap(pymupdf.csRGB, w, h, img.tobytes(), 0)
    return out.tobytes("png")


class PageCache:
    """Plain page PNGs on disk under ``<data dir>/pages`` (by document, its sha256, page and DPI), at most
    ``max_bytes`` in all: beyond it the least recently used are deleted. A highlight is drawn on the cached
    page for each request; where a chunk's text lies on a page is kept in memory (the last ``max_marks``)."""

    def __init__(self, root: Path, max_bytes: int = 512 * 1024 * 1024, *, max_marks: int = 4096) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_marks = max_marks
        self._lock = threading.Lock()
        self._bytes: int | None = None  # on disk, counted at first use
        self._marks: OrderedDict[tuple[int, str, int, int, str], PageMarks] = OrderedDict()

    def drop(self, doc_id: int) -> None:
        """Forget every cached page of a deleted document."""
        with self._lock:
            shutil.rmtree(self.root / str(doc_id), ignore_errors=True)
            self._bytes = None
            for key in [k for k in self._marks if k[0] == doc_id]:
                del self._marks[key]

    def path(self, doc: SourceDoc, page: int, dpi: int) -> Path:
        return self.root / str(doc.doc_id) / doc.sha256[:16] / f"p{page}-d{dpi}.png"

    def get(self, doc: SourceDoc, page: int, chunk: ChunkRef | None, dpi: int = PAGE_DPI,
            quote: str = "") -> PageImage:
        """The page image, from the cache or rendered from the source and stored, with ``chunk`` highlighted (its
        ``quote`` part when given; blocking: run in a thread)."""
        target = self.path(doc, page, dpi)
        source: bytes | None = None
        try:
            png, cached = target.read_bytes(), True
            os.utime(target)  # recently used
        except FileNotFoundError:
            source = read_source(doc)
            png, cached = render_page(source, page, dpi), False
            self._store(target, png)
            log.info("render.page", doc_id=doc.doc_id, page=page, bytes=len(png))
        if chunk is None:
            return PageImage(png=png, marks=Marks(), cached=cached)
        key = (doc.doc_id, doc.sha256, page, chunk.chunk_id, quote)
        with self._lock:
            found = self._marks.get(key)
            if found is not None:
                self._marks.move_to_end(key)
        if found is None:
            found = find_marks(source if source is not None else read_source(doc), page, chunk.text, quote)
            with self._lock:
                self._marks[key] = found
                while len(self._marks) > self.max_marks:
                    self._marks.popitem(last=False)
        return PageImage(png=draw_marks(png, found.boxes), marks=found.marks, cached=cached)

    def size(self) -> int:
        """Bytes of cached pages on disk."""
        return sum(p.stat().st_size for p in self.root.rglob("*.png")) if self.root.is_dir() else 0

    def _store(self, target: Path, png: bytes) -> None:
        if len(png) > self.max_bytes:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(target, png)
        with self._lock:
            self._bytes = (self.size() if self._bytes is None else self._bytes + len(png))
            if self._bytes > self.max_bytes:
                self._evict(keep=target)

    def _evict(self, keep: Path) -> None:
        """Delete the least recently used pages until the cache is at 90% of its limit (lock held). Every
        API process evicts from the same folder; the count is taken from the disk again."""
        files = []
        for p in self.root.rglob("*.png"):
            try:
                files.append((p.stat().st_mtime, p.stat().st_size, p))
            except FileNotFoundError:  # evicted by another process
                continue
        total = sum(size for _, size, _ in files)
        evicted = 0
        for _, size, p in sorted(files):
            if total <= self.max_bytes * 0.9:
                break
            if p == keep:
                continue
            p.unlink(missing_ok=True)
            total -= size
            evicted += 1
        self._bytes = total
        log.info("render.cache_evicted", pages=evicted, bytes=total, limit=self.max_bytes)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _norm(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def source_lines(doc: SourceDoc, data: bytes, max_bytes: int | None = None) -> list[str]:
    """The lines citations of ``doc`` count: the text the ingest parser made of its bytes."""
    return (parse_file(data, doc.file_type, max_bytes).text or "").splitlines()


class LinesCache:
    """The parsed lines of text sources by (document, sha256), least recently used dropped beyond
    ``max_chars``. A parse runs on the cache's own thread (never the shared pool the query path and page
    renders use), one at a time; concurrent requests for one document share its parse, and at most
    ``max_waiting`` parses wait (beyond: ``UnavailableError``, a 503 with Retry-After)."""

    def __init__(self, max_chars: int, *, max_waiting: int = 8) -> None:
        self.max_chars = max_chars
        self.max_waiting = max_waiting
        self._lines: OrderedDict[tuple[int, str], list[str]] = OrderedDict()
        self._chars = 0
        self._parsing: dict[tuple[int, str], asyncio.Future[list[str]]] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-lines")
        self.parses = 0  # sources parsed (cache misses), for tests and logs

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def get(self, doc: SourceDoc, parse: Callable[[], list[str]]) -> list[str]:
        """``doc``'s lines: cached, being parsed for another request, or ``parse()`` on the cache's thread."""
        key = (doc.doc_id, doc.sha256)
        if (hit := self._lines.get(key)) is not None:
            self._lines.move_to_end(key)
            return hit
        if (pending := self._parsing.get(key)) is not None:
            return await asyncio.shield(pending)
        if len(self._parsing) >= self.max_waiting:
            raise UnavailableError(f"{len(self._parsing)} source previews are being prepared; retry shortly")
        future = asyncio.get_running_loop().run_in_executor(self._executor, parse)
        self._parsing[key] = future
        future.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(future)  # a client that goes away leaves the parse to finish and be kept

    def _finished(self, key: tuple[int, str], future: asyncio.Future[list[str]]) -> None:
        self._parsing.pop(key, None)
        if not future.cancelled() and future.exception() is None:
            self.parses += 1
            self._store(key, future.result())

    def _store(self, key: tuple[int, str], lines: list[str]) -> None:
        size = sum(len(line) for line in lines) + len(lines)
        if size > self.max_chars:  # larger than the whole cache: served, not kept
            return
        self._lines[key] = lines
        self._chars += size
        while self._chars > self.max_chars:
            _, dropped = self._lines.popitem(last=False)
            self._chars -= sum(len(line) for line in dropped) + len(dropped)

    def drop(self, doc_id: int) -> None:
        """Forget a deleted document's lines."""
        for key in [k for k in self._lines if k[0] == doc_id]:
            dropped = self._lines.pop(key)
            self._chars -= sum(len(line) for line in dropped) + len(dropped)


def cited_lines(doc: SourceDoc, lines: list[str], start: int, end: int, chunk: ChunkRef | None) -> SourceLines:
    """Lines ``start..end`` (1-based, inclusive, at most MAX_LINES) of a source's ``lines``; the lines of
    ``chunk``'s text are marked ``cited``; none when ``end`` is before ``start``."""
    total = len(lines)
    if start < 1:
        raise ValidationError(f"need 1 ≤ start, got start={start}")
    if end < start:
        return SourceLines(document_id=doc.doc_id, name=doc.name, start=start, end=end, total=total, lines=[])
    if start > total:
        raise NotFoundError(f"line {start} does not exist: document {doc.doc_id} has {total} lines")
    end = min(end, total, start + MAX_LINES - 1)
    wanted = {_norm(s) for s in (chunk.text.splitlines() if chunk else []) if len(_norm(s)) >= 3}
    out = [SourceLine(n=n, text=lines[n - 1], cited=_norm(lines[n - 1]) in wanted) for n in range(start, end + 1)]
    return SourceLines(document_id=doc.doc_id, name=doc.name, start=start, end=end, total=total, lines=out)


async def chunk_lines(pool: asyncpg.Pool, chunk: ChunkRef) -> tuple[int, int]:
    """The line range of the node that holds a Markdown/text chunk."""
    row = await store.chunk_node_range(pool, chunk.chunk_id)
    if row is None:
        raise NotFoundError(f"chunk {chunk.chunk_id} has no node")
    return row["start_index"], row["end_index"]
