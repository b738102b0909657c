"""One scripted chat model for tests, keyed by LLM step (``kb.core.providers.steps.LLMStep``).

Every scripted reply is checked against its step's reply type — when the fake is built, or, for a callable,
when it answers — so a fake cannot drift from the schema the real model is asked to fill. A reply meant to
be off-schema says so, ``Malformed(data)``, and is checked *not* to fit. ``tests/fake_openai.py`` (the same
thing over real HTTP) routes requests by the step's JSON-schema name with these helpers.

Usage::

    chat = ScriptedChat({NODE_SUMMARY: [reply, Malformed({"wrong": []})], DOC_DESCRIPTION: {"description": "d"}},
                        default=LLMError("provider down"), text="An answer [1].")
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ingest import prompts as ingest_prompts
from kb.core.providers.chat import schema_name
from kb.core.providers.steps import LLMStep
from kb.core.types import ChatResult
from router import prompts as router_prompts


def _declared_steps() -> dict[str, LLMStep[Any]]:
    """Every ``LLMStep`` the ingest and query libraries declare, by purpose."""
    steps: dict[str, LLMStep[Any]] = {}
    for module in (ingest_prompts, router_prompts):
        for value in vars(module).values():
            for step in value.values() if isinstance(value, dict) else (value,):
                if isinstance(step, LLMStep):
                    steps[step.purpose] = step
    return steps


STEPS: dict[str, LLMStep[Any]] = _declared_steps()
"""The declared steps by purpose."""
BY_SCHEMA_NAME: dict[str, LLMStep[Any]] = {schema_name(p): s for p, s in STEPS.items()}
"""The declared steps by the ``json_schema`` name their requests carry."""
TEXT_PURPOSES = frozenset({router_prompts.SYNTHESIS_PURPOSE})
"""The free-text steps (no reply type): the answer."""
assert len(BY_SCHEMA_NAME) == len(STEPS), "two steps share a schema name"


def step_of(key: LLMStep[Any] | str) -> LLMStep[Any]:
    """The declared step for a step or a purpose (an undeclared one is an error in the test)."""
    purpose = key.purpose if isinstance(key, LLMStep) else key
    assert purpose in STEPS, f"no LLM step {purpose!r} is declared (known: {sorted(STEPS)})"
    return STEPS[purpose]


def minimal_json(schema: dict[str, Any]) -> Any:
    """The smallest value valid for a JSON schema (what a terse model might answer)."""
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties", {})
        return {k: minimal_json(props.get(k, {})) for k in schema.get("required", [])}
    if t == "array":
        return []
    if t in {"number", "integer"}:
        return 0
    if t == "boolean":
        return False
    return schema.get("enum", [""])[0]


@dataclass(frozen=True)
class Malformed:
    """A reply that deliberately does not fit its step's reply type (checked: it must not fit)."""

    data: Any


def fits(step: LLMStep[Any], data: Any) -> bool:
    """Whether ``data`` is a reply of ``step``'s type, as ``kb.core.providers.steps.ask`` reads it."""
    try:
        msgspec.convert(data, step.reply, strict=False)
    except msgspec.ValidationError:
        return False
    return True


def checked(step: LLMStep[Any], reply: Any) -> Any:
    """The JSON ``reply`` stands for (data, or ``Malformed(data)``), after checking it against the step's type."""
    if isinstance(reply, Malformed):
        assert not fits(step, reply.data), \
            f"a Malformed reply for {step.purpose} fits {step.reply.__name__}: {reply.data!r}"
        return reply.data
    try:
        msgspec.convert(reply, step.reply, strict=False)
    except msgspec.ValidationError as exc:
        raise AssertionError(f"the reply scripted for {step.purpose} does not fit {step.reply.__name__} ({exc}): "
                             f"{reply!r}; wrap it in Malformed(...) if that is the point") from exc
    return reply


Reply = Any
"""Data, ``Malformed(data)``, an exception to raise, or a callable ``(prompt) -> one of those``."""


class ScriptedChat:
    """A ``ChatModel`` whose replies are scripted per LLM step.

    ``script`` maps a step (or its purpose) to one reply, given to every call, or to a list of replies, one per
    call in order; when a step has no reply (left), ``default`` answers — the same for every step, so data
    there must fit each step it reaches. A call with neither fails the test (``AssertionError``), as does a
    call whose schema or system prompt is not the declared step's. ``text`` answers the free-text steps (the
    answer); unset, they fail the test too. ``calls`` records (purpose, prompt) of every call.
    """

    model_id = "scripted"
    offline = False

    def __init__(self, script: Mapping[LLMStep[Any] | str, Reply] | None = None, *, default: Reply = None,
                 text: str | BaseException | Callable[[str], str] | None = None) -> None:
        self._queues: dict[str, collections.deque[Reply]] = {}
        self._always: dict[str, Reply] = {}
        for key, value in (script or {}).items():
            step = step_of(key)
            if isinstance(value, list):
                self._queues[step.purpose] = collections.deque(_precheck(step, v) for v in value)
            else:
                self._always[step.purpose] = _precheck(step, value)
        self.default = default
        self.text = text
        self.calls: list[tuple[str, str]] = []

    @classmethod
    def same_reply(cls, data: Any, **kw: Any) -> ScriptedChat:
        """``data`` to every step: a (valid) reply where it fits the step's type, a ``Malformed`` one elsewhere
        (what a model answering every prompt alike sends)."""
        return cls({s: data if fits(s, data) else Malformed(data) for s in STEPS.values()}, **kw)

    @property
    def prompts(self) -> list[str]:
        return [prompt for _, prompt in self.calls]

    @property
    def pending(self) -> int:
        """Listed replies not consumed yet."""
        return sum(len(q) for q in self._queues.values())

    async def complete_json(self, *, purpose: str, system: str, prompt: str, schema: dict[str, Any]) -> ChatResult:
        step = step_of(purpose)
        assert schema == step.schema, f"{purpose}: the schema sent is not the declared step's"
        assert system == step.system, f"{purpose}: the system prompt sent is not the declared step's"
        self.calls.append((purpose, prompt))
        queue = self._queues.get(purpose)
        if queue:
            reply = queue.popleft()
        elif purpose in self._always:
            reply = self._always[purpose]
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError(f"ScriptedChat: no reply scripted for {purpose}")
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(prompt)
        if isinstance(reply, BaseException):
            raise reply
        data = checked(step, reply)
        return ChatResult(text=json.dumps(data), data=data, model=self.model_id)

    async def complete_text(self, *, purpose: str, system: str, prompt: str) -> ChatResult:
        assert purpose in TEXT_PURPOSES, f"{purpose!r} is not a free-text step"
        self.calls.append((purpose, prompt))
        reply = self.text
        if reply is None:
            raise AssertionError(f"ScriptedChat: no text scripted for {purpose}")
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(prompt)
        if isinstance(reply, BaseException):
            raise reply
        return ChatResult(text=reply, model=self.model_id)


def _precheck(step: LLMStep[Any], reply: Reply) -> Reply:
    """Data and ``Malformed`` replies are checked when scripted; exceptions and callables pass."""
    if not callable(reply) and not isinstance(reply, BaseException):
        checked(step, reply)
    return reply
