"""``KB_VECTOR_TYPE=halfvec`` (issue 26 item 2) on the real embedded Postgres: a new database stores and indexes
half-precision vectors; an existing one is converted at start (columns retyped, HNSW rebuilt with the halfvec
operator class) and back; queries answer the same; ``kb reembed`` keeps the stored type; a bad value is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ingest.reembed import reembed, set_build_memory, vector_type
from ingest.store import SQL_VECTOR_COLUMN_TYPES
from kb.core.errors import ConfigError
from kb.core.settings import get_settings
from kb.runtime import Runtime, open_runtime
from tests.conftest import SetEnv
from tests.test_reembed import A, B, answer_cites, ingest, vectors, write_corpus

SQL_INDEXES = "SELECT indexdef FROM pg_indexes WHERE tablename = 'chunks' AND indexdef ~ 'USING hnsw'"


async def stored(rt: Runtime) -> tuple[set[str], list[str]]:
    """The stored types of the three vector columns, and the chunk HNSW index definitions."""
    types = {r["type_name"] for r in await rt.pool.fetch(SQL_VECTOR_COLUMN_TYPES)}
    return types, [r["indexdef"] for r in await rt.pool.fetch(SQL_INDEXES)]


async def test_a_new_database_stores_halfvec(db_env: str, set_env: SetEnv, tmp_path: Path) -> None:
    set_env(KB_VECTOR_TYPE="halfvec")
    async with open_runtime(get_settings(), embedder=A) as rt:
        types, indexes = await stored(rt)
        assert types == {"halfvec"} and len(indexes) == 1 and "halfvec_cosine_ops" in indexes[0]
        assert set((await ingest(rt, write_corpus(tmp_path / "docs"))).values()) == {("ok", None)}
        got = await vectors(rt)
        vec = next(iter(got["chunks"].values()))
        assert vec.dtype == np.float32 and vec.shape == (384,)
        assert await answer_cites(rt)
        async with rt.pool.acquire() as conn, conn.transaction():
            await conn.execute("SET LOCAL enable_seqscan = off")  # a few rows: make the planner show its choice
            plan = await conn.fetch("EXPLAIN SELECT id FROM chunks ORDER BY embedding <=> $1 LIMIT 10",
                                    np.ones(384, dtype=np.float32))
        assert "chunks_embedding_hnsw" in " ".join(r[0] for r in plan)  # the query vector is cast to halfvec: the index serves


async def test_an_existing_database_is_converted_and_back(db_env: str, set_env: SetEnv, tmp_path: Path) -> None:
    async with open_runtime(get_settings(), embedder=A) as rt:
        assert set((await ingest(rt, write_corpus(tmp_path / "docs"))).values()) == {("ok", None)}
        full = await vectors(rt)
        assert await vector_type(rt.pool) == "vector"
    set_env(KB_VECTOR_TYPE="halfvec")
    async with open_runtime(get_settings(), embedder=A) as rt:
        types, indexes = await stored(rt)
        assert types == {"halfvec"} and "halfvec_cosine_ops" in indexes[0]
        half = await vectors(rt)
        for kind in ("chunks", "nodes", "documents"):
            assert half[kind].keys() == full[kind].keys() and half[kind]
            for key, vec in full[kind].items():  # float16: about three significant digits
                assert np.allclose(half[kind][key], vec, atol=2e-3), (kind, key)
                assert not np.array_equal(half[kind][key], vec) or not vec.any()
        assert await answer_cites(rt)
        async with rt.pool.acquire() as conn, conn.transaction():  # the rebuild's memory: 1 GB at least
            assert await set_build_memory(conn) == 1024
            assert await conn.fetchval("SHOW maintenance_work_mem") == "1GB"
        result = await reembed(rt.pool, B)  # another dimension: the stored type is kept
        assert result.dimension == 256
        types, indexes = await stored(rt)
        assert types == {"halfvec"} and "halfvec_cosine_ops" in indexes[0]
    set_env(KB_VECTOR_TYPE="vector")
    async with open_runtime(get_settings(), embedder=B) as rt:
        types, indexes = await stored(rt)
        assert types == {"vector"} and "vector_cosine_ops" in indexes[0]
        assert await answer_cites(rt)


async def test_a_bad_vector_type_is_refused(db_env: str, set_env: SetEnv) -> None:
    set_env(KB_VECTOR_TYPE="float8")
    with pytest.raises(ConfigError, match="KB_VECTOR_TYPE must be vector or halfvec"):
        await open_runtime(get_settings(), embedder=A)
