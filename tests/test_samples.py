"""The bundled sample corpus (what `make run` serves): every README/QUESTIONS.md question routes and is
answered from the right document, through the production ingest job and query pipeline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from kb.runtime import Runtime, build_pipeline
from router.prompts import METADATA, PLAN
from router.types import STRATEGIES, QueryRequest, Turn
from tests.http import wire

pytestmark = pytest.mark.slow
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _questions() -> list[dict[str, object]]:
    text = (SAMPLES / "QUESTIONS.md").read_text()
    out = []
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        fields = dict(re.findall(r"^- \*\*([^*]+):\*\*\s*(.+)$", block, flags=re.M))
        docs = re.findall(r"`([^`]+)`", fields.get("Expected documents", fields.get("Expected document", "")))
        out.append({
            "id": block.split()[0],
            "strategy": fields["Strategy"].strip(),
            "question": fields["Question"].strip(),
            "doc": docs[0],
            "docs": docs,
            "multi": "Expected documents" in fields,
            "must": re.findall(r"`([^`]+)`", fields["Answer must contain"]),
        })
    return out


QUESTIONS = [q for q in _questions() if not q["multi"]]
MULTI = [q for q in _questions() if q["multi"]]


def test_questions_file_parses() -> None:
    assert len(QUESTIONS) >= 3
    assert {"metadata", "semantic", "description"} <= {q["strategy"] for q in QUESTIONS}
    assert len(MULTI) >= 3


@pytest.mark.parametrize("q", QUESTIONS, ids=[str(q["id"]) for q in QUESTIONS])
async def test_sample_question(samples_rt: Runtime, q: dict[str, object]) -> None:
    pipeline = build_pipeline(samples_rt)
    for strategy in (str(q["strategy"]), "auto"):
        result = await pipeline.run(QueryRequest(query=str(q["question"]), strategy=strategy))
        assert Path(result.documents[0].name).stem == q["doc"], (strategy, [d.name for d in result.documents])
        evidence = " ".join([result.answer, *(f"{c.doc_name} {c.text}" for c in result.citations)])
        for needle in q["must"]:  # type: ignore[union-attr]
            assert needle.lower() in evidence.lower(), (strategy, needle, result.answer)


def _evidence_text(result) -> str:  # noqa: ANN001 - QueryResult
    return " ".join([result.answer, *(f"{c.doc_name} {c.text}" for c in result.citations)]).lower()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("q", MULTI, ids=[str(q["id"]) for q in MULTI])
async def test_multi_document_question(samples_rt: Runtime, q: dict[str, object], strategy: str) -> None:
    """Every needed report contributes evidence and is cited (or reported as having none), for every strategy."""
    result = await build_pipeline(samples_rt).run(QueryRequest(query=str(q["question"]), strategy=strategy))
    scope = wire(result.trace)["scope"]
    assert scope["kind"] in {"multi", "list"}, scope
    needed = {Path(n["name"]).stem: n for n in scope["needed"]}
    cited = {Path(c.doc_name).stem for c in result.citations}
    for stem in q["docs"]:  # type: ignore[union-attr]
        assert stem in needed and needed[stem]["evidence"] >= 1, (strategy, stem, scope)
        assert stem in cited, (strategy, stem, result.answer)
    sub_of = {Path(s["doc_name"]).stem: s for s in scope["sub_questions"]}
    for stem, n in needed.items():  # nobody silently dropped: cited, or "no evidence found in" it
        # (an event asked over the companies: its company and period on the line of those stating none)
        absent = next((ln for ln in result.answer.splitlines() if ln.endswith("stated in the passages read.")), "")
        named = stem in sub_of and f"{sub_of[stem]['entity']} ({sub_of[stem]['period']})" in absent
        assert stem in cited or f"No evidence found in {n['name']}" in result.answer or named, \
            (strategy, stem, result.answer)
    if scope["kind"] == "multi":
        subs = {Path(s["doc_name"]).stem: s["question"] for s in scope["sub_questions"]}
        assert len(set(subs.values())) == len(subs), subs  # each document its own sub-question
        for node in wire(result.trace)["nodes"]:
            stem = next(Path(d.name).stem for d in result.documents if d.doc_id == node["doc_id"])
            assert node["sub_query"] == subs[stem], node
    for needle in q["must"]:  # type: ignore[union-attr]
        assert needle.lower() in _evidence_text(result), (strategy, needle, result.answer)


async def test_comparison_names_each_figure_in_its_own_line(samples_rt: Runtime) -> None:
    result = await build_pipeline(samples_rt).run(
        QueryRequest(query="Compare the 2023 revenue of Aurora Pharma and Northwind Energy."))
    lines = result.answer.splitlines()
    aurora = next(line for line in lines if line.startswith("- aurora-pharma"))
    northwind = next(line for line in lines if line.startswith("- northwind-energy"))
    assert "2,146.8" in aurora and "1,284.6" in northwind, result.answer
    by_marker = {c.marker: Path(c.doc_name).stem for c in result.citations}
    for line, stem in ((aurora, "aurora-pharma-2023-annual-report"), (northwind, "northwind-energy-2023-annual-report")):
        markers = [int(m) for m in re.findall(r"\[(\d+)\]", line)]
        assert markers and all(by_marker[m] == stem for m in markers), (line, by_marker)


@pytest.mark.parametrize(("top_k", "share"), [(2, 1), (6, 3), (9, 4)])
async def test_top_k_is_the_total_with_a_share_per_document(samples_rt: Runtime, top_k: int, share: int) -> None:
    result = await build_pipeline(samples_rt).run(QueryRequest(
        query="Compare the 2023 revenue of Aurora Pharma and Northwind Energy.", top_k=top_k))
    counts = [n["evidence"] for n in wire(result.trace)["scope"]["needed"]]
    assert len(counts) == 2 and min(counts) >= share and sum(counts) == top_k, counts


async def test_list_question_over_many_documents(samples_rt: Runtime) -> None:
    result = await build_pipeline(samples_rt).run(QueryRequest(query="Which of these companies report a product "
                                                               "recall?", top_docs=6, top_k=3))
    scope = wire(result.trace)["scope"]
    assert scope["kind"] == "list" and len(scope["needed"]) == 6
    assert all(n["evidence"] >= 1 for n in scope["needed"])  # 6 pieces although top_k is 3
    assert "aurora-pharma-2023-annual-report.pdf" in scope["nothing_found"]
    assert "bluefin-foods-2023-q3-quarterly-report.md" not in scope["nothing_found"]


async def test_entity_not_in_the_collection_is_named(samples_rt: Runtime) -> None:
    pipeline = build_pipeline(samples_rt)
    alone = await pipeline.run(QueryRequest(query="What was Zephyr Motors' revenue in 2023?"))
    assert "No document about Zephyr Motors" in alone.answer and not alone.citations, alone.answer
    assert wire(alone.trace)["scope"]["missing_entities"] == ["Zephyr Motors"]
    both = await pipeline.run(QueryRequest(query="Compare the 2023 revenue of Aurora Pharma and Zephyr Motors."))
    assert "No document about Zephyr Motors" in both.answer
    assert {Path(c.doc_name).stem for c in both.citations} == {"aurora-pharma-2023-annual-report"}
    # a capitalised word that is no name, and names the collection knows, are not reported missing
    known = await pipeline.run(QueryRequest(query="Which report is from the Norwegian regional airline?"))
    assert wire(known.trace)["scope"]["missing_entities"] == []


def _llm_pipeline(rt: Runtime, fake) -> object:  # noqa: ANN001 - FakeOpenAI
    from kb.core.providers.chat import OpenAIChatModel
    from kb.core.settings import LLMSettings
    from router.pipeline import QueryPipeline

    chat = OpenAIChatModel(LLMSettings(base_url=fake.base_url, model="fake-model", api_key="k", timeout_s=5,
                                       max_retries=0, concurrency=4, cache=False))
    return QueryPipeline(rt.pool, rt.embedder, chat, rt.settings.retrieval)


def _route(fake, plan_reply, more: dict | None = None) -> None:  # noqa: ANN001 - FakeOpenAI, a FakeReply factory
    """The plan step answers ``plan_reply({report stem: doc id})`` for the documents its prompt routes; the answer
    cites the first evidence block of every document; ``more`` answers other steps, and the rest get their
    smallest valid reply."""
    from tests.fake_openai import FakeReply

    def plan(body: dict) -> FakeReply:
        user = body["messages"][-1]["content"]
        return plan_reply(dict((name.split(".")[0], int(i)) for i, name in re.findall(r'doc_id "(\d+)": (\S+)', user)))

    def answer(body: dict) -> FakeReply:
        user = body["messages"][-1]["content"]
        if "Evidence (grouped by document):" in user:  # cite the first block of every document
            first: dict[str, str] = {}
            for marker, name in re.findall(r"^\[(\d+)\] (\S+) ›", user, flags=re.M):
                first.setdefault(name, marker)
            return FakeReply.text(" ".join(f"{n}: figure [{m}]." for n, m in first.items()))
        return FakeReply.text("An answer [1].")

    fake.route({PLAN: plan, **(more or {})}, text=answer)


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_llm_decomposition_is_validated_and_used(samples_rt: Runtime, fake_openai, strategy: str) -> None:  # noqa: ANN001
    from tests.fake_openai import FakeReply

    def plan_reply(ids: dict[str, int]) -> FakeReply:
        a, n = ids["aurora-pharma-2023-annual-report"], ids["northwind-energy-2023-annual-report"]
        return FakeReply.json({"scope": "multi", "reason": "two companies", "sub_questions": [
            {"doc_id": str(a), "sub_question": "Aurora total revenue 2023"},
            {"doc_id": "999", "sub_question": "hallucinated"},
            {"doc_id": str(a), "sub_question": "duplicate"},
            {"doc_id": str(n), "sub_question": "Northwind revenue for 2023"}]})

    _route(fake_openai, plan_reply)
    result = await _llm_pipeline(samples_rt, fake_openai).run(QueryRequest(
        query="Compare the 2023 revenue of Aurora Pharma and Northwind Energy.", strategy=strategy))
    scope = wire(result.trace)["scope"]
    assert scope["mode"] == "llm" and scope["reason"].startswith("LLM")
    assert {s["question"] for s in scope["sub_questions"]} == {"Aurora total revenue 2023",
                                                                "Northwind revenue for 2023"}
    assert any("999" in d for d in scope["dropped"]) and any("duplicate" in d for d in scope["dropped"])
    assert {n["sub_query"] for n in wire(result.trace)["nodes"]} <= {"Aurora total revenue 2023",
                                                               "Northwind revenue for 2023"}
    assert all(n["evidence"] >= 1 for n in scope["needed"]) and len(scope["needed"]) == 2
    assert {Path(c.doc_name).stem for c in result.citations} == {"aurora-pharma-2023-annual-report",
                                                                 "northwind-energy-2023-annual-report"}
    synth = next(r for r in fake_openai.requests if "Evidence (grouped by document)" in r.messages[-1]["content"])
    prompt = synth.messages[-1]["content"]
    assert "First answer for each document" in prompt and "Aurora total revenue 2023" in prompt


@pytest.mark.parametrize("reply", ["{not json", '{"scope": "several"}', '{"scope": "multi", "sub_questions": []}'])
async def test_llm_decomposition_failure_falls_back_offline(samples_rt: Runtime, fake_openai, reply: str) -> None:  # noqa: ANN001
    from tests.fake_openai import FakeReply

    _route(fake_openai, lambda _ids: FakeReply.text(reply))
    result = await _llm_pipeline(samples_rt, fake_openai).run(QueryRequest(
        query="Compare the 2023 revenue of Aurora Pharma and Northwind Energy.", strategy="semantic"))
    scope = wire(result.trace)["scope"]
    assert scope["mode"] == "offline_fallback" and scope["dropped"], scope
    assert [s["question"] for s in scope["sub_questions"]] == ["Aurora Pharma FY2023 revenue",
                                                              "Northwind Energy FY2023 revenue"]
    assert {Path(c.doc_name).stem for c in result.citations} == {"aurora-pharma-2023-annual-report",
                                                                 "northwind-energy-2023-annual-report"}


async def test_llm_scope_from_the_metadata_call_upgrades_a_single_question(samples_rt: Runtime, fake_openai) -> None:  # noqa: ANN001
    """The rules see one document's question; the model (route.metadata) says it needs several: the plan call
    then writes a sub-question per company and both reports are cited."""
    from tests.fake_openai import FakeReply

    def plan_reply(ids: dict[str, int]) -> FakeReply:
        subs = [{"doc_id": str(ids[stem]), "sub_question": f"{stem.split('-')[0]} revenue in 2023"}
                for stem in ("aurora-pharma-2023-annual-report", "northwind-energy-2023-annual-report") if stem in ids]
        return FakeReply.json({"scope": "multi", "reason": "two companies", "sub_questions": subs})

    _route(fake_openai, plan_reply, {METADATA: FakeReply.json({"conditions": [
        {"key": "company", "op": "in", "value": ["Aurora Pharma", "Northwind Energy"]}], "scope": "multi"})})
    question = "How much revenue did the drug maker and the wind power producer each make in 2023?"
    result = await _llm_pipeline(samples_rt, fake_openai).run(QueryRequest(query=question))
    scope = wire(result.trace)["scope"]
    assert scope["kind"] == "multi" and "LLM" in scope["reason"], scope
    assert {Path(n["name"]).stem for n in scope["needed"]} == {"aurora-pharma-2023-annual-report",
                                                               "northwind-energy-2023-annual-report"}
    assert {Path(c.doc_name).stem for c in result.citations} == {"aurora-pharma-2023-annual-report",
                                                                 "northwind-energy-2023-annual-report"}
    metadata_call = next(r for r in fake_openai.requests if r.step is METADATA)
    assert "scope" in metadata_call.response_format["json_schema"]["schema"]["properties"]


async def test_titles_name_the_company_not_a_first_heading(samples_rt: Runtime) -> None:
    """A PDF whose first section is "Letter to shareholders" is titled by its company, type and year; a title
    that names the company is kept."""
    titles = {r["name"]: r["title"] for r in await samples_rt.pool.fetch("SELECT name, title FROM documents")}
    assert titles["northwind-energy-2023-annual-report.pdf"] == "Northwind Energy annual report 2023", titles
    assert titles["helios-robotics-2022-annual-report.md"] == "Helios Robotics — Annual Report 2022", titles


async def test_the_cli_prints_the_typed_trace_step_by_step(samples_rt: Runtime,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``kb query``'s terminal format (spec 001) reads the typed trace: the strategy used, the scope, each
    located node with its sub-query, each cited chunk with its scores, the answer and the stage timings."""
    from kb.cli import _print_result

    q = "Compare the 2023 revenue of Aurora and Northwind"
    result = await build_pipeline(samples_rt).run(QueryRequest(query=q))
    assert result.trace is not None and result.trace.nodes and result.trace.chunks
    _print_result(result, q)
    out = capsys.readouterr().out
    trace = result.trace
    assert f">>> Step 0: Routing ({trace.strategy_used})" in out
    assert f"  scope: {trace.scope.kind} ({trace.scope.reason}; {trace.scope.mode})" in out
    assert f"Located {len(trace.nodes)} nodes:" in out
    if trace.question is not None:
        assert f"  read as: {trace.question.operation} of " in out
    for n in trace.nodes:
        assert f"  [doc {n.doc_id} · {n.node_id}] {n.section_path}" in out and f'sub_query: "{n.sub_query}"' in out
    first = trace.chunks[0]
    assert f"     chunk {first.chunk_id}: dense={first.dense:.2f}  bm25={first.bm25:.2f}" in out
    assert out.count("\n  #") == len(result.citations)
    assert result.answer in out and f"total={trace.timings_ms['total']:.0f}ms" in out
    without = msgspec.structs.replace(result, trace=None)
    _print_result(without, q)
    assert ">>> Step 0: Routing (?)" in capsys.readouterr().out


CONVERSATION = [
    {"role": "user", "content": "What was Helios Robotics' revenue in fiscal 2023?"},
    {"role": "assistant", "content": "Helios Robotics' revenue was $497.3 million in fiscal 2023."},
    {"role": "user", "content": "And its net income?"},
    {"role": "assistant", "content": "Net income was $6.1 million in fiscal 2023."},
]
"""Two turns before a follow-up: the company from the first, the measure from the second."""


@pytest.mark.parametrize(("question", "doc", "figure", "taken"), [
    ("What about 2022?", "helios-robotics-2022-annual-report", "23.8", {"entities": 2, "measures": 1}),
    ("How about Aurora Pharma?", "aurora-pharma-2023-annual-report", "402.5", {"periods": 2, "measures": 1}),
])
async def test_a_three_turn_follow_up_is_answered_for_its_subject(samples_rt: Runtime, question: str, doc: str,
                                                                  figure: str, taken: dict[str, int]) -> None:
    """Over HTTP: the third turn is routed to its company's report for the period asked and leads with that
    figure (Helios's FY2022 net loss; Aurora's FY2023 net income); the trace says what it took from which turn."""
    from kb.app import create_app
    from kb.bench.answers_bench import lead_of
    from tests.http import app_client

    async with app_client(create_app(runtime=samples_rt, run_worker=False)) as client:
        r = await client.post("/kb/query", json={"query": question, "history": CONVERSATION})
    assert r.status_code == 200, r.text
    body = r.json()
    assert Path(body["documents"][0]["name"]).stem == doc, body["documents"]
    assert figure in lead_of(body["answer"]), body["answer"]
    follow = body["trace"]["follow_up"]
    assert {i["part"]: i["turns_back"] for i in follow["inherited"]} == taken
    assert follow["question"].startswith(question) and "net income" in follow["question"]


async def test_an_independent_turn_takes_nothing_from_the_conversation(samples_rt: Runtime) -> None:
    result = await build_pipeline(samples_rt).run(QueryRequest(
        query="What was Northwind Energy's revenue in 2023?",
        history=[Turn(**t) for t in CONVERSATION]))  # type: ignore[arg-type]
    assert Path(result.documents[0].name).stem == "northwind-energy-2023-annual-report"
    assert "1,284.6" in result.answer.split("\n")[0] and wire(result.trace)["follow_up"] is None
    assert wire(result.trace)["scope"]["kind"] == "single"  # Helios does not leak in as a second company


async def test_the_llm_reads_the_resolved_follow_up(samples_rt: Runtime, fake_openai) -> None:  # noqa: ANN001
    """With an LLM, the metadata and typed-question step is asked about the resolved question, not "What about
    2022?" alone, and resolving it costs no call: as many as the same question asked on its own."""
    from tests.fake_openai import FakeReply

    fake_openai.route({METADATA: FakeReply.json({"conditions": [
        {"key": "company", "op": "in", "value": ["Helios Robotics"]},
        {"key": "fiscal_year", "op": "in", "value": ["2022"]}]})}, text=FakeReply.text("A net loss [1]."))
    pipeline = _llm_pipeline(samples_rt, fake_openai)
    follow = await pipeline.run(QueryRequest(  # type: ignore[attr-defined]
        query="What about 2022?", strategy="metadata", history=[Turn(**t) for t in CONVERSATION]))  # type: ignore[arg-type]
    asked = [r.messages[-1]["content"] for r in fake_openai.requests if r.step is METADATA]
    assert len(asked) == 1 and "Question: What about 2022? [Helios Robotics, net income, fiscal 2022]" in asked[0]
    assert Path(follow.documents[0].name).stem == "helios-robotics-2022-annual-report"
    alone = await pipeline.run(QueryRequest(  # type: ignore[attr-defined]
        query="What was Helios Robotics' net income in fiscal 2022?", strategy="metadata"))
    assert follow.trace.llm.calls == alone.trace.llm.calls


def _kb_query(rt: Runtime, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KB_DATABASE_URL": rt.database_url, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "kb.cli", "query", *args], env=env, capture_output=True, text=True,
                          timeout=300)


async def test_kb_query_asks_named_documents_and_filters(samples_rt: Runtime) -> None:
    one = _kb_query(samples_rt, "What were the main risks?", "--document", "helios-robotics-2022-annual-report.md",
                    "--json")
    assert one.returncode == 0, one.stderr
    result = json.loads(one.stdout)
    assert [d["name"] for d in result["documents"]] == ["helios-robotics-2022-annual-report.md"]
    assert result["trace"]["strategy_used"] == "documents"
    filtered = _kb_query(samples_rt, "What was revenue?", "--filter", "company=Helios Robotics",
                         "--filter", "fiscal_year=2023", "--json")
    assert filtered.returncode == 0, filtered.stderr
    assert {d["name"] for d in json.loads(filtered.stdout)["documents"]} == {"helios-robotics-2023-annual-report.md"}
    missing = _kb_query(samples_rt, "What was revenue?", "--document", "nope.pdf")
    assert missing.returncode == 2 and "no document 'nope.pdf'" in missing.stderr
    bad = _kb_query(samples_rt, "What was revenue?", "--filter", "fiscal_year")
    assert bad.returncode != 0 and "write it as key=value" in bad.stderr and "Traceback" not in bad.stderr


async def test_a_computed_answer_offers_follow_ups_and_a_follow_up_says_how_it_was_read(samples_rt: Runtime) -> None:
    """Issue 40 item 3: follow-ups to a one-company answer (the year before when a report covers it, another company;
    another measure only where the reports state facts, and these Markdown samples have no statements), and a
    follow-up carries what it took from the earlier turns."""
    pipeline = build_pipeline(samples_rt)
    first = "What was Helios Robotics' revenue in fiscal 2023?"
    result = await pipeline.run(QueryRequest(query=first))
    assert result.read_as is None
    assert result.suggestions == ["What about 2022?", "How about Aurora Pharma?"], result.suggestions  # no facts
    history = [Turn(role="user", content=first), Turn(role="assistant", content=result.answer)]
    asked = await pipeline.run(QueryRequest(query="What about 2022?", history=history))
    assert asked.read_as is not None and "Helios Robotics" in asked.read_as.question and "2022" in asked.read_as.question
    assert {i.part for i in asked.read_as.inherited} == {"entities", "measures"}, asked.read_as
    assert asked.citations and {c.doc_name for c in asked.citations} == {"helios-robotics-2022-annual-report.md"}
    assert "412.6" in asked.answer, asked.answer
    compared = await pipeline.run(QueryRequest(query="Compare the revenue of Helios Robotics and Aurora Pharma in 2023."))
    assert compared.suggestions == []  # nothing is offered under an answer about several companies
