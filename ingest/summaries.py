"""Node summaries (spec 000 §4.7, spec 002).

Every node gets a summary of its *own* text (see ``chunker.own_text``): text under
``summary_token_threshold`` tokens is its own summary; longer text is summarised by the LLM in
batches (many nodes per prompt, a bounded number of concurrent calls) or, offline and on any LLM
failure, extractively (first informative sentence + most salient sentences, ≤ ~60 words; tables
become a list of their row labels, never number soup). Parents get a "prefix summary": their own
text's summary followed by their children's titles.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import msgspec
import structlog

from ingest.chunker import section_texts, strip_title_lines
from ingest.prompts import NODE_SUMMARY, SummaryReply, summary_prompt
from kb.core import lexicon as lx
from kb.core.errors import LLMError
from kb.core.providers import ChatModel
from kb.core.providers.steps import ask
from kb.core.settings import IngestSettings
from kb.core.text import count_tokens, count_tokens_capped, split_sentences, tokenize, truncate_tokens
from kb.core.types import DocumentTree, TreeNode

log = structlog.get_logger("ingest.summaries")

SUMMARY_WORDS = 60
_NODE_TOKENS = 600  # text of one node sent to the LLM
_BATCH_TOKENS = 12000  # node text per LLM call
_BATCH_NODES = 24
_CONCURRENT_BATCHES = 4
_MAX_CHILD_TITLES = 12

# --------------------------------------------------------------------------- text helpers


def _flat(text: str) -> str:
    """One line of text without Markdown heading marks, code fences and table rule rows."""
    text = re.sub(r"(?m)^\s{0,3}#{1,6}\s+", "", text)
    text = re.sub(r"(?m)^\s*(?:```|~~~)\S*\s*$|^\s*\|?(?:\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*$", "", text)
    return " ".join(text.split())


_TWO_LETTERS = re.compile(r"[A-Za-z]{2}")


_NOT_DIGIT = bytes(c for c in range(128) if not chr(c).isdigit())
_LOWER = re.compile(r"[a-z]")


def _informative(sentence: str) -> bool:
    words = sentence.split()
    if not 6 <= len(words) <= 80:
        return False
    alpha = sum(1 for w in words if _TWO_LETTERS.search(w))
    if sentence.isascii():  # the same counts, without a call per character
        digits = len(sentence.encode().translate(None, _NOT_DIGIT))
        capitals = not _LOWER.search(sentence)  # no letter, or every letter a capital
    else:
        digits = sum(c.isdigit() for c in sentence)
        capitals = all(c.isupper() for c in sentence if c.isalpha())
    return alpha >= 0.65 * len(words) and digits <= 0.15 * max(1, len(sentence)) and not capitals


_TRAILING_FIGURES = re.compile(r"(?:\s+(?:\$|\(?-?\$?\d[\d,]*(?:\.\d+)?\)?%?|[—–-]|n/?m))+\s*$", re.I)


_LEADER = re.compile(r"(?:\s*[.·…]){3,}\s*|\s*…+\s*")
"""Dot leaders of a contents line, between a title and its page number."""


def _contents(text: str) -> bool:
    """A contents list: most of its lines a title, dot leaders and a page number."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return len(lines) >= 3 and sum(_has_leader(ln) for ln in lines) >= 0.5 * len(lines)


def _has_leader(line: str) -> bool:
    """``_LEADER`` found in ``line``; it needs three of ``.·…`` or one ``…``, which most lines lack."""
    if "…" not in line and line.count(".") + line.count("·") < 3:
        return False
    return bool(_LEADER.search(line))


_CONTENTS_HEAD = re.compile(r"(?i)^(?:table of )?contents$")
_SEPARATOR = re.compile(r"^\s*\|?(?:\s*:?-{2,}:?\s*\|)+\s*:?-*:?\s*$")


def _columns(text: str) -> tuple[list[str], str]:
    """The column headers of a text's first Markdown table (the row over its separator) and its first cell."""
    lines = text.split("\n")
    at = next((i for i, ln in enumerate(lines) if i and _SEPARATOR.match(ln)), None)
    if at is None or not lines[at - 1].strip().startswith("|"):
        return [], ""
    cells = [c.strip() for c in lines[at - 1].strip().strip("|").split("|")]
    return [c for c in cells[1:] if c and c not in {"-", "—"}][:6], cells[0]


def _row_labels(text: str, limit: int = 10) -> list[str]:
    labels: list[str] = []
    for line in text.split("\n"):
        label = line.strip()
        if label.startswith("|"):  # Markdown table row: its first non-empty cell
            label = next((c.strip() for c in label.strip("|").split("|") if c.strip()), "")
        label = _LEADER.sub(" ", label)  # a contents line: "Risk Factors ........ 12" → "Risk Factors 12"
        label = _TRAILING_FIGURES.sub("", label).strip(":").strip()  # "Revenue 412.6 348.5 18.4%" → "Revenue"
        if len(label) < 4 or not _TWO_LETTERS.match(label) or sum(c.isdigit() for c in label) > 4:
            continue
        label = " ".join(label.split()[:8])
        if label not in labels:
            labels.append(label)
        if len(labels) >= limit:
            break
    return labels


def _cap_words(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]).rstrip(",;:") + " …"


# --------------------------------------------------------------------------- Chinese text

SUMMARY_ZH_CHARS = 120  # a Chinese summary's length in characters (about SUMMARY_WORDS English words)
_ZH_SENTENCE_END = re.compile(r"(?<=[。！？；])")


def is_chinese(text: str) -> bool:
    """More Chinese characters than Latin letters (in the first 4000 characters)."""
    head = text[:4000]
    han = len(lx.HAN.findall(head))
    return han >= 4 and han > sum(1 for c in head if c.isascii() and c.isalpha())


_ZH_NUMBERING = re.compile(r"^(?:第[一二三四五六七八九十\d]{1,3}[节章]|[一二三四五六七八九十]{1,3}、|[（(][一二三四五六七八九十]{1,3}[）)]"
                           r"|\d{1,2}[、.．](?!\d))\s*")


def _zh_informative(sentence: str) -> bool:
    """A sentence of prose: ends like one (or runs on with commas), mostly Chinese, few digits; not a heading,
    a "key：value" line or a table row."""
    chars = [c for c in sentence if not c.isspace()]
    if not 12 <= len(chars) <= 150 or sentence.lstrip().startswith("|"):
        return False
    if not sentence.endswith(("。", "！", "？", "；")) and not (sentence.count("，") >= 1 and len(chars) >= 20):
        return False
    return (sum(1 for c in chars if lx.HAN.match(c)) >= 0.5 * len(chars)
            and sum(c.isdigit() for c in chars) <= 0.15 * len(chars))


def _zh_row_labels(text: str, limit: int = 10) -> list[str]:
    labels: list[str] = []
    lines = text.split("\n")
    if lines and _ZH_NUMBERING.match(lines[0].strip()):
        lines = lines[1:]  # the section's own heading
    for line in lines:
        label = line.strip()
        if label.startswith("|"):  # a table row: its first non-empty cell
            label = next((c.strip() for c in label.strip("|").split("|") if c.strip() and c.strip() != "-"), "")
        label = re.sub(r"[（(][^）)]*[）)]$", "", label.strip("：: "))  # "营业收入（元）" → "营业收入"
        label = _ZH_NUMBERING.sub("", label)  # "1、合并资产负债表" → "合并资产负债表"
        if (len(lx.HAN.findall(label)) < 2 or sum(c.isdigit() for c in label) > 4 or len(label) > 24
                or re.search(r"[□√■☑]|^单位|[:：]|^项目$", label)):  # check boxes, "单位：元", "编制单位：…"
            continue
        if label not in labels:
            labels.append(label)
        if len(labels) >= limit:
            break
    return labels


def _cap_chars(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip("，、；：,;: ") + "…"


def _zh_extractive(text: str, max_chars: int) -> str:
    """A Chinese summary: the first informative sentence plus the most salient ones, else the rows it lists."""
    prose = [ln.strip() for ln in text.split("\n") if ln.strip() and not ln.lstrip().startswith("|")]
    sentences = [s.strip() for ln in prose for s in _ZH_SENTENCE_END.split(ln) if s.strip()]
    good = [(i, s) for i, s in enumerate(sentences) if _zh_informative(s)]
    labels = _zh_row_labels(text)
    if not good:
        return _cap_chars("涵盖：" + "；".join(labels) + "。", max_chars) if labels else _cap_chars(_flat(text), max_chars)
    tf = Counter(tokenize(" ".join(s for _, s in good)))

    def score(sentence: str) -> float:
        terms = sorted(set(tokenize(sentence)))
        return sum(math.log1p(tf[t]) for t in terms) / math.sqrt(len(terms) + 1)

    chosen, size = [good[0]], len(good[0][1])
    for i, s in sorted(good[1:], key=lambda item: score(item[1]), reverse=True):
        if size + len(s) <= max_chars:
            chosen.append((i, s))
            size += len(s)
    summary = "".join(s for _, s in sorted(chosen))
    if size < max_chars // 2 and (rows := [lb for lb in labels if lb not in summary]):
        summary += "涵盖：" + "；".join(rows) + "。"
    return _cap_chars(summary, max_chars)


def extractive_summary(text: str, max_words: int = SUMMARY_WORDS) -> str:
    """Offline summary: first informative sentence plus the most salient ones (term frequency); Chinese text
    gets a Chinese summary of about as many characters as ``max_words`` × 2."""
    if is_chinese(text):
        return _zh_extractive(text, 2 * max_words)
    if _contents(text) and (titles := _row_labels(text, limit=20)):  # a contents page: its titles, no leaders
        return _cap_words("Contents: " + "; ".join(t for t in titles if not _CONTENTS_HEAD.match(t)) + ".",
                          max_words)
    # PDF/Markdown line breaks → spaces, paragraphs kept
    prose = "\n\n".join(" ".join(p.split()) for p in re.split(r"\n[ \t]*\n", text) if p.strip())
    sentences = [" ".join(s.split()) for s in split_sentences(prose)]
    good = [(i, s) for i, s in enumerate(sentences) if _informative(s)]
    if not good:
        labels = _row_labels(text)
        if labels:
            columns, corner = _columns(text)
            labels = [lb for lb in labels if lb != corner] or labels  # the header's first cell names no row
            return _cap_words("Covers: " + "; ".join(labels) + (f" (columns: {', '.join(columns)})" if columns else "")
                              + ".", max_words)
        return _cap_words(_flat(text), max_words)
    tokens = {i: tokenize(s) for i, s in good}  # tokens never span a space: the same as the joined text's
    tf = Counter(t for toks in tokens.values() for t in toks)

    def score(i: int) -> float:
        terms = sorted(set(tokens[i]))  # a fixed order: float sums must not depend on the hash seed
        return sum(math.log1p(tf[t]) for t in terms) / math.sqrt(len(terms) + 1)

    chosen = [good[0]]
    words = len(good[0][1].split())
    for i, s in sorted(good[1:], key=lambda item: score(item[0]), reverse=True):
        n = len(s.split())
        if words + n > max_words:
            continue
        chosen.append((i, s))
        words += n
    summary = " ".join(s for _, s in sorted(chosen))
    if words < max_words // 2:  # mostly a table: name its rows too
        labels = [lb for lb in _row_labels(text) if lb not in summary]
        if labels:
            summary += " Covers: " + "; ".join(labels) + "."
    return _cap_words(summary, max_words)


def _prefix_summary(own: str, child_titles: Sequence[str]) -> str:
    titles = list(child_titles[:_MAX_CHILD_TITLES])
    more = len(child_titles) - len(titles)
    if is_chinese(" ".join(titles)):
        part = "下设：" + "；".join(titles) + (f"等{len(child_titles)}节" if more > 0 else "") + "。"
        return f"{own}{part}" if own else part
    listing = "; ".join(titles) + (f"; and {more} more" if more > 0 else "")
    part = f"Subsections: {listing}." if listing else ""
    return f"{own} {part}".strip() if own else part


# --------------------------------------------------------------------------- LLM batches


def _batches(items: list[tuple[TreeNode, str]]) -> list[list[tuple[TreeNode, str]]]:
    out: list[list[tuple[TreeNode, str]]] = []
    size = 0
    for node, text in items:
        tokens = count_tokens(text)
        if not out or len(out[-1]) >= _BATCH_NODES or size + tokens > _BATCH_TOKENS:
            out.append([])
            size = 0
        out[-1].append((node, text))
        size += tokens
    return out


def _section_block(node: TreeNode, text: str) -> str:
    path = " > ".join(node.path).replace('"', "'")
    return f'<section node_id="{node.node_id}" path="{path}">\n{text}\n</section>'


def parse_summaries(reply: SummaryReply, expected: set[str]) -> dict[str, str]:
    """``{node_id: summary}`` for the expected nodes with a non-empty summary (others are left out)."""
    return {item.node_id: _cap_words(" ".join(item.summary.split()), 120) for item in reply.summaries
            if item.node_id in expected and item.summary.strip()}


async def _summarize_batch(
    batch: list[tuple[TreeNode, str]], chat: ChatModel, sem: asyncio.Semaphore
) -> dict[str, str]:
    prompt = summary_prompt("\n\n".join(_section_block(n, t) for n, t in batch))
    expected = {n.node_id for n, _ in batch}
    async with sem:
        try:
            reply = await ask(chat, NODE_SUMMARY, prompt)
        except LLMError as exc:
            log.warning("ingest.summary_batch_failed", nodes=len(batch), error=str(exc))
            return {}
    got = parse_summaries(reply, expected)
    if len(got) < len(expected):
        log.warning("ingest.summary_batch_incomplete", expected=len(expected), got=len(got))
    return got


# --------------------------------------------------------------------------- public API


async def summarize_tree(
    tree: DocumentTree,
    chat: ChatModel,
    settings: IngestSettings,
    *,
    page_texts: Mapping[int, str] | None = None,
) -> DocumentTree:
    """A copy of ``tree`` where every node has a summary (see module doc).

    Pass the PDF's ``page_texts`` (page number → text) so that nodes sharing a page are summarised
    from their own section only (``chunker.section_texts``), not from the whole shared pages.
    """
    children: dict[str, list[TreeNode]] = {}
    for node in tree.nodes:
        if node.parent_id is not None:
            children.setdefault(node.parent_id, []).append(node)
    texts = section_texts(tree, page_texts)
    base: dict[str, str] = {}
    long_nodes: list[tuple[TreeNode, str]] = []
    for node in tree.nodes:
        text = strip_title_lines(texts[node.node_id], node.title)
        if count_tokens_capped(text, settings.summary_token_threshold) < settings.summary_token_threshold:
            base[node.node_id] = _flat(text)
        else:
            long_nodes.append((node, text))
    calls = 0
    if long_nodes and not chat.offline:
        batches = _batches([(n, truncate_tokens(t, _NODE_TOKENS)) for n, t in long_nodes])
        sem = asyncio.Semaphore(_CONCURRENT_BATCHES)
        results = await asyncio.gather(*(_summarize_batch(b, chat, sem) for b in batches))
        calls = len(batches)
        for got in results:
            base.update(got)
    fallback = 0
    for node, text in long_nodes:
        if node.node_id not in base:
            base[node.node_id] = extractive_summary(text)
            fallback += 1
    nodes = []
    for node in tree.nodes:
        kids = children.get(node.node_id, [])
        summary = _prefix_summary(base[node.node_id], [k.title for k in kids]) if kids else base[node.node_id]
        nodes.append(msgspec.structs.replace(node, summary=summary))
    log.info("ingest.summaries_done", nodes=len(nodes), long=len(long_nodes), llm_calls=calls, extractive=fallback)
    return msgspec.structs.replace(tree, nodes=tuple(nodes), llm_calls=tree.llm_calls + calls)
