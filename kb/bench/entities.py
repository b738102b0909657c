"""``right_entities`` of ``kb bench loong``: does the answer text name the right company (level 2) or put each
company in the right category (level 3)? Read from the text alone, with no model.

Names match case-insensitively, whole words, with any punctuation or spacing between words and legal forms
dropped ("GRESHAM WORLDWIDE, INC." matches "Gresham Worldwide"); Chinese names and labels match as written.
The answer is cut into clauses (at line breaks, ". ", ";", "。", "；", "!", "?", "while", "whereas"; never
inside a company name such as "Inc. has"). Three kinds of reference answer:

- **winner** (level 2, the reference is one of the question's companies: "which has the highest …"): the
  answer's verdict is the company named in the clause of its last superlative of the question's sense
  ("highest", "largest", "最高" …), nearest before it, else first after it; right when that is the reference.
  An answer without such a clause (a per-document listing) gives no verdict: 0.
- **order** (level 2, the reference lists several companies: "list … in ascending order"): right when every
  company is named and their last mentions come in the reference's order (a closing sorted list decides).
- **categories** (level 3, the reference maps labels to companies): each company's category is read at its
  last mention: the nearest label before it in its clause, else the first after it, else the label of the
  nearest heading above (a clause naming one label and no company: "Low assets:"). Labels are the
  reference's keys and the groups the question lists ("… into the following groups: high (…), medium (…)").
  The score is the share of the reference's companies placed right.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

import msgspec

_LEGAL = frozenset({"inc", "incorporated", "co", "corp", "corporation", "company", "ltd", "limited", "llc", "lp",
                    "plc", "partnership"})
_LEGAL_TAIL = r"(?:[\s,]+(?:" + "|".join(sorted(_LEGAL, key=lambda w: (-len(w), w))) + r")\b\.?)*"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CLAUSE_END = re.compile(r"\n|[.!?](?=\s|$)|[;。；！？]|\b(?:while|whereas)\b", re.I)
_SUPERLATIVES = (("highest", "largest", "greatest", "biggest", "most", "最高", "最大", "最多"),
                 ("lowest", "smallest", "least", "fewest", "最低", "最小", "最少"))
_GROUPS = re.compile(r"(?:following\s+(?:groups|categories)|categories|groups|划分成|分为|分成)\s*[:：]\s*(.+)",
                     re.I | re.S)
_PARENS = re.compile(r"\([^()]*\)|（[^（）]*）")
_LIST_SPLIT = re.compile(r"\s*(?:,\s*and\s+|,\s*or\s+|,|，|、|；|;|\band\b)\s*", re.I)


class Mention(msgspec.Struct, frozen=True):
    start: int
    end: int
    key: str


def _phrase(text: str, *, company: bool) -> re.Pattern[str] | None:
    """A pattern for a company name or a label (see the module docstring); None when nothing is left."""
    text = text.strip()
    if _CJK.search(text):
        return re.compile(r"\s*".join(re.escape(ch) for ch in text if not ch.isspace()), re.I)
    words = re.findall(r"\w+", text.casefold())
    if company:
        while len(words) > 1 and words[-1] in _LEGAL:
            words.pop()
        if len(words) > 1 and words[0] == "the":
            words.pop(0)
    if not words:
        return None
    tail = _LEGAL_TAIL if company else ""  # "Realty, Inc." is one mention: its period ends no clause
    return re.compile(r"(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)" + tail, re.I)


def _mentions(text: str, phrases: dict[str, re.Pattern[str] | None],
              taken: Sequence[Mention] = ()) -> list[Mention]:
    """Non-overlapping mentions in text order (the longest wins at a position), skipping ``taken`` spans."""
    found = sorted(((m.start(), m.end(), key) for key, p in phrases.items() if p is not None
                    for m in p.finditer(text)), key=lambda x: (x[0], x[0] - x[1]))
    out: list[Mention] = []
    end = -1
    for s, e, key in found:
        if s >= end and not any(s < t.end and t.start < e for t in taken):
            out.append(Mention(s, e, key))
            end = e
    return out


def _clause_starts(text: str, names: Sequence[Mention]) -> list[int]:
    cuts = [m.end() for m in _CLAUSE_END.finditer(text)
            if not any(n.start <= m.start() < n.end for n in names)]
    return [0, *cuts]


def _clause(starts: list[int], pos: int) -> int:
    return bisect.bisect_right(starts, pos) - 1


def _nearest(target: Mention, others: Sequence[Mention], starts: list[int]) -> Mention | None:
    """In the clause of ``target``: the nearest of ``others`` before it, else the first after it."""
    clause = _clause(starts, target.start)
    same = [o for o in others if _clause(starts, o.start) == clause]
    before = [o for o in same if o.end <= target.start]
    if before:
        return before[-1]
    after = [o for o in same if o.start >= target.end]
    return after[0] if after else None


def named_companies(text: str, companies: Sequence[str]) -> list[Mention]:
    """The mentions of ``companies`` in ``text`` (key: the company as given; of two spellings of one
    name, the first)."""
    phrases: dict[str, re.Pattern[str] | None] = {}
    seen: set[str] = set()
    for c in companies:
        p = _phrase(c, company=True)
        if p is not None and p.pattern not in seen:
            seen.add(p.pattern)
            phrases[c] = p
    return _mentions(text, phrases)


def question_groups(question: str) -> list[str]:
    """The groups a sorting question lists ("into the following groups: high (over …), medium (…) and low")."""
    m = _GROUPS.search(question)
    if m is None:
        return []
    tail = m.group(1)
    while _PARENS.search(tail):
        tail = _PARENS.sub("", tail)
    tail = re.split(r"[.。](?:\s|$)|。", tail, maxsplit=1)[0]
    return [g.strip(" .。'\"“”") for g in _LIST_SPLIT.split(tail) if g.strip(" .。'\"“”")]


def _winner(answer_text: str, question: str, companies: Sequence[str], reference: str) -> float:
    groups = [{w: _phrase(w, company=False) for w in g} for g in _SUPERLATIVES]
    group = next((g for g in groups if any(p is not None and p.search(question) for p in g.values())), None)
    if group is None:
        return 0.0
    names = named_companies(answer_text, companies)
    marks = _mentions(answer_text, group, names)
    if not marks or not names:
        return 0.0
    verdict = _nearest(marks[-1], names, _clause_starts(answer_text, names))
    return 1.0 if verdict is not None and verdict.key == reference else 0.0


def _order(answer_text: str, companies: Sequence[str], reference: Sequence[str]) -> float:
    last = {m.key: m.start for m in named_companies(answer_text, companies)}
    if not set(reference) <= set(last):
        return 0.0
    return 1.0 if sorted(reference, key=lambda c: last[c]) == list(reference) else 0.0


def _categories(answer_text: str, question: str, companies: Sequence[str],
                categories: Sequence[tuple[str, Sequence[str]]]) -> float:
    placed = {c: label for label, members in categories for c in members}
    if not placed:
        return 0.0
    labels: dict[str, re.Pattern[str] | None] = {}
    for label in [*(k for k, _ in categories), *question_groups(question)]:
        key = " ".join(re.findall(r"\w+", label.casefold())) or label
        labels.setdefault(key, _phrase(label, company=False))
    ref_key = {c: " ".join(re.findall(r"\w+", label.casefold())) or label for c, label in placed.items()}
    names = named_companies(answer_text, [*placed, *companies])
    marks = _mentions(answer_text, labels, names)
    starts = _clause_starts(answer_text, names)
    named_clauses = {_clause(starts, n.start) for n in names}
    per_clause: dict[int, list[Mention]] = {}
    for mark in marks:
        per_clause.setdefault(_clause(starts, mark.start), []).append(mark)
    headings = [ms[0] for c, ms in per_clause.items() if len(ms) == 1 and c not in named_clauses]
    right = 0
    for company in placed:
        mentions = [n for n in names if n.key == company]
        if not mentions:
            continue
        last = mentions[-1]
        label = _nearest(last, marks, starts)
        if label is None:
            above = [h for h in headings if h.end <= last.start]
            label = above[-1] if above else None
        right += label is not None and label.key == ref_key[company]
    return right / len(placed)


def right_entities(answer_text: str, question: str, companies: Sequence[str], reference: str,
                   categories: Iterable[tuple[str, Sequence[str]]] = ()) -> float | None:
    """1/0 (winner, order) or the share of companies placed right (categories); None when the reference
    names none of ``companies`` (the question is not about picking or sorting them)."""
    cats = [(label, tuple(members)) for label, members in categories]
    if cats:
        return _categories(answer_text, question, companies, cats)
    in_reference = list(dict.fromkeys(m.key for m in named_companies(reference, companies)))
    if not in_reference:
        return None
    if len(in_reference) == 1:
        return _winner(answer_text, question, companies, in_reference[0])
    return _order(answer_text, companies, in_reference)
