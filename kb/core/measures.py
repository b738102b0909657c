"""The measure table: every measure the answers know, one row each — statement lines stored as facts (how
statements print them, English and Chinese) and the ratios and metrics computed from them by one formula each —
with how a question names it (English and Chinese), its unit and the statements it stands on. A new measure is
one row; it then works for one company, for several and in Chinese (``router.calc``, ``router.facts``).

``CONCEPTS`` (the statement measures, in question-matching order: longer, more specific names first) and
``METRICS`` (the formula rows) are views of the one table.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec


class StandsFor(msgspec.Struct, frozen=True):
    """A line that states a measure a document does not print: ``other``, when the document prints none of
    ``unless`` either; ``note`` says so beside the line item. A company without discontinued operations prints
    no "income from continuing operations" (its net income is that); a fund that presents no cash flow statement
    states its cash at the period end on its balance sheet; a balance sheet that classifies nothing as current
    (funds, real estate companies) owes all its liabilities as one total."""

    other: str
    note: str
    unless: tuple[str, ...] = ()


class Measure(msgspec.Struct, frozen=True):
    """One measure: a statement line stored as a fact, or a ratio/metric computed by a formula over such lines —
    how statements print it, how a question names it, its unit and, for a metric, its formula.

    ``printed`` are statement line labels after ``concept_label`` normalisation (lower case, "(loss)",
    "(deficit)", "net of …", footnote marks and punctuation removed), matched whole; ``chinese`` the Chinese
    line labels, matched whole after removing spaces and a leading "其中：" / "一、" / "加：". ``asked`` are
    extra words a question may use (matched case-insensitively as words). ``kinds`` are the statements the
    line may stand on (a "Cash and cash equivalents" line of a cash flow statement is not the balance).
    ``names`` are how a question names it beyond its printed labels, English and Chinese (lemmas and plurals are
    the reader's: ``router.reading``). ``unit``: "money", "per_share", "shares", or for a metric "%", "x",
    "days". ``flow``: a measure over a period (income, cash flow) rather
    than a balance at a date.
    """

    name: str
    label: str
    printed: tuple[str, ...] = ()
    chinese: tuple[str, ...] = ()
    asked: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ("income",)
    unit: str = "money"
    flow: bool = True
    derived: tuple[str, ...] = ()
    """When no statement prints it: the difference of these two measures (cited to both)."""
    stands_for: StandsFor | None = None
    """When no statement prints it: the line that states it, said beside the figure."""
    stand_in: str = ""
    """For the metric calculator: the measure read when a statement prints no line of its own."""
    names: tuple[str, ...] = ()
    formula: str = ""
    """A ratio or metric: its formula over the statement measures (``router.calc`` evaluates it): ``v(c)`` the
    measure in the period (``opt(c)``: 0 when the statements print no such line), ``avg(c)`` its mean over the
    period and the one before, ``chg(c)`` its change from the one before, ``abs(x)``, numbers, ``+ - * /`` and
    parentheses. Standard definitions (averages where analysts use them); a definition the question states wins."""


_IS = ("income", "comprehensive_income")
_BS = ("balance",)
_CF = ("cash_flow",)

MEASURES: tuple[Measure, ...] = (
    Measure("revenue", "revenue", (
        "revenue", "revenues", "total revenue", "total revenues", "net revenue", "net revenues", "total net revenue",
        "total net revenues", "net sales", "total net sales", "sales", "net sales and revenue", "operating revenues",
        "total operating revenues", "revenues net", "revenue net", "sales net", "net revenue total",
        "total revenues net", "revenue from contracts with customers", "total sales"),
        ("营业总收入", "营业收入"), ("revenue", "revenues", "sales", "net sales", "turnover", "top line"), _IS,
            names=("revenue", "revenues", "sales", "net sales", "turnover", "top line", "topline", "营收", "营业收入",
                   "营业总收入", "收入")),
    Measure("cost_of_revenue", "cost of revenue", (
        "cost of revenue", "cost of revenues", "cost of sales", "cost of goods sold", "total cost of revenue",
        "total cost of revenues", "total cost of sales", "cost of products sold"),
        ("营业成本",), ("cogs",), _IS),
    Measure("gross_profit", "gross profit", ("gross profit", "gross margin", "gross profit loss", "gross loss"),
            ("毛利",), (), _IS,
            derived=("revenue", "cost_of_revenue"),
            names=("gross profit", "毛利", "毛利润")),
    Measure("operating_expenses", "total operating expenses", (
        "total operating expenses", "total operating costs and expenses", "total costs and expenses",
        "operating expenses total", "total expenses"), ("营业总成本",), ("operating expenses",), _IS,
            names=("opex", "operating expenses", "operating costs")),
    Measure("rd_expense", "research and development expense", (
        "research and development", "research and development expenses", "research and development expense",
        "research development and engineering expenses", "research development and engineering"),
        ("研发费用", "研发支出"), ("r&d",), _IS,
            names=("r&d", "research and development", "研发费用", "研发投入", "研发支出")),
    Measure("sga_expense", "selling, general and administrative expense", (
        "selling general and administrative", "selling general and administrative expenses",
        "selling general and administrative expense", "sg a"), (), ("sg&a",), _IS,
            names=("sg&a", "sga", "sg&a expense", "sg&a expenses", "selling general and administrative")),
    Measure("admin_expense", "general and administrative expense", (
        "general and administrative", "general and administrative expenses", "general and administrative expense",
        "administrative expenses", "administrative"), ("管理费用",), ("administrative expenses",), _IS),
    Measure("selling_expense", "selling expense", ("selling expenses", "selling and marketing",
                                                   "sales and marketing", "selling"),
            ("销售费用",), (), _IS),
    Measure("operating_income", "operating income", (
        "operating income", "income from operations", "operating profit", "operating loss", "loss from operations",
        "total operating income", "operating income loss", "income loss from operations",
        "operating loss from continuing operations", "operating income from continuing operations",
        "income from continuing operations before interest and taxes"),
        ("营业利润",), ("operating profit", "operating income", "ebit"), _IS,
            names=("operating income", "operating profit", "income from operations", "ebit", "营业利润")),
    Measure("interest_expense", "interest expense", ("interest expense", "interest expense net"),
            ("利息费用",), (), _IS,
            names=("interest expense", "interest costs", "interest cost", "interest charges", "spend on interest",
                   "spent on interest", "利息费用", "利息支出")),
    Measure("pretax_income", "income before income taxes", (
        "income before income taxes", "income before taxes", "loss before income taxes",
        "income before provision for income taxes", "income loss before income taxes", "pretax income",
        "income before income tax", "loss before income tax", "earnings before income taxes",
        "loss from continuing operations before income taxes", "income from continuing operations before income taxes",
        "income loss from continuing operations before income taxes", "earnings before income tax expense",
        "income before income tax expense", "loss before income tax expense", "loss before provision for income taxes",
        "income loss before provision for income taxes", "loss before income taxes and equity in losses"),
        ("利润总额",), ("pre-tax income", "pretax income", "profit before tax"), _IS,
            names=("pre-tax profit", "pretax profit", "pre tax profit", "pre-tax income", "pretax income",
                   "pre-tax earnings", "pretax earnings", "earnings before tax", "earnings before taxes",
                   "profit before taxes", "income before tax", "利润总额", "税前利润")),
    Measure("income_tax", "income tax expense", (
        "income tax expense", "provision for income taxes", "income taxes", "income tax provision",
        "income tax benefit", "provision for benefit from income taxes", "income tax expense benefit",
        "benefit from income taxes", "provision benefit for income taxes"),
        ("所得税费用",), ("tax expense",), _IS,
            names=("income tax", "tax expense", "income taxes", "所得税", "所得税费用")),
    Measure("net_income_continuing", "net income from continuing operations", (
        "income from continuing operations", "net income from continuing operations",
        "loss from continuing operations", "net loss from continuing operations",
        "income from continuing operations net of tax", "net income loss from continuing operations"),
        ("持续经营净利润",), ("profit from continuing operations",), _IS,
            stands_for=StandsFor("net_income", "no discontinued operations line printed: net income")),
    Measure("net_income", "net income", (
        "net income", "net loss", "net earnings", "net income loss", "net loss income", "net profit",
        "net loss and comprehensive loss", "net income and comprehensive income", "net loss for the period",
        "net loss for the year", "net income for the year", "net income for the period",
        "net income including noncontrolling interest", "net income including noncontrolling interests",
        "net income including non controlling interests", "net loss including noncontrolling interests",
        "consolidated net income", "net income loss including noncontrolling interests"),
        ("净利润",), ("net income", "net profit", "net loss", "profit", "earnings", "bottom line"), (*_IS, "cash_flow"),
            stand_in="net_income_parent",
            names=("net income", "net profit", "net earnings", "bottom line", "net loss", "profit", "earnings",
                   "lose money", "profitability", "净利润", "净利")),
    Measure("net_income_parent", "net income attributable to the parent", (),
            ("归属于母公司所有者的净利润", "归属于母公司股东的净利润"), ("attributable to",), _IS,
            names=("net income attributable to shareholders", "net income attributable to the parent", "归母",
                   "attributable net income", "归母净利润", "归属于母公司股东的净利润", "归属于母公司所有者的净利润", "归属于上市公司股东的净利润", "归母净利")),
    Measure("eps_basic", "basic earnings per share", (
        "basic", "basic earnings per share", "basic net income per share", "basic net loss per share",
        "earnings per share basic", "net income per share basic", "net loss per share basic",
        "basic earnings loss per share", "basic income per share", "basic loss per share"),
        ("基本每股收益",), ("basic eps", "basic earnings per share"), _IS, "per_share",
            names=("eps", "earnings per share", "basic eps", "basic earnings per share", "loss per share",
                   "net loss per share", "income per share", "net income per share", "profit per share",
                   "basic loss per share", "basic net loss per share", "每股收益", "基本每股收益")),
    Measure("eps_diluted", "diluted earnings per share", (
        "diluted", "diluted earnings per share", "diluted net income per share", "diluted net loss per share",
        "earnings per share diluted", "net income per share diluted", "net loss per share diluted",
        "diluted earnings loss per share", "diluted income per share", "diluted loss per share"),
        ("稀释每股收益",), ("diluted eps", "diluted earnings per share"), _IS, "per_share",
            names=("diluted eps", "diluted earnings per share", "diluted loss per share",
                   "diluted net loss per share", "diluted income per share", "稀释每股收益")),
    Measure("weighted_shares_basic", "weighted average basic shares outstanding", (), (),
            ("weighted average shares", "weighted average shares outstanding", "weighted average basic shares",
             "weighted average number of shares", "basic weighted average shares"), _IS, "shares",
            names=("weighted average basic shares", "weighted average basic share count", "basic share count",
                   "weighted average shares", "weighted average share count")),
    Measure("weighted_shares_diluted", "weighted average diluted shares outstanding", (), (),
            ("weighted average diluted shares", "diluted weighted average shares", "diluted shares outstanding"),
            _IS, "shares",
            names=("weighted average diluted shares", "diluted share count")),
    Measure("shares_outstanding", "shares outstanding", (
        "shares outstanding", "common shares outstanding", "number of shares outstanding",
        "shares of common stock outstanding", "total shares outstanding"), (),
        ("shares outstanding", "outstanding shares", "share count"), (*_IS, *_BS), "shares",
        flow=False,
            stands_for=StandsFor("weighted_shares_basic", "no period-end share count printed in the statements: "
                                 "weighted average basic shares")),
    Measure("cash", "cash and cash equivalents", (
        "cash and cash equivalents", "cash", "cash and equivalents", "cash and cash equivalents at carrying value"),
        ("货币资金",), ("cash and cash equivalents", "cash balance", "cash"), _BS, flow=False,
            names=("cash", "cash and cash equivalents", "cash balance", "cash pile", "货币资金", "现金及现金等价物")),
    Measure("short_term_investments", "short-term investments", (
        "short term investments", "short term marketable securities", "marketable securities",
        "marketable securities current", "current marketable securities", "short term investments current",
        "investments short term"),
        (), ("short-term investments", "marketable securities"), _BS, flow=False),
    Measure("accounts_receivable", "accounts receivable", (
        "accounts receivable", "accounts receivable net", "trade receivables", "trade accounts receivable",
        "receivables", "trade receivables net", "accounts receivable trade"),
        ("应收账款",), ("receivables",), _BS, flow=False,
            names=("accounts receivable", "receivables", "trade receivables", "应收账款")),
    Measure("inventory", "inventories", ("inventories", "inventory", "inventories net", "inventory net",
                                         "total inventories", "total inventories net", "total inventory"),
            ("存货",), ("inventories", "inventory"), _BS, flow=False,
            names=("inventory", "inventories", "stock on hand", "存货")),
    Measure("current_assets", "total current assets", ("total current assets",), ("流动资产合计",),
            ("current assets",), _BS, flow=False),
    Measure("noncurrent_assets", "total non-current assets", (
        "total non current assets", "total noncurrent assets", "total long term assets", "total other assets"),
        ("非流动资产合计",), ("non-current assets", "noncurrent assets", "long-term assets"), _BS, flow=False,
            derived=("total_assets", "current_assets"),
            names=("non current assets", "noncurrent assets", "long term assets", "非流动资产", "非流动资产合计")),
    Measure("right_of_use_assets", "right-of-use assets", (
        "right of use assets", "operating lease right of use assets", "right of use assets operating leases",
        "operating lease right of use asset", "right of use asset"), ("使用权资产",), (), _BS, flow=False,
            names=("right of use assets", "rou assets", "使用权资产")),
    Measure("ppe_net", "property, plant and equipment, net", (
        "property plant and equipment net", "property and equipment net", "total property plant and equipment net",
        "net property plant and equipment", "property plant and equipment total net", "net property and equipment"),
        ("固定资产",), ("ppe", "pp and e", "ppne", "net ppe", "net ppne", "fixed assets", "property plant and equipment"),
        _BS,
        flow=False),
    Measure("total_assets", "total assets", ("total assets",), ("资产总计", "资产合计"), ("total assets",),
            _BS, flow=False,
            names=("total assets", "assets", "总资产", "资产总计", "资产总额")),
    Measure("accounts_payable", "accounts payable", (
        "accounts payable", "trade accounts payable", "accounts payable trade", "trade payables"),
        ("应付账款",), ("payables",), _BS, flow=False,
            names=("accounts payable", "payables", "trade payables", "应付账款")),
    Measure("other_current_liabilities", "other current liabilities", ("other current liabilities",),
            ("其他流动负债",), (), _BS, flow=False),
    Measure("current_liabilities", "total current liabilities", ("total current liabilities",),
            ("流动负债合计",), ("current liabilities",), _BS, flow=False,
            stands_for=StandsFor("total_liabilities", "an unclassified balance sheet (no current and non-current "
                                 "split): total liabilities", ("current_assets", "noncurrent_liabilities"))),
    Measure("short_term_debt", "short-term debt", (
        "short term debt", "short term borrowings", "short term notes payable", "commercial paper"),
        (), ("short-term debt", "short-term borrowings"), _BS, flow=False,
            names=("short-term debt", "short term debt", "short-term borrowings", "短期借款")),
    Measure("current_debt", "current portion of long-term debt", (
        "current portion of long term debt", "current maturities of long term debt", "debt maturing within one year",
        "current portion of long term borrowings", "long term debt current portion", "long term debt current",
        "current portion of long term debt and finance leases"),
        (), ("current portion of long-term debt",), _BS, flow=False),
    Measure("long_term_debt", "long-term debt", (
        "long term debt", "long term debt net of current portion", "long term debt less current portion",
        "long term borrowings", "long term debt net", "notes payable net of current portion",
        "long term notes payable", "mortgage and other indebtedness", "mortgages and other indebtedness",
        "mortgage notes payable", "mortgages payable", "mortgage loans payable", "mortgages and notes payable",
        "mortgage notes payable net", "mortgages payable net"),
        ("长期借款",), ("long-term borrowings", "long-term debt"), _BS, flow=False,
            names=("long-term debt", "long term debt", "long-term borrowings", "long term borrowings", "长期借款")),
    Measure("noncurrent_liabilities", "total non-current liabilities", (
        "total non current liabilities", "total noncurrent liabilities", "total long term liabilities"),
        ("非流动负债合计",), ("non-current liabilities", "noncurrent liabilities", "long-term liabilities"),
        _BS, flow=False,
            derived=("total_liabilities", "current_liabilities")),
    Measure("total_liabilities", "total liabilities", ("total liabilities",), ("负债合计",),
            ("total liabilities", "liabilities"), _BS, flow=False,
            derived=("liabilities_and_equity", "total_equity"),
            names=("total liabilities", "liabilities", "总负债", "负债合计", "负债总额")),
    Measure("share_capital", "share capital", ("common stock", "share capital", "common shares"),
            ("股本", "实收资本或股本", "实收资本"), ("share capital", "common stock"), _BS, flow=False),
    Measure("retained_earnings", "retained earnings", (
        "retained earnings", "accumulated deficit", "retained earnings accumulated deficit",
        "accumulated deficit retained earnings"), ("未分配利润",), ("accumulated deficit",), _BS, flow=False),
    Measure("total_equity", "total equity", (
        "total stockholders equity", "total shareholders equity", "total equity", "total stockholders deficit",
        "total shareholders deficit", "total stockholders equity deficit", "total partners capital",
        "total owners equity", "total members equity", "total net assets", "net assets",
        "total stockholders deficit equity", "total equity deficit", "total deficit",
        "total shareholders equity deficit"),
        ("所有者权益合计", "股东权益合计", "所有者权益或股东权益合计", "净资产"),
        ("equity", "owners' equity", "shareholders' equity", "stockholders' equity", "net assets", "book value"),
        _BS, flow=False,
            names=("total equity", "shareholders equity", "stockholders equity", "equity", "net assets", "book value",
                   "所有者权益", "股东权益", "净资产")),
    Measure("liabilities_and_equity", "total liabilities and equity", (
        "total liabilities and stockholders equity", "total liabilities and shareholders equity",
        "total liabilities and equity", "total liabilities and stockholders deficit",
        "total liabilities and partners capital", "total liabilities and owners equity",
        "total liabilities and stockholders equity deficit", "total liabilities and shareholders deficit",
        "total liabilities and members equity", "total liabilities and net assets",
        "total liabilities and deficit"),
        ("负债和所有者权益总计", "负债和股东权益总计", "负债和所有者权益或股东权益总计"),
        ("total liabilities and equity",), _BS, flow=False),
    Measure("cfo", "net cash from operating activities", (
        "net cash provided by operating activities", "net cash used in operating activities",
        "net cash provided by used in operating activities", "net cash used in provided by operating activities",
        "net cash from operating activities", "cash provided by operating activities",
        "net cash flows from operating activities", "net cash flow from operating activities",
        "cash flows from operating activities", "net cash provided by operations", "cash provided by operations",
        "cash provided by operating activities", "net cash provided by operating activities total"),
        ("经营活动产生的现金流量净额",), ("operating cash flow", "cash flow from operations",
                                  "cash from operations", "operating activities"), _CF,
            names=("operating cash flow", "cash from operations", "cash flow from operations",
                   "cash from operating activities", "operating cash", "cash burn", "operating cash burn",
                   "burn in operations", "burned in operations", "burnt in operations", "used in operations",
                   "consumed by operations", "经营现金流", "经营活动现金流", "经营活动产生的现金流量净额", "经营性现金流")),
    Measure("cfi", "net cash from investing activities", (
        "net cash provided by investing activities", "net cash used in investing activities",
        "net cash provided by used in investing activities", "net cash used in provided by investing activities",
        "net cash from investing activities", "cash used in investing activities",
        "net cash flows from investing activities", "net cash flow from investing activities",
        "cash flows from investing activities", "cash provided by investing activities",
        "cash used by investing activities"),
        ("投资活动产生的现金流量净额",), ("investing activities", "investing cash flow"), _CF,
            names=("investing cash flow", "cash from investing", "cash flow from investing", "investing activities",
                   "投资现金流", "投资活动产生的现金流量净额", "投资活动现金流")),
    Measure("cff", "net cash from financing activities", (
        "net cash provided by financing activities", "net cash used in financing activities",
        "net cash provided by used in financing activities", "net cash used in provided by financing activities",
        "net cash from financing activities", "cash provided by financing activities",
        "net cash flows from financing activities", "net cash flow from financing activities",
        "cash flows from financing activities", "cash provided by financing activities",
        "cash used by financing activities"),
        ("筹资活动产生的现金流量净额",), ("financing activities", "financing cash flow"), _CF,
            names=("financing cash flow", "cash from financing", "cash flow from financing", "financing activities",
                   "net financing", "筹资现金流", "筹资活动产生的现金流量净额", "筹资活动现金流")),
    Measure("capex", "capital expenditure", (
        "purchases of property and equipment", "purchase of property and equipment",
        "purchases of property plant and equipment", "purchase of property plant and equipment",
        "capital expenditures", "additions to property and equipment", "additions to property plant and equipment",
        "payments for property and equipment", "acquisition of property and equipment",
        "purchases of fixed assets", "purchase of fixed assets", "capital expenditure"),
        ("购建固定资产、无形资产和其他长期资产支付的现金",), ("capex", "capital expenditure", "capital expenditures"), _CF,
            names=("capex", "capital expenditure", "capital expenditures", "capital spending",
                   "spend on property and equipment", "spent on property and equipment",
                   "spending on property and equipment", "purchases of property and equipment", "spend on pp&e",
                   "spent on pp&e", "spending on pp&e", "spend on property, plant and equipment",
                   "spent on property, plant and equipment", "spending on property, plant and equipment",
                   "purchases of property, plant and equipment", "资本开支", "资本支出")),
    Measure("depreciation_amortization", "depreciation and amortization", (
        "depreciation and amortization", "depreciation amortization and impairment", "depreciation",
        "depreciation and amortization expense", "depreciation depletion and amortization",
        "depreciation amortization and depletion", "depreciation and amortization of property and equipment",
        "depreciation of property plant and equipment"),
        (), ("d and a", "depreciation and amortization"), _CF + _IS),
    Measure("dividends_paid", "dividends paid", (
        "dividends paid", "cash dividends paid", "dividends paid to shareholders", "dividends paid to stockholders",
        "payments of dividends", "payment of dividends", "dividends paid on common stock",
        "cash dividends paid to shareholders", "cash dividends paid to stockholders"),
        (), ("dividends paid",), _CF,
            names=("dividends paid", "dividends", "分红", "分配股利")),
    Measure("dividends_per_share", "dividends per share", (
        "dividends per share", "dividends per common share", "cash dividends per share",
        "cash dividends per common share", "dividends declared per share", "dividends declared per common share",
        "cash dividends declared per share", "cash dividends declared per common share",
        "cash dividends paid per share", "cash dividends paid per common share",
        "dividends declared per share of common stock", "cash dividends declared per share of common stock"),
        ("每股股利", "每股现金股利", "每股派息"), ("dividends per share", "dividend per share", "dps"), _IS,
        "per_share", names=("dividends per share", "dividend per share", "dividend per common share",
                            "dividends per common share", "per-share dividend", "每股分红", "每股股利")),
    Measure("net_change_in_cash", "net change in cash", (
        "net increase decrease in cash and cash equivalents", "net decrease increase in cash and cash equivalents",
        "net increase in cash and cash equivalents", "net decrease in cash and cash equivalents",
        "net change in cash and cash equivalents", "net increase decrease in cash",
        "net decrease in cash", "net increase in cash", "net change in cash",
        "net increase decrease in cash cash equivalents and restricted cash",
        "net decrease increase in cash cash equivalents and restricted cash",
        "net increase in cash cash equivalents and restricted cash",
        "net decrease in cash cash equivalents and restricted cash",
        "net change in cash cash equivalents and restricted cash", "net increase in cash and equivalents",
        "net decrease in cash and equivalents", "net change in cash and equivalents"),
        ("现金及现金等价物净增加额",), ("net increase in cash", "net decrease in cash", "change in cash"), _CF),
    Measure("cash_begin", "cash at beginning of period", (
        "cash and cash equivalents beginning of period", "cash and cash equivalents beginning of year",
        "cash beginning of period", "cash beginning of year", "cash and cash equivalents at beginning of period",
        "cash and cash equivalents at beginning of year", "cash at beginning of period", "cash at beginning of year",
        "cash cash equivalents and restricted cash beginning of period",
        "cash cash equivalents and restricted cash beginning of year",
        "cash cash equivalents and restricted cash at beginning of period",
        "cash cash equivalents and restricted cash at beginning of year",
        "cash and restricted cash beginning of period", "cash and restricted cash beginning of year",
        "beginning of period", "beginning of year", "cash and cash equivalents beginning of the period",
        "cash and cash equivalents beginning of the year", "cash and equivalents beginning of year",
        "cash and equivalents beginning of period", "cash and equivalents at beginning of year"),
        ("期初现金及现金等价物余额", "加：期初现金及现金等价物余额"),
        ("beginning balance of cash", "cash at the beginning", "beginning cash", "beginning of the period",
         "beginning of period", "beginning of year", "beginning balance"), _CF,
            names=("opening cash and cash equivalents", "beginning cash and cash equivalents", "starting cash",
                   "opening cash", "beginning cash", "cash at the start", "cash at the beginning",
                   "beginning balance of cash", "期初现金", "期初现金及现金等价物余额")),
    Measure("cash_end", "cash at end of period", (
        "cash and cash equivalents end of period", "cash and cash equivalents end of year",
        "cash end of period", "cash end of year", "cash and cash equivalents at end of period",
        "cash and cash equivalents at end of year", "cash at end of period", "cash at end of year",
        "cash cash equivalents and restricted cash end of period",
        "cash cash equivalents and restricted cash end of year",
        "cash cash equivalents and restricted cash at end of period",
        "cash cash equivalents and restricted cash at end of year",
        "cash and restricted cash end of period", "cash and restricted cash end of year",
        "end of period", "end of year", "cash and cash equivalents end of the period",
        "cash and cash equivalents end of the year", "cash and equivalents end of year",
        "cash and equivalents end of period", "cash and equivalents at end of year"),
        ("期末现金及现金等价物余额", "现金及现金等价物余额", "现金及现金等价物期末余额"),
        ("cash at end of period", "cash at the end", "ending cash", "end of period", "end of year",
         "ending balance"), _CF,
            stands_for=StandsFor("cash", "no end-of-period line of a cash flow statement: the balance sheet's "
                                 "cash"),
            names=("closing cash and cash equivalents", "ending cash and cash equivalents", "ending cash",
                   "closing cash", "end of period cash", "end of the period cash", "cash at the end of the period",
                   "期末现金", "期末现金及现金等价物余额")),
    # ratios and metrics: a formula over the measures above (router.calc evaluates it)
    Measure("dpo", "days payable outstanding", unit="days", kinds=(), flow=False,
            formula="365 * avg(accounts_payable) / v(cost_of_revenue)",
            names=("days payable outstanding", "payables days", "payable days", "dpo", "payables period",
                   "payable period", "days to pay", "pay its suppliers", "pay suppliers", "pay their suppliers",
                   "应付账款周转天数")),
    Measure("dso", "days sales outstanding", unit="days", kinds=(), flow=False,
            formula="365 * avg(accounts_receivable) / v(revenue)",
            names=("days sales outstanding", "receivables days", "receivable days", "dso", "应收账款周转天数")),
    Measure("dio", "days inventory outstanding", unit="days", kinds=(), flow=False,
            formula="365 * avg(inventory) / v(cost_of_revenue)",
            names=("days inventory outstanding", "inventory days", "days in inventory", "dio", "存货周转天数")),
    Measure("ccc", "cash conversion cycle", unit="days", kinds=(), flow=False,
            formula="365 * avg(inventory) / v(cost_of_revenue) + 365 * avg(accounts_receivable) / v(revenue) - 365 * avg(accounts_payable) / v(cost_of_revenue)",
            names=("cash conversion cycle", "现金转换周期")),
    Measure("inventory_turnover", "inventory turnover", unit="x", kinds=(), flow=False,
            formula="v(cost_of_revenue) / avg(inventory)",
            names=("inventory turnover", "inventory turns", "stock turns", "stock turnover", "turn its stock",
                   "turn over its inventory", "turn over inventory", "turn its inventory", "存货周转率")),
    Measure("receivables_turnover", "receivables turnover", unit="x", kinds=(), flow=False,
            formula="v(revenue) / avg(accounts_receivable)",
            names=("receivables turnover", "receivable turnover", "应收账款周转率")),
    Measure("fixed_asset_turnover", "fixed asset turnover", unit="x", kinds=(), flow=False,
            formula="v(revenue) / avg(ppe_net)",
            names=("fixed asset turnover", "固定资产周转率")),
    Measure("asset_turnover", "total asset turnover", unit="x", kinds=(), flow=False,
            formula="v(revenue) / avg(total_assets)",
            names=("asset turnover", "total asset turnover", "总资产周转率")),
    Measure("quick_ratio", "quick ratio", unit="x", kinds=(), flow=False,
            formula="(v(cash) + opt(short_term_investments) + v(accounts_receivable)) / v(current_liabilities)",
            names=("quick ratio", "acid test", "速动比率")),
    Measure("current_ratio", "current ratio", unit="x", kinds=(), flow=False,
            formula="v(current_assets) / v(current_liabilities)",
            names=("current ratio", "流动比率")),
    Measure("total_debt", "total debt (short-term, current and long-term)", unit="money", kinds=(), flow=False,
            formula="v(long_term_debt) + opt(short_term_debt) + opt(current_debt)",
            names=("total debt", "debt", "borrowings", "有息负债")),
    Measure("debt_to_assets", "total liabilities to total assets", unit="%", kinds=(), flow=False,
            formula="v(total_liabilities) / v(total_assets) * 100",
            names=("debt to assets", "debt-to-assets", "liabilities to assets", "资产负债率")),
    Measure("debt_to_equity", "total liabilities to equity", unit="x", kinds=(), flow=False,
            formula="v(total_liabilities) / v(total_equity)",
            names=("debt to equity", "debt-to-equity", "liabilities to equity", "产权比率")),
    Measure("working_capital", "working capital", unit="money", kinds=(), flow=False,
            formula="v(current_assets) - v(current_liabilities)",
            names=("working capital", "营运资金", "营运资本")),
    Measure("ebitda_margin", "EBITDA margin", unit="%", kinds=(), flow=False,
            formula="(v(operating_income) + v(depreciation_amortization)) / v(revenue) * 100",
            names=("ebitda margin", "ebitda as a percent of revenue", "ebitda as a percentage of revenue",
                   "ebitda to revenue")),
    Measure("ebitda", "EBITDA", unit="money", kinds=(), flow=False,
            formula="v(operating_income) + v(depreciation_amortization)",
            names=("ebitda",)),
    Measure("effective_tax_rate", "effective tax rate", unit="%", kinds=(), flow=False,
            formula="v(income_tax) / v(pretax_income) * 100",
            names=("effective tax rate", "tax rate", "share of pre tax income", "share of pretax income", "实际税率")),
    Measure("interest_coverage", "interest coverage", unit="x", kinds=(), flow=False,
            formula="v(operating_income) / v(interest_expense)",
            names=("interest coverage", "times interest earned", "利息保障倍数")),
    Measure("free_cash_flow", "free cash flow", unit="money", kinds=(), flow=False,
            formula="v(cfo) - abs(v(capex))",
            names=("free cash flow", "fcf", "自由现金流")),
    Measure("capex_to_revenue", "capital expenditure as a % of revenue", unit="%", kinds=(), flow=False,
            formula="abs(v(capex)) / v(revenue) * 100",
            names=("capex to revenue", "capex intensity", "capex as a percentage of revenue")),
    Measure("capital_intensity", "capital intensity (total assets ÷ revenue)", unit="x", kinds=(), flow=False,
            formula="v(total_assets) / v(revenue)",
            names=("capital intensity", "capital intensive", "capital-intensive", "asset heavy",
                   "per dollar of revenue", "assets to revenue")),
    Measure("dividend_payout", "dividend payout ratio", unit="%", kinds=(), flow=False,
            formula="abs(v(dividends_paid)) / v(net_income) * 100",
            names=("dividend payout", "payout ratio", "股利支付率", "分红率")),
    Measure("gross_margin", "gross margin", unit="%", kinds=(), flow=False,
            formula="v(gross_profit) / v(revenue) * 100",
            names=("gross margin", "gross profit margin", "gross margins", "毛利率", "销售毛利率")),
    Measure("operating_margin", "operating margin", unit="%", kinds=(), flow=False,
            formula="v(operating_income) / v(revenue) * 100",
            names=("operating margin", "operating profit margin", "ebit margin", "营业利润率")),
    Measure("net_margin", "net profit margin", unit="%", kinds=(), flow=False,
            formula="v(net_income) / v(revenue) * 100",
            names=("net margin", "net profit margin", "net income margin", "profit margin", "净利率", "销售净利率")),
    Measure("return_on_assets", "return on assets", unit="%", kinds=(), flow=False,
            formula="v(net_income) / avg(total_assets) * 100",
            names=("roa", "return on assets", "return on total assets", "总资产收益率", "总资产报酬率")),
    Measure("return_on_equity", "return on equity", unit="%", kinds=(), flow=False,
            formula="v(net_income) / avg(total_equity) * 100",
            names=("roe", "return on equity", "return on shareholders equity", "return on average equity", "净资产收益率",
                   "加权平均净资产收益率")),
)

"""The one measure table: statement measures in question-matching order (longer, more specific names before
shorter ones), then the ratios and metrics."""

MEASURE_BY_NAME: Mapping[str, Measure] = {m.name: m for m in MEASURES}
CONCEPTS: tuple[Measure, ...] = tuple(m for m in MEASURES if not m.formula)
"""The statement measures (stored as facts)."""
CONCEPT_BY_NAME: Mapping[str, Measure] = {c.name: c for c in CONCEPTS}
METRICS: tuple[Measure, ...] = tuple(m for m in MEASURES if m.formula)
"""The ratios and metrics (computed by ``router.calc`` from their formula)."""
METRIC_BY_NAME: Mapping[str, Measure] = {m.name: m for m in METRICS}
