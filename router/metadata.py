"""Metadata routing: the question becomes validated conditions over known metadata, compiled to
parameterised SQL. The LLM (when configured) only proposes conditions as JSON; keys, operators and
values are validated against the collection's known metadata, and SQL text never comes from it."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
import structlog

from kb.core import lexicon as lx
from kb.core import measures, periods, vocab
from kb.core.errors import LLMError, ValidationError
from kb.core.measures import METRIC_BY_NAME
from kb.core.providers import ChatModel
from kb.core.providers.steps import ask
from kb.core.text import normalize_title
from router import store
from router.policy import ROUTING
from router.prompts import METADATA, metadata_prompt, typed_question_prompt
from router.types import Condition

log = structlog.get_logger("router.metadata")


OPS = ("eq", "in", "range", "contains")
YEAR_KEYS = ("doc_period", "fiscal_year", "year")
COMPANY_KEYS = ("company", "organisation", "organization", "ticker", "issuer")
TYPE_KEYS = ("doc_type", "document_type", "type")
QUARTER_KEYS = ("fiscal_quarter", "quarter")
_WEB_DOMAIN = re.compile(r"\.(?:com|net|org|io)\b", re.I)


class QuestionPeriod(msgspec.Struct, frozen=True):
    """Periods and document types a question mentions."""

    years: tuple[int, ...]
    quarters: tuple[int, ...]
    doc_types: tuple[str, ...]  # normalised values like "10k", "10q", "8k", "earnings"
    latest: bool = False  # "latest", "most recent", "current"
    implied: tuple[str, ...] = ()  # types the wording implies when none is named ("earnings", "8k")
    calendar_named: bool = False  # a bare "Q3 2023": the year names the calendar year, not the fiscal label
    forward: bool = False  # about a plan or forecast ("guidance for 2024"): an earlier report states it
    dates: tuple[str, ...] = ()  # whole dates written ("through July 1, 2023"), ISO: a report ending on one


def implied_types(question: str) -> tuple[str, ...]:
    """Document types a question implies without naming one: non-GAAP measures and guidance live in an
    earnings release, shareholder votes and officer changes in an 8-K."""
    return tuple(t for pattern, t in vocab.IMPLIED_TYPES if pattern.search(question))


def question_period(question: str) -> QuestionPeriod:
    fiscal = bool(periods.FISCAL_MARK.search(question))  # before "Q3 FY2023" is rewritten "Q3 2023"
    question = periods.normalize_periods(question)
    years, quarters = periods.question_years(question), periods.question_quarters(question)
    types = [vals[0] for pattern, vals in vocab.QUESTION_TYPES if pattern.search(question)]
    latest = bool(periods.LATEST.search(question))
    bare = bool(quarters and years and not fiscal)
    forward = lx.forward_looking(question)
    return QuestionPeriod(tuple(sorted(years)), tuple(sorted(quarters)), tuple(types), latest,
                          implied=() if types else implied_types(question), calendar_named=bare, forward=forward,
                          dates=tuple(d.isoformat() for d in periods.question_dates(question)))


def calendar_named_year(meta: Mapping[str, Any]) -> int | None:
    """The calendar year holding most months of a quarterly document's fiscal year: NVIDIA's fiscal 2024
    (February 2023 to January 2024) is 2023; Apple's fiscal 2023 (October 2022 to September 2023) stays
    2023. None without a fiscal year, a quarter and a period end."""
    fiscal_year = meta_int(meta, ("fiscal_year",))
    quarter = meta_int(meta, QUARTER_KEYS)
    end = str(meta.get("period_end_date") or "")
    if fiscal_year is None or quarter is None or not 1 <= quarter <= 4 or not re.match(r"\d{4}-\d{2}", end):
        return None
    month = int(end[5:7])
    if re.match(r"\d{4}-\d{2}-0[1-7]\b", end):  # a 52/53-week quarter ending April 1 closes March
        month = (month - 2) % 12 + 1
    year_end_month = (month - 1 + 3 * (4 - quarter)) % 12 + 1
    return fiscal_year - 1 if year_end_month <= periods.FISCAL_YEAR_NAMED_EARLIER_UNTIL else fiscal_year


def doc_year(period: QuestionPeriod, meta: Mapping[str, Any]) -> int | None:
    """The year a document answers to for this question: its calendar-named year for a bare quarter
    ("Q3 2023", see ``calendar_named_year``), else its fiscal year or period."""
    if period.calendar_named and (named := calendar_named_year(meta)) is not None:
        return named
    return meta_int(meta, YEAR_KEYS)


def meta_int(meta: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for k in keys:
        v = meta.get(k)
        digits = re.sub(r"\D", "", str(v)) if v is not None else ""
        if digits:
            return int(digits[-4:]) if len(digits) >= 4 else int(digits)
    return None


def period_prior(period: QuestionPeriod, meta: Mapping[str, Any], years_present: Sequence[int],
                 latest_end: str | None = None, *, same_entity: bool = True) -> tuple[float, str]:
    """How well a document's period and type fit the question (0 to ~2), with the reason.

    A stated fiscal year decides: the latest stated year some document has fully (or, when none has
    one, the closest later year within the years a report restates as comparatives — FY2022's figure is in the
    FY2023 report — except for a plan or forecast, which lives in an earlier report: FY2023's guidance in the
    FY2022 report; else the closest earlier year), other stated years partly (the
    newest report carries earlier years as comparatives). A stated quarter or type adds; without a
    stated type, annual reports are preferred for annual questions and quarterly ones for quarter
    questions; without a stated year, newer documents are preferred (the latest report is current).
    The unstated preferences only choose among one entity's documents (``same_entity``), never between
    companies, so documents without metadata are not pushed down in an open question.
    """
    boost, why = 0.0, []
    year = doc_year(period, meta)
    dtype = str(next((meta[k] for k in TYPE_KEYS if meta.get(k)), "")).lower().replace(" ", "_")
    latest = max(years_present) if years_present else None
    if period.years and year is not None:
        stated_present = [y for y in period.years if y in years_present]
        if stated_present:  # "as of FY2021, … expected payments in 2024": 2021 is the document's year
            target = max(stated_present)
        else:
            asked = max(period.years)
            earlier = [y for y in years_present if y < asked]
            later = [y for y in years_present if asked < y <= asked + ROUTING.comparative_years]
            target = min(later) if later and not period.forward else max(earlier) if earlier else \
                min(later) if later else asked
        if year == target:
            boost += ROUTING.year_exact
            why.append(f"year {year}")
        elif year in period.years:
            boost += ROUTING.year_other_stated
            why.append(f"year {year}")
    end = str(meta.get("period_end_date") or "")[:10]
    if period.dates and re.match(r"\d{4}-\d{2}-\d{2}$", end) and any(
            abs((dt.date.fromisoformat(end) - dt.date.fromisoformat(d)).days) <= 4 for d in period.dates):
        boost += ROUTING.date_exact
        why.append(f"ends {end}")
    if period.quarters:
        quarter = meta_int(meta, QUARTER_KEYS)
        if quarter is not None and quarter in period.quarters:
            boost += ROUTING.quarter
            why.append(f"quarter {quarter}")
    if period.doc_types:
        if dtype and any(dtype.replace("-", "") == t.replace("-", "") for t in period.doc_types):
            boost += ROUTING.doc_type
            why.append(f"type {dtype}")
    elif period.implied and same_entity:  # instead of the annual/quarterly preference
        if dtype and any(dtype.startswith(t) for t in period.implied):
            boost += ROUTING.implied_type
            why.append(f"implied type {dtype}")
    elif not same_entity:
        pass
    elif period.quarters:
        if dtype in vocab.QUARTERLY_TYPES:
            boost += ROUTING.quarterly_for_quarter
            why.append("quarterly report")
    elif dtype in vocab.ANNUAL_TYPES:
        boost += ROUTING.annual_with_year if period.years else ROUTING.annual_without_year
        why.append("annual report")
    if not same_entity:
        return boost, ", ".join(why)
    if not period.years and year is not None and latest is not None:
        recency = max(0.0, ROUTING.recency_max - ROUTING.recency_step * (latest - year))
        if recency:
            boost += recency
            why.append("recent")
    if period.latest and not period.years and latest_end and meta.get("period_end_date") == latest_end:
        boost += ROUTING.latest_period  # "the most recent 10-Q": the latest period end, not the latest year
        why.append(f"latest period {latest_end}")
    return boost, ", ".join(why)


_TOKEN = re.compile(r"[0-9a-z]+|[\u4e00-\u9fff]+")
"""A question's words for finding companies: Latin and Han runs apart ("Gresham Worldwide的应付账款" → gresham,
worldwide, 的应付账款)."""
_CJK_NAME = re.compile(r"[\u4e00-\u9fff0-9A-Za-z*]*[\u4e00-\u9fff][\u4e00-\u9fff0-9A-Za-z*]*")


class CompanyIndex:
    """Where a question names the companies of one metadata key: every alias of every value (the name as
    filings write it and as people do: case, punctuation, legal and state suffixes, "The", a web domain) looked
    up among the question's word n-grams — linear in the question, whatever the number of companies."""

    MAX_WORDS = 8

    def __init__(self, values: Iterable[str], *, exact_case: bool = False,
                 other_names: Mapping[str, Sequence[str]] | None = None) -> None:
        """``other_names``: further names of a value (a former name its reports state) it is found by too."""
        self.exact_case = exact_case  # tickers: "ON" names a company, "on" does not
        self.phrases: dict[str, set[str]] = {}
        self.compact: dict[str, set[str]] = {}
        self.cjk: dict[str, set[str]] = {}  # Chinese names, found inside a question's unspaced text
        self.pinyin: dict[str, set[str]] = {}  # Chinese names in pinyin ("Yanghe"), found written with a capital
        other_names = other_names or {}
        for value in values:
            if exact_case:
                self.phrases.setdefault(value.strip(), set()).add(value)
                continue
            for name in (value, *other_names.get(value, ())):
                for p in vocab.pinyin_names(name):
                    self.pinyin.setdefault(p, set()).add(value)
            for alias in {a for name in (value, *other_names.get(value, ())) for a in company_aliases(name)}:
                self.phrases.setdefault(" ".join(_TOKEN.findall(alias)), set()).add(value)  # "tcl科技" → "tcl 科技"
                if " " not in alias and len(alias) >= 5:  # "Best Buy" written "bestbuy", or the other way round
                    self.compact.setdefault(alias, set()).add(value)
                if _CJK_NAME.fullmatch(alias.replace(" ", "")) and len(alias.replace(" ", "")) >= 2:
                    self.cjk.setdefault(alias.replace(" ", ""), set()).add(value)  # written without spaces
        self.pinyin = {k: v for k, v in self.pinyin.items() if len({_han_head(x) for x in v}) == 1}  # one company
        self._cjk_pattern = re.compile("|".join(re.escape(a) for a in sorted(self.cjk, key=len, reverse=True))) \
            if self.cjk else None

    def mentions(self, question: str) -> list[tuple[str, int, int]]:
        """(value, start, end) of each company named in the question, by character offsets, in order; a name
        inside a longer named one ("Buy" in "Best Buy") is not a mention of its own."""
        pattern = r"[A-Za-z0-9]+" if self.exact_case else _TOKEN
        lowered = question if self.exact_case else question.lower()
        tokens = list(re.finditer(pattern, lowered))
        words = [t.group(0) for t in tokens]
        found: list[tuple[int, int, str]] = []
        for i in range(len(words)):
            if self.pinyin and len(lowered) == len(question) and question[tokens[i].start()].isupper():
                found.extend((i, i + 1, v) for v in self.pinyin.get(words[i], ()))
            for n in range(1, min(self.MAX_WORDS, len(words) - i) + 1):
                span = words[i: i + n]
                for value in self.phrases.get(" ".join(span), ()):
                    found.append((i, i + n, value))
                if n > 1 and not self.exact_case:
                    for value in self.compact.get("".join(span), ()):
                        found.append((i, i + n, value))
        spans = [(tokens[i].start(), tokens[j - 1].end(), v) for i, j, v in found]
        if self._cjk_pattern is not None:  # "洋河股份的…": a Chinese name is a substring, not a word
            spans += [(m.start(), m.end(), v) for m in self._cjk_pattern.finditer(lowered)
                      for v in self.cjk[m.group(0)]]
        spans.sort(key=lambda m: (m[0] - m[1], m[0]))  # longest first
        kept: list[tuple[int, int, str]] = []
        for start, end, value in spans:
            if (start, end, value) in kept or any(s <= start and end <= e and (s, e) != (start, end)
                                                  for s, e, _ in kept):
                continue
            kept.append((start, end, value))
        return [(v, start, end) for start, end, v in sorted(kept)]

    def find(self, question: str) -> list[str]:
        """The values the question names, each once, in order of first mention."""
        return list(dict.fromkeys(v for v, _, _ in self.mentions(question)))


_NAME_TAIL = re.compile(
    r"\.?(?:[\s,]*\b(?:incorporated|inc|corporation|corp|company|co|limited|ltd|llc|l\.?p|plc|group|holdings|sa|ag|nv)"
    r"\b\.?)*(?:\s*[\\/][A-Za-z]{2}[\\/])?(?:'s|’s|')?", re.I)


def _han_head(value: str) -> str:
    """The first two characters of a Chinese company's short name: spellings of one company share them (洋河股份,
    江苏洋河酒厂); a pinyin that two companies share ("pijiu" of 重庆啤酒 and 青岛啤酒) finds neither."""
    core = vocab.company_core(value)
    short = vocab.zh_short(core)
    return (core if len(short) <= 2 < len(core) else short)[:2]


def without_companies(question: str, values: Iterable[str]) -> str:
    """The question with every mention of the given companies removed, with the legal and state suffixes and
    the possessive written after it ("Broad Street Realty, Inc.'s" → "")."""
    out, pos = [], 0
    for _, start, end in CompanyIndex(values).mentions(question):
        if start < pos:
            continue
        out.append(question[pos:start])
        tail = _NAME_TAIL.match(question, end)
        pos = tail.end() if tail else end
    return "".join(out) + question[pos:]


class KnownValues(msgspec.Struct, frozen=True):
    """Distinct metadata values of a collection: key -> {value: document count}; ``companies`` holds a
    prebuilt ``CompanyIndex`` per company key (the catalog builds them once per change of the collection)."""

    values: dict[str, dict[str, int]]
    doc_count: int
    companies: dict[str, CompanyIndex] = {}
    groups: dict[str, tuple[str, ...]] = {}  # company value -> every value of the same entity (renamed companies)

    def entity(self, value: str) -> str:
        """The entity a company value belongs to (the first value of its group; itself when not renamed)."""
        return self.groups.get(value, (value,))[0]

    def company_index(self, key: str) -> CompanyIndex:
        return self.companies.get(key) or company_index(key, self.values.get(key, {}))


def company_index(key: str, values: Iterable[str],
                  other_names: Mapping[str, Sequence[str]] | None = None) -> CompanyIndex:
    return CompanyIndex(values, exact_case=key == "ticker", other_names=other_names)


ENTITY_KEY = "entity"
"""Document metadata naming the company a document is about as one entity, over how its name is spelled: documents
with the same ``entity`` are one company ("BYD" for 比亚迪's reports, and "BYD" then finds them), and documents
whose ``entity`` differ are never joined by their spelling."""

JOINED_LEGAL_FORM = "same name but for legal form, case or punctuation"
JOINED_FORMER_NAME = "a former name its report states"
JOINED_METADATA = "the same entity in their metadata"


class Entity(msgspec.Struct, frozen=True):
    """One company as the overview, routing and facts see it: its company values, and why they were joined."""

    name: str  # the metadata ``entity`` when set, else the shortest spelling
    names: tuple[str, ...]  # every company value of its documents, sorted
    joined: tuple[str, ...] = ()  # why (``JOINED_*``), empty for a company written one way


class CompanyEntities(msgspec.Struct, frozen=True):
    """The companies of a collection as entities: ``groups`` (each value of a joined entity → all its values,
    sorted; the first names the entity in answers), ``extra`` (per value, other names no value carries, found by
    them too: former names, the metadata ``entity``) and each value's ``Entity``."""

    groups: dict[str, tuple[str, ...]]
    extra: dict[str, list[str]]
    by_value: dict[str, Entity]


def company_entities(docs: Iterable[tuple[str, Sequence[str], str]]) -> CompanyEntities:
    """From (company value, other names its report states, metadata ``entity``) per document: the values that
    are one company — written alike but for legal form and punctuation ("Amcor", "Amcor PLC"), renamed (a report
    of "Ascent Industries Co." says it was "Synalloy Corporation", the company of older reports), or given one
    ``entity`` — unless their metadata gives them different entities."""
    docs = [(c, list(names), (e or "").strip()) for c, names, e in docs]
    parent: dict[str, str] = {}
    given: dict[str, str] = {}  # root → the metadata entity of its values
    why: dict[str, set[str]] = {}

    def root(v: str) -> str:
        while parent.get(v, v) != v:
            v = parent[v]
        return v

    def join(x: str, y: str, reason: str) -> None:
        a, b = sorted((root(x), root(y)))
        if a == b or (given.get(a) and given.get(b) and given[a].casefold() != given[b].casefold()):
            return  # one already, or told apart by their metadata
        parent[b] = a
        if given.get(b):
            given.setdefault(a, given[b])
        why.setdefault(a, set()).update({reason, *why.pop(b, set())})

    for company, _, entity in docs:
        if entity:
            given.setdefault(company, entity)
    by_given: dict[str, str] = {}
    spelled: dict[str, str] = {}  # an entity as its first document writes it ("BYD", then "byd")
    for company, _, entity in docs:
        if entity:
            spelled.setdefault(entity.casefold(), entity)
            join(by_given.setdefault(entity.casefold(), company), company, JOINED_METADATA)
    by_core: dict[str, set[str]] = {}
    for company, _, _ in docs:
        by_core.setdefault(vocab.company_core(company), set()).add(company)
    for spellings in by_core.values():
        first, *rest = sorted(spellings)
        for other in rest:
            join(first, other, JOINED_LEGAL_FORM)
    extra: dict[str, list[str]] = {}
    for company, names, _ in docs:
        for name in names:
            same = by_core.get(vocab.company_core(name))
            if not same:
                extra.setdefault(company, []).append(name)
            for other in same or ():
                join(company, other, JOINED_FORMER_NAME)
    members: dict[str, set[str]] = {}
    for company, _, _ in docs:
        members.setdefault(root(company), set()).add(company)
    groups = {v: tuple(sorted(g)) for g in members.values() if len(g) > 1 for v in g}
    by_value: dict[str, Entity] = {}
    for r, g in members.items():
        name = spelled[given[r].casefold()] if given.get(r) else min(g, key=lambda n: (len(n), n))
        entity = Entity(name=name, names=tuple(sorted(g)), joined=tuple(sorted(why.get(r, ()))) if len(g) > 1 else ())
        for v in g:
            by_value[v] = entity
            if given.get(r) and vocab.company_core(name) not in {vocab.company_core(x) for x in g}:
                extra.setdefault(v, []).append(name)  # found by the name the metadata gives
    return CompanyEntities(groups=groups, extra=extra, by_value=by_value)


def renamed_companies(docs: Iterable[tuple[str, Sequence[str]]]) -> tuple[dict[str, tuple[str, ...]],
                                                                          dict[str, list[str]]]:
    """``company_entities`` without metadata entities: (groups, extra)."""
    found = company_entities((c, names, "") for c, names in docs)
    return found.groups, found.extra


class MetadataMatch(msgspec.Struct, frozen=True):
    conditions: tuple[Condition, ...]
    confident: bool  # a discriminative key (company/organisation) matched
    explanation: str
    llm_calls: int = 0
    scope: str = ""  # the LLM's single | multi | list for the question ("" offline or when it said nothing)
    question: Any = None  # the LLM's typed question, unvalidated (router.reading.from_llm validates it)


def contains_phrase(haystack: str, phrase: str) -> bool:
    return bool(phrase) and re.search(rf"(?<![a-z0-9]){re.escape(phrase)}(?![a-z0-9])", haystack) is not None


def company_aliases(value: str) -> set[str]:
    """How a question may write a company: "Amazon.com, Inc." → "amazon com", "amazoncom", "amazon" (the name
    without its web domain)."""
    norm = vocab.company_core(value)
    aliases = {norm, normalize_title(vocab.STATE_SUFFIX.sub(" ", value))}
    compact = norm.replace(" ", "")
    if len(compact) >= 3:
        aliases.add(compact)
    bare = vocab.company_core(_WEB_DOMAIN.sub(" ", value))
    if len(bare) >= 3 and bare != norm:
        aliases.add(bare)
    return {a for a in aliases if a}


def match_offline(question: str, kv: KnownValues, screen: Condition | None = None) -> MetadataMatch:
    """Match known metadata values mentioned in the question (companies, years, quarters, doc types); ``screen``:
    the fact condition the typed question states (``router.reading.fact_condition``)."""
    conds: list[Condition] = []
    notes: list[str] = []
    confident = False
    for key in COMPANY_KEYS:
        hits = kv.company_index(key).find(question)
        hits = list(dict.fromkeys(v for h in hits for v in kv.groups.get(h, (h,)))) if key == "company" else hits
        if hits:
            conds.append(Condition(key=key, op="in", value=sorted(hits)))
            notes.append(f"{key} in {sorted(hits)}")
            confident = True
            break
    question = periods.normalize_periods(question)
    years = periods.question_years(question)
    # the year key that the most documents carry with a stated year (e.g. curated doc_period over extracted)
    best_key, best_present, best_n = None, set(), 0
    for key in YEAR_KEYS:
        vals = kv.values.get(key, {})
        present = {v for v in vals if v.isdigit() and int(v) in years}
        n = sum(vals[v] for v in present)
        if n > best_n:
            best_key, best_present, best_n = key, present, n
    if best_key is not None:
        conds.append(Condition(key=best_key, op="in", value=sorted(int(v) for v in best_present)))
        notes.append(f"{best_key} in {sorted(best_present)}")
    quarters = periods.question_quarters(question)
    for key in QUARTER_KEYS:
        vals = kv.values.get(key, {})
        present = {v for v in vals if re.sub(r"\D", "", v) in {str(x) for x in quarters}}
        if present:
            conds.append(Condition(key=key, op="in", value=sorted(present)))
            notes.append(f"{key} in {sorted(present)}")
            break
    for pattern, type_values in vocab.QUESTION_TYPES:
        if not pattern.search(question):
            continue
        for key in TYPE_KEYS:
            present = {v for v in kv.values.get(key, {}) if v.lower().replace(" ", "_") in type_values}
            if present:
                conds.append(Condition(key=key, op="in", value=sorted(present)))
                notes.append(f"{key} in {sorted(present)}")
                break
        break
    if fact := screen:
        conds.append(fact)
        notes.append(f"fact {fact.value}")
        confident = True
    return MetadataMatch(conditions=tuple(conds), confident=confident,
                         explanation="; ".join(notes) or "no known metadata value in the question")


def validate_conditions(raw: Any, kv: KnownValues) -> tuple[Condition, ...]:
    """Keep only well-formed conditions on known keys with known values; raise on garbage."""
    if not isinstance(raw, list):
        raise ValidationError("conditions must be a list")
    out: list[Condition] = []
    for item in raw:
        if not isinstance(item, Mapping):
            continue
        key, op, value = item.get("key"), item.get("op"), item.get("value")
        if not isinstance(key, str) or key not in kv.values or op not in OPS:
            continue
        known = kv.values[key]
        if op == "eq":
            if str(value) in known:
                out.append(Condition(key, "in", [str(value)]))
        elif op == "in":
            vals = [str(v) for v in (value if isinstance(value, list) else [value]) if str(v) in known]
            if vals:
                out.append(Condition(key, "in", vals))
        elif op == "range" and isinstance(value, Mapping):
            bounds = {k: float(v) for k, v in value.items() if k in {"gte", "lte", "gt", "lt"}
                      and isinstance(v, int | float | str) and _is_number(v)}
            if bounds:
                out.append(Condition(key, "range", bounds))
        elif op == "contains" and isinstance(value, str) and 0 < len(value) <= 200:
            out.append(Condition(key, "contains", value))
    return tuple(out)


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


FACT_KEY = "fact"
"""The filter key of a fact condition: ``{"fact": {"concept": "revenue", "period": "FY2023", "gte": 1e9}}``."""
_FACT_PERIOD = re.compile(r"^(?:FY)?((?:19|20)\d{2})$|^(\d{4}-\d{2}-\d{2})$|^latest$|^$", re.I)
def fact_filter(value: Any) -> Condition:
    """A ``{"fact": {...}}`` request filter, validated: a vocabulary concept, an optional period ("FY2023",
    "2023", an ISO date, "latest"), and numeric bounds (gte, lte, gt, lt; base units)."""
    if not isinstance(value, Mapping):
        raise ValidationError('filter "fact": use {"concept": "revenue", "period": "FY2023", "gte": 1e9}')
    concept = value.get("concept")
    if concept not in measures.CONCEPT_BY_NAME:
        raise ValidationError(f'filter "fact": unknown concept {str(concept)[:40]!r} (see GET /kb/capabilities)')
    period = str(value.get("period") or "")
    if not _FACT_PERIOD.match(period):
        raise ValidationError(f'filter "fact": period {period[:40]!r} is not FY2023, 2023, 2023-12-31 or latest')
    bounds = {k: v for k, v in value.items() if k in {"gte", "lte", "gt", "lt"}}
    unknown = set(value) - {"concept", "period", "gte", "lte", "gt", "lt"}
    if unknown or not all(_is_number(v) for v in bounds.values()):
        raise ValidationError(f'filter "fact": unknown keys {sorted(unknown)} or a bound that is not a number')
    return Condition(FACT_KEY, "fact", {"concept": concept, "period": period, **{k: float(v) for k, v in
                                                                                 bounds.items()}})


def conditions_from_filters(filters: Mapping[str, Any]) -> tuple[Condition, ...]:
    """Explicit request filters: {key: value | [values] | {"gte":..,"lte":..} | {"contains": ".."}}, and
    ``{"fact": {"concept": .., "period": .., "gte": ..}}`` (``fact_filter``)."""
    out: list[Condition] = []
    for key, value in filters.items():
        if key == FACT_KEY and isinstance(value, Mapping) and "concept" in value:
            out.append(fact_filter(value))
            continue
        if not isinstance(key, str) or not store.METADATA_KEY.match(key):
            raise ValidationError(f"invalid filter key {key!r}")
        if isinstance(value, Mapping):
            if "contains" in value:
                out.append(Condition(key, "contains", str(value["contains"])))
                continue
            bounds = {k: v for k, v in value.items() if k in {"gte", "lte", "gt", "lt"}}
            if not bounds or not all(_is_number(v) for v in bounds.values()):
                raise ValidationError(f"filter {key!r}: use a value, a list, {{gte,lte}} or {{contains}}")
            out.append(Condition(key, "range", {k: float(v) for k, v in bounds.items()}))
        elif isinstance(value, list):
            out.append(Condition(key, "in", [_as_text(v) for v in value]))
        else:
            out.append(Condition(key, "in", [_as_text(value)]))
    return tuple(out)


def _as_text(value: Any) -> str:
    """How ``metadata ->> key`` renders a JSON scalar: true/false/null like JSON, others as str."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return str(value)


async def match_question(question: str, kv: KnownValues, chat: ChatModel,
                         screen: Condition | None = None, lines: Sequence[str] = ()) -> MetadataMatch:
    """LLM proposes conditions (validated); offline or on failure, known-value matching."""
    offline = match_offline(question, kv, screen)
    if chat.offline or not kv.values:
        return offline
    started = time.perf_counter()
    try:
        reply = await ask(chat, METADATA, metadata_prompt(question, kv.values, typed=typed_question_prompt(
            sorted(measures.CONCEPT_BY_NAME), sorted(METRIC_BY_NAME), lines)))
        conds = validate_conditions([msgspec.to_builtins(c) for c in reply.conditions], kv)
    except (LLMError, ValidationError) as exc:
        log.warning("router.metadata_llm_failed", error=str(exc))
        return msgspec.structs.replace(offline, explanation=offline.explanation + " (LLM failed: offline match)",
                                       llm_calls=1)
    conds = (*conds, *(c for c in offline.conditions if c.op == "fact"))  # the stated bound, read by rule
    confident = any(c.key in COMPANY_KEYS or c.op == "fact" for c in conds)
    scope = reply.scope or ""
    log.info("router.metadata_llm", conditions=len(conds), scope=scope,
             ms=round((time.perf_counter() - started) * 1000))
    return MetadataMatch(conditions=conds, confident=confident,
                         explanation="LLM filter: " + "; ".join(f"{c.key} {c.op} {c.value}" for c in conds),
                         llm_calls=1, scope=scope, question=reply.question)
