"""What the router knows about a collection's documents, read once per change of the collection.

A ``Catalog`` holds every document's name, description and metadata, the distinct metadata values
(``KnownValues``, with an index of the company names) and the BM25 index over names, titles and descriptions. ``Catalogs`` (one per query
pipeline, owned by the runtime) keeps one per collection, valid while the collection's ``CollectionStamp``
is unchanged: a query costs one stamp query, and a change of the collection one rebuild.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
import numpy as np
import structlog

from kb.core.collections import CollectionStamp, collection_stamp
from kb.core.lexicon import is_zh
from kb.core.text import tokenize
from router import store
from router.metadata import COMPANY_KEYS, ENTITY_KEY, Entity, KnownValues, company_entities, company_index
from router.scoring import PostingsBM25
from router.store import DocFields

log = structlog.get_logger("router.catalog")


@dataclass(frozen=True)
class DescriptionIndex:
    """Every document of a collection by id: BM25 over ``name + title + description`` and the description
    embeddings (cosine read in memory: exact, where Postgres scanned every row of ``documents`` per query)."""

    ids: list[int]
    names: list[str]
    bm25: PostingsBM25 | None
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    """Unit-normalised description embeddings, one row per id (zeros where a document has none)."""
    has_vector: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def nearest(self, qvec: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The positions (in ``ids``) of the ``k`` descriptions nearest the question, nearest first, and their
        cosines."""
        rows = np.flatnonzero(self.has_vector)
        if not len(rows):
            return rows, np.zeros(0)
        q = np.asarray(qvec, dtype=np.float32)
        sims = (self.vectors @ (q / (np.linalg.norm(q) or 1.0)))[rows]
        order = np.argsort(-sims, kind="stable")[:k]
        return rows[order], sims[order].astype(np.float64)


@dataclass(frozen=True)
class Catalog:
    """One version of a collection's documents."""

    collection_id: int
    stamp: CollectionStamp
    docs: dict[int, DocFields]
    known: KnownValues
    descriptions: DescriptionIndex
    entities: dict[str, Entity] = field(default_factory=dict)
    """Each company value → its entity (``router.metadata.company_entities``), as routing and facts join them."""
    reports: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Each company's documents (an entity's spellings and former names as one), latest period first: the
    entity (``KnownValues.entity``) → ids."""

    def company_reports(self, doc_id: int) -> tuple[int, ...]:
        """The documents of the company a document is about, latest period first (empty when it names none)."""
        fields = self.docs.get(doc_id)
        company = str(fields.metadata.get("company") or "") if fields else ""
        return self.reports.get(self.known.entity(company), ()) if company else ()

    def fields(self, doc_ids: Sequence[int]) -> dict[int, DocFields]:
        """Name, description and metadata of the given documents (those of the collection)."""
        return {d: f for d in doc_ids if (f := self.docs.get(d)) is not None}

    def names(self, doc_ids: Sequence[int]) -> dict[int, str]:
        return {d: f.name for d, f in self.fields(doc_ids).items()}

    def metadata(self, doc_ids: Sequence[int]) -> dict[int, dict]:
        return {d: f.metadata for d, f in self.fields(doc_ids).items()}

    @functools.cached_property
    def entity_names(self) -> tuple[str, ...]:
        """Each company of the collection once, by its entity's name, shortest first (follow-ups offer them)."""
        names = {e.name for e in self.entities.values()}
        return tuple(sorted(names, key=lambda n: (len(n), n)))

    @functools.cached_property
    def languages(self) -> frozenset[str]:
        """The languages the documents are written in ("en", "zh"), each document's by its description (else
        its name)."""
        return frozenset("zh" if is_zh(f.description or f.name) else "en" for f in self.docs.values())

    @functools.cached_property
    def companies(self) -> dict[str, tuple[str, ...]]:
        """Each company the documents name (a renamed company once, by its latest name) → the tickers and other
        names its documents record (how a question may write it: ``router.reading``)."""
        aliases: dict[str, set[str]] = {}
        for f in self.docs.values():
            if company := str(f.metadata.get("company") or ""):
                entity = self.known.entity(company)  # a renamed company is one company under all its names
                found = aliases.setdefault(entity, set())
                found.update(str(v) for v in (company, f.metadata.get("ticker"), f.metadata.get(ENTITY_KEY),
                                              *(f.metadata.get("also_known_as") or ())) if v and str(v) != entity)
        return {name: tuple(sorted(a)) for name, a in aliases.items()}


class Catalogs:
    """The current ``Catalog`` of each collection, rebuilt once per change however many queries arrive."""

    def __init__(self, pool: asyncpg.Pool, max_collections: int = 256) -> None:
        self.pool = pool
        self.max_collections = max_collections
        self._current: dict[int, Catalog] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def get(self, collection_id: int) -> Catalog:
        """The catalog of the collection as it is now (one stamp query; a rebuild when it changed)."""
        stamp = await collection_stamp(self.pool, collection_id)
        cached = self._current.get(collection_id)
        if cached is not None and cached.stamp == stamp:
            return cached
        async with self._locks.setdefault(collection_id, asyncio.Lock()):
            cached = self._current.get(collection_id)
            if cached is not None and cached.stamp == stamp:
                return cached
            catalog = await self._build(collection_id, stamp)
            if len(self._current) >= self.max_collections:
                self._current.clear()
            self._current[collection_id] = catalog
            return catalog

    async def _build(self, collection_id: int, stamp: CollectionStamp) -> Catalog:
        rows = await store.collection_documents(self.pool, collection_id)
        values: dict[str, dict[str, int]] = {}
        for row in await store.metadata_values(self.pool, collection_id):
            values.setdefault(row["key"], {})[row["value"]] = int(row["n"])
        index = await asyncio.to_thread(_description_index, rows)
        docs = {int(r["id"]): DocFields(r["name"], r["description"], store.json_object(r["metadata"])) for r in rows}
        log.debug("router.catalog_built", collection_id=collection_id, documents=len(docs))
        found = company_entities(
            (str(f.metadata["company"]), [str(n) for n in f.metadata.get("also_known_as") or () if n],
             str(f.metadata.get(ENTITY_KEY) or "")) for f in docs.values() if f.metadata.get("company"))
        groups, other_names = found.groups, found.extra
        companies = {k: company_index(k, values[k], other_names if k == "company" else None)
                     for k in COMPANY_KEYS if k in values}
        known = KnownValues(values=values, doc_count=stamp.documents, companies=companies, groups=groups)
        return Catalog(collection_id=collection_id, stamp=stamp, docs=docs, descriptions=index, known=known,
                       entities=found.by_value, reports=_reports(docs, known))


def _reports(docs: dict[int, DocFields], known: KnownValues) -> dict[str, tuple[int, ...]]:
    by_company: dict[str, list[tuple[str, int]]] = {}
    for doc_id, f in docs.items():
        if company := str(f.metadata.get("company") or ""):
            end = str(f.metadata.get("period_end_date") or f.metadata.get("report_date") or "")
            by_company.setdefault(known.entity(company), []).append((end, doc_id))
    return {k: tuple(d for _, d in sorted(v, reverse=True)) for k, v in by_company.items()}


def _description_index(rows: Sequence[asyncpg.Record]) -> DescriptionIndex:
    corpus = [tokenize(f"{r['name']} {r['title']} {r['description']}") or ["\u2205"] for r in rows]
    embedded = [r["description_embedding"] for r in rows if r["description_embedding"] is not None]
    dim = len(embedded[0]) if embedded else 0
    vectors = np.zeros((len(rows), dim), dtype=np.float32)
    has_vector = np.zeros(len(rows), dtype=bool)
    for i, r in enumerate(rows):
        if r["description_embedding"] is not None and len(r["description_embedding"]) == dim:
            v = np.asarray(r["description_embedding"], dtype=np.float32)
            vectors[i] = v / (np.linalg.norm(v) or 1.0)
            has_vector[i] = True
    return DescriptionIndex(ids=[r["id"] for r in rows], names=[r["name"] for r in rows],
                            bm25=PostingsBM25(corpus) if corpus else None, vectors=vectors, has_vector=has_vector)
