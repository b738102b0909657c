"""How questions word operations, periods, ranges and units: the cue words of English and Chinese, as data, in
one place (``router.question`` reads them). English cues are lemmas (``rose`` finds ``rise``, ``margins``
``margin``: ``lemmas``); Chinese cues are matched as written. A question shape is an entry here, not a branch
in code.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

import lemminflect

HAN = re.compile(r"[\u4e00-\u9fff]")


def is_zh(text: str) -> bool:
    """Whether a text is written in Chinese (holds a Han character)."""
    return HAN.search(text) is not None


@functools.lru_cache(maxsize=50_000)
def lemmas(word: str) -> frozenset[str]:
    """The word and every lemma lemminflect gives it, any part of speech ("rose" → rose, rise)."""
    word = word.lower()
    found = {word}
    for forms in lemminflect.getAllLemmas(word).values():
        found.update(forms)
    return frozenset(found)


SCALES: Mapping[str, float] = {
    "thousand": 1e3, "thousands": 1e3, "k": 1e3, "million": 1e6, "millions": 1e6, "mn": 1e6, "mm": 1e6, "m": 1e6,
    "billion": 1e9, "billions": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "tn": 1e12,
    "千": 1e3, "万": 1e4, "十万": 1e5, "百万": 1e6, "千万": 1e7, "亿": 1e8, "十亿": 1e9, "百亿": 1e10, "千亿": 1e11,
    "万亿": 1e12,
    "千元": 1e3, "万元": 1e4, "百万元": 1e6, "亿元": 1e8,
}
"""Scale words of amounts, English and Chinese ("$1.2bn", "10亿元")."""
SCALE_NAMES: Mapping[float, tuple[str, str]] = {
    1e3: ("thousand", "千"), 1e4: ("", "万"), 1e6: ("million", "百万"), 1e8: ("", "亿"), 1e9: ("billion", "十亿"),
}
"""How a multiplier is written: (English word, "" when English has none; Chinese word)."""

# ------------------------------------------------------------------------------------ operation cues
# Each cue is an English lemma phrase (words separated by spaces, each matched against a word's lemmas) or a
# Chinese string. A superlative or comparative is read from the word's form ("largest", "higher").

SUPERLATIVE_MIN = frozenset({"low", "small", "little", "few", "weak", "bad", "slow", "poor", "light", "narrow", "thin",
                             "short", "cheap", "lean", "shallow", "tiny", "meager", "meagre", "modest", "slim"})
"""Adjectives whose -er/-est form asks for the lowest; any other adjective's asks for the highest."""
NOT_EXTREMES = frozenset({"late", "early", "new", "old", "far", "further", "recent", "other", "over", "under", "after",
                          "never", "ever", "per", "quarter", "chapter", "order", "number", "member", "paper", "filer",
                          "owner", "partner", "center", "letter", "customer", "supplier", "provider", "manager",
                          "interest", "test", "forest", "rest", "west", "best"})
"""Words with an -er/-est form that ask for no extreme ("latest", "earlier", "newest")."""


def adjective_base(word: str) -> str:
    """The adjective a comparative or superlative is formed from ("heftier" → hefty, "deepest" → deep), or "".
    Periods and nouns ("latest", "earlier", "quarter") are none."""
    forms = lemminflect.getAllLemmas(word.lower()).get("ADJ", ())
    base = next((f for f in forms if f != word.lower()), "")
    return "" if not base or base in NOT_EXTREMES or word.lower() in NOT_EXTREMES or base in LATEST_BASES else base
IRREGULAR_SUPERLATIVE: Mapping[str, str] = {"most": "max", "best": "max", "least": "min", "worst": "min",
                                            "leader": "max", "fattest": "max", "richest": "max", "on top": "max",
                                            "maximum": "max", "minimum": "min", "max": "max", "min": "min",
                                            "highest": "max", "lowest": "min", "largest": "max", "smallest": "min",
                                            "biggest": "max", "greatest": "max", "fewest": "min", "top": "max",
                                            "bottom": "min"}
IRREGULAR_COMPARATIVE: Mapping[str, str] = {"more": "max", "better": "max", "less": "min", "worse": "min",
                                            "fewer": "min"}
ZH_MAX = ("最高", "最大", "最多", "最强", "最好", "最快", "最厉害", "最严重", "居首", "位居榜首")
ZH_MIN = ("最低", "最小", "最少", "最差", "最弱", "最慢", "垫底")
ZH_MORE = ("更高", "更大", "更多", "较高", "较多", "哪个多", "哪个高", "哪个大", "谁多", "谁高", "谁大", "多一些", "高一些",
           "得多", "得更多")
ZH_LESS = ("更低", "更小", "更少", "较低", "较少", "哪个少", "哪个低", "哪个小", "谁少", "谁低", "少一些", "低一些",
           "得少", "得更少")
BOUND_PHRASES = ("at least", "at most", "most recent", "most recently", "no less than", "no more than", "not less than",
                 "not more than", "more than", "less than", "the most recent")
"""Phrases whose "most"/"least"/"more"/"less" state a bound or a period, not an extreme."""

RANK = ("rank", "ranking", "order", "sort", "league table", "from high to low", "from low to high",
        "排名", "排序", "排列", "名次", "从高到低", "从低到高", "从大到小", "从小到大", "由高到低", "由低到高")
ASCENDING = ("ascend", "ascending", "from low to high", "from small to large", "low to high", "small to large",
             "low first", "small first", "从低到高", "从小到大", "由低到高", "升序")
DESCENDING = ("descend", "descending", "from high to low", "high to low", "large to small", "high first",
              "从高到低", "从大到小", "由高到低", "降序")
COMPARE = ("compare", "comparison", "versus", "vs", "against", "side by side", "relative to", "stack up",
           "next to each other", "together", "head to head", "比较", "对比", "相比", "比一比", "放在一起")
GROUP = ("group the", "group them", "group these", "group those", "group each", "group all", "group company",
         "group by", "categorize", "categorise", "classify", "bucket", "tier", "band", "bracket", "cluster",
         "segment into", "split", "sort into", "put into", "place into", "divide into", "label", "camp",
         "file each", "file them", "file every", "file the companies", "file the firms", "count as", "same rating",
         "same band", "same tier", "same bucket",
         "分组", "分为", "分成", "划分", "分档", "分类", "归类", "归入", "两组", "三组", "四组", "两类", "三类", "三档", "两档", "四档")
GROUP_COUNT = re.compile(r"(?i)\binto\s+(?:two|three|four|five|\d)\s+(?:groups|buckets|tiers|bands|categories|"
                         r"classes|camps|brackets|collections)\b")
DIRECTIONS: Mapping[str, tuple[str, ...]] = {
    "positive": ("profitable", "profit making", "in the black", "above zero", "positive", "inflow", "盈利", "为正", "正数"),
    "negative": ("loss making", "unprofitable", "in the red", "below zero", "negative", "outflow", "亏损", "为负", "负数"),
}
"""Groups by sign ("profitable vs loss-making", 盈利和亏损), beside groups by direction of change."""
PROFIT_SIGN = ("profitable", "unprofitable", "profit making", "loss making", "in the black", "in the red", "盈利")
"""Words of a profit's sign: with no measure named ("was it profitable?", 是否盈利), the net income is asked."""
OTHER_GROUP = ("other", "others", "unchanged", "no change", "flat", "其他", "其它", "不变", "持平")
"""A stated group for the companies that fit neither direction."""
SERIES = ("trend", "history", "historical", "historically", "consistent", "stable", "steady", "volatile", "over time", "each year", "every year", "year by year", "evolve",
          "evolution", "trajectory", "path", "over the year", "over the period", "each of", "variation",
          "across the quarter", "across quarters", "over the quarter", "quarter to quarter", "from quarter to quarter",
          "quarter by quarter", "each quarter", "heading", "direction", "walk me through", "lay out",
          "走势", "趋势", "历年", "各年", "逐年", "每年", "变化趋势", "变化情况", "演变", "走向")
EACH = ("each", "respectively", "各多少", "各是多少", "分别是多少", "分别")
"""Words asking for one figure per period — a series when the question names several periods."""
CHANGE = ("change", "grow", "growth", "increase", "decrease", "rise", "fall", "decline", "drop", "go up", "go down",
          "up or down", "improve", "deteriorate", "shrink", "expand", "jump", "climb", "slide", "swing", "delta",
          "difference", "move", "movement", "shift", "yoy", "apart", "gap", "better or worse", "变化", "变动", "增长", "下降", "增加",
          "减少", "增幅", "降幅", "增速", "同比", "环比", "上升", "下滑", "提升", "回落", "多了", "少了", "多出", "高出",
          "相差", "差额", "差距", "是增是减")
INCREASE = ("grow", "growth", "increase", "rise", "go up", "improve", "expand", "jump", "climb", "gain", "up",
            "增长", "增加", "上升", "提升", "增幅", "上涨")
DECREASE = ("decrease", "decline", "fall", "drop", "go down", "deteriorate", "shrink", "slide", "reduction", "down",
            "下降", "减少", "下滑", "回落", "降幅", "下跌")
RATIO_OF = ("ratio of", "divided by", "relative to", "比率", "之比", "的比值")
"""Words asking for one measure over another (the first named over the second)."""
SHARE_OF = ("as a percentage of", "as a percent of", "as a % of", "as a share of", "as a proportion of",
            "as a fraction of", "percentage of", "share of", "proportion of", "占比", "比重", "的比例", "占")
"""Words asking for one measure as a percentage of another."""
MARGIN_WORDS = ("margins", "margin")
"""A measure followed by one of these is that measure over revenue, in percent ("operating income % margin")."""
WHICH_PERIOD = ("which year", "which fiscal year", "what year", "which quarter", "what quarter", "which period",
                "which fiscal quarter", "in which year", "哪一年", "哪年", "哪个年度", "哪一年度", "哪个季度", "哪一季度",
                "哪一期", "哪个报告期")
"""Words asking for a period of one company rather than a company: the extreme is over its periods."""
AVERAGE = ("average", "mean", "平均", "均值")
"""Words asking for the mean over the stated periods (a measure named "weighted average …" is no such word)."""
AMOUNT_ASKED = ("how much", "by how much", "by what", "how many", "what is the change", "多少", "几何")
"""Words asking for one amount of change rather than a path."""
LOSS = ("loss", "deficit", "lose", "亏损", "净亏损", "亏")
"""A profit measure asked as a loss ("the largest net loss"): the sign flips the extreme."""

CHANGE_BASIS: Mapping[str, tuple[str, ...]] = {
    "cagr": ("cagr", "compound annual", "compounded annual", "复合增长率", "年复合"),
    "yoy": ("yoy", "year over year", "year-over-year", "year on year", "year-on-year", "versus the prior year",
            "compared with the prior year", "compared to the prior year", "from the prior year", "over the prior year",
            "versus last year", "同比"),
    "qoq": ("qoq", "quarter over quarter", "quarter-over-quarter", "quarter on quarter", "sequential",
            "sequentially", "环比"),
    "percent": ("percent", "percentage", "%", "growth rate", "in relative terms", "relative", "增长率", "增速", "百分比",
                "幅度"),
}
"""How a change is measured, most specific first; a change with none of these is absolute."""
POINTS = ("percentage point", "points", "point", "bps", "basis point", "个百分点")
"""A change of a ratio in points is absolute ("how many percentage points")."""

COLLECTION = ("which company", "which companies", "which firm", "which firms", "what company", "which one",
              "which issuer", "which of the company", "which of the companies", "which of them", "who", "whose",
              "among the company", "among the companies", "among all", "across the company", "across the companies",
              "in the collection", "of the companies", "every company", "each company", "all company",
              "all companies", "the companies", "these companies", "those companies",
              "哪家", "哪些", "哪个公司", "哪一家", "这几家", "上述公司", "以上公司", "各公司", "各家", "所有公司", "哪只")
"""Words that ask over a set of companies (the named set, or the whole collection when none is named)."""

BOUND_WORDS: Mapping[str, tuple[str, ...]] = {
    "gte": ("at least", "no less than", "not less than", "or more", "or above", "or higher", "and above", "and over",
            "and more", "and higher", ">=", "≥", "不低于", "不少于",
            "及以上", "以上(含)", "至少"),
    "lte": ("at most", "no more than", "not more than", "or less", "or below", "or lower", "and below", "and under",
            "and less", "and lower", "up to", "<=", "≤", "不高于",
            "不超过", "及以下", "以下(含)", "至多"),
    "gt": ("above", "over", "more than", "greater than", "higher than", "exceed", "exceeding", "in excess of",
           "north of", ">", "超过", "高于", "大于", "多于", "以上"),
    "lt": ("below", "under", "less than", "lower than", "smaller than", "beneath", "short of", "<", "低于", "小于", "少于",
           "不足", "不到", "以下"),
}
"""A bound a figure must meet, by the words that state it (the inclusive forms first: "at least" before "least")."""

SAME_AMOUNT = ("及", "或", "and", "or")
"""Words between an amount written twice for one bound ("0及0以下": 0 or below)."""
RANGE_JOIN = ("to", "and", "-", "–", "—", "~", "through", "thru", "至", "到", "和")

# ------------------------------------------------------------------------------------ periods

_MONTH_ABBREVIATIONS = (
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec"),
)
MONTH_NAMES: tuple[str, ...] = tuple(names[0] for names in _MONTH_ABBREVIATIONS)
MONTHS: Mapping[str, int] = {m: i + 1 for i, names in enumerate(_MONTH_ABBREVIATIONS) for m in names}
"""Month names and abbreviations (lower case) → month number."""
QUARTER_WORDS: Mapping[str, int] = {"first": 1, "second": 2, "third": 3, "fourth": 4}
"""Ordinal quarter words ("third quarter") → quarter."""
ZH_QUARTER_NUMERALS = "一二三四"
"""Chinese quarter numerals, first to fourth (一季度, 第三季度)."""
SPANS: Mapping[int, tuple[str, ...]] = {
    9: ("nine months", "9 months", "nine-month", "9-month", "first three quarters", "year to date", "year-to-date",
        "ytd", "9m", "前三季度", "1-9月", "1至9月", "前三个季度"),
    6: ("six months", "6 months", "six-month", "6-month", "first half", "first-half", "h1", "half year", "half-year", "半年度", "上半年",
        "1-6月", "1至6月", "中期"),
    3: ("three months", "3 months", "three-month", "3-month", "quarter", "季度"),
}
"""Stated spans of a period, in months (a quarter is read with its number: "Q3", "third quarter", 第三季度)."""
SINCE = ("since",)
"""Words before a year that make it a point of reference, not the period a sentence reports ("the first positive
year since 2019"); in Chinese the year is followed by 以来 (``SINCE_AFTER``)."""
SINCE_AFTER = ("以来",)
YEAR_TO_DATE = ("year to date", "year-to-date", "ytd")
"""Words of a span from the fiscal year's start: before a date ending a calendar quarter ("YTD through September
2023") the months to that date (a calendar year is assumed); written alone, nine months (``SPANS``)."""
YEAR_SPAN = ("twelve months", "12 months", "twelve-month", "12-month", "fiscal year", "year ended", "year ending",
             "years ended", "full year", "full-year", "财年", "全年")
"""Words that make a period ending at a date a whole year ("the fiscal year ended January 31, 2019")."""

LATEST_BASES = frozenset({"late", "new", "recent", "fresh"})
"""Adjectives of time whose superlative asks for the latest period ("newest", "freshest", "latest")."""


def latest_superlative(word: str) -> bool:
    """A superlative of an adjective of time ("newest", "freshest"): the latest period, no extreme."""
    return word.lower().endswith("est") and bool(set(lemminflect.getAllLemmas(word.lower()).get("ADJ", ()))
                                                  & LATEST_BASES)


LATEST = ("latest", "most recent", "most recently", "newest", "last reported", "最新", "最近一期", "本报告期")
NEGATED_SPAN = re.compile(r"(?i)(?:\bnot|\brather than|\binstead of|不要|而非|非)\s*(?:the\s+)?$")
LAST_N = re.compile(r"(?i)\b(?:last|past|previous|prior|recent)\s+(\d+|two|three|four|five|six|seven|eight|nine|ten)"
                    r"\s+(?:fiscal\s+)?years\b|[近过去最近]+\s*([0-9一二三四五六七八九十两]+)\s*年")
NUMBER_WORDS: Mapping[str, int] = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                                   "eight": 8, "nine": 9, "ten": 10, "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5,
                                   "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}

# ------------------------------------------------------------------------------------ units and decimals

UNIT_ASKED: Mapping[str, tuple[str, ...]] = {
    "thousand": ("in thousands", "in thousand", "in usd thousands", "in $ thousands", "($ thousands)", "千元"),
    "million": ("in millions", "in million", "in usd millions", "in $ millions", "($ millions)", "in $m",
                "in usd million", "in mn", "how many millions", "百万元"),
    "billion": ("in billions", "in billion", "in usd billions", "in $ billions", "($ billions)", "in $bn", "in bn"),
    "亿": ("以亿元", "亿元为单位", "单位：亿元", "单位:亿元", "用亿元"),
    "万": ("以万元", "万元为单位", "单位：万元", "单位:万元", "用万元", "按万元"),
}
DECIMALS = re.compile(r"(?i)\b(?:(?:to|in|with|rounded to|round(?:ed)? to|at)\s+)?(\d|one|two|three|four|zero|no)\s+"
                      r"decimal(?:\s+places?|s)?\b|保留\s*([0-9一二两三四])\s*位小数")
DECIMAL_WORDS: Mapping[str, int] = {"zero": 0, "no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "一": 1, "二": 2,
                                    "两": 2, "三": 3, "四": 4}

DOCUMENT_AFTER_YEAR = re.compile(r"(?i)\A\s*(?:form\s+)?(?:10-?k|10-?q|20-?f|annual report|quarterly report|"
                                 r"filing|report|年报|年度报告|季报|季度报告)")
"""Words that make the year before them a document's ("as shown in the 2022 10-K"), not a period asked."""

SAID_OTHERWISE: Mapping[str, tuple[str, ...]] = {
    "buy back": ("repurchased", "repurchase", "repurchases"), "bought back": ("repurchased", "repurchase"),
    "buyback": ("repurchased", "repurchase", "repurchases"), "buybacks": ("repurchased", "repurchases"),
}
"""How a question's plain words are written in filings: passages with these words are read at half weight."""

FORWARD_LOOKING = ("expect", "expects", "expected", "guidance", "guide", "guides", "guided", "outlook", "forecast",
                   "anticipate", "plan to", "we target", "targeting", "our target for", "预计", "预期", "展望", "计划")
"""Words of a sentence about the future: its figure is a plan for its year, never the figure of another year."""


def forward_looking(text: str) -> bool:
    """Does the text speak of a plan, a forecast or guidance (``FORWARD_LOOKING``, as words; "higher than
    expected" and "as expected" look back)?"""
    low = text.lower()
    return any((wd in low) if is_zh(wd) else re.search(rf"(?<![a-z])(?<!than )(?<!as ){re.escape(wd)}(?![a-z])", low)
               for wd in FORWARD_LOOKING)

ASKED_KIND: Mapping[str, tuple[str, ...]] = {
    "count": ("how many", "number of", "多少个", "多少名", "多少家", "几个"),
    "money": ("how much", "cost", "costs", "pay", "paid", "price", "spend", "spent", "worth", "charge", "charged",
              "多少钱", "花费", "金额", "支付"),
    "percent": ("what percentage", "what percent", "what share", "share of", "占比", "比例", "百分之"),
}
"""What kind of figure a question asks for, by its words: the sentence that states a figure of that kind leads a
text answer ("How many vans …" → "410 electric delivery vans", not the sentence with a 31% saving)."""


# ------------------------------------------------------------------------------------ follow-ups
# A turn of a conversation that leaves its subject unstated ("And its net income?", "What about 2022?", 那2022年呢)
# takes it from the earlier turns (``router.followup``). English cues are matched as the reader matches cue words
# (by lemma), Chinese ones as written.

FOLLOWUP_OPENERS = ("and", "also", "now", "then", "so", "ok", "okay", "plus", "but",
                    "那", "那么", "还有", "另外", "然后", "再问", "再看", "换成", "换作")
"""Words that open a turn continuing the previous one, matched at the start of the turn only."""
FOLLOWUP_ELLIPSIS = ("what about", "how about", "what of", "same for", "the same for", "same question for",
                     "as well", "likewise", "呢", "同样", "也是")
"""Words anywhere in a turn that leave out what an earlier turn said ("What about 2022?", 极光制药呢？)."""
FOLLOWUP_ENTITY = ("its", "it", "their", "they", "them", "the company", "that company", "this company",
                   "the same company", "the firm", "that firm", "这家公司", "该公司", "那家公司", "该企业", "这家企业",
                   "它", "它们", "其", "他们")
"""Words referring to a company named earlier ("its net income", 该公司的营收)."""
FOLLOWUP_PERIOD = ("that year", "the same year", "same year", "that period", "the same period", "same period",
                   "that quarter", "the same quarter", "same quarter", "that fiscal year",
                   "同期", "当年", "同年", "该年", "那一年", "那年", "当期", "同一季度", "那个季度")
"""Words referring to a period named earlier."""
FOLLOWUP_MEASURE = ("that figure", "the same figure", "that number", "the same number", "that measure",
                    "the same measure", "that metric", "the same metric", "that line",
                    "该指标", "这个指标", "这一指标", "同一指标", "这个数", "这个数字")
"""Words referring to a measure named earlier."""
FOLLOWUP_NOT = ("其他", "其它", "其中", "其余", "其次", "尤其", "极其", "及其", "与其")
"""Words holding a Chinese reference character that refer to nothing earlier (其他应收款 is no 其)."""
FOLLOWUP_OPERATIONS: Mapping[str, tuple[str, str]] = {
    "compare": ("compared", "对比"), "max": ("highest", "最高"), "min": ("lowest", "最低"), "rank": ("ranked", "排名"),
    "change": ("change", "变化"), "series": ("trend", "趋势"),
}
"""How a resolved follow-up writes an operation it takes from an earlier turn (English, Chinese); the operations
not listed (screens, groups: their bounds are not carried over) are not taken."""
FOLLOWUP_PERIODS: Mapping[str, Mapping[str, str]] = {
    "en": {"year": "fiscal {year}", "quarter": "Q{quarter} {year}", "quarter_alone": "Q{quarter}",
           "span": "first {span} of {year}", "latest": "latest", "latest_span": "latest {span}",
           "last_n": "last {n} years", "9": "nine months", "6": "six months", "3": "three months"},
    "zh": {"year": "{year}年", "quarter": "{year}年第{quarter}季度", "quarter_alone": "第{quarter}季度",
           "span": "{year}年{span}", "latest": "最新", "latest_span": "最新{span}", "last_n": "近{n}年",
           "9": "前三季度", "6": "上半年", "3": "三个月"},
}
"""How a resolved follow-up writes a period it takes from an earlier turn (``{quarter}`` in Chinese is written
with ``ZH_QUARTER_NUMERALS``; ``{span}`` is the entry of the period's months)."""

# ------------------------------------------------------------------------------------ measures

# How a question names a measure (English and Chinese) is the measure table's: ``kb.core.measures.MEASURES``.


WEAK_MEASURE_WORDS = frozenset({"cash", "assets", "liabilities", "equity", "debt", "profit", "earnings", "收入",
                                "borrowings", "dividends"})
"""Single words that name a measure only when nothing fuller does ("cash" in "cash flow from financing")."""
CASH_OF: Mapping[str, str] = {"operations": "cfo", "operating": "cfo", "investing": "cfi", "investment": "cfi",
                              "financing": "cff"}
""""cash" with one of these words within a few words after it ("burned the most cash in its operations", "cash
spent on investing") names that cash flow, not the cash balance."""
BURN = ("burn", "consume", "bleed")
"""Verbs that ask for a cash flow as an outflow ("burned the most cash in operations": the lowest net cash from
operating activities)."""

NOT_THE_MEASURE_AFTER = frozenset({"structure", "structures", "instrument", "instruments", "management", "strategy",
                                   "strategies", "covenant", "covenants", "maturity", "maturities", "rating", "ratings",
                                   "issuance", "policy", "policies", "facility", "facilities", "agreement",
                                   "agreements", "offering", "offerings", "contingency", "contingencies", "discussion",
                                   "position", "positions", "matters", "planning", "profile", "terms", "recognition",
                                   "standard", "standards", "segment", "segments", "guidance", "outlook", "drivers",
                                   "mix", "concentration"})
"""A one-word measure followed by one of these names something else ("debt structure", "revenue recognition")."""
MEASURE_HEADS = frozenset({"balance", "balances", "bill", "spend", "spending", "spent", "figure", "figures", "expense",
                           "expenses", "amount", "amounts", "level", "levels", "number", "numbers", "value", "values",
                           "line", "item", "items", "overall", "consolidated", "merchandise", "position", "reported",
                           "stated", "recorded", "booked", "outlay", "outlays", "costs", "cost", "generated", "earned",
                           "made", "produced", "posted", "delivered", "held", "carried", "sum", "size", "count",
                           "equivalents", "unadjusted", "gaap", "expenditure", "expenditures", "quarterly",
                           "annual", "yearly", "global", "worldwide", "combined", "record", "full"})
"""Words beside a one-word measure that leave it that measure ("goodwill balance", "R&D bill", "merchandise
inventories"); any other word the question does not account for makes a phrase that may name another measure
("unearned revenue", "debt extinguishment"), and the reading says it is not sure."""
COMPANY_DEFINED = ("adjusted", "non gaap", "non-gaap", "organic", "segment", "underlying", "core")
"""Words marking a company's own measure ("adjusted EBITDA"): not computed from the statements' lines."""
PROFIT_MEASURES = frozenset({"net_income", "net_income_parent", "net_income_continuing", "operating_income",
                             "gross_profit", "pretax_income"})
"""Measures a question may ask about as a loss."""

ZH_PERIOD_UNITS = ("个月", "年度", "季度", "年", "月", "日")
"""What follows a number to make it a period, not an amount: 2023年, 3个月."""
ZH_MEASURE_WORDS: Mapping[str, str] = {
    "员工": "职工", "雇员": "职工", "还债": "偿还债务", "还钱": "偿还债务", "卖货": "销售商品", "卖东西": "销售商品",
    "卖产品": "销售商品", "买东西": "购买商品", "进货": "购买商品", "借钱": "取得借款", "借到": "取得借款", "分红": "分配股利",
    "发股利": "分配股利", "买设备": "购建固定资产", "盖厂房": "购建固定资产", "交税": "税费", "缴税": "税费", "纳税": "税费",
    "给股东": "分配股利", "花在研发": "研发费用", "搞研发": "研发费用", "欠银行": "借款", "付出去": "支付", "赚了": "净利润", "赚": "净利润", "花了": "支出", "交了": "支付",
    "缴纳": "支付",
    "花出去": "支付", "花掉": "支付", "付了": "支付", "赚到": "净利润", "挣了": "净利润",
}
"""How people write a statement line's words in Chinese → how CAS statements print them, read before a question's
leftover words are matched to the printed lines by their characters (``router.meaning``)."""


def zh_as_printed(text: str) -> str:
    """A Chinese text with its colloquial measure words written as statements print them (``ZH_MEASURE_WORDS``,
    longest first)."""
    for said in sorted(ZH_MEASURE_WORDS, key=len, reverse=True):
        text = text.replace(said, ZH_MEASURE_WORDS[said])
    return text
ZH_FUNCTION_CHARS = "的是了在和与及或各这那哪些家年度公司谁"
"""Characters of a Chinese question that never name a measure (the words left over are matched by meaning)."""
STOP_WORDS = frozenset({"the", "a", "an", "of", "in", "on", "for", "to", "and", "or", "by", "with", "what", "was",
                        "is", "are", "were", "did", "does", "do", "how", "which", "who", "its", "their", "it", "that",
                        "this", "these", "those", "from", "at", "as", "be", "been", "has", "had", "have", "report",
                        "reported", "company", "companies", "year", "fiscal", "please", "tell", "me", "show",
                        "between", "about", "into", "over", "under", "per", "than", "any", "all", "each",
                        "using", "via", "based", "when", "where", "while", "because", "since"})

ZH_PLACES = ("北京", "上海", "天津", "重庆", "广东", "广州", "深圳", "珠海", "佛山", "东莞", "浙江", "杭州", "宁波", "温州",
             "江苏", "南京", "苏州", "无锡", "常州", "山东", "济南", "青岛", "烟台", "福建", "福州", "厦门", "湖北", "武汉",
             "湖南", "长沙", "四川", "成都", "陕西", "西安", "河南", "郑州", "河北", "石家庄", "安徽", "合肥", "江西",
             "南昌", "辽宁", "沈阳", "大连", "吉林", "长春", "黑龙江", "哈尔滨", "山西", "太原", "云南", "昆明", "贵州",
             "贵阳", "广西", "南宁", "海南", "海口", "甘肃", "兰州", "宁夏", "银川", "青海", "西宁", "新疆", "乌鲁木齐",
             "内蒙古", "西藏", "中国")
"""Places a Chinese registered name starts with and its short name (简称) drops (深圳市德赛电池 → 德赛电池)."""

ZH_LINE_ITEMS = (
    # 资产负债表 (CAS general format)
    "货币资金", "交易性金融资产", "衍生金融资产", "应收票据", "应收账款", "应收款项融资", "预付款项", "其他应收款", "存货",
    "合同资产", "持有待售资产", "一年内到期的非流动资产", "其他流动资产", "流动资产合计", "债权投资", "其他债权投资",
    "长期应收款", "长期股权投资", "其他权益工具投资", "其他非流动金融资产", "投资性房地产", "固定资产", "在建工程",
    "生产性生物资产", "使用权资产", "无形资产", "开发支出", "商誉", "长期待摊费用", "递延所得税资产", "其他非流动资产",
    "非流动资产合计", "资产总计", "短期借款", "交易性金融负债", "衍生金融负债", "应付票据", "应付账款", "预收款项",
    "合同负债", "应付职工薪酬", "应交税费", "其他应付款", "持有待售负债", "一年内到期的非流动负债", "其他流动负债",
    "流动负债合计", "长期借款", "应付债券", "租赁负债", "长期应付款", "预计负债", "递延收益", "递延所得税负债",
    "其他非流动负债", "非流动负债合计", "负债合计", "实收资本", "股本", "资本公积", "库存股", "其他综合收益", "专项储备",
    "盈余公积", "未分配利润", "少数股东权益", "所有者权益合计", "负债和所有者权益总计",
    # 利润表
    "营业总收入", "营业收入", "利息收入", "营业总成本", "营业成本", "税金及附加", "销售费用", "管理费用", "研发费用", "财务费用",
    "利息费用", "其他收益", "投资收益", "对联营企业和合营企业的投资收益", "净敞口套期收益", "公允价值变动收益",
    "信用减值损失", "资产减值损失", "资产处置收益", "营业利润", "营业外收入", "营业外支出", "利润总额", "所得税费用",
    "净利润", "持续经营净利润", "终止经营净利润", "归属于母公司股东的净利润", "少数股东损益", "其他综合收益的税后净额",
    "综合收益总额", "基本每股收益", "稀释每股收益",
    # 现金流量表
    "销售商品、提供劳务收到的现金", "收到的税费返还", "收到其他与经营活动有关的现金", "经营活动现金流入小计",
    "购买商品、接受劳务支付的现金", "支付给职工以及为职工支付的现金", "支付的各项税费", "支付其他与经营活动有关的现金",
    "经营活动现金流出小计", "经营活动产生的现金流量净额", "收回投资收到的现金", "取得投资收益收到的现金",
    "处置固定资产、无形资产和其他长期资产收回的现金净额", "投资活动现金流入小计",
    "购建固定资产、无形资产和其他长期资产支付的现金", "投资支付的现金", "投资活动现金流出小计",
    "投资活动产生的现金流量净额", "吸收投资收到的现金", "取得借款收到的现金", "筹资活动现金流入小计", "偿还债务支付的现金",
    "分配股利、利润或偿付利息支付的现金", "筹资活动现金流出小计", "筹资活动产生的现金流量净额",
    "汇率变动对现金及现金等价物的影响", "现金及现金等价物净增加额", "期初现金及现金等价物余额", "期末现金及现金等价物余额",
    # 主要会计数据和财务指标
    "归属于上市公司股东的净利润", "归属于上市公司股东的扣除非经常性损益的净利润", "加权平均净资产收益率",
    "归属于上市公司股东的净资产", "非经常性损益",
)
"""The line items of Chinese statements as the CAS general formats print them (a question names a line outside
the vocabulary by its printed label: 交易性金融资产, 合同负债)."""

LINE_ALIASES: Mapping[str, str] = {
    "扣非净利润": "归属于上市公司股东的扣除非经常性损益的净利润", "扣非归母净利润": "归属于上市公司股东的扣除非经常性损益的净利润",
    "扣非": "归属于上市公司股东的扣除非经常性损益的净利润", "投资净收益": "投资收益", "信用减值": "信用减值损失",
    "公允价值变动损益": "公允价值变动收益",
    "经营活动现金流入": "经营活动现金流入小计", "经营活动现金流出": "经营活动现金流出小计",
    "投资活动现金流入": "投资活动现金流入小计", "投资活动现金流出": "投资活动现金流出小计",
    "筹资活动现金流入": "筹资活动现金流入小计", "筹资活动现金流出": "筹资活动现金流出小计",
}
"""Short names analysts give printed lines (扣非净利润) → the printed label."""

ZH_LINE_ENGLISH: Mapping[str, tuple[str, ...]] = {
    # 资产负债表
    "货币资金": ("monetary fund", "cash and bank balance"), "交易性金融资产": ("trading financial asset",
    "financial asset held for trading", "held for trading financial asset"),
    "衍生金融资产": ("derivative financial asset",), "应收票据": ("note receivable", "bill receivable"),
    "应收账款": ("account receivable",), "应收款项融资": ("receivables financing", "receivable financing"),
    "预付款项": ("prepayment", "advance to supplier"), "其他应收款": ("other receivable",), "存货": ("inventory",),
    "合同资产": ("contract asset",), "持有待售资产": ("asset held for sale",),
    "一年内到期的非流动资产": ("non current asset due within one year", "non current asset fall due within one year",
                      "current portion of non current asset"),
    "其他流动资产": ("other current asset",), "流动资产合计": ("total current asset",),
    "债权投资": ("debt investment",), "其他债权投资": ("other debt investment",),
    "长期应收款": ("long term receivable",), "长期股权投资": ("long term equity investment",),
    "其他权益工具投资": ("other equity instrument investment", "investment in other equity instrument"),
    "其他非流动金融资产": ("other non current financial asset",),
    "投资性房地产": ("investment property", "investment real estate"), "固定资产": ("fixed asset",),
    "在建工程": ("construction in progress",), "生产性生物资产": ("productive biological asset",),
    "使用权资产": ("right of use asset",), "无形资产": ("intangible asset",),
    "开发支出": ("development expenditure",), "商誉": ("goodwill",),
    "长期待摊费用": ("long term prepaid expense", "long term deferred expense"),
    "递延所得税资产": ("deferred tax asset", "deferred income tax asset"),
    "其他非流动资产": ("other non current asset",), "非流动资产合计": ("total non current asset",),
    "资产总计": ("total asset",), "短期借款": ("short term borrowing", "short term loan"),
    "交易性金融负债": ("trading financial liability",), "衍生金融负债": ("derivative financial liability",),
    "应付票据": ("note payable", "bill payable"), "应付账款": ("account payable",),
    "预收款项": ("advance from customer", "receipt in advance"), "合同负债": ("contract liability",),
    "应付职工薪酬": ("employee benefit payable", "payroll payable"), "应交税费": ("tax payable",),
    "其他应付款": ("other payable",), "持有待售负债": ("liability held for sale",),
    "一年内到期的非流动负债": ("non current liability due within one year", "non current liability fall due within one year",
                      "current portion of non current liability"),
    "其他流动负债": ("other current liability",), "流动负债合计": ("total current liability",),
    "长期借款": ("long term borrowing", "long term loan"), "应付债券": ("bond payable",),
    "租赁负债": ("lease liability",), "长期应付款": ("long term payable",),
    "预计负债": ("provision", "estimated liability"), "递延收益": ("deferred income",),
    "递延所得税负债": ("deferred tax liability", "deferred income tax liability"),
    "其他非流动负债": ("other non current liability",), "非流动负债合计": ("total non current liability",),
    "负债合计": ("total liability",), "实收资本": ("paid in capital",), "股本": ("share capital",),
    "资本公积": ("capital reserve",), "库存股": ("treasury share", "treasury stock"),
    "其他综合收益": ("other comprehensive income",), "专项储备": ("special reserve",),
    "盈余公积": ("surplus reserve", "statutory surplus reserve"),
    "未分配利润": ("undistributed profit", "retained earning"),
    "少数股东权益": ("minority interest", "non controlling interest"),
    "所有者权益合计": ("total owners equity", "total owner equity"),
    "负债和所有者权益总计": ("total liability and owners equity", "total liability and owner equity"),
    # 利润表
    "营业总收入": ("total operating revenue",), "营业收入": ("operating revenue",), "利息收入": ("interest income",),
    "营业总成本": ("total operating cost",), "营业成本": ("operating cost",),
    "税金及附加": ("tax and surcharge", "taxes and surcharges"), "销售费用": ("selling expense",),
    "管理费用": ("administrative expense",), "研发费用": ("research and development expense",),
    "财务费用": ("financial expense", "finance cost"), "利息费用": ("interest expense",),
    "其他收益": ("other income",), "投资收益": ("investment income",),
    "对联营企业和合营企业的投资收益": ("investment income from associates and joint ventures",),
    "净敞口套期收益": ("net exposure hedging gain",),
    "公允价值变动收益": ("gain from change in fair value", "gain or loss from change in fair value",
                 "gain from fair value change", "fair value change gain"),
    "信用减值损失": ("credit impairment loss",), "资产减值损失": ("asset impairment loss", "impairment loss on asset"),
    "资产处置收益": ("gain on disposal of asset", "asset disposal gain"), "营业利润": ("operating profit",),
    "营业外收入": ("non operating income",), "营业外支出": ("non operating expense",),
    "利润总额": ("total profit",), "所得税费用": ("income tax expense",), "净利润": ("net profit",),
    "终止经营净利润": ("net profit from discontinued operation",),
    "少数股东损益": ("profit attributable to minority interest", "minority interest income"),
    "其他综合收益的税后净额": ("other comprehensive income net of tax",),
    "综合收益总额": ("total comprehensive income",), "基本每股收益": ("basic earnings per share",),
    "稀释每股收益": ("diluted earnings per share",),
    # 现金流量表
    "销售商品、提供劳务收到的现金": ("cash received from selling goods and rendering services",
                       "cash received from sale of goods and rendering of services"),
    "收到的税费返还": ("tax refund received",),
    "收到其他与经营活动有关的现金": ("other cash received relating to operating activities",),
    "经营活动现金流入小计": ("cash inflow from operating activities", "operating cash inflow"),
    "购买商品、接受劳务支付的现金": ("cash paid for goods and services",),
    "支付给职工以及为职工支付的现金": ("cash paid to and on behalf of employees",),
    "支付的各项税费": ("tax paid", "cash paid for taxes"),
    "支付其他与经营活动有关的现金": ("other cash paid relating to operating activities",),
    "经营活动现金流出小计": ("cash outflow from operating activities", "operating cash outflow"),
    "经营活动产生的现金流量净额": ("net cash flow from operating activities",),
    "收回投资收到的现金": ("cash received from disposal of investments", "cash received from recovery of investments"),
    "取得投资收益收到的现金": ("cash received from investment income",),
    "处置固定资产、无形资产和其他长期资产收回的现金净额": (
        "net cash received from disposal of fixed assets intangible assets and other long term assets",),
    "投资活动现金流入小计": ("cash inflow from investing activities",),
    "购建固定资产、无形资产和其他长期资产支付的现金": (
        "cash paid to acquire fixed assets intangible assets and other long term assets",),
    "投资支付的现金": ("cash paid for investments",),
    "投资活动现金流出小计": ("cash outflow from investing activities",),
    "投资活动产生的现金流量净额": ("net cash flow from investing activities",),
    "吸收投资收到的现金": ("cash received from capital contributions", "cash received from investors"),
    "取得借款收到的现金": ("cash received from borrowings",),
    "筹资活动现金流入小计": ("cash inflow from financing activities",),
    "偿还债务支付的现金": ("cash paid to repay debts", "cash paid for debt repayment", "cash repayment of debts",
                  "cash paid to repay debt"),
    "分配股利、利润或偿付利息支付的现金": ("cash paid for dividends profits or interest",
                          "cash paid for distribution of dividends profits or interest"),
    "筹资活动现金流出小计": ("cash outflow from financing activities",),
    "筹资活动产生的现金流量净额": ("net cash flow from financing activities",),
    "汇率变动对现金及现金等价物的影响": ("effect of exchange rate changes on cash and cash equivalents",),
    "现金及现金等价物净增加额": ("net increase in cash and cash equivalents",),
    "期初现金及现金等价物余额": ("cash and cash equivalents at the beginning of the period",),
    "期末现金及现金等价物余额": ("cash and cash equivalents at the end of the period",),
    # 主要会计数据和财务指标
    "归属于上市公司股东的净利润": ("net profit attributable to shareholders of the listed company",),
    "归属于上市公司股东的扣除非经常性损益的净利润": (
        "net profit attributable to shareholders after deducting non recurring gains and losses",
        "net profit after deducting non recurring gains and losses",
        "net profit attributable to shareholders of the listed company after deducting non recurring gains and losses"),
    "加权平均净资产收益率": ("weighted average return on net assets",),
    "归属于上市公司股东的净资产": ("net assets attributable to shareholders of the listed company",),
    "非经常性损益": ("non recurring gains and losses", "non recurring gain and loss"),
}
"""How English names each line item of Chinese statements (the standard English of the CAS formats, words in their
lemma form: "trading financial asset" is also "trading financial assets"): an English question over Chinese reports
names 交易性金融资产 by them, a Chinese question over English reports finds the printed English line by them. A name
that is already a measure's (``kb.core.measures``: "total assets", "net profit") stays that measure's."""


@functools.lru_cache(maxsize=4096)
def line_equivalents(label: str) -> tuple[str, ...]:
    """The line item's names in the other language: a Chinese CAS label → its English names; an English name →
    the Chinese labels it names (() when the vocabulary knows none)."""
    if is_zh(label):
        return ZH_LINE_ENGLISH.get(LINE_ALIASES.get(label, label), ())
    key = " ".join(lemma_words(label))
    return tuple(zh for zh, names in ZH_LINE_ENGLISH.items() if key in {" ".join(lemma_words(n)) for n in names})


def lemma_words(phrase: str) -> tuple[str, ...]:
    """A phrase's words, each by its shortest lemma ("assets" → "asset"), for comparing names."""
    return tuple(min(lemmas(w) | {w}, key=lambda x: (len(x), x)) for w in re.findall(r"[a-z0-9&]+", phrase.lower()))

EN_LINE_ITEMS = (
    "goodwill", "intangible assets", "deferred revenue", "accrued liabilities", "accrued expenses", "prepaid expenses",
    "operating lease liabilities", "finance lease liabilities", "deferred tax assets", "deferred tax liabilities",
    "additional paid in capital", "accumulated deficit", "accumulated other comprehensive loss", "treasury stock",
    "contract liabilities", "contract assets", "customer deposits", "notes payable", "convertible notes",
    "marketable securities", "restricted cash", "other assets", "other liabilities", "warrant liabilities",
    "derivative liabilities", "stock based compensation", "share based compensation", "impairment", "goodwill impairment",
    "interest income", "other income", "gain on sale", "loss on extinguishment of debt", "medical costs",
    "third party medical costs", "selling and marketing expenses", "general and administrative expenses",
    "sales and marketing", "cost of services", "cost of products", "product revenue", "service revenue",
    "subscription revenue", "advertising expense", "noncontrolling interests", "preferred stock", "dividends declared",
    "proceeds from issuance of common stock", "repayments of debt", "purchases of investments",
)
"""Common US GAAP line items outside the vocabulary (a question naming one asks for that printed line)."""


# ------------------------------------------------------------------------------------ events

@dataclass(frozen=True)
class EventWords:
    """An event a question may ask which companies had ("which companies made an acquisition"), and how a passage
    states it. ``words`` name it (English word forms as written, since lemmatizers miss some: "repurchased";
    Chinese as written); ``needs``, when set, must stand in the same sentence too (the shares of a share buyback,
    the change of an auditor change), in the question as in the passage. ``en``/``zh`` name it in an answer
    ("no acquisition", 收购), ``en_a`` with its article; ``needs_en``/``needs_zh`` say what ``needs`` asks for."""

    name: str
    en: str
    en_a: str
    zh: str
    words: tuple[str, ...]
    needs: tuple[str, ...] = ()
    needs_en: str = ""
    needs_zh: str = ""


EVENTS: tuple[EventWords, ...] = (
    EventWords("acquisition", "acquisition", "an acquisition", "收购",
               ("acquire", "acquired", "acquires", "acquiring", "acquisition", "acquisitions", "takeover",
                "takeovers", "buyout", "merger", "mergers", "merged with", "收购", "并购", "吸收合并", "控股合并",
                "取得控制权")),
    EventWords("recall", "product recall", "a product recall", "产品召回",
               ("recall", "recalls", "recalled", "recalling", "召回")),
    EventWords("auditor_change", "change of auditor", "a change of auditor", "更换审计机构",
               ("auditor", "auditors", "audit firm", "accounting firm", "会计师事务所", "审计机构", "审计师"),
               ("change", "changed", "changes", "changing", "replace", "replaced", "replacing", "switch", "switched",
                "dismiss", "dismissed", "resign", "resigned", "appoint", "appointed", "new", "succeed", "succeeded",
                "更换", "变更", "改聘", "解聘", "新聘"),
               "a change, appointment or dismissal", "更换、改聘或解聘"),
    EventWords("share_buyback", "share buyback", "a share buyback", "股份回购",
               ("buyback", "buybacks", "buy back", "bought back", "buy-back", "buy-backs", "repurchase",
                "repurchases", "repurchased", "repurchasing", "回购"),
               ("share", "shares", "stock", "股份", "股票"), "shares or stock", "股份或股票"),
)
"""Events a list question asks about over the companies, most specific first."""

MEMBERS_ASKED = re.compile(r"(?i)^\s*(?:what|which)\s+(?:(?:are|were)\s+(?:the\s+)?)?(?:[a-z-]+\s+)?([a-z-]{4,}s)\s+"
                           r"(?:does|do|did|has|have|had|are|of)\b")
"""A question asking for the names of things a report lists ("What segments does Northwind report?", "Which
business units does it have?", "What are the reportable segments of Helios?"): group 1, the plural noun."""
CLAUSE_OPENERS = frozenset({"during", "we", "our", "in", "for", "as", "at", "on", "the", "this", "these", "after",
                            "before", "since", "through", "over", "under", "with"})
"""Words a sentence may begin with that stay lower case when the sentence is joined to another by a semicolon."""
SECOND_ASK = re.compile(r"(?i)(?:,\s*|\s+)and\s+((?:how|what|which|when|where|who)\b)")
"""Where a question asks a second thing ("How many jobs will it cut, and how much severance did it book?"): the
lead answers both."""
WHOLE_ASKED = ("in total", "overall", "consolidated", "combined", "altogether", "company-wide", "合计", "总计", "合并")
"""Words asking for the whole company's figure ("how many retail units in total"), not a segment's."""
PART_WORDS = ("segment", "division", "分部")
"""Words heading a part of the company: a segment's table is no answer when the whole is asked."""
WHICH_ONE = ("which company", "which firm", "what company", "which one of the companies", "哪家公司", "哪家")
"""Words asking which one company: an event asked so ("which company had a recall") is read per document read."""

OVER_COMPANIES = ("which companies", "which firms", "which issuers", "what companies", "which of the companies",
                  "which of these companies", "which of those companies", "which of them", "any company",
                  "any companies", "any of the companies", "any of these companies", "any of them", "any firm",
                  "any of the firms", "all companies", "all of the companies", "each company", "every company",
                  "哪些", "哪几家", "有没有公司", "是否有公司", "各公司", "各家公司", "所有公司")
"""Words asking which of the companies did something, or whether any did ("which companies made an acquisition",
"did any company change its auditor"): an event asked with them is a list over the companies. "Which company"
asks for the one that did, and stays a question about one document."""
EVENT_HEDGES = ("may", "might", "could", "would", "should", "can", "cannot", "if", "unless", "whether", "potential",
                "potentially", "possible", "possibly", "future", "further", "any", "risk", "risks", "seek", "seeks",
                "intend", "intends", "plan", "plans", "aim", "aims", "consider", "considers", "explore", "evaluate",
                "pursue", "pursues", "pursuing", "opportunity", "opportunities", "expect", "expects", "expected",
                "anticipate", "anticipates", "will",
                "可能", "或将", "如果", "若", "假如", "倘若", "拟", "计划", "未来", "风险", "将会", "预计", "寻求", "考虑", "有望",
                "潜在", "不排除")
"""Words that make a mention of an event a possibility, a plan or a risk, not a fact ("we may pursue
acquisitions", "could require further recalls", 未来可能通过并购…)."""
EVENT_NEGATIONS = ("no", "not", "none", "never", "neither", "nor", "without", "didn't", "hasn't", "haven't",
                   "未", "没有", "并未", "尚未", "不存在", "无任何")
"""Words that state an event did not happen ("we did not repurchase any shares", 报告期内未更换会计师事务所)."""
EVENT_ATTRIBUTIVE_BEFORE = ("of", "the", "a", "an", "our", "its", "their", "and", "or", "on", "for", "from", "with",
                            "to", "in", "by", "newly")
"""Words before a past participle of an event verb that make it describe a noun ("amortisation of acquired
intangible assets", "the recalled products"), not state the event."""
NOT_NAMES = frozenset({"we", "our", "i", "it", "its", "they", "the", "a", "an", "this", "that", "these", "those",
                       "in", "on", "at", "for", "of", "and", "or", "by", "as", "after", "before", "during", "since",
                       "note", "notes", "see", "item", "part", "section", "table", "page", "board", "company",
                       "group", "management", "directors", "chief", "officer", "executive", "ceo", "cfo", "inc",
                       "corp", "ltd", "llc", "plc", "fy", "q1", "q2", "q3", "q4", "first", "second", "third",
                       "fourth", "finally", "also"})
"""Capitalised words that name no object an event is about (a sentence's first word aside)."""
EVENT_PERIOD_WORDS = ("first quarter", "second quarter", "third quarter", "fourth quarter", "first half",
                      "second half", "报告期内", "本报告期", "上半年", "下半年", "本年度", "年内")
"""Periods written without a figure that date an event ("in the third quarter", 报告期内)."""


# ------------------------------------------------------------------ question scope (router.scope)

# "over time", "these quarters", "previous quarters", "quarterly reports", "throughout the reporting period"
SCOPE_SERIES = re.compile(
    r"\b(?:over time|period to period|quarter[- ]over[- ]quarter|trend(?:s|ed|ing)?"
    r"|(?:over|throughout|during|across) the report(?:ing|ed) periods?"
    r"|(?:over|across|during|throughout|in) (?:these|those|the|all|its|their|both)\s?(?:reported |reporting )?"
    r"(?:quarters|periods|10-?qs|10-?ks|filings|reports|quarterly reports|annual reports)"
    r"|(?:across|over) (?:quarters|periods|years|reports|filings)"
    r"|(?:these|those|the reported|all) (?:quarters|periods|10-?qs|10-?ks|filings|quarterly reports|annual reports)"
    r"|(?:previous|prior|past|earlier|preceding|historical|last (?:two|three|four|five|six|eight|\d+))"
    r" (?:quarters|periods|years|reports|filings)"
    r"|(?:quarterly|annual) (?:reports|filings)"
    r"|both (?:reports|filings|years|periods))\b",
    re.I,
)
# Chinese: "…是如何变化的", "变化趋势", "逐年", "各季度" over stated years
SCOPE_SERIES_ZH = re.compile(r"变化|趋势|走势|逐年|历年|各年|每年|每个?季度|各季度|增减")
# "which of these companies", "list all companies", "each company", "how many of the reports"
SCOPE_LIST = re.compile(
    r"\b(?:which (?:of (?:these|the|our|all|those) )?(?:companies|firms|issuers|reports|documents|filings)"
    r"|(?:list|name) (?:all |every |each )?(?:of )?(?:the )?(?:companies|firms|issuers|reports|documents)"
    r"|(?:all|each|every) (?:of (?:the|these) )?(?:companies|company|firms|issuers|reports|documents|filings)"
    r"|how many (?:of (?:the|these) )?(?:companies|firms|reports|documents))\b",
    re.I,
)
SCOPE_COMPARE = re.compile(r"\b(?:compare[ds]?|comparison|versus|vs\.?|between|differ(?:s|ence)?|relative to)\b", re.I)
# words that frame a multi-document question but say nothing about what to find in one document
FRAME_WORDS = frozenset(
    """compare compared compares comparison versus vs between difference differ differs relative change changed
    changes changing shift shifted shifts evolve evolved fluctuate fluctuated fluctuation fluctuations vary
    varied variation variations trend trended trends over time across throughout during these those each every
    all both reported reporting report reports filing filings quarter quarters period periods year years
    quarterly annual historical previous prior past latest recent most company companies firm firms issuer
    issuers document documents which list name how many did does do has have had is are was were what the a an
    of in for to and or by from its their it they there any been notable significant considerable seen stack
    against up 10-q 10-qs 10q 10qs 10-k 10-ks 10k 10ks fy
    please categorize categorise classify sort rank order ascending descending highest lowest largest smallest
    listed above aforementioned following mentioned""".split()
)
# "… into the following groups: high (over $15,000), …": the ranges say how to sort the figures, not what to find
RANGES_TAIL = re.compile(r"\b(?:into|in) (?:the )?following (?:groups|categories|ranges|classes)\b.*", re.I | re.S)
