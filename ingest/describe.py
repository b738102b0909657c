"""One-sentence document descriptions for description-based document search (spec 000 §7.2.3)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

import structlog

from ingest.prompts import DOC_DESCRIPTION, description_prompt
from kb.core import lexicon as lx
from kb.core import vocab
from kb.core.errors import LLMError
from kb.core.providers import ChatModel
from kb.core.providers.steps import ask
from kb.core.text import truncate_tokens
from kb.core.types import DocumentTree, TreeNode

log = structlog.get_logger("ingest.describe")

_TREE_TOKENS = 6000
_GENERIC_TITLES = re.compile(
    r"^(preface|table of contents|contents|index|cover( page)?|signatures?|exhibits?( and financial statement schedules)?"
    r"|part [ivx]+|item \d+(?:\.\d+)?[a-z]?\.?|not applicable|none)$",
    re.I,
)


def _clean_section_title(title: str) -> str:
    t = re.sub(r"^(part\s+[ivx]+\s*[-—–.:]?\s*)", "", title.strip(), flags=re.I)
    t = re.sub(r"^item\s+\d+(?:\.\d+)?[a-z]?\s*[.:—–-]?\s*", "", t, flags=re.I)  # "Item 8.01 Other Events"
    t = re.sub(r"\s*\(part \d+\)$", "", t)
    t = re.sub(r"\s+", " ", t).strip(" .:")
    return t


def top_section_titles(tree: DocumentTree, limit: int = 6) -> list[str]:
    """Distinct, non-generic titles of the top sections (descending through a lone top node and
    through "PART I"-style nodes)."""
    by_parent: dict[str | None, list[TreeNode]] = {}
    for node in tree.nodes:
        by_parent.setdefault(node.parent_id, []).append(node)

    def meaningful(nodes: list[TreeNode]) -> list[TreeNode]:
        return [n for n in nodes if not _GENERIC_TITLES.match(n.title.strip())
                and not _GENERIC_TITLES.match(_clean_section_title(n.title))]

    level = meaningful(by_parent.get(None, []))
    while len(level) == 1 and by_parent.get(level[0].node_id):
        level = meaningful(by_parent[level[0].node_id])
    titles: list[str] = []
    for node in level:
        candidates = [node]
        if re.match(r"^part\s+[ivx]+\b", node.title.strip(), re.I) and by_parent.get(node.node_id):
            candidates = meaningful(by_parent[node.node_id])
        for cand in candidates:
            title = _clean_section_title(cand.title)
            if not title:
                continue
            title = title.title() if title.isupper() else title[:1].upper() + title[1:]
            if title.lower() not in {t.lower() for t in titles}:
                titles.append(title)
    return titles[:limit]


def _date(value: Any) -> str | None:
    try:
        d = dt.date.fromisoformat(str(value))
    except ValueError:
        return None
    return f"{d:%B} {d.day}, {d.year}"


def _period_phrase(meta: Mapping[str, Any]) -> str:
    doc_type = str(meta.get("doc_type") or "").lower()
    end = _date(meta.get("period_end_date")) if meta.get("period_end_date") else None
    fy, fq = meta.get("fiscal_year"), meta.get("fiscal_quarter")
    if vocab.cover_date(doc_type) == "quarter_end" and end:
        tag = f" (fiscal {fy} Q{fq})" if fy and fq else ""
        return f"for the fiscal quarter ended {end}{tag}"
    if end:
        return f"for the fiscal year ended {end}" + (f" (fiscal {fy})" if fy else "")
    if meta.get("report_date") and _date(meta["report_date"]):
        return f"dated {_date(meta['report_date'])}"
    if fy and fq:
        return f"for fiscal {fy} Q{fq}"
    if fy or meta.get("doc_period"):
        return f"for fiscal {fy or meta.get('doc_period')}"
    return ""


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def offline_description(tree: DocumentTree, metadata: Mapping[str, Any], name: str) -> str:
    """Title/company, document type, period and top section titles in one sentence."""
    if _chinese_document(tree, metadata):
        return zh_description(tree, metadata, name)
    company = str(metadata.get("company") or "").strip()
    doc_type = str(metadata.get("doc_type") or "").lower()
    label = vocab.description_label(doc_type)
    period = _period_phrase(metadata)
    title = str(metadata.get("title") or "").strip()
    if company and label:
        head = f"{company} {label}"
    elif title:
        head = title
    elif company:
        head = f"{company} document"
    else:
        roots = [n for n in tree.nodes if n.parent_id is None]
        head = roots[0].title if len(roots) == 1 else re.sub(r"\.[A-Za-z0-9]{1,5}$", "", name)
    sentence = f"{head} {period}".strip() if period and period not in head else head
    sections = top_section_titles(tree)
    if sections:
        sentence += f", covering {_join(sections)}"
    return sentence.rstrip(" .") + "."


_ZH_NUMBERING = re.compile(r"^(?:第[一二三四五六七八九十\d]{1,3}(?:[节章篇]|部分)|[一二三四五六七八九十]{1,3}、"
                           r"|[（(][一二三四五六七八九十]{1,3}[）)])\s*")
_ZH_TYPES = {"annual_report": "年度报告", "quarterly_report": "季度报告", "semiannual_report": "半年度报告"}
_ZH_QUARTERS = {1: "第一季度报告", 2: "半年度报告", 3: "第三季度报告"}
_WINDOW_TITLE = re.compile(r"^Part \d+: ")  # a paragraph window of a text without headings: not a section


def _chinese_document(tree: DocumentTree, metadata: Mapping[str, Any]) -> bool:
    text = " ".join([str(metadata.get("company") or ""), str(metadata.get("title") or "")]
                    + [n.title for n in tree.nodes[:40]])
    return len(lx.HAN.findall(text)) > sum(1 for c in text if c.isascii() and c.isalpha())


def zh_description(tree: DocumentTree, metadata: Mapping[str, Any], name: str) -> str:
    """A Chinese report's description in Chinese: company (stock code), period and type, its top sections."""
    company = str(metadata.get("company") or "").strip()
    code = str(metadata.get("ticker") or "").strip()
    fy, fq = metadata.get("fiscal_year"), metadata.get("fiscal_quarter")
    doc_type = str(metadata.get("doc_type") or "")
    kind = (_ZH_QUARTERS.get(int(fq), "") if fq and doc_type != "annual_report" else "") or _ZH_TYPES.get(doc_type, "")
    title = str(metadata.get("title") or "").strip()
    if company and (fy or kind):
        head = f"{company}（{code}）" if code else company
        head += f"{fy}年{kind or '报告'}" if fy else kind
    elif title:
        head = title
    else:
        roots = [n for n in tree.nodes if n.parent_id is None]
        head = roots[0].title if len(roots) == 1 else re.sub(r"\.[A-Za-z0-9]{1,5}$", "", name)
    end = _date_zh(metadata.get("period_end_date"))
    if end and kind != "年度报告":
        head += f"，截至{end}"
    sections = [t for t in (_ZH_NUMBERING.sub("", s).strip() for s in top_section_titles(tree, 8))
                if t and not _WINDOW_TITLE.match(t)]
    if sections:
        head += "，包括" + "、".join(dict.fromkeys(sections))
    return head.rstrip("，。 ") + "。"


def _date_zh(value: Any) -> str | None:
    try:
        d = dt.date.fromisoformat(str(value))
    except ValueError:
        return None
    return f"{d.year}年{d.month}月{d.day}日"


def _tree_outline(tree: DocumentTree) -> str:
    lines = []
    for node in tree.nodes:
        summary = " ".join(node.summary.split())[:300]
        lines.append(f"{'  ' * (node.level - 1)}- [{node.node_id}] {node.title}: {summary}")
    return truncate_tokens("\n".join(lines), _TREE_TOKENS)


async def describe_document(tree: DocumentTree, metadata: Mapping[str, Any], name: str, chat: ChatModel) -> str:
    """One sentence that tells this document apart from others (LLM when configured, else offline)."""
    fallback = offline_description(tree, metadata, name)
    if chat.offline:
        return fallback
    meta = {k: v for k, v in metadata.items() if isinstance(v, str | int | float) and k != "title"}
    try:
        text = (await ask(chat, DOC_DESCRIPTION, description_prompt(name, meta, _tree_outline(tree)))).description
    except LLMError as exc:
        log.warning("ingest.description_failed", name=name, error=str(exc))
        return fallback
    if len(text.split()) < 4 and len(lx.HAN.findall(text)) < 8:  # Chinese has no spaces between words
        log.warning("ingest.description_malformed", name=name)
        return fallback
    return " ".join(text.split())
