"""Which embedder the database's vectors come from: read, adopt on first start, refuse a different one."""

from __future__ import annotations

import asyncpg
import msgspec
import structlog

from kb.core.errors import ConfigError

log = structlog.get_logger("kb.core.embedder_record")

SQL_READ = "SELECT model_id, dimension, generation FROM embedder_state"
SQL_ADOPT = """
INSERT INTO embedder_state (model_id, dimension) VALUES ($1, $2) ON CONFLICT (singleton) DO NOTHING"""
SQL_COLUMN_DIM = """
SELECT atttypmod FROM pg_attribute
WHERE attrelid = 'chunks'::regclass AND attname = 'embedding' AND NOT attisdropped"""
UNRECORDED = "(unrecorded)"
LEGACY_MODEL = "all-MiniLM-L6-v2"
"""The embedder of a database whose chunks predate the record: the only default there was then."""


class EmbedderRecord(msgspec.Struct, frozen=True):
    """The embedder behind the stored vectors; ``generation`` grows with every ``kb reembed``."""

    model_id: str
    dimension: int
    generation: int = 0

    def describe(self) -> str:
        who = "an unrecorded embedder" if self.model_id == UNRECORDED else repr(self.model_id)
        return f"{who} ({self.dimension}-d)"

    def matches(self, model_id: str, dimension: int) -> bool:
        return self.model_id == model_id and self.dimension == dimension


class EmbedderMismatchError(ConfigError):
    """The configured embedder is not the one the stored vectors come from."""

    title = "Embedder mismatch"


def mismatch_message(recorded: EmbedderRecord, model_id: str, dimension: int) -> str:
    """The one line that names the fix."""
    return (f"database vectors come from {recorded.describe()}; configured embedder is {model_id!r} "
            f"({dimension}-d): set KB_EMBEDDING_MODEL back, or run 'kb reembed' to re-embed every chunk")


async def read_record(conn: asyncpg.Pool | asyncpg.Connection) -> EmbedderRecord | None:
    """The recorded embedder, or None when none is recorded yet."""
    row = await conn.fetchrow(SQL_READ)
    return EmbedderRecord(row["model_id"], row["dimension"], row["generation"]) if row else None


SQL_HAS_VECTORS = "SELECT EXISTS (SELECT 1 FROM chunks)"


async def recorded_model(conn: asyncpg.Pool | asyncpg.Connection) -> str | None:
    """The model id the stored vectors come from; for chunks stored before the record existed (a database from
    before ``sql/0006``), the default embedder of that time (``LEGACY_MODEL``); None for a database without
    vectors (new, before or after its migrations)."""
    if await conn.fetchval("SELECT to_regclass('embedder_state')") is not None:
        record = await read_record(conn)
        if record is not None:
            return record.model_id
    if await conn.fetchval("SELECT to_regclass('chunks')") is not None and await conn.fetchval(SQL_HAS_VECTORS):
        return LEGACY_MODEL
    return None


async def ensure_embedder(pool: asyncpg.Pool, model_id: str, dimension: int, *,
                          allow_change: bool = False) -> EmbedderRecord:
    """The record after this start: adopted when missing and the vector columns fit, else checked.

    A different embedder raises ``EmbedderMismatchError`` unless ``allow_change`` (``kb reembed``), which
    gets the record as it is (or, when none fits, the column dimension with an unrecorded model).
    """
    record = await read_record(pool)
    if record is None:
        column_dim = int(await pool.fetchval(SQL_COLUMN_DIM))
        if column_dim == dimension:
            await pool.execute(SQL_ADOPT, model_id, dimension)
            record = await read_record(pool)
            assert record is not None
            if record.matches(model_id, dimension):
                log.info("db.embedder_adopted", model=model_id, dimension=dimension)
        else:
            record = EmbedderRecord(UNRECORDED, column_dim)
    if not record.matches(model_id, dimension) and not allow_change:
        raise EmbedderMismatchError(mismatch_message(record, model_id, dimension))
    return record
