"""The collection's own printed lines, matched by meaning (issue 35): ingest stores every statement line outside
the vocabulary under its name with a vector (``ingest.lines``); a question naming such a line in other words is
answered from that line's facts when the bundled MiniLM finds it clearly nearest, and gets no figure when
nothing is near."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from ingest import store as ingest_store
from ingest.embedding import CachedEmbedder
from ingest.lines import index_lines, line_names
from kb.core.collections import get_collection
from kb.runtime import Runtime
from router import store as router_store
from tests.conftest import runtime_over
from tests.factgen import _money, _row, figures, text_filing
from tests.http import ask_json, wire

pytestmark = pytest.mark.slow

FIRMS = {"harbor-2023.txt": ("Harbor Freight Logistics, Inc.", 2023, 1_450, figures(9_000, 400, cash=800, liabilities=3_000)),
         "quillon-2023.txt": ("Quillon Biotherapeutics Corp.", 2023, 2_275, figures(4_000, -120, cash=2_100,
                                                                                   liabilities=1_100))}


def _filing(company: str, year: int, restructuring: int, f: dict[str, float]) -> str:
    """A text 10-K whose statement of operations prints a line the vocabulary does not know."""
    text = text_filing(company, year, f, f)
    anchor = _row("Operating income (loss)", _money(f["operating_income"]), _money(f["operating_income"]))
    extra = [_row("Restructuring charges", _money(restructuring), "310"),
             _row("Loss on extinguishment of debt", _money(restructuring // 5), "12")]
    return text.replace(anchor, "\n".join([*extra, anchor]), 1)


@pytest.fixture(scope="module")
async def lines_rt(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    folder = tmp_path_factory.mktemp("lines")
    for name, (company, year, restructuring, f) in FIRMS.items():
        (folder / name).write_text(_filing(company, year, restructuring, f))
    async with runtime_over(pg_uri, "lines_by_meaning", folder, ok=2) as rt:
        yield rt


def test_line_names_drop_numbering_and_short_names() -> None:
    names = line_names(["Restructuring charges", "Restructuring charges ", "其中：应付职工薪酬", "a", "Other"])
    assert names == {"restructuring charges": "Restructuring charges", "应付职工薪酬": "其中：应付职工薪酬",
                     "other": "Other"}


async def test_ingest_names_and_embeds_the_printed_lines(lines_rt: Runtime) -> None:
    coll = await get_collection(lines_rt.pool, "default")
    assert await ingest_store.unembedded_labels(lines_rt.pool, coll.id, 10) == []
    vec = np.asarray(lines_rt.embedder.embed_batch(["restructuring expenses"])[0])
    near = await router_store.nearest_lines(lines_rt.pool, coll.id, vec, 3, iterative=True)
    assert near[0]["label"] == "restructuring charges" and near[0]["printed"] == "Restructuring charges"
    assert 0.75 <= near[0]["sim"] < 1.0
    await ingest_store.add_line_labels(lines_rt.pool, coll.id, {"gone line": "Gone line"})  # printed by no fact
    again = await index_lines(lines_rt.pool, CachedEmbedder(lines_rt.pool, lines_rt.embedder, batch=64), coll.id)
    assert again.embedded == 0 and again.lines > 0 and not again.stale  # nothing twice
    assert await ingest_store.unembedded_labels(lines_rt.pool, coll.id, 10) == []  # the stale name was dropped


async def test_a_printed_line_asked_in_other_words_is_computed(lines_rt: Runtime) -> None:
    body = await ask_json(lines_rt, "Which company had the highest restructuring expenses in 2023?")
    answer = body["answer"]
    assert "Quillon Biotherapeutics" in answer.split("\n")[-1] and "2,275" in answer, answer
    assert {f["doc_name"] for f in body["facts"]} == {"harbor-2023.txt", "quillon-2023.txt"}
    assert all(c["text"].startswith("Restructuring charges") for c in body["citations"]), body["citations"]


async def test_words_near_no_line_get_no_figure(lines_rt: Runtime) -> None:
    body = await ask_json(lines_rt, "Which company had the largest headcount in 2023?")
    assert body["facts"] == [] and "2,275" not in body["answer"], body["answer"]



async def test_with_an_llm_the_metadata_prompt_lists_the_nearest_printed_lines(lines_rt: Runtime,
                                                                               fake_openai: Any) -> None:
    """The metadata call that also reads the typed question sees the collection's printed lines nearest to the
    question; the LLM's reading naming one of them is computed."""
    from router.prompts import METADATA
    from router.types import QueryRequest
    from tests.fake_openai import FakeReply
    from tests.test_facts_query import _llm_pipeline

    typed = {"operation": "max", "measures": [{"name": "Restructuring charges", "kind": "line"}],
             "periods": [{"year": 2023}]}
    fake_openai.route({METADATA: FakeReply.json({"conditions": [], "question": typed})}, text="See [1].")
    question = "Where were the reorganisation costs biggest in 2023?"
    result = await _llm_pipeline(lines_rt, fake_openai).run(QueryRequest(query=question, include_trace=True))
    prompts = [m["content"] for r in fake_openai.requests if r.json and "messages" in r.json
               for m in r.json["messages"] if "Metadata keys" in m["content"]]
    assert prompts and "Printed lines of these reports nearest to the question: " in prompts[0], prompts
    assert "Restructuring charges" in prompts[0].split("nearest to the question: ")[1]
    assert wire(result.trace)["question"]["source"] == "llm"
    assert {f["value"] for f in wire(result.facts)} == {1_450_000, 2_275_000}


async def test_a_one_word_measure_in_a_phrase_is_settled_by_meaning(lines_rt: Runtime) -> None:
    """"debt extinguishment" is not total debt: the reader is not sure of "debt" there, and the phrase's nearest
    name — the collection's printed "Loss on extinguishment of debt" — is what is computed."""
    body = await ask_json(lines_rt, "Which company lost the most on debt extinguishment in 2023?")
    answer = body["answer"]
    assert {f["line_item"] for f in body["facts"]} == {"Loss on extinguishment of debt"}, body["facts"]
    assert "Quillon Biotherapeutics" in answer.split("\n")[-1] and "455" in answer, answer
    body = await ask_json(lines_rt, "Which company had the largest unearned revenue in 2023?")
    # nothing near enough settles it (deferred revenue is 0.65 away): what the statements show, and no verdict
    assert body["answer"].startswith("I could not determine this from the statement figures: not sure that "
                                     "'unearned revenue' is revenue."), body["answer"]
    assert "highest" not in body["answer"].lower() and "largest" not in body["answer"].lower()
