"""The web UI: static files shipped in the package, served at ``/ui/`` (``/`` redirects there), every
response with a content-security policy that allows only this server's own scripts, styles and images."""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import re
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal
from urllib.parse import quote

import msgspec
from litestar import Controller, Request, Response, Router, get
from litestar.exceptions import NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from litestar.response import Redirect, Stream
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from markdown_it import MarkdownIt

from ingest.chunk_view import SectionChunks, section_chunks
from ingest.render import SOURCE_CHUNK, load_source, open_source
from ingest.store import DocumentInfo, list_documents
from kb.api.common import BEARER, DbId, errors, exception_handler, read_guard
from kb.runtime import Runtime
from router.metadata import ENTITY_KEY, Entity, company_entities

STATIC_DIR = Path(__file__).resolve().parent.parent / "ui" / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
UI_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def csp_middleware(app: ASGIApp) -> ASGIApp:
    """Add the UI's security headers to every response of the UI routes."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *UI_HEADERS]
            await send(message)

        await app(scope, receive, send_wrapper)

    return middleware


def odd_path_middleware(app: ASGIApp) -> ASGIApp:
    """A UI path no file can have — a NUL byte, a name longer than a file system allows — is a 404 before the
    static files are looked up (the look-up raised a 500)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if "\x00" in path or any(len(part.encode()) > 255 for part in path.split("/")):
            raise NotFoundException("no such file of the web UI")
        await app(scope, receive, send)

    return middleware


API_PREFIXES = ("/kb", "/mcp", "/metrics", "/schema", "/health")


def not_found_handler(request: Request[Any, Any, Any], exc: NotFoundException) -> Response[Any]:
    """An unknown address: the UI's "Page not found" page for a browser asking for a page outside the API, the
    API's problem details otherwise."""
    path = request.url.path
    wants_page = request.method in {"GET", "HEAD"} and "text/html" in request.headers.get("accept", "")
    if wants_page and not any(path == p or path.startswith(p + "/") for p in API_PREFIXES):
        return Response((STATIC_DIR / "404.html").read_bytes(), status_code=404, media_type="text/html",
                        headers={k.decode(): v.decode() for k, v in UI_HEADERS})
    return exception_handler(request, exc)


@get("/", include_in_schema=False, middleware=[csp_middleware])
async def ui_root() -> Redirect:
    return Redirect("/ui/")


README = Path(__file__).resolve().parent.parent.parent / "README.md"
_SLUG_DROP = re.compile(r"[^\w\- ]", re.UNICODE)


def readme_text() -> str:
    """The README of this checkout, else the one the package was installed with (its long description)."""
    if README.is_file():
        return README.read_text("utf-8")
    return importlib.metadata.metadata("kb-router").get_payload() or ""  # type: ignore[attr-defined]


def slug(title: str) -> str:
    """A heading's anchor as GitHub writes it ("Using an LLM" → "using-an-llm")."""
    return _SLUG_DROP.sub("", title.strip().lower()).replace(" ", "-")


@functools.lru_cache(maxsize=1)
def help_page(text: str) -> bytes:
    """The README as one HTML page of the UI: raw HTML in it is escaped, headings carry their anchors."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and i + 1 < len(tokens):
            tok.attrSet("id", slug(tokens[i + 1].content))
        elif tok.type in ("th_open", "td_open") and (style := tok.attrGet("style")):
            # a column's alignment as a class: the UI's content-security policy refuses inline styles
            tok.attrs.pop("style", None)
            tok.attrSet("class", "align-" + str(style).removeprefix("text-align:").strip())
    body = md.renderer.render(tokens, md.options, {})
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kb — help</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<link rel=\"icon\" href=\"/ui/favicon.svg\" type=\"image/svg+xml\">"
            "<link rel=\"stylesheet\" href=\"/ui/app.css\"></head><body><main class=\"help\">"
            "<p><a href=\"/ui/\">← back to the knowledge base</a></p>" + body + "</main></body></html>").encode()


@get("/ui/help", include_in_schema=False, middleware=[csp_middleware], media_type="text/html")
async def ui_help() -> Response[bytes]:
    """The README (configuration, strategies, what an answer looks like) as a page of the UI, so the answer-mode
    badge can link to "Using an LLM"."""
    text = await asyncio.to_thread(readme_text)
    return Response(help_page(text), media_type="text/html")


def ui_router() -> Router:
    """``/ui/…`` from the packaged static folder (``index.html`` for the folder, ``404.html`` when missing)."""
    return create_static_files_router(path="/ui", directories=[STATIC_DIR], html_mode=True, name="ui",
                                      middleware=[csp_middleware, odd_path_middleware])


SOURCE_TYPES = {"pdf": "application/pdf",
                "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}
"""Media types of original files; every other format is sent as plain text (an HTML source is never run)."""


async def _pieces(fh: BinaryIO, size: int) -> AsyncIterator[bytes]:
    """The first ``size`` bytes of ``fh`` (what was checked and announced) in ``SOURCE_CHUNK`` pieces, read off
    the event loop; the file is closed at the end, when the client goes, or with the generator."""
    try:
        left = size
        while left > 0 and (piece := await asyncio.to_thread(fh.read, min(SOURCE_CHUNK, left))):
            left -= len(piece)
            yield piece
    finally:
        fh.close()


class SourceFileController(Controller):
    """The original file of a document, for the page viewer's "Open original"."""

    path = "/kb/documents"
    guards = [read_guard]
    security = BEARER

    @get("/{doc_id:int}/file", responses={200: ResponseSpec(data_container=bytes, media_type="*/*",
                                                            description="the original file (PDF, .docx or text)"),
                                           **errors(400, 401, 404, 409)})
    async def source_file(self, rt: Runtime, doc_id: DbId) -> Stream:
        """The file as it was ingested (404 when it is gone, 409 when it changed since). Sent inline, sandboxed:
        a PDF opens in the browser's viewer; HTML and Markdown come as plain text. Streamed in pieces, so a
        client that reads slowly holds one piece, not the file (a stalled one is dropped: ``KB_SEND_TIMEOUT_S``)."""
        doc = await load_source(rt.pool, doc_id)
        fh, size = await asyncio.to_thread(open_source, doc)
        name = Path(doc.name).name
        return Stream(_pieces(fh, size), media_type=SOURCE_TYPES.get(doc.file_type, "text/plain"), headers={
            "Content-Length": str(size), "Content-Disposition": f"inline; filename*=UTF-8''{quote(name)}",
            "Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff",
            "Cache-Control": "private, max-age=3600"})

    @get("/{doc_id:int}/chunks", responses=errors(400, 401, 404))
    async def chunks(self, rt: Runtime, doc_id: DbId,
                     node: Annotated[str, Parameter(min_length=1, max_length=200,
                                                    description="a node id of the document's tree")]) -> SectionChunks:
        """The chunks of a section (and its subsections) as stored: text, pages, heading path, table context."""
        return await section_chunks(rt.pool, doc_id, node)


SAMPLE_QUESTIONS = Path(__file__).resolve().parent.parent.parent / "samples" / "QUESTIONS.md"
_QUESTION = re.compile(r"^- \*\*Strategy:\*\* (\w+)\n- \*\*Question:\*\* (.+)\n- \*\*Expected document:\*\* `([^`]+)`",
                       re.M)
MAX_EXAMPLES = 4
TYPE_NAMES = {"pdf": "PDF", "markdown": "Markdown", "text": "text", "docx": ".docx", "html": "HTML"}


class Example(msgspec.Struct, frozen=True):
    question: str
    strategy: str | None = None  # the strategy it demonstrates (sample questions)


class Overview(msgspec.Struct, frozen=True):
    collection: str
    documents: int
    summary: str  # "6 documents (3 PDF, 3 Markdown) · 5 companies · 2021–2023"
    examples: list[Example]
    source: Literal["samples", "documents", "none"]  # where the examples come from


def sample_questions(text: str) -> list[tuple[str, str, str]]:
    """(strategy, question, expected document stem) of each question of ``samples/QUESTIONS.md``."""
    return [(m[1], m[2].strip(), m[3]) for m in _QUESTION.finditer(text)]


def document_entities(docs: list[DocumentInfo]) -> dict[str, Entity]:
    """Each company value of the documents → the entity it is one of, as routing and facts join them
    (``router.metadata.company_entities``: legal forms, former names, the metadata ``entity``)."""
    return company_entities(
        (name, [str(n) for n in d.metadata.get("also_known_as") or () if n], str(d.metadata.get(ENTITY_KEY) or ""))
        for d in docs if (name := str(d.metadata.get("company") or "").strip())).by_value


def company_names(docs: list[DocumentInfo]) -> list[str]:
    """The companies the documents name, one per entity however its documents write it ("Amcor", "Amcor PLC",
    "AMCOR P.L.C." are one), each by its metadata ``entity`` or shortest spelling, sorted."""
    return sorted({e.name for e in document_entities(docs).values()})


def summarize(docs: list[DocumentInfo]) -> str:
    """What a collection holds, in one line."""
    if not docs:
        return "No documents yet."
    kinds = Counter(TYPE_NAMES.get(d.file_type, d.file_type) for d in docs)
    parts = [f"{len(docs)} document{'s' if len(docs) != 1 else ''} ("
             + ", ".join(f"{n} {k}" for k, n in kinds.most_common()) + ")"]
    companies = company_names(docs)
    if companies:
        parts.append(", ".join(companies) if len(companies) <= 4 else f"{len(companies)} companies")
    years = sorted({int(y) for d in docs if str(y := d.metadata.get("fiscal_year", "")).isdigit()})
    if years:
        parts.append(f"{years[0]}–{years[-1]}" if years[0] != years[-1] else str(years[0]))
    pages = sum(d.page_count for d in docs if d.file_type == "pdf")
    if pages:
        parts.append(f"{pages} PDF pages")
    return " · ".join(parts)


def generated_examples(docs: list[DocumentInfo]) -> list[Example]:
    """Questions made from document metadata and titles, one per document (most recent first)."""
    out: list[Example] = []
    for d in sorted(docs, key=lambda d: str(d.metadata.get("fiscal_year", "")), reverse=True):
        company, year = d.metadata.get("company"), d.metadata.get("fiscal_year")
        if company and year:
            q = f"What were the main results of {company} in {year}?"
        elif company:
            q = f"What does the {company} document say about its outlook?"
        else:
            q = f"What is “{d.title or Path(d.name).stem}” about?"
        if all(e.question != q for e in out):
            out.append(Example(q))
        if len(out) == MAX_EXAMPLES:
            break
    return out


class OverviewController(Controller):
    """What the Ask page's first screen shows: a collection's summary and example questions."""

    path = "/kb/collections"
    guards = [read_guard]
    security = BEARER

    @get("/{name:str}/overview", responses=errors(400, 401, 404))
    async def overview(self, rt: Runtime, name: str) -> Overview:
        """A one-line summary of the collection and up to four example questions: those of the bundled samples'
        ``QUESTIONS.md`` whose document is in the collection, else questions made from document metadata."""
        docs = await list_documents(rt.pool, name)
        stems = {Path(d.name).stem for d in docs}
        examples: list[Example] = []
        if SAMPLE_QUESTIONS.is_file() and stems:
            text = await asyncio.to_thread(SAMPLE_QUESTIONS.read_text, "utf-8")
            examples = [Example(q, s) for s, q, doc in sample_questions(text) if doc in stems][:MAX_EXAMPLES]
        source: Literal["samples", "documents", "none"] = "samples" if examples else "documents" if docs else "none"
        return Overview(collection=name, documents=len(docs), summary=summarize(docs),
                        examples=examples or generated_examples(docs), source=source)
