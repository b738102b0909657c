"""PageIndex JSON, both ways: export a stored tree, and read a ``<file>.tree.json`` sidecar as a tree.

The format is the one PageIndex writes: ``{doc_name, doc_description, structure: [{title, node_id,
start_index, end_index, summary, nodes: [...]}]}`` with 1-based physical pages (1-based lines for
Markdown and text files), keys in PageIndex's order and ``nodes`` left out when empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import structlog

from ingest.files import read_confined
from ingest.markdown_tree import _split_lines
from ingest.store import NodeInfo, get_document
from kb.core.errors import IngestError
from kb.core.types import DocumentTree, TreeNode

log = structlog.get_logger("ingest.pageindex")

TREE_SIDECAR_SUFFIX = ".tree.json"
SOURCE_MODE = "pageindex"
MAX_SIDECAR_BYTES = 20 * 1024 * 1024
MAX_NODES = 20_000
MAX_DEPTH = 32
MAX_TITLE_CHARS = 500
MAX_NODE_ID_CHARS = 64
MAX_SUMMARY_CHARS = 10_000
MAX_SPAN_FACTOR = 12  # all nodes together span at most this many times the document (each holds its text)


class PageIndexNode(msgspec.Struct, frozen=True):
    """One node as PageIndex writes it; other keys PageIndex may add (``text``…) are ignored."""

    title: str
    start_index: int
    end_index: int
    node_id: str | None = None
    summary: str = ""
    nodes: list[PageIndexNode] = []


class PageIndexDocument(msgspec.Struct, frozen=True):
    structure: list[PageIndexNode]
    doc_name: str = ""
    doc_description: str = ""


# --------------------------------------------------------------------------- export


def to_pageindex(doc_name: str, doc_description: str, nodes: Sequence[NodeInfo]) -> dict[str, Any]:
    """The nested PageIndex JSON of a stored tree (``nodes`` in tree order)."""
    children: dict[str | None, list[NodeInfo]] = {}
    for n in nodes:
        children.setdefault(n.parent_id, []).append(n)

    def build(n: NodeInfo) -> dict[str, Any]:
        out: dict[str, Any] = {"title": n.title, "node_id": n.node_id, "start_index": n.start_index,
                               "end_index": n.end_index, "summary": n.summary}
        kids = children.get(n.node_id, [])
        if kids:
            out["nodes"] = [build(k) for k in kids]
        return out

    known = {n.node_id for n in nodes}
    roots = [n for n in nodes if n.parent_id is None or n.parent_id not in known]
    return {"doc_name": doc_name, "doc_description": doc_description, "structure": [build(r) for r in roots]}


async def export_pageindex(pool: asyncpg.Pool, doc_id: int) -> dict[str, Any]:
    """A stored document's tree as PageIndex JSON; ``NotFoundError`` for an unknown id."""
    info, nodes = await get_document(pool, doc_id)
    return to_pageindex(info.name, info.description, nodes)


# --------------------------------------------------------------------------- sidecar


def tree_sidecar_path(path: Path) -> Path:
    """``report.pdf`` → ``report.pdf.tree.json``."""
    return path.with_name(path.name + TREE_SIDECAR_SUFFIX)


def read_tree_sidecar(path: Path, allowed_root: Path | None = None) -> bytes | None:
    """The raw bytes of ``<file>.tree.json`` next to ``path``, or None when there is none; read confined to
    ``allowed_root`` like the file itself."""
    sidecar = tree_sidecar_path(path)
    try:
        if sidecar.stat().st_size > MAX_SIDECAR_BYTES:
            raise IngestError(f"{sidecar.name}: larger than {MAX_SIDECAR_BYTES // (1024 * 1024)} MB")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IngestError(f"{sidecar.name}: cannot read: {exc.strerror or exc}") from exc
    try:
        return read_confined(sidecar, allowed_root)
    except IngestError as exc:
        raise IngestError(f"{sidecar.name}: {exc.detail}") from exc


def parse_pageindex(data: bytes) -> PageIndexDocument:
    """Decode PageIndex JSON; ``IngestError`` with the reason when it is not that format."""
    try:
        return msgspec.json.decode(data, type=PageIndexDocument)
    except msgspec.ValidationError as exc:
        raise IngestError(f"not PageIndex JSON: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise IngestError(f"invalid JSON: {exc}") from exc
    except RecursionError as exc:  # nested far deeper than MAX_DEPTH: refused like any bad sidecar
        raise IngestError(f"nested deeper than {MAX_DEPTH} levels") from exc


def _check_text(value: str, what: str, limit: int) -> str:
    if "\x00" in value:
        raise IngestError(f"{what} contains a NUL character")
    if len(value) > limit:
        raise IngestError(f"{what} is longer than {limit} characters")
    return value


def _validate(doc: PageIndexDocument, page_count: int, unit: str) -> None:
    """Titles non-empty, ranges 1 ≤ start ≤ end ≤ page_count, node ids unique, bounded size and depth."""
    if not doc.structure:
        raise IngestError("the structure is empty")
    units = {"page": "pages", "paragraph": "paragraphs"}.get(unit, "lines")
    seen: set[str] = set()
    count = span = 0
    max_span = MAX_SPAN_FACTOR * page_count

    def visit(node: PageIndexNode, depth: int, where: str) -> None:
        nonlocal count, span
        count += 1
        if count > MAX_NODES:
            raise IngestError(f"more than {MAX_NODES} nodes")
        if depth > MAX_DEPTH:
            raise IngestError(f"nested deeper than {MAX_DEPTH} levels")
        label = f"node {node.node_id or where}"
        if not node.title.strip():
            raise IngestError(f"{label}: empty title")
        _check_text(node.title, f"{label}: title", MAX_TITLE_CHARS)
        _check_text(node.summary, f"{label}: summary", MAX_SUMMARY_CHARS)
        if node.node_id is not None:
            if not node.node_id.strip():
                raise IngestError(f"{label}: empty node_id")
            _check_text(node.node_id, f"{label}: node_id", MAX_NODE_ID_CHARS)
            if node.node_id in seen:
                raise IngestError(f"duplicate node_id {node.node_id!r}")
            seen.add(node.node_id)
        if node.start_index > node.end_index:
            raise IngestError(f"{label} ({node.title[:60]!r}): start_index {node.start_index} > "
                              f"end_index {node.end_index}")
        if node.start_index < 1 or node.end_index > page_count:
            raise IngestError(f"{label} ({node.title[:60]!r}): {units} {node.start_index}-{node.end_index} "
                              f"outside the document, which has {page_count} {units}")
        span += node.end_index - node.start_index + 1
        if span > max_span:  # each node keeps the text of its range: bounded memory and storage
            raise IngestError(f"the nodes span more than {MAX_SPAN_FACTOR} times the document's {page_count} "
                              f"{units} in total (ranges overlap too much)")
        for i, child in enumerate(node.nodes):
            visit(child, depth + 1, f"{where}.{i + 1}")

    for i, root in enumerate(doc.structure):
        visit(root, 1, str(i + 1))


def _flatten(doc: PageIndexDocument) -> list[tuple[PageIndexNode, str, str | None, int, tuple[str, ...]]]:
    """(node, node id, parent id, level, title path) in depth-first order; missing ids become "0000"…
    (skipping ids the file already uses)."""
    given: set[str] = set()

    def collect(nodes: Sequence[PageIndexNode]) -> None:
        for n in nodes:
            if n.node_id is not None:
                given.add(n.node_id)
            collect(n.nodes)

    collect(doc.structure)
    out: list[tuple[PageIndexNode, str, str | None, int, tuple[str, ...]]] = []
    counter = 0

    def next_id() -> str:
        nonlocal counter
        while f"{counter:04d}" in given:
            counter += 1
        given.add(f"{counter:04d}")
        return f"{counter:04d}"

    def walk(nodes: Sequence[PageIndexNode], parent: str | None, level: int, path: tuple[str, ...]) -> None:
        for n in nodes:
            node_id = n.node_id if n.node_id is not None else next_id()
            my_path = (*path, n.title.strip())
            out.append((n, node_id, parent, level, my_path))
            walk(n.nodes, node_id, level + 1, my_path)

    walk(doc.structure, None, 1, ())
    return out


def tree_from_pageindex(doc: PageIndexDocument, *, unit: str, page_texts: Mapping[int, str] | None = None,
                        text: str | None = None) -> DocumentTree:
    """A ``DocumentTree`` from a PageIndex document: pages of a PDF (``page_texts``) or lines of a
    Markdown/text file (``text``). Raises ``IngestError`` with the reason when the tree does not fit."""
    lines = _split_lines(text or "") if unit != "page" else []
    page_count = len(page_texts or {}) if unit == "page" else len(lines)
    _validate(doc, page_count, unit)
    flat = _flatten(doc)
    nodes: list[TreeNode] = []
    for i, (n, node_id, parent, level, path) in enumerate(flat):
        if unit == "page":
            body = "\n\n".join((page_texts or {}).get(p, "") for p in range(n.start_index, n.end_index + 1))
        else:  # Markdown/text: a node's own lines, up to its first child
            own_end = n.nodes[0].start_index - 1 if n.nodes else n.end_index
            body = "\n".join(lines[n.start_index - 1 : own_end])
        nodes.append(TreeNode(node_id=node_id, parent_id=parent, ordinal=i, level=level, title=n.title.strip(),
                              start=n.start_index, end=n.end_index, text=body, summary=n.summary.strip(),
                              path=path, is_leaf=not n.nodes, unit=unit))
    return DocumentTree(nodes=tuple(nodes), page_count=page_count, source_mode=SOURCE_MODE, unit=unit)


def keep_given_summaries(summarized: DocumentTree, given: DocumentTree) -> DocumentTree:
    """``summarized`` with the sidecar's own summaries where it had one."""
    own = {n.node_id: n.summary for n in given.nodes if n.summary}
    nodes = tuple(msgspec.structs.replace(n, summary=own[n.node_id]) if n.node_id in own else n
                  for n in summarized.nodes)
    return msgspec.structs.replace(summarized, nodes=nodes)
