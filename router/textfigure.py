"""The figure a text answer leads with, typed: as printed, with the span it covers and the day it ends when the
sentence writes them ("$61.3 million", 9 months; "$1.36 per share for each quarter", 3 months). An answer whose
lead figure covers another span than the one asked says so instead of presenting it as the answer."""

from __future__ import annotations

import re

from kb.core.periods import find_periods, question_quarters, spans_named, stated_months
from router.types import TextFigure

_FIGURE = re.compile(r"[$€£¥]?\(?\d[\d,]*(?:\.\d+)?\)?(?:\s?(?:%|percent|million|billion|thousand|per share|元|万元|亿元))?")
_AMOUNT = re.compile(r"[$€£¥%]|million|billion|thousand|per share|元")
_YEAR_WORDS = re.compile(r"(?i)\b(?:for|in|during|over) (?:the )?(?:full |fiscal )?year\b|\bannual(?:ly)?\b|"
                         r"\bfull[- ]year\b|\bfiscal year\b|\btwelve months\b|\b12 months\b|全年|年度")
SPANS = (3, 6, 9, 12)
"""The spans a figure or a question is typed with (a span of other months, "May 7 to June 3", is not said)."""
_POINT_WORDS = re.compile(r"(?i)\b(?:at|as of|as at)\s+(?:the end of\s+)?(?:[A-Z][a-z]+\s+\d|\d|year[- ]end|period[- ]end)"
                          r"|年末|期末")


def text_figure(sentence: str) -> TextFigure | None:
    """The first figure of a sentence that is no year or day, with the span the sentence names for it; None
    when it states none."""
    years = {m.start() for m in re.finditer(r"(?<!\d)(?:19|20)\d{2}(?!\d)", sentence)}
    found = next((m for m in _FIGURE.finditer(sentence) if m.start() not in years
                  and not re.fullmatch(r"\d{1,2},?", m.group(0))), None)
    if found is None:
        return None
    spans = spans_named(sentence) - {12}
    if not _AMOUNT.search(found.group(0)) or _POINT_WORDS.search(sentence):
        months = 0  # a count ("10,000 jobs through the third quarter") or a balance at a date spans nothing
    elif len(spans) == 1 and not _YEAR_WORDS.search(sentence):
        months = next(iter(spans))
    else:
        months = 12 if _YEAR_WORDS.search(sentence) and not spans else 0
    dated = [p.ends for p in find_periods(sentence) if p.ends is not None]
    return TextFigure(found.group(0).strip(), months if months in SPANS else 0, dated[0] if dated else None)


def asked_span(question: str) -> int:
    """The span a question asks for, in months: 3 a quarter, 9 or 6 a stated span, 12 a year; 0 a point in time
    or none stated."""
    if _POINT_WORDS.search(question):
        return 0
    mentions = find_periods(question)
    dated = [m.months for m in mentions if m.ends is not None]
    if dated:  # "the quarter ended July 29, 2023", "YTD through September 2023"
        return dated[0] if dated[0] in SPANS else 0
    if (months := stated_months(question.lower())) != 12:  # "nine months", 前三季度 (ending in a quarter)
        return months if months in SPANS else 0
    if question_quarters(question):
        return 3
    return 12 if mentions else 0


def other_span(question: str, figure: TextFigure | None) -> bool:
    """Whether the lead figure covers another span than the question asks for ("per share for each quarter" for
    the year's dividend)."""
    asked = asked_span(question)
    return figure is not None and asked > 0 and figure.months > 0 and figure.months != asked
