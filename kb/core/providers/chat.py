"""Chat models: the offline provider (default) and any OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from kb.core.errors import LLMError
from kb.core.providers.jsonparse import parse_json_reply
from kb.core.settings import LLMSettings
from kb.core.types import ChatResult, ChatUsage, LLMUsage

if TYPE_CHECKING:
    from kb.core.providers.base import ChatModel

log = structlog.get_logger("kb.llm")


class LLMStore(Protocol):
    """Where responses are cached and usage recorded (Postgres in production)."""

    async def get(self, model: str, prompt_hash: str) -> ChatResult | None: ...

    async def put(self, model: str, prompt_hash: str, result: ChatResult) -> None: ...

    async def record(self, purpose: str, model: str, prompt_hash: str, result: ChatResult, ok: bool) -> None: ...


class OfflineChatModel:
    """The default provider when no endpoint is configured.

    It answers no prompt: each pipeline step checks ``offline`` and runs its own
    deterministic implementation (embeddings, BM25, layout heuristics, extractive answers).
    """

    model_id = "offline"
    offline = True

    async def complete_json(self, *, purpose: str, system: str, prompt: str, schema: dict[str, Any]) -> ChatResult:
        raise LLMError(f"offline provider cannot run LLM step {purpose!r}")

    async def complete_text(self, *, purpose: str, system: str, prompt: str) -> ChatResult:
        raise LLMError(f"offline provider cannot run LLM step {purpose!r}")


def prompt_hash(model: str, system: str, prompt: str, schema: dict[str, Any] | None) -> str:
    payload = json.dumps([model, system, prompt, schema], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def schema_name(purpose: str) -> str:
    """The ``json_schema`` name a step's request carries: its purpose in the characters the OpenAI API allows
    (``tree.search`` → ``tree_search``), at most 64 of them."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", purpose)[:64] or "reply"


def _retryable() -> tuple[type[Exception], ...]:
    """The SDK's errors worth another attempt (``openai`` is imported by the OpenAI path only: 0.4 s a process)."""
    import openai

    return (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError)


def _retry_after(exc: Exception) -> float | None:
    """Seconds from a 429's ``Retry-After`` header, if any."""
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


LENGTH_RETRY_MAX_TOKENS = 8192
"""A reply cut off at the token limit (``finish_reason == "length"``) is asked once more with this output
limit; cut off again, the call fails (the caller's offline fallback answers) — it is never parsed as whole."""


class TruncatedReply(LLMError):
    """The model stopped at its output token limit."""


@dataclass(frozen=True)
class _Reply:
    """A completion's text and what came with it, whole or streamed."""

    text: str
    finish_reason: str | None
    model: str | None
    prompt_tokens: int
    completion_tokens: int


class OpenAIChatModel:
    """OpenAI-compatible chat (OpenAI, vLLM, Ollama, …) with retries, timeout, cache and usage log."""

    offline = False

    def __init__(self, settings: LLMSettings, store: LLMStore | None = None) -> None:
        import openai

        self.model_id = settings.model
        self._settings = settings
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "not-needed",
            timeout=settings.timeout_s,
            max_retries=0,
        )
        self._sem = asyncio.Semaphore(max(1, settings.concurrency))
        self._store = store
        self._json_mode = "json_schema"  # downgraded to json_object if the server rejects schemas
        self._streams = True  # free-text replies are streamed when asked (TEXT_DELTAS); off if the server refuses

    async def complete_json(self, *, purpose: str, system: str, prompt: str, schema: dict[str, Any]) -> ChatResult:
        return await self._complete(purpose, system, prompt, schema)

    async def complete_text(self, *, purpose: str, system: str, prompt: str) -> ChatResult:
        return await self._complete(purpose, system, prompt, None)

    async def _complete(self, purpose: str, system: str, prompt: str, schema: dict[str, Any] | None) -> ChatResult:
        phash = prompt_hash(self.model_id, system, prompt, schema)
        if self._store is not None and self._settings.cache:
            hit = await self._store.get(self.model_id, phash)
            if hit is not None:
                cached = ChatResult(
                    text=hit.text,
                    data=parse_json_reply(hit.text) if schema else None,
                    model=hit.model,
                    usage=ChatUsage(hit.usage.prompt_tokens, hit.usage.completion_tokens, True),
                    duration_ms=0.0,
                )
                await self._store.record(purpose, self.model_id, phash, cached, True)
                if schema is None and (sink := TEXT_DELTAS.get()) is not None:
                    await sink(cached.text)
                return cached
        started = time.perf_counter()
        try:
            result = await self._call_with_retries(purpose, system, prompt, schema, started)
        except LLMError:
            if self._store is not None:
                failed = ChatResult(text="", model=self.model_id, duration_ms=(time.perf_counter() - started) * 1000)
                await self._store.record(purpose, self.model_id, phash, failed, False)
            raise
        if self._store is not None:
            try:
                await self._store.record(purpose, self.model_id, phash, result, True)
                if self._settings.cache:
                    await self._store.put(self.model_id, phash, result)
            except Exception as exc:  # noqa: BLE001 - a usage-log failure must not lose the answer
                log.error("llm.store_failed", purpose=purpose, error=str(exc))
        return result

    async def _streamed(self, kwargs: dict[str, Any], sink: TextSink) -> _Reply:
        """One completion streamed (``stream: true``): each piece of text handed to ``sink`` as it arrives."""
        parts: list[str] = []
        finish = model = None
        prompt_tokens = completion_tokens = 0
        async with self._sem:
            stream = await self._client.chat.completions.create(**kwargs, stream=True,
                                                                stream_options={"include_usage": True})
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    prompt_tokens = chunk.usage.prompt_tokens or 0
                    completion_tokens = chunk.usage.completion_tokens or 0
                for choice in chunk.choices:
                    if choice.delta is not None and choice.delta.content:
                        parts.append(choice.delta.content)
                        await sink(choice.delta.content)
                    finish = choice.finish_reason or finish
        return _Reply("".join(parts), finish, model, prompt_tokens, completion_tokens)

    def _response_format(self, purpose: str, schema: dict[str, Any]) -> dict[str, Any]:
        if self._json_mode == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": schema_name(purpose), "schema": schema, "strict": False}}
        return {"type": "json_object"}

    async def _call_with_retries(
        self, purpose: str, system: str, prompt: str, schema: dict[str, Any] | None, started: float
    ) -> ChatResult:
        import openai

        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        attempts = max(1, self._settings.max_retries + 1)
        last: Exception | None = None
        attempt = 0
        max_tokens: int | None = None
        sink = TEXT_DELTAS.get() if schema is None else None  # streamed once: a retry's reply comes whole
        while attempt < attempts:
            kwargs: dict[str, Any] = {"model": self.model_id, "messages": messages, "temperature": 0}
            if schema is not None:
                kwargs["response_format"] = self._response_format(purpose, schema)
            if max_tokens is not None:
                kwargs["max_tokens"] = max_tokens
            streaming = False
            try:
                if sink is not None and self._streams:
                    streaming, to, sink = True, sink, None  # one streamed attempt: a retry's reply comes whole
                    reply = await self._streamed(kwargs, to)
                else:
                    async with self._sem:
                        resp = await self._client.chat.completions.create(**kwargs)
                    reply = _Reply((resp.choices[0].message.content or "") if resp.choices else "",
                                   resp.choices[0].finish_reason if resp.choices else None, resp.model,
                                   getattr(resp.usage, "prompt_tokens", 0) or 0,
                                   getattr(resp.usage, "completion_tokens", 0) or 0)
                if reply.finish_reason == "length":
                    raise TruncatedReply(f"{purpose}: reply cut off at the output token limit")
                text = reply.text
                data = parse_json_reply(text) if schema is not None else None
                if schema is not None and schema.get("type") == "object" and not isinstance(data, dict):
                    raise LLMError(f"{purpose}: reply is JSON but not an object")
                usage = ChatUsage(prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
                return ChatResult(
                    text=text, data=data, model=reply.model or self.model_id, usage=usage,
                    duration_ms=(time.perf_counter() - started) * 1000,
                )
            except TruncatedReply:
                if max_tokens is not None:
                    raise
                max_tokens = LENGTH_RETRY_MAX_TOKENS
                log.warning("llm.reply_truncated", purpose=purpose, retry_max_tokens=max_tokens)
                continue  # once, with a larger output limit
            except openai.BadRequestError as exc:
                if streaming and "stream" in str(exc):
                    self._streams = False  # a server that does not stream: whole replies from now on
                    log.warning("llm.streaming_unsupported", purpose=purpose)
                    continue  # not an attempt
                if schema is not None and self._json_mode == "json_schema" and "response_format" in str(exc):
                    self._json_mode = "json_object"
                    log.warning("llm.json_schema_unsupported", purpose=purpose)
                    continue  # the downgrade does not use up an attempt
                raise LLMError(f"{purpose}: request rejected: {exc}") from exc
            except (*_retryable(), LLMError) as exc:
                last = exc
                attempt += 1
                if attempt >= attempts:
                    break
                delay = min(8.0, 0.25 * (2 ** (attempt - 1))) * (0.5 + random.random())
                retry_after = _retry_after(exc)
                if retry_after is not None:
                    delay = min(retry_after, 30.0)
                log.warning("llm.retry", purpose=purpose, attempt=attempt + 1, error=type(exc).__name__, delay_s=round(delay, 2))
                await asyncio.sleep(delay)
            except openai.APIError as exc:
                raise LLMError(f"{purpose}: {exc}") from exc
        raise LLMError(f"{purpose}: failed after {attempts} attempts: {type(last).__name__}: {last}")


TextSink = Callable[[str], Awaitable[object]]
TEXT_DELTAS: ContextVar[TextSink | None] = ContextVar("kb_text_deltas", default=None)
"""Where the pieces of a free-text completion go as the model writes them: set around a streamed query's answer
(``router.pipeline``); None (the default): the reply arrives whole. A reply from the LLM cache is one piece."""


class CountingChat:
    """Wraps a ChatModel for one unit of work (a document, a query) and counts calls and tokens."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.offline = inner.offline
        self.calls = 0
        self.by_purpose: collections.Counter[str] = collections.Counter()
        self.failed = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached = 0

    def _count(self, res: ChatResult) -> ChatResult:
        self.prompt_tokens += res.usage.prompt_tokens
        self.completion_tokens += res.usage.completion_tokens
        self.cached += int(res.usage.cached)
        return res

    async def complete_json(self, *, purpose: str, system: str, prompt: str, schema: dict[str, Any]) -> ChatResult:
        self.calls += 1
        self.by_purpose[purpose] += 1
        try:
            return self._count(await self.inner.complete_json(purpose=purpose, system=system, prompt=prompt,
                                                              schema=schema))
        except LLMError:
            self.failed += 1
            raise

    async def complete_text(self, *, purpose: str, system: str, prompt: str) -> ChatResult:
        self.calls += 1
        self.by_purpose[purpose] += 1
        try:
            return self._count(await self.inner.complete_text(purpose=purpose, system=system, prompt=prompt))
        except LLMError:
            self.failed += 1
            raise

    def usage(self) -> LLMUsage:
        return LLMUsage(calls=self.calls, failed=self.failed, prompt_tokens=self.prompt_tokens,
                        completion_tokens=self.completion_tokens, cached=self.cached)
