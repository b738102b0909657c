"""``kb bench load``: concurrent clients asking questions of a running server over HTTP.

Each client sends ``POST /kb/query`` in a loop (questions round-robin from ``samples/QUESTIONS.md``,
strategies as written there, or from ``--questions``: a JSONL file of ``{"query", "strategy"}`` such as
``bench/load/filings.jsonl`` over the FinanceBench dev 10-Ks) for ``--duration`` seconds; the report gives
throughput, latency percentiles, status codes and the machine's load average. ``--out`` writes it as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from kb.bench.environment import load_average, machine, utc_minutes
from kb.bench.markdown import table
from kb.core.process import run_async
from kb.core.text import jsonl_objects
from router.types import STRATEGIES

SAMPLES_QUESTIONS = Path(__file__).resolve().parents[2] / "samples" / "QUESTIONS.md"
_QUESTION = re.compile(r"\*\*Question:\*\*\s*(.+)")
_STRATEGY = re.compile(r"\*\*Strategy:\*\*\s*(\w+)")


def sample_questions(path: Path = SAMPLES_QUESTIONS) -> list[tuple[str, str]]:
    """(question, strategy) pairs of the sample question file (strategy ``auto`` where none is named)."""
    out: list[tuple[str, str]] = []
    for section in path.read_text(encoding="utf-8").split("\n### ")[1:]:
        q = _QUESTION.search(section)
        s = _STRATEGY.search(section)
        if q:
            strategy = s.group(1) if s and s.group(1) in STRATEGIES else "auto"
            out.append((q.group(1).strip(), strategy))
    return out


def file_questions(path: Path) -> list[tuple[str, str]]:
    """(question, strategy) pairs of a JSONL file (``query`` or ``question``; ``strategy``, default ``auto``), or
    of a Markdown file written like ``samples/QUESTIONS.md``."""
    if path.suffix == ".md":
        return sample_questions(path)
    out: list[tuple[str, str]] = []
    for n, row in jsonl_objects(path.read_text(encoding="utf-8"), f"kb bench load: {path}", SystemExit):
        question = row.get("query") or row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise SystemExit(f"kb bench load: {path} line {n} has no \"query\"")
        strategy = row.get("strategy", "auto")
        out.append((question.strip(), strategy if strategy in STRATEGIES else "auto"))
    if not out:
        raise SystemExit(f"kb bench load: {path} holds no questions")
    return out


@dataclass
class LoadResult:
    clients: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def errors(self) -> int:
        return sum(n for code, n in self.statuses.items() if not code.startswith("2"))

    def percentile(self, p: float) -> float:
        return float(np.percentile(self.latencies_ms, p)) if self.latencies_ms else 0.0

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


async def run_load(url: str, *, clients: int, duration_s: float, token: str | None = None,
                   questions: list[tuple[str, str]] | None = None, collection: str = "default") -> LoadResult:
    """``clients`` concurrent clients, each with its own connection, for ``duration_s`` seconds."""
    questions = questions or sample_questions()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    result = LoadResult(clients=clients, seconds=0.0)
    deadline = time.perf_counter() + duration_s
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as http:
        async def client(n: int) -> None:
            i = n
            while time.perf_counter() < deadline:
                question, strategy = questions[i % len(questions)]
                i += clients
                started = time.perf_counter()
                try:
                    r = await http.post("/kb/query", json={"query": question, "strategy": strategy,
                                                           "collection": collection, "include_trace": False})
                    status = str(r.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
                result.statuses[status] += 1

        started = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(clients)))
        result.seconds = time.perf_counter() - started
    return result


async def stage_profile(url: str, questions: list[tuple[str, str]], *, collection: str = "default",
                        token: str | None = None, rounds: int = 2) -> dict[str, list[float]]:
    """Each question asked alone, ``rounds`` times (the first warms the caches; the last is kept), with its
    trace: the server's milliseconds per stage (route, facts, tree search, retrieve, synthesize, total)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    stages: dict[str, list[float]] = {}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
        for question, strategy in questions:
            timings: dict[str, float] = {}
            for _ in range(rounds):
                r = await http.post("/kb/query", json={"query": question, "strategy": strategy,
                                                       "collection": collection, "include_trace": True})
                r.raise_for_status()
                timings = (r.json().get("trace") or {}).get("timings_ms") or {}
            for stage, ms in timings.items():
                stages.setdefault(stage, []).append(float(ms))
    return stages


def profile_table(stages: dict[str, list[float]]) -> list[str]:
    """Mean, p50 and p95 ms per stage, and its share of the mean total."""
    total = float(np.mean(stages["total"])) if stages.get("total") else 0.0
    rows = [(stage, len(v), f"{np.mean(v):.1f}", f"{np.percentile(v, 50):.1f}", f"{np.percentile(v, 95):.1f}",
             f"{100 * np.mean(v) / total:.0f} %" if total else "–") for stage, v in stages.items()]
    return table(["stage", "queries", "mean ms", "p50 ms", "p95 ms", "share of total"], rows, align="lrrrrr")


def report(result: LoadResult, *, url: str, workers: str, command: str,
           corpus: str = "the bundled sample corpus (6 reports)") -> str:
    load1, load5, _ = load_average()
    m = machine()
    row = (result.clients, f"{result.seconds:.1f}", result.requests, f"{result.throughput:.1f}",
           f"{result.percentile(50):.0f}", f"{result.percentile(95):.0f}", f"{result.percentile(99):.0f}",
           result.errors, dict(result.statuses), f"{load1:.2f}, {load5:.2f}")
    lines = [
        "# Load: concurrent queries over HTTP",
        "",
        f"- date: {utc_minutes()}; machine: {m.arch}, {m.cores} cores, Python {m.python}",
        f"- server: {url} ({workers}); offline provider; {corpus}",
        f"- command: `{command}`",
        "",
        *table(["clients", "seconds", "requests", "queries/s", "p50 ms", "p95 ms", "p99 ms", "errors", "statuses",
                "load avg (1, 5 min)"], [row], align="rrrrrrrrll"),
        "",
    ]
    return "\n".join(lines)


def run_cli(args: argparse.Namespace) -> int:
    url = args.url or "http://127.0.0.1:8000"
    questions = file_questions(args.questions) if args.questions else sample_questions()
    collection = args.collection or "default"
    token = os.environ.get("KB_API_TOKEN")
    profile: list[str] = []
    if args.profile:
        stages = run_async(stage_profile(url, questions, collection=collection, token=token))
        profile = ["", "## One query at a time: server ms per stage (trace timings, second asking of each question)",
                   "", *profile_table(stages), ""]
    result = run_async(run_load(url, clients=args.clients, duration_s=args.duration,
                                  token=token, questions=questions, collection=collection))
    asked = f" --questions {args.questions} --collection {collection}" if args.questions else ""
    corpus = (f"collection {collection!r}, {len(questions)} questions of {args.questions}" if args.questions
              else "the bundled sample corpus (6 reports)")
    text = report(result, url=url, workers=args.server_note or "kb serve", corpus=corpus,
                  command=f"kb bench load --url {url} --clients {args.clients} --duration {args.duration:g}{asked}")
    text += "\n".join(profile)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 1 if result.errors else 0
