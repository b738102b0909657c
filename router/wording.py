"""The connecting words of offline answers, in the language of the question (English or Chinese): the cited
sentences and figures are the documents' own; what joins them is said the way the asker wrote."""

from __future__ import annotations

import contextvars
import datetime as dt

import msgspec

from kb.core import lexicon as lx


class Words(msgspec.Struct, frozen=True):
    """Templates with ``{}`` fields, one set per language."""

    lang: str
    at: str  # a balance at a date
    year_ended: str
    months_ended: str
    per_share: str
    shares: str
    verdict: str  # {names} {verb} the {word} {label}: {value} {period} {cite}
    among_found: str  # after a verdict that covers only the companies whose figure was found ({n} of {total})
    highest: str
    lowest: str
    ascending: str
    descending: str
    by_company_ordered: str
    by_company: str
    grouped: str
    none: str
    missing: str
    more: str
    lookup: str
    step: str
    overall: str
    average: str
    increased: str
    decreased: str
    unchanged: str
    also: str
    where_line: str
    where_page: str
    no_previous: str
    screen: str
    one_period: str
    per_document: str
    no_evidence_in: str
    no_document_about: str
    not_answered: str
    nothing_found: str
    closest: str
    looked_at: str  # a document read that does not state the asked measure: the passage read instead
    not_stated: str  # the evidence read states no figure of the asked measure
    figure_asked: str  # how "not stated" names a measure it has no name for
    other_span: str  # a text lead whose figure covers another span than asked ("for each quarter" for the year)
    spans: dict[int, str]  # a span in months, as ``other_span`` names it
    supporting: str  # before the supporting sentences after a lead row or sentence
    difference: str  # two documents' figures of one measure compared
    higher: str
    lower: str
    statements: dict[str, str]
    largest_step: str = "- The largest {what}: {y2} vs {y1}, {change}."  # "which year saw the largest decrease"
    extreme_point: str = "- The {word} {label}: {value} {period} {cite}."  # "which year had the highest revenue"
    decrease: str = "decrease"
    increase: str = "increase"
    no_loss: str = "None of them reported a loss: every {label} figure is zero or positive."
    other: str = "other"  # the group of companies whose change could not be computed
    computed: str = "{what}{years}{over}:"  # what the executor ran, before its result
    computed_years: str = ", {years}"
    computed_over: str = ", over {n} companies"
    computed_over_one: str = ", over 1 company"
    # an event asked over the companies (router.events): who states it, and what each other document says of it
    event_lead: str = "{docs} {verb} {event}{period} in the passages read."
    event_lead_one: str = "{doc} states {event}{period}: {text} {cite}"
    event_states: str = "states"
    event_state: str = "state"
    event_none: str = "Not found: none of the {n} documents read states {event}{period}."
    event_line: str = "- {doc}: {text} {cite}"
    event_hedged: str = '- {doc}: names {event} only as a risk or possibility ("{cue}"), not as an event: "{text}" {cite}'
    event_negated: str = '- {doc}: says it did not happen ("{cue}"): "{text}" {cite}'
    event_incomplete: str = '- {doc}: "{word}", but not of {needs}: "{text}" {cite}'
    event_vague: str = '- {doc}: names {event} without an object, date or amount: "{text}" {cite}'
    event_absent: str = "- {docs}: no {event}{period} stated in the passages read."
    event_other_year: str = '- {doc}: states {event} in {when}, not in {asked}: "{text}" {cite}'
    event_period: str = " in {years}"
    event_period_zh: str = "{years}年的"
    event_label: str = "{entity} ({period})"
    computed_ops: dict[str, str] = msgspec.field(default_factory=lambda: {
        "lookup": "{label}", "max": "Highest {label}", "min": "Lowest {label}", "rank": "Ranking by {label}",
        "categories": "Grouping by {label}", "screen": "Companies past a bound on {label}",
        "trend": "{label} over time", "increase": "The period of the largest increase in {label}",
        "decrease": "The period of the largest decrease in {label}", "average": "Average {label} over the periods",
        "yoy": "Year-over-year change in {label}"})


EN = Words(
    lang="en", at="at {date}", year_ended="for the year ended {date}", months_ended="for the {m} months ended {date}",
    per_share=" per share", shares=" shares", verdict="{names} {verb} the {word} {label}: {value} {period} {cite}.",
    among_found=" — among the {n} of {total} whose figure was found.",
    highest="highest", lowest="lowest", ascending="ascending", descending="descending",
    by_company_ordered="{label} by company, in {order} order:", by_company="{label} by company:",
    grouped="Grouped by {label}:", none="(none)", missing="No {label} figure was found in the statements of: {docs}.",
    more=" and {n} more", lookup="{label} of {figure}.", step="- {y2} vs {y1}: {change}.",
    overall="- Overall, {y1} to {y2}: {change}.", average="- Average over the {n} periods: {value}.",
    increased="increased by {delta}{pct} from {old} to {new}", decreased="decreased by {delta}{pct} from {old} to {new}",
    unchanged="was unchanged at {new}", also="; also printed as {value} {cite} ({where})",
    where_line="{kind}, “{item}”, line {n}", where_page="{kind}, “{item}”, page {n}",
    no_previous="; no previous period printed",
    screen="{hits} of the {n} companies with a {label} figure{year} have {label} {condition}",
    one_period="- Only one period of this figure is printed in the documents read.",
    per_document="Per document, from the retrieved evidence:", no_evidence_in="- No evidence found in {doc}.",
    no_document_about="No document about {name} is in the collection.",
    not_answered="The question was not answered from other documents.",
    nothing_found="No relevant evidence was found in the collection for this question.",
    closest='The retrieved evidence does not clearly answer this question. The closest passage is: "{text}" [1]',
    looked_at='- {doc}: its statements do not state it; the closest passage read: "{text}" {cite}',
    not_stated='{doc}: {measure}{period} is not stated in the passages read. The closest passage: "{text}" [1]',
    figure_asked="the figure asked",
    other_span="I could not find the figure for {asked} asked; the passage read states one for {span}:",
    spans={12: "the year", 9: "nine months", 6: "six months", 3: "a quarter"},
    supporting="Supporting evidence:",
    difference="- Difference: {a} is {delta} {direction} than {b}{pct}.", higher="higher", lower="lower",
    statements={"income": "income statement", "balance": "balance sheet", "cash_flow": "cash flow statement",
                "comprehensive_income": "statement of comprehensive income", "equity": "statement of equity",
                "key_figures": "key figures table"},
)

ZH = Words(
    lang="zh", at="（截至{date}）", year_ended="（{year}年度）", months_ended="（截至{date}的{m}个月）",
    per_share="/股", shares="股", verdict="{names}的{label}{word}：{value}{period}{cite}。",
    among_found="（仅限找到数据的{n}家，共{total}家）。",
    highest="最高", lowest="最低", ascending="升序", descending="降序",
    by_company_ordered="各公司{label}（{order}）：", by_company="各公司{label}：", grouped="按{label}分组：",
    none="（无）", missing="以下文档的报表中未找到{label}：{docs}。", more="等，另有{n}份", lookup="{figure}。",
    step="- {y2}较{y1}：{change}。", overall="- {y1}至{y2}总体：{change}。", average="- {n}期平均：{value}。",
    increased="增加{delta}{pct}，由{old}增至{new}", decreased="减少{delta}{pct}，由{old}降至{new}",
    unchanged="持平，为{new}", also="；另一处列示为{value}{cite}（{where}）",
    where_line="{kind}，“{item}”，第{n}行", where_page="{kind}，“{item}”，第{n}页", no_previous="；未列示上期数据",
    screen="在有{label}数据的{n}家公司中，{hits}家{year}的{label}{condition}",
    one_period="- 所读文档只列示了该数据的一个期间。",
    per_document="各文档检索到的证据：", no_evidence_in="- {doc}中未找到相关证据。",
    no_document_about="知识库中没有关于{name}的文档。", not_answered="未用其他文档回答该问题。",
    nothing_found="知识库中未找到与该问题相关的证据。", closest="检索到的证据未能明确回答该问题，最接近的段落：“{text}” [1]",
    looked_at="- {doc}：报表中未列示该数据；所读最接近的段落：“{text}”{cite}",
    not_stated="{doc}所读段落中未载明{period}{measure}。最接近的段落：“{text}” [1]", figure_asked="所问数字",
    other_span="未找到所问{asked}的数字；所读段落载明的是{span}的数字：",
    spans={12: "全年", 9: "前三季度", 6: "上半年", 3: "单季度"},
    supporting="相关证据：", other="其他", no_loss="均未出现亏损：各公司{label}均不为负。", computed="{what}{years}{over}：", computed_years="，{years}年",
    computed_over="，共{n}家公司", computed_over_one="，共1家公司",
    computed_ops={"lookup": "{label}", "max": "{label}最高者", "min": "{label}最低者", "rank": "按{label}排名",
                  "categories": "按{label}分组", "screen": "{label}满足条件的公司", "trend": "{label}的各期变化",
                  "increase": "{label}增加最多的期间", "decrease": "{label}减少最多的期间", "average": "{label}的各期平均",
                  "yoy": "{label}同比变化"},
    difference="- 差额：{a}比{b}{direction}{delta}{pct}。", higher="高", lower="低",
    statements={"income": "利润表", "balance": "资产负债表", "cash_flow": "现金流量表",
                "comprehensive_income": "综合收益表", "equity": "所有者权益变动表",
                "key_figures": "主要会计数据"},
    largest_step="- {what}最大的是{y2}较{y1}：{change}。", extreme_point="- {label}{word}的是{period}：{value}{cite}。",
    decrease="降幅", increase="增幅",
    event_lead="{docs}在所读段落中载明了{period}{event}。", event_lead_one="{doc}载明了{period}{event}：{text} {cite}", event_none="未找到：所读{n}份文档均未载明{period}{event}。",
    event_other_year="- {doc}：载明的{event}在{when}年，而非{asked}年：“{text}” {cite}",
    event_line="- {doc}：{text} {cite}",
    event_hedged="- {doc}：仅将{event}作为风险或可能提及（“{cue}”），并非已发生的事项：“{text}” {cite}",
    event_negated="- {doc}：表示未发生（“{cue}”）：“{text}” {cite}",
    event_incomplete="- {doc}：提到“{word}”，但未涉及{needs}：“{text}” {cite}",
    event_vague="- {doc}：提到{event}，但无对象、日期或金额：“{text}” {cite}",
    event_absent="- {docs}：所读段落中未载明{period}{event}。", event_label="{entity}（{period}）",
)


ANSWER_LANG: contextvars.ContextVar[str] = contextvars.ContextVar("answer_lang", default="")
"""The language the typed question was read in ("en", "zh"; ``router.reading``, company names aside), set for
the one synthesis of a query: "What trading financial assets does 英力特 hold?" is answered in English."""


def words(question: str) -> Words:
    """The wording of a question's language: the language it was read in (``ANSWER_LANG``), else Chinese when it
    is written in Chinese, else English."""
    if lang := ANSWER_LANG.get():
        return ZH if lang == "zh" else EN
    return ZH if len(lx.HAN.findall(question)) >= 2 else EN


def date_text(day: dt.date, w: Words) -> str:
    return f"{day.year}年{day.month}月{day.day}日" if w.lang == "zh" else f"{day:%B} {day.day}, {day.year}"
