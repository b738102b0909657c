"""POST /kb/query: the router pipeline, as JSON or as server-sent events."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any

import msgspec
import structlog
from litestar import Controller, post
from litestar.response import ServerSentEvent

from ingest.page_labels import with_printed_pages
from kb.api.common import BEARER, UNAVAILABLE_LOG, errors, read_guard, unavailable
from kb.core.errors import KBError, ValidationError
from kb.runtime import Runtime
from router.pipeline import QueryPipeline, retrieved
from router.state import admit
from router.trace import QueryResult, RetrieveResult
from router.types import QueryRequest, Request

log = structlog.get_logger("kb.api")


class EventStream(ServerSentEvent):
    """Server-sent events sent as ``text/event-stream`` even from a handler that can also answer JSON
    (litestar 2.25 lets the handler's media type override the stream's own)."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["media_type"] = "text/event-stream"
        return super().to_asgi_response(*args, **kwargs)


RETRIEVE_DOC = """What the router finds for a question, without an answer: the routed documents (scores and why), \
the sections tree search chose (with their pages) and the ranked evidence passages with their citations — for agents \
and other RAG front-ends. The same request as `POST /kb/query` (`documents`, `filters`, `strategy`, `top_k`, \
`history`…); no synthesis, so no LLM call for an answer; not streamed.

Example: `{"query": "What was Helios Robotics' revenue in fiscal 2023?", "top_k": 5}` →
`{"question": …, "strategy_used": "auto", "documents": [{"doc_id": 4, "name": "helios-robotics-2023-annual-report.md", \
"score": 0.81, "why": …}], "sections": [{"node_id": "0003", "section_path": "… > Results of operations", \
"pages": [12, 18], "unit": "line", …}], "passages": [{"rank": 1, "score": 0.92, "citation": {"doc_name": …, \
"pages": [14, 15], "text": "Revenue rose to $412.0 million …"}}]}`."""


class QueryController(Controller):
    path = "/kb"
    guards = [read_guard]
    security = BEARER

    @post("/query", status_code=200, responses=errors(400, 401, 404))
    async def query(self, rt: Runtime, pipeline: QueryPipeline, data: QueryRequest) -> QueryResult | ServerSentEvent:
        if not data.stream:
            async with _turn(rt):
                result = await pipeline.run(data)
            return await _printed(rt, result)
        # admitted before the stream starts, so that a bad request fails with its status, not an error event
        return EventStream(_stream(pipeline, await admit(rt.pool, data) if rt is not None else data, rt))


    @post("/retrieve", status_code=200, responses=errors(400, 401, 404), description=RETRIEVE_DOC,
          summary="The evidence for a question, without an answer")
    async def retrieve(self, rt: Runtime, pipeline: QueryPipeline, data: QueryRequest) -> RetrieveResult:
        """``POST /kb/retrieve`` (``RETRIEVE_DOC``)."""
        if data.stream:
            raise ValidationError("POST /kb/retrieve is not streamed: leave out stream (or set it false)")
        async with _turn(rt):
            found = await retrieved(pipeline, data)
        if rt is None or not found.passages:
            return found
        cited = await with_printed_pages(rt.pool, [p.citation for p in found.passages])
        return msgspec.structs.replace(found, passages=[msgspec.structs.replace(p, citation=c)
                                                        for p, c in zip(found.passages, cited, strict=True)])


def _turn(rt: Runtime | None) -> contextlib.AbstractAsyncContextManager[None]:
    """The question's turn among those this process answers at once (``KB_QUERY_CONCURRENCY``)."""
    return rt.query_gate.turn() if rt is not None else contextlib.nullcontext()


async def _printed(rt: Runtime | None, result: QueryResult) -> QueryResult:
    """The result with each PDF citation's printed page number (``printed_page``) next to the physical one."""
    if rt is None or not any(c.unit == "page" for c in result.citations):
        return result
    return msgspec.structs.replace(result, citations=await with_printed_pages(rt.pool, result.citations))


async def _stream(pipeline: Any, req: Request, rt: Runtime | None = None) -> AsyncGenerator[dict[str, str], None]:
    """routing → nodes → answer deltas → citations → done (the documents, the trace and the facts used; errors
    become an ``error`` event). With an LLM the deltas are the model's words as it writes them, followed by
    ``answer_final`` (the checked answer, which replaces them); offline the answer in pieces once it exists."""
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def on_event(kind: str, payload: Any) -> None:
        await queue.put((kind, payload))

    async def run() -> None:
        try:
            async with _turn(rt):
                found = await pipeline.run(req, on_event)
            result = await _printed(rt, found)
            await queue.put(("result", result))
        except KBError as exc:
            await queue.put(("error", {"status": exc.status_code, "title": exc.title, "detail": exc.detail}))
        except Exception as exc:  # noqa: BLE001 - reported to the client as an event, and logged
            if (down := unavailable(rt, exc)) is not None:  # busy, or the database went away: retry, as a 503 says
                UNAVAILABLE_LOG.say(down, cause=f"{type(exc).__name__}: {exc}"[:300])
                await queue.put(("error", {"status": down.status_code, "title": down.title, "detail": down.detail}))
                return
            log.exception("api.stream_failed")
            await queue.put(("error", {"status": 500, "title": "Internal error", "detail": type(exc).__name__}))

    task = asyncio.create_task(run())
    streamed = False  # the model's words were sent as it wrote them
    try:
        while True:
            kind, payload = await queue.get()
            if kind == "error":
                yield {"event": "error", "data": json.dumps(payload)}
                break
            if kind == "answer_delta":
                streamed = True
                yield {"event": "answer", "data": json.dumps({"delta": payload})}
                continue
            if kind != "result":
                yield {"event": kind, "data": msgspec.json.encode(payload).decode()}
                continue
            result: QueryResult = payload
            if streamed:  # the checked answer, its citations numbered in reading order, replaces what was streamed
                yield {"event": "answer_final", "data": json.dumps({"text": result.answer})}
            words = [] if streamed else result.answer.split(" ")
            for i in range(0, len(words), 8):
                yield {"event": "answer", "data": json.dumps({"delta": " ".join(words[i : i + 8]) + " "})}
            yield {"event": "citations", "data": msgspec.json.encode(result.citations).decode()}
            yield {"event": "done", "data": msgspec.json.encode(
                {"documents": result.documents, "trace": result.trace, "facts": result.facts,
                 "not_found": result.not_found, "suggestions": result.suggestions,
                 "read_as": result.read_as}).decode()}
            break
    finally:
        if not task.done():
            task.cancel()
