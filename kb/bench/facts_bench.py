"""``kb bench facts``: precision and recall of the statement facts read at ingest (``ingest.facts``) against a
hand-verified list (``bench/facts/dev_facts.jsonl``: document, concept, period end, months, value), read
from the dev documents under ``--data`` (default ``../shared/data``).

No database: each listed document is parsed and its facts extracted exactly as ingest does. A listed fact
is *recalled* when an extracted fact of its document has its concept, period end, months and value (within
half a unit of the printed figure's scale). *Precision* is over the extracted facts whose (document,
concept, period, months) the list covers, plus those carrying a listed value under a period the list does
not give it: each is right when its value is the listed one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

GOLD = Path(__file__).resolve().parents[2] / "bench" / "facts" / "dev_facts.jsonl"
FOLDERS = {"financebench": "financebench-dev/pdfs", "loong-en": "loong-en-dev/docs", "loong-zh": "loong-zh-dev/docs"}


class GoldFact(msgspec.Struct, frozen=True):
    dataset: str
    doc: str
    concept: str
    period_end: str
    months: int
    value: float
    where: str = ""
    printed: str = ""


class FactsReport(msgspec.Struct, frozen=True):
    gold: int
    recalled: int
    checked: int
    correct: int
    recall: float
    precision: float
    by_dataset: dict[str, dict[str, float]]
    by_concept: dict[str, dict[str, float]]
    missed: list[dict[str, Any]]
    wrong: list[dict[str, Any]]
    documents: int
    seconds: float


def load_gold(path: Path) -> list[GoldFact]:
    return [msgspec.json.decode(line, type=GoldFact) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def extract(path: Path) -> list[Any]:
    """The facts ingest would store for one file (its tree is not needed to measure them)."""
    from ingest.facts import extract_facts
    from ingest.formats import parse_file
    from ingest.metadata import extract_metadata
    from ingest.statements import statement_pages
    from kb.core.types import DocumentTree

    tree = DocumentTree(nodes=(), page_count=0, source_mode="bench")
    if path.suffix.lower() == ".pdf":
        parsed = parse_file(str(path), "pdf")
        assert parsed.pdf is not None
        meta = extract_metadata("\n".join(p.text for p in parsed.pdf.pages[:8]), file_name=path.name)
        return extract_facts(tree, pages=parsed.pdf.pages, statement_pages=statement_pages(parsed.pdf.pages),
                             period_end=meta.get("period_end_date"), doc_type=meta.get("doc_type"), name=path.name)
    parsed = parse_file(str(path), "text")
    text = parsed.text or ""
    meta = extract_metadata(text[:40000], file_name=path.name)
    return extract_facts(tree, text=text, period_end=meta.get("period_end_date"), doc_type=meta.get("doc_type"),
                         name=path.name)


def _close(a: float, b: float, scale: float, unit: str = "") -> bool:
    """Equal within half a unit of the printed figure (a cent for per-share figures)."""
    tolerance = 0.005 if unit.endswith("/share") else 0.5 * scale
    return abs(a - b) <= tolerance * (1 + 1e-9) + 1e-9 * abs(b)


def score(gold: Sequence[GoldFact], extracted: dict[str, list[Any]]) -> FactsReport:
    """Recall and precision of ``extracted`` (doc → facts) against ``gold``."""
    by_key: dict[tuple[str, str, str, int], list[GoldFact]] = defaultdict(list)
    for g in gold:
        by_key[(g.doc, g.concept, g.period_end, g.months)].append(g)
    recalled, missed = 0, []
    per_ds: dict[str, Counter[str]] = defaultdict(Counter)
    per_concept: dict[str, Counter[str]] = defaultdict(Counter)
    for g in gold:
        facts = extracted.get(g.doc, [])
        hit = any(f.concept == g.concept and str(f.period_end) == g.period_end and f.months == g.months
                  and _close(f.value, g.value, f.scale, f.unit) for f in facts)
        recalled += hit
        per_ds[g.dataset]["gold"] += 1
        per_ds[g.dataset]["recalled"] += hit
        per_concept[g.concept]["gold"] += 1
        per_concept[g.concept]["recalled"] += hit
        if not hit:
            missed.append(msgspec.to_builtins(g))
    checked = correct = 0
    wrong = []
    dataset_of = {g.doc: g.dataset for g in gold}
    for doc, facts in extracted.items():
        listed = {(g.concept, g.value) for g in gold if g.doc == doc}
        for f in facts:
            if not f.concept:
                continue
            golds = by_key.get((doc, f.concept, str(f.period_end), f.months))
            stray = golds is None and any(c == f.concept and _close(f.value, v, f.scale, f.unit) for c, v in listed)
            if golds is None and not stray:
                continue
            ok = bool(golds) and any(_close(f.value, g.value, f.scale, f.unit) for g in golds or ())
            checked += 1
            correct += ok
            per_ds[dataset_of[doc]]["checked"] += 1
            per_ds[dataset_of[doc]]["correct"] += ok
            per_concept[f.concept]["checked"] += 1
            per_concept[f.concept]["correct"] += ok
            if not ok:
                wrong.append({"doc": doc, "concept": f.concept, "period_end": str(f.period_end), "months": f.months,
                              "value": f.value, "line_item": f.line_item, "page": f.page, "line": f.line,
                              "listed": [g.value for g in golds or ()]})

    def rates(c: Counter[str]) -> dict[str, float]:
        return {"gold": c["gold"], "recall": c["recalled"] / c["gold"] if c["gold"] else float("nan"),
                "checked": c["checked"], "precision": c["correct"] / c["checked"] if c["checked"] else float("nan")}

    return FactsReport(gold=len(gold), recalled=recalled, checked=checked, correct=correct,
                       recall=recalled / max(1, len(gold)), precision=correct / max(1, checked),
                       by_dataset={k: rates(v) for k, v in sorted(per_ds.items())},
                       by_concept={k: rates(v) for k, v in sorted(per_concept.items())},
                       missed=missed, wrong=wrong, documents=len(extracted), seconds=0.0)


def run_facts(data: Path, gold_path: Path = GOLD) -> FactsReport:
    gold = load_gold(gold_path)
    started = time.perf_counter()
    extracted: dict[str, list[Any]] = {}
    for dataset, doc in sorted({(g.dataset, g.doc) for g in gold}):
        path = data / FOLDERS[dataset] / doc
        if not path.is_file():
            continue
        extracted[doc] = extract(path)
    present = [g for g in gold if g.doc in extracted]
    report = score(present, extracted)
    return msgspec.structs.replace(report, seconds=time.perf_counter() - started)


def _table(rows: Iterable[tuple[str, dict[str, float]]]) -> list[str]:
    out = ["| | listed | recall | checked | precision |", "|---|---:|---:|---:|---:|"]
    out += [f"| {k} | {v['gold']} | {v['recall']:.3f} | {v['checked']} | {v['precision']:.3f} |" for k, v in rows]
    return out


def run_cli(args: argparse.Namespace) -> int:
    data = Path(args.data or Path.cwd().parent / "shared" / "data").expanduser()
    gold_path = Path(args.questions) if args.questions else GOLD
    if not any((data / f).is_dir() for f in FOLDERS.values()):
        print(f"kb bench facts: no dev documents under {data} (expected {', '.join(FOLDERS.values())}); "
              "nothing was run", file=sys.stderr)
        return 0
    report = run_facts(data, gold_path)
    if not report.gold:
        print(f"kb bench facts: none of the listed documents is under {data}; nothing was measured", file=sys.stderr)
        return 0
    lines = [f"kb bench facts: {report.gold} listed facts in {report.documents} documents, "
             f"{report.seconds:.1f} s", f"recall {report.recall:.3f} ({report.recalled}/{report.gold}), "
             f"precision {report.precision:.3f} ({report.correct}/{report.checked})", ""]
    lines += _table(report.by_dataset.items()) + [""] + _table(report.by_concept.items())
    if report.wrong:
        lines += ["", "wrong (first 15):"] + [f"- {json.dumps(w, default=str)}" for w in report.wrong[:15]]
    if report.missed:
        lines += ["", "missed (first 25):"] + [f"- {json.dumps(m, ensure_ascii=False)}" for m in report.missed[:25]]
    print("\n".join(lines))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(msgspec.to_builtins(report), indent=1, ensure_ascii=False))
    return 0
