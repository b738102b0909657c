"""Markdown report of a ``kb bench --json`` result (what is committed under ``bench/results/``).

Usage: ``python -m kb.bench.report RESULT.json [--notes NOTES.md] > bench/results/NAME.md``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kb.bench.markdown import cell, table
from kb.bench.strategies import FLAT_PREFIX

TARGETS = {  # issue 14's targets on the dev data (offline)
    "financebench": [("auto", "doc_hit@1", 0.98), ("auto", "page_recall@10", 0.65), ("auto", "node_recall", 0.85)],
    "docugami": [("auto", "doc_hit@1", 0.9), ("auto", "doc_recall@5", 0.9)],
}
FLAT_GAP = 0.20
"""FinanceBench: auto page_recall@10 at least this far above the best flat baseline."""
TYPE_TARGETS = {"docugami": [("auto", "Multi-Doc RAG", "evidence_doc_coverage", 0.9)]}
TYPE_METRICS = ("doc_hit@1", "doc_recall@5", "page_recall@10", "node_recall", "candidate_page_recall", "mrr@10",
                "evidence_doc_coverage", "needed_cited", "needed_recall", "answer_number_recall",
                "answer_figure_recall", "right_entities")
WATERFALL = (("routing", "doc_recall@5"), ("tree search", "node_recall"), ("in-node retrieval", "candidate_page_recall"),
             ("final ranking", "page_recall@10"))


def _metric_rows(strategies: dict[str, dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for values in strategies.values():
        for k in values:
            if k not in names:
                names.append(k)
    return names


def command_line(report: dict[str, Any]) -> str:
    env = report.get("environment", {})
    parts = ["kb bench", report["dataset"], "--data", env.get("dataset_dir", "DIR")]
    if env.get("questions_file"):
        parts += ["--questions", env["questions_file"]]
    parts += ["--strategies", ",".join(report["strategies"]), "--k", ",".join(str(k) for k in env.get("ks", []))]
    if env.get("collection_arg"):
        parts += ["--collection", env["collection_arg"]]
    if env.get("limit"):
        parts += ["--limit", str(env["limit"])]
    if env.get("reuse"):
        parts.append("--reuse")
    if env.get("oracle"):
        parts += ["--oracle", env["oracle"]]
    if env.get("llm"):
        prices = env.get("price_usd_per_million_tokens", {})
        parts += ["--llm", "--price-in", str(prices.get("in", 0)), "--price-out", str(prices.get("out", 0))]
    return " ".join(parts)


def _targets(report: dict[str, Any]) -> list[str]:
    s = report["strategies"]
    lines = []
    for strategy, metric, goal in TARGETS.get(report["dataset"], []):
        v = s.get(strategy, {}).get(metric)
        ok = v is not None and v >= goal
        lines.append(f"- `{strategy}` {metric} ≥ {goal}: **{cell(v)}** — {'met' if ok else 'NOT met'}")
    for strategy, qtype, metric, goal in TYPE_TARGETS.get(report["dataset"], []):
        v = report.get("by_type", {}).get(strategy, {}).get(qtype, {}).get(metric)
        ok = v is not None and v >= goal
        lines.append(f"- `{strategy}` {metric} ≥ {goal} on {qtype} questions: **{cell(v)}** — "
                     f"{'met' if ok else 'NOT met'}")
    if report["dataset"] == "financebench" and "auto" in s:
        flats = {k: v.get("page_recall@10") for k, v in s.items() if k.startswith(FLAT_PREFIX)}
        flats = {k: v for k, v in flats.items() if v is not None}
        auto = s["auto"].get("page_recall@10")
        if flats and auto is not None:
            best = max(flats, key=lambda k: flats[k])
            gap = auto - flats[best]
            ok = gap >= FLAT_GAP
            lines.append(f"- `auto` page_recall@10 ≥ best flat + {FLAT_GAP}: **{cell(auto)}** vs `{best}` "
                         f"{cell(flats[best])} (gap {gap * 100:+.1f} points) — {'met' if ok else 'NOT met'}")
    return lines


def _uncited(report: dict[str, Any], strategy: str = "auto") -> list[str]:
    """Questions whose answer does not cite every needed document (datasets with ``needed_cited``)."""
    rows = []
    for q in report.get("questions", []):
        r = q["results"].get(strategy)
        if r is None or r.get("needed_cited", 1.0) >= 1.0:
            continue
        missing = [d for d in q["relevant"] if d not in set(r.get("cited", []))]
        rows.append((q["qid"][:8], q["qtype"], q["question"][:90].replace("|", "/"), len(q["relevant"]),
                     "; ".join(missing[:4]) + (f" (+{len(missing) - 4})" if len(missing) > 4 else "")))
    if not rows:
        return [f"`{strategy}` cites every needed document."]
    return [f"{len(rows)} questions whose `{strategy}` answer does not cite every needed document:", "",
            *table(["qid", "type", "question", "needed", "not cited"], rows)]


def _misses(report: dict[str, Any], strategy: str = "auto") -> list[str]:
    if any("needed_cited" in r for q in report.get("questions", []) for r in q["results"].values()):
        return _uncited(report, strategy)
    rows = []
    for q in report.get("questions", []):
        r = q["results"].get(strategy)
        if r is None:
            continue
        doc_miss = r.get("doc_hit@1", 1.0) < 1.0 or r.get("doc_recall@5", 1.0) < 1.0
        page_miss = r.get("page_recall@10") == 0.0
        if doc_miss or page_miss:
            rows.append((q["qid"], q["qtype"], q["question"][:90].replace("|", "/"),
                         ", ".join(q["relevant"]), ", ".join(r["docs"][:3]),
                         r.get("page_recall@10"), r.get("node_recall")))
    if not rows:
        return [f"No misses for `{strategy}`."]
    return [f"{len(rows)} questions with doc_hit@1 < 1, doc_recall@5 < 1 or page_recall@10 = 0:", "",
            *table(["qid", "type", "question", "relevant", f"{strategy} top-3 docs", "page_recall@10",
                     "node_recall"], rows)]


def _waterfall(report: dict[str, Any]) -> list[str]:
    """Where evidence pages are lost: each stage's share of gold pages still reachable, per routed strategy."""
    s = report["strategies"]
    routed = [k for k in s if not k.startswith(FLAT_PREFIX) and s[k].get("candidate_page_recall") is not None]
    if not routed:
        return []
    oracle = report.get("environment", {}).get("oracle")
    lines = ["", "## Stage by stage", "",
             "Share of gold evidence still reachable after each stage: routing (a gold document among the routed "
             "ones, doc_recall@5), tree search (an evidence page inside a chosen node), in-node retrieval (an evidence "
             "page in any candidate chunk, before the top-k cut), final ranking (page_recall@10)."
             + (f" **Oracle run: `{oracle}`** — the earlier stages are given." if oracle else ""), ""]
    rows = [(stage, *(s[k].get(metric) for k in routed)) for stage, metric in WATERFALL]
    lines += table(["stage", *routed], rows)
    by_type = report.get("by_type", {})
    for k in routed:
        types = sorted(by_type.get(k, {}))
        if types:
            lines += ["", f"`{k}` by question type", ""]
            lines += table(["stage", *types], [(stage, *(by_type[k][t].get(metric) for t in types))
                                                for stage, metric in WATERFALL])
    return lines


def render_markdown(report: dict[str, Any], notes: str | None = None) -> str:
    env = report.get("environment", {})
    machine = env.get("machine", {})
    ing = report["ingest"]
    strategies = report["strategies"]
    out = [f"# kb bench {report['dataset']}", ""]
    out += [
        f"- date: {env.get('date', '?')}, commit `{env.get('commit') or '?'}`",
        f"- machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, {machine.get('memory_gib', '?')} GiB, "
        f"{machine.get('os', '?')}, Python {machine.get('python', '?')}, pgvector {env.get('pgvector', '?')}",
        f"- settings: embedder `{env.get('embedder')}`, chat `{env.get('chat')}` "
        f"({'offline, no LLM' if env.get('llm_offline') else 'LLM'}), top_docs {env.get('top_docs')}, "
        f"flat document pool {env.get('flat_doc_pool')} chunks, chunking {env.get('chunking')}",
        f"- retrieval settings: `{json.dumps(env.get('retrieval', {}))}`",
        f"- command: `{command_line(report)}` (collection `{report['collection']}`, "
        f"KB_DATA_DIR outside the repository)",
        "",
        "## Ingest",
        "",
    ]
    units = env.get("units") or ["page"]  # text reports count lines where PDFs count pages
    size = "pages" if units == ["page"] else "lines" if units == ["line"] else "pages or lines"
    out += table(["docs", size, "chunks", "seconds", f"{size}/s", "reused"],
                  [(ing["docs"], ing["pages"], ing["chunks"], ing.get("seconds"), ing.get("pages_per_s"),
                    ing.get("reused"))])
    if ing.get("failed"):
        out += ["", "Failed files: " + "; ".join(f"{k}: {v}" for k, v in ing["failed"].items())]
    out += ["", "## Metrics", ""]
    names = [n for n in _metric_rows(strategies) if any(strategies[s].get(n) is not None for s in strategies)]
    out += table(["metric", *strategies], [(n, *(strategies[s].get(n) for s in strategies)) for n in names])
    out += ["", "`evidence_doc_coverage`: share of a question's relevant documents that contribute to the evidence "
            "handed to synthesis (routed strategies: the pipeline's evidence, per-document shares for multi-document "
            "questions; flat baselines: their top-k chunks). `answer_number_recall`: share of the reference answer's "
            "figures (not years, dates, file names, bare integers below 10, or numbers the question states) that "
            "this evidence states — \"$82,959 million\" = \"82,959\" = \"82.959 billion\", compared at the "
            "reference's precision (see `kb.bench.metrics.answer_number_recall`); questions whose reference has no "
            "figure are not counted. `answer_figure_recall`: the same for the answer text synthesised from that "
            "evidence (routed strategies: the product's answer; flat baselines: the extractive answer over their "
            "top-k chunks) — what reached the reader."]
    if any(strategies[s].get("needed_cited") is not None for s in strategies):
        out += ["", "`needed_cited`: share of questions whose answer cites every needed report; `needed_recall`: "
                "share of the needed reports the answer cites (`evidence_doc_coverage` is the same over the evidence "
                "handed to synthesis). `right_entities` (levels 2–3): the answer names the right company — the "
                "company named next to its last \"highest\"/\"最高\" (or the like), or the reference's order of "
                "companies by their last mention — or puts each company next to the right category label; see "
                "`kb.bench.entities`."
                + (" Routed strategies leave `top_docs` to the question's scope (the API default)."
                   if env.get("top_docs") == "scope" else "")]
    if env.get("anonymized_file_names"):
        out += ["", "PDFs were ingested under neutral names (`doc-<sha256 prefix>.pdf`): routing and metadata "
                "cannot use the file names; results are mapped back to the original names."]
    if targets := _targets(report):
        out += ["", "## Targets", "", *targets]
    out += _waterfall(report)
    out += ["", "## By question type", ""]
    by_type = report.get("by_type", {})
    types = sorted({t for per in by_type.values() for t in per})
    for metric in TYPE_METRICS:
        rows = []
        for t in types:
            vals = [by_type.get(s, {}).get(t, {}).get(metric) for s in strategies]
            if all(v is None for v in vals):
                continue
            n = next((by_type[s][t]["n"] for s in strategies if t in by_type.get(s, {})), "?")
            rows.append((f"{t} (n={n})", *vals))
        if rows:
            out += [f"**{metric}**", "", *table(["question type", *strategies], rows), ""]
    if report.get("skipped"):
        out += ["## Skipped questions", ""]
        out += table(["qid", "reason"], [(s["qid"], s["reason"]) for s in report["skipped"]])
        out += [""]
    out += ["## Misses of `auto`", "", *_misses(report), ""]
    if notes:
        out += [notes.strip(), ""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kb.bench.report", description=__doc__)
    p.add_argument("result", type=Path, help="JSON written by kb bench --json")
    p.add_argument("--notes", type=Path, help="markdown appended at the end (analysis)")
    args = p.parse_args(argv)
    report = json.loads(args.result.read_text(encoding="utf-8"))
    notes = args.notes.read_text(encoding="utf-8") if args.notes else None
    sys.stdout.write(render_markdown(report, notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
