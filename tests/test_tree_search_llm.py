"""LLM tree search over the fake OpenAI server: the whole-tree prompt and the top-down descent used when a
tree is too large for one prompt; reply ids are validated the same way in both."""

from __future__ import annotations

import pytest

from kb.core.providers.chat import OpenAIChatModel
from kb.core.settings import LLMSettings, RetrievalSettings
from kb.core.types import TreeNode
from router.prompts import TREE_SEARCH
from router.tree_search import LoadedTree, TreeSearcher
from tests.fake_openai import FakeOpenAI, FakeReply, fake_openai_fixture  # noqa: F401


def _node(nid: str, parent: str | None, level: int, title: str, leaf: bool, start: int, end: int,
          path: tuple[str, ...]) -> TreeNode:
    return TreeNode(node_id=nid, parent_id=parent, ordinal=int(nid), level=level, title=title, start=start, end=end,
                    text="", summary=f"{title} summary", path=path, is_leaf=leaf)


TREE = LoadedTree(doc_id=7, doc_name="r.pdf", sims={}, with_text=frozenset({"0003"}), nodes=(
    _node("0001", None, 1, "Part I", False, 1, 10, ("Part I",)),
    _node("0002", "0001", 2, "Revenue", True, 1, 4, ("Part I", "Revenue")),
    _node("0003", "0001", 2, "Statements", False, 5, 10, ("Part I", "Statements")),
    _node("0004", "0003", 3, "Cash flows", True, 8, 10, ("Part I", "Statements", "Cash flows")),
    _node("0005", None, 1, "Part II", True, 11, 12, ("Part II",)),
))


def _searcher(fake: FakeOpenAI, prompt_tokens: int) -> TreeSearcher:
    chat = OpenAIChatModel(LLMSettings(base_url=fake.base_url, model="fake-model", api_key="k", timeout_s=5.0,
                                       max_retries=0, concurrency=1, cache=False), None)
    return TreeSearcher(None, chat, RetrievalSettings(max_nodes_per_doc=3, tree_prompt_tokens=prompt_tokens))  # nearest (and its pool): only the offline path uses it


@pytest.mark.asyncio
async def test_whole_tree_prompt_keeps_selectable_nodes_and_drops_others(fake_openai: FakeOpenAI) -> None:
    fake_openai.route({TREE_SEARCH: [FakeReply.json({"thinking": "t", "results": [
        {"node_id": "0002", "sub_query": "revenue 2023"}, {"node_id": " 0003 "},  # own text: selectable
        {"node_id": "0001"}, {"node_id": "9999"}, {"node_id": "0002"}]})]}, minimal=False)  # a parent, unknown, repeated
    res = await _searcher(fake_openai, 10_000).search(TREE, "What was revenue?", None)
    assert res.mode == "llm"
    assert [(p.node_id, p.sub_query) for p in res.picks] == [("0002", "revenue 2023"), ("0003", "What was revenue?")]
    assert res.dropped_ids == ("0001", "9999")
    prompt = fake_openai.requests[0].json["messages"][-1]["content"]
    assert "[0003] Statements (own text)" in prompt and "[0002] Revenue (leaf)" in prompt


@pytest.mark.asyncio
async def test_top_down_descends_through_chosen_parents(fake_openai: FakeOpenAI) -> None:
    fake_openai.route({TREE_SEARCH: [
        FakeReply.json({"thinking": "a", "results": [{"node_id": "0001"}, {"node_id": "0004"}]}),  # 0004: not shown
        FakeReply.json({"thinking": "b", "results": [{"node_id": "0003"}, {"node_id": "0002", "sub_query": "rev"}]}),
        FakeReply.json({"thinking": "c", "results": [{"node_id": "0004", "sub_query": "capex"}]}),
    ]}, minimal=False)
    res = await _searcher(fake_openai, 1).search(TREE, "What was revenue?", None)
    assert res.mode == "llm_topdown" and res.llm_calls == 3
    assert [(p.node_id, p.sub_query) for p in res.picks] == [("0002", "rev"), ("0004", "capex")]
    assert res.dropped_ids == ("0004",)
    first = fake_openai.requests[0].json["messages"][-1]["content"]
    assert "[0001] Part I (expandable)" in first and "[0002]" not in first  # one level at a time
