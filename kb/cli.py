"""The ``kb`` command line: run, serve, worker, db, config, ingest, query, export, reembed, reindex, jobs, facts, mcp,
bench."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from kb.core.errors import ConfigError, KBError, ValidationError
from kb.core.logging import configure_logging
from kb.core.process import run_async
from kb.core.settings import Settings, get_settings, setting_docs, settings_table
from kb.core.text import unit_label
from router.types import DEFAULT_TOP_K, MAX_TOP_DOCS, MAX_TOP_K, STRATEGIES

if TYPE_CHECKING:
    from kb.core.db import Release
    from router.trace import QueryResult, ScopeTrace

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples" / "reports"


# ---------------------------------------------------------------- helpers
def _console():
    from rich.console import Console

    return Console(stderr=False)


def _pages(item: Any) -> str:
    """Pages of a PDF; Markdown, text, Word and HTML have line/paragraph units, not pages: "-"."""
    return str(item.pages) if item.pages or item.status != "ok" else "-"


async def _ingest(path: Path, collection: str, recursive: bool, metadata: Path | None, *, quiet: bool = False,
                  by_root: bool = True, force: bool = False) -> int:
    """Create a job and run a local worker until it is done, with a progress bar and a final table; documents
    are named by their path under ``KB_INGEST_ROOT`` when inside it (``by_root``), else under ``path``;
    ``force`` re-processes files even when nothing changed."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Table

    from ingest.jobs import JobStatus, create_job, run_job
    from kb.core.collections import ensure_collection
    from kb.runtime import build_ingest_context, open_runtime

    console = _console()
    async with open_runtime() as rt:
        coll = await ensure_collection(rt.pool, collection)
        job_id = await create_job(rt.pool, collection_id=coll.id, path=path, recursive=recursive,
                                  metadata_path=metadata, name_root=rt.settings.ingest.root if by_root else None,
                                  force=force)
        started = time.perf_counter()
        columns = (TextColumn("[bold]ingest[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        with build_ingest_context(rt) as ctx, Progress(*columns, console=console, disable=quiet) as progress:
            bar = progress.add_task("files", total=None, detail="")

            def show(job: JobStatus) -> None:
                rate = job.pages / max(time.perf_counter() - started, 1e-6)
                progress.update(bar, total=job.files, completed=job.files_done,
                                detail=f"{job.pages} pages, {job.chunks} chunks, {rate:.1f} pages/s")

            # a full worker until the job is finished: files claimed by another worker (e.g. the server's) are
            # waited for, and taken over if that worker dies
            job = await run_job(ctx, job_id, workers=rt.settings.ingest.workers, on_progress=show)
        table = Table(title=f"job {job_id} → collection {collection!r} ({time.perf_counter() - started:.1f} s)")
        for col in ("file", "status", "pages", "chunks", "seconds", "detail"):
            table.add_column(col)
        for it in job.items:
            style = {"ok": "green", "replaced": "green", "failed": "red", "skipped": "yellow", "unsupported": "yellow"}.get(it.status)
            table.add_row(it.name, f"[{style}]{it.status}[/]" if style else it.status, _pages(it),
                          str(it.chunks), f"{it.seconds:.1f}" if it.seconds else "", it.error or "")
        if not quiet and console.is_terminal:
            console.print(table)
        elif not quiet:  # a pipe or a log: whole names, one tab-separated line per file
            print("file\tstatus\tpages\tchunks\tseconds\tdetail")
            for it in job.items:
                print("\t".join([it.name, it.status, _pages(it), str(it.chunks),
                                 f"{it.seconds:.1f}" if it.seconds else "", (it.error or "").replace("\n", " ")]))
        return 1 if job.counts.get("failed") else 0


def _print_result(result: QueryResult, question: str) -> None:
    """Spec 001 step-by-step terminal format, read from the typed trace (``router.trace.Trace``)."""
    bar = "=" * 60
    trace = result.trace
    print(bar)
    print(f"Query: {question}")
    print(bar)
    print(f"\n>>> Step 0: Routing ({trace.strategy_used if trace else '?'})")
    if trace is not None and trace.follow_up is not None:
        taken = "; ".join(f"{i.part} {i.value!r} ({i.turns_back} turn{'s' if i.turns_back > 1 else ''} back"
                          f"{', from the answer' if i.source == 'assistant' else ''})" for i in trace.follow_up.inherited)
        print(f"  follow-up: \"{trace.follow_up.question}\" — from earlier turns: {taken}")
    for note in trace.routing.notes if trace else ():
        print(f"  note: {note}")
    for d in result.documents:
        print(f"  [{d.doc_id}] {d.name}  score={d.score:.3f}  ({d.why})")
    if trace is not None:
        _print_scope(trace.scope)
    if trace is not None and trace.question is not None:
        q = trace.question
        read = f"{q.operation or 'nothing'} of {', '.join(m.name for m in q.measures) or 'no measure'}"
        print(f"  read as: {read}" + (f" — not understood: {'; '.join(q.unknown)}" if q.unknown else ""))
    print("\n>>> Step 1: Node Locating")
    for s in trace.tree_search if trace else ():
        if s.thinking:
            print(f"Thinking ({s.doc_id}): {s.thinking[:300]}")
    nodes = trace.nodes if trace else ()
    print(f"Located {len(nodes)} nodes:")
    for n in nodes:
        print(f"  [doc {n.doc_id} · {n.node_id}] {n.section_path}  ({n.reason})")
        print(f"    sub_query: \"{n.sub_query}\"")
    print("\n>>> Step 2: Hybrid Retrieval + Rerank")
    print(f"Retrieved {len(result.citations)} cited chunks ({trace.rerank if trace else ''}):")
    for c in result.citations:
        print(f"  #{c.marker} [{c.node_id}] {c.doc_name} › {c.section_path} "
              f"({unit_label(c.unit)} {c.pages[0]}-{c.pages[1]})")
        print(f"     \"{' '.join(c.text.split())[:160]}...\"")
    scored = list({c.chunk_id: c for c in trace.chunks}.values())[:5] if trace else []
    for ch in scored:
        rr = f"  rerank={ch.rerank:.2f}" if ch.rerank is not None else ""
        print(f"     chunk {ch.chunk_id}: dense={ch.dense:.2f}  bm25={ch.bm25:.2f}  fused={ch.fused:.2f}{rr}")
    if trace is not None and trace.iterations:
        print(f"\n>>> Step 2b: Sufficiency ({trace.ranking} ranking)")
        for r in trace.iterations:
            read = ", ".join(f"doc {d} · {n}" for d, n in r.read) or "nothing more"
            print(f"  round {r.round}: {r.judgement} — {r.reason[:200]} → read {read}")
            for note in r.dropped:
                print(f"    dropped: {note}")
    print("\n>>> Step 3: Answer")
    print(result.answer)
    if trace is not None and trace.timings_ms:
        print("\n" + "  ".join(f"{k}={v:.0f}ms" for k, v in trace.timings_ms.items()))
    print(bar)


def _print_scope(scope: ScopeTrace) -> None:
    """The scope decision: its kind and reason, companies not found, sub-questions, empty and dropped reads."""
    print(f"  scope: {scope.kind} ({scope.reason}; {scope.mode})")
    for m in scope.missing_entities:
        print(f"  not in the collection: {m}")
    for sq in scope.sub_questions:
        print(f"  sub-question [{sq.doc_id}] {sq.doc_name}: \"{sq.question}\"")
    for d in scope.nothing_found:
        print(f"  no evidence found in {d}")
    for note in scope.dropped:
        print(f"  dropped: {note}")


STDIN_LINE_LIMIT = 64 * 1024 * 1024  # bytes of one line read from a pipe (an MCP message is one line)


async def _stdin_stream() -> asyncio.StreamReader | None:
    """fd 0 read through the event loop, so a stop signal cancels a read at once, when it is a pipe, socket or
    terminal; None for a regular file (whose reads never wait)."""
    import os
    import stat

    mode = os.fstat(sys.stdin.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and sys.stdin.isatty())):
        return None  # a file, or a device that is no terminal (/dev/null: epoll refuses it): read like a file
    stream = asyncio.StreamReader(limit=STDIN_LINE_LIMIT)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), sys.stdin)
    return stream


class _StdinLines:
    """The lines of a stdin stream as ``async for`` gives them (what the MCP stdio transport reads)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        raw = await self._stream.readline()
        if not raw:
            raise StopAsyncIteration
        return raw.decode("utf-8", errors="replace")


class _LineReader:
    """``input(prompt)`` that a stop signal interrupts at once. ``asyncio.to_thread(input)`` would make
    ``asyncio.run`` wait for the line; on a terminal the line is read (with editing) on a daemon thread, from
    a pipe through the event loop (a daemon thread in a buffered read would crash the interpreter's exit)."""

    def __init__(self) -> None:
        self._stream: asyncio.StreamReader | None = None
        self._tty = sys.stdin.isatty()  # asked once: the pipe's transport closes stdin at its end

    async def __call__(self, prompt: str) -> str:
        if self._tty:
            return await self._terminal(prompt)
        if self._stream is None:
            self._stream = await _stdin_stream()
        if self._stream is None:  # a file
            return await asyncio.to_thread(input, prompt)
        print(prompt, end="", flush=True)
        raw = await self._stream.readline()
        if not raw:
            raise EOFError
        return raw.decode(errors="replace").rstrip("\r\n")

    @staticmethod
    async def _terminal(prompt: str) -> str:
        import threading

        loop = asyncio.get_running_loop()
        line: asyncio.Future[str] = loop.create_future()

        def settle(value: str | None, exc: BaseException | None) -> None:
            if not line.done():
                line.set_exception(exc) if exc is not None else line.set_result(value or "")

        def read() -> None:
            try:
                value, exc = input(prompt), None
            except BaseException as e:  # noqa: BLE001 - EOFError and the like go to the awaiting task
                value, exc = None, e
            try:
                loop.call_soon_threadsafe(settle, value, exc)
            except RuntimeError:  # the loop has closed: nobody waits for the line any more
                pass

        threading.Thread(target=read, name="kb-input", daemon=True).start()
        return await line


def _filters(pairs: list[str]) -> dict[str, Any]:
    """``--filter key=value`` pairs as request filters: a value that reads as JSON (2023, [2022, 2023],
    {"gte": 2021}) is taken as such, anything else as text; a key given twice takes both values."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"--filter {pair!r}: write it as key=value (e.g. fiscal_year=2023)")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        key = key.strip()
        if key in out:
            value = [*(out[key] if isinstance(out[key], list) else [out[key]]), value]
        out[key] = value
    return out


async def _query(args: argparse.Namespace) -> int:
    from kb.runtime import build_pipeline, open_runtime
    from router.types import QueryRequest

    piped = not args.question and not args.interactive and not sys.stdin.isatty()  # one question per line
    async with open_runtime() as rt:
        pipeline = build_pipeline(rt)
        questions = [args.question] if args.question else []
        interactive = args.interactive or not (questions or piped)
        read_line = _LineReader()
        history: list[Any] = []
        asked = 0
        while True:
            if interactive or piped:
                try:
                    q = (await read_line("" if piped else "kb> ")).strip()
                except EOFError:
                    break
                if q in {"", "exit", "quit"}:
                    if q and not piped:
                        break
                    continue
            elif questions:
                q = questions.pop()
            else:
                break
            asked += 1
            req = QueryRequest(query=q, collection=args.collection, strategy=args.strategy, top_docs=args.top_docs,
                               top_k=args.top_k, history=history if interactive else [],
                               documents=[int(d) if d.isdigit() else d for d in args.document or []],
                               filters=_filters(args.filter or []))
            try:
                result = await pipeline.run(req)
            except KBError as exc:
                print(f"kb: {exc.detail}", file=sys.stderr)
                if not interactive:
                    return 2
                continue
            if args.json:
                print(json.dumps(msgspec.to_builtins(result), indent=2, ensure_ascii=False))
            else:
                _print_result(result, q)
            if interactive:
                from router.types import Turn

                history = [*history, Turn("user", q), Turn("assistant", result.answer)][-6:]
        if piped and not asked:
            print("kb query: no question — pass one as an argument, pipe questions one per line, or run "
                  "`kb query --interactive` on a terminal", file=sys.stderr)
            return 2
        return 0


async def _export(doc_id: int) -> int:
    """Print a stored document's tree as PageIndex JSON."""
    from ingest.pageindex import export_pageindex
    from kb.runtime import open_runtime

    async with open_runtime() as rt:
        print(json.dumps(await export_pageindex(rt.pool, doc_id), indent=2, ensure_ascii=False))
        return 0


async def _reembed(collection: str | None, batch: int, *, quiet: bool = False) -> int:
    """Re-embed the stored vectors with the configured embedder, with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ingest.reembed import reembed
    from kb.runtime import open_runtime

    console = _console()
    async with open_runtime(allow_embedder_change=True) as rt:
        emb = rt.embedder
        with Progress(TextColumn("[bold]reembed[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("vectors"),
                      TimeElapsedColumn(), console=console, disable=quiet) as progress:
            bar = progress.add_task("vectors", total=None)
            result = await reembed(rt.pool, emb, collection=collection, batch=batch,
                                   on_progress=lambda done, total: progress.update(bar, completed=done, total=total))
        scope = f"collection {collection!r}" if collection else "every collection"
        print(f"kb: re-embedded {result.vectors} vectors of {scope} with {emb.model_id!r} ({emb.dimension}-d) "
              f"in {result.seconds:.1f} s ({result.resumed} staged by an earlier run, {result.embedded} computed; "
              f"swap {result.swap_seconds:.1f} s)")
        return 0


async def _reindex(every: bool) -> int:
    """Re-tokenise stored chunks for full-text search (no re-embedding): those without tokens or from an older
    tokenizer (what every start does), or all of them with ``every``."""
    from ingest.reindex import ensure_tokens
    from ingest.store import tokenizer_version
    from kb.runtime import open_runtime

    async with open_runtime() as rt:  # the start itself re-tokenises what is missing or stale
        result = await ensure_tokens(rt.pool, force=True) if every else None
        version = await tokenizer_version(rt.pool)
    if result is not None:
        print(f"kb: re-tokenised {result.chunks} chunks of {result.collections} collections in {result.seconds:.1f} s")
    print(f"kb: full-text tokens are up to date (tokenizer {version})")
    return 0


async def _jobs(limit: int, cancel: int | None, as_json: bool, item: int | None = None) -> int:
    """List the newest ingest jobs (status, files, pages/s, time left), or cancel one (or one file of it)."""
    from ingest.jobs import cancel_file, cancel_job, list_jobs
    from kb.runtime import open_runtime

    async with open_runtime() as rt:
        if cancel is not None and item is not None:
            was = await cancel_file(rt.pool, cancel, item)
            print(f"kb: file {item} of job {cancel} cancelled" + (" (it stops within seconds)" if was == "running" else ""))
            return 0
        if cancel is not None:
            n = await cancel_job(rt.pool, cancel)
            print(f"kb: job {cancel} cancelled ({n} pending files; a file being ingested stops within seconds)")
            return 0
        jobs = await list_jobs(rt.pool, limit=limit, items_limit=200 if as_json else 0)  # --json: files, ids
    if as_json:
        print(json.dumps([msgspec.to_builtins(j) for j in jobs], indent=2, ensure_ascii=False))
        return 0
    if not jobs:
        print("kb: no ingest jobs")
    for j in jobs:
        rate = f"{j.pages_per_s:.1f} pages/s" if j.pages_per_s else "— pages/s"
        left = f", about {j.seconds_left:.0f} s left" if j.seconds_left else ""
        print(f"{j.id:>5}  {j.status:<9} {j.collection:<16} {j.files_done}/{j.files} files, {j.pages} pages, "
              f"{rate}{left}  {j.root_path}")
    return 0


async def _facts(collection: str) -> int:
    """Re-read the statement facts of a collection's documents from their source files."""
    from ingest.pipeline import refresh_facts
    from kb.runtime import build_ingest_context, open_runtime

    async with open_runtime() as rt:
        with build_ingest_context(rt, processes=False) as ctx:
            result = await refresh_facts(rt.pool, collection, ctx.embedder, ctx.embedder_generation)
    print(f"kb: {result.facts} facts from {result.documents} documents of collection {collection!r}")
    for line in result.skipped:
        print(f"kb: skipped {line}", file=sys.stderr)
    return 0 if not result.skipped else 1


async def _mcp_stdio() -> int:
    """Serve the MCP tools over stdin/stdout until the client closes the pipe."""
    import contextlib

    from mcp.server.stdio import stdio_server

    from kb.mcp_server import Services, build_mcp_server
    from kb.runtime import build_pipeline, open_runtime

    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the protocol and nothing else
        rt = await open_runtime()
    try:
        server = build_mcp_server(Services(rt, build_pipeline(rt)))
        stream = await _stdin_stream()  # read through the loop: a stop signal is not kept waiting for a line
        async with stdio_server(_StdinLines(stream) if stream else None) as (read, write):  # type: ignore[arg-type]
            low = server._lowlevel_server  # what run_stdio_async runs; it takes no stdin of ours
            await low.run(read, write, low.create_initialization_options())
        return 0
    finally:
        await rt.close()


async def _preflight() -> None:
    """Fail fast, with one readable line, before the server starts (database, schema, embedder)."""
    from kb.runtime import open_runtime

    rt = await open_runtime()
    await rt.close()


def _serve(host: str, port: int, banner: str = "", workers: int = 1) -> None:
    from kb.app import create_app
    from kb.serve import serve

    run_async(_preflight())

    def ready() -> None:
        base = f"http://{host}:{port}"
        extra = f", {workers} worker processes" if workers > 1 else ""
        print(f"kb: serving on {base}  (web UI: {base}/, OpenAPI: {base}/schema{extra})", flush=True)
        if banner:
            print(banner, flush=True)

    if workers > 1:  # each worker process builds its own app; say "ready" once, here
        ready()
        serve(None, host, port, get_settings().server, workers=workers)
        return  # the embedded Postgres this process started stops in main() once the workers are gone
    app = create_app(bound_host=host, on_ready=ready)
    serve(app, host, port, get_settings().server)


async def _samples_ingested(collection: str) -> bool:
    from kb.core.db import count_documents, resolve_database_url

    url = await asyncio.to_thread(resolve_database_url, get_settings().database)
    return await count_documents(url, collection) > 0


def cmd_run(args: argparse.Namespace) -> int:
    """make run: embedded Postgres, schema, sample reports (first time), then the API with a ready curl."""
    s = get_settings()
    if not run_async(_samples_ingested("default")):
        print(f"kb: first start — ingesting the sample reports from {SAMPLES_DIR}", flush=True)
        run_async(_ingest(SAMPLES_DIR, "default", False, SAMPLES_DIR.parent / "metadata.jsonl", by_root=False))
    host, port = args.host or s.server.host, args.port or s.server.port
    banner = (f"\nReady. Open the web UI at http://{host}:{port}/ or try:\n"
              f"  curl -s http://{host}:{port}/kb/query -H 'Content-Type: application/json' \\\n"
              "    -d '{\"query\": \"What was Helios Robotics revenue in fiscal 2023?\", \"include_trace\": false}'\n")
    _serve(host, port, banner)
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from kb.core.db import embedded_status, start_embedded, stop_embedded

    s = get_settings().database
    if s.url and args.action != "status":
        print("kb: KB_DATABASE_URL is set; the embedded server is not used", file=sys.stderr)
        return 2
    if args.action == "start":
        print(start_embedded(s.data_dir, keep_running=True))
    elif args.action == "stop":
        print("stopped" if stop_embedded(s.data_dir) else "not running")
    else:
        status = {"external_url": bool(s.url), **embedded_status(s.data_dir)}
        print(json.dumps(status, indent=2))
    return 0


def cmd_worker(_: argparse.Namespace) -> int:
    async def run() -> None:
        import signal

        from ingest.jobs import STOP_GRACE_S, Worker
        from kb.core.process import STOP_SIGNALS, note_signal
        from kb.runtime import build_ingest_context, open_runtime

        async with open_runtime() as rt:
            with build_ingest_context(rt) as ctx:
                worker = Worker(ctx, concurrency=rt.settings.ingest.workers)
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                def on_signal(sig: signal.Signals) -> None:
                    note_signal(sig)
                    stop.set()

                for sig in STOP_SIGNALS:  # graceful: a file being ingested is handed back
                    loop.add_signal_handler(sig, on_signal, sig)
                print(f"kb: worker {worker.name} waiting for ingest jobs (Ctrl-C to stop)", flush=True)
                await worker.run(stop, grace_s=STOP_GRACE_S)

    try:
        run_async(run())
    except KeyboardInterrupt:
        pass
    return 0


def _config_table(settings: Settings) -> str:
    """The effective settings for people: each environment variable, its value and what it does, by group."""
    masked = settings.masked()
    lines: list[str] = []
    group = None
    docs = list(setting_docs())
    width = max(len(d.env) for d in docs)
    for d in docs:
        if d.group != group:
            group = d.group
            lines.append(f"{'' if not lines else chr(10)}[{group}]")
        value = masked[d.group][d.name]
        shown = "(unset)" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        lines.append(f"{d.env:<{width}}  {shown}  # {d.doc}")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kb", description="Multi-document knowledge base with a document router")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="embedded DB + sample reports + API (what `make run` does)")
    r.add_argument("--host")
    r.add_argument("--port", type=int)
    s = sub.add_parser("serve", help="run the API")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--workers", type=int, default=1,
                   help="API processes sharing the port (use the cores); each also runs an ingest worker "
                        "unless KB_RUN_WORKER=false")
    sub.add_parser("worker", help="run an ingest worker (claims jobs from Postgres)")
    d = sub.add_parser("db", help="manage the embedded Postgres")
    d.add_argument("action", choices=["status", "start", "stop"])
    c = sub.add_parser("config", help="print the effective settings (secrets masked)")
    c.add_argument("--format", choices=["table", "json", "env", "markdown"], default="table",
                   help="table (default): each KB_* variable, its value and meaning; json: by group; env: "
                        "variable=value lines; markdown: every setting's variable, default and meaning (the README "
                        "table)")
    examples = argparse.RawDescriptionHelpFormatter
    i = sub.add_parser("ingest", help="ingest a file or folder", formatter_class=examples,
                       description="Ingest a file or a folder into a collection (a job, run here to the end).",
                       epilog="examples:\n"
                              "  kb ingest samples/reports --metadata samples/metadata.jsonl\n"
                              "  kb ingest ~/filings --recursive --collection filings\n"
                              "  kb ingest report.pdf            # one file; an unchanged file is skipped\n"
                              "  kb ingest ~/filings --force     # re-process every file, changed or not")
    i.add_argument("path", type=Path, help="a file, or a folder of .pdf/.md/.txt/.docx/.html files")
    i.add_argument("--collection", default="default",
                   help="collection to add to (default: default; create others with POST /kb/collections)")
    i.add_argument("--metadata", type=Path, metavar="FILE",
                   help="metadata.jsonl or .csv with one row per file (name = file stem), e.g. company, fiscal_year")
    i.add_argument("--recursive", action="store_true", help="include subfolders (hidden ones are skipped)")
    i.add_argument("--force", action="store_true",
                   help="re-process every file, even unchanged ones (a file whose settings, embedder, LLM model "
                        "or given metadata changed is re-processed anyway)")
    q = sub.add_parser("query", help="ask a question", formatter_class=examples,
                       description="Ask the documents of a collection; the answer cites the pages it comes from.",
                       epilog="examples:\n"
                              "  kb query \"What was Helios Robotics revenue in fiscal 2023?\"\n"
                              "  kb query \"Which company had a product recall?\" --strategy semantic --top-k 8\n"
                              "  kb query \"Compare the 2023 revenue of Aurora and Northwind\" --top-docs 2 --json\n"
                              "  kb query \"What were the main risks?\" --document helios-robotics-2023-annual-report.md\n"
                              "  kb query \"Total revenue?\" --filter company=\"Helios Robotics\" --filter fiscal_year=2023\n"
                              "  kb query --interactive          # a conversation: follow-up questions keep context")
    q.add_argument("question", nargs="?", help="the question (omit with --interactive)")
    q.add_argument("--strategy", default="auto", choices=STRATEGIES,
                   help="how documents are picked: auto (metadata, then semantic), metadata (filters from the "
                        "question), semantic (document similarity), description (document summaries); default auto")
    q.add_argument("--collection", default="default", help="collection to ask (default: default)")
    q.add_argument("--top-docs", type=int, default=None, metavar="N",
                   help=f"documents to route (1-{MAX_TOP_DOCS}; default: as many as the question's scope needs)")
    q.add_argument("--top-k", type=int, default=DEFAULT_TOP_K, metavar="N",
                   help=f"evidence passages to cite (1-{MAX_TOP_K}, default {DEFAULT_TOP_K})")
    q.add_argument("--document", action="append", metavar="ID_OR_NAME",
                   help="ask only this document (repeat for several; ids or names as `GET /kb/documents` lists "
                        "them): routing is skipped")
    q.add_argument("--filter", action="append", metavar="KEY=VALUE",
                   help="only documents whose metadata matches (repeat; e.g. company=Acme, fiscal_year=2023, "
                        "'fiscal_year={\"gte\": 2021}')")
    q.add_argument("--json", action="store_true", help="print the whole result (citations, trace) as JSON")
    q.add_argument("--interactive", action="store_true", help="ask several questions in a row, with history")
    e = sub.add_parser("export", help="print a document's tree as PageIndex JSON (usable as a .tree.json sidecar)")
    e.add_argument("doc_id", type=int, metavar="DOC", help="document id (see GET /kb/documents)")
    rb = sub.add_parser("reembed", help="re-embed every stored vector with the configured embedder (resumable)")
    rb.add_argument("--collection", help="only this collection (with the recorded embedder only)")
    rb.add_argument("--batch", type=int, default=256, help="texts per staged batch")
    ri = sub.add_parser("reindex", help="re-tokenise stored chunks for full-text search (no re-embedding)")
    ri.add_argument("--all", action="store_true", help="every chunk, not only those without current tokens")
    jb = sub.add_parser("jobs", help="list the newest ingest jobs, or cancel one")
    jb.add_argument("--limit", type=int, default=20, help="how many jobs, newest first")
    jb.add_argument("--cancel", type=int, metavar="JOB", help="cancel this job (its pending and running files)")
    jb.add_argument("--file", type=int, metavar="ID", dest="item",
                    help="with --cancel: cancel only this file of the job (its id, as `kb jobs --json` lists it)")
    jb.add_argument("--json", action="store_true", help="print the jobs as JSON")
    jb.add_argument("words", nargs="*", metavar="cancel JOB [FILE]",
                    help="`kb jobs cancel JOB` cancels a job, `kb jobs cancel JOB FILE` one file of it (as --cancel, "
                         "--file)")
    fa = sub.add_parser("facts", help="re-read the statement facts of stored documents from their source files")
    fa.add_argument("--collection", required=True)
    sub.add_parser("mcp", help="serve the Model Context Protocol over stdio (for agents; HTTP is at /mcp)")
    b = sub.add_parser("bench", help="evaluate routing and retrieval on a benchmark dataset")
    from kb.bench_cli import add_bench_arguments

    add_bench_arguments(b)
    return p


def main(argv: list[str] | None = None) -> int:
    """The ``kb`` program. Called with ``argv`` (in-process, tests), the signal handlers are restored after
    and the caller's other child processes are left alone."""
    import signal

    from kb.core.process import STOP_SIGNALS, die_with_spawner, install_stop_signals, received_signal

    args = build_parser().parse_args(argv)
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    install_stop_signals()  # SIGTERM and SIGHUP stop every command the way Ctrl-C does
    try:
        die_with_spawner()  # a kb child of another kb command (kb bench's workers) stops when that one dies
        code = _dispatch(args)
    except KeyboardInterrupt:
        code = 128 + (received_signal() or signal.SIGINT)
    finally:
        _finish(args.command, end_all_children=argv is None)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if argv is None and received_signal() is not None:
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End a stopped ``kb`` process when its stop line says so: its children are ended, its Postgres stopped and
    its logs flushed; what is left — joining threads still blocked in a read or a model call, the interpreter's
    tear-down of large libraries — took seconds after the line (the line said 2.0 s, the process lived 7)."""
    import logging
    import os

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _finish(command: str, *, end_all_children: bool) -> None:
    """After every command: end the child processes left, leave the embedded Postgres (stopped when this was
    the last process using it) and, after a stop signal, say so in one line."""
    import signal

    from kb.core.db import release_embedded
    from kb.core.process import STOP_SIGNALS, end_children, received_signal, seconds_since_signal, signal_name

    for sig in STOP_SIGNALS:  # a second Ctrl-C must not leave the database half stopped
        signal.signal(sig, signal.SIG_IGN)
    children = end_children() if end_all_children else 0
    released = release_embedded()
    sig = received_signal()
    if sig is None:
        return
    print(f"kb {command}: stopped by {signal_name(sig)} in {seconds_since_signal():.1f} s; {_database_line(released)}; "
          f"{children} child process{'es' if children != 1 else ''} ended", file=sys.stderr, flush=True)


def _database_line(released: list[Release]) -> str:
    """What became of the database, for the stop line."""
    if not released:
        return "left the embedded Postgres as it was" if _embedded_db() else "external database untouched"
    r = released[0]
    if r.stopped:
        return f"stopped the embedded Postgres, the last process using it ({r.data_dir})"
    if r.error:
        return f"could not stop the embedded Postgres ({r.error})"
    if r.kept:
        return "left the embedded Postgres running (kept by kb db start)"
    if r.others:
        return f"left the embedded Postgres running for {r.others} other kb process{'es' if r.others != 1 else ''}"
    return "the embedded Postgres was not running"


def _embedded_db() -> bool:
    try:
        return get_settings().database.url is None
    except ConfigError:
        return False


def _dispatch(args: argparse.Namespace) -> int:
    try:
        settings = get_settings()
        configure_logging(settings.server.log_format, settings.server.log_level)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "serve":
            _serve(args.host or settings.server.host, args.port or settings.server.port, workers=max(1, args.workers))
            return 0
        if args.command == "worker":
            return cmd_worker(args)
        if args.command == "db":
            return cmd_db(args)
        if args.command == "config":
            if args.format == "table":
                print(_config_table(settings), end="")
            elif args.format == "markdown":
                print(settings_table(), end="")
            elif args.format == "env":
                print("\n".join(settings.env_lines()))
            else:
                print(json.dumps(settings.masked(), indent=2))
            return 0
        if args.command == "ingest":
            if not args.path.exists():
                raise ConfigError(f"path {args.path} does not exist")
            meta = args.metadata.resolve() if args.metadata else None
            return run_async(_ingest(args.path.resolve(), args.collection, args.recursive, meta, force=args.force))
        if args.command == "query":
            return run_async(_query(args))
        if args.command == "export":
            return run_async(_export(args.doc_id))
        if args.command == "reembed":
            return run_async(_reembed(args.collection, max(1, args.batch)))
        if args.command == "reindex":
            return run_async(_reindex(args.all))
        if args.command == "facts":
            return run_async(_facts(args.collection))
        if args.command == "jobs":
            if args.words:  # kb jobs cancel JOB [FILE]
                if args.words[0] != "cancel" or not 2 <= len(args.words) <= 3 \
                        or not all(w.isdigit() for w in args.words[1:]):
                    print("kb jobs: expected `kb jobs cancel JOB [FILE]`", file=sys.stderr)
                    return 2
                args.cancel = int(args.words[1])
                args.item = int(args.words[2]) if len(args.words) == 3 else None
            if args.item is not None and args.cancel is None:
                print("kb jobs: --file needs --cancel JOB", file=sys.stderr)
                return 2
            return run_async(_jobs(max(1, min(args.limit, 200)), args.cancel, args.json, args.item))
        if args.command == "mcp":
            return run_async(_mcp_stdio())
        if args.command == "bench":
            from kb.bench_cli import run_bench

            return run_bench(args)
    except ConfigError as exc:
        print(f"kb: error: {exc.detail}", file=sys.stderr)
        return 2
    except KBError as exc:
        print(f"kb: {exc.title.lower()}: {exc.detail}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
