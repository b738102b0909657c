"""Small generated financial reports for the facts tests: SEC-style text filings with whitespace-aligned
statements, a Chinese quarterly report with pipe tables, and a PDF statement page (pymupdf)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pymupdf

W = 100  # label column width


def _row(label: str, *values: str) -> str:
    return f"{label:<{W}}" + "".join(f"{v:>18}" for v in values)


def _money(v: float) -> str:
    return f"({abs(v):,.0f})" if v < 0 else f"{v:,.0f}"


def text_filing(company: str, year: int, f: Mapping[str, float], prior: Mapping[str, float], *,
                scale: str = "(in thousands, except per share data)") -> str:
    """A 10-K text filing of ``company`` for fiscal ``year`` with a balance sheet, a statement of operations
    and a cash flow statement (``f`` this year's figures, ``prior`` last year's), plus a five-year summary
    (not a statement) and a wrapped label."""
    y, p = str(year), str(year - 1)
    lines = [
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION", "FORM 10-K",
        f"For the fiscal year ended December 31, {year}", f"{company.upper()}",
        "(Exact name of registrant as specified in its charter)", "",
        "Item 6. Selected Financial Data", "Five-year summary", _row("", y, p, str(year - 2), str(year - 3),
                                                                    str(year - 4)),
        _row("Revenue", *(_money(f["revenue"] * k) for k in (1, 2, 3, 4, 5))), "",
        "Item 8. Financial Statements", "", f"{company}", "Consolidated Balance Sheets", scale, "",
        _row("", "December 31,", "December 31,"), _row("Assets", y, p),
        "Current assets:",
        _row("Cash and cash equivalents", "$ " + _money(f["cash"]), "$ " + _money(prior["cash"])),
        _row("Accounts receivable, net of allowance of $12 and $10", _money(f["ar"]), _money(prior["ar"])),
        *([_row("Inventories", _money(f["inventory"]), _money(prior.get("inventory", f["inventory"])))]
          if "inventory" in f else []),
        _row("Total current assets", _money(f["current_assets"]), _money(prior["current_assets"])),
        _row("Property and equipment, net", _money(f["total_assets"] - f["current_assets"]),
             _money(prior["total_assets"] - prior["current_assets"])),
        _row("Total assets", "$ " + _money(f["total_assets"]), "$ " + _money(prior["total_assets"])), "",
        *([_row("Accounts payable", _money(f["ap"]), _money(prior["ap"]))] if "ap" in f else []),
        _row("Total current liabilities", _money(f["current_liabilities"]), _money(prior["current_liabilities"])),
        _row("Total liabilities", _money(f["total_liabilities"]), _money(prior["total_liabilities"])),
        _row("Common stock, $0.01 par value; 10,000,000 shares authorized; 5,000,000 and", "50", "50"),
        " 4,900,000 shares issued at December 31,", f" {y}", _row("Accumulated deficit", "(1,000)", "(900)"),
        _row("Total stockholders' equity", _money(f["total_assets"] - f["total_liabilities"]),
             _money(prior["total_assets"] - prior["total_liabilities"])),
        _row("Total liabilities and stockholders' equity", "$ " + _money(f["total_assets"]),
             "$ " + _money(prior["total_assets"])), "",
        f"{company}", "Consolidated Statements of Operations", scale, "",
        _row("", "Years Ended December 31,"), _row("", y, p),
        _row("Revenue", "$ " + _money(f["revenue"]), "$ " + _money(prior["revenue"])),
        *([_row("Cost of sales", _money(f["cogs"]), _money(prior["cogs"]))] if "cogs" in f else []),
        _row("Operating income (loss)", _money(f["operating_income"]), _money(prior["operating_income"])),
        _row("Net income (loss)", "$ " + _money(f["net_income"]), "$ " + _money(prior["net_income"])),
        "Net income (loss) per share:",
        _row("Basic", f"$ {f['eps']:.2f}" if f["eps"] >= 0 else f"$ ({-f['eps']:.2f})",
             f"$ {prior['eps']:.2f}" if prior["eps"] >= 0 else f"$ ({-prior['eps']:.2f})"),
        _row("Diluted", f"$ {f['eps']:.2f}" if f["eps"] >= 0 else f"$ ({-f['eps']:.2f})",
             f"$ {prior['eps']:.2f}" if prior["eps"] >= 0 else f"$ ({-prior['eps']:.2f})"),
        _row("Weighted average shares outstanding", "5,000", "4,900"), "",
        f"{company}", "Consolidated Statements of Cash Flows", scale, "",
        _row("", "Years Ended December 31,"), _row("", y, p),
        *([_row("Depreciation and amortization of property and equipment", _money(f["da"]), _money(prior["da"]))]
          if "da" in f else []),
        _row("Net cash provided by (used in) operating activities", _money(f["cfo"]), _money(prior["cfo"])),
        _row("Purchases of property and equipment", _money(-f["capex"]), _money(-prior["capex"])),
        _row("Net cash used in investing activities", _money(-f["capex"]), _money(-prior["capex"])),
        _row("Net cash provided by financing activities", "100", "—"),
        _row("Cash and cash equivalents, end of year", _money(f["cash"]), _money(prior["cash"])), "",
        "Notes to Consolidated Financial Statements", "Note 1. Organization",
        f"{company} makes things. Revenue is recognised when control passes.", "",
    ]
    return "\n".join(lines) + "\n"


def figures(revenue: float, net_income: float, *, cash: float, liabilities: float, assets: float = 0,
            eps: float = 0.0) -> dict[str, float]:
    assets = assets or liabilities * 2
    return {"revenue": revenue, "operating_income": round(net_income * 1.2), "net_income": net_income,
            "cash": cash, "ar": 40, "current_assets": round(assets * 0.4), "total_assets": assets,
            "current_liabilities": round(liabilities * 0.5), "total_liabilities": liabilities, "eps": eps,
            "cfo": round(net_income * 1.5), "capex": 30}


def chinese_report(company: str, revenue: str = "4,094,687,499.12", cash_flow: Mapping[str, str] | None = None,
                   balance: Mapping[str, str] | None = None) -> str:
    """A Chinese first-quarter report (2024年第一季度报告) with 合并资产负债表 (单位：万元; ``balance``: further lines,
    printed label → this quarter's figure) and 合并利润表 (元), and a 合并现金流量表 (元) of the ``cash_flow``
    lines (printed label → this quarter's figure) when given."""
    flows = ["2、合并现金流量表", "单位：元", "|项目|本期发生额|上期发生额|", "|---|---|---|", "|一、经营活动产生的现金流量：|-|-|",
             *(f"|{label}|{value}|1.00|" for label, value in (cash_flow or {}).items()), ""] if cash_flow else []
    return "\n".join([
        f"证券代码：000049             证券简称：{company}            公告编号：2024-028",
        f"深圳市{company}科技股份有限公司2024年第一季度报告", "", "四、季度财务报表", "（一）财务报表",
        "1、合并资产负债表", f"编制单位：{company}股份有限公司", "2024年 03月 31日", "单位：万元",
        "|项目|期末余额|期初余额|", "|---|---|---|",
        "|货币资金|1,234.50|1,000.00|", *(f"|{label}|{value}|1.00|" for label, value in (balance or {}).items()),
        "|流动资产合计|5,000.00|4,800.00|",
        "|资产总计|12,000.00|11,000.00|", "|流动负债合计|3,000.00|2,800.00|", "|负债合计|7,000.00|6,500.00|",
        "|所有者权益合计|5,000.00|4,500.00|", "",
        "2、合并利润表", "单位：元", "|项目|本期发生额|上期发生额|", "|---|---|---|",
        f"|一、营业总收入|{revenue}|4,288,354,313.24|", f"|其中：营业收入|{revenue}|4,288,354,313.24|",
        "|五、净利润（净亏损以“－”号填列）|-32,954,030.06|66,896,169.29|",
        "|（一）基本每股收益|-0.11|0.23|", *flows,
        "3、母公司资产负债表", "|项目|期末余额|期初余额|", "|---|---|---|", "|货币资金|9.00|8.00|", "",
    ]) + "\n"


def statement_pdf(path: Path, company: str) -> Path:
    """A three-page PDF whose page 2 is a statement of operations in millions (single-spaced columns, as
    PDF text reads)."""
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), f"{company} Annual Report 2023\nOverview of the year.", fontsize=11)
    page = doc.new_page()
    y = 72
    for text in [f"{company}", "Consolidated Statements of Operations",
                 "(In millions, except per share amounts)", "Years Ended December 31, 2023 2022",
                 "Net sales $ 3,642 $ 3,507", "Cost of sales (2,980) (2,862)", "Gross profit 662 645",
                 "Operating income 559 322", "Income before income taxes 494 290",
                 "Income tax expense (33) (61)", "Net income $ 461 $ 229",
                 "Basic earnings per share $ 0.31 $ 0.15", "Diluted earnings per share $ 0.30 $ 0.15",
                 "See accompanying notes."]:
        page.insert_text((72, y), text, fontsize=10)
        y += 16
    doc.new_page().insert_text((72, 72), "Notes to Consolidated Financial Statements\nNote 1.", fontsize=11)
    doc.save(path)
    return path
