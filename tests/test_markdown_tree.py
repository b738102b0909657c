"""Markdown/text trees, text decoding and node summaries (offline and with a scripted chat model)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ingest.markdown_tree import build_markdown_tree, build_text_tree, decode_text_file
from ingest.prompts import NODE_SUMMARY
from ingest.summaries import extractive_summary, summarize_tree
from kb.core.errors import IngestError, LLMError
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from kb.core.text import count_tokens
from kb.core.types import DocumentTree
from tests.fakes import Malformed, ScriptedChat

PROSE = (
    "The committee reviewed the quarterly liquidity position and approved the revised funding plan. "
    "Revenue growth was driven by services, while hardware demand softened in several regions. "
)

DOC = f"""---
title: "Operations Guide"
tags: [ops, guide]
---
Intro text before any heading. {PROSE}

# Guide

Guide introduction. {PROSE}

```bash
# this is a comment, not a heading
echo hi
```

~~~
## also not a heading
~~~

## Install

{PROSE * 2}

## Tiny
ok

### Deeper
fine

# Appendix

{PROSE}
"""


def by_title(tree: DocumentTree) -> dict[str, Any]:
    return {n.title: n for n in tree.nodes}


def test_markdown_headings_ignore_code_fences_and_keep_line_ranges() -> None:
    tree = build_markdown_tree(DOC, IngestSettings(), title="guide")
    assert tree.source_mode == "markdown" and tree.unit == "line"
    titles = [n.title for n in tree.nodes]
    assert titles == ["Preface", "Guide", "Install", "Tiny", "Appendix"]  # "Deeper" thinned into "Tiny"
    assert not any("comment" in t or "not a heading" in t for t in titles)
    lines = DOC.split("\n")
    nodes = by_title(tree)
    for title in ("Guide", "Install", "Tiny", "Appendix"):
        node = nodes[title]
        assert node.unit == "line"
        # 1-based line numbers of the original file (front matter counted)
        assert lines[node.start - 1].lstrip("#").strip() == title
    assert nodes["Preface"].start == 5 and lines[4].startswith("Intro text")
    guide = nodes["Guide"]
    assert guide.end == nodes["Tiny"].end  # a parent's range covers its subtree
    assert "echo hi" in guide.text and "## Install" not in guide.text  # own text only
    assert lines[nodes["Appendix"].end - 1].strip().endswith("regions.")
    assert tree.page_count == len(DOC.rstrip("\n").split("\n"))


def test_markdown_ids_parents_paths_are_depth_first() -> None:
    tree = build_markdown_tree(DOC, IngestSettings(), title="guide")
    assert [n.node_id for n in tree.nodes] == ["0000", "0001", "0002", "0003", "0004"]
    nodes = by_title(tree)
    assert nodes["Install"].parent_id == nodes["Guide"].node_id
    assert nodes["Install"].path == ("Guide", "Install") and nodes["Install"].level == 2
    assert nodes["Preface"].parent_id is None and nodes["Appendix"].parent_id is None
    assert [n.is_leaf for n in tree.nodes] == [True, False, True, True, True]
    assert all(n.summary == "" for n in tree.nodes)


def test_thinning_merges_small_subtrees_only() -> None:
    tree = build_markdown_tree(DOC, IngestSettings(min_node_token=40), title="guide")
    tiny = by_title(tree)["Tiny"]
    assert tiny.is_leaf and "### Deeper" in tiny.text and "fine" in tiny.text
    # without thinning the small child survives
    unthinned = build_markdown_tree(DOC, IngestSettings(min_node_token=0), title="guide")
    assert "Deeper" in by_title(unthinned)
    assert by_title(unthinned)["Deeper"].parent_id == by_title(unthinned)["Tiny"].node_id
    # a huge threshold collapses every subtree into its top node
    collapsed = build_markdown_tree(DOC, IngestSettings(min_node_token=10_000), title="guide")
    assert [n.title for n in collapsed.nodes] == ["Preface", "Guide", "Appendix"]
    assert "## Install" in by_title(collapsed)["Guide"].text


def test_front_matter_removed_and_no_heading_document_is_one_node() -> None:
    tree = build_markdown_tree("---\na: 1\n---\nJust a paragraph of text.\nSecond line.\n", IngestSettings(),
                               title="notes")
    assert len(tree.nodes) == 1
    node = tree.nodes[0]
    assert node.title == "notes" and node.start == 4 and node.end == 5
    assert "a: 1" not in node.text and tree.warnings


def test_large_leaf_is_split_into_parts_by_paragraphs() -> None:
    paragraphs = "\n\n".join(f"Paragraph {i}. {PROSE}" for i in range(12))
    text = f"# Big\n\n{paragraphs}\n"
    tree = build_markdown_tree(text, IngestSettings(max_token_num_each_node=120, min_node_token=0), title="t")
    big = tree.nodes[0]
    parts = [n for n in tree.nodes if n.parent_id == big.node_id]
    assert not big.is_leaf and len(parts) >= 3
    assert all(p.title.startswith("Big (part ") and count_tokens(p.text) <= 120 for p in parts)
    assert "".join(p.text for p in parts).count("Paragraph") == 12
    assert parts[0].start == 3 and parts[-1].end == big.end
    assert all(a.end < b.start for a, b in zip(parts, parts[1:], strict=False))


def test_text_tree_detects_heading_like_lines() -> None:
    body = PROSE * 2
    text = (
        f"ANNUAL OPERATIONS REVIEW\n\n{body}\n\n1. Introduction\n\n{body}\n\n1.1 Scope\n\n{body}\n\n"
        f"2. Results\n\n{body}\n\nKey Risks Ahead\n\n{body}\n"
    )
    tree = build_text_tree(text, IngestSettings(min_node_token=0), title="review")
    assert tree.source_mode == "text" and tree.nodes[0].title == "review" and tree.nodes[0].parent_id is None
    nodes = by_title(tree)
    assert {"ANNUAL OPERATIONS REVIEW", "1. Introduction", "1.1 Scope", "2. Results", "Key Risks Ahead"} <= set(nodes)
    assert nodes["1.1 Scope"].parent_id == nodes["1. Introduction"].node_id
    assert nodes["1. Introduction"].parent_id == nodes["ANNUAL OPERATIONS REVIEW"].node_id
    lines = text.split("\n")
    assert lines[nodes["2. Results"].start - 1] == "2. Results"


def test_text_without_headings_is_split_into_paragraph_windows() -> None:
    text = "\n\n".join(f"this paragraph number {i} talks about things. {PROSE}" for i in range(120))
    tree = build_text_tree(text, IngestSettings(), title="notes")
    root, parts = tree.nodes[0], tree.nodes[1:]
    assert root.title == "notes" and len(parts) >= 2
    assert all(p.title.startswith("Part ") and p.parent_id == root.node_id for p in parts)
    assert parts[0].start == 1 and parts[-1].end == len(text.split("\n"))
    small = build_text_tree("one short line of text here", IngestSettings(), title="s")
    assert len(small.nodes) == 1 and small.nodes[0].is_leaf


def test_decode_text_file() -> None:
    assert decode_text_file("\ufeffhéllo\r\nworld".encode()) == ("héllo\nworld", [])
    text, warnings = decode_text_file(b"caf\xe9 au lait and more plain ascii text")
    assert "\ufffd" in text and warnings == ["not valid UTF-8; decoded with replacement characters"]
    assert decode_text_file("hi there".encode("utf-16"))[0] == "hi there"
    with pytest.raises(IngestError, match="binary"):
        decode_text_file(b"%PDF\x00\x01\x02binary")
    with pytest.raises(IngestError, match="binary"):
        decode_text_file(bytes(range(128, 256)) * 20)
    for empty in (b"", b"  \n\t\n", "\ufeff".encode()):
        with pytest.raises(IngestError, match="empty file"):
            decode_text_file(empty)


# --------------------------------------------------------------------------- summaries

LONG_SECTION = "\n\n".join(
    [
        "Liquidity and capital resources remained strong during the quarter for the company.",
        "The company generated operating cash flow of 26 billion dollars and returned capital to shareholders.",
        "Net sales\n$\n81,797\n$\n82,959\nCost of sales\n45,384\n47,074\nGross margin\n36,413\n35,885",
        "Management believes existing cash balances and commercial paper access will satisfy liquidity needs.",
        "Share repurchases continued under the program authorised by the board, reducing share count materially.",
    ]
    * 6
)


def summary_doc() -> str:
    return f"# Report\n\nShort intro for the report.\n\n## Liquidity\n\n{LONG_SECTION}\n\n## Outlook\n\nBrief outlook.\n"


async def test_offline_summaries_short_long_and_prefix() -> None:
    tree = build_markdown_tree(summary_doc(), IngestSettings(min_node_token=0), title="r")
    out = await summarize_tree(tree, OfflineChatModel(), IngestSettings())
    nodes = by_title(out)
    assert nodes["Outlook"].summary == "Brief outlook."  # short text is its own summary
    liquidity = nodes["Liquidity"].summary
    assert 5 <= len(liquidity.split()) <= 61 and len(liquidity) < len(LONG_SECTION) / 5
    assert "81,797" not in liquidity and "Liquidity and capital resources" in liquidity
    assert nodes["Report"].summary == "Short intro for the report. Subsections: Liquidity; Outlook."
    assert out.llm_calls == 0


def test_extractive_summary_of_a_pure_table_lists_row_labels() -> None:
    table = "\n".join(f"{label}\n$\n{i * 1000:,}\n{i * 900:,}" for i, label in
                      enumerate(["Net sales", "Cost of sales", "Gross margin", "Operating income"], 1))
    summary = extractive_summary("\n".join([table] * 20))
    assert summary.startswith("Covers: Net sales; Cost of sales") and not re.search(r"\d", summary)
    # rows printed on one line (PDF text, Markdown tables) are named by their labels, not flattened figures
    one_line = "Revenue $ 412.6 348.5 18.4%\nGross profit 170.0 148.1 14.8%\nOperating loss (14.6) (27.9) n/m"
    assert extractive_summary(one_line) == "Covers: Revenue; Gross profit; Operating loss."
    pipe = "| Item | 2022 | 2021 |\n|---|---|---|\n| Revenue | 412.6 | 348.5 |\n| Net loss | (23.8) | (31.5) |"
    assert extractive_summary(pipe) == "Covers: Revenue; Net loss (columns: 2022, 2021)."  # with its columns
    contents = ("Table of Contents\nItem 1. Business .................... 4\nItem 1A. Risk Factors ........... 12\n"
                "Item 2. Properties . . . . . . . . 25\nItem 7. Management's Discussion and Analysis …… 31")
    assert extractive_summary(contents) == ("Contents: Item 1. Business; Item 1A. Risk Factors; Item 2. Properties; "
                                            "Item 7. Management's Discussion and Analysis.")  # no leaders, no pages


def _many_sections(n: int) -> str:
    return "# Doc\n\n" + "\n\n".join(f"## Section {i}\n\n{LONG_SECTION}" for i in range(n)) + "\n"


def _answer_all(prompt: str) -> dict[str, Any]:
    ids = re.findall(r'node_id="(\d{4})"', prompt)
    return {"summaries": [{"node_id": i, "summary": f"LLM summary of {i}."} for i in ids]}


async def test_llm_summaries_are_batched() -> None:
    tree = build_markdown_tree(_many_sections(5), IngestSettings(), title="d")
    chat = ScriptedChat({NODE_SUMMARY: [_answer_all]})
    out = await summarize_tree(tree, chat, IngestSettings())
    assert len(chat.prompts) == 1 and out.llm_calls == 1  # five long sections, one call
    leaves = [n for n in out.nodes if n.is_leaf]
    assert [n.summary for n in leaves] == [f"LLM summary of {n.node_id}." for n in leaves]
    assert out.nodes[0].summary.startswith("Subsections: Section 0; Section 1")


async def test_llm_malformed_or_failed_replies_fall_back_to_offline() -> None:
    tree = build_markdown_tree(_many_sections(3), IngestSettings(), title="d")
    offline = await summarize_tree(tree, OfflineChatModel(), IngestSettings())
    for reply in (Malformed({"wrong": []}), Malformed({"summaries": "nope"}), LLMError("boom")):
        malformed = isinstance(reply, Malformed)
        chat = ScriptedChat({NODE_SUMMARY: [reply, reply] if malformed else [reply]})
        out = await summarize_tree(tree, chat, IngestSettings())
        assert [n.summary for n in out.nodes] == [n.summary for n in offline.nodes]
        assert out.llm_calls == 1
        # a malformed reply is asked for once more, with the validation error; a failed call is not
        assert len(chat.prompts) == (2 if malformed else 1) and not chat.pending
        if malformed:
            assert "did not match the required JSON schema" in chat.prompts[1]
    # a partial reply keeps the valid entries and fills the rest offline
    first_leaf = tree.nodes[1].node_id
    partial = {"summaries": [{"node_id": first_leaf, "summary": "Only one."}, {"node_id": "9999", "summary": "x"}]}
    out = await summarize_tree(tree, ScriptedChat({NODE_SUMMARY: [partial]}), IngestSettings())
    assert out.nodes[1].summary == "Only one."
    assert out.nodes[2].summary == offline.nodes[2].summary
