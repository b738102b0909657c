"""Embeddings from an OpenAI-compatible server (KB_EMBEDDING_BASE_URL), against the fake server: batching,
retries, strict reply checks, and ingest + query on the real embedded Postgres with a broken batch failing
its file alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from kb.core.errors import EmbeddingError
from kb.core.providers.embed import HashEmbedder, RemoteEmbedder
from tests.conftest import ingest
from tests.fake_openai import FakeOpenAI, FakeReply

HASH = HashEmbedder(16)


def vectors(body: dict[str, Any]) -> list[list[float]]:
    """Deterministic, meaningful vectors (hashed words), not normalised, so normalisation is tested too."""
    return [(3.0 * v).tolist() for v in HASH.embed_batch(list(body["input"]))]


def remote(fake: FakeOpenAI, **kw: Any) -> RemoteEmbedder:
    return RemoteEmbedder(base_url=fake.base_url, model="fake-embed", api_key="k", **kw)


def test_batches_probe_and_normalised_vectors(fake_openai: FakeOpenAI) -> None:
    fake_openai.embedder = vectors
    emb = remote(fake_openai, batch_size=2)
    assert emb.dimension == 16  # probed once
    texts = ["revenue grew", "net income", "cash flow", "lithium battery recall", "outlook"]
    out = emb.embed_batch(texts)
    assert out.shape == (5, 16) and np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert np.allclose(out, HASH.embed_batch(texts), atol=1e-5)  # same direction as the server's vectors
    sizes = [len(r.json["input"]) for r in fake_openai.requests[1:]]
    assert sizes == [2, 2, 1] and all(r.json["model"] == "fake-embed" for r in fake_openai.requests)
    assert "dimensions" not in fake_openai.requests[-1].json
    fixed = remote(fake_openai, dimensions=16)
    assert fixed.dimension == 16 and len(fake_openai.requests) == 4  # no probe when the size is configured
    fixed.embed_batch(["x"])
    assert fake_openai.requests[-1].json["dimensions"] == 16


@pytest.mark.parametrize(("bad", "message"), [
    (lambda body: vectors(body)[:-1], "returned 1 vectors for 2 texts"),
    (lambda body: [v[:8] for v in vectors(body)], "8-d vectors, expected 16-d"),
    (lambda body: [[float("nan")] * 16 for _ in body["input"]], "NaN or infinite"),
    (lambda body: [[0.0] * 16 for _ in body["input"]], "zero vector"),
])
def test_unusable_replies_fail_the_batch(fake_openai: FakeOpenAI, bad: Any, message: str) -> None:
    fake_openai.embedder = vectors
    emb = remote(fake_openai)
    fake_openai.embedder = bad
    with pytest.raises(EmbeddingError, match=message):
        emb.embed_batch(["a", "b"])


def test_retries_then_gives_up(fake_openai: FakeOpenAI) -> None:
    fake_openai.embedder = vectors
    emb = remote(fake_openai, max_retries=2, timeout_s=0.5)
    replies = iter([FakeReply.rate_limited(0), FakeReply.server_error(503)])
    fake_openai.embedder = lambda body: next(replies, None) or vectors(body)
    assert emb.embed_batch(["a"]).shape == (1, 16)  # 429, 503, then the vectors
    fake_openai.embedder = lambda body: FakeReply.slow(2.0)
    with pytest.raises(EmbeddingError, match="embeddings endpoint failed"):
        remote(fake_openai, dimensions=16, max_retries=0, timeout_s=0.3).embed_batch(["a"])


async def test_ingest_and_query_with_remote_embeddings(fake_openai: FakeOpenAI, db_env: str, tmp_path: Path) -> None:
    from kb.core.settings import get_settings
    from kb.runtime import build_pipeline, open_runtime
    from router.types import QueryRequest

    def server(body: dict[str, Any]) -> Any:
        if any("POISON" in t for t in body["input"]):
            return vectors(body)[:-1]  # this batch comes back short
        return vectors(body)

    fake_openai.embedder = server
    rt = await open_runtime(get_settings(), embedder=remote(fake_openai))
    try:
        folder = tmp_path / "docs"
        folder.mkdir()
        (folder / "voltaic.md").write_text("# Voltaic Devices 2023\n\n## Product safety\n\nIn March 2023 Voltaic "
                                           "recalled 41,000 lithium battery packs after reports of overheating.\n")
        (folder / "broken.md").write_text("# Broken\n\n## Part\n\nPOISON text that the server cannot embed.\n")
        job = await ingest(rt, folder)
        status = {it.name: (it.status, it.error) for it in job.items}
        assert status["voltaic.md"][0] == "ok"
        assert status["broken.md"][0] == "failed" and "embeddings endpoint" in (status["broken.md"][1] or "")
        assert await rt.pool.fetchval("SELECT count(*) FROM documents") == 1  # nothing partial stored
        dim = await rt.pool.fetchval(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid='chunks'::regclass AND attname='embedding'")
        assert dim == 16
        result = await build_pipeline(rt).run(QueryRequest(query="Which company recalled lithium battery packs?"))
        assert result.citations and "41,000" in " ".join(c.text for c in result.citations)
        cached = await rt.pool.fetchval("SELECT count(*) FROM embedding_cache WHERE model = 'fake-embed'")
        assert cached >= 1  # the (model, sha256) cache holds the remote vectors
        assert json.dumps(msgspec.to_builtins(result.trace))
    finally:
        await rt.close()
