"""Collections: lookup by name, creation, listing, and the stamp that says a collection changed.

One home for both libraries: ingest writes into collections and the router reads them, and neither may
import the other. Caches over a collection's contents (description index, metadata values, flat BM25)
are valid while its ``CollectionStamp`` is unchanged.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec
import structlog

from kb.core.errors import ConflictError, NotFoundError, ValidationError

log = structlog.get_logger("kb.core.collections")

SQL_LIST_COLLECTIONS = """
SELECT c.id, c.name, c.description, c.created_at, count(d.id) AS documents
FROM collections c LEFT JOIN documents d ON d.collection_id = c.id
GROUP BY c.id ORDER BY c.name"""
SQL_GET_COLLECTION = "SELECT id, name, description, created_at FROM collections WHERE name = $1"
SQL_CREATE_COLLECTION = """
INSERT INTO collections (name, description) VALUES ($1, $2)
ON CONFLICT (name) DO NOTHING RETURNING id, name, description, created_at"""
SQL_COLLECTION_STAMP = """
SELECT count(*) AS n, coalesce(max(id), 0) AS max_id, coalesce(max(updated_at), 'epoch'::timestamptz) AS updated,
       coalesce(sum(chunk_count), 0) AS chunks
FROM documents WHERE collection_id = $1"""


class Collection(msgspec.Struct, frozen=True):
    id: int
    name: str
    description: str
    created_at: datetime
    documents: int = 0


class CollectionStamp(msgspec.Struct, frozen=True):
    """Changes whenever a document of the collection is added, replaced or deleted."""

    documents: int
    max_id: int
    updated: datetime
    chunks: int = 0
    """The documents' chunks (read with the stamp: what DocScore's hit count scales with)."""


async def list_collections(pool: asyncpg.Pool) -> list[Collection]:
    return [Collection(**dict(r)) for r in await pool.fetch(SQL_LIST_COLLECTIONS)]


async def get_collection(pool: asyncpg.Pool | asyncpg.Connection, name: str) -> Collection:
    """The named collection, or ``NotFoundError``."""
    row = await pool.fetchrow(SQL_GET_COLLECTION, name)
    if row is None:
        raise NotFoundError(f"collection {name!r} does not exist")
    return Collection(**dict(row))


async def lookup_collection_id(pool: asyncpg.Pool | asyncpg.Connection, name: str) -> int:
    """The named collection's id, or ``NotFoundError``."""
    return (await get_collection(pool, name)).id


async def create_collection(pool: asyncpg.Pool, name: str, description: str = "") -> Collection:
    try:
        row = await pool.fetchrow(SQL_CREATE_COLLECTION, name, description)
    except asyncpg.CheckViolationError as exc:
        raise ValidationError(
            f"invalid collection name {name!r}: use letters, digits, '_', '.', '-' (max 64)"
        ) from exc
    if row is None:
        raise ConflictError(f"collection {name!r} already exists")
    log.info("store.collection_created", collection=name)
    return Collection(**dict(row))


async def ensure_collection(pool: asyncpg.Pool, name: str) -> Collection:
    """Get or create a collection (used by ingest jobs and benchmarks)."""
    try:
        return await get_collection(pool, name)
    except NotFoundError:
        try:
            return await create_collection(pool, name)
        except ConflictError:
            return await get_collection(pool, name)


async def collection_stamp(pool: asyncpg.Pool | asyncpg.Connection, collection_id: int) -> CollectionStamp:
    """The collection's change stamp: document count, newest document id, last update, chunk count."""
    r = await pool.fetchrow(SQL_COLLECTION_STAMP, collection_id)
    return CollectionStamp(documents=int(r["n"]), max_id=int(r["max_id"]), updated=r["updated"],
                           chunks=int(r["chunks"]))
