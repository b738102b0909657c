"""`kb bench answers`: does the answer's lead state the asked figure? Over a gold set written by hand
(``bench/answers/questions.jsonl``: the bundled samples and the dev corpora), each question is asked offline
(``auto``) and its **lead** — the first sentence, with the line after a headline ending in ":" — is scored:

- **right**: the lead states a gold figure (numbers compared as read: "$792.5 million", "792,500 thousand" and
  "792.5" are one figure) or, for a text question, every gold string; for an unanswerable question, it says
  it could not determine it;
- **confidently wrong**: the lead states a figure that is none of the gold ones (for an unanswerable question:
  any figure) — a reader who trusts the first sentence is misled;
- **silent**: the answer says it could not determine or find it;
- **other**: the lead states no figure and does not say it could not (the figure may be further down:
  ``buried`` says so).

The samples are ingested into their own collection (``bench-samples``) when it does not hold them; a dev
corpus is asked in the collection its ``kb bench`` run left (``bench-loong-zh`` …), and skipped when there is
none.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import msgspec

from kb.bench.markdown import table

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_QUESTIONS = ROOT / "bench" / "answers" / "questions.jsonl"
SAMPLES = ROOT / "samples"
COLLECTIONS = {"samples": "bench-samples", "financebench": "bench-financebench", "docugami": "bench-docugami",
               "loong-en": "bench-loong-en", "loong-zh": "bench-loong-zh"}
OUTCOMES = ("right", "confidently_wrong", "silent", "other")
SILENT = re.compile(r"(?i)\b(?:could not (?:determine|find)|no evidence (?:was )?found|not stated|not found|"
                    r"(?:does|do) not state|no (?:such|relevant) (?:figure|information))\b|未找到|无法确定|没有找到|未列示")
_NUMBER = re.compile(r"(?<![\w.])[-−(]?\d[\d,]*(?:\.\d+)?")


class TurnIn(msgspec.Struct, frozen=True):
    role: str
    content: str


class AnswerCase(msgspec.Struct, frozen=True):
    id: str
    corpus: str
    kind: str  # "figure" | "text" | "none"
    question: str
    gold: tuple[str, ...] = ()
    measure: str = ""
    period: str = ""
    unit: str = ""
    note: str = ""
    history: tuple[TurnIn, ...] = ()


class Scored(msgspec.Struct, frozen=True):
    id: str
    corpus: str
    kind: str
    outcome: str
    lead: str
    buried: bool = False  # not right, but a gold figure stands further down the answer


def load_cases(path: Path) -> list[AnswerCase]:
    return [msgspec.json.decode(line, type=AnswerCase) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def lead_of(answer: str) -> str:
    """The answer's first sentence; a headline ending in ":" ("Highest revenue, 2023, over 3 companies:", "Per
    document:") is read with the list it introduces (its next lines that are headlines or list items, at most
    five), or with the line after it."""
    raw = [ln.strip() for ln in answer.strip().splitlines() if ln.strip()]
    if not raw:
        return ""
    if raw[0].endswith((":", "：")) and len(raw) > 1:
        taken = [raw[0]]
        for ln in raw[1:6]:
            if _EVIDENCE.match(ln) or not (ln.endswith((":", "：")) or _ITEM.match(ln)) and len(taken) > 1:
                break  # the list ends; the evidence quoted under it is not the answer
            taken.append(ln)
        return " ".join(_ITEM.sub("", ln) for ln in taken)
    first = _ITEM.sub("", raw[0])
    for m in re.finditer(r"(?<=[A-Za-z0-9)\]%])\.(?:\s|$)|。", first):
        if not re.search(r"(?i)\b(?:inc|corp|co|ltd|no|vs|u\.s|approx|e\.g|i\.e)$", first[: m.start()]):
            return first[: m.end()].strip()
    return first


_ITEM = re.compile(r"^(?:[-*•]|\d{1,2}[.)])\s+")
_EVIDENCE = re.compile(r"(?i)^(?:supporting evidence|evidence|支持证据|证据)")


def numbers(text: str) -> list[float]:
    """The figures a text states: citation markers ("[1]") and years standing alone ("in 2023") are none."""
    text = re.sub(r"\[\d+\]", " ", text.replace("−", "-"))
    text = re.sub(r"(?<![\d,.$])(?:19|20)\d{2}(?![\d,.%])", " ", text)
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group(0)
        negative = raw.startswith(("-", "("))
        try:
            value = float(raw.strip("-(").replace(",", ""))
        except ValueError:
            continue
        out.append(-value if negative else value)
    return out


def states(text: str, gold: str) -> bool:
    """Does ``text`` state the figure ``gold`` — as printed, or scaled by thousands ("792.5" million is
    "792,500" thousand), or with more decimals that round to it ("35.82%" computed is the printed "35.8%"),
    sign aside?"""
    want = numbers(gold)
    if not want:
        return gold.lower() in text.lower()
    target = abs(want[0])
    places = len(gold.split(".")[1].rstrip("%)")) if "." in gold else 0
    for n in numbers(text):
        for k in (1.0, 1e3, 1e-3, 1e6, 1e-6):
            if abs(abs(n) * k - target) <= max(1e-9, target * 5e-4):
                return True
        shown = Decimal(repr(abs(n)))
        if -shown.as_tuple().exponent > places and \
                shown.quantize(Decimal(10) ** -places, rounding=ROUND_HALF_UP) == Decimal(repr(target)):
            return True
    return False


def score(case: AnswerCase, answer: str) -> Scored:
    lead = lead_of(answer)
    silent = bool(SILENT.search(lead))
    buried = False
    if case.kind == "none":
        outcome = "right" if silent else "confidently_wrong" if numbers(lead) else "other"
    elif case.kind == "text":
        ok = all(g.lower() in lead.lower() or states(lead, g) for g in case.gold)
        outcome = "right" if ok else "silent" if silent else "confidently_wrong" if lead else "other"
        buried = not ok and all(g.lower() in answer.lower() or states(answer, g) for g in case.gold)
    else:
        ok = any(states(lead, g) for g in case.gold)
        outcome = "right" if ok else "silent" if silent else "confidently_wrong" if numbers(lead) else "other"
        buried = not ok and any(states(answer, g) for g in case.gold)
    return Scored(case.id, case.corpus, case.kind, outcome, lead[:300], buried)


def summarise(scored: Sequence[Scored]) -> dict[str, Any]:
    def rates(rows: Sequence[Scored]) -> dict[str, Any]:
        c = Counter(s.outcome for s in rows)
        n = max(1, len(rows))
        return {"n": len(rows), **{o: round(c[o] / n, 3) for o in OUTCOMES},
                "buried": round(sum(s.buried for s in rows) / n, 3)}

    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        groups[f"corpus: {s.corpus}"].append(s)
        groups[f"kind: {s.kind}"].append(s)
    return {"overall": rates(scored), "groups": {k: rates(v) for k, v in sorted(groups.items())},
            "questions": [msgspec.to_builtins(s) for s in scored]}


def render(report: dict[str, Any]) -> str:
    rows = [("overall", report["overall"]), *report["groups"].items()]
    lines = table(["", "n", *OUTCOMES, "buried"],
                  [[k, str(v["n"]), *(f"{v[o]:.3f}" for o in OUTCOMES), f"{v['buried']:.3f}"] for k, v in rows])
    wrong = [q for q in report["questions"] if q["outcome"] == "confidently_wrong"]
    lines += ["", f"confidently wrong ({len(wrong)}):"]
    lines += [f"- {q['id']} ({q['corpus']}): {q['lead'][:160]}" for q in wrong]
    return "\n".join(lines)


async def _samples_collection(rt: Any) -> None:
    """The samples in ``bench-samples`` (ingested with their metadata unless all six are there)."""
    from ingest.jobs import create_job, run_job
    from ingest.store import list_documents
    from kb.core.collections import ensure_collection
    from kb.runtime import build_ingest_context

    coll = await ensure_collection(rt.pool, COLLECTIONS["samples"])
    reports = sorted((SAMPLES / "reports").iterdir())
    if len(await list_documents(rt.pool, COLLECTIONS["samples"], limit=1000)) >= len(reports):
        return
    with build_ingest_context(rt) as ctx:
        job_id = await create_job(rt.pool, collection_id=coll.id, path=SAMPLES / "reports",
                                  metadata_path=SAMPLES / "metadata.jsonl", name_root=None)
        await run_job(ctx, job_id, workers=1)


async def run_answers(cases: Sequence[AnswerCase]) -> tuple[list[Scored], list[str]]:
    """Ask every case offline in its corpus's collection; the skipped corpora named."""
    from kb.core.collections import lookup_collection_id
    from kb.core.errors import NotFoundError
    from kb.runtime import build_pipeline, open_runtime
    from router.types import QueryRequest, Turn

    scored: list[Scored] = []
    skipped: list[str] = []
    async with open_runtime() as rt:
        if any(c.corpus == "samples" for c in cases):
            await _samples_collection(rt)
        pipeline = build_pipeline(rt)
        present = {}
        for corpus, name in COLLECTIONS.items():
            try:
                present[corpus] = await lookup_collection_id(rt.pool, name) > 0
            except NotFoundError:  # no such collection: its questions are skipped, and said so
                present[corpus] = False
        for case in cases:
            if not present.get(case.corpus):
                skipped.append(f"{case.id} ({case.corpus}: no collection {COLLECTIONS.get(case.corpus, '?')})")
                continue
            result = await pipeline.run(QueryRequest(
                query=case.question, collection=COLLECTIONS[case.corpus], strategy="auto", include_trace=False,
                history=[Turn(role=t.role, content=t.content) for t in case.history]))  # type: ignore[arg-type]
            scored.append(score(case, result.answer))
    return scored, skipped


def run_cli(args: argparse.Namespace) -> int:
    path = Path(args.questions) if args.questions else DEFAULT_QUESTIONS
    if not path.is_file():
        raise SystemExit(f"kb bench answers: no question file at {path}")
    cases = load_cases(path)
    if args.limit:
        cases = cases[: args.limit]
    scored, skipped = asyncio.run(run_answers(cases))
    report = {**summarise(scored), "skipped": skipped}
    print(render(report))
    for s in skipped:
        print(f"kb bench answers: skipped {s}", file=sys.stderr)
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0
