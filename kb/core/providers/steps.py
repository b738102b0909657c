"""LLM steps as declared units: purpose, system prompt and reply type (a msgspec Struct) in one place; the
JSON schema sent to the model is generated from the reply type, and one ``ask()`` does the call, the
validation and one retry on a malformed reply; it raises ``LLMError`` otherwise, and each caller's offline
implementation answers (the trace says so). Usage is recorded by the chat model.

Prompts live with the library that owns the step (``router/prompts.py``); a prompt change is one place.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
import structlog

from kb.core.errors import LLMError
from kb.core.providers.base import ChatModel

log = structlog.get_logger("kb.core.providers.steps")

R = TypeVar("R")


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """The schema with ``$ref``s replaced by their definitions (local servers' grammar engines vary)."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in {"$defs", "title"}}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


class InvalidReply(LLMError):
    """The model answered, twice, with JSON that is not of the step's reply type."""


@functools.cache
def reply_schema(reply: type) -> dict[str, Any]:
    """The JSON schema of a reply type, self-contained."""
    schema = msgspec.json.schema(reply)
    return _inline(schema, schema.get("$defs", {}))


@dataclass(frozen=True)
class LLMStep(Generic[R]):
    """One declared LLM step. ``reply`` is a msgspec Struct; the schema comes from it."""

    purpose: str
    system: str
    reply: type[R]

    @property
    def schema(self) -> dict[str, Any]:
        return reply_schema(self.reply)


async def ask(chat: ChatModel, step: LLMStep[R], prompt: str) -> R:
    """Call the model for ``step`` and return its reply as the declared type.

    A reply that is not of that type is asked for once more, with the validation error in the prompt;
    still wrong (or any call failure), ``LLMError`` is raised — never a half-valid reply.
    """
    res = await chat.complete_json(purpose=step.purpose, system=step.system, prompt=prompt, schema=step.schema)
    try:
        return msgspec.convert(res.data, step.reply, strict=False)
    except msgspec.ValidationError as exc:
        log.warning("llm.reply_invalid", purpose=step.purpose, error=str(exc))
        retry = (f"{prompt}\n\nYour previous reply did not match the required JSON schema ({exc}). "
                 "Reply again with JSON that matches it exactly.")
        res = await chat.complete_json(purpose=step.purpose, system=step.system, prompt=retry, schema=step.schema)
        try:
            return msgspec.convert(res.data, step.reply, strict=False)
        except msgspec.ValidationError as again:
            raise InvalidReply(f"{step.purpose}: reply does not fit {step.reply.__name__}: {again}") from again
