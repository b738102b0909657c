"""`kb bench ingest --data DIR`: tree-building figures without the database or embeddings.

For every PDF/Markdown file under ``DIR`` (or ``DIR/pdfs``): parse (process pool), build the tree,
summaries, description and chunks, offline; with ``--llm``, again with the configured endpoint (``KB_LLM_*``),
counting its calls per purpose and per 100 pages. Prints pages/s, the share of tree modes, nodes and chunks
per document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from kb.core.process import run_async
from kb.core.settings import get_settings


async def _profile(files: list[Path], chat: Any, executor: ProcessPoolExecutor) -> dict[str, Any]:
    from ingest.chunker import chunk_tree
    from ingest.describe import describe_document
    from ingest.pipeline import build_tree, file_kind, parse_file
    from ingest.summaries import summarize_tree

    settings = get_settings().ingest
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    parsed_all = await asyncio.gather(*(loop.run_in_executor(executor, parse_file, str(f), file_kind(f) or "")
                                        for f in files), return_exceptions=True)
    parse_s = time.perf_counter() - started
    rows = []
    for f, parsed in zip(files, parsed_all, strict=True):
        if isinstance(parsed, BaseException):
            rows.append({"file": f.name, "error": str(parsed)})
            continue
        t = time.perf_counter()
        tree = await build_tree(parsed, chat, settings, f.stem)
        pages = {p.number: p.text for p in parsed.pdf.pages} if parsed.pdf is not None else None
        tree = await summarize_tree(tree, chat, settings, page_texts=pages)
        await describe_document(tree, {}, f.name, chat)
        chunks = chunk_tree(tree, settings, pages)
        rows.append({"file": f.name, "pages": tree.page_count if tree.unit == "page" else 0,
                     "mode": tree.source_mode, "nodes": len(tree.nodes), "chunks": len(chunks),
                     "seconds": time.perf_counter() - t})
    total = time.perf_counter() - started
    ok = [r for r in rows if "error" not in r]
    pages = sum(r["pages"] for r in ok)
    return {
        "files": len(files), "ok": len(ok), "pages": pages, "seconds": round(total, 2),
        "parse_seconds": round(parse_s, 2), "pages_per_s": round(pages / total, 1) if total else None,
        "modes": dict(Counter(r["mode"] for r in ok)),
        "nodes_per_doc": round(statistics.mean(r["nodes"] for r in ok), 1) if ok else 0,
        "chunks_per_100_pages": round(100 * sum(r["chunks"] for r in ok) / pages, 1) if pages else None,
        "errors": [r for r in rows if "error" in r],
    }


def run_cli(args: argparse.Namespace) -> int:
    from kb.core.providers.chat import CountingChat, OfflineChatModel
    from kb.core.providers.factory import get_chat_model

    if getattr(args, "workers", None):  # N worker processes against one database (kb.bench.ingest_scale)
        from kb.bench.ingest_scale import run_cli as run_scale_cli

        return run_scale_cli(args)
    if getattr(args, "stages", False):  # the whole ingest into the database, seconds per stage
        from kb.bench.ingest_stages import run_cli as run_stages_cli

        return run_stages_cli(args)
    if args.data is None:
        raise SystemExit("kb bench ingest: --data DIR is required")
    folder = args.data / "pdfs" if (args.data / "pdfs").is_dir() else args.data
    from ingest.pipeline import SUPPORTED

    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUPPORTED)
    if args.limit:
        files = files[: args.limit]
    workers = max(1, get_settings().ingest.workers)
    chat = get_chat_model() if getattr(args, "llm", False) else None
    if chat is not None and chat.offline:
        raise SystemExit("kb bench ingest --llm needs an LLM endpoint: set KB_LLM_BASE_URL (and KB_LLM_API_KEY, "
                         "KB_LLM_MODEL)")
    with ProcessPoolExecutor(max_workers=workers) as pool:
        report: dict[str, Any] = {"data": str(folder), "offline": run_async(_profile(files, OfflineChatModel(), pool))}
        if chat is not None:
            counting = CountingChat(chat)
            with_llm = run_async(_profile(files, counting, pool))
            report["llm"] = {"calls": counting.calls, "by_purpose": dict(counting.by_purpose),
                             "calls_per_100_pages": round(100 * counting.calls / with_llm["pages"], 2)
                             if with_llm["pages"] else None, "modes": with_llm["modes"]}
    print(json.dumps(report, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))
    return 0
