"""`kb bench parse`: question → typed question (``router.reading.read_question``), scored against a set
written by hand (``bench/parse/questions.jsonl``), apart from answers.

Each line: ``id``, ``capability``, ``lang``, ``source`` ("analyst", "reword:…", "bad-input"), ``companies`` (the
collection's company names), ``question`` and ``expect``: the fields of the typed question that are
determined, or ``{"abstain": true}`` for a question no verdict should be given to. A reading is

- **correct**: every expected field matches (omitted fields at their defaults; ``unit``/``decimals`` only when
  given; range labels are not compared), or an abstain line is not understood;
- **mis-parsed**: understood (an operation, a measure, nothing unknown) but a field differs, or an abstain line
  was understood — a confident answer to another question;
- **not parsed**: not understood where a reading was expected.

Leave-one-family-out: the rewordings of each dev template family are read again without the cue words and
measure phrases that no question outside the family uses — what the family's score owes to wording only its
own test questions exercise.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from kb.bench.markdown import table

DEFAULT_QUESTIONS = Path(__file__).resolve().parents[2] / "bench" / "parse" / "questions.jsonl"
OUTCOMES = ("correct", "misparsed", "not_parsed")


class ParseCase(msgspec.Struct, frozen=True):
    id: str
    capability: str
    lang: str
    source: str
    question: str
    expect: dict[str, Any]
    companies: tuple[str, ...] = ()
    aliases: dict[str, list[str]] = {}  # tickers and short names the collection records for a company

    def collection(self) -> dict[str, list[str]]:
        return {c: self.aliases.get(c, []) for c in self.companies}


class Scored(msgspec.Struct, frozen=True):
    id: str
    capability: str
    lang: str
    source: str
    outcome: str
    diff: tuple[str, ...] = ()  # "field: expected … got …"


def load_cases(path: Path) -> list[ParseCase]:
    """The hand-written question set (a line that does not read is an error naming its line)."""
    cases = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                cases.append(msgspec.json.decode(line, type=ParseCase))
            except msgspec.DecodeError as exc:
                raise SystemExit(f"kb bench parse: {path}:{n}: {exc}") from exc
    return cases


def _measures(value: Iterable[Any]) -> list[tuple[str, str]]:
    """(name, kind) pairs; a printed line's label compared without case and punctuation."""
    pairs = [(m["name"], m.get("kind", "concept")) if isinstance(m, dict) else (m.name, m.kind) for m in value]
    return sorted((" ".join(re.sub(r"[^\w]+", " ", n.lower()).split()) if k == "line" else n, k) for n, k in pairs)


def _period(p: Mapping[str, Any]) -> tuple[Any, ...]:
    return (p.get("year"), p.get("quarter", 0), p.get("months", 12) if not p.get("relative") else 12,
            p.get("relative", ""), p.get("n", 0))


def _close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-6))


def _ranges_match(want: Sequence[Mapping[str, Any]], got: Sequence[Mapping[str, Any]]) -> bool:
    if len(want) != len(got):
        return False
    key = lambda r: (r.get("direction") or "", r.get("low") if r.get("low") is not None else -math.inf)  # noqa: E731
    return all(w.get("direction", "") == g.get("direction", "") and _close(w.get("low"), g.get("low"))
               and _close(w.get("high"), g.get("high")) for w, g in zip(sorted(want, key=key), sorted(got, key=key),
                                                                         strict=True))


def compare(expect: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    """The fields where a reading differs from what is expected (``got``: the typed question as builtins)."""
    diffs = []

    def check(name: str, want: Any, have: Any) -> None:
        if want != have:
            diffs.append(f"{name}: expected {want!r}, got {have!r}")

    check("operation", expect.get("operation"), got["operation"])
    check("measures", _measures(expect.get("measures", [])), _measures(got["measures"]))
    ent = expect.get("entities", {"scope": "collection", "names": []})
    check("entities", (ent.get("scope", "collection"), sorted(ent.get("names", []))),
          (got["entities"]["scope"], sorted(got["entities"]["names"])))
    check("periods", sorted(map(_period, expect.get("periods", [])), key=str),
          sorted(map(_period, got["periods"]), key=str))
    for name, default in (("change", ""), ("sign", ""), ("order", ""), ("over", ""), ("average", False),
                          ("limit", None)):
        check(name, expect.get(name, default), got.get(name, default))
    if not _ranges_match(expect.get("ranges", []), got["ranges"]):
        diffs.append(f"ranges: expected {expect.get('ranges', [])!r}, got {got['ranges']!r}")
    want_bounds, have_bounds = expect.get("bounds", {}), got["bounds"]
    if set(want_bounds) != set(have_bounds) or not all(_close(want_bounds[k], have_bounds[k]) for k in want_bounds):
        diffs.append(f"bounds: expected {want_bounds!r}, got {have_bounds!r}")
    for name in ("unit", "decimals"):
        if name in expect:
            check(name, expect[name], got[name])
    return diffs


def score(case: ParseCase, masked: Iterable[str] = ()) -> Scored:
    """One case read (without the ``masked`` cues) and scored."""
    from router.reading import cues, read_question

    with cues(masked):
        q = read_question(case.question, case.collection())
    got = msgspec.to_builtins(q)
    if case.expect.get("abstain"):
        outcome, diff = ("misparsed", (f"understood as {q.operation} of "
                                       f"{[m.name for m in q.measures]}",)) if q.understood else ("correct", ())
    elif not q.understood:
        outcome, diff = "not_parsed", tuple(q.unknown) or ("no operation on a measure was read",)
    else:
        d = compare(case.expect, got)
        outcome, diff = ("misparsed", tuple(d)) if d else ("correct", ())
    return Scored(case.id, case.capability, case.lang, case.source.split(":")[0], outcome, diff)


def cues_of(case: ParseCase) -> set[str]:
    from router.reading import cues, read_question

    with cues() as used:
        read_question(case.question, case.collection())
    return used


def family(case: ParseCase) -> str:
    """A rewording's dev template family ("reword:en2:highest"); any other question is a family of its own."""
    return case.source if case.source.startswith("reword:") else f"own:{case.id}"


def leave_one_family_out(cases: Sequence[ParseCase], *, measures: bool = True) -> list[Scored]:
    """Each template family's rewordings read without the cues that only that family's questions use (with
    ``measures`` False, only operation, period and range words: the measure vocabulary stays)."""
    from router.reading import MEASURE_PHRASES

    used = {c.id: cues_of(c) if measures else cues_of(c) - MEASURE_PHRASES for c in cases}
    by_family: dict[str, set[str]] = defaultdict(set)
    for c in cases:
        by_family[family(c)] |= used[c.id]
    out = []
    for c in cases:
        if family(c).startswith("reword:"):
            elsewhere = set().union(*(v for k, v in by_family.items() if k != family(c)))
            out.append(score(c, masked=by_family[family(c)] - elsewhere))
    return out


def _shares(rows: Sequence[Scored]) -> dict[str, Any]:
    n = len(rows)
    counts = Counter(r.outcome for r in rows)
    return {"n": n, **{o: round(counts[o] / n, 3) if n else None for o in OUTCOMES}}


def summarise(scored: Sequence[Scored], lofo: Sequence[Scored], lofo_words: Sequence[Scored]) -> dict[str, Any]:
    groups: dict[str, dict[str, list[Scored]]] = {"capability": defaultdict(list), "lang": defaultdict(list),
                                                  "source": defaultdict(list)}
    for r in scored:
        groups["capability"][r.capability].append(r)
        groups["lang"][r.lang].append(r)
        groups["source"][r.source].append(r)
    return {
        "overall": _shares(scored),
        "leave_one_family_out": _shares(lofo),
        "leave_one_family_out_wording": _shares(lofo_words),
        **{f"by_{k}": {name: _shares(rows) for name, rows in sorted(v.items())} for k, v in groups.items()},
        "misparsed": [msgspec.to_builtins(r) for r in scored if r.outcome == "misparsed"],
        "not_parsed": [msgspec.to_builtins(r) for r in scored if r.outcome == "not_parsed"],
    }


def render(report: Mapping[str, Any]) -> str:
    rows = [["overall", *_cells(report["overall"])],
            ["rewordings, leave one family out", *_cells(report["leave_one_family_out"])],
            ["rewordings, leave one family out (operation and period words only)",
             *_cells(report["leave_one_family_out_wording"])]]
    for k in ("by_capability", "by_lang", "by_source"):
        rows += [[f"{k[3:]}: {name}", *_cells(v)] for name, v in report[k].items()]
    lines = [*table(["", "n", "correct", "mis-parsed", "not parsed"], rows), ""]
    for kind in ("misparsed", "not_parsed"):
        for r in report[kind]:
            lines.append(f"- {kind} {r['id']} ({r['capability']}, {r['lang']}): {'; '.join(r['diff'])}")
    return "\n".join(lines)


def _cells(s: Mapping[str, Any]) -> list[str]:
    return [str(s["n"]), *(f"{s[o]:.3f}" if s[o] is not None else "–" for o in OUTCOMES)]


def run_cli(args: argparse.Namespace) -> int:
    path = args.questions or DEFAULT_QUESTIONS
    if not Path(path).is_file():
        raise SystemExit(f"kb bench parse: no question file at {path}")
    cases = load_cases(Path(path))
    if args.limit:
        cases = cases[: args.limit]
    report = summarise([score(c) for c in cases], leave_one_family_out(cases),
                       leave_one_family_out(cases, measures=False))
    print(render(report))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0
