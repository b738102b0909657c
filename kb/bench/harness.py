"""``kb bench financebench|docugami|loong``: ingest a corpus, run every strategy on the production path, score it.

Routed strategies go through ``QueryPipeline.retrieve`` (routing + tree search + in-node retrieval), exactly
as the API does, then ``router.synthesize.synthesize`` over its evidence (timed apart: latency is retrieval);
the ``flat-*`` baselines go through ``router.flat.FlatRetriever`` over the same chunks and embedder, answered
extractively (no LLM) from their top-k chunks. Metrics are defined in ``kb.bench.metrics``; the datasets,
with their own metrics, in ``kb.bench.datasets.DATASETS``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog

from kb.bench.datasets import DATASETS, BenchDataset, BenchQuestion, default_collection, load_dataset
from kb.bench.environment import git_commit, machine, pgvector_version, utc_seconds
from kb.bench.metrics import QuestionRun, aggregate, metric_names, question_metrics, reading_of
from kb.bench.strategies import BENCH_STRATEGIES, FLAT, ROUTED, parse_strategies
from kb.core.errors import KBError, ValidationError
from kb.core.process import run_async
from kb.core.providers.chat import CountingChat
from kb.runtime import Runtime

log = structlog.get_logger("kb.bench.harness")

TOP_DOCS = 5
"""Routed documents requested per question (doc_hit@1/@3 and doc_recall@3/@5 come from one ranking)."""
FLAT_DOC_POOL = 50
"""Flat baselines rank documents by their first appearance among this many top chunks."""
ANSWER_CHARS = 1500
"""Characters of each answer kept in the per-question JSON (to check the answer metrics by eye)."""

SQL_NODE_SPANS = """
SELECT n.document_id, n.node_id, n.start_index, n.end_index, n.unit
FROM nodes n JOIN unnest($1::bigint[], $2::text[]) AS p(doc_id, node_id)
  ON n.document_id = p.doc_id AND n.node_id = p.node_id"""
SQL_BIGGEST_JOB = """
SELECT extract(epoch FROM (j.finished_at - j.started_at)) AS seconds, sum(i.pages) AS pages
FROM ingest_jobs j
JOIN collections c ON c.id = j.collection_id
JOIN ingest_job_items i ON i.job_id = j.id AND i.status = 'ok'
WHERE c.name = $1 AND j.status = 'done' AND j.started_at IS NOT NULL AND j.finished_at IS NOT NULL
GROUP BY j.id ORDER BY sum(i.pages) DESC, j.id DESC LIMIT 1"""
SQL_COVERING_NODE = """
SELECT n.node_id FROM nodes n
WHERE n.document_id = $1 AND n.unit = 'page' AND n.start_index <= $2 AND n.end_index >= $2
  AND (n.is_leaf OR EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = n.document_id AND c.node_id = n.node_id))
ORDER BY n.end_index - n.start_index, n.level DESC LIMIT 1"""


class BenchConfig(msgspec.Struct, frozen=True, kw_only=True):
    dataset: str
    data_dir: Path
    questions: Path | None = None
    collection: str | None = None
    strategies: tuple[str, ...] = BENCH_STRATEGIES
    ks: tuple[int, ...] = (5, 10)
    reuse: bool = False
    limit: int | None = None
    llm: bool = False
    """Run with the configured LLM endpoint (ingest, routing, tree search, sufficiency and synthesis);
    without it every run is offline, whatever is configured, so figures are reproducible."""
    price_in: float = 0.0  # USD per million prompt tokens (--llm cost estimate)
    price_out: float = 0.0  # USD per million completion tokens
    oracle: str = ""
    """Diagnostics: "docs" routes the gold documents, "nodes" also chooses the nodes covering the gold pages."""

    @property
    def collection_name(self) -> str:
        return self.collection or default_collection(self.dataset, self.data_dir)


class IngestSummary(msgspec.Struct, frozen=True):
    """The collection after ingest. ``seconds`` is the wall time of this run's ingest job or, when the
    collection was reused, of the earlier job that ingested most of its pages (``pages_per_s`` from that job)."""

    docs: int
    pages: int
    chunks: int
    seconds: float | None
    reused: bool
    pages_per_s: float | None = None
    failed: dict[str, str] = {}


class BenchReport(msgspec.Struct, frozen=True):
    """The JSON document written by ``--json`` (``dataset``, ``collection``, ``ingest``, ``strategies`` first)."""

    dataset: str
    collection: str
    ingest: IngestSummary
    strategies: dict[str, dict[str, Any]]
    by_type: dict[str, dict[str, dict[str, Any]]]
    skipped: list[dict[str, str]]
    questions: list[dict[str, Any]]
    environment: dict[str, Any]


# --------------------------------------------------------------------------- arguments


def parse_ks(raw: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(x) for x in raw.split(",") if x.strip()}))
    except ValueError as exc:
        raise ValidationError(f"--k must be a comma-separated list of integers, got {raw!r}") from exc
    if not ks or ks[0] < 1 or ks[-1] > 50:
        raise ValidationError("--k values must be between 1 and 50")
    return ks


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(dataset=args.dataset, data_dir=Path(args.data).expanduser().resolve(),
                       questions=Path(args.questions).expanduser().resolve() if args.questions else None,
                       collection=args.collection, strategies=parse_strategies(args.strategies),
                       ks=parse_ks(args.k), reuse=bool(args.reuse), limit=args.limit,
                       llm=bool(getattr(args, "llm", False)), price_in=float(getattr(args, "price_in", 0.0) or 0.0),
                       price_out=float(getattr(args, "price_out", 0.0) or 0.0), oracle=getattr(args, "oracle", "") or "")


# --------------------------------------------------------------------------- ingest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


async def outdated_documents(rt: Runtime, ds: BenchDataset, collection: str) -> tuple[list[int], bool]:
    """(ids of stored documents to delete, whether the collection already holds exactly the corpus).

    A document is outdated when its file is gone from ``pdfs/`` or its stored metadata no longer
    matches the dataset's metadata file; a changed PDF (other sha256) is replaced by the ingest job itself.
    """
    from ingest.metadata import load_folder_metadata
    from ingest.store import list_documents

    docs = {d.name: d for d in await list_documents(rt.pool, collection, limit=100_000)}
    rows = {}
    if ds.metadata_path is not None:
        rows = await asyncio.to_thread(load_folder_metadata, ds.pdf_dir, ds.metadata_path)
    outdated = []
    for name, doc in docs.items():
        row = rows.get(Path(name).stem, {})
        if name not in ds.files or any(doc.metadata.get(k) != v for k, v in row.items() if v not in (None, "")):
            outdated.append(doc.id)
    current = not outdated and set(docs) == set(ds.files)
    if current:
        for name in ds.files:
            if docs[name].sha256 != await asyncio.to_thread(_sha256, ds.pdf_dir / name):
                current = False
                break
    return outdated, current


def stage_anonymized(ds: BenchDataset, staging: Path) -> tuple[BenchDataset, dict[str, str]]:
    """Copy the PDFs to ``staging`` as ``doc-<sha256 prefix>.pdf`` (stable across runs, so ``--reuse``
    works); returns the dataset pointing there and the map neutral name → original name."""
    staging.mkdir(parents=True, exist_ok=True)
    alias: dict[str, str] = {}
    for name in ds.files:
        neutral = f"doc-{_sha256(ds.pdf_dir / name)[:16]}.pdf"
        alias[neutral] = name
        target = staging / neutral
        if not target.is_file():
            shutil.copyfile(ds.pdf_dir / name, target)
    for old in staging.glob("*.pdf"):
        if old.name not in alias:
            old.unlink()
    return msgspec.structs.replace(ds, pdf_dir=staging, files=tuple(sorted(alias))), alias


async def _collection_summary(rt: Runtime, collection: str, seconds: float | None, reused: bool,
                              failed: dict[str, str], job_pages: int | None = None) -> IngestSummary:
    from ingest.store import list_documents

    docs = await list_documents(rt.pool, collection, limit=100_000)
    pages = sum(d.page_count for d in docs)
    rate = round((job_pages if job_pages is not None else pages) / seconds, 3) if seconds else None
    return IngestSummary(docs=len(docs), pages=pages, chunks=sum(d.chunk_count for d in docs),
                         seconds=round(seconds, 1) if seconds is not None else None, reused=reused,
                         pages_per_s=rate, failed=failed)


async def ingest_dataset(rt: Runtime, ds: BenchDataset, collection: str, *, reuse: bool) -> IngestSummary:
    """Ingest ``DIR/pdfs`` into ``collection`` with the product's job worker, unless ``reuse`` finds it current.

    Without ``reuse`` the collection is emptied first, so the time measured is a full ingest.
    """
    from ingest.jobs import create_job, run_job
    from ingest.lines import index_lines
    from ingest.store import delete_document, list_documents
    from kb.core.collections import ensure_collection
    from kb.runtime import build_ingest_context

    coll = await ensure_collection(rt.pool, collection)
    if reuse:
        stale, current = await outdated_documents(rt, ds, collection)
        if current:
            # a collection ingested before its printed lines were named and embedded (sql/0014) gets them now
            with build_ingest_context(rt, processes=False) as ctx:
                await index_lines(rt.pool, ctx.embedder, coll.id, generation=ctx.embedder_generation)
            # the timing of the job that ingested most of the corpus
            row = await rt.pool.fetchrow(SQL_BIGGEST_JOB, collection)
            log.info("bench.ingest_reused", collection=collection)
            if row is None or not row["seconds"]:
                return await _collection_summary(rt, collection, None, True, {})
            return await _collection_summary(rt, collection, float(row["seconds"]), True, {},
                                             job_pages=int(row["pages"]))
    else:
        stale = [d.id for d in await list_documents(rt.pool, collection, limit=100_000)]
    for doc_id in stale:
        await delete_document(rt.pool, doc_id)
    if stale:
        log.info("bench.documents_deleted", collection=collection, deleted=len(stale))
    started = time.perf_counter()
    with build_ingest_context(rt) as ctx:
        job_id = await create_job(rt.pool, collection_id=coll.id, path=ds.pdf_dir, metadata_path=ds.metadata_path)
        # items may also be claimed by other workers on the same database: run_job waits for the job
        job = await run_job(ctx, job_id, workers=rt.settings.ingest.workers, progress_s=30, on_progress=lambda j: print(
            f"kb bench: ingest {j.files_done}/{j.files} files, {j.pages} pages, {j.chunks} chunks, "
            f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True))
    seconds = time.perf_counter() - started
    failed = {it.name: it.error or it.status for it in job.items if it.status in {"failed", "unsupported"}}
    for name, error in failed.items():
        log.warning("bench.ingest_failed", name=name, error=error)
    return await _collection_summary(rt, collection, seconds, False, failed)


# --------------------------------------------------------------------------- running strategies


async def _node_spans(rt: Runtime, picks: Sequence[Any], names: dict[int, str]) -> tuple[tuple[str, int, int], ...]:
    if not picks:
        return ()
    rows = await rt.pool.fetch(SQL_NODE_SPANS, [p.doc_id for p in picks], [p.node_id for p in picks])
    return tuple((names.get(r["document_id"], str(r["document_id"])), int(r["start_index"]), int(r["end_index"]))
                 for r in rows if r["unit"] == "page")


def _chunk_spans(chunks: Sequence[Any], names: dict[int, str]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for c in chunks:
        lo, hi = c.pages
        if lo is None:
            continue
        out.append((names.get(c.doc_id, c.doc_name), int(lo), int(hi if hi is not None else lo)))
    return tuple(out)


class _Runner:
    """Runs one question under one strategy and reduces the output to a ``QuestionRun``."""

    def __init__(self, rt: Runtime, collection: str, ks: tuple[int, ...], names: dict[int, str],
                 config: BenchConfig | None = None) -> None:
        from kb.runtime import build_pipeline
        from router.flat import FlatRetriever

        self.rt = rt
        self.config = config or BenchConfig(dataset="", data_dir=Path("."))
        self.collection = collection
        self.top_k = max(*ks, 10)  # mrr@10 always sees 10 chunks
        self.names = names
        spec = DATASETS.get(self.config.dataset)
        self.top_docs = None if spec is not None and spec.scope_top_docs else TOP_DOCS
        # one pipeline per strategy: each strategy embeds every question itself (no cross-strategy cache)
        self.pipelines = {s: build_pipeline(rt) for s in ROUTED}
        self.flat = FlatRetriever(rt.pool, rt.embedder, rt.settings.retrieval)

    async def warm_up(self, strategies: Sequence[str], text: str) -> None:
        """Load the models and fill the BM25 cache outside the timed runs."""
        from kb.runtime import build_pipeline
        from router.types import QueryRequest

        if any(s in FLAT for s in strategies):
            await self.flat.prepare(self.collection)
        await asyncio.to_thread(self.rt.embedder.embed_batch, [text])
        from kb.core.providers.chat import OfflineChatModel

        warm = build_pipeline(dataclasses.replace(self.rt, chat=OfflineChatModel()))  # no paid warm-up calls
        for s in strategies:
            if s in ROUTED:
                await warm.retrieve(QueryRequest(query=text, collection=self.collection, strategy=s,
                                                 top_docs=self.top_docs, top_k=self.top_k, include_trace=False))

    async def run(self, strategy: str, q: BenchQuestion) -> QuestionRun:
        from kb.core.providers.chat import OfflineChatModel
        from router.pipeline import answer_of
        from router.synthesize import synthesize
        from router.types import QueryRequest

        if strategy in FLAT:
            t0 = time.perf_counter()
            out = await self.flat.search(q.question, self.collection, FLAT[strategy], max(FLAT_DOC_POOL, self.top_k))
            latency = (time.perf_counter() - t0) * 1000
            docs = tuple(dict.fromkeys(self.names.get(c.doc_id, c.doc_name) for c in out.chunks))
            top = out.chunks[: self.top_k]
            answer = await synthesize(OfflineChatModel(), q.question, top)  # a baseline: no LLM, no plan
            return QuestionRun(qid=q.qid, qtype=q.qtype, docs=docs, chunks=_chunk_spans(top, self.names), nodes=None,
                               latency_ms=latency, **self._evidence(top), **self._answer(answer))
        pipeline = self.pipelines[strategy]
        req = QueryRequest(query=q.question, collection=self.collection, strategy=strategy, top_docs=self.top_docs,
                           top_k=self.top_k, include_trace=False)
        chat = CountingChat(pipeline.chat)
        oracle = await self._oracle(q) if self.config.oracle else None
        t0 = time.perf_counter()
        res = await pipeline.retrieve(req, chat=chat, oracle=oracle)
        latency = (time.perf_counter() - t0) * 1000
        # the product's one synthesis (the typed question's measure, figures checked); --llm: part of the cost
        answer = await answer_of(chat, req, res, strict=pipeline.settings.strict_figures)
        cost = None
        if self.config.llm:
            cost = (chat.prompt_tokens * self.config.price_in + chat.completion_tokens * self.config.price_out) / 1e6
        docs = tuple(dict.fromkeys(self.names.get(d.doc_id, d.name) for d in res.routing.documents))
        return QuestionRun(qid=q.qid, qtype=q.qtype, docs=docs,
                           chunks=_chunk_spans(res.chunks[: self.top_k], self.names),
                           nodes=await _node_spans(self.rt, res.picks, self.names), latency_ms=latency,
                           llm_calls=chat.calls, tokens=chat.prompt_tokens + chat.completion_tokens, cost_usd=cost,
                           candidates=_chunk_spans(res.chunks, self.names),
                           **self._evidence([*(res.facts.evidence() if res.facts else ()), *res.evidence]),
                           **self._answer(answer), reading=reading_of(
                               res.reading is not None and res.reading.understood,
                               res.facts.verdict if res.facts else None))

    async def _oracle(self, q: BenchQuestion) -> Any:
        """The gold documents (and, for ``nodes``, the smallest readable node covering each gold page)."""
        from router.types import Oracle

        ids = {name: doc_id for doc_id, name in self.names.items()}
        docs = tuple(ids[n] for n in q.relevant if n in ids)
        if self.config.oracle != "nodes":
            return Oracle(docs=docs)
        nodes = []
        for name, page in q.evidence:
            if name in ids and (nid := await self.rt.pool.fetchval(SQL_COVERING_NODE, ids[name], page)):
                nodes.append((ids[name], nid))
        return Oracle(docs=docs, nodes=tuple(dict.fromkeys(nodes)))

    def _evidence(self, chunks: Sequence[Any]) -> dict[str, Any]:
        """The evidence handed to synthesis, as the coverage metrics read it."""
        return {"evidence_docs": tuple(dict.fromkeys(self.names.get(c.doc_id, c.doc_name) for c in chunks)),
                "evidence_text": "\n".join(c.text for c in chunks)}

    def _answer(self, answer: Any) -> dict[str, Any]:
        """The synthesised answer, as ``answer_figure_recall`` and the citation metrics read it."""
        return {"answer_text": answer.text,
                "cited_docs": tuple(dict.fromkeys(self.names.get(c.doc_id, c.doc_name) for c in answer.citations))}


def _environment(rt: Runtime, pgvector: str | None) -> dict[str, Any]:
    s = rt.settings
    m = machine()
    return {
        "date": utc_seconds(),
        "commit": git_commit(),
        "machine": {"cpu": m.cpu, "cores": m.cores, "memory_gib": m.memory_gib, "os": m.os, "python": m.python},
        "pgvector": pgvector,
        "embedder": rt.embedder.model_id,
        "chat": rt.chat.model_id,
        "llm_offline": bool(rt.chat.offline),
        "retrieval": dataclasses.asdict(s.retrieval),
        "chunking": {"chunk_tokens": s.ingest.chunk_tokens, "chunk_overlap_tokens": s.ingest.chunk_overlap_tokens,
                     "page_aligned": s.ingest.chunk_page_aligned},
        "top_docs": TOP_DOCS,
        "flat_doc_pool": FLAT_DOC_POOL,
    }


async def run_benchmark(rt: Runtime, config: BenchConfig,
                        progress: Callable[[str], None] | None = None) -> BenchReport:
    """Ingest (or reuse) the corpus, run every strategy on every question, and aggregate the metrics."""
    from ingest.formats import format_of
    from ingest.store import list_documents

    say = progress or (lambda _msg: None)
    if config.llm and rt.chat.offline:
        raise ValidationError("kb bench --llm needs an LLM endpoint: set KB_LLM_BASE_URL (and KB_LLM_API_KEY, "
                              "KB_LLM_MODEL)")
    if not config.llm and not rt.chat.offline:  # offline figures stay offline, whatever is configured
        from kb.core.providers.chat import OfflineChatModel

        rt = dataclasses.replace(rt, chat=OfflineChatModel())
    ds = await asyncio.to_thread(load_dataset, config.dataset, config.data_dir, config.questions)
    spec = DATASETS[config.dataset]
    collection = config.collection_name
    alias: dict[str, str] = {}
    corpus = ds
    if ds.anonymize:
        staging = rt.settings.database.data_dir / "bench" / collection
        corpus, alias = await asyncio.to_thread(stage_anonymized, ds, staging)
        say(f"corpus staged under neutral names in {staging}")
    ingest = await ingest_dataset(rt, corpus, collection, reuse=config.reuse)
    say(f"corpus: {ingest.docs} documents, {ingest.pages} pages, {ingest.chunks} chunks"
        + (" (reused)" if ingest.reused else f", ingested in {ingest.seconds} s"))
    if alias:
        ingest = msgspec.structs.replace(ingest, failed={alias.get(k, k): v for k, v in ingest.failed.items()})
    docs = await list_documents(rt.pool, collection, limit=100_000)
    names = {d.id: alias.get(d.name, d.name) for d in docs}
    present = set(names.values())

    questions = list(ds.questions[: config.limit] if config.limit else ds.questions)
    skipped: list[dict[str, str]] = []
    active: list[BenchQuestion] = []
    for q in questions:
        reason = q.skip
        if reason is None and not set(q.relevant) <= present:
            missing = sorted(set(q.relevant) - present)
            reason = "not ingested: " + ", ".join(f"{m} ({ingest.failed.get(m, 'missing')})" for m in missing)
        if reason:
            skipped.append({"qid": q.qid, "question": q.question[:200], "reason": reason})
        else:
            active.append(q)

    runner = _Runner(rt, collection, config.ks, names, config)
    if active:
        await runner.warm_up(config.strategies, "total revenue of the company in the latest fiscal year")
    runs: dict[str, list[QuestionRun]] = {s: [] for s in config.strategies}
    for i, q in enumerate(active, start=1):
        for s in config.strategies:  # interleaved, so cache warm-up favours no strategy
            try:
                run = await runner.run(s, q)
            except KBError as exc:
                log.error("bench.question_failed", qid=q.qid, strategy=s, error=str(exc))
                run = QuestionRun(qid=q.qid, qtype=q.qtype, docs=(), chunks=(), nodes=None if s in FLAT else (),
                                  latency_ms=0.0, error=str(exc))
            runs[s].append(run)
        if i % 10 == 0 or i == len(active):
            say(f"{i}/{len(active)} questions")

    strategies: dict[str, dict[str, Any]] = {}
    by_type: dict[str, dict[str, dict[str, Any]]] = {}
    per_q: dict[str, dict[str, dict[str, Any]]] = {q.qid: {} for q in active}
    for s in config.strategies:
        values = [question_metrics(q.relevant, q.evidence, r, config.ks, ds.has_pages, answer=q.answer,
                                   question=q.question) | (spec.score(q, r) if spec.score else {})
                  for q, r in zip(active, runs[s], strict=True)]
        strategies[s] = aggregate(values, runs[s], config.ks, spec.metrics)
        errors = [r for r in runs[s] if r.error]
        if errors:
            strategies[s]["errors"] = len(errors)
        by_type[s] = {}
        for qtype in sorted({q.qtype for q in active}):
            idx = [j for j, q in enumerate(active) if q.qtype == qtype]
            by_type[s][qtype] = aggregate([values[j] for j in idx], [runs[s][j] for j in idx], config.ks,
                                          spec.metrics)
        for q, r, v in zip(active, runs[s], values, strict=True):
            per_q[q.qid][s] = {"docs": list(r.docs[:TOP_DOCS]),
                               "chunks": [[d, lo] if lo == hi else [d, lo, hi] for d, lo, hi in r.chunks],
                               "latency_ms": round(r.latency_ms, 1), **{k: round(x, 4) for k, x in v.items()},
                               "cited": list(r.cited_docs), "answer": r.answer_text[:ANSWER_CHARS],
                               **({"error": r.error} if r.error else {})}
    qdetails = [{"qid": q.qid, "qtype": q.qtype, "question": q.question, "relevant": list(q.relevant),
                 "evidence": [list(e) for e in q.evidence], "results": per_q[q.qid]} for q in active]
    pgv = await pgvector_version(rt.pool)
    env = {**_environment(rt, pgv), "dataset_dir": str(config.data_dir), "ks": list(config.ks),
           "anonymized_file_names": ds.anonymize, "reuse": config.reuse, "collection_arg": config.collection,
           "questions_file": str(config.questions) if config.questions else None, "limit": config.limit,
           "llm": config.llm, "price_usd_per_million_tokens": {"in": config.price_in, "out": config.price_out},
           "oracle": config.oracle, "top_docs": "scope" if spec.scope_top_docs else TOP_DOCS,
           "units": sorted({fmt.unit for f in ds.files if (fmt := format_of(f)) is not None})}
    return BenchReport(dataset=config.dataset, collection=collection, ingest=ingest, strategies=strategies,
                       by_type=by_type, skipped=skipped, questions=qdetails, environment=env)


# --------------------------------------------------------------------------- output


def format_table(report: BenchReport, ks: Sequence[int]) -> str:
    """The metrics as a plain-text table: one row per metric, one column per strategy."""
    spec = DATASETS.get(report.dataset)
    names = [*metric_names(ks), *(spec.metrics if spec else ()), "latency_ms_p50", "latency_ms_p95", "llm_calls",
             "tokens", "cost_usd", "n"]
    strategies = list(report.strategies)
    width = max(12, *(len(s) + 1 for s in strategies))
    lines = ["metric".ljust(16) + "".join(s.rjust(width) for s in strategies)]
    for name in names:
        cells = []
        for s in strategies:
            v = report.strategies[s].get(name)
            cells.append(("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)).rjust(width))
        lines.append(name.ljust(16) + "".join(cells))
    ing = report.ingest
    lines.append("")
    size = "pages" if report.environment.get("units", ["page"]) == ["page"] else "lines"  # text corpora count lines
    lines.append(f"dataset {report.dataset}, collection {report.collection}: {ing.docs} docs, {ing.pages} {size}, "
                 f"{ing.chunks} chunks" + (" (reused)" if ing.reused else f", ingest {ing.seconds} s"))
    for sk in report.skipped:
        lines.append(f"skipped {sk['qid']}: {sk['reason']}")
    return "\n".join(lines)


def report_json(report: BenchReport) -> bytes:
    return msgspec.json.format(msgspec.json.encode(report), indent=2)


async def _main(config: BenchConfig) -> BenchReport:
    from kb.runtime import open_runtime

    rt = await open_runtime()
    try:
        return await run_benchmark(rt, config,
                                   progress=lambda m: print(f"kb bench: {m}", file=sys.stderr, flush=True))
    finally:
        await rt.close()


def run_cli(args: argparse.Namespace) -> int:
    """Entry of ``kb bench financebench|docugami|loong`` (arguments defined in ``kb.bench.cli``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    config = config_from_args(args)
    report = run_async(_main(config))
    print(format_table(report, config.ks))
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_bytes(report_json(report))
        print(f"kb bench: metrics written to {args.json_out}", file=sys.stderr)
    return 0


def load_report(path: Path) -> dict[str, Any]:
    """A report written by ``--json`` (for ``kb.bench.report``)."""
    return json.loads(path.read_text(encoding="utf-8"))
