"""The query path's fast forms at 10,000 documents (issue 26) give what the plain forms give: BM25 from counts or
postings equals ``rank_bm25``'s floats, the word-only tokenizer path equals the general one, the in-memory
description ranking equals Postgres' exact one, and a few documents' full text reads them by document (not
through the collection-wide GIN index) with the same rows."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from kb.core.text import tokenize
from kb.runtime import Runtime
from router import store
from router.scoring import PostingsBM25, bm25_scores, okapi_scores

WORDS = ("revenue", "income", "cash", "asset", "debt", "equity", "segment", "margin", "tax", "lease", "the")


def _corpus(rng: random.Random, n: int) -> list[list[str]]:
    # common words (negative idf, floored by epsilon), rare ones, repeats, and one-word documents
    return [[rng.choice(WORDS[: rng.randint(1, len(WORDS))]) for _ in range(rng.randint(1, 40))] for _ in range(n)]


@pytest.mark.parametrize("seed", range(30))
def test_bm25_from_counts_and_postings_equals_rank_bm25(seed: int) -> None:
    rng = random.Random(seed)
    corpus = _corpus(rng, rng.choice([1, 2, 3, 7, 40, 300]))
    query = [rng.choice((*WORDS, "absent")) for _ in range(rng.randint(1, 6))]
    expected = BM25Okapi(corpus).get_scores(query)
    assert np.array_equal(okapi_scores([Counter(d) for d in corpus], query), expected)
    assert np.array_equal(PostingsBM25(corpus).get_scores(query), expected)


def test_bm25_scores_reads_the_shared_tokenizer() -> None:
    texts = ["Total revenues rose 12%.", "Cash and cash equivalents", "Revenue by segment: revenue, revenue"]
    expected = BM25Okapi([tokenize(t) for t in texts]).get_scores(tokenize("segment revenues"))
    assert bm25_scores("segment revenues", texts) == [max(0.0, float(s)) for s in expected]


@pytest.mark.parametrize("text", [
    "Total revenues of $1,234.5 million (10-K, FY2023) rose 3.5% — the company's 'core' segments.",
    "Société Générale’s Überweisung: naïve café-crème, résumé; ÆØÅ ǅ ﬁnance ①②",
    "Devanagari कंपनी की आय and Ελληνικά έσοδα, Кириллица: выручка",
    "under_score __init__ a-b-c- --x-- .5. 'quoted' ...",
])
def test_word_only_tokenizer_path_equals_the_general_one(text: str) -> None:
    # a Han character sends the text down the general path, which appends its own token last
    assert tokenize(text + " 中") == [*tokenize(text), "中"]
    assert tokenize(text + " 中", keep_stopwords=True) == [*tokenize(text, keep_stopwords=True), "中"]


async def test_descriptions_rank_in_memory_as_postgres_ranks_them(samples_rt: Runtime) -> None:
    rt = samples_rt
    catalog = await rt.pipeline.catalogs.get(1)
    for question in ("Which company makes batteries?", "airline passengers and fleet", "mining revenue 2021"):
        qvec = rt.embedder.embed_batch([question])[0]
        rows = await rt.pool.fetch(
            "SELECT id, 1 - (description_embedding <=> $1) AS sim FROM documents WHERE collection_id = 1 "
            "AND description_embedding IS NOT NULL ORDER BY description_embedding <=> $1", qvec)
        near, sims = catalog.descriptions.nearest(qvec, 100)
        assert [catalog.descriptions.ids[i] for i in near] == [r["id"] for r in rows]
        assert np.allclose(sims, [float(r["sim"]) for r in rows], atol=1e-5)


class _Rollback(Exception):
    pass


async def test_a_few_documents_full_text_reads_them_by_document(samples_rt: Runtime) -> None:
    rt = samples_rt
    docs = [r["id"] for r in await rt.pool.fetch("SELECT id FROM documents WHERE collection_id = 1 ORDER BY id")]
    terms = await store.query_terms(rt.pool, 1, "total revenue net income cash flow operating segment")
    assert terms.lexemes
    qvec = rt.embedder.embed_batch(["total revenue"])[0]
    args = (terms.lexemes, docs[:2], qvec, 50, terms.idf, terms.lexemes)
    few = await rt.pool.fetch(store.SQL_TEXT_CHUNKS["few documents"], *args)
    many = await rt.pool.fetch(store.SQL_TEXT_CHUNKS["documents"], *args)
    assert few and [(r["id"], r["score"]) for r in few] == [(r["id"], r["score"]) for r in many]
    plans: dict[str, str] = {}
    with pytest.raises(_Rollback):
        async with rt.pool.acquire() as conn, conn.transaction():
            # what a large table makes the planner choose (its estimate of the document filter is then poor):
            # the full-text index; the transaction is rolled back
            await conn.execute("SET LOCAL enable_seqscan = off; DROP INDEX chunks_doc_node_idx")
            for name, sql, a in (("few documents", store.SQL_TEXT_CHUNKS["few documents"], args),
                                 ("documents", store.SQL_TEXT_CHUNKS["documents"], args),
                                 ("node", store.SQL_NODE_TEXT_HITS, (docs[0], terms.lexemes, 40, terms.idf))):
                plans[name] = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *a))
            raise _Rollback
    assert "chunks_tsv_gin" in plans["documents"]  # the check can fail: the plain form does use the index
    assert "chunks_tsv_gin" not in plans["few documents"], plans["few documents"]
    assert "chunks_tsv_gin" not in plans["node"], plans["node"]
    assert await rt.pool.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'chunks_doc_node_idx'") == 1
    hits = await store.node_text_hits(rt.pool, docs[0], terms, 40)
    assert hits and [r["score"] for r in hits] == sorted((r["score"] for r in hits), reverse=True)


async def test_whole_collection_ties_go_to_fewer_words_then_the_earlier_chunk(samples_rt: Runtime) -> None:
    """Not to the order rows happen to be stored in (a rewrite of the table changed which tied chunks won)."""
    rt = samples_rt
    # the words found in a few of the six reports (the common ones are left out of full text)
    few = [r["lexeme"] for r in await rt.pool.fetch(
        "SELECT lexeme FROM lexeme_df WHERE collection_id = 1 AND df BETWEEN 2 AND 3 ORDER BY lexeme LIMIT 8")]
    terms = await store.query_terms(rt.pool, 1, " ".join(few))
    assert terms.lexemes
    qvec = rt.embedder.embed_batch(["revenue"])[0]
    rows = await rt.pool.fetch(store.SQL_TEXT_CHUNKS["collection"], terms.lexemes, 1, qvec, 40, terms.idf,
                               terms.lexemes)
    words = dict(await rt.pool.fetch("SELECT id, length(tsv) FROM chunks WHERE id = ANY($1::bigint[])",
                                     [r["id"] for r in rows]))
    keys = [(-float(r["score"]), words[r["id"]], r["id"]) for r in rows]
    assert len({k[0] for k in keys}) < len(keys)  # there are ties to break
    assert keys == sorted(keys)
