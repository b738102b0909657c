"""Follow-up questions offered under an answer computed from statement facts (issue 40 item 3): another headline
measure the company's own reports state, the year before the one asked when a report covers it, and another
company of the collection — each worded as a follow-up the conversation reader resolves ("And its net income?",
"What about 2022?", "How about Aurora Pharma?"; 那净利润呢？), in the question's language. Nothing is offered
under an answer about several companies, about no measure, or that found nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from kb.core.measures import CONCEPT_BY_NAME
from router import store
from router.catalog import Catalog
from router.crosslang import name_in
from router.facts import FactsAnswer
from router.question import MeasureRef, Question
from router.scope import doc_entity

HEADLINE = ("revenue", "net_income", "operating_income", "cfo", "total_assets", "total_liabilities")
"""The measures offered next, in this order (those the company's reports state)."""
MAX_SUGGESTIONS = 3


def _said(kind: str, value: str, lang: str) -> str:
    if lang == "zh":
        return {"measure": f"那{value}呢？", "year": f"那{value}年呢？", "company": f"{value}呢？"}[kind]
    return {"measure": f"And its {value}?", "year": f"What about {value}?", "company": f"How about {value}?"}[kind]


def _entity_name(catalog: Catalog, company: str) -> str:
    """A company value by its entity's name ("BYD" for 比亚迪 given that entity; "Amcor" for "Amcor PLC")."""
    entity = catalog.entities.get(company)
    return entity.name if entity is not None else company


async def follow_ups(pool: asyncpg.Pool, catalog: Catalog, q: Question | None, facts: FactsAnswer | None,
                     cited: Sequence[int], within: Sequence[int] | None = None) -> tuple[str, ...]:
    """Up to ``MAX_SUGGESTIONS`` follow-ups to an answer about one company's measure: computed from its facts
    (``facts``), or read from its one cited report (``cited``); none otherwise. A measure is offered only when
    the company's reports state it as a fact."""
    if q is None or not q.measures or len(q.entities.names) > 1:
        return ()
    if facts is not None:
        if not facts.verdict or not facts.used or len({u.entity for u in facts.used}) != 1:
            return ()
        doc_id = facts.used[0].doc_id
    elif q.entities.names and len(set(cited)) == 1:
        doc_id = cited[0]
    else:
        return ()
    fields = catalog.docs.get(doc_id)
    mine = _entity_name(catalog, doc_entity(fields.metadata)) if fields is not None else ""
    if not mine:
        return ()
    lang, asked = q.lang, {m.name for m in q.measures}
    reports = [d for d in catalog.company_reports(doc_id) or (doc_id,) if within is None or d in within]
    out: list[str] = []
    stated = await store.stated_concepts(pool, reports, HEADLINE)
    if measure := next((m for m in HEADLINE if m in stated and m not in asked), None):
        out.append(_said("measure", name_in(MeasureRef(measure), lang) or CONCEPT_BY_NAME[measure].label, lang))
    years = sorted({p.year for p in q.periods if p.year})
    covered = {int(y) for d in reports if str(y := catalog.docs[d].metadata.get("fiscal_year", "")).isdigit()}
    if len(years) == 1 and years[0] - 1 in covered:
        out.append(_said("year", str(years[0] - 1), lang))
    if within is None:  # the collection's companies, kept by its catalog (no pass over its documents per query)
        other = next((n for n in catalog.entity_names if n != mine), "")
    else:
        other = min(({_entity_name(catalog, c) for d in within if (f := catalog.docs.get(d)) is not None
                      and (c := doc_entity(f.metadata))} - {mine, ""}), key=lambda n: (len(n), n), default="")
    if other:
        out.append(_said("company", other, lang))
    return tuple(out[:MAX_SUGGESTIONS])
