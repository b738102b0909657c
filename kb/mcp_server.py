"""The Model Context Protocol server: the knowledge base as tools for an agent (stdio and streamable HTTP).

The tools call the same library functions as the REST controllers (``ingest.store``,
``ingest.pageindex``, ``router.metadata``, ``QueryPipeline.run``). Product errors become MCP tool
errors (``isError`` results with the reason); the SDK validates argument types and sizes from the
signatures below and turns anything unexpected into an error result without crashing the server. An argument a
tool does not have is an error too (``KBMCPServer``), not silently dropped, and each tool's input schema says so
(``additionalProperties: false``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import asyncpg
import msgspec
import structlog
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import Tool as MCPTool
from mcp.types import ToolAnnotations
from pydantic import Field

from ingest import store
from ingest.pageindex import to_pageindex
from kb import __version__
from kb.core import collections
from kb.core.errors import KBError, NotFoundError
from kb.runtime import Runtime
from router.metadata import conditions_from_filters
from router.pipeline import QueryPipeline, retrieved
from router.store import run_filter
from router.types import (
    COLLECTION_PATTERN,
    DEFAULT_TOP_K,
    MAX_COLLECTION_CHARS,
    MAX_FILTER_KEYS,
    MAX_QUERY_CHARS,
    MAX_TOP_DOCS,
    MAX_TOP_K,
    QueryRequest,
    Strategy,
)

log = structlog.get_logger("kb.mcp")

MAX_DOC_ID = 2**63 - 1
MAX_NODE_CHARS = 200_000

INSTRUCTIONS = """\
kb is a knowledge base of long documents (annual reports, filings, papers, manuals), grouped in
collections. Each document is stored as a tree of sections (a PageIndex-style outline: node ids,
titles, page ranges, summaries) over its text.

Two ways to answer a question:
1. `query` — the server routes to the right documents, finds the sections, retrieves evidence and
   returns an answer with citations (document, section path, pages). One call; start here.
   `retrieve` takes the same arguments and returns the evidence (documents, sections, ranked
   passages with citations) without an answer, to write your own.
2. Navigate yourself, like a reader with a table of contents: `list_collections` →
   `list_documents` (optionally filtered by metadata such as company or fiscal_year) →
   `get_document_tree` (the outline) → `get_node` (read the sections that matter, following
   references such as "see Note 7" to other nodes) → answer, citing document name, section and pages.
Pages are 1-based physical PDF pages; for Markdown and text files the ranges are line numbers."""

Collection = Annotated[str, Field(min_length=1, max_length=MAX_COLLECTION_CHARS, pattern=COLLECTION_PATTERN,
                                  description="collection name; 'default' exists")]
DocId = Annotated[int, Field(ge=1, le=MAX_DOC_ID, description="document id (the doc_id from list_documents)")]
DocumentRef = Annotated[int, Field(ge=1, le=MAX_DOC_ID)] | Annotated[str, Field(min_length=1, max_length=512)]
"""A document by its doc_id or its name (as ``list_documents`` gives them)."""

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
Filters = Annotated[dict[str, Any] | None, Field(description=(
    'metadata filter, e.g. {"company": "Acme"}, {"fiscal_year": [2022, 2023]}, '
    '{"fiscal_year": {"gte": 2021, "lte": 2023}} or {"title": {"contains": "annual"}}; '
    "all conditions must hold"), max_length=MAX_FILTER_KEYS)]


class KBMCPServer(MCPServer):
    """The SDK's server, strict about argument names: a call naming an argument its tool does not declare
    is refused with the names it does (the SDK would drop it and answer as if it had not been given)."""

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        for tool in tools:
            tool.input_schema["additionalProperties"] = False
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        declared = {t.name: set(t.input_schema.get("properties", {})) for t in await super().list_tools()}
        unknown = sorted(set(arguments) - declared[name]) if name in declared else []
        if unknown:
            log.info("mcp.tool_refused", tool=name, error="unknown arguments", arguments=unknown)
            raise ToolError(f"{name} has no argument {', '.join(map(repr, unknown))}; its arguments are "
                            f"{', '.join(sorted(declared[name]))}")
        return await super().call_tool(name, arguments, context)


@dataclass
class Services:
    """What the tools need; the HTTP app fills it in its lifespan, ``kb mcp`` before it serves."""

    runtime: Runtime | None = None
    pipeline: QueryPipeline | None = None

    def get(self) -> tuple[Runtime, QueryPipeline]:
        if self.runtime is None or self.pipeline is None:
            raise ToolError("the knowledge base is still starting; try again in a moment")
        return self.runtime, self.pipeline


@contextmanager
def _tool_errors(tool: str) -> Iterator[None]:
    """Product errors → MCP tool errors carrying the reason the REST API would give."""
    try:
        yield
    except KBError as exc:
        log.info("mcp.tool_refused", tool=tool, error=exc.detail)
        raise ToolError(exc.detail) from exc
    except (asyncpg.DataError, OverflowError) as exc:
        raise ToolError(f"invalid value: {str(exc).splitlines()[0][:200]}") from exc


def _document(d: store.DocumentInfo) -> dict[str, Any]:
    return {"doc_id": d.id, "name": d.name, "title": d.title, "description": d.description,
            "metadata": d.metadata, "file_type": d.file_type, "page_count": d.page_count,
            "tree_mode": d.tree_mode, "node_count": d.node_count}


def _find(structure: list[dict[str, Any]], node_id: str) -> dict[str, Any] | None:
    for n in structure:
        if n["node_id"] == node_id:
            return n
        if (hit := _find(n.get("nodes", []), node_id)) is not None:
            return hit
    return None


def _prune(node: dict[str, Any], depth: int) -> dict[str, Any]:
    """``node`` down to ``depth`` levels; a node cut off keeps ``child_count`` in place of ``nodes``."""
    if "nodes" not in node:
        return node
    if depth <= 1:
        return {**{k: v for k, v in node.items() if k != "nodes"}, "child_count": len(node["nodes"])}
    return {**node, "nodes": [_prune(c, depth - 1) for c in node["nodes"]]}


def _request(question: str, collection: str, strategy: str, top_docs: int | None, top_k: int,  # noqa: PLR0913
             filters: dict[str, Any] | None, documents: list[int | str] | None) -> QueryRequest:
    """The query request of a ``query`` or ``retrieve`` call (untraced: a tool answers without the trace)."""
    fields: dict[str, Any] = {"query": question, "collection": collection, "strategy": strategy, "top_k": top_k,
                              "include_trace": False}
    if top_docs is not None:
        fields["top_docs"] = top_docs
    if filters:
        fields["filters"] = filters
    if documents:
        fields["documents"] = documents
    return QueryRequest(**fields)


def build_mcp_server(services: Services) -> MCPServer:
    """An MCP server with the knowledge-base tools, reading its runtime from ``services``."""
    server = KBMCPServer("kb", instructions=INSTRUCTIONS, version=__version__)

    async def query(
        question: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                                       description="the question, in natural language")],
        collection: Collection = "default",
        strategy: Annotated[Strategy, Field(
            description="how documents are routed: auto (recommended) combines the others; metadata uses "
                        "company/year/type; semantic ranks by matching passages; description by document "
                        "descriptions")] = "auto",
        top_docs: Annotated[int | None, Field(ge=1, le=MAX_TOP_DOCS, description=(
            "how many documents to route to; leave unset to let the question decide"))] = None,
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="evidence passages handed to the answer")] = DEFAULT_TOP_K,
        filters: Filters = None,
        documents: Annotated[list[DocumentRef] | None, Field(max_length=MAX_TOP_DOCS, description=(
            "ask only these documents (doc_id or name from `list_documents`); routing is skipped"))] = None,
    ) -> dict[str, Any]:
        """Answer a question from the documents of a collection, with citations. `filters` (metadata, as in
        `list_documents`) limits the documents the answer may come from; `documents` names them (ids or names).

        Returns `answer` (text with [n] markers), `citations` (each with doc_id, doc_name, node_id,
        section_path, pages and the quoted text; pass doc_id and node_id to `get_node` to read more)
        and `documents` (the documents consulted, with routing scores and why they were chosen)."""
        with _tool_errors("query"):
            runtime, pipeline = services.get()
            req = _request(question, collection, strategy, top_docs, top_k, filters, documents)
            async with runtime.query_gate.turn():
                result = await pipeline.run(req)
            return {"answer": result.answer, "citations": msgspec.to_builtins(result.citations),
                    "documents": msgspec.to_builtins(result.documents)}

    async def retrieve(
        question: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                                       description="the question, in natural language")],
        collection: Collection = "default",
        strategy: Annotated[Strategy, Field(description="how documents are routed (as in `query`)")] = "auto",
        top_docs: Annotated[int | None, Field(ge=1, le=MAX_TOP_DOCS, description=(
            "how many documents to route to; leave unset to let the question decide"))] = None,
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="evidence passages to return")] = DEFAULT_TOP_K,
        filters: Filters = None,
        documents: Annotated[list[DocumentRef] | None, Field(max_length=MAX_TOP_DOCS, description=(
            "search only these documents (doc_id or name from `list_documents`); routing is skipped"))] = None,
    ) -> dict[str, Any]:
        """Find the evidence for a question without answering it: the routed documents (scores and why), the
        sections chosen in them (node_id, section path, pages) and the ranked passages, each with its score
        and citation (doc_id, doc_name, node_id, section_path, pages, text). For writing your own answer;
        `get_node` reads a section in full."""
        with _tool_errors("retrieve"):
            runtime, pipeline = services.get()
            req = _request(question, collection, strategy, top_docs, top_k, filters, documents)
            async with runtime.query_gate.turn():
                found = await retrieved(pipeline, req)
            return {"documents": msgspec.to_builtins(found.documents), "sections": msgspec.to_builtins(found.sections),
                    "passages": msgspec.to_builtins(found.passages), "strategy_used": found.strategy_used}

    async def list_collections() -> dict[str, Any]:
        """List the collections of the knowledge base with their descriptions and document counts."""
        with _tool_errors("list_collections"):
            runtime, _ = services.get()
            return {"collections": [{"name": c.name, "description": c.description, "documents": c.documents}
                                    for c in await collections.list_collections(runtime.pool)]}

    async def list_documents(
        collection: Collection = "default",
        filters: Filters = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="at most this many documents")] = 100,
        offset: Annotated[int, Field(ge=0, le=10**9, description="skip this many (paging)")] = 0,
    ) -> dict[str, Any]:
        """List the documents of a collection (by name): doc_id, name, title, one-sentence
        description, metadata (company, fiscal_year, doc_type…), file_type, page_count and the
        number of tree nodes. Use doc_id with `get_document_tree` and `get_node`."""
        with _tool_errors("list_documents"):
            runtime, _ = services.get()
            ids = None
            if filters:
                coll = await collections.get_collection(runtime.pool, collection)
                ids = [i for i, _ in await run_filter(runtime.pool, coll.id, conditions_from_filters(filters))]
            docs = await store.list_documents(runtime.pool, collection, limit=limit, offset=offset, ids=ids)
            return {"collection": collection, "documents": [_document(d) for d in docs]}

    async def get_document_tree(
        doc_id: DocId,
        node_id: Annotated[str | None, Field(min_length=1, max_length=64, description=(
            "only the subtree of this node (default: the whole document)"))] = None,
        max_depth: Annotated[int | None, Field(ge=1, le=32, description=(
            "only this many levels; a section cut off here carries child_count instead of nodes"))] = None,
    ) -> dict[str, Any]:
        """The outline of one document as nested PageIndex JSON: `structure` is a list of sections,
        each with title, node_id, start_index and end_index (1-based pages; lines for Markdown/text;
        paragraphs — headings, paragraphs, list items, table rows — for Word/HTML; see `unit`), summary, and its subsections in `nodes` (absent for a leaf). For a long document
        ask for `max_depth` 1 or 2 first, then expand a section with `node_id`. Read a section's text
        with `get_node`."""
        with _tool_errors("get_document_tree"):
            runtime, _ = services.get()
            info, nodes = await store.get_document(runtime.pool, doc_id)
            tree = to_pageindex(info.name, info.description, nodes)
            structure = tree["structure"]
            if node_id is not None:
                found = _find(structure, node_id)
                if found is None:
                    raise NotFoundError(f"document {doc_id} has no node {node_id!r}")
                structure = [found]
            if max_depth is not None:
                structure = [_prune(n, max_depth) for n in structure]
            return {"doc_id": info.id, "unit": nodes[0].unit if nodes else "page", "page_count": info.page_count,
                    **tree, "structure": structure}

    async def get_node(
        doc_id: DocId,
        node_id: Annotated[str, Field(min_length=1, max_length=64, description="node_id from the tree")],
        offset: Annotated[int, Field(ge=0, le=10**9, description="start reading at this character")] = 0,
        max_chars: Annotated[int, Field(ge=100, le=MAX_NODE_CHARS, description=(
            "return at most this many characters of text"))] = 20_000,
    ) -> dict[str, Any]:
        """Read one section of a document: its text (the pages it spans, or its own lines for
        Markdown; one paragraph or table row per line for Word/HTML), title path, page range, summary and children (node_id, title). Long texts come
        in pieces: when `truncated` is true call again with `offset` = `next_offset`."""
        with _tool_errors("get_node"):
            runtime, _ = services.get()
            node = await store.get_node(runtime.pool, doc_id, node_id)
            piece = node.text[offset : offset + max_chars]
            end = offset + len(piece)
            return {"doc_id": doc_id, "node_id": node.node_id, "title": node.title, "path": node.path,
                    "start_index": node.start_index, "end_index": node.end_index, "unit": node.unit,
                    "is_leaf": node.is_leaf, "summary": node.summary,
                    "children": [{"node_id": i, "title": t} for i, t in node.children],
                    "text": piece, "offset": offset, "text_chars": len(node.text),
                    "truncated": end < len(node.text), "next_offset": end if end < len(node.text) else None}
    for tool in (query, retrieve, list_collections, list_documents, get_document_tree, get_node):
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""), annotations=READ_ONLY)
    return server
