"""Hand-computed checks of fusion, DocScore/NodeScore, metadata matching and filter compilation."""

from __future__ import annotations

import math

import pytest

from kb.core.errors import ValidationError
from router.metadata import (
    KnownValues,
    conditions_from_filters,
    match_offline,
    validate_conditions,
)
from router.scoring import aggregate_score, fuse, group_scores, min_max
from router.store import compile_conditions
from router.synthesize import extractive_answer
from router.tree_search import find_cross_references
from router.types import Condition, RetrievedChunk


def test_min_max_and_fusion_by_hand() -> None:
    assert min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert min_max([5.0, 5.0]) == [1.0, 1.0]
    assert min_max([]) == []
    dense = [0.9, 0.5, 0.7]  # → [1, 0, 0.5]
    bm25 = [0.0, 10.0, 5.0]  # → [0, 1, 0.5]
    assert fuse(dense, bm25, 0.5, 0.5) == pytest.approx([0.5, 0.5, 0.5])
    assert fuse(dense, bm25, 0.8, 0.2) == pytest.approx([0.8, 0.2, 0.5])


def test_docscore_by_hand() -> None:
    # DocScore = sum / sqrt(N + 1)
    assert aggregate_score([0.8, 0.6]) == pytest.approx(1.4 / math.sqrt(3))
    assert aggregate_score([0.9]) == pytest.approx(0.9 / math.sqrt(2))
    assert aggregate_score([]) == 0.0
    scores = group_scores([("a", 0.9), ("b", 0.5), ("b", 0.5), ("b", 0.5), ("a", 0.1)])
    assert scores["a"] == pytest.approx(1.0 / math.sqrt(3))
    assert scores["b"] == pytest.approx(1.5 / 2.0)
    # many mediocre hits beat one strong hit, with diminishing returns
    assert scores["b"] > scores["a"]


KV = KnownValues(values={
    "company": {"3M": 2, "Best Buy": 3, "Apple Inc.": 1, "Zephyr Mining": 2},
    "fiscal_year": {"2018": 2, "2022": 3, "2023": 1},
    "doc_type": {"10k": 4, "10q": 2},
    "fiscal_quarter": {"Q2": 1, "Q3": 1},
}, doc_count=8)


def test_offline_metadata_matching() -> None:
    m = match_offline("What is the FY2018 capital expenditure amount for 3M?", KV)
    conds = {c.key: c.value for c in m.conditions}
    assert conds["company"] == ["3M"] and conds["fiscal_year"] == [2018]
    assert m.confident
    m = match_offline("Did bestbuy grow revenue in its 2022 10-K?", KV)
    conds = {c.key: c.value for c in m.conditions}
    assert conds["company"] == ["Best Buy"] and conds["doc_type"] == ["10k"]
    m = match_offline("How did Apple do in the third quarter of 2023?", KV)
    conds = {c.key: c.value for c in m.conditions}
    assert conds["company"] == ["Apple Inc."] and conds["fiscal_quarter"] == ["Q3"]
    m = match_offline("Which company recalled battery packs?", KV)
    assert not m.confident and m.conditions == ()


def test_llm_conditions_are_validated() -> None:
    raw = [
        {"key": "company", "op": "eq", "value": "3M"},
        {"key": "company", "op": "eq", "value": "Evil'); DROP TABLE documents;--"},  # unknown value
        {"key": "password", "op": "eq", "value": "x"},  # unknown key
        {"key": "fiscal_year", "op": "range", "value": {"gte": "2018", "lte": 2022}},
        {"key": "fiscal_year", "op": "sql", "value": "1=1"},  # unknown operator
        "garbage",
    ]
    conds = validate_conditions(raw, KV)
    assert conds == (Condition("company", "in", ["3M"]), Condition("fiscal_year", "range", {"gte": 2018.0, "lte": 2022.0}))
    with pytest.raises(ValidationError):
        validate_conditions({"not": "a list"}, KV)


def test_compiled_sql_has_only_parameters() -> None:
    evil = "x'); DROP TABLE documents; --"
    sql, params = compile_conditions(7, [Condition("company", "in", [evil]), Condition("year", "range", {"gte": 2019}),
                                         Condition("title", "contains", evil)])
    assert evil not in sql and "DROP" not in sql
    assert params[0] == 7 and [evil] in params and evil in params
    assert sql.count("$") == len(params) + 1  # $2 used twice for the range key
    with pytest.raises(ValidationError):
        compile_conditions(1, [Condition("bad key;", "in", ["x"])])
    with pytest.raises(ValidationError):
        conditions_from_filters({"a'; drop": 1})
    assert conditions_from_filters({"fiscal_year": [2021, 2022], "company": "3M"}) == (
        Condition("fiscal_year", "in", ["2021", "2022"]), Condition("company", "in", ["3M"]))


def test_cross_reference_detection() -> None:
    refs = find_cross_references(["The loan is described in Note 7.", "See Item 8 and refer to Appendix G.",
                                  "as discussed in Section 3.2 above; see note 7"])
    assert refs == ["note 7", "item 8", "appendix g", "section 3 2"]


def _chunk(i: int, text: str) -> RetrievedChunk:
    return RetrievedChunk(chunk_id=i, doc_id=1, doc_name="d.md", node_id="0001", section_path="A > B", text=text,
                          page=None, pages=(1, 5), unit="line", dense=0.5, bm25=1.0, fused=0.5, score=0.5)


def test_extractive_answer_cites_the_sentence_source() -> None:
    chunks = [_chunk(1, "The board met twice. Weather was mild."),
              _chunk(2, "Total revenue for fiscal 2021 was $412.7 million, up 18 percent. Staff grew.")]
    ans = extractive_answer("What was total revenue in fiscal 2021?", chunks)
    assert "412.7" in ans.text and "[2]" in ans.text
    assert [c.marker for c in ans.citations] == [2]


async def test_citation_markers_are_numbered_in_reading_order() -> None:
    """The answer's markers run 1..n in the order they first appear, each marker has its source and every listed
    source is cited (offline answers, and an LLM reply citing blocks out of order or one that does not exist)."""
    import re

    from kb.core.providers.chat import OfflineChatModel
    from router.synthesize import in_reading_order, synthesize
    from router.types import Answer

    chunks = [_chunk(1, "The board met twice during the year under review."),
              _chunk(2, "Staff grew to 1,200 people across four sites."),
              _chunk(3, "Total revenue for fiscal 2021 was $412.7 million, up 18 percent."),
              _chunk(4, "Revenue from services was $61.6 million in fiscal 2021.")]
    ans = await synthesize(OfflineChatModel(), "What was total revenue in fiscal 2021?", chunks)
    markers = [int(m) for m in re.findall(r"\[(\d+)\]", ans.text)]
    assert markers and markers[0] == 1 and sorted(set(markers)) == list(range(1, len(set(markers)) + 1))
    assert [c.marker for c in ans.citations] == sorted(set(markers))
    assert ans.citations[0].chunk_id == 3  # the first marker read is the revenue sentence's source
    llm = Answer(text="Revenue was $412.7 million [3], services $61.6 million [4]; see also [9] and [3].",
                 citations=tuple(c for c in (_cite(3), _cite(4), _cite(2))), mode="llm")
    out = in_reading_order(llm)
    assert out.text == "Revenue was $412.7 million [1], services $61.6 million [2]; see also and [1]."
    assert [(c.marker, c.chunk_id) for c in out.citations] == [(1, 3), (2, 4)]  # [2]'s source was never cited


def _cite(i: int):  # noqa: ANN202
    from router.types import CitationOut

    return CitationOut(marker=i, doc_id=1, doc_name="d.md", node_id="0001", section_path="A", pages=(1, 1),
                       text=f"block {i}", chunk_id=i)
