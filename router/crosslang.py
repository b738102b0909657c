"""Questions in another language than the documents (issue 39 item 7): the measures a question names, said in
the documents' language too, so that routing and retrieval search the words the reports print ("应付账款" for a
Chinese question over English 10-Ks finds "Accounts payable"; "trading financial assets" over Chinese reports
finds 交易性金融资产). The names come from the vocabulary (``kb.core.measures``, ``kb.core.lexicon``), not from
a translator: nothing is downloaded or guessed.
"""

from __future__ import annotations

from collections.abc import Iterable

from kb.core import lexicon as lx
from kb.core.measures import CONCEPT_BY_NAME, METRICS
from router.question import MeasureRef, Question

_METRIC_BY_NAME = {m.name: m for m in METRICS}


def name_in(ref: MeasureRef, lang: str) -> str:
    """How ``lang`` ("en", "zh") names a measure the question named ("" when the vocabulary knows no name)."""
    zh = lang == "zh"
    if ref.kind == "concept" and (c := CONCEPT_BY_NAME.get(ref.name)) is not None:
        return (c.chinese[0] if c.chinese else "") if zh else c.label
    if ref.kind == "metric" and (m := _METRIC_BY_NAME.get(ref.name)) is not None:
        return next((n for n in (*m.names, m.label) if lx.is_zh(n) == zh), "")
    if ref.kind == "line":
        if lx.is_zh(ref.name) == zh:
            return ref.name
        return next(iter(lx.line_equivalents(ref.name)), "")
    return ""


def bridged(question: str, reading: Question | None, languages: Iterable[str]) -> str:
    """The text routing and retrieval search for: the question, and when the collection holds documents in the
    other language, its measures named in that language after it ("Gresham Worldwide的应付账款金额有多少？
    (accounts payable)"). A question in the documents' only language is returned as it is."""
    if reading is None or not reading.measures:
        return question
    other = "en" if reading.lang == "zh" else "zh"
    if other not in set(languages):
        return question
    names = [n for m in reading.measures if (n := name_in(m, other)) and n.lower() not in question.lower()]
    return f"{question} ({'; '.join(dict.fromkeys(names))})" if names else question
