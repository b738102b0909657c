"""One file → one stored document: parse, tree, summaries, metadata, description, chunks, embeddings, write."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import msgspec
import numpy as np
import structlog

from ingest.chunker import chunk_tree
from ingest.describe import describe_document
from ingest.embedding import CachedEmbedder
from ingest.facts import extract_facts
from ingest.files import read_confined
from ingest.fingerprint import ingest_key
from ingest.formats import FORMATS, ParsedFile, build_tree, format_of
from ingest.formats import SUPPORTED as SUPPORTED  # re-exported for kb.bench
from ingest.formats import parse_file as parse_file  # re-exported for ingest.render, kb.bench
from ingest.lines import index_lines
from ingest.metadata import extract_metadata, merge_metadata, other_names, read_sidecar
from ingest.pageindex import (
    keep_given_summaries,
    parse_pageindex,
    read_tree_sidecar,
    tree_from_pageindex,
    tree_sidecar_path,
)
from ingest.parse_progress import page_counter
from ingest.pdf_read.ocr import unread_pages_note
from ingest.statements import mark_statements, statement_pages
from ingest.store import (
    DuplicateContentError,
    JobCancelledError,
    NewDocument,
    find_existing,
    get_document,
    list_documents,
    replace_facts,
    write_document,
)
from ingest.summaries import summarize_tree
from kb.core.collections import get_collection
from kb.core.cpu import CpuBudget
from kb.core.errors import IngestError, KBError, LLMError
from kb.core.process import pool_process_started
from kb.core.providers import ChatModel
from kb.core.providers.chat import CountingChat, OfflineChatModel
from kb.core.settings import IngestSettings
from kb.core.telemetry import Clock
from kb.core.types import DocumentTree, FactDraft, PageText, TreeNode
from kb.core.vocab import company_core, description_label

log = structlog.get_logger("ingest.pipeline")
T = TypeVar("T")

Progress = Callable[[str, int, int], object]
"""``progress(stage, done, total)`` while a file is ingested: reading, tree, summaries, chunking, embedding, storing
(``total`` 0 when not known; reading and tree count pages, chunking nodes, embedding and storing chunks)."""
EMBED_STEP = 64  # chunks embedded between two progress reports (the model's batch: no batch is split)
READ_POLL_S = 0.5  # how often the pages a parser has read are looked at

class IngestOutcome(msgspec.Struct, frozen=True):
    name: str
    status: str  # ok | replaced (an earlier version) | skipped | failed | unsupported (worker: cancelled, retry)
    document_id: int | None = None
    pages: int = 0
    chunks: int = 0
    nodes: int = 0
    seconds: float = 0.0
    tree_mode: str = ""
    llm_calls: int = 0
    error: str | None = None
    warnings: tuple[str, ...] = ()
    stage_ms: tuple[tuple[str, float], ...] = ()
    """Milliseconds per stage of the file: parse, tree, metadata, description, chunking, facts, embedding, store,
    lines (the rest of ``seconds``: reading the file, the unchanged-content check)."""


def file_kind(path: Path) -> str | None:
    """The format name of a file by its suffix (see ``ingest.formats``), or None when unsupported."""
    fmt = format_of(path)
    return fmt.name if fmt is not None else None


@dataclass
class IngestContext:
    """What ingesting a file needs. It owns its parser process pool: ``close()`` (or leaving ``with ctx:``)
    stops it, and ``renew_executor()`` replaces one that is stuck on a file or broken."""

    pool: asyncpg.Pool
    embedder: CachedEmbedder
    chat: ChatModel
    settings: IngestSettings
    executor: Executor | None = None  # process pool for parsing (``make_executor``); None → a thread
    embedder_generation: int | None = None  # vectors are refused once `kb reembed` moved past this generation
    budget: CpuBudget | None = None  # the machine's CPU budget: a file's parse, tree, chunking and facts hold a slot

    def renew_executor(self) -> None:
        """Replace the parser pool with a new one of the same size (the old one's processes are killed)."""
        old = self.executor
        if old is not None:
            stop_executor(old)
            self.executor = make_executor(getattr(old, "_max_workers", 1), getattr(old, "kb_nice", 0))

    def close(self) -> None:
        """Stop the parser pool (queued parses dropped, running parser processes killed); idempotent."""
        if self.executor is not None:
            stop_executor(self.executor)
            self.executor = None

    def __enter__(self) -> IngestContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_executor(workers: int, nice: int = 0) -> Executor | None:
    """A process pool for parsing (spawned, so it is safe beside threads and asyncio), its processes ``nice``
    steps below normal CPU priority (``KB_INGEST_NICE``); None for 0 workers."""
    if workers <= 0:
        return None
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=pool_process_started, initargs=(os.getpid(), nice))
    pool.kb_nice = nice  # type: ignore[attr-defined]  # kept by renew_executor
    return pool


def stop_executor(executor: Executor) -> None:
    """Shut a parser pool down now: queued work is dropped and running parser processes are killed."""
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.kill()


def max_file_bytes(settings: IngestSettings) -> int:
    """``KB_MAX_FILE_MB`` in bytes: the largest file read, and what a .docx may unpack to."""
    return settings.max_file_mb * 2**20


CONTENT_SIGNS: tuple[tuple[bytes, str, str], ...] = (  # leading bytes → (format it is, what it looks like)
    (b"%PDF-", "pdf", "a PDF"),
    (b"PK\x03\x04", "docx", "a ZIP archive (e.g. .docx, .xlsx)"),
    (b"\xd0\xcf\x11\xe0", "", "an old Microsoft Office file (.doc, .xls); save it as .docx or PDF"),
    (b"{\\rtf", "", "an RTF document; save it as .docx or PDF"),
    (b"\x89PNG", "", "a PNG image"),
    (b"\xff\xd8\xff", "", "a JPEG image"),
)
KIND_NAMES = {"pdf": "a PDF", "docx": "a .docx document"}  # formats whose content a wrong file cannot pass as


def looks_like(data: bytes) -> tuple[str, str]:
    """(format, description) of what ``data`` appears to be from its first bytes ("" when no format of ours)."""
    head = data[:512].lstrip(b"\xef\xbb\xbf \t\r\n")
    for sign, kind, what in CONTENT_SIGNS:
        if head.startswith(sign):
            return kind, what
    if head[:15].lower().startswith((b"<!doctype html", b"<html")):
        return "html", "an HTML page"
    try:
        data[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 4090:  # not only a character cut at the end of the sample
            return "", "binary data"
    return "markdown", "plain text"


async def _parse(ctx: IngestContext, data: bytes, kind: str, report: Progress) -> ParsedFile:
    """The parsed file; a file whose content is not its suffix's format says what it looks like instead.
    While the parser reads, ``report("reading", pages read, pages)`` every ``READ_POLL_S``."""
    loop = asyncio.get_running_loop()
    limit = max_file_bytes(ctx.settings)
    try:
        async with _slot(ctx, "parse"):  # one core's worth: the parser process
            with page_counter() as counter:
                if ctx.executor is not None:
                    parsing = loop.run_in_executor(ctx.executor, parse_file, data, kind, limit, counter)
                else:
                    parsing = asyncio.ensure_future(asyncio.to_thread(parse_file, data, kind, limit, counter))
                try:
                    while not (await asyncio.wait({parsing}, timeout=READ_POLL_S))[0]:
                        if (seen := counter.read())[1]:
                            report("reading", *seen)
                finally:
                    parsing.cancel()  # stopped while waiting (the job cancelled): not left pending; done: no-op
                return parsing.result()
    except IngestError as exc:
        actual, what = looks_like(data)
        if actual == kind or kind not in KIND_NAMES:
            raise
        raise IngestError(f"This file is not {KIND_NAMES[kind]}; it looks like {what} ({exc.detail})") from exc


async def _tree_and_summaries(parsed: ParsedFile, chat: ChatModel, settings: IngestSettings, title: str,
                              page_texts: dict[int, str] | None, given: DocumentTree | None = None) -> DocumentTree:
    """Our own tree, or the sidecar's (``given``) with summaries written only where it has none."""
    if given is not None:
        if all(n.summary for n in given.nodes):
            return given
        return keep_given_summaries(await summarize_tree(given, chat, settings, page_texts=page_texts), given)
    tree = await build_tree(parsed, chat, settings, title)
    return await summarize_tree(tree, chat, settings, page_texts=page_texts)


def _offline_tree(parsed: ParsedFile, settings: IngestSettings, title: str,
                  page_texts: dict[int, str] | None, given: DocumentTree | None = None) -> DocumentTree:
    """Tree and summaries with the offline provider, in a worker thread with its own event loop."""
    return asyncio.run(_tree_and_summaries(parsed, OfflineChatModel(), settings, title, page_texts, given))


def _count_page_tokens(pages: Sequence[PageText]) -> int:
    """Count every page's tokens (``PageText.tokens`` keeps each); their sum."""
    return sum(p.tokens for p in pages)


def _slot(ctx: IngestContext, what: str) -> contextlib.AbstractAsyncContextManager[None]:
    """A slot of the machine's CPU budget held by this coroutine for ``what`` (none without a budget)."""
    return ctx.budget.async_slot(what) if ctx.budget is not None else contextlib.nullcontext()


async def _in_thread(ctx: IngestContext, fn: Callable[..., T], /, *args: Any) -> T:
    """``fn(*args)`` in a worker thread, holding a slot of the CPU budget while it runs."""
    budget = ctx.budget
    if budget is None:
        return await asyncio.to_thread(fn, *args)

    def held() -> T:
        with budget.slot(getattr(fn, "__name__", "")):
            return fn(*args)

    return await asyncio.to_thread(held)


def _sidecar_tree(path: Path, raw: bytes | None, parsed: ParsedFile,
                  page_texts: dict[int, str] | None) -> tuple[DocumentTree | None, str | None]:
    """The tree of a ``<file>.tree.json`` sidecar, or (None, why it was refused)."""
    if raw is None:
        return None, None
    try:
        doc = parse_pageindex(raw)
        unit = FORMATS[parsed.kind].unit
        return tree_from_pageindex(doc, unit=unit, page_texts=page_texts, text=parsed.text or ""), None
    except IngestError as exc:
        note = (f"tree sidecar {tree_sidecar_path(path).name} refused ({exc.detail}); "
                "the tree was built from the document instead")
        log.warning("ingest.tree_sidecar_refused", name=path.name, error=exc.detail)
        return None, note


def _first_pages_text(parsed: ParsedFile, n: int = 8) -> str:
    if parsed.pdf is not None:
        return "\n".join(p.text for p in parsed.pdf.pages[:n])
    return (parsed.text or "")[:8000]


def _full_text(parsed: ParsedFile) -> str:
    """The document's text on one line (sentences a PDF or a text table wraps are whole again)."""
    text = "\n".join(p.text for p in parsed.pdf.pages) if parsed.pdf is not None else (parsed.text or "")
    return " ".join(text.split())


def safe_facts(parsed: ParsedFile, tree: DocumentTree, on_pages: Mapping[int, str], meta: Mapping[str, Any],
               name: str) -> list[FactDraft]:
    """``document_facts``, or none when reading them fails: the document is still stored, the failure logged."""
    try:
        return document_facts(parsed, tree, on_pages, meta, name)
    except Exception as exc:  # noqa: BLE001 - facts are an extra; a statement we cannot read loses only them
        log.warning("ingest.facts_failed", name=name, error=f"{type(exc).__name__}: {exc}")
        return []


def document_facts(parsed: ParsedFile, tree: DocumentTree, on_pages: Mapping[int, str],
                   meta: Mapping[str, Any], name: str = "") -> list[FactDraft]:
    """The statement facts of a parsed document (``ingest.facts``): its PDF statement pages, else its text."""
    period_end, doc_type = meta.get("period_end_date"), meta.get("doc_type")
    if tree.unit not in ("page", "line"):
        return []  # Word/HTML trees count paragraphs: a fact's line could not be cited
    if parsed.pdf is not None:
        return extract_facts(tree, pages=parsed.pdf.pages, statement_pages=dict(on_pages), period_end=period_end,
                             doc_type=doc_type, name=name)
    return extract_facts(tree, text=parsed.text or "", period_end=period_end, doc_type=doc_type, name=name)


def _title(tree: DocumentTree, meta: Mapping[str, Any], name: str, *, given: bool = False) -> str:
    """The document's title: one given (folder metadata, sidecar, front matter) as is; a title read from the
    document that does not name its known company ("Letter to shareholders", a first heading) gives way to
    company, type and period ("Northwind Energy annual report 2023")."""
    company = str(meta.get("company") or "")
    for key in ("title", "doc_name", "name"):
        if meta.get(key):
            title = str(meta[key])
            if given or not company or company_core(company).lower() in title.lower():
                return title
            kind = description_label(str(meta["doc_type"])) if meta.get("doc_type") else ""
            period = meta.get("fiscal_year") or meta.get("doc_period") or ""
            return " ".join(str(x) for x in (company, kind, period) if x)
    return Path(name).stem


def embed_text_for_chunk(doc_label: str, heading_path: str, text: str, context: str = "") -> str:
    """The text a chunk is embedded as: document label and section path give context to bare tables, and
    a chunk starting inside a table its table's title and column header (``context``)."""
    return f"{doc_label} | {heading_path}\n{context}\n{text}" if context else f"{doc_label} | {heading_path}\n{text}"


def embed_text_for_node(doc_label: str, path: Sequence[str], summary: str) -> str:
    """The text a tree node is embedded as."""
    return f"{doc_label} | {' > '.join(path)}: {summary}"


def embed_text_for_description(title: str, description: str) -> str:
    """The text a document's description is embedded as."""
    return f"{title}. {description}"


def doc_label(meta: Mapping[str, Any], title: str) -> str:
    parts = [str(meta[k]) for k in ("company", "doc_type", "fiscal_year", "fiscal_quarter", "doc_period") if meta.get(k)]
    return " ".join(dict.fromkeys([*parts, title]))


async def ingest_file(
    ctx: IngestContext,
    path: Path,
    *,
    name: str,
    collection_id: int,
    folder_metadata: Mapping[str, Any] | None = None,
    allowed_root: Path | None = None,
    job_id: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
    item_id: int | None = None,
) -> IngestOutcome:
    """Ingest one file into a collection. Never raises for bad input: returns a failed outcome.

    A file whose bytes are stored already is skipped unless what shaped its document changed since (settings,
    embedder, LLM model, given metadata: ``ingest.fingerprint``) or ``force``; then it is re-processed and the
    outcome says why. The stored version stays until the new one is written (one transaction).

    The file is read once, from one descriptor; with ``allowed_root`` its real path must lie inside it.
    With ``job_id``, nothing is stored once that job is cancelled (status ``cancelled``); with ``item_id``, once
    that file of it is.
    ``progress`` hears each stage as it starts (and the chunks embedded so far).
    """
    started = time.perf_counter()
    clock = Clock()
    report = progress or (lambda stage, done, total: None)
    kind = file_kind(path)
    if kind is None:
        return IngestOutcome(name=name, status="unsupported", error=f"unsupported file type {path.suffix or '(none)'}")
    try:
        data = await asyncio.to_thread(read_confined, path, allowed_root, max_file_bytes(ctx.settings))
    except IngestError as exc:
        log.warning("ingest.file_refused", name=name, error=exc.detail)
        return IngestOutcome(name=name, status="failed", error=exc.detail)
    try:  # a tree sidecar is part of the content: adding or changing one re-ingests the file
        tree_json, sidecar_note = await asyncio.to_thread(read_tree_sidecar, path, allowed_root), None
    except IngestError as exc:
        tree_json, sidecar_note = None, f"tree sidecar unreadable ({exc.detail}); the tree was built from the document"
    digest = hashlib.sha256(data)
    if tree_json is not None:
        digest.update(b"\x00tree.json\x00" + tree_json)
    sha = digest.hexdigest()
    try:
        sidecar = await asyncio.to_thread(read_sidecar, path, allowed_root)
    except IngestError as exc:
        log.warning("ingest.file_failed", name=name, error=exc.detail)
        return IngestOutcome(name=name, status="failed", error=exc.detail)
    key = ingest_key(ctx.settings, embedder=ctx.embedder.embedder.model_id, llm=ctx.chat.model_id,
                     metadata={"folder": dict(folder_metadata or {}), "sidecar": sidecar})
    existing = await find_existing(ctx.pool, collection_id, name, sha)
    redo = ""
    if existing is not None and existing.kind == "same":
        changed = key.changes(existing.ingest_key)
        if existing.name != name or not (force or changed):  # a copy under another name stays one document
            return IngestOutcome(name=name, status="skipped", document_id=existing.doc_id,
                                 error="unchanged (same sha256)")
        redo = (f"re-processed: {' and '.join(changed)} changed since it was stored" if changed
                else "re-processed on request (--force)")
    chat = CountingChat(ctx.chat)
    try:
        report("reading", 0, 0)
        with clock.stage("parse"):
            parsed = await _parse(ctx, data, kind, report)
        del data
        pages = max(parsed.pdf.total_pages, parsed.pdf.page_count) if parsed.pdf is not None else 0
        report("tree", pages, pages)
        if pages > ctx.settings.max_pages:
            raise IngestError(f"{pages} pages: more than KB_MAX_PAGES={ctx.settings.max_pages}")
        pdf = parsed.pdf
        with clock.stage("tree"):
            page_texts = {p.number: pdf.body_text(p.number) for p in pdf.pages} if pdf is not None else None
            given, refused = _sidecar_tree(path, tree_json, parsed, page_texts)
            sidecar_note = sidecar_note or refused
            if chat.offline:  # CPU-bound only: keep the event loop (API, heartbeats) responsive
                tree = await _in_thread(ctx, _offline_tree, parsed, ctx.settings, Path(name).stem, page_texts, given)
            else:
                report("summaries", 0, pages)
                if pdf is not None:  # the LLM tree reads every page's count: taken here, off the event loop
                    await _in_thread(ctx, _count_page_tokens, pdf.pages)
                tree = await _tree_and_summaries(parsed, chat, ctx.settings, Path(name).stem, page_texts, given)
        if sidecar_note:
            tree = msgspec.structs.replace(tree, warnings=(*tree.warnings, sidecar_note))
        with clock.stage("metadata"):
            auto = await asyncio.to_thread(extract_metadata, _first_pages_text(parsed), file_name=path.name,
                                           title_hint=tree.nodes[0].title if tree.nodes else None)
            meta = merge_metadata(folder_metadata or {}, sidecar, parsed.front_matter, auto)
            if "also_known_as" not in meta and (names := await asyncio.to_thread(other_names, _full_text(parsed),
                                                                                  meta.get("company"))):
                meta["also_known_as"] = names
            title = _title(tree, meta, name, given=any("title" in (layer or {}) for layer in (
                folder_metadata, sidecar, parsed.front_matter)))
        with clock.stage("description"):
            description = await describe_document(tree, meta, name, chat)
        with clock.stage("chunking"):
            report("chunking", 0, len(tree.nodes))
            chunks = await _in_thread(ctx, chunk_tree, tree, ctx.settings, page_texts,
                                      lambda done, total: report("chunking", done, total))
            on_pages = statement_pages(parsed.pdf.pages) if parsed.pdf else {}
            tree, chunks = mark_statements(tree, chunks, on_pages)
        with clock.stage("facts"):
            facts = await _in_thread(ctx, safe_facts, parsed, tree, on_pages, meta, name)
        if len(chunks) > ctx.settings.max_chunks:
            raise IngestError(f"{len(chunks)} chunks: more than KB_MAX_CHUNKS_PER_FILE={ctx.settings.max_chunks}")
        label = doc_label(meta, title)
        texts = [embed_text_for_chunk(label, c.heading_path, c.text, c.context) for c in chunks]
        parts = []
        with clock.stage("embedding"):
            for at in range(0, max(1, len(texts)), EMBED_STEP):  # one call for no chunks: its empty array
                report("embedding", at, len(texts))
                parts.append(await ctx.embedder.embed(texts[at : at + EMBED_STEP]))
            chunk_vecs = parts[0] if len(parts) == 1 else np.concatenate(parts)
            report("embedding", len(texts), len(texts))
            node_vecs = await ctx.embedder.embed([embed_text_for_node(label, n.path, n.summary) for n in tree.nodes])
            desc_vec = (await ctx.embedder.embed([embed_text_for_description(title, description)]))[0]
        with clock.stage("store"):
            report("storing", 0, len(chunks))
            doc_id = await write_document(
                ctx.pool,
                NewDocument(
                    collection_id=collection_id, name=name, source_path=str(path), sha256=sha, file_type=kind,
                    metadata=meta, title=title, description=description, description_embedding=desc_vec,
                    tree=tree, node_embeddings=node_vecs, chunks=chunks, chunk_embeddings=chunk_vecs,
                    embedder_generation=ctx.embedder_generation, facts=facts, job_id=job_id, item_id=item_id,
                    printed_pages=parsed.printed_pages, ingest_key=key.parts,
                ),
                progress=lambda done, total: report("storing", done, total),
            )
        if any(not f.concept for f in facts):
            with clock.stage("lines"):
                await _index_lines(ctx, collection_id, doc_id)
    except JobCancelledError as exc:
        return IngestOutcome(name=name, status="cancelled", error=exc.detail, seconds=time.perf_counter() - started)
    except DuplicateContentError as exc:  # another writer stored the same content first
        return IngestOutcome(name=name, status="skipped", document_id=exc.doc_id, error=exc.detail,
                             seconds=time.perf_counter() - started)
    except IngestError as exc:
        log.warning("ingest.file_failed", name=name, error=exc.detail)
        return IngestOutcome(name=name, status="failed", error=exc.detail, seconds=time.perf_counter() - started)
    except LLMError as exc:  # the steps degrade themselves; this is the last guard
        log.warning("ingest.file_failed", name=name, error=str(exc))
        return IngestOutcome(name=name, status="failed", error=f"LLM: {exc}", seconds=time.perf_counter() - started)
    except FileNotFoundError:
        return IngestOutcome(name=name, status="failed", error="file vanished during ingest",
                             seconds=time.perf_counter() - started)
    seconds = time.perf_counter() - started
    unread = [w for w in tree.warnings if unread_pages_note(w)]  # said in the job, not only on the document
    note = "; ".join(x for x in (redo, sidecar_note, *unread) if x) or None
    outcome = IngestOutcome(
        name=name, status="replaced" if existing else "ok", document_id=doc_id, pages=tree.page_count if tree.unit == "page" else 0,
        chunks=len(chunks),
        nodes=len(tree.nodes), seconds=seconds, tree_mode=tree.source_mode,
        llm_calls=chat.calls, warnings=tuple(tree.warnings), error=note,
        stage_ms=tuple((k, round(v, 1)) for k, v in clock.ms.items()),
    )
    log.info("ingest.file_done", name=name, doc_id=doc_id, pages=tree.page_count, nodes=len(tree.nodes),
             chunks=len(chunks), mode=tree.source_mode, llm_calls=chat.calls, seconds=round(seconds, 2),
             replaced=bool(existing), stage_ms=dict(outcome.stage_ms))
    return outcome


async def _index_lines(ctx: IngestContext, collection_id: int, doc_id: int) -> None:
    """The document's printed lines named and embedded for matching by meaning (``ingest.lines``); the document
    is stored either way — a failure here is logged, and the next document or ``kb facts`` fills them."""
    try:
        await index_lines(ctx.pool, ctx.embedder, collection_id, doc_id=doc_id, generation=ctx.embedder_generation)
    except (asyncpg.PostgresError, OSError, KBError) as exc:  # the document is stored: said, not failed
        log.warning("ingest.lines_failed", doc_id=doc_id, error=f"{type(exc).__name__}: {exc}")


class FactsRefresh(msgspec.Struct, frozen=True):
    """What ``refresh_facts`` did: documents read, facts stored, documents skipped (with reasons)."""

    documents: int
    facts: int
    skipped: tuple[str, ...]


async def refresh_facts(pool: asyncpg.Pool, collection: str, embedder: CachedEmbedder | None = None,
                        generation: int | None = None) -> FactsRefresh:
    """Re-read the statement facts of a collection's stored documents from their source files, without
    re-embedding (documents ingested before facts existed, or after ``ingest.facts`` improved), then, with an
    ``embedder``, name and embed the collection's printed lines (``ingest.lines``). A document whose source
    file is gone or changed keeps its facts and is reported."""
    coll = await get_collection(pool, collection)
    done, stored, skipped = 0, 0, []
    for info in await list_documents(pool, collection, limit=1_000_000):
        path = Path(info.source_path)
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as exc:
            skipped.append(f"{info.name}: source unreadable ({exc.strerror or exc})")
            continue
        if hashlib.sha256(data).hexdigest() != info.sha256 and not tree_sidecar_path(path).exists():
            skipped.append(f"{info.name}: source changed since ingest (ingest it again)")
            continue
        _, nodes = await get_document(pool, info.id)
        tree = DocumentTree(
            nodes=tuple(TreeNode(node_id=n.node_id, parent_id=n.parent_id, ordinal=n.ordinal, level=n.level,
                                 title=n.title, start=n.start_index, end=n.end_index, text="", summary="", path=(),
                                 is_leaf=n.is_leaf, unit=n.unit) for n in nodes),
            page_count=info.page_count, source_mode=info.tree_mode, unit=nodes[0].unit if nodes else "page")
        parsed = await asyncio.to_thread(parse_file, data, info.file_type)
        on_pages = statement_pages(parsed.pdf.pages) if parsed.pdf else {}
        facts = await asyncio.to_thread(safe_facts, parsed, tree, on_pages, info.metadata, info.name)
        await replace_facts(pool, info.id, coll.id, facts)
        done, stored = done + 1, stored + len(facts)
        log.info("ingest.facts_refreshed", doc_id=info.id, name=info.name, facts=len(facts))
    if embedder is not None:
        await index_lines(pool, embedder, coll.id, generation=generation)
    return FactsRefresh(done, stored, tuple(skipped))
