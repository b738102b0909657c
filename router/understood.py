"""Right or silent: whether an answer computed from stored facts answers the question as read.

The computed answer comes from the facts executor (``router.facts``, ``router.metrics``); the typed question
(``router.question``) is read apart from it. Where the reading leaves something it could not place, or where
the two disagree on the measure, the operation or the period's span, the answer does not lead with a verdict:
it says what could not be determined and lists the figures it found, each cited.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import msgspec
import structlog

from kb.core import lexicon as lx
from kb.core.measures import METRIC_BY_NAME
from kb.core.periods import DAY_REACH, QUARTER_REACH, quarter_end
from router.facts import FactsAnswer, FactUsed
from router.question import SOFT, Question

log = structlog.get_logger("router.understood")

OPERATIONS: Mapping[str, frozenset[str]] = {
    "lookup": frozenset({"lookup", "compare"}),
    "max": frozenset({"max"}),
    "min": frozenset({"min"}),
    "rank": frozenset({"rank"}),
    "categories": frozenset({"group"}),
    "screen": frozenset({"screen"}),
    "trend": frozenset({"series", "change", "max", "min", "compare"}),  # over periods: "which year saw the largest
    # rise"; one company's latest quarter compared with the quarters before
    "metric": frozenset({"lookup", "compare", "series", "change"}),
    "yoy": frozenset({"change"}),
}
"""The executor's operation → the readings it answers."""


def _key(name: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", name.split(":", 1)[-1].lower()).split())


def _names_one(a: str, b: str, *, formula: bool) -> bool:
    """One measure under two names: the same words; for a metric or a formula the question names, also the one's
    words all among the other's ("inventory turnover" and "inventory turnover ratio"). A line is never a looser
    match: "revenue" is not "deferred revenue"."""
    wa, wb = set(a.split()), set(b.split())
    return a == b or (formula and bool(wa) and bool(wb) and (wa <= wb or wb <= wa))


class Why(msgspec.Struct, frozen=True):
    """Why a computed answer does not answer the question as read: ``kind`` unknown | measure | operation | span |
    period,
    what was asked and what was computed."""

    kind: str
    asked: str
    computed: str = ""

    def text(self, lang: str = "en") -> str:
        w = _WHY_ZH if lang == "zh" else _WHY_EN
        asked = w["ops"].get(self.asked, self.asked) if self.kind == "operation" else self.asked
        computed = w["ops"].get(self.computed, self.computed) if self.kind == "operation" else self.computed
        return w[self.kind].format(asked=asked, computed=computed)


_WHY_EN = {
    "unknown": "{asked}",
    "measure": "the figure asked ({asked}) is not the one computed ({computed})",
    "operation": "the question asks for {asked}, not {computed}",
    "span": "the question asks for {asked} months; the figures found cover {computed} months",
    "period": "the question asks for {asked}; the figures found are for {computed}",
    "ops": {"group": "groups", "series": "a series over periods", "change": "a change between periods",
            "screen": "the companies past a bound", "lookup": "a look-up", "compare": "a comparison",
            "max": "the highest", "min": "the lowest", "rank": "a ranking", "trend": "a trend",
            "categories": "groups", "metric": "a metric"},
}
_WHY_ZH = {
    "unknown": "问题中有未能理解之处：{asked}",
    "measure": "所问指标（{asked}）不是算出的指标（{computed}）",
    "operation": "问题问的是{asked}，而非{computed}",
    "span": "问题问的是{asked}个月的数字，找到的数字为{computed}个月",
    "period": "问题问的是{asked}，找到的数字为{computed}",
    "ops": {"group": "分组", "series": "各期数字", "change": "两期之间的变化", "screen": "超过某一界限的公司",
            "lookup": "单一数字", "compare": "比较", "max": "最高者", "min": "最低者", "rank": "排名", "trend": "趋势",
            "categories": "分组", "metric": "指标"},
}


def disagreement(q: Question, computed: FactsAnswer) -> Why | None:
    """Why the computed answer does not answer the question as read, or None when it does (or when the reading
    has nothing to say: no operation on a measure was read)."""
    hard = [u for u in q.unknown if u not in SOFT]
    if hard:
        return Why("unknown", "; ".join(hard))
    if not q.understood:
        return None
    ask = computed.ask
    asked = {_key(m.name) for m in q.measures}
    concept = _key(ask.concept)
    formula = ask.operation == "metric"
    if ask.concept not in ("which", "line") and not any(_names_one(concept, a, formula=formula) for a in asked) \
            and not _same_line(asked, computed.used):
        return Why("measure", ", ".join(sorted(asked)), concept)
    if ask.concept == "which":  # the largest of several measures of one company (over="measures")
        return None
    if q.operation not in OPERATIONS.get(ask.operation, frozenset({ask.operation})):
        return Why("operation", q.operation or "", ask.operation)
    return _span(q, computed.used) or _quarter(q, computed.used)


def _same_line(asked: set[str], used: Sequence[FactUsed]) -> bool:
    """A printed line the executor read under another name (the reading named the line as printed)."""
    return any(_key(u.line_item) in asked for u in used)


def _span(q: Question, used: Sequence[FactUsed]) -> Why | None:
    """A stated span (nine months, a half year, a quarter) answered with figures of another span."""
    spans = {p.months for p in q.periods if p.year or p.quarter or p.months != 12}
    if len(spans) != 1 or not used:
        return None
    (months,) = spans
    # balances (months 0) are read at a date: any span's end; so is the cash at a period's end or start that a
    # cash flow statement prints in its period's column
    flows = [u for u in used if u.months and u.concept not in ("cash_end", "cash_begin")]
    if flows and months != 12 and all(u.months != months for u in flows):
        return Why("span", str(months), str(flows[0].months))
    # a fiscal year asked: a quarter's or nine months' figure is not the year's — answered alone, or ranked and
    # compared with years ("the highest revenue in 2023": a third quarter's net sales against annual revenue)
    # (a series lists each report's own figure with its span: what is there, labelled — no verdict on a year)
    short = [u for u in flows if u.months < 12]
    if months == 12 and short and q.operation not in ("series", "change") and (
            len(short) == len(flows) or q.operation in ("max", "min", "rank", "compare", "group", "screen")):
        return Why("span", "12", str(short[0].months))
    return None


def _quarter(q: Question, used: Sequence[FactUsed]) -> Why | None:
    """A stated quarter ("Q4 2023") answered with a figure of another quarter (the first quarter's, the only
    one the reports print)."""
    if q.operation not in ("lookup", "compare") or not used:
        return None
    if len(q.periods) == 1 and (day := q.periods[0].ends) is not None:  # "the quarter ended July 29, 2023"
        if any(abs((u.period_end - day).days) <= DAY_REACH for u in used):
            return None
        return Why("period", f"the period ended {day.isoformat()}", f"the period to {used[0].period_end.isoformat()}")
    asked = [p for p in q.periods if p.year and p.quarter]
    if len(asked) != 1:
        return None
    p = asked[0]
    end = quarter_end(p.year, p.quarter)  # type: ignore[arg-type]
    if any(end - QUARTER_REACH[0] <= u.period_end <= end + QUARTER_REACH[1] for u in used):
        return None
    first = used[0]
    return Why("period", f"Q{p.quarter} {p.year}", f"the period to {first.period_end.isoformat()}")


def abstained(computed: FactsAnswer, why: Why, lang: str) -> FactsAnswer:
    """The computed answer without its verdict: what could not be determined, then the figures found, cited."""
    rows = [f"{u.entity}, {u.line_item} ({_when(u)}): {_figure(u)} [{u.marker}]" for u in computed.used[:12]]
    if lang == "zh":
        text = f"无法据报表数字确定答案：{why.text('zh')}。" + (f"报表中的相关数字：{'；'.join(rows)}。" if rows else "")
    else:
        text = f"I could not determine this from the statement figures: {why.text()}." + (
            f" What the statements show: {'; '.join(rows)}." if rows else "")
    log.info("router.facts_abstained", why=why.text(), operation=computed.ask.operation, concept=computed.ask.concept)
    return msgspec.structs.replace(computed, text=text, verdict=False)


def _when(u: FactUsed) -> str:
    return f"{u.months} months to {u.period_end.isoformat()}" if u.months else f"at {u.period_end.isoformat()}"


def _figure(u: FactUsed) -> str:
    en, zh = lx.SCALE_NAMES.get(u.scale, ("", ""))
    scale = f" {en}" if en else zh
    return f"{u.printed or f'{u.value:,.2f}'}{scale} {u.unit}".strip()


_OF_UNIT: Mapping[str, re.Pattern[str]] = {
    "%": re.compile(r"\d\s?%|\bpercent|百分之"),
    "x": re.compile(r"(?<![\d$€£¥,.])\d+\.\d+(?![\d,]*\s*(?:%|million|billion|thousand|万|亿|元))|\d\s?(?:x|times)\b|倍"),
    "days": re.compile(r"\d\s*(?:days?\b|天)"),
}
"""A figure of a metric's unit: a percentage, a ratio (a decimal that is no amount, "2.8x"), a number of days."""


def uncomputed(q: Question, text: str) -> str:
    """The sentence a text answer begins with when the question asks a ratio or metric (``q``, understood) the
    statement figures did not give and the answer's first sentence states no figure of its unit ("Debt to
    equity?" answered "the current maturities of the Debt were $102,342"): it says the metric was not computed;
    "" when the lead may state it."""
    if not q.understood or len(q.measures) != 1 or q.measures[0].kind != "metric":
        return ""
    metric = METRIC_BY_NAME.get(q.measures[0].name)
    kind = _OF_UNIT.get(metric.unit) if metric is not None else None
    lead = re.split(r"(?<=[.!?。！？])\s|\n", text.strip(), maxsplit=1)[0]
    if metric is None or kind is None or kind.search(lead):
        return ""
    if q.lang == "zh":
        return f"无法据报表数字算出{next(iter(metric.chinese), metric.label)}；所读段落所载如下。"
    return f"I could not compute {metric.label} from the statement figures; what the passages read state:"
