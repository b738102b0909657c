"""Arguments of ``kb bench`` (a stable contract: other tools call these names)."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from kb.bench.datasets import DATASETS
from kb.bench.strategies import BENCH_STRATEGIES

DEFAULT_STRATEGIES = ",".join(BENCH_STRATEGIES)
RUNNERS: dict[str, str] = {"latency": "kb.bench.latency", "ingest": "kb.bench.ingest_profile", "load": "kb.bench.load",
                           "parse": "kb.bench.parse_bench",
                           "facts": "kb.bench.facts_bench", "answers": "kb.bench.answers_bench",
                           "ocr": "kb.bench.ocr_bench"}
"""Benchmarks without a question set: name → module whose ``run_cli(args)`` runs it. The question datasets
are ``kb.bench.datasets.DATASETS`` (all run by ``kb.bench.harness``)."""
BENCHMARKS: tuple[str, ...] = (*DATASETS, *RUNNERS)
"""Every ``kb bench`` name, declared once: the question datasets, then the other benchmarks."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", choices=BENCHMARKS,
                        help="; ".join(f"{d.name}: {d.summary}" for d in DATASETS.values())
                        + "; latency, ingest, load, facts, parse, answers, ocr: see the README")
    parser.add_argument("--data", type=Path, help="dataset folder (pdfs/ or docs/ + questions); not for latency")
    parser.add_argument("--questions", type=Path, help="replace the question file (parse: bench/parse/questions.jsonl; "
                                                      "load: a JSONL of {query, strategy}, e.g. bench/load/filings.jsonl)")
    parser.add_argument("--collection", help="collection name (default bench-<dataset>; loong: from the folder, "
                                             "bench-loong-en for loong-en-dev)")
    parser.add_argument("--strategies", default=DEFAULT_STRATEGIES)
    parser.add_argument("--k", default="5,10", help="cut-offs for page recall")
    parser.add_argument("--json", type=Path, dest="json_out", help="write the metrics as JSON here")
    parser.add_argument("--reuse", action="store_true", help="reuse the collection if already ingested and unchanged")
    parser.add_argument("--limit", type=int, help="only the first N questions (smoke runs)")
    parser.add_argument("--llm", action="store_true",
                        help="use the configured LLM endpoint (KB_LLM_*) for ingest, retrieval and the answer; "
                             "reports calls, tokens and cost per question (default: offline)")
    parser.add_argument("--price-in", type=float, default=0.0, help="--llm: USD per million prompt tokens")
    parser.add_argument("--price-out", type=float, default=0.0, help="--llm: USD per million completion tokens")
    parser.add_argument("--oracle", choices=["docs", "nodes"],
                        help="diagnostics: route the gold documents (docs), and also choose the nodes covering the "
                             "gold pages (nodes), to bound what routing and tree search could gain")
    parser.add_argument("--docs", type=int, default=1000, help="latency: synthetic documents")
    parser.add_argument("--chunks-per-doc", type=int, default=200, help="latency: chunks per document")
    parser.add_argument("--queries", type=int, default=50, help="latency: queries per strategy")
    parser.add_argument("--drop", action="store_true", help="latency: delete the generated collection after measuring")
    parser.add_argument("--workers", help="ingest: worker process counts against one database, e.g. 1,2,4 "
                                          "(measures the job queue; see the README, Scaling)")
    parser.add_argument("--files", type=int, default=40, help="ingest --workers: synthetic PDFs per run")
    parser.add_argument("--pages-per-file", type=int, default=8, help="ingest --workers: pages per PDF")
    parser.add_argument("--serve-embeddings", action="store_true",
                        help="ingest --workers: the workers embed through an OpenAI-compatible server "
                             "(the local model in its own process)")
    parser.add_argument("--stages", action="store_true",
                        help="ingest: the whole ingest of --data into a scratch collection, seconds per stage, and "
                             "the embedder alone over the same texts (--out appends the Markdown report)")
    parser.add_argument("--url", help="load: the running server (default http://127.0.0.1:8000)")
    parser.add_argument("--clients", type=int, default=50, help="load: concurrent clients")
    parser.add_argument("--duration", type=float, default=30.0, help="load: seconds")
    parser.add_argument("--out", type=Path, help="load: write the report (Markdown) here; ingest --stages: append it")
    parser.add_argument("--server-note", help="load: how the server runs (for the report), e.g. 'kb serve --workers 2'")
    parser.add_argument("--profile", action="store_true",
                        help="load: first ask each question alone and report the server's ms per stage")


def run(args: argparse.Namespace) -> int:
    """Run the named benchmark: a ``RUNNERS`` module, else the harness over a ``DATASETS`` entry."""
    if args.dataset in RUNNERS:
        return int(importlib.import_module(RUNNERS[args.dataset]).run_cli(args))
    if args.data is None:
        parser_error = f"kb bench {args.dataset}: --data DIR is required"
        raise SystemExit(parser_error)
    if not Path(args.data).expanduser().is_dir():  # before a database is opened
        raise SystemExit(f"kb bench {args.dataset}: no data folder at {args.data}; nothing was run")
    from kb.bench.harness import run_cli

    return run_cli(args)
