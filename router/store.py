"""The router's read side: every query it runs over chunks, nodes and documents, in one home.

Dense top-k is written in two ways, and the choice is explicit (``Scan``):

- ``index``: ``ORDER BY embedding <=> q``, which pgvector answers from the HNSW index (approximate; for a
  whole collection, inside a transaction prepared by ``vector_session``);
- ``exact``: ``ORDER BY 1 - (embedding <=> q) DESC``, which the index cannot serve: an exact scan of the
  rows the filter leaves (a few documents).

Lexical search is Postgres full text weighted by document-level IDF (``QueryTerms``); the in-memory
rank-bm25 of in-node retrieval and the flat baseline read chunk texts from here.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg
import msgspec
import numpy as np

from kb.core.errors import ValidationError
from kb.core.text import tokenize
from router.policy import ROUTING
from router.types import Condition

Scan = Literal["index", "exact"]
METADATA_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""What a metadata key may be (keys become $n parameters, never SQL text)."""


def _dense_sql(where: str, scan: Scan) -> str:
    order = "c.embedding <=> $1" if scan == "index" else "1 - (c.embedding <=> $1) DESC"
    return f"""
SELECT c.id, c.document_id, 1 - (c.embedding <=> $1) AS sim
FROM chunks c WHERE {where}
ORDER BY {order} LIMIT $3"""


# dense top-k over chunks: (scope, scan) → statement; $1 query vector, $2 collection id or document ids, $3 k
SQL_DENSE_CHUNKS: dict[tuple[str, Scan], str] = {
    (scope, scan): _dense_sql(where, scan)
    for scope, where in (("collection", "c.collection_id = $2"), ("documents", "c.document_id = ANY($2::bigint[])"))
    for scan in ("index", "exact")
}
# the same, with what a citation needs (exact: a few routed documents)
# the chunks of some documents on financial statement pages of some kinds, nearest the question first
SQL_STATEMENT_CHUNKS = """
WITH top AS (SELECT c.id, 1 - (c.embedding <=> $3) AS dense FROM chunks c
             WHERE c.document_id = ANY($1::bigint[]) AND c.statement = ANY($2::text[])
             ORDER BY 1 - (c.embedding <=> $3) DESC, c.id LIMIT $4)
SELECT c.id, c.document_id, c.node_id, c.text, c.page, c.page_end, c.heading_path, top.dense,
       n.start_index, n.end_index, n.unit, c.statement
FROM top JOIN chunks c ON c.id = top.id JOIN nodes n ON n.document_id = c.document_id AND n.node_id = c.node_id
ORDER BY top.dense DESC, c.id"""
SQL_CHUNK_SIMS = "SELECT c.id, 1 - (c.embedding <=> $1) AS sim FROM chunks c WHERE c.id = ANY($2::bigint[])"
SQL_SET_EF = "SELECT set_config('hnsw.ef_search', $1, true)"
SQL_SET_ITERATIVE = "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"

# Full text in two steps: candidate rows come from the selective lexemes only ($6), are scored with
# every lexeme's IDF, and only the winners pay for the vector distance. Exact when the k-th score is
# at least the summed IDF of the unused lexemes (checked by ``text_chunks``, else the full statement runs).
_TEXT_CHUNKS = """
WITH q AS (SELECT string_agg(quote_literal(x), ' | ')::tsquery AS q FROM unnest($6::text[]) AS x),
top AS (
    SELECT c.id, c.document_id,
           (SELECT coalesce(sum(w.idf), 0) FROM unnest($1::text[], $5::float8[]) AS w(lx, idf)
            WHERE c.tsv @@ quote_literal(w.lx)::tsquery) AS score
    FROM {from_}, q WHERE {where}c.tsv @@ q.q
    ORDER BY {order} LIMIT $4
)
SELECT t.id, t.document_id, 1 - (c.embedding <=> $3) AS sim, t.score FROM top t JOIN chunks c ON c.id = t.id"""
# A few documents' chunks are read by document first (the subquery's OFFSET 0 keeps the planner from
# intersecting them with the GIN index: a common lexeme matches a million chunks of a large collection, and
# the bitmap of those cost 130 ms where a document's 200 chunks cost 1.5 ms); many documents use the index.
_DOC_CHUNKS = "(SELECT id, document_id, node_id, tsv FROM chunks WHERE document_id = ANY($2::bigint[]) OFFSET 0) c"
# Ties on the score (chunks matching the same lexemes) are common. Over the whole collection they go to the
# chunk with fewer distinct words (the match is a larger share of it, as BM25's length normalisation has it),
# then the earlier one; inside a few documents to the earlier chunk. Never to the order rows happen to be
# stored in, which every rewrite of the table changes.
SQL_TEXT_CHUNKS = {
    "collection": _TEXT_CHUNKS.format(from_="chunks c", where="c.collection_id = $2 AND ",
                                      order="score DESC, length(c.tsv), c.id"),
    "documents": _TEXT_CHUNKS.format(from_="chunks c", where="c.document_id = ANY($2::bigint[]) AND ",
                                     order="score DESC, c.id"),
    "few documents": _TEXT_CHUNKS.format(from_=_DOC_CHUNKS, where="", order="score DESC, c.id"),
}
FEW_DOCUMENTS = 2000
"""Up to this many documents, full text reads their chunks by document (``_DOC_CHUNKS``), not by the index."""
SQL_NODE_TEXT_HITS = """
WITH q AS (SELECT string_agg(quote_literal(x), ' | ')::tsquery AS q FROM unnest($2::text[]) AS x)
SELECT c.node_id,
       (SELECT coalesce(sum(w.idf), 0) FROM unnest($2::text[], $4::float8[]) AS w(lx, idf)
        WHERE c.tsv @@ quote_literal(w.lx)::tsquery) AS score
FROM (SELECT id, node_id, tsv FROM chunks WHERE document_id = $1 OFFSET 0) c, q
WHERE c.tsv @@ q.q ORDER BY score DESC, c.id LIMIT $3"""
# the question's tokens ($2: kb.core.text.tokenize, the tokens chunks are indexed by) with their document counts
SQL_QUERY_LEXEMES = """
SELECT q.lexeme, coalesce(l.df, 0) AS df
FROM unnest($2::text[]) AS q(lexeme)
LEFT JOIN lexeme_df l ON l.collection_id = $1 AND l.lexeme = q.lexeme"""

# nodes and chunks of chosen nodes
SQL_DOC_NODES = """
SELECT n.node_id, n.parent_id, n.ordinal, n.level, n.title, n.path, n.summary, n.start_index, n.end_index, n.unit, n.is_leaf,
       n.statements,
       EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = n.document_id AND c.node_id = n.node_id) AS has_text
FROM nodes n WHERE n.document_id = $1 ORDER BY n.ordinal"""
SQL_NODE_TEXTS = """
SELECT node_id, text, start_index, end_index, unit FROM nodes WHERE document_id = $1 AND node_id = ANY($2::text[])"""
SQL_CHUNK_DETAILS = """
SELECT c.id, c.document_id, d.name, c.node_id, c.heading_path, c.text, c.page, c.page_end, n.start_index, n.end_index, n.unit
FROM chunks c
JOIN documents d ON d.id = c.document_id
JOIN nodes n ON n.document_id = c.document_id AND n.node_id = c.node_id
WHERE c.id = ANY($1::bigint[])"""
SQL_COLLECTION_TEXTS = "SELECT c.id, c.text FROM chunks c WHERE c.collection_id = $1 ORDER BY c.id"

# documents
SQL_COLLECTION_DOCS = "SELECT count(*) FROM documents WHERE collection_id = $1"
SQL_METADATA_VALUES = """
SELECT kv.key, kv.value, count(*) AS n
FROM documents d, jsonb_each_text(d.metadata) kv
WHERE d.collection_id = $1 AND jsonb_typeof(d.metadata -> kv.key) IN ('string', 'number', 'boolean')
GROUP BY kv.key, kv.value"""
# a phrase is absent when one of its tokens ($2 phrase, $3 token: one row per token) is in no document
SQL_PHRASE_DF = """
SELECT x.phrase, bool_or(coalesce(l.df, 0) = 0) AS absent, count(*) AS lexemes
FROM unnest($2::text[], $3::text[]) AS x(phrase, lexeme)
LEFT JOIN lexeme_df l ON l.collection_id = $1 AND l.lexeme = x.lexeme
GROUP BY x.phrase"""
SQL_FILTER_BASE = "SELECT d.id, d.name FROM documents d WHERE d.collection_id = $1"
SQL_COLLECTION_DOCUMENTS = """
SELECT id, name, title, description, metadata, description_embedding FROM documents WHERE collection_id = $1 ORDER BY id"""


# --------------------------------------------------------------------------- vectors


async def vector_session(conn: asyncpg.Connection, *, ef_search: int, k: int, iterative: bool) -> None:
    """HNSW settings for the current transaction: ``ef_search`` at least ``k``, and (pgvector ≥ 0.8) an
    iterative scan so a filtered index scan still returns ``k`` rows."""
    await conn.execute(SQL_SET_EF, str(max(ef_search, k)))
    if iterative:
        await conn.execute(SQL_SET_ITERATIVE)


async def dense_chunks(conn: asyncpg.Connection | asyncpg.Pool, qvec: np.ndarray, k: int, *, scan: Scan,
                       collection_id: int | None = None, doc_ids: Sequence[int] | None = None) -> list[asyncpg.Record]:
    """Top-``k`` chunks by cosine (``id``, ``document_id``, ``sim``) of a collection or of some documents."""
    if (collection_id is None) == (doc_ids is None):
        raise ValueError("dense_chunks: give exactly one of collection_id and doc_ids")
    scope, arg = ("collection", collection_id) if doc_ids is None else ("documents", list(doc_ids))
    return await conn.fetch(SQL_DENSE_CHUNKS[(scope, scan)], qvec, arg, k)


async def statement_chunks(pool: asyncpg.Pool, doc_ids: Sequence[int], kinds: Sequence[str], qvec: np.ndarray,
                           limit: int) -> list[asyncpg.Record]:
    """Chunks on financial statement pages of ``kinds`` inside some documents, nearest the question first."""
    return await pool.fetch(SQL_STATEMENT_CHUNKS, list(doc_ids), sorted(kinds), qvec, limit)


class Nearest(msgspec.Struct, frozen=True):
    """One chunk near a question: its id, node and cosine."""

    id: int
    node_id: str
    sim: float


SQL_DOC_CHUNK_ROWS = """
SELECT c.id, c.document_id, c.node_id, c.ordinal, c.text, c.page, c.page_end, c.heading_path,
       n.start_index, n.end_index, n.unit, c.statement
FROM chunks c JOIN nodes n ON n.document_id = c.document_id AND n.node_id = c.node_id
WHERE c.document_id = $1 ORDER BY c.ordinal, c.id"""
SQL_DOC_CHUNK_VECTORS = "SELECT c.embedding FROM chunks c WHERE c.document_id = $1 ORDER BY c.ordinal, c.id"
SQL_DOC_NODE_VECTORS = """
SELECT node_id, embedding FROM nodes WHERE document_id = $1 AND embedding IS NOT NULL ORDER BY ordinal, node_id"""
SQL_DOC_CHUNK_COUNT = "SELECT chunk_count FROM documents WHERE id = $1"


async def doc_chunk_snapshot(pool: asyncpg.Pool, doc_id: int) -> tuple[list[asyncpg.Record], list[np.ndarray],
                                                                       list[tuple[str, np.ndarray]], int | None]:
    """One document's chunk rows in order (without vectors), their vectors in the same order, its nodes'
    vectors and the chunk count its row records (None: no such document here, e.g. on a lagging replica) —
    read in one snapshot (``router.doccache``: kept in the process between queries)."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        rows = await conn.fetch(SQL_DOC_CHUNK_ROWS, doc_id)
        vectors = [r["embedding"] for r in await conn.fetch(SQL_DOC_CHUNK_VECTORS, doc_id)]
        nodes = [(r["node_id"], r["embedding"]) for r in await conn.fetch(SQL_DOC_NODE_VECTORS, doc_id)]
        recorded = await conn.fetchval(SQL_DOC_CHUNK_COUNT, doc_id)
    return rows, vectors, nodes, recorded


async def chunk_sims(pool: asyncpg.Pool, qvec: np.ndarray, chunk_ids: Sequence[int]) -> dict[int, float]:
    """Cosine of the question to given chunks."""
    return {int(r["id"]): float(r["sim"]) for r in await pool.fetch(SQL_CHUNK_SIMS, qvec, list(chunk_ids))}


# --------------------------------------------------------------------------- full text


@dataclass(frozen=True)
class QueryTerms:
    """The question's full-text lexemes that discriminate between documents, with IDF weights."""

    lexemes: list[str]
    idf: list[float]
    selective: list[str] = field(default_factory=list)  # rarest lexemes whose df sum ≤ 5% of documents

    @property
    def total(self) -> float:
        return sum(self.idf) or 1.0

    @property
    def unused_weight(self) -> float:
        """The most a chunk matching none of the selective lexemes can score."""
        sel = set(self.selective)
        return sum(w for lx, w in zip(self.lexemes, self.idf, strict=True) if lx not in sel)


async def query_terms(pool: asyncpg.Pool, collection_id: int, question: str, max_terms: int = 10, *,
                      n_docs: int | None = None) -> QueryTerms:
    """Tokens of the question (``kb.core.text.tokenize``, as chunks are indexed) weighted by document-level IDF.

    Lexemes found in no document are dropped, and so are those in most documents of a larger
    collection (they cannot discriminate and make full-text scans slow). ``n_docs``: the collection's
    document count when the caller has it.
    """
    rows = await pool.fetch(SQL_QUERY_LEXEMES, collection_id, list(dict.fromkeys(tokenize(question))))
    if n_docs is None:  # the caller's catalog knows it
        n_docs = int(await pool.fetchval(SQL_COLLECTION_DOCS, collection_id))
    scored: list[tuple[float, str, int]] = []
    for r in rows:
        df = int(r["df"])
        if df <= 0 or (n_docs >= 5 and df > ROUTING.common_lexeme_share * n_docs):
            continue
        scored.append((math.log(1 + (n_docs - df + 0.5) / (df + 0.5)), r["lexeme"], df))
    scored.sort(key=lambda x: (-x[0], x[1]))
    top = scored[:max_terms]
    selective: list[str] = []
    budget, used = max(1.0, ROUTING.selective_lexeme_budget * n_docs), 0
    for _, lx, df in top:  # rarest first
        if selective and used + df > budget:
            break
        selective.append(lx)
        used += df
    return QueryTerms(lexemes=[lx for _, lx, _ in top], idf=[w for w, _, _ in top], selective=selective)


async def text_chunks(conn: asyncpg.Connection, terms: QueryTerms, qvec: np.ndarray, k: int, *,
                      collection_id: int | None = None, doc_ids: Sequence[int] | None = None) -> list[asyncpg.Record]:
    """Top-``k`` chunks by IDF-weighted lexeme matches (``id``, ``document_id``, ``sim``, ``score``)."""
    if not terms.lexemes:
        return []
    if doc_ids is None:
        scope, arg = "collection", collection_id
    else:
        arg = list(doc_ids)
        scope = "few documents" if len(arg) <= FEW_DOCUMENTS else "documents"
    sql = SQL_TEXT_CHUNKS[scope]
    rows = await conn.fetch(sql, terms.lexemes, arg, qvec, k, terms.idf, terms.selective)
    exact = len(rows) >= k and min(float(r["score"]) for r in rows) >= terms.unused_weight
    if not exact and terms.unused_weight > 0:  # rare: fall back to every lexeme as a candidate source
        rows = await conn.fetch(sql, terms.lexemes, arg, qvec, k, terms.idf, terms.lexemes)
    return rows


async def node_text_hits(pool: asyncpg.Pool, doc_id: int, terms: QueryTerms, limit: int) -> list[asyncpg.Record]:
    """(``node_id``, ``score``) of one document's chunks matching the question's lexemes."""
    if not terms.lexemes:
        return []
    return await pool.fetch(SQL_NODE_TEXT_HITS, doc_id, terms.lexemes, limit, terms.idf)


# --------------------------------------------------------------------------- nodes and chunks


SQL_NODE_SPANS = """
SELECT n.document_id, n.node_id, n.start_index, n.end_index, n.unit FROM nodes n
JOIN unnest($1::bigint[], $2::text[]) AS k(doc_id, node_id) ON n.document_id = k.doc_id AND n.node_id = k.node_id"""


async def node_spans(pool: asyncpg.Pool, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], tuple[int, int, str]]:
    """(document id, node id) → (start, end, unit): where each of those nodes lies (pages or lines)."""
    if not keys:
        return {}
    rows = await pool.fetch(SQL_NODE_SPANS, [d for d, _ in keys], [n for _, n in keys])
    return {(r["document_id"], r["node_id"]): (r["start_index"], r["end_index"], r["unit"]) for r in rows}


async def doc_nodes(pool: asyncpg.Pool, doc_id: int) -> list[asyncpg.Record]:
    """A document's nodes in order (their cosines to a question: ``router.doccache``)."""
    return await pool.fetch(SQL_DOC_NODES, doc_id)


async def node_texts(pool: asyncpg.Pool, doc_id: int, node_ids: Sequence[str]) -> list[asyncpg.Record]:
    """The own text (and range) of some nodes of one document."""
    return await pool.fetch(SQL_NODE_TEXTS, doc_id, list(node_ids))


async def chunk_details(pool: asyncpg.Pool, chunk_ids: Sequence[int]) -> dict[int, asyncpg.Record]:
    """Text, document name, section and pages of given chunks."""
    return {int(r["id"]): r for r in await pool.fetch(SQL_CHUNK_DETAILS, list(chunk_ids))}


async def collection_texts(pool: asyncpg.Pool, collection_id: int) -> list[asyncpg.Record]:
    """(``id``, ``text``) of every chunk of a collection, by id."""
    return await pool.fetch(SQL_COLLECTION_TEXTS, collection_id)


# --------------------------------------------------------------------------- documents


async def collection_documents(pool: asyncpg.Pool, collection_id: int) -> list[asyncpg.Record]:
    """(``id``, ``name``, ``title``, ``description``, ``metadata``, ``description_embedding``) of every document
    of a collection, by id."""
    return await pool.fetch(SQL_COLLECTION_DOCUMENTS, collection_id)


async def metadata_values(pool: asyncpg.Pool, collection_id: int) -> list[asyncpg.Record]:
    """(``key``, ``value``, ``n``): each scalar metadata value of a collection with its document count."""
    return await pool.fetch(SQL_METADATA_VALUES, collection_id)


async def phrases_not_in_collection(pool: asyncpg.Pool, collection_id: int, phrases: Sequence[str]) -> tuple[str, ...]:
    """The phrases some word of which no document of the collection contains."""
    pairs = [(p, t) for p in phrases for t in dict.fromkeys(tokenize(p))]
    rows = await pool.fetch(SQL_PHRASE_DF, collection_id, [p for p, _ in pairs], [t for _, t in pairs])
    return tuple(r["phrase"] for r in rows if r["absent"] and r["lexemes"] > 0)


def compile_conditions(collection_id: int, conditions: Sequence[Condition]) -> tuple[str, list[Any]]:
    """SQL text built only from constant fragments; keys and values are always $n parameters."""
    sql = [SQL_FILTER_BASE]
    params: list[Any] = [collection_id]

    def p(value: Any) -> str:
        params.append(value)
        return f"${len(params)}"

    for c in conditions:
        if not METADATA_KEY.match(c.key):
            raise ValidationError(f"invalid metadata key {c.key!r}")
        if c.op == "in":
            sql.append(f"AND (d.metadata ->> {p(c.key)}) = ANY({p([str(v) for v in c.value])}::text[])")
        elif c.op == "range":
            num = (f"(CASE WHEN (d.metadata ->> {p(c.key)}) ~ '^-?[0-9]+(\\.[0-9]+)?$' "
                   f"THEN (d.metadata ->> {p(c.key)})::float8 END)")
            for bound, sym in (("gte", ">="), ("lte", "<="), ("gt", ">"), ("lt", "<")):
                if bound in c.value:
                    sql.append(f"AND {num} {sym} {p(float(c.value[bound]))}")
        elif c.op == "contains":
            sql.append(f"AND strpos(lower(d.metadata ->> {p(c.key)}), lower({p(str(c.value))})) > 0")
        elif c.op == "fact":
            sql.append(_fact_exists(c.value, p))
        else:
            raise ValidationError(f"unknown operator {c.op!r}")
    return " ".join(sql) + " ORDER BY d.name", params


def _fact_exists(value: dict[str, Any], p: Any) -> str:
    """A fact condition as SQL: the document has a fact of the concept, of the period (a fiscal year, a date,
    else the document's latest period of it), within the bounds."""
    where = [f"f.document_id = d.id AND f.concept = {p(str(value['concept']))}"]
    period = str(value.get("period") or "")
    if (year := re.match(r"^(?:FY)?(\d{4})$", period, re.I)):
        where.append(f"f.months IN (0, 12) AND extract(year FROM f.period_end) = {p(int(year.group(1)))}")
    elif re.match(r"^\d{4}-\d{2}-\d{2}$", period):
        where.append(f"f.period_end = {p(dt.date.fromisoformat(period))}")
    else:
        where.append("f.period_end = (SELECT max(g.period_end) FROM facts g WHERE g.document_id = d.id "
                     "AND g.concept = f.concept)")
    for bound, sym in (("gte", ">="), ("lte", "<="), ("gt", ">"), ("lt", "<")):
        if bound in value:
            where.append(f"f.value {sym} {p(float(value[bound]))}")
    return "AND EXISTS (SELECT 1 FROM facts f WHERE " + " AND ".join(where) + ")"


SQL_DOCUMENTS_BY_REF = """
SELECT id, name FROM documents
WHERE collection_id = $1 AND (id = ANY($2::bigint[]) OR lower(name) = ANY($3::text[]))"""


async def documents_by_ref(pool: asyncpg.Pool, collection_id: int, ids: Sequence[int],
                           names: Sequence[str]) -> list[tuple[int, str]]:
    """The collection's documents among ``ids`` or named one of ``names`` (any case): (id, name) rows."""
    rows = await pool.fetch(SQL_DOCUMENTS_BY_REF, collection_id, list(ids), [n.lower() for n in names])
    return [(r["id"], r["name"]) for r in rows]


async def run_filter(pool: asyncpg.Pool, collection_id: int, conditions: Sequence[Condition]) -> list[tuple[int, str]]:
    sql, params = compile_conditions(collection_id, conditions)
    return [(r["id"], r["name"]) for r in await pool.fetch(sql, *params)]


@dataclass(frozen=True)
class DocFields:
    name: str
    description: str
    metadata: dict[str, Any]


def json_object(value: Any) -> dict[str, Any]:
    """A jsonb value as a dict (asyncpg hands jsonb over as text)."""
    return json.loads(value) if isinstance(value, str) else dict(value or {})


# ------------------------------------------------------------------------------ statement facts

SQL_DOC_FACTS = """
SELECT f.document_id, f.ordinal, f.statement, f.line_item, f.concept, f.period_end, f.months, f.period_label,
       f.value, f.printed, f.scale, f.unit, f.page, f.line, f.node_id, f.source, f.col AS column
FROM facts f WHERE f.document_id = ANY($1::bigint[]) AND f.concept = ANY($2::text[])
ORDER BY f.document_id, f.ordinal"""


async def document_facts(pool: asyncpg.Pool, doc_ids: Sequence[int], concepts: Sequence[str]) -> list[asyncpg.Record]:
    """The facts of these documents under these concepts, in each document's order."""
    return await pool.fetch(SQL_DOC_FACTS, list(doc_ids), list(concepts))


SQL_STATED_CONCEPTS = "SELECT DISTINCT concept FROM facts WHERE document_id = ANY($1::bigint[]) AND concept = ANY($2::text[])"


async def stated_concepts(pool: asyncpg.Pool, doc_ids: Sequence[int], concepts: Sequence[str]) -> set[str]:
    """Which of ``concepts`` these documents state as facts."""
    return {r["concept"] for r in await pool.fetch(SQL_STATED_CONCEPTS, list(doc_ids), list(concepts))}


SQL_COLLECTION_FACTS = """
SELECT f.document_id, f.ordinal, f.statement, f.line_item, f.concept, f.period_end, f.months, f.period_label,
       f.value, f.printed, f.scale, f.unit, f.page, f.line, f.node_id, f.source, f.col AS column
FROM facts f WHERE f.collection_id = $1 AND f.concept = ANY($2::text[])
  AND ($3::bigint[] IS NULL OR f.document_id = ANY($3::bigint[]))
ORDER BY f.document_id, f.ordinal"""


async def collection_facts(pool: asyncpg.Pool, collection_id: int, concepts: Sequence[str],
                           within: Sequence[int] | None) -> list[asyncpg.Record]:
    """The facts of a collection under these concepts (of the documents ``within``, when given)."""
    return await pool.fetch(SQL_COLLECTION_FACTS, collection_id, list(concepts),
                            list(within) if within is not None else None)


SQL_DOC_LINES = """
SELECT f.document_id, f.ordinal, f.statement, f.line_item, f.concept, f.period_end, f.months, f.period_label,
       f.value, f.printed, f.scale, f.unit, f.page, f.line, f.node_id, f.source, f.col AS column
FROM facts f WHERE f.document_id = ANY($1::bigint[]) ORDER BY f.document_id, f.ordinal"""


async def document_lines(pool: asyncpg.Pool, doc_ids: Sequence[int]) -> list[asyncpg.Record]:
    """Every stored statement line (fact) of these documents, in each document's order."""
    return await pool.fetch(SQL_DOC_LINES, list(doc_ids))


SQL_NODE_PATHS = """
SELECT n.document_id, n.node_id, n.path FROM nodes n
JOIN unnest($1::bigint[], $2::text[]) AS k(doc_id, node_id) ON n.document_id = k.doc_id AND n.node_id = k.node_id"""


async def node_paths(pool: asyncpg.Pool, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], str]:
    """(document id, node id) → the node's section path, "A › B › C" (none asked, none read)."""
    if not keys:
        return {}
    rows = await pool.fetch(SQL_NODE_PATHS, [k[0] for k in keys], [k[1] for k in keys])
    return {(r["document_id"], r["node_id"]): " › ".join(r["path"]) for r in rows}


# ------------------------------------------------------------------------------ passages

SQL_PASSAGE_CHUNKS = """
SELECT c.id, c.document_id, c.node_id, c.ordinal, c.text, c.page, coalesce(c.page_end, c.page) AS page_end,
       c.token_count, c.context, c.statement
FROM chunks c
WHERE c.id = ANY($1::bigint[])"""


async def passage_chunks(pool: asyncpg.Pool, chunk_ids: Sequence[int]) -> list[asyncpg.Record]:
    """The stored chunks a passage grows from."""
    return await pool.fetch(SQL_PASSAGE_CHUNKS, list(chunk_ids))


SQL_NEIGHBOURS = """
SELECT c.id, c.document_id, c.node_id, c.ordinal, c.text, c.page, coalesce(c.page_end, c.page) AS page_end,
       c.token_count, c.context, c.statement
FROM chunks c
JOIN unnest($1::bigint[], $2::text[], $3::int[], $4::int[]) AS w(doc, node, lo, hi)
  ON c.document_id = w.doc AND c.node_id = w.node AND c.ordinal BETWEEN w.lo AND w.hi"""


async def neighbour_chunks(pool: asyncpg.Pool, docs: Sequence[int], nodes: Sequence[str], los: Sequence[int],
                           his: Sequence[int]) -> list[asyncpg.Record]:
    """The chunks of each (document, node) whose ordinal lies within [lo, hi]."""
    return await pool.fetch(SQL_NEIGHBOURS, list(docs), list(nodes), list(los), list(his))


# some documents' chunks holding an event's words ($2), best first per document: how many of its words and its
# second words ($3) they hold, then nearness to the question ($4); at most $5 per document
SQL_EVENT_CHUNKS = """
WITH q AS (SELECT string_agg(quote_literal(x), ' | ')::tsquery AS q FROM unnest($2::text[]) AS x),
hits AS (
    SELECT c.id, c.document_id, 1 - (c.embedding <=> $4) AS sim,
           (SELECT count(*) FROM unnest($2::text[] || $3::text[]) AS w(lx)
            WHERE c.tsv @@ quote_literal(w.lx)::tsquery) AS words
    FROM (SELECT id, document_id, tsv, embedding FROM chunks WHERE document_id = ANY($1::bigint[]) OFFSET 0) c, q
    WHERE c.tsv @@ q.q
),
ranked AS (
    SELECT id, sim, row_number() OVER (PARTITION BY document_id ORDER BY words DESC, sim DESC, id) AS r FROM hits
)
SELECT c.id, c.document_id, d.name, c.node_id, c.text, c.page, c.page_end, c.heading_path, n.start_index,
       n.end_index, n.unit, c.statement, r.sim
FROM ranked r
JOIN chunks c ON c.id = r.id
JOIN documents d ON d.id = c.document_id
JOIN nodes n ON n.document_id = c.document_id AND n.node_id = c.node_id
WHERE r.r <= $5
ORDER BY c.document_id, r.r"""


async def event_chunks(pool: asyncpg.Pool, doc_ids: Sequence[int], words: Sequence[str], needs: Sequence[str],
                       qvec: np.ndarray, per_document: int) -> list[asyncpg.Record]:
    """Up to ``per_document`` chunks of each document holding one of an event's lexemes (``words``), those holding
    more of them and of ``needs`` first, then the nearest the question: what a citation needs, with ``sim``."""
    if not doc_ids or not words:
        return []
    return await pool.fetch(SQL_EVENT_CHUNKS, list(doc_ids), list(words), list(needs),
                            np.asarray(qvec, dtype=np.float32), per_document)


SQL_ZH_LINES = "SELECT label FROM line_labels WHERE collection_id = $1 AND label ~ '[\u4e00-\u9fff]' ORDER BY label"


async def zh_line_labels(pool: asyncpg.Pool, collection_id: int) -> list[str]:
    """The names of the collection's printed lines written in Chinese (``ingest.lines``)."""
    return [r["label"] for r in await pool.fetch(SQL_ZH_LINES, collection_id)]


SQL_NEAREST_LINES = """
SELECT label, printed, 1 - (embedding <=> $2) AS sim FROM line_labels
WHERE collection_id = $1 AND embedding IS NOT NULL ORDER BY embedding <=> $2 LIMIT $3"""


async def nearest_lines(pool: asyncpg.Pool, collection_id: int, qvec: np.ndarray, k: int, *,
                        iterative: bool) -> list[asyncpg.Record]:
    """The ``k`` names of the collection's printed lines nearest to a vector (``label``, ``printed``, ``sim``)
    through the HNSW index (``ingest.lines`` stores them)."""
    async with pool.acquire() as conn, conn.transaction():
        await vector_session(conn, ef_search=max(40, k), k=k, iterative=iterative)
        return await conn.fetch(SQL_NEAREST_LINES, collection_id, np.asarray(qvec, dtype=np.float32), k)
