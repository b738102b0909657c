"""Reading a question into the typed question (``router.question.Question``): measures by their words (the
lexicon, the vocabulary's printed labels, printed line items), companies by their distinctive words or aliases,
periods, and the operation from the cue words of ``kb.core.lexicon``; what it cannot place goes to ``unknown``.
"""

from __future__ import annotations

import contextvars
import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import msgspec

from kb.core import lexicon as lx
from kb.core.measures import CONCEPT_BY_NAME, METRICS
from kb.core.periods import YEAR, Form, Mention, find_periods, names_period, stated_months, states_range
from kb.core.vocab import company_core, pinyin_names, question_concept, zh_short
from router.calc import catalog_formula, concepts, quotient, quotient_name
from router.measures import measure_names
from router.metrics import definitions, named_formula
from router.question import (
    NO_MEASURE,
    OPERATIONS,
    Entities,
    MeasureRef,
    PeriodRef,
    Question,
    Range,
    unsure_of,
)
from router.types import Condition

_WORD = re.compile(r"[a-z0-9]+(?:[.&'][a-z0-9]+)*|%|\$")
_NUMBER = re.compile(r"(?i)(?<![a-z0-9.])(?P<cur>\$|us\$|usd|rmb|¥|￥|cny)?\s*(?P<num>-?\d(?:[\d,]*\d)?(?:\.\d+)?)(?![a-z]*\d)"
                     r"\s*(?:in\s+)?(?P<scale>trillion|billions?|millions?|thousands?|bn|mn|mm|tn|[kmb](?![a-z])|万亿|千亿|"
                     r"百亿|十亿|亿|千万|百万|十万|万|千)?\s*(?P<unit>%|percent|个百分点|元|美元|港元)?")
_MONTH_BEFORE = re.compile(rf"(?i)\b(?:{'|'.join(sorted(lx.MONTHS, key=len, reverse=True))})\.?\s*$")
_MASKED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("masked_cues", default=frozenset())
_USED: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("used_cues", default=None)


@contextmanager
def cues(masked: Iterable[str] = ()) -> Iterator[set[str]]:
    """Within the block, questions are read without the ``masked`` cue words and measure phrases; the set
    yielded collects every cue and phrase that matched (``kb bench parse``: which wording a question relies on,
    and a reading without a family's own wording)."""
    used: set[str] = set()
    t1, t2 = _MASKED.set(frozenset(masked)), _USED.set(used)
    try:
        yield used
    finally:
        _MASKED.reset(t1)
        _USED.reset(t2)


@dataclass
class _Reading:
    """The question as words with their lemmas, and which character spans are taken (by a measure, a company or
    a bound: no cue is read inside them)."""

    raw: str
    words: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, lower word)
    text: str = ""  # the question as written, where its length is raw's (capitals of pinyin names)
    taken: list[tuple[int, int]] = field(default_factory=list)
    single: list[tuple[int, int, MeasureRef]] = field(default_factory=list)  # measures named by one English word

    @classmethod
    def of(cls, text: str) -> _Reading:
        low = text.lower().replace("’", "'").replace("‘", "'")
        low = re.sub(r"\((?:or )?(?:decrease|increase|loss|deficit)\)", lambda m: " " * len(m.group(0)), low)
        low = re.sub(r"(?<=[a-z0-9])'s\b", "  ", low)  # possessives: "apple's" → "apple"
        # "loss per Class A share", "earnings per common share": per share
        low = re.sub(r"(?<=\bper )(?:class [a-c] |common |ordinary )+(?=shares?\b)", lambda m: " " * len(m.group(0)),
                     low)
        return cls(raw=low, words=[(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(low)],
                   text=text if len(text) == len(low) else "")

    def free(self, a: int, b: int) -> bool:
        return not any(x < b and a < y for x, y in self.taken)

    def masked(self) -> str:
        """The text with taken spans blanked (amounts are read there: "3M" is a company, not three million)."""
        chars = list(self.raw)
        for a, b in self.taken:
            chars[a:b] = " " * (b - a)
        return "".join(chars)

    def find(self, cue: str) -> list[tuple[int, int]]:
        """Spans where ``cue`` stands outside taken spans: a Chinese or symbol cue as written, an English cue as a
        run of words each matching the cue's word or one of its lemmas."""
        if cue in _MASKED.get():
            return []
        spans = self._find(cue)
        used = _USED.get()
        if spans and used is not None:
            used.add(cue)
        return spans

    def _find(self, cue: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        if lx.is_zh(cue) or not any(ch.isalnum() for ch in cue):
            start = self.raw.find(cue)
            while start >= 0:
                if self.free(start, start + len(cue)):
                    spans.append((start, start + len(cue)))
                start = self.raw.find(cue, start + 1)
            return spans
        parts = _WORD.findall(cue.lower())
        if not parts:
            return spans
        for i in range(len(self.words) - len(parts) + 1):
            run = self.words[i : i + len(parts)]
            if all(p == w or p in lx.lemmas(w) for p, (_, _, w) in zip(parts, run, strict=True)):
                a, b = run[0][0], run[-1][1]
                if self.free(a, b):
                    spans.append((a, b))
        return spans

    def any(self, cues: Iterable[str]) -> list[str]:
        return [c for c in cues if self.find(c)]

    def take(self, cues: Iterable[str]) -> None:
        for c in cues:
            self.taken.extend(self.find(c))


# ---------------------------------------------------------------------------- measures


def _measure_table() -> list[tuple[str, MeasureRef]]:
    """Every phrase that names a measure, longest first: ratio and metric words, the lexicon's synonyms, the
    vocabulary's printed labels, then printed lines outside the vocabulary (Chinese CAS labels, common US GAAP
    lines)."""
    table = measure_names()
    for alias, label in lx.LINE_ALIASES.items():
        table.setdefault(alias, MeasureRef(label, "line"))
    for label in (*lx.ZH_LINE_ITEMS, *lx.EN_LINE_ITEMS):
        table.setdefault(label, MeasureRef(label, "line"))
    known = {lx.lemma_words(phrase) for phrase in table if not lx.is_zh(phrase)}
    for english in lx.ZH_LINE_ENGLISH.values():  # the English of Chinese lines (found in Chinese reports too),
        for name in english:  # unless a measure is named so already ("research and development expenses")
            if lx.lemma_words(name) not in known:
                table.setdefault(name, MeasureRef(name, "line"))
    return sorted(table.items(), key=lambda kv: -len(kv[0]))


_MEASURES = _measure_table()
MEASURE_PHRASES = frozenset(phrase for phrase, _ in _MEASURES)
"""Every phrase that names a measure (the vocabulary, apart from the operation and period words)."""


def _metric_terms() -> dict[str, frozenset[str]]:
    """Each ratio and metric → the measures its formula reads (named beside it, they are its wording)."""
    return {m.name: frozenset(concepts(catalog_formula(m))) for m in METRICS}


_TERMS = _metric_terms()
_MARGINS = {m: name for m in CONCEPT_BY_NAME for name in (x.name for x in METRICS
                                                          if x.formula == f"v({m}) / v(revenue) * 100")}
"""A measure → the catalogue's margin of it over revenue ("net_income" → "net_margin")."""


@functools.lru_cache(maxsize=100_000)
def _first_word(phrase: str) -> str:
    """What must stand in a question for a phrase to be looked for: its first word (a Chinese phrase: itself)."""
    return phrase if lx.is_zh(phrase) else next(iter(_WORD.findall(phrase.lower())), "")


def _measures(r: _Reading, line_items: Sequence[str]) -> list[MeasureRef]:
    """The measures a question names, longest phrase first, each span taken once; a generic word ("cash")
    beside a fuller measure is part of that measure's wording."""
    found: list[tuple[int, int, MeasureRef]] = []
    extra = [(li.lower(), MeasureRef(li, "line")) for li in line_items]
    words = {w for *_, w in r.words} | {lemma for *_, w in r.words for lemma in lx.lemmas(w)}
    for phrase, ref in sorted([*_MEASURES, *extra], key=lambda kv: -len(kv[0])) if extra else _MEASURES:
        cue = _first_word(phrase)
        if (cue not in r.raw) if lx.is_zh(phrase) or not cue else (cue not in words):
            continue  # a set look-up per phrase, not a scan of the question
        for a, b in r.find(phrase):
            if r.free(a, b):
                r.taken.append((a, b))
                found.append((a, b, ref))
    found = [(a, b, _margin_of(r, b, ref)) for a, b, ref in found]
    if any(ref.name == "eps_basic" for *_, ref in found) and r.find("diluted"):
        found = [(a, b, MeasureRef("eps_diluted") if ref.name == "eps_basic" else ref) for a, b, ref in found]
    found.sort(key=lambda x: x[0])
    if len(found) > 1:
        found = [f for f in found if r.raw[f[0]:f[1]] not in lx.WEAK_MEASURE_WORDS] or found
    found = [f for f in found if len(_WORD.findall(r.raw[f[0]:f[1]])) > 1
             or _next_word(r, f[1]) not in lx.NOT_THE_MEASURE_AFTER]  # "debt structure", "revenue recognition"
    if {"cash_begin", "cash_end"} & {ref.name for *_, ref in found}:
        found = [f for f in found if f[2].name != "cash"]
    inputs = set().union(*(_TERMS.get(ref.name, frozenset()) for *_, ref in found if ref.kind == "metric"))
    found = [f for f in found if not (f[2].kind == "concept" and f[2].name in inputs)] or found
    r.single = [f for f in found if len(_WORD.findall(r.raw[f[0]:f[1]])) == 1 and not lx.is_zh(r.raw[f[0]:f[1]])]
    return list({ref.name: ref for *_, ref in reversed(found)}.values())[::-1]


_OWNER = re.compile(r"\b([A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})['’]s\b")


def _unknown_owner(text: str, r: _Reading) -> str:
    """A name the question writes as an owner ("Pepsico's operating income") that is no company of the
    collection, no measure and no generic word: the figure asked is of a company the collection does not hold."""
    for m in _OWNER.finditer(text[: len(r.raw)]):
        name = m.group(1)
        words = [w for w in name.lower().split() if w not in _GENERIC and w not in lx.STOP_WORDS]
        if not words or not r.free(m.start(1), m.end(1)) or any(w.isupper() for w in name.split()) and len(name) <= 6:
            continue  # a company read, a generic word ("Company's"), an acronym measure ("EBITDA's")
        return name
    return ""


def _share_of_first(text: str, first: MeasureRef) -> bool:
    """Is the first measure named the whole a share is taken of ("what percentage of revenue was operating
    income", "share of total assets held as cash") — not the part ("operating income as a percentage of
    revenue")?"""
    phrase = measure_phrase(text, first)
    return bool(phrase) and re.search(rf"(?i)(?<!as a )(?<!as an )\b(?:percentage|percent|share|proportion|fraction)\s+"
                                      rf"of\s+(?:(?:the|its|their|total)\s+)?{re.escape(phrase)}", text) is not None


def _cash_of(r: _Reading, measures: list[MeasureRef]) -> list[MeasureRef]:
    """"cash" with an activity word within ten words after it ("burned the most cash in its operations") is
    that activity's cash flow (``kb.core.lexicon.CASH_OF``), not the cash balance."""
    if MeasureRef("cash") not in measures:
        return measures
    for _, b, ref in r.single:
        if ref != MeasureRef("cash"):
            continue
        clause = re.split(r"[,;:?]|\.(?!\s*[a-z])", r.raw[b:], maxsplit=1)[0]  # within its clause ("Co." is
        # no end), ten words at most
        after = [w for s, _, w in r.words if b <= s < b + len(clause)][:10]
        flow = next((lx.CASH_OF[w] for w in after if w in lx.CASH_OF), None)
        if flow is not None:
            return [MeasureRef(flow) if m == MeasureRef("cash") else m for m in measures]
    return measures


def _modifier(r: _Reading, a: int, b: int, labels: frozenset[str] = frozenset()) -> str:
    """The phrase a one-word measure makes with a word beside it that nothing of the question accounts for
    ("unearned revenue", "debt extinguishment", "equity compensation"): it may name another measure; "" when
    the words beside it are cues, periods, companies, other measures, function words, words that leave the
    measure what it is (``kb.core.lexicon.MEASURE_HEADS``) or words of a group's label."""
    en, _ = _cue_words()
    word = r.raw[a:b]
    before = next((x for x in reversed(r.words) if x[1] <= a), None)
    after = next((x for x in r.words if x[0] >= b), None)
    for x, phrase in ((before, lambda w: f"{w} {word}"), (after, lambda w: f"{word} {w}")):
        if x is None or r.raw[min(x[1], b):max(x[0], a)].strip(" -") or not r.free(x[0], x[1]):
            continue
        w = x[2]
        if w in en or lx.lemmas(w) & en or len(w) < 3 or any(ch.isdigit() for ch in w) or w in lx.MONTHS \
                or w in lx.MEASURE_HEADS or w in labels or (w.endswith(("est", "er")) and lx.adjective_base(w)):
            continue
        return phrase(w)
    return ""


_LISTED = re.compile(r"(?i)\b((?:[a-z&-]+ ){0,3}[a-z&-]+), ((?:[a-z&-]+ ){0,3}[a-z&-]+)(?:, ((?:[a-z&-]+ ){0,3}"
                     r"[a-z&-]+))?,? (?:and|or) ((?:[a-z&-]+ ){0,3}[a-z&-]+)")
_LIST_LEAD = re.compile(r"(?i)^(?:(?:among|between|of|the|from|in|which|whether|its|their)\s+)+")


def _stem_concept(item: str) -> str:
    """The vocabulary measure a list item names, its words' stems compared with the measure's names
    ("operations activities" → operating activities → cfo)."""
    found = question_concept(item)
    if found:
        return found
    stems = tuple(w[:5] for w in re.findall(r"[a-z]+", item.lower()))
    for c in CONCEPT_BY_NAME.values():
        for phrase in (*c.asked, *c.printed, c.label):
            if tuple(w[:5] for w in re.findall(r"[a-z]+", phrase.lower())) == stems:
                return c.name
    return ""


def listed_measures(text: str) -> list[MeasureRef]:
    """The vocabulary measures a list in the question names ("operations, investing, and financing activities":
    the last item's head noun applies to each), when it names two or more."""
    m = _LISTED.search(text)
    if m is None:
        return []
    items = [_LIST_LEAD.sub("", g.strip()) for g in m.groups() if g]
    head = items[-1].split()[-1] if len(items[-1].split()) > 1 else ""
    out = []
    for item in items:
        concept = _stem_concept(item) or (_stem_concept(f"{item} {head}") if head else "")
        if not concept:
            return []
        out.append(concept)
    return [MeasureRef(c) for c in dict.fromkeys(out)] if len(set(out)) >= 2 else []


def measure_phrase(text: str, ref: MeasureRef) -> str:
    """The words of ``text`` that name the measure ``ref`` (its longest phrase in the measure table), or ""."""
    r = _Reading.of(text)
    return next((phrase for phrase, found in _MEASURES if found == ref and r._find(phrase)), "")


def cues_in(text: str, cues: Iterable[str]) -> list[str]:
    """The cues of a list that stand in a text, matched as the reader matches cue words (English by lemma, Chinese
    as written)."""
    r = _Reading.of(text)
    return [c for c in cues if r._find(c)]


def _next_word(r: _Reading, end: int) -> str:
    return next((w for a, _, w in r.words if a >= end), "")


_MARGIN_AFTER = re.compile(rf"\s*(?:%\s*)?(?:{'|'.join(lx.MARGIN_WORDS)})\b")


def _margin_of(r: _Reading, end: int, ref: MeasureRef) -> MeasureRef:
    """"operating income % margin", "EBITDA margin": a measure followed by a margin word is that measure over
    revenue, in percent (a metric with a margin of its own in the catalogue: that one)."""
    if not _MARGIN_AFTER.match(r.raw, end):
        return ref
    if ref.kind == "metric" and f"{ref.name}_margin" in _TERMS:
        return MeasureRef(f"{ref.name}_margin", "metric")
    if ref.kind == "concept" and ref.name != "revenue":
        if (metric := _MARGINS.get(ref.name)) is not None:  # "operating income % margin": the operating margin
            return MeasureRef(metric, "metric")
        return MeasureRef(quotient_name(ref.name, "revenue", True), "formula")
    return ref


# ---------------------------------------------------------------------------- companies

_GENERIC = frozenset({"general", "american", "first", "united", "national", "global", "international", "broad",
                      "street", "group", "holdings", "holding", "industries", "technologies", "technology",
                      "systems", "communications", "financial", "capital", "energy", "resources", "new", "the",
                      "company", "corporation", "enterprise", "enterprises", "ventures", "partners", "realty",
                      "bank", "trust", "services", "solutions", "products", "brands", "china", "us", "usa",
                      "clean", "digital", "better", "home", "best", "edible", "grant", "cano", *lx.STOP_WORDS})
_LEGAL = frozenset({"inc", "corp", "corporation", "co", "company", "ltd", "limited", "plc", "llc", "lp", "holdings",
                    "holding", "group", "the", "n.v", "s.a", "ag", "se", "sa", "nv"})


_ZH_LEGAL = frozenset({"股份", "集团", "控股", "公司", "有限", "科技"})
"""Words that follow a Chinese company's short name as part of its name ("洋河股份", "华友钴业集团")."""


def _zh_forms(core: str) -> list[str]:
    stripped = zh_short(core)
    forms = [core, stripped, stripped[:4]]
    if len(stripped) >= 3:
        forms += [stripped[:3]]
    forms += [stripped[:2] + "股份", stripped[:2] + "集团", stripped[:2]]
    return [f for f in dict.fromkeys(forms) if len(f) >= 2]


@functools.lru_cache(maxsize=200_000)
def _company_entry(name: str, aliases: tuple[str, ...]) -> tuple[str, tuple[tuple[str, str, bool], ...]]:
    """(the company's key, its forms each with what must stand in a question for it to be looked for — the
    form's first word, or the Chinese form itself — and whether it is the pinyin of a Chinese name, found only
    written with a capital: "Yanghe") — read once per name, not per question."""
    forms = [(f, False) for f in _company_forms(name, aliases)]
    forms += [(p, True) for spelling in (name, *aliases) for p in pinyin_names(spelling)]
    return company_core(name) or name, tuple((f, f if lx.is_zh(f) else next(iter(_WORD.findall(f)), f), latin)
                                             for f, latin in dict.fromkeys(forms))


def _company_forms(name: str, aliases: Sequence[str] = ()) -> list[str]:
    """How a question may write a company, most specific first: its aliases (tickers, short names the
    collection records), its name as written, its core name, its first distinctive word (or two words when the
    first is generic); Chinese: the core name without its place and the short forms a 简称 takes."""
    forms = [a.lower() for a in aliases]
    for spelling in (name, *aliases):  # a renamed company is written by any of its names
        core = company_core(spelling)
        written = " ".join(_WORD.findall(spelling.lower()))
        if lx.is_zh(core):
            forms += [written, *_zh_forms(core)]
            continue
        forms += [written, core]
        words = core.split()
        if words:
            first = words[0]
            forms.append(first if first not in _GENERIC and len(first) >= 3 else " ".join(words[:2]))
    return [f for f in dict.fromkeys(forms) if f]


def _extend(r: _Reading, span: tuple[int, int], name: str) -> tuple[int, int]:
    """A company's span grown over the words of its written name that follow ("Arena" → "Arena Group")."""
    own = set(_WORD.findall(name.lower())) | _LEGAL
    a, b = span
    if lx.is_zh(r.raw[a:b]):  # "洋河" of 洋河股份: the characters of the name that follow ("股份") are the name's
        while b < len(r.raw) and lx.is_zh(r.raw[b]) and (r.raw[b - 1:b + 1] in name or r.raw[b:b + 2] in _ZH_LEGAL):
            b += 2 if r.raw[b:b + 2] in _ZH_LEGAL else 1
        return a, b
    for s, e, w in r.words:
        if s >= b and r.raw[b:s].strip(" ,.") == "" and w in own:
            b = e
        elif s >= b:
            break
    return a, b


def _companies(r: _Reading, companies: Mapping[str, Sequence[str]],
               entities: bool = False) -> tuple[list[str], list[str]]:
    """The companies a question names (as the collection spells them), and what it writes that fits several.
    ``entities``: the names are distinct companies already (the catalog's, one per entity: two the metadata keeps
    apart may share a name but for legal form); else spellings of one company count once."""
    hits: dict[str, list[tuple[int, int]]] = {}
    seen: set[str] = set()
    words = {w for *_, w in r.words}
    for name, aliases in companies.items():
        key, forms = _company_entry(name, tuple(aliases))
        if entities:
            key = name
        if key in seen:
            continue
        seen.add(key)
        for form, cue, latin in forms:
            if (cue not in r.raw) if lx.is_zh(form) else (cue not in words):
                continue  # a set look-up per form: a collection of 10,000 companies costs no scan per name
            spans = r._find(form)  # the collection's names: data, not wording (never masked)
            if latin:  # pinyin names a company only as a proper noun ("Yanghe's", not "yanghe")
                spans = [(a, b) for a, b in spans if r.text[a:a + 1].isupper()]
            if spans:
                hits[name] = [_extend(r, s, name) for s in spans]
                break
    owners: dict[tuple[int, int], list[str]] = {}
    for name, spans in hits.items():
        for s in spans:
            owners.setdefault(s, []).append(name)
    for (a, b), names in owners.items():  # one of them written out as the question writes it ("Orion Holdings")
        exact = [n for n in names if " ".join(_WORD.findall(n.lower())) == " ".join(_WORD.findall(r.raw[a:b]))]
        if len(names) > 1 and len(exact) == 1:
            for n in names:
                if n != exact[0]:
                    hits[n] = [sp for sp in hits[n] if sp != (a, b)]
            names[:] = exact
    hits = {n: spans for n, spans in hits.items() if spans}
    ambiguous = sorted({r.raw[a:b] for (a, b), names in owners.items() if len(names) > 1})
    inside = {n for n, spans in hits.items() for s in spans for m, other in hits.items() if m != n
              for o in other if o[0] <= s[0] and s[1] <= o[1] and o != s}
    for name in inside:  # "华友" inside "浙江华友钴业" named by a longer form: one company, not two
        hits.pop(name, None)
    for spans in hits.values():
        r.taken.extend(spans)
    return sorted(hits, key=lambda n: min(a for a, _ in hits[n])), ambiguous


# ---------------------------------------------------------------------------- amounts, ranges, bounds


def _amounts(text: str) -> list[tuple[int, int, float]]:
    """Amounts in a text: (start, end, value in base units); years are not amounts, "zero" and 零 are 0. A scale
    written once in a text ("over 100,000 and below 1,000,000 in thousands") applies to its amounts written
    without one."""
    found = _scaled_amounts(text)
    scales = {scale for *_, scale in found if scale != 1.0}
    if len(scales) == 1:
        (scale,) = scales
        return [(a, b, v * scale if s == 1.0 and v else v) for a, b, v, s in found]
    return [(a, b, v) for a, b, v, _ in found]


def _scaled_amounts(text: str) -> list[tuple[int, int, float, float]]:
    text = re.sub(r"(?i)\bzero\b|零", lambda m: "0".ljust(len(m.group(0))), text)
    out = []
    for m in _NUMBER.finditer(text):
        num = m.group("num")
        if re.fullmatch(YEAR, num) and not (m.group("cur") or m.group("scale") or m.group("unit")):
            continue
        nxt, prev = text[m.end("num"):m.end("num") + 1], text[m.start("num") - 1:m.start("num")]
        if (nxt and nxt in "年季月日号") or (prev and prev in "第") or _MONTH_BEFORE.search(text, 0, m.start("num")):
            continue
        value = float(num.replace(",", ""))
        word = (m.group("scale") or "").lower()
        scale = lx.SCALES.get(word, lx.SCALES.get(word.rstrip("s"), 1.0)) if word else 1.0
        out.append((m.start("num") - len(m.group("cur") or ""), m.end(), value * scale, scale))
    return out


def stated_amounts(text: str) -> list[str]:
    """The amounts a text states as money, a share or a scaled figure ("$1.2 billion", "10%", "0.2元", "1,000万",
    "1,000,000"): a bare small number ("10-K", "Tier 1", "S&P 500") or a year is not one."""
    text = re.sub(r"(?i)\bzero\b|零", lambda m: "0".ljust(len(m.group(0))), text)  # "above zero": a bound at 0
    out = []
    for m in _NUMBER.finditer(text):
        num = m.group("num")
        if re.fullmatch(YEAR, num) and not (m.group("cur") or m.group("scale") or m.group("unit")):
            continue
        if _MONTH_BEFORE.search(text, 0, m.start("num")) or re.match(r"\s*(?:[-‐]?\s*(?:months?|weeks?|days?|quarters?|"
                                                                      r"years?|decimals?|[kq]\b))|[年季月日号]",
                                                                      text[m.end("num"):]):
            continue
        scale = (m.group("scale") or "").lower()
        if scale in ("k", "m", "b") and not m.group("cur") and not m.group(0)[m.end("num") - m.start():].startswith(" "):
            continue  # "3M", "5G": a name, not three million
        if m.group("cur") or scale or m.group("unit") or "," in num or float(num.replace(",", "")) == 0:
            out.append(m.group(0).strip())
    return out


def _scale_asked(masked: str) -> str:
    """The unit a question asks its figures in, from a scale word that stands apart from any amount ("expressed in
    millions", "$ in billions", "多少亿元"); "" when none does."""
    low = masked.lower()
    for m in re.finditer(r"(?i)\b(thousands|millions|billions|bn|mn)\b|(?<![\d.,\s零一二两三四五六七八九十百千万])\s*"
                         r"(万元|亿元|百万元|千元)", low):
        before = low[: m.start()].rstrip(" $usd")
        if re.search(r"\d$", before):
            continue  # "1.2 billions", "10亿元": an amount's scale, not the unit asked
        word = (m.group(1) or m.group(2)).lower()
        scale = lx.SCALES.get(word, 0.0)
        if scale == 1e4:
            return "万"
        if scale == 1e8:
            return "亿"
        if (name := lx.SCALE_NAMES.get(scale, ("", ""))[0]):
            return name
    return ""


def _bound_word(before: str, after: str) -> str | None:
    """The bound an amount is stated with: a word right before it ("above", ">", 高于; the longest ending there: 不低于
    before 低于), else a word right after it ("or more", "and below", 以上, 以下), else the nearest word before it."""
    tail = before.rstrip()[-30:]
    head = after.strip()[:10]
    adjacent: tuple[int, str] | None = None
    nearest: tuple[int, int, str] | None = None
    for op, words in lx.BOUND_WORDS.items():
        for w in words:
            if w.startswith(("or ", "and ")):
                continue
            if tail.endswith(w) and (adjacent is None or len(w) > adjacent[0]):
                adjacent = (len(w), op)
            i = tail.rfind(w)
            if i >= 0 and (lx.is_zh(w) or not tail[i + len(w):i + len(w) + 1].isalpha()):
                cand = (i + len(w), len(w), op)
                nearest = max(nearest, cand) if nearest else cand
    if adjacent:
        return adjacent[1]
    for op, words in lx.BOUND_WORDS.items():
        if any(head.startswith(w) for w in words if lx.is_zh(w) or w.startswith(("or ", "and "))):
            return op
    return nearest[2] if nearest else None


_INCLUSIVE = re.compile(r"(?i)^\s*(?:元|美元)?\s*(?:[(（]\s*含\s*[)）]|inclusive|含两端|\(inclusive\))")


def _between(text: str) -> str:
    """The words between two amounts without currency words and inclusive marks ("元（含）至" → "至")."""
    return re.sub(r"(?i)[(（]\s*含\s*[)）]|inclusive|元|美元|\$", "", text).strip().lower()


def _bounds_in(spec: str) -> list[tuple[str, float]]:
    """Every bound a spec states, in order: "over $10,000 in thousands and below $15,000 in thousands" → gt 1e7,
    lt 1.5e7; "0以上且1,000,000.00以下"; "$1B to $5B", "10亿元（含）至100亿元（含）" and "$50M up to and including
    $500M" → a low and a high (inclusive where marked)."""
    spec = _scale_forward(spec)
    amounts = _amounts(spec)
    ops: list[str | None] = []
    prev = 0
    for i, (a, b, _) in enumerate(amounts):
        nxt = amounts[i + 1][0] if i + 1 < len(amounts) else len(spec)
        ops.append(_bound_word(spec[prev:a].lower(), re.sub(r"^\s*(?:元|美元)", "", spec[b:nxt].lower())))
        prev = b
    out: list[tuple[str, float]] = []
    joined = False
    for i, (op, (_, b, value)) in enumerate(zip(ops, amounts, strict=True)):
        after = spec[b:amounts[i + 1][0] if i + 1 < len(amounts) else len(spec)]
        if i + 1 < len(amounts) and amounts[i + 1][2] == value and _between(after) in lx.SAME_AMOUNT:
            ops[i + 1] = {"lt": "lte", "gt": "gte"}.get(ops[i + 1] or "", ops[i + 1])
            continue  # "0及0以下", "0 or 0 below": the amount once, with the bound written after it, inclusive
        if op is None and joined:
            op = "lte" if _INCLUSIVE.search(after) or re.search(r"含两端|inclusive", spec) else "lt"
        joined = False
        if op is None and i + 1 < len(amounts):
            if _between(after) in lx.RANGE_JOIN or ops[i + 1] in ("lt", "lte"):
                op, joined = "gte", ops[i + 1] is None
        if op is not None:
            out.append((op, value))
    return out


def _scale_forward(segment: str) -> str:
    """"$1-5 billion" → "$1 billion-5 billion": a scale written once after a pair applies to both."""
    return re.sub(r"(\d[\d,.]*)\s*(-|–|—|to|至|到|~)\s*(\d[\d,.]*)\s*(billion|million|thousand|bn|mn|[kmb](?![a-z])|亿|万)",
                  r"\1 \4 \2 \3 \4", segment, flags=re.I)


def _range_of(label: str, spec: str) -> Range | None:
    bounds = _bounds_in(spec)
    low = [(op, v) for op, v in bounds if op in ("gt", "gte")]
    high = [(op, v) for op, v in bounds if op in ("lt", "lte")]
    if not bounds or len(low) > 1 or len(high) > 1:
        return None
    lo, hi = (low[0] if low else ("", None)), (high[0] if high else ("", None))
    return Range(label=label.strip() or spec.strip(), low=lo[1], low_inclusive=lo[0] == "gte", high=hi[1],
                 high_inclusive=hi[0] == "lte")


_TOP_LEVEL = re.compile(r"(?:[;；、，]|(?<!\d),|,(?!\d{3}(?!\d)))\s*(?![^(（]*[)）])")
"""Where one group's statement ends: a semicolon, 、, a full-width comma, or a comma that is no thousands
separator, outside parentheses."""


def _ranges(text: str, raw: str = "") -> tuple[list[Range], bool]:
    """The groups a question states, each with its bounds, and whether a stated group could not be read.
    Groups are separated by commas, semicolons or 、 outside parentheses; each is "label (spec)", "label: spec",
    "spec为label" or a bare spec. ``text`` is the question with its measure's words blanked; a label is taken
    from ``raw`` (the question, same offsets) with them ("high revenue")."""
    raw = raw if len(raw) == len(text) else text
    first = _amounts(text)
    limit = first[0][0] if first else len(text)
    cuts = [m for m in re.finditer(r"(?i)\binto\b|分为|分成|划分成|划分为|归入|分档|归类|[—:：]", text) if m.end() <= limit]
    start = cuts[-1].end() if cuts else 0
    body = text[start:]
    body = re.split(r"(?<=[.。])\s+(?=[A-Z\u4e00-\u9fff])|。|(?i:\bplace companies\b)", body, maxsplit=1)[0]
    ranges, unread = [], False
    body = re.sub(r"(?i)\s+and\s+(?=[\w-]+(?:\s+[\w-]+)?\s+(?:if|when)\b)", lambda m: ",".ljust(len(m.group(0))), body)
    body = re.sub(r"(?i)[)）]\s*,?\s*(?:and|or)\s+(?=[\w-]+(?:\s+[\w-]+)?\s*[(（])",
                  lambda m: m.group(0)[0] + ",".ljust(len(m.group(0)) - 1), body)
    cuts_at = [start, *(x for m in _TOP_LEVEL.finditer(body) for x in (start + m.start(), start + m.end())),
               start + len(body)]
    for a, b in zip(cuts_at[::2], cuts_at[1::2], strict=True):
        part = text[a:b]
        lead = re.match(r"(?i)^\s*(?:(?:and|or|以及|和|或)\s+)?", part)
        a += lead.end() if lead else 0
        part = text[a:b]
        if not _amounts(part):
            continue
        m = re.match(r"\s*([^(（:：\d$¥￥<>≤≥]{0,40}?)\s*[(（:：]\s*(.*?)[)）]?[\s.]*$", raw[a:b])
        label, spec = (m.group(1), text[a + m.start(2):a + m.end(2)]) if m and m.group(1).strip() \
            else ("", part.strip(" ."))
        if not label and (z := re.search(r"(?:算|为|是)\s*([\u4e00-\u9fff]{1,4})$", spec)):
            label, spec = z.group(1), spec[: z.start()]
        if not label and (z := re.match(r"(?i)\s*([\w-]+(?:\s+[\w-]+)?)\s+(?:if|when)\s+(.*)$", spec)):
            label, spec = z.group(1), z.group(2)
        got = _range_of(label, spec)
        if got is None:
            unread = True
        else:
            ranges.append(got)
    return ranges, unread


def _overlap(ranges: Sequence[Range]) -> bool:
    ranges = [x for x in ranges if not x.direction]
    spans = sorted((x.low if x.low is not None else -math.inf, x.high if x.high is not None else math.inf)
                   for x in ranges)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))


_LABEL_END = re.compile(r"\s+(?:and|or)\b|[,;:.()（）、，。；：？?]|和|或|$")


def _label_at(r: _Reading, words: Sequence[str], default: str) -> str:
    """A group's label as the question writes it: from the last of ``words`` to the end of its list item
    ("positive cash flow", "increased"), else ``default``."""
    spans = [s for w in words for s in r.find(w) if not r.raw[:s[0]].endswith("the ")]  # "on the other"
    if not spans:
        return default
    a, b = max(spans)
    if lx.is_zh(r.raw[a:b]):
        return r.raw[a:b]  # no word boundary to extend to
    end = _LABEL_END.search(r.raw, b)
    label = r.raw[a:end.start() if end else b].strip()
    return label if 0 < len(label) <= 40 and len(label.split()) <= 4 else r.raw[a:b]


def _direction_groups(r: _Reading) -> list[Range]:
    """Groups by direction of change (rise / fall, 增长和下降) or by sign (profitable / loss-making, 盈利和亏损),
    labelled as the question writes them, with a stated "other" group."""
    if r.any(lx.DIRECTIONS["positive"]) and r.any(lx.DIRECTIONS["negative"]):
        out = [Range(_label_at(r, lx.DIRECTIONS["positive"], "positive"), direction="positive"),
               Range(_label_at(r, lx.DIRECTIONS["negative"], "negative"), direction="negative")]
    elif r.any(lx.INCREASE) and r.any(lx.DECREASE):
        out = [Range(_label_at(r, lx.INCREASE, "increase"), direction="increase"),
               Range(_label_at(r, lx.DECREASE, "decrease"), direction="decrease")]
    else:
        return []
    if any(not r.raw[:a].endswith("the ") for w in lx.OTHER_GROUP for a, _ in r.find(w)):
        out.append(Range(_label_at(r, lx.OTHER_GROUP, "other"), direction="other"))
    return out


# ---------------------------------------------------------------------------- periods


def _latest_superlative(r: _Reading) -> bool:
    """A superlative of an adjective of time stands in the question ("newest", "freshest"): the latest period."""
    return any(lx.latest_superlative(w) for a, b, w in r.words if r.free(a, b))


def _number(word: str) -> int:
    return int(word) if word.isdigit() else lx.NUMBER_WORDS.get(word.lower(), 0)


def _periods(r: _Reading) -> tuple[list[PeriodRef], bool, bool]:
    """The periods a question names in order of mention (``kb.core.periods.find_periods``: a form claims its
    text in order of precedence — quarters of a year, dates, ranges of years, a quarter span, quarter lists,
    quarters, years), whether a range of years was stated (2021–2023, from 2019 through 2023, 2015年到2018年),
    and whether a quarter was named without a year."""
    text = r.raw
    outside = re.sub(r"[(（][^)）]*[)）]", lambda m: m.group(0) if re.search(r"(?i)对比|相比|比|\bvs\b|versus|compared|against",
                                                                          m.group(0)) else " " * len(m.group(0)), text)
    if names_period(find_periods(outside)):
        text = outside  # a date in parentheses restates a period named outside them
    mentions = find_periods(text)
    found: list[tuple[int, PeriodRef]] = []
    spans: list[tuple[int, int]] = []

    def of(form: Form) -> list[Mention]:
        return [m for m in mentions if m.form == form]

    def add(pos: int, p: PeriodRef, span: tuple[int, int]) -> None:
        found.append((pos, p))
        spans.append(span)

    def free(m: Mention) -> bool:
        return not any(a <= m.start < b or a < m.end <= b for a, b in spans)

    for m in of("quarter_year"):
        add(m.start, PeriodRef(year=m.year, quarter=m.quarter, months=3), (m.start, m.end))
    for m in of("date"):
        if free(m):
            add(m.start, PeriodRef(year=m.year, quarter=m.quarter, months=m.months, ends=m.ends), (m.start, m.end))
    ranged = states_range(text)  # "从2017年第三季度到2024年第一季度", "2021年到2024年第一季度"
    for m in of("year_range"):
        if free(m) and m.year is not None and m.last is not None:
            ranged = True
            a, b = sorted((m.year, m.last))
            for y in range(a, b + 1):
                found.append((m.start + (y - a), PeriodRef(year=y, months=m.months)))
            spans.append((m.start, m.end))
    alone: list[tuple[int, int]] = []  # (position, quarter) named without a year
    if (qs := next(iter(of("quarter_span")), None)) is not None and qs.quarters:
        for q in qs.quarters:
            if qs.year:
                found.append((qs.start + q, PeriodRef(year=qs.year, quarter=q, months=3)))
            else:
                alone.append((qs.start, q))
        spans.append((qs.start, qs.end))
    for m in of("quarter_list"):  # "Q1, Q2 and Q3 of 2023", "first, second and third quarters"
        if free(m):
            alone += [(m.start, q) for q in m.quarters]
            spans.append((m.start, m.end))
    for m in of("quarter"):
        if free(m) and not m.to_date:
            alone.append((m.start, m.quarter))
            spans.append((m.start, m.end))
    of_document: list[tuple[int, PeriodRef]] = []  # "as shown in the 2022 10-K": the document's year
    for m in of("year"):
        if not m.attached and free(m):
            if lx.DOCUMENT_AFTER_YEAR.match(text[m.end:]):
                of_document.append((m.start, PeriodRef(year=m.year, months=m.months)))
                spans.append((m.start, m.end))
            else:
                add(m.start, PeriodRef(year=m.year, months=m.months), (m.start, m.end))
    if not found:  # "revenue in the 2022 10-K": the document's year is the one asked
        found = of_document
    periods = [p for _, p in sorted(found, key=lambda x: x[0])]
    if alone:
        plain = [(pos, p.year) for pos, p in found if p.year and not p.quarter]
        last_plain = max((pos for pos, _ in plain), default=-1)
        listed = len(plain) >= 2 and all(0 < pos - last_plain < 12 for pos, _ in alone)  # "2022、2023、2024三年一季度"
        every = ranged or listed or re.search(r"(?i)每年|各年|each year|every year|each of", text)
        if every and plain:  # "2022年至2024年每年一季度": the quarter of each year
            years = sorted({y for _, y in plain})
            periods = [p for p in periods if p.quarter] + [PeriodRef(year=y, quarter=q, months=3)
                                                           for y in years for _, q in alone]
        else:
            marks = sorted((pos, p.year) for pos, p in found if p.year)
            for pos, q in alone:
                after = [y for at, y in marks if at > pos and at - pos < 60]
                before = [y for at, y in marks if at < pos and pos - at < 40]
                year = after[0] if after else before[-1] if before else None
                periods.append(PeriodRef(year=year, quarter=q, months=3))
            used_years = {p.year for p in periods if p.quarter}
            periods = [p for p in periods if p.quarter or p.year not in used_years]
    periods = sorted(dict.fromkeys(periods), key=lambda p: (p.year or 0, p.quarter, p.months))
    if (last := lx.LAST_N.search(text)) is not None:
        periods.append(PeriodRef(relative="last_n", n=_number(last.group(1) or last.group(2) or "")))
    elif not periods and (r.any(lx.LATEST) or _latest_superlative(r) or stated_months(text) != 12):
        # "its nine-month net sales", "the newest filing"
        periods.append(PeriodRef(relative="latest", months=stated_months(text)))
    return periods, ranged, bool(alone)


# ---------------------------------------------------------------------------- operation


def _extreme(r: _Reading) -> tuple[str, str]:
    """("max"|"min"|"", "superlative"|"comparative"|"") from the question's adjectives and Chinese words (words
    of a bound or a period — "at least", "most recent" — excepted)."""
    held = list(r.taken)
    r.take(lx.BOUND_PHRASES)
    try:
        free = [w for a, b, w in r.words if r.free(a, b)]
        for w in free:
            if w in lx.IRREGULAR_SUPERLATIVE:
                return lx.IRREGULAR_SUPERLATIVE[w], "superlative"
            if w.endswith("est") and (base := lx.adjective_base(w)):
                return ("min" if base in lx.SUPERLATIVE_MIN else "max"), "superlative"
        if r.find("on top") or r.find("come out on top"):
            return "max", "superlative"
        for words, ext in ((lx.ZH_MAX, "max"), (lx.ZH_MIN, "min")):
            if r.any(words):
                return ext, "superlative"
        for w in free:
            if w in lx.IRREGULAR_COMPARATIVE:
                return lx.IRREGULAR_COMPARATIVE[w], "comparative"
            if w.endswith("er") and (base := lx.adjective_base(w)):
                return ("min" if base in lx.SUPERLATIVE_MIN else "max"), "comparative"
        for words, ext in ((lx.ZH_MORE, "max"), (lx.ZH_LESS, "min")):
            if r.any(words):
                return ext, "comparative"
        return "", ""
    finally:
        r.taken = held


_LOSS_WORDS = frozenset(w for w in lx.LOSS if not lx.is_zh(w))
_TOP_N = re.compile(r"(?i)\b(?:top|bottom)[- ](\d+|one|two|three|four|five|six|seven|eight|nine|ten)\b"
                    r"(?!\s+(?:months?|quarters?|weeks?|years?))|"
                    r"\b(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+(?:largest|biggest|highest|smallest|"
                    r"lowest|best|worst|top|leading)\b|前\s*([0-9一二三四五六七八九十两]+)\s*(?:名|家|位|强|大|的)")


def _change_basis(r: _Reading) -> str:
    if r.any(lx.POINTS):
        return "absolute"
    return next((basis for basis, words in lx.CHANGE_BASIS.items() if r.any(words)), "")


def _group_asked(r: _Reading) -> bool:
    return bool(r.any(lx.GROUP) or lx.GROUP_COUNT.search(r.raw)
                or re.match(r"(?i)\s*(?:group|bucket|tier|split|classify|categori[sz]e|label)\b", r.raw)
                or (len(re.findall(r"(?i)\b(?:who|which)\b|哪些|哪几家|哪家", r.raw)) >= 2 and bool(_direction_groups(r))))


def read_question(text: str, companies: Sequence[str] | Mapping[str, Sequence[str]] = (),
                  line_items: Sequence[str] = ()) -> Question:
    """The typed question (``Question``): measures by their words (the lexicon, the vocabulary's printed labels,
    printed line items, the collection's own ``line_items``), companies by their distinctive words or aliases
    (``companies``: names, or names → tickers and short names), periods, and the operation from the cue words of
    ``kb.core.lexicon``; whatever it could not place is listed in ``unknown``."""
    lang = "zh" if lx.is_zh(text) else "en"
    defined, rest = definitions(text[:4000]) if lang == "en" else ({}, text[:4000])
    r = _Reading.of(rest)  # a formula the question defines is read as a formula, not as words of the question
    named, ambiguous = _companies(r, companies, entities=True) if isinstance(companies, Mapping) \
        else _companies(r, {c: () for c in companies})
    lang = _language(r)
    measures = _measures(r, line_items)
    if defined and (asked := named_formula(rest, defined)) is not None and asked.defined:
        measures = [MeasureRef(asked.name, "formula")]
    measures = _cash_of(r, measures)
    loss = any(lx.lemmas(w) & _LOSS_WORDS for _, _, w in r.words) or any(w in r.raw for w in lx.LOSS if lx.is_zh(w))
    if not measures and (loss or r.any(lx.PROFIT_SIGN)):
        measures = [MeasureRef("net_income")]  # "lost the most money", 亏损最多, "was it profitable", 是否盈利
    burn = bool(r.any(lx.BURN)) and any(m.name in lx.CASH_OF.values() for m in measures)
    loss = (loss and any(m.name in lx.PROFIT_MEASURES for m in measures)) or burn
    if len(measures) >= 2 and all(m.kind == "concept" for m in measures[:2]):
        share = r.any(lx.SHARE_OF)
        if share or r.any(lx.RATIO_OF):  # "the ratio of A to B", "A as a % of B", "A占B的比例": one formula
            num, den = (measures[1], measures[0]) if share and _share_of_first(r.raw, measures[0]) \
                else (measures[0], measures[1])  # "what percentage of revenue was operating income": B over A
            measures = [MeasureRef(quotient_name(num.name, den.name, bool(share)), "formula"), *measures[2:]]
    periods, ranged, _ = _periods(r)
    unknown: list[str] = [f"the name '{a}' fits several companies" for a in ambiguous]
    if companies and not named and (stranger := _unknown_owner(rest, r)):  # the text r reads, same offsets
        unknown.append(f"'{stranger}' names no company of the collection")
    extreme, degree = _extreme(r)
    cues = {k: r.any(v) for k, v in (("rank", lx.RANK), ("compare", lx.COMPARE), ("series", lx.SERIES),
                                       ("change", lx.CHANGE), ("collection", lx.COLLECTION))}
    if len([p for p in periods if p.year or p.quarter]) >= 2 and r.any(lx.EACH):
        cues["series"] = [*cues["series"], "each"]
    grouped = _group_asked(r)
    top = _TOP_N.search(r.raw)
    limit = _number(next(g for g in top.groups() if g)) if top else None
    basis = _change_basis(r)
    masked = r.masked()
    bounds = _bounds_in(masked) if not grouped else []
    sign_bound = {"positive": ("gt", 0.0), "negative": ("lt", 0.0)}
    if not bounds and not grouped and cues["collection"] and len(named) != 1:
        for side, words in lx.DIRECTIONS.items():
            if r.any(words) and not r.any(lx.DIRECTIONS["negative" if side == "positive" else "positive"]):
                bounds = [sign_bound[side]]
    ranges: list[Range] = []
    used: set[str] = set()
    op: str | None
    if grouped:
        op, used = "group", {"rank", "compare"}
        ranges, unread = _ranges(masked, r.raw)
        if len(ranges) <= 1 and _direction_groups(r):  # "who was above zero and who below": groups by sign
            ranges, unread = [], False
        if not ranges:
            ranges = _direction_groups(r)
            used |= {"change"}
            unread = unread and not ranges
        if unread or not ranges:
            unknown.append("the groups' bounds could not be read")
        elif _overlap(ranges):
            unknown.append("the groups' bounds overlap")
        elif len(ranges) == 1:  # a grouping states two groups at least: the others were not read
            unknown.append("only one group's bounds could be read")
    elif cues["rank"] or (top and limit) or r.any(lx.ASCENDING) or r.any(lx.DESCENDING):
        op, used = "rank", {"rank"}
    elif extreme and degree == "superlative":
        op, used = extreme, {"compare"}
    elif len(bounds) == 1 and (cues["collection"] or len(named) != 1):
        op = "screen"
    elif extreme and (cues["collection"] or len(named) > 1):
        op, used = extreme, {"compare"}
    elif cues["change"] or basis in ("yoy", "qoq", "cagr"):
        op, used = "change", {"change", "compare", "series"}
        if ranged and cues["series"] and not basis:  # "从2017年第三季度到2024年第一季度…的变化趋势": the path
            op = "series"
        if len([p for p in periods if p.year or p.quarter]) >= 3 and (cues["series"] or not basis
                                                                       and not r.any(lx.AMOUNT_ASKED)):
            op = "series"  # "how have sales moved over 2021-2023": the path, not one difference
    elif cues["series"] or any(p.relative == "last_n" for p in periods) or len(periods) >= 3 or ranged:
        op, used = "series", {"series", "change", "compare"}
    elif cues["compare"]:
        op, used = "compare", {"compare"}
    elif measures and len([p for p in periods if p.year or p.quarter]) >= 2 and len(named) <= 1 \
            and re.search(r"(?i)\band\b|、|和|及|,", r.raw):
        op = "series"
    elif measures:
        op = "lookup"
    else:
        op = None
    over = ""
    if extreme and len(named) == 1 and op in ("lookup", "max", "min") and lang == "en":
        listed = measures if len(measures) >= 2 else listed_measures(r.raw)
        if len(listed) >= 2 and all(m.kind == "concept" for m in listed):
            op, measures, over = extreme, list(listed), "measures"  # "which was larger: revenue or cost of sales"
            used = {"compare"}
    if op == "change" and (cues["series"] and len(periods) >= 3):
        op = "series"
    if op == "change" and ranged:  # "from 2021 to 2023": the change between the ends
        dated = [p for p in periods if p.year]
        periods = [p for p in periods if not p.year or p in (dated[0], dated[-1])]
    if op in ("max", "min") and not over and r.any(lx.WHICH_PERIOD):  # "which year had the highest …": over the periods
        over = "periods"
        if cues["change"]:  # "… saw the largest decrease": the extreme of the steps, a fall being the lowest
            basis = basis or "absolute"
            if r.any(lx.DECREASE) and not r.any(lx.INCREASE):
                op = "min" if op == "max" else "max"
    average = bool(r.any(lx.AVERAGE)) and len([p for p in periods if p.year or p.quarter]) >= 2
    if average and op in ("lookup", "compare", "change"):
        op = "series"  # "the average revenue over 2021–2023": the mean of the path
    if op in ("max", "min") and loss:
        op = "min" if op == "max" else "max"
    order = ""
    if op == "rank":
        asc = bool(r.any(lx.ASCENDING)) or (not r.any(lx.DESCENDING) and extreme == "min")
        asc = asc or bool(re.search(r"(?i)\bfrom the bottom\b|\bbottom up\b|(?:lowest|smallest|least)\s+first", r.raw))
        order = "asc" if asc != loss else "desc"
    left = [k for k, hit in cues.items() if hit and k not in used and k != "collection"]
    if op in ("max", "min", "rank", "group", "screen") and [k for k in left if k not in ("change", "series")]:
        unknown.append(f"words of another operation were not used: {', '.join(left)}")
    if op == "lookup" and (extreme or left):
        unknown.append("a comparison or change is asked but its operation was not read")
    if op is not None and not measures:
        unknown.append(NO_MEASURE)
    own = [w for w in lx.COMPANY_DEFINED if r.find(w) and not r.find(f"un{w}")]
    if own and any(m.kind in ("metric", "formula") for m in measures) and not defined:
        unknown.append(f"a measure the company defines itself ('{own[0]}') is not computed from statement lines")
    if op in ("max", "min", "rank", "screen", "group") and len(measures) > 1 and over != "measures":
        unknown.append(f"two measures compete: {measures[0].name}, {measures[1].name}")
    if op == "lookup" and len({p.year for p in periods if p.year}) > 1 and not average:
        unknown.append("two periods conflict")
    change = basis or "absolute" if op == "change" else basis if op == "series" and basis in ("yoy", "qoq", "cagr", "percent") \
        else basis if op == "group" and basis in ("yoy", "qoq") else basis if over else ""
    entities = Entities("named", tuple(named)) if named else Entities("collection")
    screen = {bounds[0][0]: bounds[0][1]} if op == "screen" and bounds else {}
    unit = next((u for u, words in lx.UNIT_ASKED.items() if r.any(words)), "") or _scale_asked(masked)
    # a group or a screen reads its amounts; over one path (series, change) an amount is a tolerance the figures
    # shown let the reader judge ("not fluctuating more than 2% a year"); elsewhere it would be dropped unread
    if op in ("lookup", "compare", "max", "min", "rank") and (amounts := stated_amounts(masked)):
        unknown.append(f"an amount the question states was not read: {amounts[0]}")
    dm = lx.DECIMALS.search(text)
    decimals = None
    if dm is not None:
        d = dm.group(1) or dm.group(2)
        decimals = lx.DECIMAL_WORDS[d] if d in lx.DECIMAL_WORDS else _number(d)
    loss = loss and not _by_sign(op, ranges)
    unsure = []
    for a, b, ref in r.single:
        if ref in measures and (mod := _modifier(r, a, b, frozenset(w for g in ranges for w in g.label.split()))):
            unknown.append(unsure_of(mod, ref.name))
            unsure.append((mod, ref.name))
    return Question(text=text, lang=lang, operation=op, measures=tuple(measures), entities=entities,  # type: ignore[arg-type]
                    periods=tuple(periods), change=change, sign="loss" if loss else "", order=order,  # type: ignore[arg-type]
                    over=over, average=average,  # type: ignore[arg-type]
                    limit=limit if op == "rank" else None, ranges=tuple(ranges) if op == "group" else (),
                    bounds=screen, unit=unit, decimals=decimals, unknown=tuple(unknown), unsure=tuple(unsure))


def _language(r: _Reading) -> str:
    """The question's language, company names aside: Chinese when its Han characters outnumber its Latin words
    ("Which of 德赛电池 and 华胜天成 …" is English; "哪家公司的 ROE 最高" Chinese)."""
    han = len(lx.HAN.findall(r.masked()))
    latin = sum(1 for a, b, w in r.words if r.free(a, b) and any(c.isalpha() for c in w))
    return "zh" if han and han >= latin else "en"


def _by_sign(op: str | None, ranges: Sequence[Range]) -> bool:
    """Groups by sign (profitable / loss-making): "loss" names a group, not the measure's sign."""
    return op == "group" and any(x.direction in ("positive", "negative") for x in ranges)


# ---------------------------------------------------------------------------- the LLM's reading

_ENUMS = {"change": ("", "absolute", "percent", "yoy", "qoq", "cagr"), "sign": ("", "loss"),
          "order": ("", "asc", "desc"), "over": ("", "periods", "measures"), "unit": ("", "thousand", "million", "billion", "万", "亿")}
_BOUND_KEYS = ("gt", "gte", "lt", "lte")
_DIRECTIONS = ("", "increase", "decrease", "positive", "negative", "zero", "other")


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return None
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _llm_measure(m: object, line_items: Sequence[str]) -> MeasureRef | None:
    """A measure the LLM named, if the vocabulary, the measure table or the printed lines know it."""
    if not isinstance(m, Mapping) or not isinstance(name := m.get("name"), str):
        return None
    kind = m.get("kind", "concept")
    if kind == "concept" and name in CONCEPT_BY_NAME:
        return MeasureRef(name)
    if kind == "metric" and name in _TERMS:
        return MeasureRef(name, "metric")
    if kind == "line" and 0 < len(name) <= 200 and (not line_items or name in line_items or lx.is_zh(name)
                                                    or name.lower() in lx.EN_LINE_ITEMS):
        return MeasureRef(name, "line")
    if kind == "formula" and quotient(name) is not None:
        return MeasureRef(name, "formula")
    return None


def _llm_period(p: object) -> PeriodRef | None:
    if not isinstance(p, Mapping):
        return None
    relative = p.get("relative") or ""
    if relative in ("latest", "last_n"):
        n = p.get("n")
        return PeriodRef(relative=relative, n=int(n) if isinstance(n, int) and 0 < n <= 50 else 0)
    year, quarter, months = p.get("year"), p.get("quarter") or 0, p.get("months") or 12
    if type(year) is not int or not 1900 <= year <= 2100 or quarter not in (0, 1, 2, 3, 4) \
            or months not in (0, 3, 6, 9, 12):
        return None
    return PeriodRef(year=year, quarter=quarter, months=months)


def _llm_range(x: object) -> Range | None:
    if not isinstance(x, Mapping) or not isinstance(label := x.get("label"), str) or not label:
        return None
    low, high = _num(x.get("low")), _num(x.get("high"))
    direction = x.get("direction") or ""
    if direction not in _DIRECTIONS or (low is None and high is None and not direction) \
            or (x.get("low") is not None and low is None) or (x.get("high") is not None and high is None):
        return None
    return Range(label=label[:80], low=low, low_inclusive=bool(x.get("low_inclusive")), high=high,
                 high_inclusive=bool(x.get("high_inclusive")), direction=direction)


def from_llm(raw: object, text: str, companies: Mapping[str, Sequence[str]],
             line_items: Sequence[str] = ()) -> tuple[Question | None, tuple[str, ...]]:
    """The LLM's typed question, validated as its filters are: measures the vocabulary, the measure table or
    the printed lines do not know, companies the collection does not hold and impossible periods are dropped,
    bounds must be numbers; None (the rules answer) when no operation on a known measure is left or the reply
    is not a typed question. Also what was dropped."""
    if not isinstance(raw, Mapping):
        return None, (() if raw is None else ("the LLM's question is not an object",))
    dropped: list[str] = []
    op = raw.get("operation")
    if op not in OPERATIONS:
        return None, (f"operation {op!r}",)
    measures = []
    for m in raw.get("measures") or []:
        ref = _llm_measure(m, line_items)
        if ref is None:
            dropped.append(f"measure {m!r}"[:120])
        else:
            measures.append(ref)
    if not measures:
        return None, (*dropped, "no known measure")
    names: list[str] = []
    for c in raw.get("companies") or []:
        found = [c] if isinstance(c, str) and c in companies else \
            _companies(_Reading.of(c), companies)[0] if isinstance(c, str) and len(c) <= 200 else []
        if len(found) == 1:
            names.append(found[0])
        else:
            dropped.append(f"company {c!r}"[:120])
    periods = []
    for p in raw.get("periods") or []:
        ref = _llm_period(p)
        if ref is None:
            dropped.append(f"period {p!r}"[:120])
        else:
            periods.append(ref)
    ranges = [x for x in map(_llm_range, raw.get("ranges") or []) if x is not None]
    if len(ranges) != len(raw.get("ranges") or []):
        dropped.append("a range without numeric bounds")
    bounds_raw = raw.get("bounds") or {}
    bounds = {k: v for k in _BOUND_KEYS if isinstance(bounds_raw, Mapping) and (v := _num(bounds_raw.get(k))) is not None}
    if isinstance(bounds_raw, Mapping) and len(bounds) != len(bounds_raw):
        dropped.append(f"bounds {bounds_raw!r}"[:120])
    enums = {k: (v if (v := raw.get(k) or "") in allowed else "") for k, allowed in _ENUMS.items()}
    limit, decimals = raw.get("limit"), raw.get("decimals")
    unknown = tuple(str(u)[:200] for u in (raw.get("unknown") or [])[:5]) if isinstance(raw.get("unknown"), list) else ()
    q = Question(text=text, lang="zh" if lx.is_zh(text) else "en", operation=op, measures=tuple(measures), source="llm",
                 entities=Entities("named", tuple(dict.fromkeys(names))) if names else Entities("collection"),
                 periods=tuple(periods), change=enums["change"], sign=enums["sign"], order=enums["order"],  # type: ignore[arg-type]
                 over=enums["over"] if enums["over"] != "measures" or op in ("max", "min") else "",  # type: ignore[arg-type]
                 average=raw.get("average") is True,
                 limit=limit if type(limit) is int and 0 < limit <= 1000 else None,
                 ranges=tuple(ranges) if op == "group" else (), bounds=bounds if op == "screen" else {},
                 unit=enums["unit"], decimals=decimals if type(decimals) is int and 0 <= decimals <= 6 else None,
                 unknown=unknown)
    return q, tuple(dropped)


def with_days(llm: Question, rules: Question) -> Question:
    """An LLM reading's periods with the day the rules read for the same period ("the quarter ended July 29,
    2023": the LLM names the quarter, the question wrote the day)."""
    days = {(p.year, p.quarter, p.months): p.ends for p in rules.periods if p.ends is not None}
    if not days:
        return llm
    periods = tuple(msgspec.structs.replace(p, ends=days.get((p.year, p.quarter, p.months))) if p.ends is None else p
                    for p in llm.periods)
    return msgspec.structs.replace(llm, periods=periods)


def same_reading(a: Question, b: Question) -> bool:
    """Two readings that compute the same thing (the text and what could not be placed aside)."""
    keys = ("operation", "measures", "entities", "periods", "change", "sign", "order", "over", "average", "limit",
            "ranges", "bounds")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


# ---------------------------------------------------------------------------- what the reading left over

_ZH_NOT_MEASURE = re.compile(rf"第[一二三四五六七八九十]+|(?:百万|千万|亿|万|千|美|港)?元|\d+\s*(?:{'|'.join(lx.ZH_PERIOD_UNITS)})?|[^\u4e00-\u9fff]+|[{lx.ZH_FUNCTION_CHARS}]")
"""What of a Chinese question names no measure: periods ("2023年"), anything not Han, function characters."""
_NOT_CUES = frozenset({"ZH_LINE_ITEMS", "EN_LINE_ITEMS", "ZH_PLACES", "LOSS", "MARGIN_WORDS", "WEAK_MEASURE_WORDS", "NOT_EXTREMES",
                       "MEASURE_HEADS", "PROFIT_MEASURES", "NOT_THE_MEASURE_AFTER", "MONTH_NAMES", "FOLLOWUP_OPENERS",
                       "FOLLOWUP_ELLIPSIS", "FOLLOWUP_ENTITY", "FOLLOWUP_PERIOD", "FOLLOWUP_MEASURE", "FOLLOWUP_NOT"})
"""Lexicon lists that are no cue words of a single question (the follow-up cues are read by ``router.followup``)."""


@functools.cache
def _cue_words() -> tuple[frozenset[str], tuple[str, ...]]:
    """Every single English word of the lexicon's cue lists, and its Chinese cues (longest first)."""
    en: set[str] = set(lx.STOP_WORDS)
    zh: set[str] = set()
    for name in dir(lx):
        value = getattr(lx, name)
        if not name.isupper() or name in _NOT_CUES:
            continue
        lists = value.values() if isinstance(value, Mapping) and name in (
            "BOUND_WORDS", "DIRECTIONS", "CHANGE_BASIS", "SPANS", "UNIT_ASKED") else [value]
        for words in lists:
            if isinstance(words, tuple | frozenset) and all(isinstance(w, str) for w in words):
                for w in words:
                    (zh.add(w) if lx.is_zh(w) else en.update(_WORD.findall(w.lower())))
    return frozenset(en), tuple(sorted(zh, key=len, reverse=True))


def unplaced_words(text: str, companies: Mapping[str, Sequence[str]] = {}) -> list[str]:  # noqa: B006
    """The question's words no company, period, amount or cue word of the lexicon accounts for: what may name a
    measure in other words ("how much cash did its operations burn" → cash, operations, burn); Chinese words as
    statements print them ("赚了多少钱" → 净利润: ``kb.core.lexicon.zh_as_printed``)."""
    en, zh = _cue_words()
    r = _Reading.of(text[:1000])
    _companies(r, companies)
    if lx.is_zh(text):
        rest = lx.zh_as_printed(r.masked())  # "赚了多少钱": 净利润
        for cue in zh:
            if len(cue) > 1:  # a one-character cue (到, 占) is left: it is part of a measure's words (收到, 占用)
                rest = rest.replace(cue, " ")
        rest = _ZH_NOT_MEASURE.sub(" ", rest)
        return [w for w in rest.split() if len(w) >= 2]
    out = []
    for a, b, w in r.words:
        if not r.free(a, b) or w in en or any(ch.isdigit() for ch in w) or w in lx.MONTHS or len(w) < 3:
            continue
        if (w.endswith(("est", "er")) and lx.adjective_base(w)) or lx.lemmas(w) & en:
            continue
        out.append(w)
    return out


def fact_condition(q: Question) -> Condition | None:
    """The fact condition a screen states ("companies with revenue above $1 billion in 2023" → revenue > 1e9 in
    FY2023), as the metadata router filters documents by it; None for any other question."""
    if q.operation != "screen" or not q.bounds or not q.measures or q.measures[0].kind != "concept":
        return None
    years = sorted({p.year for p in q.periods if p.year})
    return Condition("fact", "fact", {"concept": q.measures[0].name, "period": f"FY{years[0]}" if len(years) == 1
                                      else "", **q.bounds})
