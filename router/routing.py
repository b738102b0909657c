"""Document routing strategies, each composing signals over the query's state: metadata, semantic
(DocScore), description, auto. A strategy is a function ``route(state, within) -> RoutingResult``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import msgspec
import structlog

from kb.core.errors import LLMError
from kb.core.providers.steps import ask
from router import store
from router.metadata import COMPANY_KEYS, conditions_from_filters, doc_year, period_prior, question_period
from router.policy import ROUTING
from router.prompts import DESCRIPTION, description_prompt
from router.signals import description_shortlist, doc_scores, metadata_match
from router.state import QueryState
from router.types import STRATEGIES, DocCandidate, Oracle, QuestionScope, RoutingResult

log = structlog.get_logger("router.routing")

Route = Callable[[QueryState, Sequence[int] | None], Awaitable[RoutingResult]]


async def semantic(state: QueryState, within: Sequence[int] | None = None) -> RoutingResult:
    """Top chunks by pgvector cosine (plus full-text hits) grouped per document:
    DocScore = sum(chunk scores) / sqrt(N + 1)."""
    scores = await doc_scores(state, within)
    names = state.catalog.names(list(scores))
    ranked = sorted(scores.items(), key=lambda kv: -kv[1][0])
    cands = tuple(DocCandidate(d, names.get(d, str(d)), round(s, 4), f"DocScore {s:.3f} from {n} chunk hits")
                  for d, (s, n) in ranked)
    return RoutingResult(strategy_used="semantic", documents=cands[: state.top_docs], candidates=cands[:20])


async def description(state: QueryState, within: Sequence[int] | None = None) -> RoutingResult:
    """Shortlist by description embedding + BM25 (works for 10,000+ documents), then the LLM picks."""
    shortlist = await description_shortlist(state, within, state.settings.description_shortlist)
    offline = RoutingResult(strategy_used="description", documents=tuple(shortlist[: state.top_docs]),
                            candidates=tuple(shortlist[:20]), notes=("offline: description shortlist ranking",))
    if state.chat.offline or not shortlist:
        return offline
    descs = {d: f.description for d, f in state.catalog.fields([c.doc_id for c in shortlist]).items()}
    try:
        reply = await ask(state.chat, DESCRIPTION, description_prompt(state.question, shortlist, descs,
                                                                      state.top_docs))
    except LLMError as exc:
        log.warning("router.description_llm_failed", error=str(exc))
        return RoutingResult(strategy_used="description", documents=offline.documents,
                             candidates=offline.candidates, notes=("LLM failed: offline shortlist",), llm_calls=1)
    by_id = {str(c.doc_id): c for c in shortlist}
    chosen = [by_id[str(p)] for p in reply.answer if str(p) in by_id]
    docs = tuple(DocCandidate(c.doc_id, c.name, c.score, "chosen by LLM from descriptions")
                 for c in dict.fromkeys(chosen))[: state.top_docs]
    return RoutingResult(strategy_used="description", documents=docs, candidates=tuple(shortlist[:20]), llm_calls=1)


async def metadata(state: QueryState, within: Sequence[int] | None = None) -> RoutingResult:
    """Documents matching the validated conditions (explicit filters always applied), best-first by DocScore."""
    match = await metadata_match(state)
    conds, explanation = match.conditions, match.explanation
    docs: list[tuple[int, str]] = []
    attempt = list(conds)
    while attempt and not docs:  # relax period/type conditions (last first) until something matches
        docs = await store.run_filter(state.pool, state.collection_id, attempt)
        if not docs:
            attempt.pop()
    if conds and len(attempt) < len(conds):
        explanation += f" (relaxed to {len(attempt)} of {len(conds)} conditions)"
    if not conds and within is not None:
        docs = list(state.catalog.names(within).items())
    if not docs and within is None:  # no company, period or type the collection knows: routed as auto instead
        why = "no document matched its conditions" if conds else "the question names nothing the collection's metadata knows"
        fallback = await auto(state, within)
        return msgspec.structs.replace(
            fallback, strategy_used="metadata→auto", llm_calls=fallback.llm_calls + match.llm_calls,
            notes=(f"metadata: {why} ({explanation}); fell back to auto", *fallback.notes))
    if within is not None:
        allowed = set(within)
        docs = [d for d in docs if d[0] in allowed]
    scores = await doc_scores(state, [d for d, _ in docs]) if docs else {}
    # within the matches: the same period/type prior as auto, then DocScore
    period = question_period(state.question)
    metas = state.catalog.metadata([d for d, _ in docs])
    years = sorted({y for m in metas.values() if (y := doc_year(period, m)) is not None})
    company = any(c.key in COMPANY_KEYS for c in conds)
    prior = {d: period_prior(period, metas.get(d, {}), years, same_entity=company)[0] for d, _ in docs}
    ranked = sorted(docs, key=lambda d: (-prior[d[0]], -scores.get(d[0], (0.0, 0))[0], d[0]))
    cands = tuple(DocCandidate(d, n, round(scores.get(d, (0.0, 0))[0], 4),
                               f"metadata: {explanation}" + (f"; prior +{prior[d]:.2f}" if prior[d] else ""))
                  for d, n in ranked)
    return RoutingResult(strategy_used="metadata", documents=cands[: state.top_docs], candidates=cands[:20],
                         conditions=(*conditions_from_filters(state.req.filters), *conds), notes=(explanation,),
                         llm_calls=match.llm_calls, scope_hint=match.scope,
                         llm_question=match.question)


async def auto(state: QueryState, within: Sequence[int] | None = None) -> RoutingResult:
    """A confident metadata filter (company/organisation) narrows the candidates; period and type
    conditions boost; DocScore ranks; descriptions break ties and rescue when nothing matched."""
    notes: list[str] = []
    match = await metadata_match(state)
    conds = match.conditions
    hard = tuple(c for c in conds if c.key in COMPANY_KEYS)
    candidate_ids: list[int] | None = list(within) if within is not None else None
    if within is not None:
        notes.append(f"explicit filters → {len(within)} documents")
    if hard:
        rows = await store.run_filter(state.pool, state.collection_id, hard)
        allowed = set(candidate_ids) if candidate_ids is not None else None
        ids = [d for d, _ in rows if allowed is None or d in allowed]
        if ids:
            candidate_ids = ids
            notes.append(f"metadata ({'; '.join(f'{c.key} in {c.value}' for c in hard)}) → {len(ids)} candidates")
        else:
            notes.append("metadata company filter matched nothing; not narrowed")
    narrowed = bool(hard) and candidate_ids is not None
    scores = await doc_scores(state, candidate_ids) if candidate_ids is None or candidate_ids else {}
    desc = await description_shortlist(state, candidate_ids, max(state.top_docs * 3, 10))
    combined = _auto_scores(state, scores, {c.doc_id: c.score for c in desc}, candidate_ids, narrowed, notes)
    names = state.catalog.names([d for d, _, _ in combined])
    cands = tuple(DocCandidate(d, names.get(d, str(d)), round(s, 4), why) for d, s, why in combined)
    if not cands:
        notes.append("nothing matched: description shortlist over the whole collection")
        cands = tuple(await description_shortlist(state, within, state.top_docs))
    if not conds:
        notes.append(match.explanation)
    return RoutingResult(strategy_used="auto", documents=cands[: state.top_docs], candidates=cands[:20],
                         conditions=conds, notes=tuple(notes), llm_calls=match.llm_calls, scope_hint=match.scope,
                         llm_question=match.question)


def _auto_scores(state: QueryState, scores: dict[int, tuple[float, int]], desc_score: dict[int, float],
                 candidate_ids: list[int] | None, narrowed: bool, notes: list[str]) -> list[tuple[int, float, str]]:
    """(doc_id, score, why) best first: the period/type prior outranks content similarity (DocScore and
    description), which breaks ties."""
    ids = set(scores) | set(desc_score)
    if candidate_ids is not None:
        ids = (ids & set(candidate_ids)) | set(candidate_ids[:50])
    period = question_period(state.question)
    metas = state.catalog.metadata(list(ids))
    years = sorted({y for m in metas.values() if (y := doc_year(period, m)) is not None})
    ends = [str(m["period_end_date"]) for m in metas.values() if m.get("period_end_date")]
    latest_end = max(ends) if ends else None
    if period.years or period.quarters or period.doc_types:
        notes.append(f"period prior: years {list(period.years)}, quarters {list(period.quarters)}, "
                     f"types {list(period.doc_types)}")
    top_sem = max((v for v, _ in scores.values()), default=0.0) or 1.0
    sem_norm = {d: v / top_sem for d, (v, _) in scores.items()}  # ratios survive, unlike min-max
    combined = []
    for d in ids:
        boost, boost_why = period_prior(period, metas.get(d, {}), years, latest_end, same_entity=narrowed)
        s = (ROUTING.auto_semantic * sem_norm.get(d, 0.0) + ROUTING.auto_description * desc_score.get(d, 0.0)
             + ROUTING.prior_weight * boost)
        why = [f"DocScore {scores[d][0]:.3f} ({scores[d][1]} hits)" if d in scores else "no chunk hits"]
        if d in desc_score:
            why.append(f"description {desc_score[d]:.2f}")
        if narrowed:
            why.append("metadata match")
        if boost_why:
            why.append(f"prior +{boost:.2f} ({boost_why})")
        combined.append((d, s, ", ".join(why)))
    combined.sort(key=lambda x: (-x[1], x[0]))
    return combined


ROUTERS: dict[str, Route] = {"auto": auto, "metadata": metadata, "semantic": semantic, "description": description}
if tuple(ROUTERS) != STRATEGIES:  # a strategy is added in router.types.Strategy and registered here
    raise ImportError(f"router.routing.ROUTERS {tuple(ROUTERS)} differ from router.types.STRATEGIES {STRATEGIES}")


async def given(state: QueryState) -> RoutingResult:
    """The request's own documents (``documents``), in its order, those its filters allow: no routing. Each
    keeps its DocScore for the trace."""
    allowed = list(state.within or ())  # the request's documents the filters allow, in its order (state.prepare)
    scores = await doc_scores(state, allowed) if allowed else {}
    names = state.catalog.names(allowed)
    cands = tuple(DocCandidate(d, names.get(d, str(d)), round(scores.get(d, (0.0, 0))[0], 4), "given in the request")
                  for d in allowed)
    note = f"{len(state.given)} documents given in the request: routing skipped"
    if len(allowed) < len(state.given):
        note += f"; the filters keep {len(allowed)} of them"
    return RoutingResult(strategy_used="documents", documents=cands, candidates=cands, notes=(note,))


async def route(state: QueryState, oracle: Oracle | None = None) -> tuple[RoutingResult, QuestionScope]:
    """The routing stage: the request's own documents when it names them; else its strategy (within the explicit
    filters), the scope widened when the LLM saw more than the rules, and DocScore for a list question that named
    no metadata."""
    routing = await given(state) if state.given else await ROUTERS[state.req.strategy](state, state.within)
    scope = state.scope
    if oracle is not None and oracle.docs:  # benchmark diagnostics: the gold documents are routed
        names = state.catalog.names(list(oracle.docs))
        routing = RoutingResult(strategy_used=f"{routing.strategy_used}+oracle", documents=tuple(
            DocCandidate(d, names.get(d, str(d)), 1.0, "oracle") for d in oracle.docs))
    if scope.kind == "single" and routing.scope_hint in {"multi", "list"}:  # the LLM saw more than the rules
        scope = msgspec.structs.replace(scope, kind=routing.scope_hint,
                                        reason=f"LLM (route.metadata): {routing.scope_hint}; rules: {scope.reason}")
    if scope.kind == "list" and not routing.documents and not state.given:  # "which of these companies…"
        by_score = await semantic(state, state.within)
        routing = msgspec.structs.replace(routing, documents=by_score.documents, candidates=by_score.candidates,
                                          notes=(*routing.notes, "list question: documents by DocScore"))
    return routing, scope

