"""With an OpenAI-compatible model, ``stream: true`` forwards the model's words as it writes them (a real
``kb serve`` and the fake OpenAI server streaming slowly); the checked answer follows and replaces them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from router.prompts import SUFFICIENCY, TREE_SEARCH
from tests.corpus import REPORTS, write_pdf
from tests.fake_openai import FakeOpenAI, FakeReply
from tests.live import ingest_and_wait, live_server
from tests.test_llm_pipeline import tree_search

pytestmark = pytest.mark.slow

REPLY = "Voltaic Devices recalled 41,000 lithium battery packs because they could overheat [1]."
PIECE_S = 0.25  # between the fake model's words: the reply takes about 3 s to write


def _events(base: str, body: dict) -> list[tuple[float, str, dict]]:
    """(seconds since the request, event, data) of a streamed query, as they arrive over the socket."""
    out, event, started = [], "", time.monotonic()
    with httpx.stream("POST", f"{base}/kb/query", json=body, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                out.append((time.monotonic() - started, event, json.loads(line.split(":", 1)[1])))
    return out


def test_the_first_words_arrive_before_the_model_has_finished(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.route({TREE_SEARCH: tree_search,
                       SUFFICIENCY: FakeReply.json({"judgement": "sufficient", "reason": "the recall is stated"})},
                      text=FakeReply.text(REPLY, piece_delay_s=PIECE_S))
    (tmp_path / "docs").mkdir()
    write_pdf(REPORTS[2], tmp_path / "docs")
    llm = {"KB_LLM_BASE_URL": fake_openai.base_url, "KB_LLM_API_KEY": "test-key", "KB_LLM_MODEL": "fake-model",
           "KB_LLM_TIMEOUT_S": "20", "KB_LLM_CACHE": "false"}
    with live_server(tmp_path, **llm) as server:
        assert ingest_and_wait(server, "docs")["counts"] == {"ok": 1}
        question = {"query": "Which company recalled lithium battery packs?", "stream": True}
        events = _events(server.base, question)
        whole = httpx.post(f"{server.base}/kb/query", json={**question, "stream": False}, timeout=60).json()
    kinds = [e for _, e, _ in events]
    assert kinds[:2] == ["routing", "nodes"] and kinds[-2:] == ["citations", "done"], kinds
    words = [(t, d["delta"]) for t, e, d in events if e == "answer"]
    final_t, final = next((t, d["text"]) for t, e, d in events if e == "answer_final")
    assert "".join(w for _, w in words) == REPLY  # the model's words, as written
    n = len(REPLY.split(" "))
    assert len(words) >= n - 1  # piece by piece, not one block at the end
    assert final_t - words[0][0] >= 0.5 * PIECE_S * (n - 1)  # the first word came while the model was writing
    assert "41,000" in final and final == whole["answer"]  # the checked answer replaces them, as in JSON
    streamed_calls = [r for r in fake_openai.requests if (r.json or {}).get("stream")]
    assert len(streamed_calls) == 1 and streamed_calls[0].response_format is None  # only the answer streams
