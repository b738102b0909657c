"""Evidence previews: a PDF page as a PNG with a cited chunk highlighted, the cited lines of a text source.

Every constraint a client can know in advance is in the OpenAPI schema (page ``<n>.png`` with n ≥ 1, ids,
a line window of at most 400); what depends on the document (a page beyond its end, a chunk of another
document, a page image of a text document) is a 404 for that document."""

from __future__ import annotations

import asyncio
import re
from typing import Annotated

from litestar import Controller, Response, get
from litestar.params import Parameter

from ingest.pipeline import max_file_bytes
from ingest.render import (
    MAX_LINES,
    PAGE_DPI,
    LinesCache,
    PageCache,
    SourceLines,
    check_page,
    chunk_lines,
    cited_lines,
    load_chunk,
    load_source,
    read_source,
    source_lines,
)
from kb.api.common import BEARER, DbId, errors, read_guard
from kb.core.errors import NotFoundError, ValidationError
from kb.runtime import Runtime

PAGE_FILE = r"^[1-9][0-9]{0,8}\.png$"  # 1.png … 999999999.png
PageFile = Annotated[str, Parameter(pattern=PAGE_FILE, description="`<n>.png`: n is the 1-based physical page, "
                                                                   "as in citations")]
Highlight = Annotated[int | None, Parameter(ge=1, le=2**53, description="a chunk of this document to highlight")]
Quote = Annotated[str | None, Parameter(max_length=4000, description="with highlight: only this part of the chunk "
                                        "(a citation's quote)")]


def page_number(page_file: str) -> int:
    """``"3.png"`` → 3 (the schema's pattern is checked again here)."""
    if re.fullmatch(PAGE_FILE, page_file) is None:
        raise ValidationError(f"page must be <n>.png with n ≥ 1, e.g. 1.png; got {page_file[:40]!r}")
    return int(page_file.removesuffix(".png"))


class PagesController(Controller):
    path = "/kb/documents"
    guards = [read_guard]
    security = BEARER

    @get("/{doc_id:int}/pages/{page_file:str}", media_type="image/png", responses=errors(400, 401, 404, 409))
    async def page_image(self, rt: Runtime, pages: PageCache, doc_id: DbId, page_file: PageFile,
                         highlight: Highlight = None, quote: Quote = None) -> Response[bytes]:
        """Physical page ``n`` (1-based, as in citations) of a PDF document as a PNG, rendered once and
        cached (``KB_PAGE_CACHE_MB``); ``highlight``: a chunk of this document whose text is marked on the page
        where it stands; ``quote``: only this part of it (a citation's ``quote``, located by its place in the
        chunk). ``X-Highlights``: the rectangles marked; ``X-Highlight-Found``: whether the page holds the chunk
        (false: the file no longer reads as it did; nothing else is marked); ``X-Highlight-Top``: where the first one starts (0..1 of the page height)."""
        page = page_number(page_file)
        doc = await load_source(rt.pool, doc_id)
        check_page(doc, page)
        chunk = await load_chunk(rt.pool, doc, highlight) if highlight is not None else None
        image = await asyncio.to_thread(pages.get, doc, page, chunk, PAGE_DPI, quote or "")
        headers = {"Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff",
                   "X-Highlights": str(image.marks.highlights)}
        if chunk is not None:  # whether the page holds the chunk at all (0 highlights of a quote on another page)
            headers["X-Highlight-Found"] = "true" if image.marks.found else "false"
        if image.marks.top is not None:
            headers["X-Highlight-Top"] = str(image.marks.top)
        return Response(image.png, media_type="image/png", headers=headers)

    @get("/{doc_id:int}/lines", responses=errors(400, 401, 404, 409))
    async def lines(self, rt: Runtime, lines: LinesCache, doc_id: DbId,
                    start: Annotated[int | None, Parameter(ge=1, le=10**9, description="first line (1-based)")] = None,
                    count: Annotated[int, Parameter(ge=1, le=MAX_LINES, description="lines to return")] = MAX_LINES,
                    end: Annotated[int | None, Parameter(ge=1, le=10**9, description=(
                        "last line (1-based, inclusive), instead of count; at most 400 lines; before start: none"))] = None,
                    highlight: Highlight = None) -> SourceLines:
        """Lines of a Markdown/text document, or paragraphs of a .docx/HTML one (1-based; at most 400); with
        ``highlight`` and no ``start``, those of the chunk's section, the chunk's own marked ``cited``. A source
        is parsed once (then kept in memory by its sha256); 503 while too many others wait for theirs."""
        if end is not None:  # an end before start reads no lines
            count, start = max(0, min(MAX_LINES, end - (start or 1) + 1)), start or 1
        doc = await load_source(rt.pool, doc_id)
        if doc.is_pdf:
            raise NotFoundError(f"document {doc_id} is a PDF: it has pages, not lines; preview them at "
                                f"/kb/documents/{doc_id}/pages/<n>.png")
        chunk = await load_chunk(rt.pool, doc, highlight) if highlight is not None else None
        if start is None and chunk is not None:
            start, node_end = await chunk_lines(rt.pool, chunk)
            count = min(count, max(1, node_end - start + 1))
        start = start or 1
        limit = max_file_bytes(rt.settings.ingest)
        source = await lines.get(doc, lambda: source_lines(doc, read_source(doc), limit))
        return cited_lines(doc, source, start, start + count - 1, chunk)
