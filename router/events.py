"""List questions about an event over the companies ("which companies made an acquisition", "did any company
change its auditor", 哪些公司进行了收购): each routed document's best passage for the event is read, and
whether it *states* the event — the event's word near a concrete object, date or amount, neither hedged
("we may pursue acquisitions") nor denied — is decided per sentence, explainably. The offline answer names the
documents that state it, then says per document what was read; "not found" only when no document states it.

The event vocabularies, hedges and negations are language data (``kb.core.lexicon.EVENTS``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence, Set
from typing import Literal

import asyncpg
import msgspec
import numpy as np

from kb.core import lexicon as lx
from kb.core.periods import question_years
from kb.core.text import cited_span, split_sentences, tokenize
from router import store
from router.types import Answer, CitationOut, RetrievedChunk, ScopePlan
from router.wording import Words, words

Verdict = Literal["stated", "hedged", "negated", "incomplete", "vague", "attributive", "absent"]
_RANK: dict[str, int] = {"stated": 6, "hedged": 5, "negated": 4, "incomplete": 3, "vague": 2, "attributive": 1,
                         "absent": 0}
MENTIONS = ("hedged", "negated", "incomplete", "vague")
"""Verdicts of a passage that names the event without stating it: the answer quotes it and says why."""
PER_DOCUMENT = 12
"""Candidate chunks read per document for the event (its words, nearest the question first)."""
NEAR_WORDS = 12
"""A concrete object, date or amount counts within this many words of the event's word, and so does a hedge in
the clause before it."""
NEGATION_WORDS = 5
"""A negation counts within this many words before the event's word ("we did not make any acquisitions"; the
"not" of "we may not retain key engineers … of the acquisition" negates another verb)."""

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_BREAK = re.compile(r"[;:,，；：、—–()（）]")
_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s.*$", re.M)
_ZH_SENTENCE_END = re.compile(r"(?<=[。！？])")
_AMOUNT = re.compile(r"(?i)(?:US)?[$€£¥]\s?\d|\d[\d,.]*\s*(?:%|percent\b|per cent\b|million\b|billion\b|thousand\b|"
                     r"万元|亿元|元|万|亿|股)|人民币")
_DATE = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)|\d{1,2}\s*月|\d{1,2}\s*日")  # a year, a Chinese month or day
_FOUR_DIGIT_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")
_MONTH = re.compile(r"\b(?:" + "|".join(m.capitalize() for m in lx.MONTH_NAMES) + r")\b")
_ZH_NAME = re.compile(r"[“「《\"]([^”」》\"]{2,30})[”」》\"]|[\u4e00-\u9fff]{2,20}(?:有限公司|股份公司|集团)")
_FUNCTION = frozenset(lx.STOP_WORDS | {"about", "approximately", "some", "all", "every", "more", "less", "our",
                                        "its", "their"})


class EventAsked(msgspec.Struct, frozen=True):
    """The event a question asks about (``kb.core.lexicon.EVENTS``), the word that named it and the years the
    question states ("which companies made an acquisition in 2023")."""

    name: str
    cue: str
    years: frozenset[int] = frozenset()

    @property
    def words(self) -> lx.EventWords:
        return next(e for e in lx.EVENTS if e.name == self.name)


class Sighting(msgspec.Struct, frozen=True):
    """What one sentence says of the event, and why: the event's word found, and the concrete object, date or
    amount near it (``stated``, ``vague``: none) or the word that hedges (``hedged``) or denies (``negated``) it;
    ``incomplete``: the event's second word (``needs``) is missing; ``attributive``: the word describes a noun
    ("acquired intangible assets")."""

    verdict: Verdict
    word: str = ""
    detail: str = ""
    kinds: int = 0  # how many kinds of concrete detail (object, date, amount) stand near the word
    years: tuple[int, ...] = ()  # the years written near the word (when the event happened)

    @property
    def rank(self) -> tuple[int, int]:
        return _RANK[self.verdict], self.kinds


class Finding(msgspec.Struct, frozen=True):
    """A document's best sentence for the event: where it stands in the evidence, and what it says."""

    doc_id: int
    chunk: int  # index into the evidence
    sentence: str
    sighting: Sighting
    when: tuple[int, ...] = ()  # a stated event's years: written near it, else the report's period
    fits: bool = True  # the question asks no year, or the event's is one it asks (or none is known)


# ------------------------------------------------------------------------------------ the question


@functools.lru_cache(maxsize=512)
def _cue_index(cues: tuple[str, ...]) -> tuple[dict[str, list[tuple[int, tuple[str, ...]]]], tuple[tuple[int, str], ...]]:
    """Cues by their first word (English: (position, words)) and the Chinese ones (position, cue): one pass over
    a text's words finds every English cue."""
    first: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    zh: list[tuple[int, str]] = []
    for i, cue in enumerate(cues):
        if cue.isascii():
            parts = tuple(cue.lower().split())
            if parts:
                first.setdefault(parts[0], []).append((i, parts))
        else:
            zh.append((i, cue))
    return first, tuple(zh)


def _matches(text: str, cues: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, cue) of every cue in ``text``, in the order of ``cues`` then of place: English cues as whole
    words (a phrase as consecutive words), case-insensitive; Chinese ones as written. A cue inside a longer one
    found at the same place is dropped (未 inside 未来)."""
    cues = tuple(cues)
    first, zh = _cue_index(cues)
    found: list[tuple[int, int, int, str]] = []  # (cue position, start, end, cue)
    if first:
        ws = [(m.start(), m.end(), m.group(0).lower().replace("’", "'")) for m in _WORD.finditer(text)]
        for i, (start, _, word) in enumerate(ws):
            for at, parts in first.get(word, ()):
                if i + len(parts) <= len(ws) and all(ws[i + k][2] == p for k, p in enumerate(parts)):
                    found.append((at, start, ws[i + len(parts) - 1][1], cues[at]))
    if zh:
        low = text.lower()
        for at_cue, cue in zh:
            at = low.find(cue)
            while at >= 0:
                found.append((at_cue, at, at + len(cue), cue))
                at = low.find(cue, at + 1)
    hits = [(start, end, cue) for _, start, end, cue in sorted(found, key=lambda f: (f[0], f[1]))]
    if len(hits) < 2:
        return hits
    return [f for f in hits if not any(o != f and o[0] <= f[0] and f[1] <= o[1] and o[1] - o[0] > f[1] - f[0]
                                       for o in hits)]


def over_companies(question: str) -> bool:
    """Whether the question asks which of the companies, or whether any ("which companies", "did any company",
    哪些公司: ``kb.core.lexicon.OVER_COMPANIES``)."""
    return bool(_matches(question, lx.OVER_COMPANIES))


def asked_event(question: str) -> EventAsked | None:
    """The event the question asks about — the first of ``kb.core.lexicon.EVENTS`` whose word (and second word,
    when it needs one) the question holds — unless it asks for a figure ("how much did the acquisition cost",
    "the largest acquisition")."""
    if _matches(question, [*lx.AMOUNT_ASKED, *(c for cues in lx.ASKED_KIND.values() for c in cues),
                           *lx.IRREGULAR_SUPERLATIVE, *lx.ZH_MAX, *lx.ZH_MIN]):
        return None
    for event in lx.EVENTS:
        hits = _matches(question, event.words)
        if hits and (not event.needs or _matches(question, event.needs)):
            return EventAsked(event.name, min(hits)[2], frozenset(question_years(question)))
    return None


# ------------------------------------------------------------------------------------ one sentence


def read_sentence(sentence: str, event: lx.EventWords) -> Sighting:
    """What the sentence says of the event: its best reading over every place the event's word stands."""
    hits = _matches(sentence, event.words)
    if not hits:
        return Sighting("absent")
    if event.needs and not _matches(sentence, event.needs):
        return Sighting("incomplete", hits[0][2])
    return max((_read_at(sentence, start, end, cue) for start, end, cue in hits), key=lambda s: s.rank)


def _read_at(sentence: str, start: int, end: int, cue: str) -> Sighting:
    if _attributive(sentence, start, end, cue):
        return Sighting("attributive", cue)
    before, after = _clause_around(sentence, start, end)
    negation = _nearest(_last_words(before, NEGATION_WORDS), after, lx.EVENT_NEGATIONS)
    if negation:
        return Sighting("negated", cue, negation)
    hedge = _nearest(before, after, lx.EVENT_HEDGES)
    if hedge:
        return Sighting("hedged", cue, hedge)
    details = _concrete_near(sentence, start, end)
    if not details:
        return Sighting("vague", cue)
    years = tuple(sorted({int(y) for y in _FOUR_DIGIT_YEAR.findall(_window(sentence, start, end))}))
    return Sighting("stated", cue, details[0], len(details), years)


def _nearest(before: str, after: str, kind: Sequence[str]) -> str:
    """The hedge or negation (``kind``) nearest the event's word: the last in the clause before it, else the
    first after it (hedges and negations are matched together, so 未来 is a hedge, not 未)."""
    cues = [*lx.EVENT_NEGATIONS, *lx.EVENT_HEDGES]
    found = [c for _, _, c in sorted(_matches(before, cues), reverse=True) if c in kind]
    found += [c for _, _, c in sorted(_matches(after, cues)) if c in kind]
    return found[0] if found else ""


def _last_words(text: str, n: int) -> str:
    """The last ``n`` words of a text (of a Chinese one, its last ``2n`` characters)."""
    if lx.is_zh(text):
        return text[-2 * n:]
    ws = list(_WORD.finditer(text))
    return text[ws[-n].start():] if len(ws) > n else text


def _clause_around(sentence: str, start: int, end: int) -> tuple[str, str]:
    """The clause before the event's word (from the last break, at most ``NEAR_WORDS`` words) and the two words
    after it (up to the next break): where a hedge or a negation governs it. Month names are blanked ("in May
    we acquired": a date, no hedge)."""
    text = _MONTH.sub(lambda m: " " * len(m.group(0)), sentence)
    head, tail = text[:start], text[end:]
    before = head[max((m.end() for m in _BREAK.finditer(head)), default=0):]
    if lx.is_zh(before):
        before = before[-20:]
    else:
        before = _last_words(before, NEAR_WORDS)
    stop = _BREAK.search(tail)
    tail = tail[:stop.start()] if stop else tail
    if lx.is_zh(tail[:6]):
        return before, tail[:6]
    ws = list(_WORD.finditer(tail))
    return before, tail[:ws[1].end()] if len(ws) > 1 else tail


def _attributive(sentence: str, start: int, end: int, cue: str) -> bool:
    """An English past participle of the event's verb describing the noun after it ("of acquired intangible
    assets", "Acquired product rights …", "the recalled products"): no event is stated."""
    if not cue.isascii() or not cue.endswith("ed") or " " in cue:
        return False
    prev = _WORD.findall(sentence[:start])
    nxt = _WORD.findall(sentence[end:])
    if not nxt or not nxt[0].islower() or nxt[0].lower() in _FUNCTION:
        return False
    return not prev or prev[-1].lower() in lx.EVENT_ATTRIBUTIVE_BEFORE


def _concrete_near(sentence: str, start: int, end: int) -> list[str]:
    """The concrete details within ``NEAR_WORDS`` words of the event's word: a name (the object), a date and an
    amount, the first of each kind found."""
    window = _window(sentence, start, end)
    if lx.is_zh(window):  # the object follows the verb: 收购了深圳市星河科技有限公司
        name = _zh_name(sentence[end:end + 30]) or _zh_name(window)
    else:
        name = _name_in(sentence, window)
    date = _MONTH.search(window) or _DATE.search(window)
    period = _matches(window, lx.EVENT_PERIOD_WORDS)
    amount = _AMOUNT.search(window)
    found = [name, date.group(0) if date else (period[0][2] if period else ""),
             amount.group(0) if amount else ""]
    return [d.strip() for d in found if d and d.strip()]


def _window(sentence: str, start: int, end: int) -> str:
    if lx.is_zh(sentence[max(0, start - 2):end + 2]):
        return sentence[max(0, start - 30):end + 30]
    before = list(_WORD.finditer(sentence[:start]))
    after = list(_WORD.finditer(sentence, end))
    lo = before[-NEAR_WORDS].start() if len(before) >= NEAR_WORDS else 0
    hi = after[NEAR_WORDS - 1].end() if len(after) >= NEAR_WORDS else len(sentence)
    return sentence[lo:hi]


def _zh_name(text: str) -> str:
    """A quoted name or a company's name in Chinese text."""
    m = _ZH_NAME.search(text)
    return (m.group(1) or m.group(0).lstrip("了的")) if m else ""


def _name_in(sentence: str, window: str) -> str:
    """The first name in the window: capitalised words that are not the sentence's first word, a month or a
    word that names nothing (``kb.core.lexicon.NOT_NAMES``)."""
    first = _WORD.search(sentence)
    offset = sentence.find(window)
    run: list[str] = []
    for m in _WORD.finditer(window):
        w = m.group(0)
        named = (w[:1].isupper() and (first is None or offset + m.start() != first.start())
                 and w.lower().strip("'’") not in lx.NOT_NAMES and w.lower() not in lx.MONTHS)
        if named:
            run.append(w)
        elif run:
            break
    return " ".join(run)


# ------------------------------------------------------------------------------------ per document


def sentences(text: str) -> list[str]:
    """A passage's sentences, Markdown headings left out; Chinese ones split at 。！？ too."""
    out = []
    for s in split_sentences(_HEADING_LINE.sub("", text)):
        out.extend(p.strip() for p in _ZH_SENTENCE_END.split(s) if p.strip())
    return out


def best_per_document(chunks: Sequence[RetrievedChunk], event: lx.EventWords, years: Set[int] = frozenset(),
                      periods: Mapping[int, Set[int]] | None = None) -> dict[int, Finding]:
    """Each document's best sentence for the event over its evidence: stated in a year the question asks (any
    when it asks none) first, then by verdict and the most concrete, then the better-ranked passage; documents
    where no sentence names it are left out. ``periods``: each document's report years, the year of an event
    its sentence does not date."""
    best: dict[int, Finding] = {}
    for ci, c in enumerate(chunks):
        for s in sentences(c.text):
            seen = read_sentence(s, event)
            if seen.verdict == "absent":
                continue
            when = (seen.years or tuple(sorted((periods or {}).get(c.doc_id, ())))) if seen.verdict == "stated" else ()
            found = Finding(c.doc_id, ci, s, seen, when, not years or not when or bool(set(when) & set(years)))
            old = best.get(c.doc_id)
            if old is None or _order(found) > _order(old):
                best[c.doc_id] = found
    return best


def _order(f: Finding) -> tuple[bool, tuple[int, int]]:
    return f.fits and f.sighting.verdict == "stated", f.sighting.rank


def period_years(plan: ScopePlan) -> dict[int, frozenset[int]]:
    """Each planned document's report years, from its period ("FY2023", "Q3 FY2023")."""
    return {s.doc_id: frozenset(int(y) for y in _FOUR_DIGIT_YEAR.findall(s.period)) for s in plan.sub_questions}


# ------------------------------------------------------------------------------------ reading the documents


def event_lexemes(event: lx.EventWords) -> tuple[list[str], list[str]]:
    """The full-text lexemes of the event's words and of its second words (``kb.core.text.tokenize``, as chunks
    are indexed)."""
    return (list(dict.fromkeys(t for w in event.words for t in tokenize(w))),
            list(dict.fromkeys(t for w in event.needs for t in tokenize(w))))


async def event_passages(pool: asyncpg.Pool, plan: ScopePlan, qvec: np.ndarray, asked: EventAsked,
                         evidence: Sequence[RetrievedChunk]) -> tuple[RetrievedChunk, ...]:
    """The evidence with each needed document's best passage for the event added (when the evidence does not
    already hold it): its chunks holding the event's words are read, nearest the question first, and the one
    whose sentence says most of the event (in a year the question asks) is kept."""
    words_lx, needs_lx = event_lexemes(asked.words)
    rows = await store.event_chunks(pool, plan.needed, words_lx, needs_lx, qvec, PER_DOCUMENT)
    found = [_chunk(r) for r in rows]
    best = best_per_document(found, asked.words, asked.years, period_years(plan))
    held: dict[int, str] = {}
    for c in evidence:
        held[c.doc_id] = f"{held.get(c.doc_id, '')} {' '.join(c.text.split())}"
    added = [found[f.chunk] for d, f in best.items() if f.sighting.verdict != "attributive"
             and " ".join(f.sentence.split()) not in held.get(d, "")]
    return (*evidence, *added)


def _chunk(r: asyncpg.Record) -> RetrievedChunk:
    page, sim = r["page"], float(r["sim"])
    pages = cited_span(page, r["page_end"], r["start_index"], r["end_index"])
    return RetrievedChunk(chunk_id=r["id"], doc_id=r["document_id"], doc_name=r["name"], node_id=r["node_id"],
                          section_path=r["heading_path"], text=r["text"], page=page, pages=pages, unit=r["unit"],
                          dense=round(sim, 4), bm25=0.0, fused=round(sim, 4), score=sim, source="event",
                          statement=r["statement"])


# ------------------------------------------------------------------------------------ the answer


def event_answer(question: str, asked: EventAsked, chunks: Sequence[RetrievedChunk], plan: ScopePlan) -> Answer:
    """Per routed document, whether its passages state the event: the lead names the documents that state it
    (in a year the question asks, when it asks one), or says it was not found when none does; then each stating
    document with its sentence, each that states it in another year, each that names it without stating it
    with its sentence and why, and the others in one line."""
    w, event, years = words(question), asked.words, asked.years
    doc_ids = list(dict.fromkeys([*plan.needed, *(c.doc_id for c in chunks)]))
    labels = _labels(doc_ids, chunks, plan, w)
    best = best_per_document(chunks, event, years, period_years(plan))
    what, what_a = (event.zh, event.zh) if w.lang == "zh" else (event.en, event.en_a)
    period = (w.event_period_zh if w.lang == "zh" else w.event_period).format(years=_years(years, w)) if years else ""
    stated = [d for d in doc_ids if d in best and best[d].sighting.verdict == "stated" and best[d].fits]
    elsewhen = [d for d in doc_ids if d in best and best[d].sighting.verdict == "stated" and not best[d].fits]
    mentioned = [d for d in doc_ids if d in best and best[d].sighting.verdict in MENTIONS]
    rest = [labels[d] for d in doc_ids if d not in {*stated, *elsewhen, *mentioned}]
    lines, cites = [], []
    for d in [*stated, *elsewhen, *mentioned]:
        f, c, marker = best[d], chunks[best[d].chunk], len(cites) + 1
        lines.append(_line(labels[d], f, marker, event, w, years))
        cites.append(CitationOut(marker=marker, doc_id=c.doc_id, doc_name=c.doc_name, node_id=c.node_id,
                                 section_path=c.section_path, pages=c.pages, text=c.text, unit=c.unit,
                                 chunk_id=c.chunk_id, quote=f.sentence))
    if rest:
        lines.append(w.event_absent.format(docs=_join(rest, w), event=what, period=period))
    if stated:
        lead = w.event_lead.format(docs=_join([labels[d] for d in stated], w), event=what_a, period=period,
                                   verb=w.event_states if len(stated) == 1 else w.event_state)
        if len(stated) == 1:  # one document states it: the lead quotes its sentence ("… recalled Harbor Select …")
            lines.pop(0)
            lead = w.event_lead_one.format(doc=labels[stated[0]], event=what_a, period=period, cite="[1]",
                                           text=" ".join(best[stated[0]].sentence.split())[:400])
        return Answer(text="\n".join([lead, *lines]), citations=tuple(cites), mode="extractive")
    lead = w.event_none.format(n=len(doc_ids), event=what_a, period=period)
    return Answer(text="\n".join([lead, *lines]), citations=tuple(cites), mode="not_found",
                  not_found=f"no document read states {event.en_a}{period if w.lang != 'zh' else ''}")


def _line(label: str, f: Finding, marker: int, event: lx.EventWords, w: Words, years: Set[int]) -> str:
    text = " ".join(f.sentence.split())
    text = text if len(text) <= 400 else text[:399].rstrip() + "…"
    s = f.sighting
    if s.verdict == "stated" and f.fits:
        return w.event_line.format(doc=label, text=text, cite=f"[{marker}]")
    if s.verdict == "stated":  # in another year than the one asked
        return w.event_other_year.format(doc=label, text=text, cite=f"[{marker}]", when=_years(f.when, w),
                                         asked=_years(years, w), event=event.zh if w.lang == "zh" else event.en_a)
    template = {"hedged": w.event_hedged, "negated": w.event_negated, "incomplete": w.event_incomplete,
                "vague": w.event_vague}[s.verdict]
    return template.format(doc=label, text=text, cite=f"[{marker}]", word=s.word, cue=s.detail,
                           event=event.zh if w.lang == "zh" else event.en_a,
                           needs=event.needs_zh if w.lang == "zh" else event.needs_en)


def _labels(doc_ids: Sequence[int], chunks: Sequence[RetrievedChunk], plan: ScopePlan, w: Words) -> dict[int, str]:
    """How the answer names each document: its company and period ("Cobalt Logistics (FY2021)"), else its name."""
    names = {c.doc_id: c.doc_name for c in chunks}
    out = {}
    for d in doc_ids:
        sub = plan.sub_question(d)
        name = names.get(d) or (sub.doc_name if sub else str(d))
        if sub is None or not sub.entity:
            out[d] = name
        else:
            out[d] = w.event_label.format(entity=sub.entity, period=sub.period) if sub.period else sub.entity
    if len(set(out.values())) < len(out):  # two documents of one company and period: their names tell them apart
        out = {d: f"{label} — {names.get(d, d)}" for d, label in out.items()}
    return out


def _years(years: Set[int] | Sequence[int], w: Words) -> str:
    return _join([str(y) for y in sorted(years)], w, "or")


def _join(items: Sequence[str], w: Words, last: str = "and") -> str:
    if w.lang == "zh" or len(items) < 2:
        return "、".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"
