"""OpenAIChatModel against a real (fake) OpenAI-compatible HTTP server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import pytest

from kb.core.errors import LLMError
from kb.core.providers.base import ChatModel
from kb.core.providers.chat import CountingChat, OpenAIChatModel, prompt_hash
from kb.core.settings import LLMSettings
from kb.core.types import ChatResult, LLMUsage
from tests.fake_openai import FakeOpenAI, FakeReply, fake_openai_fixture  # noqa: F401

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "node_ids": {"type": "array", "items": {"type": "string"}}},
    "required": ["answer", "node_ids"],
}
REPLY = {"answer": "Revenue was $412.6 million", "node_ids": ["0003", "0007"]}


class MemoryStore:
    """In-memory ``LLMStore``: a cache dict and a list of recorded calls."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, str], ChatResult] = {}
        self.calls: list[tuple[str, str, str, ChatResult, bool]] = []

    async def get(self, model: str, prompt_hash: str) -> ChatResult | None:
        return self.cache.get((model, prompt_hash))

    async def put(self, model: str, prompt_hash: str, result: ChatResult) -> None:
        self.cache[(model, prompt_hash)] = result

    async def record(self, purpose: str, model: str, prompt_hash: str, result: ChatResult, ok: bool) -> None:
        self.calls.append((purpose, model, prompt_hash, result, ok))


def make_model(fake: FakeOpenAI, store: MemoryStore | None = None, *, base_url: str | None = None,
               timeout_s: float = 2.0, max_retries: int = 1, concurrency: int = 4,
               cache: bool = False) -> OpenAIChatModel:
    settings = LLMSettings(
        base_url=base_url or fake.base_url, model="fake-model", api_key="k",
        timeout_s=timeout_s, max_retries=max_retries, concurrency=concurrency, cache=cache,
    )
    return OpenAIChatModel(settings, store)


async def ask(model: ChatModel, prompt: str = "What was revenue?", purpose: str = "answer") -> ChatResult:
    return await model.complete_json(purpose=purpose, system="You are precise.", prompt=prompt, schema=SCHEMA)


async def test_json_schema_reply_is_parsed_and_usage_recorded(fake_openai: FakeOpenAI) -> None:
    store = MemoryStore()
    fake_openai.script(FakeReply.json(REPLY, prompt_tokens=321, completion_tokens=17))
    result = await ask(make_model(fake_openai, store), prompt="Q: revenue 2022?", purpose="locate")

    assert result.data == REPLY
    assert result.model == "fake-model"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.cached) == (321, 17, False)
    assert result.duration_ms > 0

    assert fake_openai.call_count == 1
    req = fake_openai.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer k"
    assert req.json["model"] == "fake-model"
    assert req.json["temperature"] == 0
    assert req.messages == [
        {"role": "system", "content": "You are precise."},
        {"role": "user", "content": "Q: revenue 2022?"},
    ]
    assert req.response_format is not None
    assert req.response_format["type"] == "json_schema"
    assert req.response_format["json_schema"]["schema"] == SCHEMA

    [(purpose, model_id, phash, recorded, ok)] = store.calls
    assert (purpose, model_id, ok) == ("locate", "fake-model", True)
    assert phash == prompt_hash("fake-model", "You are precise.", "Q: revenue 2022?", SCHEMA)
    assert recorded.usage.prompt_tokens == 321 and not recorded.usage.cached


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"answer": "Revenue was $412.6 million", "node_ids": ["0003", "0007"]}\n```',
        'Sure! Here is the result:\n{"answer": "Revenue was $412.6 million", "node_ids": ["0003", "0007"]}\n'
        "Let me know if you need more.",
        '```\n{"answer": "Revenue was $412.6 million", "node_ids": ["0003", "0007",],}\n```',
    ],
    ids=["json-fence", "prose-around", "bare-fence-trailing-commas"],
)
async def test_wrapped_json_is_parsed_without_retry(fake_openai: FakeOpenAI, content: str) -> None:
    fake_openai.script(FakeReply.text(content))
    result = await ask(make_model(fake_openai))
    assert result.data == REPLY
    assert result.text == content
    assert fake_openai.call_count == 1


async def test_malformed_json_is_retried_then_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.text('{"answer": "Revenue was'), FakeReply.json(REPLY))
    result = await ask(make_model(fake_openai, max_retries=1))
    assert result.data == REPLY
    assert fake_openai.call_count == 2


async def test_malformed_json_every_time_raises_llm_error(fake_openai: FakeOpenAI) -> None:
    store = MemoryStore()
    fake_openai.script(responder=lambda _req: FakeReply.text("I cannot answer in JSON, sorry."))
    with pytest.raises(LLMError, match="not JSON"):
        await ask(make_model(fake_openai, store, max_retries=1, cache=True))
    assert fake_openai.call_count == 2
    assert [ok for *_, ok in store.calls] == [False]
    assert store.cache == {}  # failures are never cached


async def test_rate_limit_then_success(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.rate_limited(retry_after=0), FakeReply.json(REPLY, prompt_tokens=40))
    result = await ask(make_model(fake_openai, max_retries=2))
    assert result.data == REPLY
    assert result.usage.prompt_tokens == 40  # usage of the successful attempt
    assert fake_openai.call_count == 2
    assert fake_openai.requests[0].json == fake_openai.requests[1].json


async def test_server_errors_exhaust_retries(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(responder=lambda _req: FakeReply.server_error(500))
    with pytest.raises(LLMError, match="failed after 3 attempts: InternalServerError"):
        await ask(make_model(fake_openai, max_retries=2))
    assert fake_openai.call_count == 3


async def test_timeout_is_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.slow(2.0, content='{"answer": "late", "node_ids": []}'), FakeReply.json(REPLY))
    started = time.perf_counter()
    result = await ask(make_model(fake_openai, timeout_s=0.3, max_retries=1))
    assert result.data == REPLY
    assert fake_openai.call_count == 2
    assert time.perf_counter() - started < 1.5  # the slow reply was not awaited


async def test_timeout_every_time_raises_llm_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(responder=lambda _req: FakeReply.slow(4.0))
    with pytest.raises(LLMError, match="APITimeoutError"):  # a timeout long enough for the retry to arrive on a
        await ask(make_model(fake_openai, timeout_s=1.0, max_retries=1))  # busy machine (0.3 s lost it in CI)
    assert fake_openai.call_count == 2


async def test_json_schema_rejected_downgrades_to_json_object(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.response_format_unsupported(), FakeReply.json(REPLY), FakeReply.json(REPLY))
    model = make_model(fake_openai, max_retries=1)
    assert (await ask(model)).data == REPLY
    formats = [r.response_format for r in fake_openai.requests]
    assert formats[0] is not None and formats[0]["type"] == "json_schema"
    assert formats[1] == {"type": "json_object"}
    # the downgrade sticks for later calls of the same model: no second 400
    assert (await ask(model, prompt="another question")).data == REPLY
    assert fake_openai.requests[2].response_format == {"type": "json_object"}
    assert fake_openai.call_count == 3


async def test_downgrade_works_without_retries(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.response_format_unsupported(), FakeReply.json(REPLY))
    assert (await ask(make_model(fake_openai, max_retries=0))).data == REPLY


async def test_other_bad_request_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.error(400, "This model's maximum context length is 8192 tokens.",
                                       error_type="invalid_request_error", param="messages"))
    with pytest.raises(LLMError, match="request rejected"):
        await ask(make_model(fake_openai, max_retries=3))
    assert fake_openai.call_count == 1


async def test_cache_serves_identical_call_without_http(fake_openai: FakeOpenAI) -> None:
    store = MemoryStore()
    fake_openai.script(FakeReply.json(REPLY, prompt_tokens=99, completion_tokens=11),
                       FakeReply.json({"answer": "other", "node_ids": []}))
    model = make_model(fake_openai, store, cache=True)

    first = await ask(model)
    second = await ask(model)
    assert fake_openai.call_count == 1
    assert second.data == first.data == REPLY
    assert second.usage.cached and not first.usage.cached
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (99, 11)
    assert [(r.usage.cached, ok) for *_, r, ok in store.calls] == [(False, True), (True, True)]

    # a different prompt is a cache miss
    third = await ask(model, prompt="What was net income?")
    assert third.data == {"answer": "other", "node_ids": []}
    assert fake_openai.call_count == 2
    assert len(store.cache) == 2


async def test_cache_disabled_still_records_usage(fake_openai: FakeOpenAI) -> None:
    store = MemoryStore()
    fake_openai.script(FakeReply.json(REPLY), FakeReply.json(REPLY))
    model = make_model(fake_openai, store, cache=False)
    await ask(model)
    await ask(model)
    assert fake_openai.call_count == 2
    assert store.cache == {}
    assert [(r.usage.cached, ok) for *_, r, ok in store.calls] == [(False, True), (False, True)]


async def test_complete_text_sends_no_response_format(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.text("Revenue rose 14% [1]."))
    model = make_model(fake_openai, base_url=fake_openai.base_url.removesuffix("/v1"))
    result = await model.complete_text(purpose="synthesis", system="s", prompt="p")
    assert result.text == "Revenue rose 14% [1]."
    assert result.data is None
    assert fake_openai.requests[0].path == "/chat/completions"
    assert "response_format" not in fake_openai.requests[0].json


async def test_concurrency_limit(fake_openai: FakeOpenAI) -> None:
    in_flight, peak = 0, 0
    lock = threading.Lock()

    def responder(_req: dict[str, Any]) -> FakeReply:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.1)
        with lock:
            in_flight -= 1
        return FakeReply.json(REPLY)

    fake_openai.script(responder=responder)
    model = make_model(fake_openai, concurrency=2)
    results = await asyncio.gather(*(ask(model, prompt=f"q{i}") for i in range(5)))
    assert all(r.data == REPLY for r in results)
    assert fake_openai.call_count == 5
    assert peak == 2


async def test_counting_chat_totals_calls_tokens_and_failures(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        FakeReply.json(REPLY, prompt_tokens=100, completion_tokens=10),
        FakeReply.text("not json"),
        FakeReply.text("Revenue rose.", prompt_tokens=7, completion_tokens=3),
    )
    counting = CountingChat(make_model(fake_openai, MemoryStore(), max_retries=0, cache=True))
    await ask(counting)
    await ask(counting)  # identical: served from cache
    with pytest.raises(LLMError):
        await ask(counting, prompt="other")
    await counting.complete_text(purpose="synthesis", system="s", prompt="p")
    assert counting.usage() == LLMUsage(calls=4, failed=1, prompt_tokens=207, completion_tokens=23, cached=1)
    assert fake_openai.call_count == 3


def test_fake_server_speaks_openai_errors(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(FakeReply.rate_limited(retry_after=3))
    resp = httpx.post(f"{fake_openai.base_url}/chat/completions", json={"model": "m", "messages": []})
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "3"
    assert resp.json()["error"]["type"] == "rate_limit_exceeded"
    assert httpx.post(f"{fake_openai.base_url}/embeddings", json={}).status_code == 404
    assert fake_openai.call_count == 1 and len(fake_openai.requests) == 2


async def test_truncated_reply_is_asked_again_with_a_larger_limit(fake_openai: FakeOpenAI) -> None:
    store = MemoryStore()
    fake_openai.script(FakeReply.text('{"answer": "Revenue was $41', finish_reason="length"), FakeReply.json(REPLY))
    res = await ask(make_model(fake_openai, store, cache=True))
    assert res.data == REPLY
    first, second = (r.json for r in fake_openai.requests)
    assert "max_tokens" not in first and second["max_tokens"] == 8192


async def test_twice_truncated_reply_is_never_parsed_or_cached(fake_openai: FakeOpenAI) -> None:
    store = MemoryStore()
    cut = FakeReply.text('{"answer": "Revenue", "node_ids": []}', finish_reason="length")  # valid JSON, yet cut
    fake_openai.script(cut, cut)
    with pytest.raises(LLMError, match="cut off"):
        await ask(make_model(fake_openai, store, cache=True, max_retries=3))
    assert fake_openai.call_count == 2  # no blind retries of the same request
    assert not store.cache and [ok for *_, ok in store.calls] == [False]


async def test_declared_step_schema_retry_and_failure(fake_openai: FakeOpenAI) -> None:
    """A step's schema comes from its reply type; a reply of the wrong shape is asked again with the error,
    then fails — never returned half-valid."""
    from kb.core.providers.steps import ask
    from router.prompts import PLAN, PlanReply

    schema = PLAN.schema
    assert "$ref" not in json.dumps(schema) and schema["required"] == ["scope", "sub_questions"]
    assert schema["properties"]["scope"]["enum"] == ["list", "multi", "single"]
    good = {"scope": "multi", "sub_questions": [{"doc_id": 3, "sub_question": "B revenue"}]}
    fake_openai.script(FakeReply.json({"scope": "several", "sub_questions": []}), FakeReply.json(good))
    reply = await ask(make_model(fake_openai), PLAN, "Plan this.")
    assert isinstance(reply, PlanReply) and reply.sub_questions[0].doc_id == 3
    first, second = (r.messages[-1]["content"] for r in fake_openai.requests)
    assert first == "Plan this." and "did not match the required JSON schema" in second
    assert fake_openai.requests[0].response_format["json_schema"]["schema"] == schema

    fake_openai.script(FakeReply.json({"scope": "multi"}), FakeReply.json({"sub_questions": "x"}))
    with pytest.raises(LLMError, match="does not fit PlanReply"):
        await ask(make_model(fake_openai), PLAN, "Plan again.")
