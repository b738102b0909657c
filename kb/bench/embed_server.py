"""A minimal OpenAI-compatible ``/v1/embeddings`` server over the local embedder, for ``kb bench ingest
--workers N --serve-embeddings``: the workers then embed through HTTP, as against a remote embeddings server
(vLLM, TEI, OpenAI), while the model runs in this one process.

``python -m kb.bench.embed_server [--port P]`` prints ``listening on http://127.0.0.1:PORT/v1`` once ready and
serves until stopped. Loopback only; requests are served one at a time (one model, one lock).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kb.core.process import die_with_spawner
from kb.core.providers.embed import build_embedder
from kb.core.providers.local_models import resolve_model
from kb.core.settings import get_settings

EMBED_PATHS = ("/v1/embeddings", "/embeddings")


class Served:
    """Requests and texts embedded so far (printed when the server stops)."""

    def __init__(self) -> None:
        self.requests = 0
        self.texts = 0


def make_handler(embedder: Any, served: Served | None = None) -> type[BaseHTTPRequestHandler]:
    """A request handler answering ``POST /v1/embeddings`` with ``embedder`` (one batch at a time)."""
    lock = threading.Lock()
    served = served or Served()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            return  # no line per request

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            if self.path not in EMBED_PATHS:
                self._reply(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                return
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                texts = req["input"]
                texts = [texts] if isinstance(texts, str) else list(texts)
                if not all(isinstance(t, str) for t in texts):
                    raise ValueError("input must be a string or a list of strings")
            except (ValueError, KeyError, TypeError) as exc:
                self._reply(400, {"error": {"message": f"bad request: {exc}", "type": "invalid_request_error"}})
                return
            with lock:
                vecs = embedder.embed_batch(texts)
                served.requests += 1
                served.texts += len(texts)
            self._reply(200, {"object": "list", "model": req.get("model", embedder.model_id),
                              "data": [{"object": "embedding", "index": i, "embedding": v.tolist()}
                                       for i, v in enumerate(vecs)],
                              "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args(argv)
    die_with_spawner()  # kb bench ingest's server: it stops with the bench, even a SIGKILLed one
    settings = get_settings()
    s = settings.embedding
    embedder = build_embedder(resolve_model(s.model, None), s.batch_size, threads=s.threads,
                              cache_dir=s.model_dir or settings.database.data_dir / "models", runtime=s.runtime)
    served = Served()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(embedder, served))

    def stop(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1 model={embedder.model_id}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        print(f"embed_server: served {served.requests} requests, {served.texts} texts", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
