"""Question scope: single document, comparison / change over time across documents, or a list over many.

Offline the decision is made by rules over the collection's known metadata values (companies) and the
wording; with an LLM, one small JSON call (``query.plan``) confirms the scope and writes one sub-question
per routed document. Every multi-document question gets a per-document sub-question (used for that
document's tree search and in-node retrieval) and a list of *needed* documents, each of which receives
its share of the evidence handed to synthesis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
import msgspec
import structlog

from kb.core import lexicon, measures, periods
from kb.core.measures import METRIC_BY_NAME
from kb.core.text import normalize_title, tokenize
from router import store
from router.events import asked_event, over_companies
from router.metadata import (
    COMPANY_KEYS,
    QUARTER_KEYS,
    YEAR_KEYS,
    KnownValues,
    company_aliases,
    contains_phrase,
    match_offline,
    meta_int,
    question_period,
    without_companies,
)
from router.prompts import PlanReply
from router.question import Question
from router.types import DocCandidate, QuestionScope, RoutingResult, ScopePlan, SubQuestion

log = structlog.get_logger("router.scope")

SINGLE_TOP_DOCS = 3
"""Documents routed for a single-document question when the request leaves ``top_docs`` unset."""
LIST_TOP_DOCS = 10
"""Documents routed for a list/aggregation question when the request leaves ``top_docs`` unset."""
MAX_TOP_DOCS = 20
COMPARATIVE_YEARS = 2
"""Stated years of one entity at most this far apart are one report's comparatives (a 10-K carries the two
or three preceding years, a 10-Q the prior year end): "FY2021 vs FY2022" is answered from the FY2022 report."""

_CAP_WORD = r"[A-Z](?:[a-z][\w&.-]*|[A-Z&.-]+\b)"  # "Zephyr", or as filings write it: "ZEPHYR", "CO." (not "FY2023")
_CAP_PHRASE = re.compile(rf"(?<![\w'])({_CAP_WORD}(?:\s+(?:&\s+)?{_CAP_WORD})*)")
_GENERIC_CAPS = frozenset(
    """what which who whom whose when where why how is are was were did does do has have had can could should
    would will compare list name give show tell describe summarize summarise explain analyze analyse assess
    in on for from of the a an and or if assume based according among as at by with please note item part
    section table exhibit appendix schedule fiscal quarter year annual quarterly report inc corp corporation
    company ltd plc llc group holdings fy ttm yoy usd eps gaap ebitda capex""".split()
) | frozenset(lexicon.MONTH_NAMES)


def doc_entity(meta: Mapping[str, Any]) -> str:
    """The document's company/organisation value ('' when it has none)."""
    return str(next((meta[k] for k in COMPANY_KEYS if meta.get(k)), ""))


def doc_period(meta: Mapping[str, Any]) -> str:
    """A short period label from the metadata: "Q3 FY2023", "FY2023", or the free-text ``period``."""
    year, quarter = meta_int(meta, YEAR_KEYS), meta_int(meta, QUARTER_KEYS)
    if year and quarter:
        return f"Q{quarter} FY{year}"
    if year:
        return f"FY{year}"
    return str(meta.get("period") or "")


# --------------------------------------------------------------------------- offline scope


def classify_scope(question: str, kv: KnownValues, reading: Question | None = None) -> QuestionScope:
    """Single, multi (comparison or change over time) or list. An understood typed question (``reading``)
    decides (``read_scope``); where the wording rules would say otherwise it is logged and said in the reason.
    Otherwise the rules over known values and wording decide, widened where the reading sees more — companies
    named by short forms, a ranking over the collection, a series over years beyond one report's comparatives."""
    scope = _rules_scope(question, kv)
    if reading is not None and (typed := read_scope(reading, kv, scope)) is not None:
        if (typed.kind, typed.series) != (scope.kind, scope.series):
            log.info("scope.read_differs", read=typed.kind, read_series=typed.series, wording=scope.kind,
                     wording_series=scope.series, wording_reason=scope.reason)
            return msgspec.structs.replace(typed, reason=f"{typed.reason} (the wording alone: {scope.kind}, "
                                           f"{scope.reason})")
        return typed
    if reading is None or scope.kind != "single":
        return scope
    names = reading.entities.names
    if len({kv.entity(n) for n in names}) >= 2:  # who is named needs no measure to be known
        return msgspec.structs.replace(scope, kind="multi", entities=names, key=scope.key or "company",
                                       reason=f"the question as read names {len(names)} companies: {', '.join(names)}")
    if reading.operation is None or reading.hard_unknown:
        return scope
    # an extreme over the collection is a list whether or not a word names the measure (it may be found by
    # meaning, or only in the text): "which company had the highest restructuring expenses"
    if not names and not scope.entities and reading.operation in ("max", "min", "rank", "group", "screen") \
            and reading.over != "periods":  # "which year saw the largest …": one company's series, not a list
        return msgspec.structs.replace(scope, kind="list", reason=f"the question as read: {reading.operation} over "
                                       "the collection")
    if not reading.measures:
        return scope
    years = sorted({p.year for p in reading.periods if p.year})
    if reading.operation in ("series", "change") and len(years) >= 2 and years[-1] - years[0] > COMPARATIVE_YEARS:
        return msgspec.structs.replace(scope, kind="multi", series=True, reason=f"the question as read: a "
                                       f"{reading.operation} over {years[0]}–{years[-1]}")
    return scope


def read_scope(reading: Question, kv: KnownValues, rules: QuestionScope) -> QuestionScope | None:
    """The scope the typed question decides (None when it was not understood: the wording rules decide). Named
    companies are the reading's and the metadata's (``rules``); two or more → multi; an extreme, ranking, group or
    screen naming none → a list over the collection; a series, change or comparison over one company's periods
    beyond one report's comparatives (or worded as one: "trend", "over the years") → multi over every report of
    the company; else one document."""
    if not reading.understood or reading.operation is None:
        return None
    names = tuple(dict.fromkeys((*reading.entities.names, *rules.entities)))
    distinct = {kv.entity(n) for n in names}
    named = {"entities": rules.entities, "key": rules.key, "renamed": rules.renamed}
    op = reading.operation
    years = sorted({p.year for p in reading.periods if p.year})
    over_time = rules.series or (op in ("series", "change", "compare") or reading.over == "periods") and (
        (len(years) >= 2 and years[-1] - years[0] > COMPARATIVE_YEARS)
        or any(p.relative == "last_n" and p.n > COMPARATIVE_YEARS + 1 for p in reading.periods))
    if len(distinct) >= 2:
        return QuestionScope(kind="multi", reason=f"the question as read: {op} over {len(distinct)} companies: "
                             f"{', '.join(names)}", series=over_time,
                             **{**named, "entities": rules.entities if rules.kind == "multi" else names,
                                "key": rules.key or "company"})
    if not names and op in ("max", "min", "rank", "group", "screen") and reading.over != "periods":
        return QuestionScope(kind="list", reason=f"the question as read: {op} over the collection")
    if over_time:
        span = f"{years[0]}–{years[-1]}" if len(years) >= 2 else "the years"
        return QuestionScope(kind="multi", reason=f"the question as read: a {op} over {span}", series=True, **named)
    return QuestionScope(kind="single", reason=f"the question as read: {op} of "
                         f"{names[0] if names else 'one company'}", **named)


def _rules_scope(question: str, kv: KnownValues) -> QuestionScope:
    match = match_offline(question, kv)
    company = next((c for c in match.conditions if c.key in COMPANY_KEYS), None)
    entities = _distinct_entities(company.value if company else [])
    renamed = tuple((e, kv.entity(e)) for e in entities if kv.entity(e) != e)
    named = {"entities": entities, "key": company.key if company else "", "renamed": renamed}
    distinct = len({kv.entity(e) for e in entities})  # a renamed company's names are one entity
    series = lexicon.SCOPE_SERIES.search(question)
    years = sorted(question_period(question).years)
    if not series and (zh := lexicon.SCOPE_SERIES_ZH.search(question)) \
            and (len(years) >= 2 or periods.ZH_YEAR_RANGE.search(question)):
        series = zh  # "从2021年到2024年，洋河股份的长期股权投资是如何变化的？"
    if distinct >= 2:
        return QuestionScope(kind="multi", reason=f"names {distinct} entities: {', '.join(entities)}",
                             series=bool(series), **named)
    if series:
        return QuestionScope(kind="multi", reason=f"change over time: '{series.group(0)}'", series=True, **named)
    if not entities and (listing := lexicon.SCOPE_LIST.search(question)):
        return QuestionScope(kind="list", reason=f"list over documents: '{listing.group(0)}'")
    if not entities and over_companies(question) and (event := asked_event(question)) is not None:
        return QuestionScope(kind="list", reason=f"an event asked over the companies: {event.name} ('{event.cue}')")
    if len(years) >= 2 and lexicon.SCOPE_COMPARE.search(question) and years[-1] - years[0] > COMPARATIVE_YEARS:
        return QuestionScope(kind="multi", reason=f"compares periods {years[0]}–{years[-1]} beyond one report's "
                             "comparatives", series=True, **named)
    if len(years) >= 2:
        return QuestionScope(kind="single", reason=f"periods {years[0]}–{years[-1]} are comparatives of the latest "
                             "report", **named)
    return QuestionScope(kind="single", reason="one entity or none, no comparison wording", **named)


def _distinct_entities(values: Sequence[str]) -> tuple[str, ...]:
    """Company values, one per entity ("Apple" and "Apple Inc." are one)."""
    out: list[str] = []
    seen: list[set[str]] = []
    for v in values:
        aliases = company_aliases(v)
        if any(aliases & s for s in seen):
            continue
        seen.append(aliases)
        out.append(v)
    return tuple(out)


def effective_top_docs(requested: int | None, scope: QuestionScope, kv: KnownValues) -> int:
    """``top_docs`` of the request, or by scope: 3 for one document, every named entity's documents for a
    change over time, one per entity for a comparison, 10 for a list (at most 20)."""
    if requested is not None:
        return requested
    if scope.kind == "list":
        return LIST_TOP_DOCS
    if scope.kind == "multi":
        counts = kv.values.get(scope.key, {}) if scope.key else {}
        if scope.series and scope.entities:
            n = sum(counts.get(e, 1) for e in scope.entities)
        else:
            n = len(scope.entities)
        return max(SINGLE_TOP_DOCS, min(MAX_TOP_DOCS, n))
    return SINGLE_TOP_DOCS


async def missing_entities(pool: asyncpg.Pool, collection_id: int, question: str, kv: KnownValues) -> tuple[str, ...]:
    """Names in the question that the collection does not know: capitalised phrases (several words, a
    possessive, or one side of "A and B") that are no known metadata value and have a word no chunk of the
    collection contains: "Compare Aurora Pharma and Zephyr Motors" → ("Zephyr Motors",)."""
    known = normalize_title(" ".join(v for key in COMPANY_KEYS for v in kv.values.get(key, {})))
    phrases: list[str] = []
    for m in _CAP_PHRASE.finditer(question):
        words = re.sub(r"'s\b", "", m.group(1)).split()
        while words and words[0].lower() in _GENERIC_CAPS:
            words.pop(0)
        phrase = " ".join(w for w in words if w.lower() not in _GENERIC_CAPS).strip(" .&-")
        if len(phrase) < 3 or contains_phrase(known, normalize_title(phrase)):
            continue
        after, before = question[m.end(): m.end() + 2], question[max(0, m.start() - 9): m.start()]
        # a name, not a capitalised word: several words, a possessive, or one side of "A and B" / "A vs B"
        if (len(words) >= 2 or after.startswith(("'", "’")) or re.search(r"\b(?:and|or|vs\.?|versus)\s+$", before)
                or re.match(r"\s+(?:and|or|vs\.?|versus)\b", question[m.end():])):
            phrases.append(phrase)
    if not phrases:
        return ()
    return await store.phrases_not_in_collection(pool, collection_id, list(dict.fromkeys(phrases)))


# --------------------------------------------------------------------------- routing completion and plan


def _entity_of(meta: Mapping[str, Any], scope: QuestionScope) -> str | None:
    """Which of the scope's entities the document belongs to (None: none of them)."""
    value = doc_entity(meta)
    if not value:
        return None
    aliases = company_aliases(value)
    for e in scope.entities:
        if aliases & company_aliases(e):
            return dict(scope.renamed).get(e, e)  # the reports of a renamed company are one entity's
    return None


def complete_routing(routing: RoutingResult, scope: QuestionScope, metas: Mapping[int, Mapping[str, Any]],
                     top_docs: int) -> tuple[RoutingResult, tuple[int, ...]]:
    """Add the best candidate of each named entity that no routed document covers (and, for a change over
    time, the entity's further candidates up to ``top_docs``); returns the routing and the added ids."""
    if scope.kind != "multi" or not scope.entities:
        return routing, ()
    docs = list(routing.documents)
    covered = {_entity_of(metas.get(d.doc_id, {}), scope) for d in docs}
    added: list[DocCandidate] = []
    for cand in routing.candidates:
        if any(cand.doc_id == d.doc_id for d in docs):
            continue
        entity = _entity_of(metas.get(cand.doc_id, {}), scope)
        if entity is None:
            continue
        if entity not in covered or (scope.series and len(docs) < top_docs):
            covered.add(entity)
            new = DocCandidate(cand.doc_id, cand.name, cand.score, f"added: {entity} is named in the question; "
                               f"{cand.why}")
            docs.append(new)
            added.append(new)
    if not added:
        return routing, ()
    return msgspec.structs.replace(routing, documents=tuple(docs)), tuple(a.doc_id for a in added)


def needed_documents(routing: RoutingResult, scope: QuestionScope, metas: Mapping[int, Mapping[str, Any]]) -> tuple[int, ...]:
    """The routed documents that get an evidence share: every routed document for a list or an open change
    over time; per named entity its best routed document (all of them for a change over time)."""
    ids = [d.doc_id for d in routing.documents]
    if scope.kind == "single":
        return tuple(ids[:1])
    if scope.kind == "list" or not scope.entities:
        return tuple(ids)
    out: list[int] = []
    seen: set[str] = set()
    for d in ids:
        entity = _entity_of(metas.get(d, {}), scope)
        if entity is None or (entity in seen and not scope.series):
            continue
        seen.add(entity)
        out.append(d)
    return tuple(out) or tuple(ids[:1])


def topic(question: str, scope: QuestionScope, reading: Question | None = None) -> str:
    """What to find in each document: the measures the question was read to ask (by their names in the
    question's language: 营业收入 for revenue asked in Chinese), then the question's own words without entity
    names, periods and framing words. A Chinese question asked about a measure is the measure's names only
    (its other words are framing: 根据…的财报数据, 变化趋势是怎样的)."""
    names = measure_words(reading) if reading is not None else []
    if reading is not None and reading.lang == "zh" and names:
        return " ".join(names)
    text = lexicon.RANGES_TAIL.sub("", without_companies(question, scope.entities))
    text = periods.PERIOD_MENTION.sub(" ", text)
    words = [w for w in re.findall(r"[A-Za-z0-9][\w&%$.'-]*", text) if w.lower().strip(".'") not in lexicon.FRAME_WORDS]
    if lexicon.is_zh(text) and not names:  # a Chinese question no measure was read from: its Han words
        words = _ZH_WORDS.findall(periods.ZH_PERIOD_MENTION.sub(" ", text))
    have = set(tokenize(" ".join(words)))
    extra = [n for n in names if not set(tokenize(n)) <= have]
    return " ".join([*extra, *words]).strip(" .?") or question.strip()


_ZH_WORDS = re.compile(r"[\u4e00-\u9fffA-Za-z0-9][\u4e00-\u9fff\w&%$.'-]*")


def measure_words(reading: Question) -> list[str]:
    """The names of the measures a question was read to ask, in its language: a vocabulary concept by its
    label (English) or its Chinese statement lines, a metric by its label, a printed line or a formula as
    written."""
    out: list[str] = []
    for m in reading.measures:
        concept = measures.CONCEPT_BY_NAME.get(m.name) if m.kind == "concept" else None
        if concept is not None:
            out.extend(concept.chinese[:2] if reading.lang == "zh" and concept.chinese else (concept.label,))
        elif m.kind == "metric" and m.name in METRIC_BY_NAME:
            out.append(METRIC_BY_NAME[m.name].label)
        elif m.kind in ("line", "formula"):
            out.append(m.name)
    return list(dict.fromkeys(out))


def offline_sub_questions(question: str, scope: QuestionScope, routing: RoutingResult,
                          metas: Mapping[int, Mapping[str, Any]], needed: Sequence[int],
                          reading: Question | None = None) -> tuple[SubQuestion, ...]:
    """One sub-question per needed document: its entity and period, then the topic ("Northwind Energy FY2023
    revenue")."""
    what = topic(question, scope, reading)
    out = []
    for d in routing.documents:
        if d.doc_id not in needed:
            continue
        meta = metas.get(d.doc_id, {})
        entity, period = doc_entity(meta), doc_period(meta)
        prefix = " ".join(x for x in (entity, period) if x)
        out.append(SubQuestion(doc_id=d.doc_id, doc_name=d.name, question=f"{prefix} {what}".strip(),
                               entity=entity, period=period))
    return tuple(out)


def validate_plan(reply: PlanReply, routing: RoutingResult,
                  top_docs: int) -> tuple[list[tuple[int, str]], list[str]]:
    """([(doc_id, sub-question)], dropped) from the model's plan: unknown documents, duplicates, empty
    sub-questions and entries beyond ``top_docs`` are dropped and named."""
    routed = {str(d.doc_id): d.doc_id for d in routing.documents}
    kept: list[tuple[int, str]] = []
    dropped: list[str] = []
    for item in reply.sub_questions:
        raw, text = str(item.doc_id).strip(), item.sub_question.strip()
        if raw not in routed:
            dropped.append(f"doc {raw[:40]!r}: not a routed document")
        elif any(d == routed[raw] for d, _ in kept):
            dropped.append(f"doc {raw}: duplicate")
        elif not text:
            dropped.append(f"doc {raw}: empty sub-question")
        elif len(kept) >= top_docs:
            dropped.append(f"doc {raw}: beyond top_docs={top_docs}")
        else:
            kept.append((routed[raw], text[:500]))
    return kept, dropped


# --------------------------------------------------------------------------- evidence per document


def evidence_share(top_k: int, needed: int) -> int:
    """Evidence pieces each needed document receives at least: ``max(1, top_k // n)``."""
    return max(1, top_k // max(1, needed))


def allot_evidence(ranked_per_doc: Mapping[int, Sequence[Any]], needed: Sequence[int], global_order: Sequence[Any],
                   top_k: int) -> list[Any]:
    """Each needed document's best ``evidence_share`` pieces first (in ``needed`` order), then the best
    remaining pieces by ``global_order`` until ``top_k`` (the total is ``max(top_k, share · n)``).
    The result is grouped by document, each group best first."""
    share = evidence_share(top_k, len(needed))
    chosen: dict[int, list[Any]] = {d: list(ranked_per_doc.get(d, ()))[:share] for d in needed}
    taken = {c.chunk_id for group in chosen.values() for c in group}
    total = sum(len(g) for g in chosen.values())
    for c in global_order:
        if total >= top_k:
            break
        if c.chunk_id in taken:
            continue
        chosen.setdefault(c.doc_id, []).append(c)
        taken.add(c.chunk_id)
        total += 1
    return [c for group in chosen.values() for c in group]


FOUND_COVERAGE = 0.5
"""A document's evidence answers its sub-question when it contains topic words carrying at least this share of
their IDF weight (IDF over the documents in the evidence): "product recall" is found only where "recall" is."""


def evidence_found(question: str, evidence: Sequence[Any], plan: ScopePlan) -> dict[int, bool]:
    """Per document of the evidence (and every needed one): does its evidence speak to its sub-question?"""
    texts: dict[int, list[str]] = {d: [] for d in plan.needed}
    for c in evidence:
        texts.setdefault(c.doc_id, []).append(c.text)
    tokens = {d: set(tokenize(" ".join(t))) for d, t in texts.items() if t}
    n = max(1, len(tokens))
    out = {}
    for d in texts:
        have = tokens.get(d)
        if not have:
            out[d] = False
            continue
        terms = topic_terms(plan.sub_question(d), question)
        idf = {t: math.log(1 + n / (0.5 + sum(t in toks for toks in tokens.values()))) for t in terms}
        out[d] = not idf or sum(w for t, w in idf.items() if t in have) / sum(idf.values()) >= FOUND_COVERAGE
    return out


def topic_terms(sub_question: SubQuestion | None, question: str) -> list[str]:
    """The words a document's evidence must contain to count as found (entity and period words removed)."""
    text = sub_question.question if sub_question else question
    drop = set(tokenize(f"{sub_question.entity} {sub_question.period}")) if sub_question else set()
    return [t for t in dict.fromkeys(tokenize(text)) if t not in drop and t not in lexicon.FRAME_WORDS
            and not periods.PERIOD_TOKEN.fullmatch(t)]
