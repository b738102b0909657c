"""The synthetic corpus of ``kb bench latency``: fictional companies' 10-K / 10-Q / 8-K filings and questions.

Deterministic for a seed: ``synthetic_document(i, …)`` is always the same tree, chunks and statement facts
(``kb.bench.synthetic_facts``: 10-K and 10-Q reports print their statements, whose lines are stored as facts);
``generate_batch`` embeds documents as ``ingest.pipeline.ingest_file`` would (it runs in a worker process).
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kb.bench.synthetic_facts import FACTS_PER_REPORT, quarter_end, statement_tables
from kb.core.errors import ConfigError
from kb.core.providers.embed import HashEmbedder
from kb.core.text import split_sentences
from kb.core.types import ChunkDraft, DocumentTree, FactDraft, TreeNode

DOCS_PER_COMPANY = 10


@dataclass(frozen=True)
class SyntheticQuestion:
    """A generated question and the company / fiscal year it names (None when it names none)."""

    text: str
    company: str | None
    fiscal_year: int | None



_NAME_A = ("Bel", "Cor", "Dra", "Fen", "Gal", "Hal", "Ister", "Jor", "Kel", "Lum", "Mar", "Nor", "Oster",
           "Pel", "Quen", "Ros", "Sel", "Tor", "Ulm", "Val", "Wen", "Xan", "Yor", "Zel", "Ash", "Bram")
_NAME_B = ("adyne", "arix", "bridge", "crest", "dale", "field", "gate", "haven", "lith", "mont", "nova",
           "quist", "rath", "stone", "tek", "vane", "wick", "wyn", "moor", "ford")
_NAME_B_MORE = ("ampton", "bury", "cliff", "dor", "ell", "olm", "grove", "hurst", "ion", "kirk", "ley", "mark",
                "ness", "ora", "port", "ridge", "shaw", "ton", "usk", "worth")
_INDUSTRIES = (("Semiconductors", "semiconductor"), ("Foods", "packaged food"), ("Energy", "energy"),
               ("Logistics", "freight and logistics"), ("Pharmaceuticals", "pharmaceutical"), ("Retail", "retail"),
               ("Software", "enterprise software"), ("Aerospace", "aerospace"), ("Materials", "specialty materials"),
               ("Networks", "telecommunications"))
_SUFFIXES = ("Inc.", "Corporation", "Holdings", "Co.", "plc", "Inc.", "Group", "Ltd.")
_SEGMENTS = ("North America", "Europe", "Asia Pacific", "Latin America", "Industrial", "Consumer", "Services",
             "Digital", "Components", "Healthcare")
_CITIES = ("Austin, Texas", "Columbus, Ohio", "Raleigh, North Carolina", "Denver, Colorado", "Boise, Idaho",
           "Rotterdam, the Netherlands", "Monterrey, Mexico", "Penang, Malaysia", "Dublin, Ireland")

# (key, title, level, parent key, weight for chunk allocation, topic); weight 0 = internal node
Section = tuple[str, str, int, str | None, int, str]
_TREE_10K: tuple[Section, ...] = (
    ("p1", "PART I", 1, None, 0, ""),
    ("i1", "Item 1. Business", 2, "p1", 8, "business"),
    ("i1a", "Item 1A. Risk Factors", 2, "p1", 12, "risk"),
    ("i2", "Item 2. Properties", 2, "p1", 2, "properties"),
    ("i3", "Item 3. Legal Proceedings", 2, "p1", 2, "legal"),
    ("p2", "PART II", 1, None, 0, ""),
    ("i5", "Item 5. Market for Registrant's Common Equity, Related Stockholder Matters and Issuer Purchases "
           "of Equity Securities", 2, "p2", 3, "equity"),
    ("i7", "Item 7. Management's Discussion and Analysis of Financial Condition and Results of Operations",
     2, "p2", 0, ""),
    ("i7o", "Overview", 3, "i7", 4, "overview"),
    ("i7r", "Results of Operations", 3, "i7", 10, "results"),
    ("i7l", "Liquidity and Capital Resources", 3, "i7", 7, "liquidity"),
    ("i7c", "Critical Accounting Estimates", 3, "i7", 4, "estimates"),
    ("i7a", "Item 7A. Quantitative and Qualitative Disclosures About Market Risk", 2, "p2", 4, "marketrisk"),
    ("i8", "Item 8. Financial Statements and Supplementary Data", 2, "p2", 0, ""),
    ("s1", "Consolidated Statements of Operations", 3, "i8", 3, "income"),
    ("s2", "Consolidated Balance Sheets", 3, "i8", 3, "balance"),
    ("s3", "Consolidated Statements of Cash Flows", 3, "i8", 3, "cashflow"),
    ("nt", "Notes to Consolidated Financial Statements", 3, "i8", 0, ""),
    ("n1", "Note 1 — Summary of Significant Accounting Policies", 4, "nt", 5, "policies"),
    ("n2", "Note 2 — Revenue Recognition", 4, "nt", 5, "revenue"),
    ("n3", "Note 3 — Acquisitions", 4, "nt", 3, "acquisitions"),
    ("n4", "Note 4 — Debt", 4, "nt", 5, "debt"),
    ("n5", "Note 5 — Leases", 4, "nt", 3, "leases"),
    ("n6", "Note 6 — Income Taxes", 4, "nt", 4, "taxes"),
    ("n7", "Note 7 — Commitments and Contingencies", 4, "nt", 3, "contingencies"),
    ("n8", "Note 8 — Stock-Based Compensation", 4, "nt", 3, "stockcomp"),
    ("n9", "Note 9 — Segment Information", 4, "nt", 4, "segments"),
    ("n10", "Note 10 — Goodwill and Intangible Assets", 4, "nt", 3, "goodwill"),
    ("n11", "Note 11 — Earnings Per Share", 4, "nt", 2, "eps"),
    ("p3", "PART III", 1, None, 0, ""),
    ("i10", "Item 10. Directors, Executive Officers and Corporate Governance", 2, "p3", 2, "directors"),
    ("i11", "Item 11. Executive Compensation", 2, "p3", 3, "compensation"),
    ("p4", "PART IV", 1, None, 0, ""),
    ("i15", "Item 15. Exhibits and Financial Statement Schedules", 2, "p4", 1, "exhibits"),
)
_TREE_10Q: tuple[Section, ...] = (
    ("p1", "PART I — FINANCIAL INFORMATION", 1, None, 0, ""),
    ("i1", "Item 1. Financial Statements", 2, "p1", 0, ""),
    ("s1", "Condensed Consolidated Statements of Operations", 3, "i1", 3, "income"),
    ("s2", "Condensed Consolidated Balance Sheets", 3, "i1", 3, "balance"),
    ("s3", "Condensed Consolidated Statements of Cash Flows", 3, "i1", 3, "cashflow"),
    ("nt", "Notes to Condensed Consolidated Financial Statements", 3, "i1", 0, ""),
    ("n1", "Note 1 — Basis of Presentation", 4, "nt", 3, "policies"),
    ("n2", "Note 2 — Revenue", 4, "nt", 4, "revenue"),
    ("n3", "Note 3 — Debt", 4, "nt", 4, "debt"),
    ("n4", "Note 4 — Income Taxes", 4, "nt", 3, "taxes"),
    ("n5", "Note 5 — Commitments and Contingencies", 4, "nt", 3, "contingencies"),
    ("n6", "Note 6 — Segment Information", 4, "nt", 4, "segments"),
    ("i2", "Item 2. Management's Discussion and Analysis of Financial Condition and Results of Operations",
     2, "p1", 0, ""),
    ("i2o", "Overview", 3, "i2", 3, "overview"),
    ("i2r", "Results of Operations", 3, "i2", 8, "results"),
    ("i2l", "Liquidity and Capital Resources", 3, "i2", 6, "liquidity"),
    ("i3", "Item 3. Quantitative and Qualitative Disclosures About Market Risk", 2, "p1", 3, "marketrisk"),
    ("i4", "Item 4. Controls and Procedures", 2, "p1", 2, "controls"),
    ("p2", "PART II — OTHER INFORMATION", 1, None, 0, ""),
    ("ii1", "Item 1. Legal Proceedings", 2, "p2", 2, "legal"),
    ("ii1a", "Item 1A. Risk Factors", 2, "p2", 4, "risk"),
    ("ii2", "Item 2. Unregistered Sales of Equity Securities and Use of Proceeds", 2, "p2", 2, "equity"),
    ("ii6", "Item 6. Exhibits", 2, "p2", 1, "exhibits"),
)
_TREE_8K: tuple[Section, ...] = (
    ("i202", "Item 2.02 Results of Operations and Financial Condition", 1, None, 1, "highlights"),
    ("ex", "Exhibit 99.1 — Press Release", 1, None, 0, ""),
    ("h", "Fourth Quarter and Full Year Highlights", 2, "ex", 5, "highlights"),
    ("sr", "Revenue by Segment", 2, "ex", 4, "segments"),
    ("ol", "Outlook", 2, "ex", 3, "outlook"),
    ("fs", "Condensed Consolidated Financial Statements", 2, "ex", 0, ""),
    ("fs1", "Condensed Consolidated Statements of Operations", 3, "fs", 3, "income"),
    ("fs2", "Condensed Consolidated Balance Sheets", 3, "fs", 3, "balance"),
    ("ng", "Reconciliation of GAAP to Non-GAAP Measures", 2, "ex", 4, "nongaap"),
    ("cc", "Conference Call and Webcast", 2, "ex", 1, "call"),
    ("i901", "Item 9.01 Financial Statements and Exhibits", 1, None, 1, "exhibits"),
)

_TOPICS: dict[str, tuple[str, ...]] = {
    "business": (
        "{co} is a leading provider of {ind} products and services to customers in more than {n} countries.",
        "In fiscal {fy} the company operated {n} manufacturing and distribution facilities and employed approximately {n}00 people.",
        "Our strategy focuses on innovation, operational excellence and disciplined capital allocation across the {seg} segment.",
        "We compete on the basis of product performance, price, reliability and the breadth of our {ind} portfolio.",
        "Seasonality affects demand, and revenue is typically highest in the fourth quarter of the fiscal year.",
        "Our largest customer accounted for {pct}% of net sales in fiscal {fy} and {pct2}% in fiscal {py}.",
    ),
    "risk": (
        "Disruptions in our supply chain, including shortages of raw materials, could adversely affect our results of operations.",
        "We are exposed to fluctuations in foreign currency exchange rates, particularly the euro and the Mexican peso.",
        "Cybersecurity incidents could compromise confidential information and disrupt the operations of {co}.",
        "Changes in tax laws in the jurisdictions where we operate could increase our effective tax rate.",
        "Our indebtedness of ${amt} million could limit our flexibility in planning for changes in the {ind} market.",
        "Competition from lower-cost producers may reduce our margins in the {seg} segment.",
    ),
    "properties": (
        "Our corporate headquarters is located in {city}, in a leased facility of approximately {n}0,000 square feet.",
        "We own or lease {n} principal facilities used for manufacturing, research and distribution.",
        "We believe our properties are suitable and adequate for our current and anticipated needs.",
    ),
    "legal": (
        "{co} is party to various legal proceedings arising in the ordinary course of business (see {note}).",
        "In fiscal {fy} a putative class action was filed alleging violations of federal securities laws; we believe the claims are without merit.",
        "We recorded an accrual of ${amt2} million for a patent infringement matter pending in the District of Delaware.",
    ),
    "equity": (
        "Our common stock is traded on the New York Stock Exchange under the symbol {tk}.",
        "During fiscal {fy} we repurchased {n} million shares for ${amt} million under the share repurchase program.",
        "The board of directors declared quarterly cash dividends of ${eps} per share in fiscal {fy}.",
        "As of the end of fiscal {fy}, ${amt2} million remained available under the repurchase authorization.",
    ),
    "overview": (
        "Fiscal {fy} net sales were ${rev} million, an increase of {pct}% compared with fiscal {py}.",
        "Operating income was ${amt} million and diluted earnings per share were ${eps}.",
        "Results reflected higher volume in the {seg} segment, partially offset by inflationary cost pressure.",
        "We continued to invest in capacity expansion and digital capabilities during fiscal {fy}.",
    ),
    "results": (
        "Net sales increased {pct}% to ${rev} million in fiscal {fy}, driven by pricing actions and volume growth in {seg}.",
        "Gross margin was {pct2}% compared with {pct}% in fiscal {py}, reflecting favorable product mix.",
        "Selling, general and administrative expenses were ${amt} million, or {pct}% of net sales.",
        "Research and development expense increased to ${amt2} million as we expanded our {ind} engineering teams.",
        "Operating income in the {seg} segment decreased {pct}% due to higher freight and labor costs.",
        "Interest expense was ${amt2} million, reflecting higher average borrowings under the credit facility (see {note}).",
        "The effective tax rate was {pct2}% in fiscal {fy} compared with {pct}% in fiscal {py}.",
    ),
    "liquidity": (
        "Cash and cash equivalents were ${amt} million at the end of fiscal {fy}.",
        "Cash provided by operating activities was ${rev} million, and capital expenditures were ${amt2} million.",
        "We have a ${amt} million revolving credit facility maturing in {yr2}; no amounts were outstanding at year end.",
        "We believe cash flows from operations and available borrowings are sufficient to fund operations for at least the next twelve months.",
        "Free cash flow, a non-GAAP measure, was ${amt2} million in fiscal {fy}.",
    ),
    "estimates": (
        "The preparation of financial statements requires estimates of inventory reserves, goodwill and income taxes.",
        "We test goodwill for impairment annually in the fourth quarter; no impairment was recorded in fiscal {fy}.",
        "A one percentage point change in the discount rate would change the pension obligation by ${amt2} million.",
    ),
    "marketrisk": (
        "A hypothetical 10% change in foreign currency exchange rates would change operating income by ${amt2} million.",
        "We use interest rate swaps with a notional amount of ${amt} million to hedge variable-rate borrowings.",
        "Commodity price risk arises from purchases of aluminum, copper and natural gas.",
    ),
    "income": (
        "Net sales ${rev} million; cost of sales ${amt} million; gross profit ${amt2} million for fiscal {fy}.",
        "Operating income ${amt2} million; interest expense ${amt3} million; income before income taxes ${amt} million.",
        "Net income ${amt2} million; basic earnings per share ${eps}; diluted earnings per share ${eps}.",
    ),
    "balance": (
        "Total assets ${rev} million; total liabilities ${amt} million; total stockholders' equity ${amt2} million.",
        "Inventories ${amt3} million; accounts receivable, net ${amt2} million; property, plant and equipment, net ${amt} million.",
        "Long-term debt, less current portion ${amt} million; operating lease liabilities ${amt3} million.",
    ),
    "cashflow": (
        "Net cash provided by operating activities ${amt} million in fiscal {fy} compared with ${amt2} million in fiscal {py}.",
        "Capital expenditures ${amt2} million; acquisitions, net of cash acquired ${amt3} million.",
        "Repurchases of common stock ${amt3} million; dividends paid ${amt3} million; proceeds from borrowings ${amt} million.",
    ),
    "policies": (
        "The consolidated financial statements include the accounts of {co} and its wholly owned subsidiaries.",
        "Inventories are stated at the lower of cost and net realizable value, with cost determined on a first-in, first-out basis.",
        "Property, plant and equipment are depreciated on a straight-line basis over estimated useful lives of 3 to {n} years.",
        "Recently issued accounting standards are not expected to have a material effect on the financial statements.",
    ),
    "revenue": (
        "Revenue is recognized when control of promised goods transfers to the customer, generally upon shipment.",
        "Service revenue from multi-year contracts is recognized ratably over the contract term.",
        "Remaining performance obligations were ${amt} million, of which approximately {pct}% will be recognized within twelve months.",
        "Revenue from the {seg} region was ${amt2} million in fiscal {fy}.",
    ),
    "acquisitions": (
        "In fiscal {fy} {co} acquired a {ind} business for cash consideration of ${amt} million.",
        "The purchase price allocation included goodwill of ${amt2} million and customer relationships of ${amt3} million (see {note}).",
        "Pro forma results are not presented because the acquisition was not material.",
    ),
    "debt": (
        "Total long-term debt was ${amt} million at the end of fiscal {fy}, including ${amt2} million of senior notes due {yr2}.",
        "The senior unsecured notes bear interest at {rate}% payable semi-annually.",
        "The credit agreement contains a maximum leverage ratio covenant of 3.5 to 1.0; {co} was in compliance as of the end of fiscal {fy}.",
        "Scheduled principal payments are ${amt3} million in fiscal {ny} and ${amt2} million thereafter.",
    ),
    "leases": (
        "Operating lease cost was ${amt3} million in fiscal {fy}; the weighted-average remaining lease term was {n} years.",
        "Right-of-use assets of ${amt2} million and operating lease liabilities of ${amt2} million were recorded.",
        "The weighted-average discount rate for operating leases was {rate}%.",
    ),
    "taxes": (
        "The provision for income taxes was ${amt2} million, an effective tax rate of {pct2}% for fiscal {fy}.",
        "Unrecognized tax benefits were ${amt3} million, and we do not expect significant changes within twelve months.",
        "Deferred tax assets include net operating loss carryforwards of ${amt3} million expiring beginning in {yr2}.",
    ),
    "contingencies": (
        "Purchase commitments for raw materials totaled ${amt} million at the end of fiscal {fy}.",
        "{co} provides product warranties; the warranty reserve was ${amt3} million.",
        "Environmental remediation accruals were ${amt3} million for sites in {city}.",
    ),
    "stockcomp": (
        "Stock-based compensation expense was ${amt3} million in fiscal {fy}.",
        "Restricted stock units vest ratably over three years; {n}00,000 units were granted during the year.",
        "Performance share units are earned based on relative total shareholder return over a three-year period.",
    ),
    "segments": (
        "{co} reports {n} operating segments: {seg}, {seg2} and Other.",
        "The {seg} segment reported net sales of ${amt} million and operating income of ${amt2} million in fiscal {fy}.",
        "The {seg2} segment net sales declined {pct}% as a result of weaker demand.",
        "Segment performance is evaluated by the chief operating decision maker on adjusted operating income.",
    ),
    "goodwill": (
        "Goodwill was ${amt} million at the end of fiscal {fy}, allocated to the {seg} and {seg2} reporting units.",
        "In fiscal {fy} we recorded a goodwill impairment charge of ${amt3} million in the {seg2} reporting unit.",
        "Amortization expense for intangible assets was ${amt3} million and is expected to be ${amt3} million in fiscal {ny}.",
    ),
    "eps": (
        "Basic earnings per share were ${eps} and diluted earnings per share were ${eps} in fiscal {fy}.",
        "Weighted-average diluted shares outstanding were {n}0.{n} million.",
        "Anti-dilutive stock options of {n}00,000 shares were excluded from the computation.",
    ),
    "directors": (
        "Information about our directors and executive officers is incorporated by reference to the proxy statement.",
        "The audit committee of {co} consists of {n} independent directors.",
        "We have adopted a code of business conduct applicable to all employees and directors.",
    ),
    "compensation": (
        "The chief executive officer of {co} received total compensation of ${eps} million in fiscal {fy}.",
        "Annual incentive payouts were {pct}% of target based on adjusted operating income and free cash flow.",
        "Long-term incentives consist of performance share units and restricted stock units.",
    ),
    "exhibits": (
        "Exhibit 10.{n} Credit Agreement dated as of {fy}, among {co}, the lenders party thereto and the administrative agent.",
        "Exhibit 21 Subsidiaries of the registrant; Exhibit 23 Consent of independent registered public accounting firm.",
        "Exhibit 31.1 Certification of the chief executive officer pursuant to Section 302 of the Sarbanes-Oxley Act.",
    ),
    "controls": (
        "Management evaluated the effectiveness of disclosure controls and procedures as of the end of the quarter.",
        "There were no changes in internal control over financial reporting that materially affected {co}.",
    ),
    "highlights": (
        "{co} reported fourth quarter net sales of ${amt} million, up {pct}% year over year.",
        "Full year fiscal {fy} net sales were ${rev} million and diluted earnings per share were ${eps}.",
        "Adjusted operating margin expanded {n}0 basis points to {pct2}%.",
        "The company returned ${amt3} million to shareholders through dividends and share repurchases.",
    ),
    "outlook": (
        "For fiscal {ny}, {co} expects net sales growth of {pct}% to {pct2}% and adjusted earnings per share of ${eps}.",
        "The outlook assumes stable foreign currency exchange rates and an effective tax rate of about {pct2}%.",
    ),
    "nongaap": (
        "Adjusted EBITDA was ${amt} million, excluding restructuring charges of ${amt3} million.",
        "Free cash flow is defined as operating cash flow less capital expenditures and was ${amt2} million.",
        "Non-GAAP measures should be considered in addition to, not as a substitute for, GAAP results.",
    ),
    "call": (
        "{co} will host a conference call to discuss the results; a webcast replay will be available on the investor relations website.",
    ),
}
_FILLER = (
    "Amounts are in millions of U.S. dollars except per share data.",
    "Certain prior period amounts have been reclassified to conform to the current period presentation.",
    "These forward-looking statements involve risks and uncertainties that could cause actual results to differ.",
    "The following table summarizes the activity for fiscal {fy} and fiscal {py}.",
    "Management believes these measures provide useful information to investors about {co}.",
    "The increase was primarily attributable to the {seg} segment.",
    "Refer to {note} for additional information.",
)
_NOTE_REFS = ("Note 2", "Note 4", "Note 6", "Note 7", "Note 9", "Item 7", "Item 1A")

_QUESTIONS_CO_YEAR = (
    "What was the total long-term debt of {co} at the end of fiscal {fy}?",
    "How much were {co}'s net sales in fiscal {fy} and what drove the change?",
    "What were {co}'s capital expenditures in fiscal {fy}?",
    "What was {co}'s effective tax rate for fiscal {fy}?",
    "Did {co} record a goodwill impairment charge in fiscal {fy}?",
    "How much stock did {co} repurchase during fiscal {fy}?",
    "What were the diluted earnings per share of {co} for fiscal {fy}?",
)
_QUESTIONS_CO = (
    "How does {co} recognize revenue from multi-year service contracts?",
    "What are the main supply chain risk factors for {co}?",
    "Which operating segments does {co} report?",
    "What covenants apply to the revolving credit facility of {co}?",
    "What outlook did {co} give for next year's net sales growth?",
)
_QUESTIONS_TOPIC = (
    "Which companies disclosed a goodwill impairment in a reporting unit?",
    "How do companies hedge variable-rate borrowings with interest rate swaps?",
    "What is the weighted-average discount rate used for operating leases?",
    "Which segments had operating income declines due to freight and labor costs?",
    "What share repurchase programs were authorized by the board of directors?",
    "How sensitive is operating income to a 10% change in foreign currency exchange rates?",
    "What environmental remediation accruals were recorded?",
)


_QUESTIONS_LIST = (
    "Which of these companies disclosed a goodwill impairment?",
    "Which companies report interest rate swaps on variable-rate borrowings?",
    "Which of these companies recorded environmental remediation accruals?",
    "List the companies that authorized a share repurchase program.",
)


def list_question(q: SyntheticQuestion) -> str:
    """A list question over the collection, chosen by the question's text (deterministic)."""
    return _QUESTIONS_LIST[sum(map(ord, q.text)) % len(_QUESTIONS_LIST)]


_QUESTIONS_FACTS = (
    "Which companies have the highest revenue in {fy}?",
    "Which companies had the lowest net income in {fy}?",
    "Rank all companies by total liabilities.",
    "Which companies have the largest cash and cash equivalents?",
    "Which companies reported the highest basic earnings per share in {fy}?",
    "Rank all companies by total assets in ascending order.",
)
"""Corpus-wide ranking questions over a vocabulary measure that name no company: answered from the statement
facts of every document of the collection (``router.facts``, ``corpus`` mode)."""


def facts_question(q: SyntheticQuestion) -> str:
    """A corpus-wide facts question (highest, lowest, ranking), chosen by the question's text (deterministic);
    a stated fiscal year is one of the 10-K years."""
    h = sum(map(ord, q.text))
    return _QUESTIONS_FACTS[h % len(_QUESTIONS_FACTS)].format(fy=2017 + (h // 7) % 7)


class _Values(dict[str, str]):
    """Lazily drawn template values; the same key within one sentence gets one value."""

    def __init__(self, rng: random.Random, base: dict[str, Any]) -> None:
        super().__init__({k: str(v) for k, v in base.items()})
        self.rng = rng
        self.revenue = float(base["rev_base"])

    def __missing__(self, key: str) -> str:
        r = self.rng
        if key == "rev":
            v = f"{self.revenue * r.uniform(0.97, 1.03):,.1f}"
        elif key in {"amt", "amt2", "amt3"}:
            scale = {"amt": 0.3, "amt2": 0.08, "amt3": 0.015}[key]
            v = f"{self.revenue * scale * r.uniform(0.5, 1.5):,.1f}"
        elif key in {"pct", "pct2"}:
            v = f"{r.uniform(1, 35):.1f}"
        elif key == "rate":
            v = f"{r.uniform(1.5, 7.5):.3f}"
        elif key == "eps":
            v = f"{r.uniform(0.4, 12):.2f}"
        elif key == "n":
            v = str(r.randint(2, 60))
        elif key in {"seg", "seg2"}:
            v = r.choice(_SEGMENTS)
        elif key == "city":
            v = r.choice(_CITIES)
        elif key == "note":
            v = r.choice(_NOTE_REFS)
        elif key == "yr2":
            v = str(int(self["fy"]) + r.randint(2, 12))
        else:
            raise KeyError(key)
        self[key] = v
        return v


@dataclass(frozen=True)
class Company:
    name: str
    ticker: str
    industry: str
    revenue: float  # $M in fiscal 2017


def companies(n: int, seed: int) -> list[Company]:
    """``n`` fictional companies with distinct first words (the metadata matcher keys on them)."""
    rng = random.Random(f"companies-{seed}")
    firsts = [a + b for a in _NAME_A for b in _NAME_B]
    if n > len(firsts):  # past 5,200 documents (issue 26: 10,000); smaller corpora stay as they were
        firsts += [a + b for a in _NAME_A for b in _NAME_B_MORE]
    if n > len(firsts):
        raise ConfigError(f"at most {len(firsts) * DOCS_PER_COMPANY} synthetic documents are supported")
    out = []
    for first in rng.sample(firsts, n):
        word, ind = rng.choice(_INDUSTRIES)
        out.append(Company(name=f"{first} {word} {rng.choice(_SUFFIXES)}", ticker=first[:4].upper(), industry=ind,
                           revenue=round(rng.uniform(400, 25000), 1)))
    return out


def _doc_kind(j: int) -> tuple[str, str, int, int | None]:
    """The j-th document of a company: (doc_type, form, fiscal_year, fiscal_quarter)."""
    if j < 7:
        return "10k", "10-K", 2017 + j, None
    if j < 9:
        return "10q", "10-Q", 2024, j - 6
    return "8k", "8-K", 2023, 4


def synthetic_fact_count(docs: int) -> int:
    """Fact rows of the first ``docs`` synthetic documents (every 10-K and 10-Q prints its statements)."""
    return sum(FACTS_PER_REPORT for i in range(docs) if _doc_kind(i % DOCS_PER_COMPANY)[0] != "8k")


def _allocate(weights: Sequence[int], total: int) -> list[int]:
    """Split ``total`` chunks over leaves proportionally to ``weights`` (each leaf at least one)."""
    s = sum(weights)
    raw = [max(1.0, total * w / s) for w in weights]
    counts = [max(1, int(x)) for x in raw]
    order = sorted(range(len(weights)), key=lambda i: -(raw[i] - int(raw[i])))
    k = 0
    while sum(counts) < total:
        counts[order[k % len(order)]] += 1
        k += 1
    while sum(counts) > total and max(counts) > 1:
        counts[counts.index(max(counts))] -= 1
    return counts


@dataclass(frozen=True)
class SyntheticDoc:
    """One generated document, embedded, ready for ``ingest.store.NewDocument``."""

    name: str
    metadata: dict[str, Any]
    title: str
    description: str
    tree: DocumentTree
    chunks: tuple[ChunkDraft, ...]
    chunk_vecs: np.ndarray
    node_vecs: np.ndarray
    desc_vec: np.ndarray
    facts: tuple[FactDraft, ...] = ()


def synthetic_document(index: int, chunks_per_doc: int, seed: int, company_list: Sequence[Company]) -> tuple[
        str, dict[str, Any], str, DocumentTree, tuple[ChunkDraft, ...], tuple[FactDraft, ...]]:
    """The ``index``-th document (deterministic): name, metadata, title, tree, chunks, statement facts. A
    statement's table opens the first chunk of its section; its facts cite that page."""
    co = company_list[index // DOCS_PER_COMPANY]
    doc_type, form, fy, fq = _doc_kind(index % DOCS_PER_COMPANY)
    rng = random.Random(f"doc-{seed}-{index}")
    template = {"10k": _TREE_10K, "10q": _TREE_10Q, "8k": _TREE_8K}[doc_type]
    rev = co.revenue * (1.06 ** (fy - 2017)) * (0.25 if fq else 1.0)
    base = {"co": co.name, "tk": co.ticker, "ind": co.industry, "fy": fy, "py": fy - 1, "ny": fy + 1,
            "rev_base": round(rev, 1)}
    leaves = [s for s in template if s[4] > 0]
    counts = dict(zip((s[0] for s in leaves), _allocate([s[4] for s in leaves], chunks_per_doc), strict=True))
    key_to_id = {s[0]: f"{i:04d}" for i, s in enumerate(template)}
    titles = {s[0]: s[1] for s in template}
    parents = {s[0]: s[3] for s in template}
    tables = statement_tables(co, doc_type, fy, fq, seed, titles.__getitem__)

    def path_of(key: str) -> tuple[str, ...]:
        out: list[str] = []
        k: str | None = key
        while k is not None:
            out.append(titles[k])
            k = parents[k]
        return tuple(reversed(out))

    chunks: list[ChunkDraft] = []
    leaf_text: dict[str, str] = {}
    spans: dict[str, tuple[int, int]] = {}
    page = 1
    for key, _title, _lvl, _parent, _w, topic in template:
        if key not in counts:
            continue
        heading = " > ".join(path_of(key))
        start = page
        texts = []
        for c in range(counts[key]):
            sentences: list[str] = []
            words, target = 0, rng.randint(85, 125)
            topical = rng.sample(_TOPICS[topic], len(_TOPICS[topic]))
            while words < target:
                tpl = topical[len(sentences) % len(topical)] if rng.random() < 0.8 else rng.choice(_FILLER)
                s = tpl.format_map(_Values(rng, base)).replace("..", ".")
                sentences.append(s)
                words += s.count(" ") + 1
            text = " ".join(sentences)
            table = tables.get(key)
            if table is not None and c == 0:
                text = f"{table.text}\n\n{text}"
                words += len(table.text.split())
            texts.append(text)
            chunks.append(ChunkDraft(node_id=key_to_id[key], ordinal=len(chunks), text=text, page=start + c // 3,
                                     token_count=int(words * 1.35), heading_path=heading,
                                     statement=table.kind if table is not None else ""))
        page = start + (counts[key] - 1) // 3 + 1
        spans[key] = (start, page - 1)
        leaf_text[key] = "\n\n".join(texts)
    nodes: list[TreeNode] = []
    for i, (key, title, level, parent, _w, _topic) in enumerate(template):
        kids = [s[0] for s in template if s[3] == key]
        if key in spans:
            start, end = spans[key]
            text = leaf_text[key]
            summary = f"{title}: {split_sentences(text)[0]}" if len(text) > 400 else ""
        else:
            desc = [k for k in key_to_id if key in _path_keys(k, parents)]
            start = min(spans[k][0] for k in desc if k in spans)
            end = max(spans[k][1] for k in desc if k in spans)
            text = ""
            summary = "Covers " + "; ".join(titles[k] for k in kids) + "."
        nodes.append(TreeNode(node_id=key_to_id[key], parent_id=key_to_id[parent] if parent else None, ordinal=i,
                              level=level, title=title, start=start, end=end, text=text, summary=summary,
                              path=path_of(key), is_leaf=not kids))
    tree = DocumentTree(nodes=tuple(nodes), page_count=page - 1, source_mode="outline")
    slug = re.sub(r"[^a-z0-9]+", "-", co.name.lower()).strip("-")
    period = f"{fy}-Q{fq}" if fq else str(fy)
    name = f"{slug}_{form}_{period}.pdf"
    meta: dict[str, Any] = {"company": co.name, "ticker": co.ticker, "doc_type": doc_type, "form": form,
                            "fiscal_year": fy}
    if fq:
        meta["fiscal_quarter"] = fq
        meta["period_end_date"] = quarter_end(fy, fq).isoformat()
    else:
        meta["period_end_date"] = dt.date(fy, 12, 31).isoformat()
    title = f"{co.name} {form} {'Q' + str(fq) + ' ' if fq else ''}{fy}"
    facts = tuple(f for key, t in tables.items() for f in t.located(spans[key][0], key_to_id[key]))
    return name, meta, title, tree, tuple(chunks), facts


def _path_keys(key: str, parents: dict[str, str | None]) -> list[str]:
    """``key`` and its ancestors."""
    out: list[str] = []
    k: str | None = key
    while k is not None:
        out.append(k)
        k = parents[k]
    return out


def generate_batch(indices: Sequence[int], chunks_per_doc: int, seed: int, n_companies: int,
                   dim: int) -> list[SyntheticDoc]:
    """Generate and embed documents exactly as ``ingest.pipeline.ingest_file`` embeds them (worker process)."""
    from ingest.describe import offline_description
    from ingest.pipeline import doc_label, embed_text_for_chunk

    emb = _worker_embedder(dim)
    company_list = companies(n_companies, seed)
    out = []
    for index in indices:
        name, meta, title, tree, chunks, facts = synthetic_document(index, chunks_per_doc, seed, company_list)
        description = offline_description(tree, meta, name)
        label = doc_label(meta, title)
        chunk_vecs = emb.embed_batch([embed_text_for_chunk(label, c.heading_path, c.text) for c in chunks])
        node_vecs = emb.embed_batch([f"{label} | {' > '.join(n.path)}: {n.summary}" for n in tree.nodes])
        desc_vec = emb.embed_batch([f"{title}. {description}"])[0]
        out.append(SyntheticDoc(name=name, metadata=meta, title=title, description=description, tree=tree,
                                chunks=chunks, chunk_vecs=chunk_vecs, node_vecs=node_vecs, desc_vec=desc_vec,
                                facts=facts))
    return out


_WORKER_EMBEDDERS: dict[int, HashEmbedder] = {}


def _worker_embedder(dim: int) -> HashEmbedder:
    if dim not in _WORKER_EMBEDDERS:
        _WORKER_EMBEDDERS[dim] = HashEmbedder(dim)
    return _WORKER_EMBEDDERS[dim]


def bench_questions(company_list: Sequence[Company], n: int, seed: int) -> list[SyntheticQuestion]:
    """Questions: ~40% company + year, ~30% company only, ~30% topic only."""
    rng = random.Random(f"questions-{seed}")
    out = []
    for i in range(n):
        co = rng.choice(list(company_list))
        kind = i % 10
        if kind < 4:
            fy = rng.randint(2017, 2023)
            out.append(SyntheticQuestion(rng.choice(_QUESTIONS_CO_YEAR).format(co=co.name, fy=fy), co.name, fy))
        elif kind < 7:
            out.append(SyntheticQuestion(rng.choice(_QUESTIONS_CO).format(co=co.name), co.name, None))
        else:
            out.append(SyntheticQuestion(rng.choice(_QUESTIONS_TOPIC), None, None))
    return out

