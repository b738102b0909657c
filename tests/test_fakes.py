"""The test fakes keep to the declared LLM steps: a scripted reply that does not fit its step's reply type is
refused, and the fake OpenAI server tells steps apart by the schema name the real client sends."""

from __future__ import annotations

import pytest

from ingest.prompts import LOCATE, NODE_SUMMARY
from kb.core.errors import LLMError
from kb.core.providers.chat import OpenAIChatModel
from kb.core.providers.steps import ask
from kb.core.settings import LLMSettings
from tests.fake_openai import FakeOpenAI, FakeReply
from tests.fakes import STEPS, Malformed, ScriptedChat, fits, minimal_json


def test_every_declared_step_is_known_and_its_smallest_reply_fits() -> None:
    assert {"tree.toc_detect", "tree.fix", "node_summary", "route.metadata", "query.sufficiency"} <= set(STEPS)
    for step in STEPS.values():
        assert fits(step, minimal_json(step.schema)), step.purpose


def test_a_reply_that_drifted_from_its_step_is_refused() -> None:
    with pytest.raises(AssertionError, match="does not fit SummaryReply"):
        ScriptedChat({NODE_SUMMARY: {"summary": "the field is called summaries"}})
    with pytest.raises(AssertionError, match="Malformed reply for node_summary fits"):
        ScriptedChat({NODE_SUMMARY: Malformed({"summaries": []})})
    with pytest.raises(AssertionError, match="no LLM step 'tree.summary'"):
        ScriptedChat({"tree.summary": {"summaries": []}})


async def test_a_callable_reply_is_checked_when_it_answers() -> None:
    chat = ScriptedChat({NODE_SUMMARY: lambda _prompt: {"summaries": "one"}})
    with pytest.raises(AssertionError, match="does not fit SummaryReply"):
        await ask(chat, NODE_SUMMARY, "Summarise.")


async def test_fake_server_routes_by_the_schema_name_not_the_prompt(fake_openai: FakeOpenAI) -> None:
    """Two steps with the same system prompt and reply type, asked the same prompt, get their own replies."""
    fake_openai.route({LOCATE["tree.toc_index"]: FakeReply.json({"entries": [{"index": 0, "physical_index": 3}]}),
                       LOCATE["tree.fix"]: FakeReply.json({"entries": [{"index": 0, "physical_index": 7}]})},
                      minimal=False)
    chat = OpenAIChatModel(LLMSettings(base_url=fake_openai.base_url, model="fake-model", api_key="k", timeout_s=5,
                                       max_retries=0, concurrency=1, cache=False))
    index = await ask(chat, LOCATE["tree.toc_index"], "Where does 0. Revenue start?")
    fix = await ask(chat, LOCATE["tree.fix"], "Where does 0. Revenue start?")
    assert (index.entries[0].physical_index, fix.entries[0].physical_index) == (3, 7)
    assert [r.step for r in fake_openai.requests] == [LOCATE["tree.toc_index"], LOCATE["tree.fix"]]
    assert [r.response_format["json_schema"]["name"] for r in fake_openai.requests] == ["tree_toc_index", "tree_fix"]


async def test_fake_server_refuses_a_json_reply_that_does_not_fit(fake_openai: FakeOpenAI) -> None:
    fake_openai.route({NODE_SUMMARY: FakeReply.json({"summary": "wrong field"})}, minimal=False)
    chat = OpenAIChatModel(LLMSettings(base_url=fake_openai.base_url, model="fake-model", api_key="k", timeout_s=5,
                                       max_retries=0, concurrency=1, cache=False))
    with pytest.raises(LLMError, match="500"):  # the fake had no valid reply to send
        await ask(chat, NODE_SUMMARY, "Summarise.")
    assert len(fake_openai.errors) == 1 and "does not fit SummaryReply" in fake_openai.errors[0]
    fake_openai.errors.clear()  # seen; the fixture fails a test that leaves any
    fake_openai.unscripted = 0
