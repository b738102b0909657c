"""Rendering of a ``kb bench latency`` report: the stdout table, ``bench/results/latency.md`` and ``--json``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kb.bench.latency_types import LatencyReport, Stat
from kb.bench.markdown import table
from kb.bench.measure import SQL_REFERENCE
from kb.bench.synthetic import DOCS_PER_COMPANY

NOTES_MARKER = "<!-- notes: everything below this line is kept when the benchmark rewrites the file -->"


def _mb(b: int | None) -> str:
    return "" if b is None else f"{b / 1024 / 1024:,.0f} MB"


def _f(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.1f}"


def _goal(report: LatencyReport, strategy: str) -> str:
    """The 100 ms goal is for single-document questions; a 20-document list question has none."""
    if strategy not in report.goal_met:
        return "–"
    return "yes" if report.goal_met[strategy] else "NO"


LATENCY_COLUMNS = ("strategy", "median ms", "p95 ms", "route med / p95", "tree_search med / p95",
                   "retrieve med / p95", "docs routed", "chunks", "company in routed docs", "median < 100 ms")


def _med_p95(st: Stat) -> str:
    return f"{_f(st.median)} / {_f(st.p95)}"


def latency_table(report: LatencyReport) -> str:
    """One row per measured strategy, then the pgvector reference."""
    rows = []
    for s in report.strategies:
        st = s.stages
        hit = "–" if s.company_hit_rate is None else f"{s.company_hit_rate:.0%}"
        rows.append((s.strategy, _f(s.total.median), _f(s.total.p95), _med_p95(st["route"]),
                     _med_p95(st["tree_search"]), _med_p95(st["retrieve"]), f"{s.docs_routed:.1f}",
                     f"{s.chunks_returned:.1f}", hit, _goal(report, s.strategy)))
    r = report.reference
    rows.append(("*pgvector top-10 (reference)*", _f(r.median), _f(r.p95), "", "", "", "", "10", "",
                 "yes" if r.median < report.goal_ms else "NO"))
    return "\n".join(table(LATENCY_COLUMNS, rows, align="lrrrrrrrrc"))


FACTS_COLUMNS = ("question", "median ms", "p95 ms", "route med / p95", "facts med / p95", "tree_search med / p95",
                 "retrieve med / p95", "synthesize med / p95", "answered from facts", "docs routed",
                 "documents whose facts were used (mean / min)", "facts cited", "median < 500 ms")


def facts_table(report: LatencyReport) -> str:
    """The corpus-wide facts question, answered whole (one row)."""
    f = report.facts_question
    if f is None:
        return ""
    st = f.stages
    goal = "yes" if f.total.median < report.facts_goal_ms else "NO"
    row = ("corpus-wide ranking (highest / lowest / rank)", _f(f.total.median), _f(f.total.p95),
           _med_p95(st["route"]), _med_p95(st["facts"]), _med_p95(st["tree_search"]), _med_p95(st["retrieve"]),
           _med_p95(st["synthesize"]), f"{f.answered_from_facts:.0%}", f"{f.docs_routed:.1f}",
           f"{f.facts_docs:,.1f} / {f.facts_docs_min:,}", f"{f.facts_used:,.1f}", goal)
    return "\n".join(table(FACTS_COLUMNS, [row], align="lrrrrrrrrrrrc"))


def _facts_section(report: LatencyReport) -> str:
    f = report.facts_question
    if f is None:
        return ""
    asked = "\n".join(f"- {q}" for q in f.questions)
    return f"""## Corpus-wide facts question ({f.total.n} questions, whole query, offline)

A ranking question over a vocabulary measure that names no company, answered whole by
`QueryPipeline.run` (request defaults: `auto`, top_docs and top_k unset): routing, the facts stage
(`router.facts.answer_from_facts` in corpus mode: the facts of every document of the collection, the
ranking computed and each figure cited), tree search and retrieval of the routed documents, then the
offline synthesis. "docs routed" are the documents tree search and retrieval read; "documents whose facts
were used" are those the computed answer cites (a figure per document). Goal (issue 21 item 7): median
< {report.facts_goal_ms:.0f} ms over 1,000 reports.

{facts_table(report)}

Questions asked (one per measured question, chosen by its text):

{asked}
"""


def _targets(report: LatencyReport) -> str:
    return "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in report.targets.items()) or "–"


def render_markdown(report: LatencyReport, notes: str) -> str:
    m, pg, c, ld = report.machine, report.postgres, report.collection, report.load
    rel = c.relations
    chunks_total = rel.get("chunks", {}).get("total_bytes")
    idx = "\n".join(table(["chunks index", "size"],
                          [(name, _mb(v["bytes"])) for name, v in rel.items() if v["kind"] == "index"], align="lr"))
    build = ", ".join(f"{k} {v:.0f} s" for k, v in ld.seconds_index_build.items()) or "–"
    load = (f"generated and written in {ld.seconds_generate_and_write:.0f} s (clear {ld.seconds_clear:.0f} s); "
            f"index builds: {build}; VACUUM ANALYZE {ld.seconds_vacuum_analyze:.0f} s; bulk indexes dropped "
            f"during load: {'yes' if ld.indexes_dropped_for_load else 'no'}" if ld.generated
            else "reused an existing collection of the requested size (--reuse)")
    cfg = report.config
    pgs = ", ".join(f"{k}={v}" for k, v in sorted(pg["settings"].items()))
    rs = report.retrieval_settings
    return f"""# Query latency (LLM time excluded)

Generated by `kb bench latency` on {report.date} (code {m.get('code', '?')}). Each strategy runs the production query path
(`router.pipeline.QueryPipeline.retrieve`: routing, the facts stage, tree search, in-node hybrid retrieval; no
synthesis) with the offline chat model, so no LLM time is included; the corpus-wide facts question below is
timed whole (retrieval and offline synthesis). Wall time per query, one query at a time,
after {cfg['warmup']} warm-up questions; strategies interleaved per question. The reference is
`{SQL_REFERENCE}` with the same `hnsw.ef_search`.

## Results ({cfg['queries']} questions per strategy, top_docs=3, top_k=5)

The last rows are a list question ("Which of these companies …?") routed to 20 and to 100 documents
(`auto`, top_docs=20 / 100, top_k=5): tree search and in-node retrieval run for each document with its own
sub-question, and each gets one evidence piece.

{latency_table(report)}

Targets (issue 26 item 1, 2 cores): {_targets(report)}

RAM: {", ".join(f"{k} {v}" for k, v in report.memory.items()) or "not measured"}

Reproduce: `KB_EMBEDDING_MODEL={cfg['embedding_model']} KB_DATA_DIR=/tmp/kblat KB_LOG_LEVEL=warning kb bench latency
--docs {cfg['docs']} --chunks-per-doc {cfg['chunks_per_doc']} --queries {cfg['queries']} [--reuse] [--json OUT]`.

Stage columns are the outcome's `timings_ms` (route includes the query embedding and collection lookup; the
facts stage, not shown, is part of the total).
"company in routed docs" is a sanity check: for questions that name a company, the share whose routed
documents include one of that company's filings.

{_facts_section(report)}
## Collection

- {c.docs:,} documents, {c.nodes:,} tree nodes, {c.chunks:,} chunks, {c.facts:,} statement facts in collection
  `{cfg['collection']}` (synthetic 10-K/10-Q/8-K filings of {math.ceil(c.docs / DOCS_PER_COMPANY)} fictional companies,
  {cfg['chunks_per_doc']} chunks each, embedded with `{cfg['embedding_model']}`; each 10-K and 10-Q prints its income
  statement, balance sheet and cash flow statement for its period and the comparative one, stored as facts;
  written with `ingest.store.write_document`; vectors stored as `{cfg.get('vector_type', 'vector')}`)
- `chunks` table + indexes + TOAST: {_mb(chunks_total)} (heap {_mb(rel.get('chunks', {}).get('bytes'))});
  `nodes` {_mb(rel.get('nodes', {}).get('total_bytes'))}; `documents` {_mb(rel.get('documents', {}).get('total_bytes'))};
  `facts` {_mb(rel.get('facts', {}).get('total_bytes'))}
- Load: {load}

{idx}

## Machine and settings

- {m['nproc']} cores ({m['cpu']}), {m['ram_gb']} GB RAM, Python {m['python']}, {m['platform']}
- PostgreSQL {pg['server_version']}, pgvector {pg['pgvector']}; {pgs}
- Retrieval: hnsw_ef_search={rs['hnsw_ef_search']}, semantic_top_k={rs['semantic_top_k']},
  description_shortlist={rs['description_shortlist']}, max_nodes_per_doc={rs['max_nodes_per_doc']},
  doc_concurrency={rs['doc_concurrency']}, dense/bm25 weights {rs['dense_weight']}/{rs['bm25_weight']}
- Load average (1/5/15 min) {m['loadavg_1_5_15_before']} before and {m['loadavg_1_5_15_after']} after the
  measured queries (the machine is shared: other processes inflate the timings)
- Benchmark wall time {report.wall_seconds:.0f} s

Reference plan (one query):

```
{report.reference_plan}
```

{NOTES_MARKER}
{notes}"""


def kept_notes(path: Path) -> str:
    if not path.exists():
        return ""
    text = path.read_text()
    return text.split(NOTES_MARKER, 1)[1].lstrip("\n") if NOTES_MARKER in text else ""


def jsonable(obj: Any) -> Any:
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def summary_lines(report: LatencyReport) -> Iterator[str]:
    c = report.collection
    yield (f"kb bench latency: {c.docs:,} docs, {c.chunks:,} chunks, {c.facts:,} facts; chunks table+indexes "
           f"{_mb(c.relations.get('chunks', {}).get('total_bytes'))}; PostgreSQL "
           f"{report.postgres['server_version']}, pgvector {report.postgres['pgvector']}; "
           f"{report.machine['nproc']} cores, {report.machine['ram_gb']} GB RAM")
    yield latency_table(report)
    if report.targets:
        yield "targets (issue 26): " + "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in report.targets.items())
    build = ", ".join(f"{k} {v:.0f} s" for k, v in report.load.seconds_index_build.items())
    if build:
        yield f"index builds: {build}; vector type {report.config.get('vector_type', 'vector')}"
    if report.memory:
        yield "RAM: " + ", ".join(f"{k} {v}" for k, v in report.memory.items())
    if report.facts_question is not None:
        yield "corpus-wide facts question, whole query (retrieval + offline synthesis):"
        yield facts_table(report)
