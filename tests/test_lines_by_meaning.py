"""The collection's own printed lines, matched by meaning (issue 35): ingest stores every statement line outside
the vocabulary under its name with a vector (``ingest.lines``); a question naming such a line in other words is
answered from that line's facts when the bundled MiniLM finds it clearly nearest, and gets no figure when
nothing is near."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
from tests.http import ask_json

pytestmark = pytest.mark.slow

FIRMS = {"harbor-2023.txt": ("Harbor Freight Logistics, Inc.", 2023, 1_450, figures(9_000, 400, cash=800, liabilities=3_000)),
         "quillon-2023.txt": ("Quillon Biotherapeutics Corp.", 2023, 2_275, figures(4_000, -120, cash=2_100,
                                                                                   liabilities=1_100))}


def _filing(company: str, year: int, restructuring: int, f: dict[str, float]) -> str:
    """A text 10-K whose statement of operations prints a line the vocabulary does not know."""
    text = text_filing(company, year, f, f)
    anchor = _row("Operating income (loss)", _money(f["operating_income"]), _money(f["operating_income"]))
    return text.replace(anchor, _row("Restructuring charges", _money(restructuring), "310") + "\n" + anchor, 1)


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
    again = await index_lines(lines_rt.pool, CachedEmbedder(lines_rt.pool, lines_rt.embedder, batch=64), coll.id)
    assert again.embedded == 0 and again.lines > 0 and not again.stale  # nothing twice


async def test_a_printed_line_asked_in_other_words_is_computed(lines_rt: Runtime) -> None:
    body = await ask_json(lines_rt, "Which company had the highest restructuring expenses in 2023?")
    answer = body["answer"]
    assert "Quillon Biotherapeutics" in answer.split("\n")[-1] and "2,275" in answer, answer
    assert {f["doc_name"] for f in body["facts"]} == {"harbor-2023.txt", "quillon-2023.txt"}
    assert all(c["text"].startswith("Restructuring charges") for c in body["citations"]), body["citations"]


async def test_words_near_no_line_get_no_figure(lines_rt: Runtime) -> None:
    body = await ask_json(lines_rt, "Which company had the largest headcount in 2023?")
    assert body["facts"] == [] and "2,275" not in body["answer"], body["answer"]

