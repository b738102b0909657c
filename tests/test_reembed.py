"""The embedder record and `kb reembed` on the real embedded Postgres: a different embedder is refused with one
line; re-embedding swaps every vector (chunks, nodes, descriptions) in one transaction, resumes after an
interruption from its staging tables, keeps a collection-only run to the recorded embedder; a remote
(fake) embeddings server and the CLI end to end."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingest.pipeline import doc_label, embed_text_for_chunk, embed_text_for_description, embed_text_for_node
from ingest.reembed import reembed
from kb.core.collections import ensure_collection
from kb.core.db import create_pool, migrate
from kb.core.embedder_record import EmbedderMismatchError, ensure_embedder, read_record
from kb.core.errors import ConfigError, EmbeddingError, NotFoundError
from kb.core.providers.embed import HashEmbedder, RemoteEmbedder
from kb.core.settings import get_settings
from kb.runtime import Runtime, build_pipeline, open_runtime
from router.types import QueryRequest
from tests import conftest
from tests.fake_openai import FakeOpenAI, FakeReply

A = HashEmbedder(384)  # "hash:384"
B = HashEmbedder(256)  # "hash:256": another model and another dimension

DOCS = {
    "voltaic.md": "# Voltaic Devices 2023\n\n## Product safety\n\nIn March 2023 Voltaic recalled 41,000 lithium "
                  "battery packs after reports of overheating.\n\n## Outlook\n\nVoltaic expects flat unit sales.\n",
    "helios.md": "# Helios Robotics 2022\n\n## Results\n\nHelios Robotics revenue was 412.6 million dollars in "
                 "fiscal 2022, up from 350.1 million.\n\n## Risks\n\nSupply of servo motors remains tight.\n",
    "aster.md": "# Aster Foods 2021\n\n## Operations\n\nAster Foods opened three bakeries in Lisbon and closed "
                "its Porto warehouse.\n\n## Staff\n\nHeadcount rose to 2,340 employees.\n",
}
QUESTION = ("Which company recalled lithium battery packs?", "41,000")


class CountingEmbedder:
    """Another embedder's vectors, counting calls; raises after ``fail_after`` calls (a killed run)."""

    def __init__(self, inner: Any, fail_after: int | None = None) -> None:
        self.inner, self.fail_after, self.calls = inner, fail_after, 0
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise EmbeddingError("embedder died (test)")
        self.calls += 1
        return self.inner.embed_batch(texts)


def write_corpus(folder: Path, docs: dict[str, str] = DOCS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text)
    return folder


async def ingest(rt: Runtime, folder: Path, collection: str = "default") -> dict[str, tuple[str, str | None]]:
    coll = await ensure_collection(rt.pool, collection)
    job = await conftest.ingest(rt, folder, collection_id=coll.id)
    return {it.name: (it.status, it.error) for it in job.items}


async def vectors(rt: Runtime) -> dict[str, dict[Any, np.ndarray]]:
    """Every stored vector by kind and key."""
    return {
        "chunks": {r["id"]: r["embedding"] for r in await rt.pool.fetch("SELECT id, embedding FROM chunks")},
        "nodes": {(r["document_id"], r["node_id"]): r["embedding"] for r in await rt.pool.fetch(
            "SELECT document_id, node_id, embedding FROM nodes WHERE embedding IS NOT NULL")},
        "documents": {r["id"]: r["description_embedding"] for r in await rt.pool.fetch(
            "SELECT id, description_embedding FROM documents WHERE description_embedding IS NOT NULL")},
    }


async def stored_texts(rt: Runtime) -> dict[str, dict[Any, str]]:
    """The texts the vectors stand for, rebuilt from the stored rows the way ingest builds them."""
    docs = {r["id"]: r for r in await rt.pool.fetch("SELECT id, title, description, metadata FROM documents")}

    def label(doc_id: int) -> str:
        return doc_label(json.loads(docs[doc_id]["metadata"]), docs[doc_id]["title"])

    chunks = await rt.pool.fetch("SELECT id, document_id, heading_path, text, context FROM chunks")
    nodes = await rt.pool.fetch("SELECT document_id, node_id, path, summary FROM nodes WHERE embedding IS NOT NULL")
    return {
        "chunks": {c["id"]: embed_text_for_chunk(label(c["document_id"]), c["heading_path"], c["text"],
                                              c["context"])
                   for c in chunks},
        "nodes": {(n["document_id"], n["node_id"]): embed_text_for_node(label(n["document_id"]), n["path"],
                                                                         n["summary"]) for n in nodes},
        "documents": {i: embed_text_for_description(d["title"], d["description"]) for i, d in docs.items()},
    }


SQL_DIMS_SEEN = """
SELECT DISTINCT vector_dims(v) FROM (
    SELECT embedding AS v FROM chunks UNION ALL SELECT embedding FROM nodes WHERE embedding IS NOT NULL
    UNION ALL SELECT description_embedding FROM documents WHERE description_embedding IS NOT NULL) s"""


async def column_dims(rt: Runtime) -> set[int]:
    return {r[0] for r in await rt.pool.fetch(
        "SELECT atttypmod FROM pg_attribute WHERE NOT attisdropped AND "
        "((attrelid = 'chunks'::regclass AND attname = 'embedding') OR (attrelid = 'nodes'::regclass AND "
        "attname = 'embedding') OR (attrelid = 'documents'::regclass AND attname = 'description_embedding'))")}


async def answer_cites(rt: Runtime, question: tuple[str, str] = QUESTION) -> bool:
    result = await build_pipeline(rt).run(QueryRequest(query=question[0]))
    return question[1] in " ".join(c.text for c in result.citations)


def assert_all_close(got: dict[str, dict[Any, np.ndarray]], want: dict[str, dict[Any, np.ndarray]]) -> None:
    for kind in ("chunks", "nodes", "documents"):
        assert got[kind].keys() == want[kind].keys() and got[kind], kind
        for key, vec in want[kind].items():
            assert np.allclose(got[kind][key], vec, atol=1e-6), (kind, key)


async def test_record_adopted_then_different_embedder_refused_and_reembedded(db_env: str, tmp_path: Path) -> None:
    rt_a = await open_runtime(get_settings(), embedder=A)
    try:
        assert await read_record(rt_a.pool) == rt_a.embedder_record
        assert (rt_a.embedder_record.model_id, rt_a.embedder_record.dimension) == ("hash:384", 384)
        assert set((await ingest(rt_a, write_corpus(tmp_path / "docs"))).values()) == {("ok", None)}
        original = await vectors(rt_a)
        assert await answer_cites(rt_a)

        with pytest.raises(EmbedderMismatchError) as refused:
            await open_runtime(get_settings(), embedder=B)
        assert str(refused.value) == (
            "database vectors come from 'hash:384' (384-d); configured embedder is 'hash:256' (256-d): set "
            "KB_EMBEDDING_MODEL back, or run 'kb reembed' to re-embed every chunk")

        counting = CountingEmbedder(B)
        rt_b = await open_runtime(get_settings(), embedder=counting, allow_embedder_change=True)
        seen: list[tuple[int, int]] = []
        observed: list[list[int]] = []
        stop = asyncio.Event()

        async def reader() -> None:  # every read sees one embedder's vectors: all 384-d, then all 256-d
            while not stop.is_set():
                observed.append([r[0] for r in await rt_a.pool.fetch(SQL_DIMS_SEEN)])
                await asyncio.sleep(0)

        reading = asyncio.create_task(reader())
        try:
            result = await reembed(rt_b.pool, counting, batch=5, on_progress=lambda d, t: seen.append((d, t)))
        finally:
            stop.set()
            await reading
            await rt_b.close()
        assert len(observed) > 1 and all(len(dims) == 1 for dims in observed)
        flat = [dims[0] for dims in observed]
        assert flat[0] == 384 and flat == sorted(flat, reverse=True)  # 384-d reads, then only 256-d reads
        total = sum(len(v) for v in original.values())
        assert result.vectors == total and result.resumed == 0 and counting.calls > 0
        assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted(d for d, _ in seen)

        # every vector is B's embedding of its text; columns, index and record follow
        texts = await stored_texts(rt_a)
        assert_all_close(await vectors(rt_a), {k: dict(zip(t, B.embed_batch(list(t.values())), strict=True))
                                               for k, t in texts.items()})
        assert await column_dims(rt_a) == {256}
        assert await rt_a.pool.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'chunks_embedding_hnsw'") == 1
        record = await read_record(rt_a.pool)
        assert record is not None and (record.model_id, record.dimension, record.generation) == ("hash:256", 256, 2)
        assert await rt_a.pool.fetchval("SELECT count(*) FROM reembed_chunks") == 0  # staging cleared

        # a process started before the swap may not write its old vectors any more
        late = write_corpus(tmp_path / "late", {"late.md": "# Late 2024\n\n## News\n\nA late note about ovens.\n"})
        status = await ingest(rt_a, late)
        assert status["late.md"][0] == "failed" and "kb reembed" in (status["late.md"][1] or "")
    finally:
        await rt_a.close()

    rt = await open_runtime(get_settings(), embedder=B)  # now B starts, and A is refused
    try:
        assert await answer_cites(rt)
        assert set((await ingest(rt, late)).values()) == {("ok", None)}
    finally:
        await rt.close()
    with pytest.raises(EmbedderMismatchError, match="come from 'hash:256' \\(256-d\\)"):
        await open_runtime(get_settings(), embedder=A)

    # and back to A: the rebuilt texts are the ingest texts, so the vectors are the original ones
    rt = await open_runtime(get_settings(), embedder=A, allow_embedder_change=True)
    try:
        await rt.pool.execute("DELETE FROM documents WHERE name = 'late.md'")
        await reembed(rt.pool, A)
        assert_all_close(await vectors(rt), original)
        assert await column_dims(rt) == {384} and await answer_cites(rt)
    finally:
        await rt.close()


async def test_interrupted_reembed_leaves_live_vectors_and_resumes(db_env: str, tmp_path: Path) -> None:
    rt = await open_runtime(get_settings(), embedder=A)
    try:
        await ingest(rt, write_corpus(tmp_path / "docs"))
        original = await vectors(rt)
        total = sum(len(v) for v in original.values())
        dying = CountingEmbedder(B, fail_after=3)
        with pytest.raises(EmbeddingError, match="embedder died"):
            await reembed(rt.pool, dying, batch=4)
        staged = sum([await rt.pool.fetchval(f"SELECT count(*) FROM reembed_{t}")
                      for t in ("chunks", "nodes", "documents")])
        assert 0 < staged < total  # the batches committed before the embedder died
        # nothing live changed: still A's vectors, A's record, and A answers
        assert_all_close(await vectors(rt), original)
        assert await column_dims(rt) == {384}
        assert (await read_record(rt.pool)).model_id == "hash:384"  # type: ignore[union-attr]
        assert await answer_cites(rt)
        # drop B's cache entries: what resumes is the staging, not the cache
        await rt.pool.execute("DELETE FROM embedding_cache WHERE model = 'hash:256'")

        again = CountingEmbedder(B)
        result = await reembed(rt.pool, again, batch=4)
        assert result.resumed == staged and result.vectors == total
        assert again.calls <= math.ceil((total - staged) / 4) + 2  # a page may end at each kind's boundary
        assert again.calls < math.ceil(total / 4)  # fewer than a run from scratch
        texts = await stored_texts(rt)
        assert_all_close(await vectors(rt), {k: dict(zip(t, B.embed_batch(list(t.values())), strict=True))
                                             for k, t in texts.items()})
        assert await rt.pool.fetchval("SELECT count(*) FROM reembed_nodes") == 0
    finally:
        await rt.close()


async def test_collection_reembed_keeps_to_the_recorded_embedder(db_env: str, tmp_path: Path) -> None:
    rt = await open_runtime(get_settings(), embedder=A)
    try:
        await ingest(rt, write_corpus(tmp_path / "one", {"voltaic.md": DOCS["voltaic.md"]}), "one")
        await ingest(rt, write_corpus(tmp_path / "two", {"helios.md": DOCS["helios.md"]}), "two")
        original = await vectors(rt)
        # a bad vector in collection "one", and the same bad vector in the cache
        chunk_id, text = await rt.pool.fetchrow(
            "SELECT c.id, c.text FROM chunks c JOIN collections k ON k.id = c.collection_id "
            "WHERE k.name = 'one' ORDER BY c.id LIMIT 1")
        bad = np.zeros(384, dtype=np.float32)
        bad[7] = 1.0
        await rt.pool.execute("UPDATE chunks SET embedding = $1 WHERE id = $2", bad, chunk_id)
        await rt.pool.execute("UPDATE embedding_cache SET embedding = $1 WHERE model = 'hash:384'", bad)
        two_before = await rt.pool.fetch(
            "SELECT c.id, c.embedding FROM chunks c JOIN collections k ON k.id = c.collection_id WHERE k.name='two'")

        counting = CountingEmbedder(A)
        result = await reembed(rt.pool, counting, collection="one")
        assert counting.calls > 0 and result.embedded > 0  # recomputed, not read from the (bad) cache
        fixed = await rt.pool.fetchval("SELECT embedding FROM chunks WHERE id = $1", chunk_id)
        assert np.allclose(fixed, original["chunks"][chunk_id], atol=1e-6) and text
        for row in two_before:  # the other collection untouched (its vectors were fine)
            assert np.array_equal(await rt.pool.fetchval("SELECT embedding FROM chunks WHERE id = $1", row["id"]),
                                  row["embedding"])
        assert (await read_record(rt.pool)).generation == 1  # type: ignore[union-attr]

        with pytest.raises(ConfigError, match="--collection re-embeds with the recorded embedder only"):
            await reembed(rt.pool, B, collection="one")
        with pytest.raises(NotFoundError, match="collection 'nope' does not exist"):
            await reembed(rt.pool, A, collection="nope")
        assert await column_dims(rt) == {384}
    finally:
        await rt.close()


async def test_database_without_record_adopts_or_refuses(db_url: str) -> None:
    pool = await create_pool(db_url)
    try:
        await migrate(pool, embedding_dim=384)
        assert await read_record(pool) is None  # as an existing database before this record
        with pytest.raises(EmbedderMismatchError, match="come from an unrecorded embedder \\(384-d\\); configured "
                                                        "embedder is 'big' \\(768-d\\)"):
            await ensure_embedder(pool, "big", 768)
        assert await read_record(pool) is None
        adopted = await ensure_embedder(pool, "all-MiniLM-L6-v2", 384)
        assert (adopted.model_id, adopted.dimension, adopted.generation) == ("all-MiniLM-L6-v2", 384, 1)
        assert await read_record(pool) == adopted
        with pytest.raises(EmbedderMismatchError, match="come from 'all-MiniLM-L6-v2' \\(384-d\\)"):
            await ensure_embedder(pool, "hash:384", 384)  # same dimension, another model
    finally:
        await pool.close()


async def test_reembed_from_a_remote_server(db_env: str, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    hash16 = HashEmbedder(16)
    served: list[int] = []

    def good(body: dict[str, Any]) -> Any:
        served.append(len(body["input"]))
        return [(2.0 * v).tolist() for v in hash16.embed_batch(list(body["input"]))]

    rt = await open_runtime(get_settings(), embedder=A)
    try:
        await ingest(rt, write_corpus(tmp_path / "docs"))
        original = await vectors(rt)
        fake_openai.embedder = good
        remote = RemoteEmbedder(base_url=fake_openai.base_url, model="fake-embed", api_key="k", batch_size=4,
                                max_retries=2, timeout_s=2)
        assert remote.dimension == 16
        # the server starts answering 8-d vectors after two batches: the run stops, nothing live changes
        fake_openai.embedder = lambda body: good(body) if len(served) < 3 else [[1.0] * 8 for _ in body["input"]]
        with pytest.raises(EmbeddingError, match="8-d vectors, expected 16-d"):
            await reembed(rt.pool, remote, batch=4)
        assert_all_close(await vectors(rt), original)
        staged = await rt.pool.fetchval("SELECT (SELECT count(*) FROM reembed_chunks) + "
                                        "(SELECT count(*) FROM reembed_nodes) + (SELECT count(*) FROM reembed_documents)")
        assert staged > 0
        # then 429 and 500 (retried) and good replies: the run completes from where it stopped
        replies = iter([FakeReply.rate_limited(0), FakeReply.server_error(500)])
        fake_openai.embedder = lambda body: next(replies, None) or good(body)
        result = await reembed(rt.pool, remote, batch=4)
        assert result.resumed == staged and await column_dims(rt) == {16}
        texts = await stored_texts(rt)
        assert_all_close(await vectors(rt), {k: dict(zip(t, hash16.embed_batch(list(t.values())), strict=True))
                                             for k, t in texts.items()})
        assert (await read_record(rt.pool)).model_id == "fake-embed"  # type: ignore[union-attr]
    finally:
        await rt.close()
    rt = await open_runtime(get_settings(), embedder=remote)
    try:
        assert await answer_cites(rt)
    finally:
        await rt.close()


def _cli(db_url: str, tmp_path: Path, model: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATABASE_URL": db_url, "KB_DATA_DIR": str(tmp_path / "data"), "KB_EMBEDDING_MODEL": model,
                "KB_LOG_LEVEL": "warning"})
    return subprocess.run([sys.executable, "-m", "kb.cli", *args], env=env, capture_output=True, text=True,
                          timeout=180)


async def test_cli_refuses_then_reembeds(db_env: str, tmp_path: Path) -> None:
    rt = await open_runtime(get_settings(), embedder=A)
    try:
        await ingest(rt, write_corpus(tmp_path / "docs"))
        total = sum(len(v) for v in (await vectors(rt)).values())
    finally:
        await rt.close()
    run = lambda model, *a: asyncio.to_thread(_cli, db_env, tmp_path, model, *a)  # noqa: E731

    refused = await run("hash:256", "query", QUESTION[0])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    lines = [ln for ln in refused.stderr.splitlines() if ln.startswith("kb:")]
    assert lines == ["kb: error: database vectors come from 'hash:384' (384-d); configured embedder is 'hash:256' "
                     "(256-d): set KB_EMBEDDING_MODEL back, or run 'kb reembed' to re-embed every chunk"]

    wrong = await run("hash:256", "reembed", "--collection", "default")
    assert wrong.returncode == 2 and "--collection re-embeds with the recorded embedder only" in wrong.stderr

    done = await run("hash:256", "reembed")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"re-embedded {total} vectors of every collection with 'hash:256' (256-d)" in done.stdout

    answered = await run("hash:256", "query", QUESTION[0], "--json")
    assert answered.returncode == 0, answered.stderr[-2000:]
    assert QUESTION[1] in answered.stdout
