"""A scripted OpenAI-compatible chat server for tests (real HTTP on 127.0.0.1, ephemeral port).

Usage in a test::

    from tests.fake_openai import FakeReply, fake_openai_fixture  # noqa: F401  (fixture "fake_openai")

    async def test_x(fake_openai):
        fake_openai.script(FakeReply.json({"answer": 1}), FakeReply.rate_limited(retry_after=0))
        settings = LLMSettings(base_url=fake_openai.base_url, model="fake-model", ...)
        ...
        assert fake_openai.requests[0].json["response_format"]["type"] == "json_schema"

Replies are taken from the queue filled by ``script(...)`` first, then from the ``responder``
callable (``responder(request_json) -> FakeReply | str``). A request with neither is answered
with HTTP 500 and counted in ``unscripted``; the fixture fails the test at teardown if any occurred.

To answer by LLM step, ``route({TREE_SEARCH: FakeReply.json(...), SUFFICIENCY: callable}, text=...)``: a request
is matched to its step by the ``json_schema`` name it carries (the step's purpose, ``kb.core.providers.chat.
schema_name``), never by its prompt's wording; a request without a response format is the free-text answer
(``text``); a step not listed gets the smallest reply its schema allows. A ``FakeReply.json`` reply must fit
the step's reply type (``FakeReply.text`` sends anything, e.g. malformed JSON); a misfit fails the test.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kb.core.providers.steps import LLMStep
from tests.fakes import BY_SCHEMA_NAME, checked, minimal_json, step_of

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
EMBED_PATHS = ("/v1/embeddings", "/embeddings")


@dataclass(frozen=True)
class FakeReply:
    """One scripted answer: a chat completion (``content``) or an HTTP error (``status`` >= 400)."""

    content: str = ""
    status: int = 200
    error_message: str = ""
    error_type: str = "server_error"
    error_param: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    prompt_tokens: int = 12
    completion_tokens: int = 5
    model: str | None = None  # None → echo the requested model
    finish_reason: str = "stop"
    is_json: bool = False  # made by .json(): routed to a step, it must fit the step's reply type
    piece_delay_s: float = 0.0  # a streamed reply (``"stream": true``): seconds between its word-sized pieces

    @classmethod
    def json(cls, data: Any, **kw: Any) -> FakeReply:
        """A completion whose content is ``data`` serialised as JSON."""
        return cls(content=json.dumps(data), is_json=True, **kw)

    @classmethod
    def text(cls, content: str, **kw: Any) -> FakeReply:
        """A completion with this exact content (prose, fenced JSON, malformed JSON, …)."""
        return cls(content=content, **kw)

    @classmethod
    def error(cls, status: int, message: str, *, error_type: str = "server_error",
              param: str | None = None, headers: dict[str, str] | None = None, delay_s: float = 0.0) -> FakeReply:
        """An OpenAI-style error body with this HTTP status."""
        return cls(status=status, error_message=message, error_type=error_type, error_param=param,
                   headers=tuple((headers or {}).items()), delay_s=delay_s)

    @classmethod
    def rate_limited(cls, retry_after: float = 0) -> FakeReply:
        """HTTP 429 with a ``Retry-After`` header."""
        return cls.error(429, "Rate limit reached for fake-model", error_type="rate_limit_exceeded",
                         headers={"Retry-After": f"{retry_after:g}"})

    @classmethod
    def server_error(cls, status: int = 500) -> FakeReply:
        return cls.error(status, "The server had an error while processing your request.")

    @classmethod
    def response_format_unsupported(cls) -> FakeReply:
        """HTTP 400 as returned by servers that do not accept ``json_schema`` response formats."""
        return cls.error(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported "
                              "with this model.", error_type="invalid_request_error", param="response_format")

    @classmethod
    def slow(cls, delay_s: float, content: str = "{}") -> FakeReply:
        """A completion sent only after ``delay_s`` seconds (to trigger client timeouts)."""
        return cls(content=content, delay_s=delay_s)


Responder = Callable[[dict[str, Any]], "FakeReply | str"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received by the server."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any  # parsed body (None when the body is not JSON)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.json or {}).get("messages", []))

    @property
    def response_format(self) -> dict[str, Any] | None:
        return (self.json or {}).get("response_format")

    @property
    def step(self) -> LLMStep[Any] | None:
        """The LLM step this request is for, by the ``json_schema`` name it carries (None: no schema)."""
        return _step_of_request(self.json)


def _step_of_request(body: Any) -> LLMStep[Any] | None:
    rf = (body or {}).get("response_format") or {}
    if rf.get("type") != "json_schema":
        return None
    name = rf["json_schema"]["name"]
    assert name in BY_SCHEMA_NAME, f"fake_openai: a request names no declared LLM step: {name!r}"
    return BY_SCHEMA_NAME[name]


def by_step(replies: Mapping[LLMStep[Any] | str, Any] | None = None, *, text: Any = None,
            minimal: bool = True) -> Responder:
    """A responder answering by LLM step: ``replies[step]`` (a ``FakeReply``, a str, a callable of the request
    body, or a list of those, one per request) for a request whose ``json_schema`` name is that step's;
    ``text`` for a request without a response format (the free-text answer); any other step the smallest
    reply valid for its schema (``minimal``) or nothing (unscripted). A ``FakeReply.json`` reply that does not
    fit its step's type fails the test."""
    routes = {step_of(k).purpose: collections.deque(v) if isinstance(v, list) else v
              for k, v in (replies or {}).items()}

    def respond(body: dict[str, Any]) -> FakeReply | None:
        step = _step_of_request(body)
        if step is None:
            route = text
        elif step.purpose in routes:
            route = routes[step.purpose]
            if isinstance(route, collections.deque):  # one per request, in order; then none (unscripted)
                route = route.popleft() if route else None
        elif minimal:
            route = FakeReply.json(minimal_json(body["response_format"]["json_schema"]["schema"]))
        else:
            return None
        reply = route(body) if callable(route) else route
        if isinstance(reply, str):
            reply = FakeReply.text(reply)
        if step is not None and reply is not None and reply.is_json and reply.status < 400:
            checked(step, json.loads(reply.content))
        return reply

    return respond


@dataclass
class FakeOpenAI:
    """Handle returned by the ``fake_openai`` fixture."""

    base_url: str = ""
    requests: list[RecordedRequest] = field(default_factory=list)
    responder: Responder | None = None
    embedder: Callable[[Any], Any] | None = None  # /embeddings: body -> vectors (list of lists) or a FakeReply
    unscripted: int = 0
    errors: list[str] = field(default_factory=list)  # replies that failed their step's check
    _queue: collections.deque[FakeReply | Responder] = field(default_factory=collections.deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def route(self, replies: Mapping[LLMStep[Any] | str, Any] | None = None, *, text: Any = None,
              minimal: bool = True) -> FakeOpenAI:
        """Answer by LLM step from now on (see ``by_step``); queued ``script(...)`` replies still come first."""
        return self.script(responder=by_step(replies, text=text, minimal=minimal))

    def script(self, *replies: FakeReply | str | Responder, responder: Responder | None = None) -> FakeOpenAI:
        """Queue replies (a str is the content of a completion; a callable answers one request);
        optionally set the ``responder`` used once the queue is empty."""
        with self._lock:
            for reply in replies:
                self._queue.append(FakeReply.text(reply) if isinstance(reply, str) else reply)
            if responder is not None:
                self.responder = responder
        return self

    @property
    def call_count(self) -> int:
        """Number of chat-completion requests received."""
        return sum(1 for r in self.requests if r.path in CHAT_PATHS)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._queue)

    def _next_reply(self, body: Any) -> FakeReply | None:
        with self._lock:
            item: FakeReply | Responder | None = self._queue.popleft() if self._queue else self.responder
        if item is None:
            return None
        if isinstance(item, FakeReply):
            return item
        try:
            reply = item(body)
        except AssertionError as exc:  # a reply that drifted from its step's schema: the test fails at teardown
            with self._lock:
                self.errors.append(str(exc))
            return None
        return FakeReply.text(reply) if isinstance(reply, str) else reply


def _completion_body(reply: FakeReply, request: Any, seq: int) -> dict[str, Any]:
    model = reply.model or (request or {}).get("model") or "fake-model"
    return {
        "id": f"chatcmpl-fake-{seq}",
        "object": "chat.completion",
        "created": 1_700_000_000 + seq,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": reply.content},
            "finish_reason": reply.finish_reason,
            "logprobs": None,
        }],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _make_handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
            return

        def _send(self, status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (timeout): nothing to answer

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            self._record(None)
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            seq = self._record(body)
            if self.path in EMBED_PATHS and state.embedder is not None:
                self._embeddings(body)
                return
            if self.path not in CHAT_PATHS:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            reply = state._next_reply(body)
            if reply is None:
                with state._lock:
                    state.unscripted += 1
                self._send(500, {"error": {"message": "fake_openai: no reply scripted", "type": "test_error"}})
                return
            if reply.delay_s > 0 and state._stopping.wait(reply.delay_s):
                return  # server shutting down
            if reply.status >= 400:
                err = {"message": reply.error_message, "type": reply.error_type,
                       "param": reply.error_param, "code": None}
                self._send(reply.status, {"error": err}, reply.headers)
            elif (body or {}).get("stream"):
                self._stream(reply, body, seq)
            else:
                self._send(reply.status, _completion_body(reply, body, seq), reply.headers)

        def _stream(self, reply: FakeReply, body: Any, seq: int) -> None:
            """The completion as server-sent chunks, one word (with its space) each, ``piece_delay_s`` apart; the
            last chunk carries the finish reason, then the usage (``stream_options.include_usage``)."""
            model = reply.model or (body or {}).get("model") or "fake-model"
            words = [w for w in reply.content.split(" ")]
            pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]

            def chunk(delta: dict[str, Any], finish: str | None, usage: dict[str, int] | None = None) -> bytes:
                data = {"id": f"chatcmpl-fake-{seq}", "object": "chat.completion.chunk", "created": 1_700_000_000,
                        "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                        if usage is None else [], "usage": usage}
                return f"data: {json.dumps(data)}\n\n".encode()

            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                self.wfile.write(chunk({"role": "assistant", "content": ""}, None))
                for i, piece in enumerate(pieces):
                    if i and reply.piece_delay_s > 0 and state._stopping.wait(reply.piece_delay_s):
                        return
                    self.wfile.write(chunk({"content": piece}, None))
                    self.wfile.flush()
                self.wfile.write(chunk({}, reply.finish_reason))
                self.wfile.write(chunk({}, None, {"prompt_tokens": reply.prompt_tokens,
                                                  "completion_tokens": reply.completion_tokens,
                                                  "total_tokens": reply.prompt_tokens + reply.completion_tokens}))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _embeddings(self, body: Any) -> None:
            answer = state.embedder(body)  # type: ignore[misc]
            if answer is None:
                with state._lock:
                    state.unscripted += 1
                self._send(500, {"error": {"message": "fake_openai: no embeddings scripted", "type": "test_error"}})
            elif isinstance(answer, FakeReply):
                if answer.delay_s > 0 and state._stopping.wait(answer.delay_s):
                    return
                err = {"message": answer.error_message, "type": answer.error_type, "param": None, "code": None}
                self._send(answer.status, {"error": err}, answer.headers)
            else:
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(answer)]
                self._send(200, {"object": "list", "data": data, "model": (body or {}).get("model", "fake-embed"),
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})

        def _record(self, body: Any) -> int:
            rec = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            with state._lock:
                state.requests.append(rec)
                return len(state.requests)

    return Handler


class FakeOpenAIServer:
    """Owns the HTTP server thread; ``start()`` returns the ``FakeOpenAI`` handle."""

    def __init__(self) -> None:
        self.state = FakeOpenAI()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self.state))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )

    def start(self) -> FakeOpenAI:
        host, port = self._httpd.server_address[:2]
        self.state.base_url = f"http://{host}:{port}/v1"
        self._thread.start()
        return self.state

    def stop(self) -> None:
        self.state._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(name="fake_openai")
def fake_openai_fixture() -> Iterator[FakeOpenAI]:
    """A running fake server; fails the test if a request arrived with no reply scripted."""
    with FakeOpenAIServer() as fake:
        yield fake
        assert not fake.errors, fake.errors
        assert fake.unscripted == 0, f"{fake.unscripted} request(s) reached fake_openai with no reply scripted"
