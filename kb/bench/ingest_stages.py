"""``kb bench ingest --stages --data DIR``: the product's whole ingest of a folder, seconds and share per stage.

Every supported file of ``DIR`` (or ``DIR/pdfs``) goes through ``ingest.pipeline.ingest_file`` — parse, tree,
metadata, description, chunking, facts, embedding, store, printed lines — into a scratch collection
(``bench-stages-<folder>``, emptied first) with the embedding cache bypassed (every text embedded again),
``KB_INGEST_WORKERS`` files at a time as ``kb ingest`` takes them (one file parses while another embeds; the
stage seconds are summed over files, so with two at a time they add up to more than the wall time). Then, in the
same run, the embedder alone over the same texts (each distinct text once) at its batch size: its texts/s is
the limit ingest can reach. Prints a Markdown report (``--out`` writes it).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kb.bench.environment import load_average, machine, utc_minutes
from kb.bench.markdown import table
from kb.core.process import run_async
from kb.core.settings import get_settings

STAGES = ("read", "parse", "tree", "metadata", "description", "chunking", "facts", "embedding", "store", "lines")


@dataclass
class StageReport:
    """One run: files, pages, chunks, seconds per stage, and the embedder alone over the chunk texts."""

    folder: str
    model: str
    files: int = 0
    failed: int = 0
    pages: int = 0
    chunks: int = 0
    seconds: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)
    embedded_texts: int = 0  # distinct texts: what the embedder alone runs
    asked_texts: int = 0  # texts ingest asked for (a text repeated within a file is embedded once)
    budget_cores: int = 0
    index_deferred: bool = False  # the chunks' vector index held back and built once at the end (ingest.bulk_index)
    index_build_s: float = 0.0  # that build, inside ``seconds``
    alone_s: float = 0.0
    batch: int = 0
    at_a_time: int = 1

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds else 0.0

    @property
    def alone_per_s(self) -> float:
        return self.embedded_texts / self.alone_s if self.alone_s else 0.0


class _Recording:
    """The ingest embedder, noting every text it is asked to embed (the same texts, embedded alone later)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.texts: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return await self.inner.embed(texts)  # type: ignore[attr-defined]


async def run_stages(files: Sequence[Path], folder: Path) -> StageReport:
    from ingest import bulk_index
    from ingest.embedding import CachedEmbedder
    from ingest.pipeline import ingest_file
    from ingest.store import delete_document, list_documents
    from kb.core.collections import ensure_collection
    from kb.runtime import build_ingest_context, open_runtime

    settings = get_settings()
    collection = f"bench-stages-{folder.parent.name if folder.name == 'pdfs' else folder.name}"
    async with open_runtime(settings) as rt:
        coll = await ensure_collection(rt.pool, collection)
        for d in await list_documents(rt.pool, collection, limit=100_000):
            await delete_document(rt.pool, d.id)
        runtime = "onnxruntime" if "onnx" in type(rt.embedder).__name__.lower() else type(rt.embedder).__name__
        report = StageReport(folder=str(folder), model=f"{rt.embedder.model_id}` on `{runtime}",
                             batch=settings.embedding.batch_size)
        with build_ingest_context(rt) as ctx:
            ctx.embedder = CachedEmbedder(rt.pool, rt.embedder, batch=settings.embedding.batch_size, refresh=True,
                                          background=True)
            recording = _Recording(ctx.embedder)
            ctx.embedder = recording  # type: ignore[assignment]
            report.at_a_time = max(1, settings.ingest.workers)
            report.budget_cores = ctx.budget.cores if ctx.budget is not None else 0
            queue = list(files)

            async def take_files() -> None:  # one of KB_INGEST_WORKERS loops, as the job worker runs them
                while queue:
                    path = queue.pop(0)
                    out = await ingest_file(ctx, path, name=path.name, collection_id=coll.id)
                    report.files += 1
                    if out.status not in ("ok", "replaced"):
                        report.failed += 1
                        continue
                    report.pages += out.pages
                    report.chunks += out.chunks
                    timed = dict(out.stage_ms)
                    report.stage_s["read"] = report.stage_s.get("read", 0.0) + max(0.0, out.seconds - sum(timed.values()) / 1000)
                    for stage, ms in timed.items():
                        report.stage_s[stage] = report.stage_s.get(stage, 0.0) + ms / 1000

            started = time.perf_counter()
            deferral = await bulk_index.defer_for_files(rt.pool, files, enabled=settings.ingest.defer_vector_index)
            try:  # as a job does: the index held back while its files go in, built once they are in
                await asyncio.gather(*(take_files() for _ in range(report.at_a_time)))
            finally:
                if deferral is not None:
                    report.index_deferred = True
                    built = await bulk_index.rebuild(rt.pool, deferral.index)
                    report.index_build_s = built.seconds if built is not None else 0.0
            report.seconds = time.perf_counter() - started
        texts = list(dict.fromkeys(recording.texts))  # each distinct text once: the least embedding ingest needs
        report.asked_texts = len(recording.texts)
        report.embedded_texts = len(texts)
        t = time.perf_counter()
        for at in range(0, len(texts), report.batch):
            rt.embedder.embed_batch(texts[at: at + report.batch])
        report.alone_s = time.perf_counter() - t
    return report


def render(r: StageReport) -> str:
    m = machine()
    load1, load5, _ = load_average()
    total = sum(r.stage_s.values()) or 1.0
    rows = [(stage, f"{r.stage_s.get(stage, 0.0):.1f}", f"{100 * r.stage_s.get(stage, 0.0) / total:.0f} %")
            for stage in STAGES if stage in r.stage_s]
    ratio = r.alone_s / r.seconds if r.seconds else 0.0  # the same texts: ingest's rate over the embedder's alone
    return "\n".join([
        f"## Ingest stages: {r.folder}",
        "",
        f"- date: {utc_minutes()}; machine: {m.arch}, {m.cores} cores; embedder `{r.model}` (batch {r.batch}); "
        f"load avg {load1:.2f}, {load5:.2f}",
        f"- {r.files} files ({r.failed} not ingested), {r.at_a_time} at a time (`KB_INGEST_WORKERS`), {r.pages} pages, "
        f"{r.chunks} chunks in {r.seconds:.1f} s: "
        f"{r.pages / r.seconds if r.seconds else 0:.2f} pages/s, {r.chunks_per_s:.1f} chunks/s",
        f"- the embedder alone over the same {r.embedded_texts} distinct texts (chunks, nodes, descriptions, printed "
        f"lines; ingest asked for {r.asked_texts}): {r.alone_s:.1f} s, {r.alone_per_s:.1f} texts/s; ingest embedded "
        f"them in {r.seconds:.1f} s — **{100 * ratio:.1f} % of the embedder's limit**",
        f"- CPU budget (`KB_CPU_CORES`): {r.budget_cores} cores shared by parses, trees, chunking, facts and embedding runs",
        "- the chunks' vector index (`KB_INGEST_DEFER_INDEX`): " + (
            f"held back while the files went in, then built in {r.index_build_s:.1f} s (counted in the "
            f"{r.seconds:.1f} s)" if r.index_deferred else "each chunk inserted into it as it was stored"),
        "",
        *table(["stage", "seconds (summed over files)", "share"], rows, align="lrr"),
        "",
    ])


def run_cli(args: argparse.Namespace) -> int:
    from ingest.pipeline import SUPPORTED

    if args.data is None:
        raise SystemExit("kb bench ingest --stages: --data DIR is required")
    folder = args.data / "pdfs" if (args.data / "pdfs").is_dir() else args.data
    if not folder.is_dir():
        raise SystemExit(f"kb bench ingest --stages: no folder at {folder}")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUPPORTED)
    if args.limit:
        files = files[: args.limit]
    if not files:
        raise SystemExit(f"kb bench ingest --stages: no supported files in {folder}")
    text = render(run_async(run_stages(files, folder)))
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0
