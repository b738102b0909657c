"""Follow-up questions: a turn that leaves its subject unstated — the company ("And its net income?"), the period
("What about 2022?") or the measure ("How about Aurora?") — takes it from the earlier turns of the conversation.

Every earlier user turn is read with the question reader (``router.reading.read_question``) and resolved in order
against the turns before it; the question then takes from the nearest resolved turn what it does not state: its
companies, periods (or the year of a quarter named alone) and measures, and — when it reads no operation beyond a
look-up — the operation (a comparison or ranking unless it names its own companies, a change or trend only together with its
periods). Only a follow-up takes anything: a turn with a cue of the lexicon's ``FOLLOWUP_*`` lists ("and", "its",
"what about", 呢, 该公司, 同期 …) or a few words without a measure ("Aurora Pharma?"); a measure only when the turn
refers to one ("that figure") or has no words of its own that may name another ("What about the recall?"). A
question naming its own company, period and measure takes nothing; one asking over the collection ("which company
…") takes no companies.

The result holds the resolved typed question, the resolved text that routing and retrieval search for — the
question followed by its whole subject, "What about 2022? [Helios Robotics, net income, fiscal 2022]" — and what was
taken from which turn (the trace shows it).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from kb.core import lexicon as lx
from kb.core.measures import CONCEPT_BY_NAME, MEASURE_BY_NAME
from router.question import NO_MEASURE, Entities, MeasureRef, PeriodRef, Question
from router.reading import cues_in, measure_phrase, read_question, unplaced_words
from router.types import Turn

Part = Literal["entities", "periods", "measures", "operation"]
Source = Literal["user", "assistant"]

SHORT = 4
"""A turn of at most this many words (a Chinese word counted as two characters) that names no measure is a
follow-up without any cue word ("Aurora Pharma?", "In 2021?")."""
REPLY_CHARS = 600
"""How much of an answer is read for the companies it names (its lead names them)."""
TURN_CHARS = 400
"""How much of an earlier question is read (a question is short; a longer turn is pasted text). Measured with 500
companies: eight earlier turns of 400 characters are read in 0.16 s, ten of 8,000 took 2 s."""
TURNS = 8
"""How many earlier user turns are read, the latest ones."""
_WORD = re.compile(r"[a-z0-9]+")


class Inherited(msgspec.Struct, frozen=True):
    """One part of a follow-up taken from an earlier turn: what it is as the resolved text writes it (the operation
    by its name), and the user turn that stated it, counted back from the question (1: the previous question);
    ``source`` is "assistant" when the companies were named by the answer to that turn (to "which company …")."""

    part: Part
    value: str
    turns_back: int
    source: Source = "user"


class FollowUp(msgspec.Struct, frozen=True):
    """A question resolved against the conversation before it."""

    question: Question  # as resolved; its ``text`` is ``text``
    text: str  # the question, its subject written after it in brackets (the question alone: nothing taken)
    inherited: tuple[Inherited, ...] = ()
    own_subject: bool = False  # it names its own companies or asks over the collection

    @property
    def settled(self) -> bool:
        """Whether its text and reading stand for the question: something was taken, or the question names whom it
        is about. Otherwise a short question still borrows the previous turn's words (``router.state``)."""
        return bool(self.inherited) or self.own_subject


@dataclass(frozen=True)
class _Cues:
    opener: bool  # "And …", 那…
    ellipsis: bool  # "what about", 呢
    entity: bool  # "its", 该公司
    period: bool  # "that year", 同期
    measure: bool  # "that figure", 该指标


@dataclass(frozen=True)
class _Turn:
    """An earlier user turn as resolved: the part → (index of the user turn that stated it, who named it)."""

    text: str
    question: Question
    collection: bool  # it asks over the collection ("which company …")
    origin: Mapping[Part, tuple[int, Source]]
    reply: str = ""  # the answer given to it
    inherited: tuple[Inherited, ...] = ()


def _cues(text: str) -> _Cues:
    """Which follow-up cues a turn holds (Chinese words like 其他 that hold a reference character blanked first)."""
    for w in lx.FOLLOWUP_NOT:
        text = text.replace(w, " " * len(w))
    low = text.lower().lstrip(" \t\n\"'“‘(（[【-—,，.。:：")
    opener = any(low.startswith(c) if lx.is_zh(c) else re.match(rf"{re.escape(c)}\b", low) is not None
                 for c in lx.FOLLOWUP_OPENERS)
    return _Cues(opener=opener, ellipsis=bool(cues_in(text, lx.FOLLOWUP_ELLIPSIS)),
                 entity=bool(cues_in(text, lx.FOLLOWUP_ENTITY)), period=bool(cues_in(text, lx.FOLLOWUP_PERIOD)),
                 measure=bool(cues_in(text, lx.FOLLOWUP_MEASURE)))


@functools.cache
def _cue_words() -> tuple[frozenset[str], tuple[str, ...]]:
    """The English words and the Chinese cues of the follow-up lists (no words of a subject of their own)."""
    cues = (*lx.FOLLOWUP_OPENERS, *lx.FOLLOWUP_ELLIPSIS, *lx.FOLLOWUP_ENTITY, *lx.FOLLOWUP_PERIOD,
            *lx.FOLLOWUP_MEASURE)
    en = frozenset(w for c in cues if not lx.is_zh(c) for w in _WORD.findall(c))
    zh = tuple(sorted((c for c in cues if lx.is_zh(c)), key=len, reverse=True))
    return en, zh


def _own_words(text: str, companies: Mapping[str, Sequence[str]]) -> list[str]:
    """The turn's words that may name a measure (``router.reading.unplaced_words``) other than follow-up cues and
    quarter words ("the second quarter")."""
    en, zh = _cue_words()
    out = []
    for w in unplaced_words(text, companies):
        if lx.is_zh(w):
            for cue in zh:
                w = w.replace(cue, "")
            if len(w) >= 2:
                out.append(w)
        elif w not in en and w not in lx.QUARTER_WORDS and not lx.lemmas(w) & en:
            out.append(w)
    return out


def _size(text: str) -> int:
    return len(_WORD.findall(text.lower())) + len(lx.HAN.findall(text)) // 2


def _without_year(text: str, periods: Sequence[PeriodRef]) -> bool:
    """Quarters or spans named without a year ("the second quarter", "the first nine months": the reader takes
    the latest), not the latest asked for in words."""
    return all(p.year is None and p.relative in ("", "latest") for p in periods) \
        and not cues_in(text, lx.LATEST)


def _collection(text: str, q: Question) -> bool:
    return q.entities.scope != "named" and bool(cues_in(text, lx.COLLECTION))


def _origin_of(q: Question, collection: bool, index: int) -> dict[Part, tuple[int, Source]]:
    """What a turn states itself."""
    own: dict[Part, tuple[int, Source]] = {}
    if q.entities.scope == "named" or collection:
        own["entities"] = (index, "user")
    if q.periods:
        own["periods"] = (index, "user")
    if q.measures:
        own["measures"] = (index, "user")
    if q.operation not in (None, "lookup"):
        own["operation"] = (index, "user")
    return own


class _Resolver:
    """Resolves the turns of one conversation in order, each against the resolved turns before it."""

    def __init__(self, companies: Mapping[str, Sequence[str]]) -> None:
        self.companies = companies
        self.turns: list[_Turn] = []
        self._replies: dict[int, tuple[str, ...]] = {}

    def _reply_names(self, index: int) -> tuple[str, ...]:
        """The companies the answer to a turn names (read once)."""
        if index not in self._replies:
            reply = self.turns[index].reply[:REPLY_CHARS]
            self._replies[index] = read_question(reply, self.companies).entities.names if reply else ()
        return self._replies[index]

    def _entities(self, refers: bool) -> tuple[tuple[str, ...], int, Source] | None:
        """The companies of the nearest turn that names some; with a reference ("its"), those the answer to a
        turn names when the turn itself names none ("Which company …?" — "Bluefin Foods …"). A turn asking over
        the collection ends the search."""
        for i in reversed(range(len(self.turns))):
            t = self.turns[i]
            if t.question.entities.scope == "named":
                index, source = t.origin["entities"]
                return t.question.entities.names, index, source
            if refers and (names := self._reply_names(i)):
                return names, i, "assistant"
            if t.collection:
                return None
        return None

    def _nearest(self, part: Part) -> _Turn | None:
        return next((t for t in reversed(self.turns) if part in t.origin), None)

    def add(self, text: str, reply: str = "") -> tuple[_Turn, bool]:
        """Resolve a turn against those before it (and keep it); whether it names whom it is about."""
        own = read_question(text, self.companies)
        collection = _collection(text, own)
        index = len(self.turns)
        origin = _origin_of(own, collection, index)
        cues = _cues(text)
        named = own.entities.scope == "named"
        elliptic = cues.opener or cues.ellipsis or cues.period or cues.measure or (cues.entity and not named) \
            or (not own.measures and _size(text) <= SHORT)
        turn = _Turn(text=text, question=own, collection=collection, origin=origin, reply=reply)
        if self.turns and elliptic:
            turn = self._resolve(turn, cues)
        self.turns.append(turn)
        return turn, named or collection

    def _resolve(self, turn: _Turn, cues: _Cues) -> _Turn:
        q, origin, index = turn.question, dict(turn.origin), len(self.turns)
        taken: list[tuple[Part, int, Source]] = []
        entities, periods, measures = q.entities, q.periods, q.measures
        if "entities" not in origin and (found := self._entities(cues.entity)) is not None:
            names, at, source = found
            entities, origin["entities"] = Entities("named", names), (at, source)
            taken.append(("entities", at, source))
        if not periods and (src := self._nearest("periods")) is not None:
            periods, origin["periods"] = src.question.periods, src.origin["periods"]
            taken.append(("periods", *src.origin["periods"]))
        elif periods and _without_year(turn.text, periods):  # "And the second quarter?", "the first nine months"
            src = next((t for t in reversed(self.turns) if any(p.year for p in t.question.periods)), None)
            if src is not None:
                year = max(p.year for p in src.question.periods if p.year)
                periods = tuple(msgspec.structs.replace(p, year=year, relative="") for p in periods)
                taken.append(("periods", *src.origin["periods"]))
        if not measures and (cues.measure or not _own_words(turn.text, self.companies)) \
                and (src := self._nearest("measures")) is not None:
            measures, origin["measures"] = src.question.measures, src.origin["measures"]
            taken.append(("measures", *src.origin["measures"]))
        parts = {p for p, _, _ in taken}
        fields: dict[str, object] = {}
        if q.operation in (None, "lookup") and (src := self._nearest("operation")) is not None:
            s = src.question
            over_companies = s.operation in ("compare", "max", "min", "rank") and s.over != "periods"
            # over companies: taken unless the question names its own; over periods: only with the periods
            carried = q.entities.scope != "named" if over_companies else "periods" in parts and not q.periods
            if s.operation in lx.FOLLOWUP_OPERATIONS and measures and carried:
                fields = {k: getattr(s, k) for k in ("operation", "change", "sign", "order", "over", "average",
                                                     "limit")}
                origin["operation"] = src.origin["operation"]
                taken.append(("operation", *src.origin["operation"]))
        if not taken:
            return turn
        operation = fields.pop("operation", q.operation or ("lookup" if measures else None))
        unknown = tuple(u for u in q.unknown if u != NO_MEASURE) if measures else q.unknown
        resolved = msgspec.structs.replace(q, entities=entities, periods=periods, measures=measures,
                                           operation=operation, unknown=unknown, **fields)
        texts = {i: t.text for i, t in enumerate(self.turns)} | {index: turn.text}
        written = {part: self._written(part, resolved, texts[origin[part][0]]) for part in origin}
        inherited = tuple(Inherited(part, written[part], index - at, source) for part, at, source in taken)
        shown = {"entities", "measures", "periods"} | {p for p, _, _ in taken}  # an operation only when taken
        subject = [written[p] for p in ("entities", "operation", "measures", "periods") if p in written and p in shown]
        text = _text(turn.text, subject, resolved.lang)
        return _Turn(text=text, question=msgspec.structs.replace(resolved, text=text), collection=turn.collection,
                     origin=origin, reply=turn.reply, inherited=inherited)

    @staticmethod
    def _written(part: Part, q: Question, named_in: str) -> str:
        """A part as the resolved text writes it: companies as the collection names them, a measure by the words
        of the turn that named it (``named_in``), periods in the question's language, an operation by its word
        (``kb.core.lexicon.FOLLOWUP_OPERATIONS``)."""
        if part == "entities":
            return ", ".join(q.entities.names)
        if part == "periods":
            return ", ".join(period_words(p, q.lang) for p in q.periods)
        if part == "measures":
            return ", ".join(measure_phrase(named_in, m) or measure_words(m, q.lang) for m in q.measures)
        words = lx.FOLLOWUP_OPERATIONS.get(q.operation or "")
        return "" if words is None else words[1] if q.lang == "zh" else words[0]


def _text(question: str, parts: Sequence[str], lang: str) -> str:
    parts = [p for p in parts if p]
    if not parts:
        return question
    return f"{question.rstrip()}[{'，'.join(parts)}]" if lang == "zh" else f"{question.rstrip()} [{', '.join(parts)}]"


def period_words(p: PeriodRef, lang: str = "en") -> str:
    """A period as a question writes it (``kb.core.lexicon.FOLLOWUP_PERIODS``): "fiscal 2023", "Q3 2023",
    "first nine months of 2023", "latest"; 2023年第三季度 …"""
    words = lx.FOLLOWUP_PERIODS["zh" if lang == "zh" else "en"]
    quarter = lx.ZH_QUARTER_NUMERALS[p.quarter - 1] if lang == "zh" and 1 <= p.quarter <= 4 else p.quarter
    span = words.get(str(p.months), "")
    if p.relative == "last_n":
        return words["last_n"].format(n=p.n or 3)
    if p.relative == "latest":
        return words["latest_span"].format(span=span) if p.months != 12 and span else words["latest"]
    if p.quarter:
        return words["quarter" if p.year else "quarter_alone"].format(year=p.year, quarter=quarter)
    if p.months != 12 and span:
        return words["span"].format(span=span, year=p.year)
    return words["year"].format(year=p.year)


def measure_words(m: MeasureRef, lang: str = "en") -> str:
    """A measure as a question names it when no earlier turn's words do: the lexicon's first word for it in the
    language, else its printed label or name."""
    synonyms = row.names if (row := MEASURE_BY_NAME.get(m.name)) else ()
    word = next((w for w in synonyms if lx.is_zh(w) == (lang == "zh")), "")
    if word:
        return word
    concept = CONCEPT_BY_NAME.get(m.name)
    return concept.label.lower() if concept is not None and m.kind == "concept" else m.name.replace("_", " ")


def resolve(question: str, history: Sequence[Turn],
            companies: Sequence[str] | Mapping[str, Sequence[str]] = ()) -> FollowUp:
    """The question resolved against the latest ``TURNS`` user turns of ``history`` (and the answers to them, for the
    companies an answer to "which company …" names); ``companies`` as ``read_question`` takes them."""
    names = companies if isinstance(companies, Mapping) else {c: () for c in companies}
    resolver = _Resolver(names)
    asked = [i for i, t in enumerate(history) if t.role == "user"][-TURNS:]
    for i in asked:
        nxt = history[i + 1] if i + 1 < len(history) else None
        resolver.add(history[i].content[:TURN_CHARS], nxt.content if nxt is not None and nxt.role == "assistant" else "")
    turn, own_subject = resolver.add(question.strip())
    return FollowUp(question=turn.question, text=turn.text, inherited=turn.inherited, own_subject=own_subject)
