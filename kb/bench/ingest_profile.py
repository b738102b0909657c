"""`kb bench ingest --data DIR`: tree-building figures without the database or embeddings.

For every PDF/Markdown file under ``DIR`` (or ``DIR/pdfs``): parse (process pool), build the tree,
summaries, description and chunks, offline; then again with a counting fake LLM that answers every
JSON-schema call with a minimal valid object, to count LLM calls per 100 pages. Prints pages/s,
the share of tree modes, nodes and chunks per document.
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
from kb.core.types import ChatResult, ChatUsage


def minimal_json(schema: dict[str, Any]) -> Any:
    """The smallest value valid for a JSON schema (what a terse model might answer)."""
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties", {})
        return {k: minimal_json(props.get(k, {})) for k in schema.get("required", [])}
    if t == "array":
        return []
    if t in {"number", "integer"}:
        return 0
    if t == "boolean":
        return False
    return schema.get("enum", [""])[0]


class CountingFakeLLM:
    """A ChatModel that answers instantly with minimal valid JSON and counts calls per purpose."""

    model_id = "counting-fake"
    offline = False

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    async def complete_json(self, *, purpose: str, system: str, prompt: str, schema: dict[str, Any]) -> ChatResult:
        self.calls[purpose] += 1
        data = minimal_json(schema)
        return ChatResult(text=json.dumps(data), data=data, model=self.model_id, usage=ChatUsage(len(prompt) // 4, 10))

    async def complete_text(self, *, purpose: str, system: str, prompt: str) -> ChatResult:
        self.calls[purpose] += 1
        return ChatResult(text="A document.", model=self.model_id, usage=ChatUsage(len(prompt) // 4, 5))


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
    from kb.core.providers.chat import OfflineChatModel

    if getattr(args, "workers", None):  # N worker processes against one database (kb.bench.ingest_scale)
        from kb.bench.ingest_scale import run_cli as run_scale_cli

        return run_scale_cli(args)
    if args.data is None:
        raise SystemExit("kb bench ingest: --data DIR is required")
    folder = args.data / "pdfs" if (args.data / "pdfs").is_dir() else args.data
    from ingest.pipeline import SUPPORTED

    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUPPORTED)
    if args.limit:
        files = files[: args.limit]
    workers = max(1, get_settings().ingest.workers)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        offline = run_async(_profile(files, OfflineChatModel(), pool))
        fake = CountingFakeLLM()
        with_llm = run_async(_profile(files, fake, pool))
    calls = sum(fake.calls.values())
    report = {
        "data": str(folder), "offline": offline,
        "llm": {"calls": calls, "by_purpose": dict(fake.calls),
                "calls_per_100_pages": round(100 * calls / with_llm["pages"], 2) if with_llm["pages"] else None,
                "modes": with_llm["modes"]},
    }
    print(json.dumps(report, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))
    return 0
