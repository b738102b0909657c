"""ONE synthesis call over the evidence blocks; offline, an extractive cited answer."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import structlog

from kb.core import lexicon as lx
from kb.core.errors import LLMError
from kb.core.measures import CONCEPT_BY_NAME
from kb.core.periods import question_quarters, question_years, spans_named, stated_months
from kb.core.providers import ChatModel
from kb.core.text import Figure, figures, same_figure, split_sentences, tokenize, unit_label
from kb.core.vocab import line_concept, question_concept
from router.events import asked_event, event_answer
from router.facts import FactsAnswer
from router.members import asked_members, counted_members, titled_members
from router.prompts import (
    NOT_STATED,
    SYNTHESIS_PURPOSE,
    SYNTHESIS_SYSTEM,
    multi_synthesis_prompt,
    synthesis_prompt,
)
from router.rows import (
    GENERIC,
    RowMatch,
    amount,
    best_row,
    change_of,
    measure_words,
    names_a_span,
    question_names,
    render,
    row_of_sentence,
    value,
)
from router.scope import evidence_found
from router.textfigure import asked_span, other_span, text_figure
from router.types import Answer, CitationOut, RetrievedChunk, ScopePlan, Turn, UnsupportedFigure
from router.wording import ANSWER_LANG, EN, Words, words

log = structlog.get_logger("router.synthesize")

_MARKER = re.compile(r"\[(\d{1,3})\]")
_NUMBER = re.compile(r"\$?\d[\d,]*(?:\.\d+)?%?")
_WANTS_NUMBER = re.compile(r"\b(how much|how many|what (?:was|is|were)|amount|total|percent|rate|ratio)\b", re.I)
_COMPARES_FIGURES = re.compile(r"\b(compare[ds]?|change[ds]?|trend(?:ed|s)?|grow(?:th)?|increase[ds]?|decrease[ds]?)\b",
                               re.I)
_PART_TOKENS = frozenset(t for w in lx.PART_WORDS for t in tokenize(w))
_GLUED_NOTE = re.compile(r"(?<=[^\W\d_])\(\d{1,2}\)|(?<=[^\W\d_])\[\d{1,2}\]")
"""A footnote mark glued to a word ("period end(1)")."""
_SENTENCE_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")
_MONTH_DAY = re.compile(rf"(?i)\b(?:{'|'.join(lx.MONTHS)})\.?\s+\d{{1,2}}\b")  # "January 31": a date, no figure
_PROSE_WORD = re.compile(r"\b[^\W\d_]{3,}\b|[\u4e00-\u9fff]{2,}")
_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s.*$", re.M)


def evidence_label(c: RetrievedChunk) -> str:
    unit = unit_label(c.unit)
    span = f"{c.pages[0]}" if c.pages[0] == c.pages[1] else f"{c.pages[0]}–{c.pages[1]}"
    return f"{c.doc_name} › {c.section_path} ({unit} {span})"


def build_evidence(chunks: Sequence[RetrievedChunk]) -> str:
    return "\n\n".join(f"[{i}] {evidence_label(c)}\n{c.text}" for i, c in enumerate(chunks, 1))


def _citation(i: int, c: RetrievedChunk, quotes: Sequence[str] = ()) -> CitationOut:
    return CitationOut(marker=i, doc_id=c.doc_id, doc_name=c.doc_name, node_id=c.node_id,
                       section_path=c.section_path, pages=c.pages, text=c.text, unit=c.unit,
                       chunk_id=c.chunk_id, quote=" … ".join(dict.fromkeys(q.strip() for q in quotes if q.strip())))


def _quotes(picked: Sequence[tuple[int, int, str]], ci: int, *extra: str) -> list[str]:
    """The sentences picked from evidence block ``ci`` (and ``extra`` ones), as cited."""
    return [*extra, *(s for c, _, s in picked if c == ci)]


def _missing_note(plan: ScopePlan | None, w: Words = EN) -> str:
    if plan is None or not plan.scope.missing:
        return ""
    return " ".join(w.no_document_about.format(name=m) for m in plan.scope.missing)


def _offline(question: str, chunks: Sequence[RetrievedChunk], plan: ScopePlan | None, concept: str = "") -> Answer:
    if plan is not None and plan.scope.kind != "single":
        if (event := asked_event(question)) is not None:  # "which companies made an acquisition"
            return event_answer(question, event, chunks, plan)
        return per_document_answer(question, chunks, plan)
    if plan is not None and any(w in question.lower() for w in lx.WHICH_ONE) \
            and (event := asked_event(question)) is not None:  # "which company had a product recall"
        return event_answer(question, event, chunks, plan)
    ans = extractive_answer(question, chunks, concept=concept)
    missing = _missing_note(plan)
    return msgspec.structs.replace(ans, text=f"{missing}\n{ans.text}") if missing else ans


def _multi_prompt(question: str, chunks: Sequence[RetrievedChunk], plan: ScopePlan, history: Sequence[Turn]) -> str:
    found = evidence_found(question, chunks, plan)
    subs = [f"- {s.doc_name}: {s.question}" for s in plan.sub_questions if s.doc_id in plan.needed]
    empty = [s.doc_name for s in plan.sub_questions if s.doc_id in plan.needed and not found.get(s.doc_id)]
    return multi_synthesis_prompt(question, build_evidence(chunks), kind=plan.scope.kind, reason=plan.scope.reason,
                                  sub_questions=subs, no_answer=empty, missing=_missing_note(plan), history=history)


def in_reading_order(answer: Answer) -> Answer:
    """Markers numbered 1..n in the order they first appear in the text, each with its source; a marker with
    no source is dropped from the text and a source no marker cites is not listed."""
    by_marker = {c.marker: c for c in answer.citations}
    order: dict[int, int] = {}
    for m in _MARKER.finditer(answer.text):
        old = int(m.group(1))
        if old in by_marker and old not in order:
            order[old] = len(order) + 1

    def renumber(m: re.Match[str]) -> str:
        old = int(m.group(1))
        return f"[{order[old]}]" if old in order else ""

    text = re.sub(r"(?<=\S) {2,}", " ", _MARKER.sub(renumber, answer.text))
    cites = tuple(msgspec.structs.replace(by_marker[old], marker=new)
                  for old, new in sorted(order.items(), key=lambda kv: kv[1]))
    return msgspec.structs.replace(answer, text=text, citations=cites)


@dataclass(frozen=True)
class Grounds:
    """What an answer stands on besides the evidence: the scope ``plan`` (a multi-document plan asks for the
    answer per document, then the comparison; a named entity no document mentions is said to be missing), the
    ``facts`` computed from stored statement facts (``router.facts``), and the ``concept`` the typed question
    asks for (``Question.concept``), which a text answer looks for."""

    plan: ScopePlan | None = None
    facts: FactsAnswer | None = None
    concept: str = ""
    lang: str = ""  # the language the question was read in ("" : by its characters)


async def synthesize(chat: ChatModel, question: str, chunks: Sequence[RetrievedChunk],
                     history: Sequence[Turn] = (), grounds: Grounds = Grounds()) -> Answer:
    """LLM answer with [n] markers mapped to citations; extractive when offline or on failure. Markers are
    numbered in reading order (``in_reading_order``). With facts the offline answer leads with the computed
    figures; an LLM gets the fact rows and the computed result as its first evidence."""
    token = ANSWER_LANG.set(grounds.lang)
    try:
        if grounds.facts is not None:
            answer = await _facts_answer(chat, question, chunks, history, grounds.plan, grounds.facts)
        else:
            answer = await _answer(chat, question, chunks, history, grounds.plan, grounds.concept)
    finally:
        ANSWER_LANG.reset(token)
    return in_reading_order(answer)


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])(?:\s*\[\d{1,3}\])*\s+(?=\S)|\n+")


def check_figures(answer: Answer, *, strict: bool = False, computed: str = "") -> Answer:
    """Every figure of an LLM answer must be stated by the evidence its sentence cites (by all its citations when
    the sentence cites none); other sentences are flagged, and with ``strict`` dropped. Years, small counts,
    dates and citation markers are not figures; ``computed`` is the text of figures computed from cited facts.
    Offline answers are returned as they are."""
    if answer.mode not in ("llm", "facts_llm"):
        return answer
    by_marker = {c.marker: c for c in answer.citations}
    known = figures(computed)  # figures computed from the cited facts (differences, ratios, averages)
    cited_all = [f for c in answer.citations for f in figures(c.text)] + known
    kept: list[str] = []
    flagged: list[UnsupportedFigure] = []
    pos = 0
    pieces = []
    for m in _SENTENCE_END.finditer(answer.text):
        pieces.append(answer.text[pos:m.end()])
        pos = m.end()
    pieces.append(answer.text[pos:])
    for piece in pieces:
        markers = [int(x) for x in _MARKER.findall(piece) if int(x) in by_marker]
        evidence = [f for x in markers for f in figures(by_marker[x].text)] + known if markers else cited_all
        stated = figures(_MARKER.sub(" ", piece), reference=True)
        missing = [f for f in stated if not any(same_figure(f, e) for e in evidence)]
        if missing:
            shown = tuple(_figure_text(f) for f in missing)
            flagged.append(UnsupportedFigure(sentence=" ".join(piece.split())[:500], figures=shown, dropped=strict))
            log.warning("router.unsupported_figures", figures=shown, dropped=strict)
            if strict:
                continue
        kept.append(piece)
    if not flagged:
        return answer
    text = "".join(kept).strip() if strict else answer.text
    if strict and not text:
        text = "The model's answer stated figures its evidence does not; see the cited sources."
    return msgspec.structs.replace(answer, text=text, unsupported=tuple(flagged))


def _figure_text(f: Figure) -> str:
    body = f"{f.value:,.{max(0, -int(math.log10(f.tolerance * 2)))}f}"
    return f"{body}%" if f.percent else body if f.scale == 1 else f"{body} × {f.scale:,.0f}"


async def _facts_answer(chat: ChatModel, question: str, chunks: Sequence[RetrievedChunk], history: Sequence[Turn],
                        plan: ScopePlan | None, facts: FactsAnswer) -> Answer:
    k, w = len(facts.citations), words(question)
    if not chat.offline:
        ans = await _answer(chat, question, [*facts.evidence(), *chunks], history, plan)  # rows, then computed
        if ans.mode == "llm":
            cites = tuple(c for c in ans.citations if c.marker != k + 1)  # the computed block is not a source
            return msgspec.structs.replace(ans, mode="facts_llm", citations=cites)
    text, cites = facts.text, list(facts.citations)
    read = {r.doc_id for r in facts.used}  # supporting sentences from the reports the figures come from
    at = [i for i, c in enumerate(chunks) if c.doc_id in read or not read]
    if at and (plan is None or plan.scope.kind == "single"):
        # the figures lead; at most two supporting sentences
        picked = [(at[ci], si, s) for ci, si, s in best_sentences(question, [chunks[i] for i in at], 2)]
        if picked:
            text += f"\n{w.supporting}\n" + "\n".join(f"- {readable(s)} [{k + ci + 1}]" for ci, _, s in picked)
            cites += [_citation(k + ci + 1, chunks[ci], _quotes(picked, ci)) for ci in sorted({ci for ci, _, _ in picked})]
    looked = _looked_at(question, chunks, facts.missing_ids, len(cites), w)
    if looked:
        text += "\n" + "\n".join(line for line, _ in looked)
        cites += [c for _, c in looked]
    if missing_note := _missing_note(plan, w):
        text = f"{missing_note}\n{text}"
    return Answer(text=text, citations=tuple(cites), mode="facts")


def _looked_at(question: str, chunks: Sequence[RetrievedChunk], doc_ids: Sequence[int], cited: int,
               w: Words) -> list[tuple[str, CitationOut]]:
    """For each document read that does not state the asked measure: that it does not, with the closest passage
    read in it, cited (not found is an answer, and says where it looked)."""
    out = []
    for doc_id in doc_ids:
        own = [c for c in chunks if c.doc_id == doc_id]
        if not own:
            continue
        best = best_sentences(question, own, 1)
        ci, passage = (best[0][0], best[0][2]) if best else (0, own[0].text)
        marker = cited + len(out) + 1
        line = w.looked_at.format(doc=own[ci].doc_name, text=" ".join(passage.split())[:240], cite=f"[{marker}]")
        out.append((line, _citation(marker, own[ci], [passage] if best else [])))
    return out


async def _answer(chat: ChatModel, question: str, chunks: Sequence[RetrievedChunk], history: Sequence[Turn],
                  plan: ScopePlan | None, concept: str = "") -> Answer:
    w = words(question)
    missing = _missing_note(plan, w)
    if missing and plan is not None and plan.scope.kind == "single" and not plan.scope.entities:
        # "What was Zephyr Motors' revenue?" in a collection without Zephyr: say so, answer from nothing else
        return Answer(text=f"{missing} {w.not_answered}", citations=(), mode="missing_entity")
    if not chunks:
        return Answer(text=(missing + " " if missing else "") + w.nothing_found, citations=(), mode="none")
    if chat.offline:
        return _offline(question, chunks, plan, concept)
    if plan is not None and plan.scope.kind != "single":
        prompt = _multi_prompt(question, chunks, plan, history)
    else:
        prompt = synthesis_prompt(question, build_evidence(chunks), history)
    try:
        res = await chat.complete_text(purpose=SYNTHESIS_PURPOSE, system=SYNTHESIS_SYSTEM, prompt=prompt)
    except LLMError as exc:
        log.warning("router.synthesis_llm_failed", error=str(exc))
        ans = _offline(question, chunks, plan, concept)
        return Answer(text=ans.text, citations=ans.citations, mode="extractive_fallback", llm_calls=1)
    text = res.text.strip()
    used = sorted({int(m) for m in _MARKER.findall(text) if 1 <= int(m) <= len(chunks)})
    if not used:  # an answer citing none of the evidence (or a garbled reply) is not handed out as one
        log.warning("router.synthesis_uncited", chars=len(text))
        ans = _offline(question, chunks, plan, concept)
        return Answer(text=ans.text, citations=ans.citations, mode="extractive_fallback", llm_calls=1)
    cites = tuple(_citation(i, chunks[i - 1]) for i in used)
    not_found = "the model found it not stated in the evidence" if NOT_STATED in text.lower()[:200] else ""
    return Answer(text=text, citations=cites, mode="not_found" if not_found else "llm", llm_calls=1,
                  not_found=not_found)


def extractive_answer(question: str, chunks: Sequence[RetrievedChunk], max_sentences: int = 3, *,
                      concept: str = "") -> Answer:
    """The answer first, then at most two supporting sentences, each cited ([n] = evidence block): the table row
    that states the asked measure for the asked period, read out (``router.rows``), else the best sentence;
    "not stated" when the question asks for a vocabulary measure that no evidence row or sentence states.
    ``concept``: the measure of the typed question; else the one the question's words name."""
    w = words(question)
    naming = _naming(chunks)
    concept = concept if concept in CONCEPT_BY_NAME else question_concept(question)
    row = best_row(question, [c.text for c in chunks], naming, concept=concept) \
        if concept or _WANTS_NUMBER.search(question) else None
    picked = best_sentences(question, chunks, max_sentences + 1, concept=concept)
    if concept and not _states(concept, chunks, row):
        return _not_stated(question, chunks, _concept_name(concept, question, w), w)
    if not concept and row is None and _WANTS_NUMBER.search(question) and (asked := _unmentioned(question, chunks)):
        return _not_stated(question, chunks, asked, w)
    if not picked and row is None:
        return Answer(text=w.closest.format(text=readable(chunks[0].text[:300])),
                      citations=(_citation(1, chunks[0]),), mode="extractive")
    quote = ""  # the lead as the evidence prints it
    also: tuple[int, int, str] | None = None  # the sentence answering a second thing asked
    members = None
    if row is None and not concept and (noun := asked_members(question)):  # the names listed, else the count
        counted = counted_members(noun, chunks)
        members = counted if counted is not None and counted.named else titled_members(noun, chunks) or counted
        if (members is None or not members.named) and any(noun.startswith(p) for p in lx.PART_WORDS):
            return _not_stated(question, chunks, noun, w)  # "what segments": no passage read lists them
    if members is not None:  # "What segments does it report?": the sentence counting them, and their names
        lead, lead_ci = members.sentence, members.chunk
        if members.names:
            lead = f"{lead.rstrip('.')}: {', '.join(members.names)}."
        picked = [p for p in picked if " ".join(p[2].split()) != members.sentence]
    elif row is not None:
        lead, lead_ci = render(row), row.chunk
        if _COMPARES_FIGURES.search(question) and (change := change_of(row, question)):
            lead = f"{lead}: {change}"  # "by how much did revenue grow from 2022 to 2023"
        picked = [p for p in picked if " ".join(p[2].split()) != " ".join(row.row.line.split())]
    else:  # the first sentence that reads as one (not a row of periods or figures)
        asked = question_years(question) if _WANTS_NUMBER.search(question) else set()
        # a plan for another year is no answer to this one: "revenue in 2023" is not "For 2022 we expect …"
        kept = [p for p in picked if not _plan_for_another_year(p[2], asked)]
        if len(kept) < len(picked) and not any(asked & {int(y) for y in _SENTENCE_YEAR.findall(p[2])}
                                               for p in kept):
            kept = []  # a plan was the best passage, and nothing left is about the year asked
        if question_quarters(question) or stated_months(question) != 12:
            # a quarter or nine months asked: a passage that names no span within a year is of the year, a
            # sentence naming only another span ("during the third quarter" for nine months) is of that span
            span = 3 if stated_months(question) == 12 else stated_months(question)
            kept = [p for p in kept if names_a_span(chunks[p[0]].text)
                    and (not (named := spans_named(p[2])) or span in named)]
        # a sentence that names only other years is about them ("fiscal year 2014" for revenue in 2010)
        kept = [p for p in kept if not _of_other_years(p[2], asked)]
        picked = kept
        # "what does it guide to for 2024": the plan, not the year's actuals; a figure asked plainly: the
        # figure reported, not a plan
        ahead = forward_looking(question)
        if ahead or _WANTS_NUMBER.search(question):
            picked.sort(key=lambda p: forward_looking(p[2]) != ahead)
            if not ahead and picked and all(forward_looking(p[2]) for p in picked):
                picked = []  # only plans read: a figure reported is not stated
        if not picked:
            return _not_stated(question, chunks, _concept_name(concept, question, w) if concept else
                               (_unmentioned(question, chunks) or w.figure_asked), w)
        prose = [i for i, p in enumerate(picked) if len(_PROSE_WORD.findall(p[2])) >= 4]
        if _WANTS_NUMBER.search(question) or concept or asked_kind(question):  # a figure asked: the first
            # sentence stating one leads …
            stating = [i for i, p in enumerate(picked) if _states_figure(p[2])]
            if not stating:  # … and with none stating one, not stated (a header line or a remark is no answer)
                return _not_stated(question, chunks, _concept_name(concept, question, w) if concept else
                                   (_unmentioned(question, chunks) or w.figure_asked), w)
            prose = [i for i in prose if i in stating] + stating
            if concept:  # the measure asked, named: a sentence naming it leads over one stating another figure
                prose = [i for i in prose if _names_concept(picked[i][2], concept)] + prose
        (lead_ci, lead_si, lead) = picked.pop(prose[0] if prose else 0)
        lead = _completed(lead, chunks[lead_ci], lead_si)
        quote = lead
        if (as_row := row_of_sentence(lead, chunks[lead_ci].text, question)) is not None:
            lead = render(as_row)  # a table row read with its column headers
        if (also := _second_answer(question, chunks, quote)) is not None:
            picked = [p for p in picked if p[2] != also[2]]
    support = picked[: max_sentences - 1]
    figure = text_figure(_GLUED_NOTE.sub("", quote)) if quote else None
    text = f"{readable(lead)} [{lead_ci + 1}]"
    if also is not None:  # the second thing asked, in the lead's sentence too
        second = readable(also[2])
        first = second.split(" ", 1)[0]
        if first.lower() in lx.STOP_WORDS or first.lower() in lx.CLAUSE_OPENERS:
            second = second[:1].lower() + second[1:]  # "…; during the three months ended …"
        text = f"{readable(lead).rstrip('.')} [{lead_ci + 1}]; {second} [{also[0] + 1}]"
        support = [also, *support]  # quoted in its citation
    if other_span(question, figure) and figure is not None:  # "$1.36 per share for each quarter" for the year's
        text = w.other_span.format(asked=w.spans[asked_span(question)], span=w.spans[figure.months]) + "\n" + text
    if support[1 if also is not None else 0:]:
        text += f"\n{w.supporting}\n" + "\n".join(f"- {readable(s)} [{ci + 1}]"
                                                for ci, _, s in support[1 if also is not None else 0:])
    markers = sorted({lead_ci + 1, *(ci + 1 for ci, _, _ in support)})
    lead_quote = row.row.line if row is not None else members.sentence if members is not None else quote
    return Answer(text=text, citations=tuple(
        _citation(i, chunks[i - 1], _quotes(support, i - 1, *([lead_quote] if i - 1 == lead_ci else [])))
        for i in markers), mode="extractive", lead=figure,
        not_found="the figure read covers another span than asked" if other_span(question, figure) else "")


def _second_answer(question: str, chunks: Sequence[RetrievedChunk], lead: str) -> tuple[int, int, str] | None:
    """The best sentence stating a figure for the second thing a question asks ("…, and how much severance did
    it book?", ``lexicon.SECOND_ASK``), when it is not the lead; None when one thing is asked."""
    m = lx.SECOND_ASK.search(question)
    if m is None or not _WANTS_NUMBER.search(question):
        return None
    part = question[m.start(1):]
    kind = asked_kind(part)
    own = set(tokenize(part)) - question_names(question) - GENERIC - set(tokenize(question[:m.start(1)]))

    def answers(s: str) -> bool:  # a figure of the kind asked ("how much": money), else one of the part's words
        return kind.stated_in(s) if kind is not None else _states_figure(s) and bool(own & set(tokenize(s)))

    return next(((ci, si, s) for ci, si, s in best_sentences(part, chunks, 3)
                 if " ".join(s.split()) != " ".join(lead.split()) and answers(s)), None)


def _completed(sentence: str, chunk: RetrievedChunk, index: int) -> str:
    """A clause cut at a semicolon read with the clause that completes it ("… requires a ratio below 3.5x;" +
    "the ratio was 2.1x."): a limit alone is not the figure."""
    if not sentence.rstrip().endswith((";", "；")):
        return sentence
    following = split_sentences(_HEADING_LINE.sub("", chunk.text))[index + 1: index + 2]
    if following and (following[0][:1].islower() or lx.is_zh(following[0][:1])):
        return f"{sentence} {following[0]}"
    return sentence


def _states(concept: str, chunks: Sequence[RetrievedChunk], row: RowMatch | None) -> bool:
    """Whether the evidence states a figure of the vocabulary measure: a row printing it, or a sentence naming
    it with a number."""
    if row is not None and (line_concept(row.row.label) == concept or row.score >= 2):
        return True
    if concept not in CONCEPT_BY_NAME:
        return True
    return any(any(ch.isdigit() for ch in s) and _names_concept(s, concept)
               for c in chunks for s in split_sentences(c.text))


def _names_concept(sentence: str, concept: str) -> bool:
    """Whether a sentence names the vocabulary measure by one of its names (English or Chinese); a name of three
    words or more may have a figure or a few words between its words ("dividends of $0.42 per share")."""
    low = " ".join(sentence.lower().split())
    return bool(_concept_pattern(concept).search(low)) or any(z in sentence for z in CONCEPT_BY_NAME[concept].chinese)


@functools.cache
def _concept_pattern(concept: str) -> re.Pattern[str]:
    spec = CONCEPT_BY_NAME[concept]
    names = sorted((n for n in {spec.label.lower(), *spec.printed, *spec.asked} if len(n) > 3), key=len, reverse=True)
    return re.compile("|".join(r"\b" + (r"\W+(?:\w+\W+){0,3}?" if len(n.split()) >= 3 else r"\W+").join(
        map(re.escape, n.split())) + r"(?:s|es)?\b" for n in names))  # "interest expenses"


def _concept_name(concept: str, question: str, w: Words) -> str:
    """A vocabulary measure as the question's language names it (the Chinese name the question uses)."""
    spec = CONCEPT_BY_NAME[concept]
    if w.lang != "zh":
        return spec.label
    asked = [z for z in spec.chinese if z in question]
    return max(asked, key=len) if asked else spec.chinese[0] if spec.chinese else spec.label


def _unmentioned(question: str, chunks: Sequence[RetrievedChunk]) -> str:
    """The words naming the asked measure when the evidence mentions none of them ("goodwill impairment"),
    else ""."""
    asked = measure_words(question, _naming(chunks))
    if not asked:
        return ""
    seen = set(tokenize(" ".join(c.text for c in chunks)))
    if asked & seen:
        return ""
    return " ".join(t for t in re.findall(r"[^\W_]+", question) if (tokenize(t) or [""])[0] in asked) or \
        " ".join(sorted(asked))


def _not_stated(question: str, chunks: Sequence[RetrievedChunk], measure: str, w: Words) -> Answer:
    """Not found is an answer: which document(s) were read, that they do not state the measure, and the
    closest passage, cited."""
    years = sorted(question_years(question))
    quarters = sorted(question_quarters(question)) if len(years) == 1 else []
    named = [f"Q{q} {years[0]}" for q in quarters] or [str(y) for y in years]
    if w.lang == "zh":
        named = [f"{years[0]}年第{q}季度" for q in quarters] or [f"{y}年" for y in years]
    period = ("、".join(named) if w.lang == "zh" else f" for {', '.join(named)}") if years else ""
    docs = list(dict.fromkeys(c.doc_name for c in chunks))
    doc = docs[0] if len(docs) == 1 else ("所读文档" if w.lang == "zh" else "The documents read")
    best = best_sentences(question, chunks, 1)
    ci, passage = (best[0][0], best[0][2]) if best else (0, chunks[0].text)
    text = w.not_stated.format(doc=doc, measure=measure, period=period, text=" ".join(passage.split())[:240])
    return Answer(text=text, citations=(_citation(1, chunks[ci], [passage] if best else []),), mode="not_found",
                  not_found=f"no figure of {measure}{period if w.lang != 'zh' else ''} in the evidence read")


def _naming(chunks: Sequence[RetrievedChunk]) -> set[str]:
    """Words that name the documents (company, year, "annual report"): they routed the question; the answer is
    in the others."""
    return set(tokenize(" ".join(re.sub(r"[-_.]", " ", c.doc_name) for c in chunks)))


def per_document_answer(question: str, chunks: Sequence[RetrievedChunk], plan: ScopePlan,
                        per_doc_sentences: int = 2) -> Answer:
    """One line per needed document with its best cited sentences (by its sub-question), "No evidence found
    in X" where its evidence lacks the topic, and the missing entities named."""
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(chunks):
        groups.setdefault(c.doc_id, []).append(i)
    doc_ids = list(dict.fromkeys([*plan.needed, *groups]))
    names = {c.doc_id: c.doc_name for c in chunks} | {s.doc_id: s.doc_name for s in plan.sub_questions}
    found = evidence_found(question, chunks, plan)
    lines: list[str] = []
    none: list[str] = []
    used: set[int] = set()
    wants_number = bool(_WANTS_NUMBER.search(question) or _COMPARES_FIGURES.search(question))
    figures_read: list[Amount] = []
    quotes: dict[int, list[str]] = {}
    for d in doc_ids:
        sub = plan.sub_question(d)
        idx = groups.get(d, [])
        own = [chunks[i] for i in idx]
        asked = sub.question if sub else question
        naming = _naming(own) | set(tokenize(f"{sub.entity} {sub.period}" if sub else ""))
        row = best_row(asked, [c.text for c in own], naming) if wants_number and own else None
        picked = best_sentences(asked, own, per_doc_sentences - (row is not None), wants_number=wants_number)
        label = names.get(d, str(d))
        if sub and (sub.entity or sub.period):
            label += f" ({', '.join(x for x in (sub.entity, sub.period) if x)})"
        if (not picked and row is None) or not found.get(d, False):
            if d in plan.needed:
                none.append(names.get(d, str(d)))
            continue
        lead = [f"{render(row)} [{idx[row.chunk] + 1}]"] if row is not None else []
        who = " ".join(x for x in (sub.entity, sub.period) if x) if sub and sub.entity else names.get(d, str(d))
        if row is not None:
            used.add(idx[row.chunk] + 1)
            quotes.setdefault(idx[row.chunk] + 1, []).append(row.row.line)
            if (v := value(row)) is not None:
                figures_read.append((who, v, lambda x, row=row: amount(x, row)))
            picked = [p for p in picked if " ".join(p[2].split()) != " ".join(row.row.line.split())]
        elif wants_number and (found_amount := sentence_amount(
                [p[2] for p in picked if not forward_looking(p[2])], measure_words(asked, naming))):  # no plan
            figures_read.append((who, *found_amount))
            stating = next(i for i, p in enumerate(picked)
                           if not forward_looking(p[2]) and sentence_amount([p[2]], measure_words(asked, naming)))
            picked.insert(0, picked.pop(stating))  # the sentence stating the figure first
        cited = " ".join([*lead, *(f"{readable(s)} [{idx[ci] + 1}]" for ci, _, s in picked)])
        used.update(idx[ci] + 1 for ci, _, _ in picked)
        for ci, _, sentence in picked:
            quotes.setdefault(idx[ci] + 1, []).append(sentence)
        lines.append(f"- {label}: {cited}")
    w = words(question)
    if len(figures_read) == 2 and (_COMPARES_FIGURES.search(question) or plan.scope.kind == "multi"):
        lines.append(_difference(figures_read, w))
    parts = [p for p in (_missing_note(plan, w), w.per_document) if p]
    text = "\n".join(p for p in parts + lines if p)
    if none:
        text += "\n" + "\n".join(w.no_evidence_in.format(doc=x) for x in none)
    return Answer(text=text.strip(), citations=tuple(_citation(i, chunks[i - 1], quotes.get(i, ()))
                                                     for i in sorted(used)),
                  mode="extractive")


Amount = tuple[str, float, Callable[[float], str]]
"""A document's figure of the compared measure: (who, value in base units, how to write an amount like it)."""


def _difference(read: Sequence[Amount], w: Words) -> str:
    """Two documents' figures of the asked measure compared: the difference, and in % of the second, in the
    first's unit."""
    (a_name, va, write), (b_name, vb, _) = read
    if va == vb:
        return ""
    pct = f" ({abs(va - vb) / abs(vb) * 100:.1f}%)" if vb else ""
    return w.difference.format(a=a_name, b=b_name, delta=write(abs(va - vb)),
                               direction=w.higher if va > vb else w.lower, pct=pct)


_AMOUNT = re.compile(r"(\$\s?)?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*(billion|million|thousand|亿元|万元|亿|万)?", re.I)


def sentence_amount(sentences: Sequence[str], asked: set[str]) -> tuple[float, Callable[[float], str]] | None:
    """The first amount (a $ figure or one with a scale word; not a percent) written after a word naming the
    asked measure in ``sentences`` ("Total revenue increased 9.4% to $2,146.8 million" → 2,146,800,000)."""
    for s in sentences:
        low = s.lower()
        starts = [m.end() for t in asked for m in re.finditer(r"\b" + re.escape(t[:5]), low)]
        if not starts:
            continue
        for m in _AMOUNT.finditer(s, min(starts)):
            dollar, unit = m.group(1), (m.group(4) or "").lower()
            if not (dollar or unit) or s[m.end():m.end() + 1] == "%":
                continue
            scale = lx.SCALES.get(unit, 1.0)
            v = float(m.group(2).replace(",", "") + (m.group(3) or "")) * scale

            def write(x: float, unit: str = unit, scale: float = scale, dollar: bool = bool(dollar)) -> str:
                shown = x / scale
                text = f"{shown:,.1f}" if shown < 1000 and shown != int(shown) else f"{shown:,.0f}"
                return f"{'$' if dollar else ''}{text}{' ' if unit and unit.isascii() else ''}{unit}"
            return v, write
    return None
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{4}")


def readable(text: str) -> str:
    """A passage as a reader reads it: whitespace collapsed, and a Markdown table's rows ("| Revenue | 497.3 |
    412.6 |", "|---|") written as "Revenue: 497.3 (2023), 412.6 (2022)" — each figure with its column's header
    when the table has one, the header's caption ("(in millions)") once before the rows; no table syntax in an
    answer."""
    if text.count("|") < 3 or not re.search(r"\|\s*:?-{2,}:?\s*\||^\s*\|.*\|\s*$", text, re.M):
        return " ".join(text.split())
    lines = [ln for ln in text.splitlines() if ln.strip()]
    rows = lines if all(ln.strip().startswith("|") for ln in lines if "|" in ln) and len(lines) > 1 else \
        re.split(r"\|\s+(?=\|)", " ".join(text.split()))  # rows run together on one line: "| a | b | | c | d |"
    table: list[list[str] | str] = []  # cells of each row, or a line of text
    for r in rows:
        r = r.strip()
        if "|" not in r:
            table.append(" ".join(r.split()))
            continue
        table.append([" ".join(c.split()) for c in (r.strip("|") if r.startswith("|") else r).split("|")])
    heads = _header_rows(table)
    out: list[str] = []
    header: list[str] | None = None
    for i, row in enumerate(table):
        if isinstance(row, str):
            out.append(row)
            header = None  # text between tables: the next table has columns of its own
            continue
        if _is_separator(row):
            if i - 1 not in heads:
                header = None  # a table whose header was not read: none of the last one's columns
            continue
        if i in heads:
            header = row
            if _CAPTION.search(row[0]):  # "(in millions)", not a column name ("Segment")
                out.append(row[0])
            continue
        cells = [c for c in row if c and c not in {"-", "—"}]
        if not cells:
            continue
        if row[0] in {"", "-", "—"}:  # a header row without a label: its columns
            out.append(f"({', '.join(cells)})")
        elif len(row) == 1:
            out.append(row[0])
        elif header is not None and len(header) == len(row) and (figures := [
                _headed(v, h) for v, h in zip(row[1:], header[1:], strict=True)
                if v and v not in {"-", "—"} and v != row[0]]):  # a section row repeating its label: as it is
            out.append(f"{row[0]}: " + ", ".join(figures))
        else:
            out.append(f"{row[0]}: {', '.join(c for c in row[1:] if c)}")
    return "; ".join(" ".join(o.split()) for o in out if o)


_CAPTION = re.compile(r"^\(|\bin (?:thousands|millions|billions)\b|单位|人民币|\$", re.I)
"""A header's first cell that is the table's unit caption ("(in millions)"), not the name of its label column."""
_FIGURE_CELL = re.compile(r"\d,\d{3}|\d\.\d|\d\s*%")
"""A cell holding a figure (a thousands separator, decimals, a percentage), not a column's name (2023, Q3 2024)."""


def _is_separator(row: list[str]) -> bool:
    return all(re.fullmatch(r":?-{2,}:?|", c) for c in row)


def _header_rows(table: Sequence[list[str] | str]) -> set[int]:
    """The rows that head columns: over a separator row, naming columns (no figure among them), and used by a
    row below of as many cells (a header no row uses is read as a row)."""
    heads: set[int] = set()
    for i, row in enumerate(table[:-1]):
        following = table[i + 1]
        if isinstance(row, str) or isinstance(following, str) or not _is_separator(following) or _is_separator(row):
            continue
        names = [c for c in row[1:] if c and c not in {"-", "—"}]
        if not names or any(_FIGURE_CELL.search(c) for c in names):
            continue
        below = [r for r in table[i + 2:] if isinstance(r, list) and not _is_separator(r)]
        if any(len(r) == len(row) and r[0] not in {"", "-", "—"} for r in below[:50]):
            heads.add(i)
    return heads


def _headed(value: str, head: str) -> str:
    """A table figure with its column's header: "497.3 (2023)", "9,268.40（本报告期）"."""
    if not head or head in {"-", "—"}:
        return value
    return f"{value}（{head}）" if lx.is_zh(head) else f"{value} ({head})"


def _of_other_years(sentence: str, asked: set[int]) -> bool:
    """A sentence naming years, none of them asked (nor the one after, whose report restates it); a year of
    reference ("since 2019", ``lexicon.SINCE``) is no period the sentence is about."""
    said = {int(m.group(1)) for m in _SENTENCE_YEAR.finditer(sentence) if not _reference_year(sentence, m)}
    return bool(asked and said and not said & (asked | {y + 1 for y in asked}))


def _table_title(text: str, sentence: str, reach: int = 6) -> set[str]:
    """The words of the table a row stands in, up to its title ("Walmart U.S. Segment" over "Fiscal Years Ended
    January 31," over the header): the lines above it up to the first line of prose, at most ``reach``; none
    for a sentence of prose."""
    lines = text.splitlines()
    head = " ".join(sentence.split()[:4])
    at = next((i for i, ln in enumerate(lines) if head and head in " ".join(ln.split())), None)
    if at is None or _is_prose(lines[at]):
        return set()
    words: set[str] = set()
    for ln in reversed(lines[max(0, at - reach):at]):
        if _is_prose(ln):
            break
        words |= set(tokenize(ln))
    return words


def _is_prose(line: str) -> bool:
    """A line of running text: it ends a sentence and has more than six words."""
    return line.rstrip().endswith((".", "。")) and len(line.split()) > 6


def _reference_year(sentence: str, m: re.Match[str]) -> bool:
    """A year written as a point of reference: "since 2019", "2019年以来"."""
    before = sentence[max(0, m.start() - 16):m.start()].lower().split()
    after = sentence[m.end():m.end() + 4]
    return bool(before and before[-1] in lx.SINCE) or any(after.lstrip("年").startswith(w) for w in lx.SINCE_AFTER)


def _states_figure(sentence: str) -> bool:
    """Does the sentence state a figure other than a year or a day of a date ("$5.44", "11,501", "4.1x")?"""
    bare = _SENTENCE_YEAR.sub(" ", _MONTH_DAY.sub(" ", sentence))
    bare = re.sub(r"\b\d+[A-Z]\b|\b[A-Z]+\d+\b", " ", bare)  # "3M", "Q3": names, not figures
    return bool(re.search(r"\d", bare))


def _plan_for_another_year(sentence: str, asked: set[int]) -> bool:
    """A forward-looking sentence ("we expect …") about years none of which the question asks for."""
    said = {int(y) for y in _SENTENCE_YEAR.findall(sentence)}
    return bool(asked and said and not asked & said and forward_looking(sentence))


forward_looking = lx.forward_looking


class AskedKind(msgspec.Struct, frozen=True):
    """The kind of figure a question asks for (``kb.core.lexicon.ASKED_KIND``) and, for a count, the thing counted
    ("vans" in "how many electric delivery vans")."""

    kind: str
    thing: str = ""
    cue: str = ""  # the question's word for it ("cost", "pay", "how many")

    def governed_in(self, sentence: str) -> bool:
        """Does the asked word itself state the figure ("the incident cost $12.4 million", "paid $40 million")?
        A sentence where another verb does ("reduced operating income by $9.1 million") answers less."""
        if self.kind != "money" or not self.cue.isalpha():
            return False
        stem = re.escape(self.cue[:-1] if self.cue.endswith("s") else self.cue)
        return bool(re.search(rf"(?i)\b{stem}\w*\s+(?:(?:of|about|approximately|roughly|nearly|us)\s+)?"
                              rf"(?:US)?[$€£¥]\s?\d", sentence))

    def stated_in(self, sentence: str) -> bool:
        if self.kind == "money":
            return bool(_MONEY.search(sentence))
        if self.kind == "percent":
            return bool(re.search(r"\d(?:[\d.,]*)\s?%|百分之", sentence))
        stem = re.escape(self.thing[:4])
        if not self.thing:
            return False
        if re.search(rf"(?i)\d[\d,]*\s+(?:[\w-]+\s+){{0,3}}{stem}", sentence):  # "410 electric delivery vans"
            return True
        row = _COUNT_ROW.match(sentence.strip())  # a table row names the thing before its figures
        return row is not None and re.search(rf"(?i)\b{stem}", row.group(1)) is not None


_COUNT_ROW = re.compile(r"^([^\d]{1,60}?)(?:\(\d{1,2}\))?\s*((?:[-$(]*\d[\d,.]*\)?%?\s*){2,})$")
"""A table row: its label, then two figures or more to its end ("Unit counts at period end(1) 11,501 11,361")."""


_MONEY = re.compile(r"(?i)(?:US)?[$€£¥]\s?\d|\d[\d,.]*\s*(?:million|billion|thousand|bn|万元|亿元|元)")


def _plain(word: re.Match[str] | None, stems: set[str]) -> bool:
    """No word, or a word that leaves the measure what it is: a function word, a generic one ("total"), the
    question's own."""
    if word is None:
        return True
    w = word.group(1).lower()
    return w in lx.STOP_WORDS or w in GENERIC or w[:5] in stems


def _figure_beside(sentence: str, stems: set[str]) -> bool:
    """A figure of the question's measure word: before it ("420 MW of capacity", "640,000 square feet") or
    after it and a verb or "of" ("capacity of 420 MW", "output was 1.2 TWh") — the word standing alone, not in a
    compound another word makes ("capacity factor was 36.4%", "$6.6 billion of revenue deferrals", "Deferred
    revenue was $44.8 million"), and no share of it ("28.8% of revenue")."""
    for stem in stems:
        word = rf"\b{re.escape(stem)}\w*"
        for m in re.finditer(rf"(?i)(?<![\w.])[$€£¥]?(?!(?:19|20)\d\d\b)\d[\d,]*(?:\.\d+)?\s*(?:[A-Za-z%]+\s+){{0,2}}"
                             rf"(?:of\s+)?({word})", sentence):  # a year is no figure of it ("For 2024 we expect revenue")
            share = re.search(r"(?:%|\bpercent)\s*(?:of\s+)?$", sentence[m.start():m.start(1)])  # "28.8% of revenue"
            if not share and _plain(re.match(r"\s+([A-Za-z][\w&-]*)", sentence[m.end(1):]), stems):
                return True
        for m in re.finditer(rf"(?i)({word})\s+(?:of|was|were|is|are|totaled|totalled|reached|stood at|amounted to)\s+"
                             r"(?:approximately\s+|about\s+|nearly\s+)?[$€£¥]?\d", sentence):
            if _plain(re.search(r"([A-Za-z][\w&-]*)\s+$", sentence[:m.start(1)]), stems):
                return True
    return False


def asked_kind(question: str) -> AskedKind | None:
    """What kind of figure the question asks for: a count (with the thing counted), money or a share."""
    low = question.lower()
    for kind, cues in lx.ASKED_KIND.items():
        for cue in cues:
            at = low.find(cue)
            if at < 0 or (cue.isascii() and not re.search(rf"\b{re.escape(cue)}\b", low)):
                continue
            if kind != "count":  # the question's verb for it, when it has one ("how much did it cost")
                verb = next((c for c in cues if c.isalpha() and re.search(rf"\b{c}\b", low)), cue)
                return AskedKind(kind, cue=verb)
            after = [w for w in re.findall(r"[a-z][\w-]*", low[at + len(cue):])[:4] if w not in lx.STOP_WORDS]
            noun = next((w for w in after if w.endswith("s") and len(w) > 3), after[0] if after else "")
            return AskedKind("count", noun)
    return None


def best_sentences(question: str, chunks: Sequence[RetrievedChunk], max_sentences: int = 4, *,
                   wants_number: bool | None = None, concept: str = "") -> list[tuple[int, int, str]]:
    """(chunk index, sentence index, sentence) of the best evidence sentences for the question, at most two
    per chunk, best first; sentences with a figure weigh more when the question asks for one. ``concept``: the
    asked measure when known (else the one the question's words name), whose printed names count too."""
    q = set(tokenize(question))
    naming = _naming(chunks)
    naming |= question_names(question)  # the company the question names routed it too: not the answer's words
    weight = {t: (0.3 if t in naming else 1.0) for t in q}
    low = question.lower()
    for plain, written in lx.SAID_OTHERWISE.items():  # "buy back": filings write "repurchased"
        if re.search(rf"\b{re.escape(plain)}\b", low):
            for t in set(tokenize(" ".join(written))) - q:
                weight[t] = 0.5
                q.add(t)
    concept = concept if concept in CONCEPT_BY_NAME else question_concept(question)
    if concept and not lx.is_zh(question):
        # the measure as statements write it ("EPS": diluted earnings per share), at half the question's weight
        for t in set(tokenize(CONCEPT_BY_NAME[concept].label)) - q:
            weight[t] = 0.5
            q.add(t)
    if wants_number is None:
        wants_number = bool(_WANTS_NUMBER.search(question))
    df: dict[str, int] = {}
    sentences: list[tuple[int, int, str]] = []
    before: dict[tuple[int, int], set[str]] = {}  # the words of the sentence before (its subject, often)
    printed: dict[tuple[int, int], str] = {}
    for ci, c in enumerate(chunks):
        body = _HEADING_LINE.sub("", c.text)
        prev: set[str] = set()
        for si, s in enumerate(split_sentences(body)):
            printed[(ci, si)] = s  # quoted as printed; read without a note mark glued to a word ("end(1) 11,501")
            s = _GLUED_NOTE.sub("", s)
            before[(ci, si)], prev = prev, set(tokenize(s))
            # Chinese has no spaces; a short table row ("2024 1,097 862") counts when it prints figures
            if len(s) < 12 or (len(s.split()) < 4 and not _CJK_RUN.search(s) and len(_NUMBER.findall(s)) < 3):
                continue
            sentences.append((ci, si, s))
            for t in set(tokenize(s)):
                df[t] = df.get(t, 0) + 1
    n = max(1, len(sentences))
    whole = any(re.search(rf"(?<!\w){re.escape(x)}(?!\w)", low) for x in lx.WHOLE_ASKED) \
        and not any(p in low for p in lx.PART_WORDS)  # "in total", and no segment asked
    kind = asked_kind(question)
    capitalised = {w.lower() for w in re.findall(r"(?<=\s)[A-Z][\w&-]*", question)}  # names, not the measure
    asked = {t[:5] for t in measure_words(question, naming) - capitalised if len(t) >= 4 and not lx.is_zh(t)}
    scored = []
    for ci, si, s in sentences:
        toks = set(tokenize(s))
        overlap = q & toks
        if not overlap - GENERIC:  # sharing only "total" or "net" with the question is sharing nothing
            continue
        score = sum(weight[t] * math.log(1 + n / df.get(t, 1)) for t in overlap)
        # "… a ransomware attack encrypted servers. … the incident cost $12.4 million": the subject, named before
        score += 0.5 * sum(weight[t] * math.log(1 + n / df.get(t, 1)) for t in (q & before[(ci, si)]) - toks)
        score /= math.sqrt(max(len(toks), 4)) ** 0.5
        if wants_number and any(n not in question for n in _NUMBER.findall(s)):
            score *= 1.4  # a figure the question does not already contain
        score *= 1.0 + 0.5 / (1 + ci)  # better-ranked evidence first: retrieval already weighed the chunk
        if whole and (toks | _table_title(chunks[ci].text, printed[(ci, si)])) & _PART_TOKENS:
            score *= 0.5  # the whole asked: a segment's figure (its table headed "Walmart U.S. Segment") is a part
        if wants_number and asked and _figure_beside(s, asked):
            score *= 3.0  # "420 MW of capacity": a figure of the asked word (as a count of the thing asked, stated
            # by the asked word: 2 × 1.5), not only a sentence sharing it
        if kind is not None and kind.stated_in(s):
            score *= 2.0  # a figure of the kind asked: a count of the asked thing, an amount of money, a share
            if kind.governed_in(s):
                score *= 1.5  # … stated by the question's own word for it
        scored.append((score, ci, si, s))
    scored.sort(key=lambda x: -x[0])
    picked: list[tuple[int, int, str]] = []
    per_chunk: dict[int, int] = {}
    seen: set[str] = set()
    for _, ci, si, s in scored:
        said = " ".join(s.split()).lower()
        if per_chunk.get(ci, 0) >= 2 or said in seen:  # a sentence two passages repeat is read once
            continue
        seen.add(said)
        picked.append((ci, si, printed[(ci, si)]))
        per_chunk[ci] = per_chunk.get(ci, 0) + 1
        if len(picked) >= max_sentences:
            break
    return picked
