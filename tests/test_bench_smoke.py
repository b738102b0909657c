"""Smoke test of ``kb bench``: a generated FinanceBench-layout corpus, the real ingest and query path,
and metrics checked against hand-computed values."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pymupdf
import pytest

from kb.bench.datasets import load_docugami, match_sources
from kb.bench.harness import BenchConfig, report_json, run_benchmark, run_cli
from kb.bench.metrics import (
    QuestionRun,
    answer_number_recall,
    doc_hit,
    doc_recall,
    evidence_doc_coverage,
    node_recall,
    page_recall,
    question_metrics,
    reciprocal_rank,
)
from kb.bench.report import render_markdown
from kb.runtime import Runtime
from tests.conftest import SetEnv
from tests.fake_openai import FakeOpenAI, FakeReply
from tests.fakes import minimal_json
from tests.pdfgen import make_text_pdf, paragraph

FILL = ("The segment discussion follows the structure of prior filings and covers volumes, pricing, mix and "
        "currency effects in each geography, together with the outlook that management presented to the board "
        "during the period and the principal assumptions behind it. ")

# company → pages (page 1 is the cover); each page is one long paragraph so every page starts a chunk
CORPUS: dict[str, tuple[str, str, int, list[str]]] = {
    "ACME_2022_10K": ("Acme", "Industrials", 2022, [
        "ACME CORPORATION annual report on Form 10-K for the fiscal year 2022.",
        "Overview of the business. " + FILL * 3,
        "Zorbex throughput rose to 4,210 units per hour at the Dayton plant. " + FILL * 3,
        "Liquidity and capital resources. " + FILL * 3,
    ]),
    "BOLT_2023_10K": ("Bolt", "Utilities", 2023, [
        "BOLT ENERGY INC annual report on Form 10-K for the fiscal year 2023.",
        "Quillfeather contracts were renewed with three municipal customers. " + FILL * 3,
        "Results of operations by segment. " + FILL * 3,
        "Legal proceedings and contingencies. " + FILL * 3,
    ]),
    "CRUX_2021_10K": ("Crux", "Materials", 2021, [
        "CRUX MINERALS annual report on Form 10-K for the fiscal year 2021.",
        "Ore grades and reserves by mine. " + FILL * 3,
        "Environmental matters and reclamation. " + FILL * 3,
    ]),
    "DYNA_2020_10K": ("Dyna", "Energy", 2020, [
        "DYNA PETROLEUM annual report on Form 10-K for the fiscal year 2020.",
        "Drilling activity and well counts. " + FILL * 3,
        "Hedging program and derivative positions. " + FILL * 3,
    ]),
}

QUESTIONS = [
    # the only page with "zorbex"/"throughput" is ACME page 3 (zero-indexed 2): evidence is right there
    {"financebench_id": "q_acme", "doc_name": "ACME_2022_10K", "question_type": "metrics-generated",
     "question": "What was the zorbex throughput?", "evidence": [{"evidence_page_num": 2, "evidence_text": "x"}],
     "answer": "Zorbex throughput was 4,210 units per hour at Dayton."},
    # "quillfeather" is only on BOLT page 2, but the evidence says page 4 (zero-indexed 3): the document is
    # found at rank 1 while no retrieved chunk covers the evidence page
    {"financebench_id": "q_bolt", "doc_name": "BOLT_2023_10K", "question_type": "novel-generated",
     "question": "What is the quillfeather?", "evidence": [{"evidence_page_num": 3, "evidence_text": "x"}]},
    # the document is not in pdfs/: skipped with a reason
    {"financebench_id": "q_gone", "doc_name": "GONE_2019_10K", "question_type": "domain-relevant",
     "question": "What is the revenue?", "evidence": [{"evidence_page_num": 0, "evidence_text": "x"}]},
]


def make_financebench(root: Path) -> Path:
    (root / "pdfs").mkdir(parents=True)
    docs = []
    for stem, (company, sector, year, pages) in CORPUS.items():
        pdf = pymupdf.open()
        for text in pages:
            page = pdf.new_page()
            page.insert_textbox(pymupdf.Rect(72, 72, 540, 770), text, fontsize=10)
        pdf.save(root / "pdfs" / f"{stem}.pdf")
        pdf.close()
        docs.append({"doc_name": stem, "company": company, "gics_sector": sector, "doc_type": "10k",
                     "doc_period": year})
    (root / "documents.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    return root


def test_metric_functions_by_hand() -> None:
    docs = ("b.pdf", "a.pdf", "c.pdf")
    assert doc_hit(["a.pdf"], docs, 1) == 0.0 and doc_hit(["a.pdf"], docs, 3) == 1.0
    assert doc_recall(["a.pdf", "c.pdf", "z.pdf"], docs, 2) == pytest.approx(1 / 3)
    assert doc_recall(["a.pdf", "c.pdf", "z.pdf"], docs, 5) == pytest.approx(2 / 3)
    chunks = (("b.pdf", 4, 4), ("a.pdf", 7, 7), ("a.pdf", 9, 10), ("a.pdf", 3, 3))
    evidence = [("a.pdf", 10), ("a.pdf", 3)]
    assert page_recall(evidence, chunks, 2) == 0.0
    assert page_recall(evidence, chunks, 3) == 0.5  # page 10 inside the 9–10 span
    assert page_recall(evidence, chunks, 4) == 1.0
    assert page_recall([("b.pdf", 7)], chunks, 4) == 0.0  # right page number, wrong document
    assert reciprocal_rank(evidence, chunks, 10) == pytest.approx(1 / 3)
    assert reciprocal_rank(evidence, chunks, 2) == 0.0
    assert node_recall(evidence, (("a.pdf", 1, 5), ("c.pdf", 8, 12))) == 0.5
    run = QuestionRun(qid="q", qtype="t", docs=docs, chunks=chunks, nodes=None, latency_ms=1.0)
    m = question_metrics(["a.pdf"], evidence, run, (1, 4), has_pages=True)
    assert m["doc_hit@1"] == 0.0 and m["doc_hit@3"] == 1.0 and m["page_recall@4"] == 1.0
    assert "node_recall" not in m  # no tree: not applicable rather than zero


def test_docugami_globs(tmp_path: Path) -> None:
    files = ("2022 Q3 AAPL.pdf", "2023 Q3 AAPL.pdf", "2023 Q3 MSFT.pdf")
    assert match_sources("*2023 Q3 AAPL*", files) == ("2023 Q3 AAPL.pdf",)
    assert match_sources("*AAPL*", files) == ("2022 Q3 AAPL.pdf", "2023 Q3 AAPL.pdf")
    assert match_sources("*AAPL*, *MSFT*", files) == files[:2] + ("2023 Q3 MSFT.pdf",)
    (tmp_path / "pdfs").mkdir()
    for f in files:
        (tmp_path / "pdfs" / f).write_bytes(b"%PDF-1.4\n")
    (tmp_path / "qna.csv").write_text('Question,Source Docs,Question Type\n"Apple sales?",*AAPL*,Multi-Doc RAG\n'
                                      '"Tesla?",*TSLA*,Single-Doc RAG\n')
    ds = load_docugami(tmp_path)
    assert ds.questions[0].relevant == ("2022 Q3 AAPL.pdf", "2023 Q3 AAPL.pdf") and ds.questions[0].skip is None
    assert ds.questions[1].skip and "match no file" in ds.questions[1].skip


async def test_bench_financebench_end_to_end(runtime: Runtime, tmp_path: Path) -> None:
    data = make_financebench(tmp_path / "fb")
    config = BenchConfig(dataset="financebench", data_dir=data, strategies=("auto", "semantic", "flat-bm25",
                                                                            "flat-dense", "flat-hybrid"), ks=(1, 5))
    report = await run_benchmark(runtime, config)

    pages = sum(len(p[3]) for p in CORPUS.values())
    assert (report.ingest.docs, report.ingest.pages, report.ingest.reused) == (4, pages, False)
    stored = await runtime.pool.fetchval("SELECT count(*) FROM chunks")
    assert report.ingest.chunks == stored > 0
    assert [s["qid"] for s in report.skipped] == ["q_gone"]
    assert "GONE_2019_10K" in report.skipped[0]["reason"]

    bm25 = report.strategies["flat-bm25"]
    assert bm25["n"] == 2
    # q_acme: top chunk is ACME page 3 (the evidence); q_bolt: top chunk is BOLT page 2, evidence page 4
    # has none of the query terms, so BM25 never returns it
    assert bm25["doc_hit@1"] == 1.0
    assert bm25["page_recall@1"] == 0.5 and bm25["page_recall@5"] == 0.5
    assert bm25["mrr@10"] == 0.5
    assert bm25["node_recall"] is None and bm25["llm_calls"] == 0
    acme = next(q for q in report.questions if q["qid"] == "q_acme")
    assert acme["evidence"] == [["ACME_2022_10K.pdf", 3]]  # zero-indexed 2 → our page 3
    # the evidence handed to synthesis holds ACME page 3, so the reference figure 4,210 is in it;
    # q_bolt's reference answer has no figure: not counted
    assert acme["results"]["flat-bm25"]["answer_number_recall"] == 1.0
    # the extractive answer over those chunks quotes the throughput sentence: the figure reaches the reader too
    assert acme["results"]["flat-bm25"]["answer_figure_recall"] == 1.0 and "4,210" in acme["results"]["flat-bm25"]["answer"]
    assert report.by_type["flat-bm25"]["metrics-generated"]["answer_figure_recall"] == 1.0
    assert acme["results"]["flat-bm25"]["evidence_doc_coverage"] == 1.0
    assert bm25["answer_number_recall"] == 1.0 and bm25["evidence_doc_coverage"] == 1.0
    assert acme["results"]["flat-bm25"]["chunks"][0] == ["ACME_2022_10K.pdf", 3]

    for name in ("auto", "semantic"):
        routed = report.strategies[name]
        assert routed["doc_hit@1"] == 1.0, name  # the unique term is in one document only
        assert routed["llm_calls"] == 0 and routed["tokens"] == 0  # offline
        assert routed["latency_ms_p50"] > 0 and routed["latency_ms_p95"] >= routed["latency_ms_p50"]
        # aggregate = mean of the per-question values
        per_q = [q["results"][name]["page_recall@5"] for q in report.questions]
        assert routed["page_recall@5"] == pytest.approx(sum(per_q) / len(per_q), abs=1e-4)
        assert 0.0 <= routed["node_recall"] <= 1.0
        bolt = next(q for q in report.questions if q["qid"] == "q_bolt")["results"][name]
        assert bolt["docs"][0] == "BOLT_2023_10K.pdf"
        assert bolt["page_recall@5"] == (1.0 if any(c[1] == 4 for c in bolt["chunks"][:5]) else 0.0)
    assert set(report.by_type["auto"]) == {"metrics-generated", "novel-generated"}

    # the CLI entry with --reuse: no re-ingest, JSON in the documented shape
    out = tmp_path / "fb.json"
    args = argparse.Namespace(dataset="financebench", data=data, questions=None, collection=None,
                              strategies="flat-bm25", k="1,5", json_out=out, reuse=True, limit=None)
    assert await asyncio.to_thread(run_cli, args) == 0
    doc = json.loads(out.read_text())
    assert list(doc)[:4] == ["dataset", "collection", "ingest", "strategies"]
    assert doc["collection"] == "bench-financebench" and doc["ingest"]["reused"] is True
    assert doc["ingest"]["chunks"] == stored
    assert doc["strategies"]["flat-bm25"]["page_recall@1"] == 0.5

    md = render_markdown(doc)
    assert "| metric | flat-bm25 |" in md and "| page_recall@1 | 0.500 |" in md
    assert "GONE_2019_10K" in md  # the skipped question and its reason

    # stage by stage: q_bolt's evidence page 4 holds none of the question's words, so no chunk of it is a
    # candidate; with the oracle choosing the node that covers page 4, the candidates reach it
    plain = next(q for q in report.questions if q["qid"] == "q_bolt")["results"]["auto"]
    assert plain["candidate_page_recall"] <= plain["node_recall"]
    oracle = await run_benchmark(runtime, msgspec.structs.replace(config, strategies=("auto",), reuse=True,
                                                                  oracle="nodes"))
    bolt = next(q for q in oracle.questions if q["qid"] == "q_bolt")["results"]["auto"]
    assert bolt["docs"][0] == "BOLT_2023_10K.pdf" and bolt["node_recall"] == 1.0
    assert bolt["candidate_page_recall"] == 1.0
    assert "## Stage by stage" in render_markdown(json.loads(report_json(oracle)))


async def test_bench_docugami_globs_and_neutral_names(runtime: Runtime, tmp_path: Path) -> None:
    data = tmp_path / "dg"
    (data / "pdfs").mkdir(parents=True)
    pages = {"2023 Q1 ACME": "Quillfeather volumes doubled at the northern site. ",
             "2023 Q2 ACME": "Zorbex throughput reached a record in the quarter. ",
             "2023 Q1 BOLT": "Marlinspike orders were delivered to three utilities. "}
    for stem, text in pages.items():
        pdf = pymupdf.open()
        for body in ("QUARTERLY REPORT ON FORM 10-Q", text + FILL * 3, "Controls and procedures. " + FILL * 3):
            pdf.new_page().insert_textbox(pymupdf.Rect(72, 72, 540, 770), body, fontsize=10)
        pdf.save(data / "pdfs" / f"{stem}.pdf")
        pdf.close()
    (data / "qna.csv").write_text(
        "Question,Source Docs,Question Type,Answer\n"
        '"What is the zorbex throughput?",*2023 Q2 ACME*,Single-Doc Single-Chunk RAG,A record.\n'
        '"How did the quillfeather and zorbex figures change across these quarters?",*ACME*,Multi-Doc RAG,"x"\n'
        '"What did Tesla report?",*TSLA*,Single-Doc Single-Chunk RAG,"$12 million"\n')
    report = await run_benchmark(runtime, BenchConfig(dataset="docugami", data_dir=data,
                                                      strategies=("auto", "flat-bm25")))
    stored = [r["name"] for r in await runtime.pool.fetch("SELECT name FROM documents ORDER BY name")]
    assert len(stored) == 3 and all(n.startswith("doc-") and "ACME" not in n for n in stored)  # names hidden
    assert [s["qid"] for s in report.skipped] == ["q3"]
    bm25 = report.strategies["flat-bm25"]
    assert (bm25["n"], bm25["doc_hit@1"], bm25["doc_recall@3"]) == (2, 1.0, 1.0)
    assert bm25["page_recall@10"] is None and bm25["mrr@10"] is None  # no page labels in this dataset
    multi = next(q for q in report.questions if q["qid"] == "q2")
    assert multi["relevant"] == ["2023 Q1 ACME.pdf", "2023 Q2 ACME.pdf"]
    assert set(multi["results"]["flat-bm25"]["docs"][:2]) == set(multi["relevant"])  # mapped back to file names
    assert report.strategies["auto"]["doc_recall@5"] == 1.0
    # a change across quarters: each relevant 10-Q contributes evidence handed to synthesis
    assert multi["results"]["auto"]["evidence_doc_coverage"] == 1.0
    assert report.by_type["auto"]["Multi-Doc RAG"]["evidence_doc_coverage"] == 1.0


def test_answer_number_recall_normalisation() -> None:
    answer = ("- For the quarter ended June 25, 2022, total net sales were $82,959 million. (SOURCE: 2022 Q3 AAPL.pdf)\n"
              "- For the quarter ended December 31, 2022, they were $117.154 billion.\nSOURCE(S): 2023 Q1 AAPL.pdf")
    # only the two figures count: dates, years and file names do not
    assert answer_number_recall(answer, "How have sales changed?", "Total net sales 82,959 74,788") == 0.5
    assert answer_number_recall(answer, "q", "net sales $ 117,154 and 82,959") == 1.0
    assert answer_number_recall("Debt fell by $2.5bn.", "q", "Total debt 47,237 49,751 change (2,512)") == 1.0
    assert answer_number_recall("The rate was 15.7%.", "q", "effective tax rate 16%") == 0.0
    assert answer_number_recall("Yes, in Q3 2023 the 10-Q says so.", "q", "anything") is None
    assert answer_number_recall("$1577.00", "What was FY2018 capex (in USD millions)?", "(1,577) (1,373)") == 1.0
    assert answer_number_recall("It was 3M's best year with 412 stores", "How many stores did 3M have?",
                                "3M operated 412 stores") == 1.0


def test_question_metrics_include_coverage() -> None:
    run = QuestionRun(qid="q", qtype="t", docs=("a", "b", "c"), chunks=(), nodes=None, latency_ms=1.0,
                      evidence_docs=("a", "c"), evidence_text="revenue was 1,284.6")
    m = question_metrics(("a", "b"), (), run, (5,), False, answer="$1,284.6 million", question="q")
    assert m["evidence_doc_coverage"] == 0.5 == evidence_doc_coverage(("a", "b"), ("a", "c"))
    assert m["answer_number_recall"] == 1.0
    assert "answer_number_recall" not in question_metrics(("a",), (), run, (5,), False, answer="yes", question="q")


async def test_bench_llm_mode_reports_calls_tokens_and_cost(runtime: Runtime, tmp_path: Path,
                                                            fake_openai: FakeOpenAI) -> None:
    """``kb bench --llm`` against the fake OpenAI server: every routed question is asked through the model
    (and answered), and the report gives calls, tokens and the estimated cost per question."""
    import dataclasses

    from kb.core.errors import ValidationError
    from kb.core.providers.chat import OpenAIChatModel
    from kb.core.settings import LLMSettings

    def respond(body: dict[str, Any]) -> FakeReply:
        rf = body.get("response_format") or {}
        if rf.get("type") == "json_schema":
            return FakeReply.json(minimal_json(rf["json_schema"]["schema"]), prompt_tokens=1000, completion_tokens=50)
        return FakeReply.text("An answer [1].", prompt_tokens=2000, completion_tokens=100)

    fake_openai.script(responder=respond)
    chat = OpenAIChatModel(LLMSettings(base_url=fake_openai.base_url, model="fake-model", api_key="k", timeout_s=5,
                                       max_retries=0, concurrency=4, cache=False))
    data = make_financebench(tmp_path / "fb")
    config = BenchConfig(dataset="financebench", data_dir=data, strategies=("auto", "flat-dense"), ks=(5,),
                         llm=True, price_in=1.0, price_out=4.0)
    with pytest.raises(ValidationError, match="needs an LLM endpoint"):
        await run_benchmark(runtime, config)  # the runtime's own chat is offline
    report = await run_benchmark(dataclasses.replace(runtime, chat=chat), config)
    auto = report.strategies["auto"]
    assert auto["llm_calls"] >= 2 and auto["tokens"] > 0  # at least one routed step and the answer
    # every reply costs 1,200 USD-millionths per 1,050 tokens (JSON) or 2,400 per 2,100 (text): 8/7 per token
    assert auto["cost_usd"] == pytest.approx(auto["tokens"] * 8 / 7 / 1e6, rel=1e-3)
    assert report.strategies["flat-dense"].get("cost_usd") is None
    answered = [r for r in fake_openai.requests if r.response_format is None]
    assert len(answered) == report.strategies["auto"]["n"]  # one synthesis per routed question
    offline = await run_benchmark(dataclasses.replace(runtime, chat=chat),
                                  msgspec.structs.replace(config, llm=False, reuse=True))
    assert offline.strategies["auto"]["llm_calls"] == 0  # without --llm nothing is sent


def test_bench_ingest_profiles_offline_and_counts_llm_calls_with_llm(kb_env: dict[str, str], set_env: SetEnv,
                                                                    tmp_path: Path, fake_openai: FakeOpenAI,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``kb bench ingest --data DIR`` profiles the files offline; with ``--llm`` it runs them again through the
    configured endpoint (here the fake OpenAI server) and counts the calls per purpose; ``--llm`` without an
    endpoint is refused."""
    from kb.cli import main

    folder = tmp_path / "docs"
    folder.mkdir()
    make_text_pdf(folder / "report.pdf", [f"Section {i}\n\n" + paragraph(f"page {i}", 8) for i in range(1, 7)])
    (folder / "notes.md").write_text("# Notes\n\n## Revenue\n\nRevenue grew 12%.\n\n## Costs\n\nCosts fell.\n")
    assert main(["bench", "ingest", "--data", str(folder)]) == 0
    offline = json.loads(capsys.readouterr().out)
    assert offline["offline"]["ok"] == 2 and offline["offline"]["pages"] == 6 and "llm" not in offline
    with pytest.raises(SystemExit, match="needs an LLM endpoint"):
        main(["bench", "ingest", "--data", str(folder), "--llm"])
    fake_openai.script(responder=lambda body: FakeReply.json(minimal_json(
        body["response_format"]["json_schema"]["schema"])) if body.get("response_format") else FakeReply.text("A report."))
    set_env(KB_LLM_BASE_URL=fake_openai.base_url, KB_LLM_API_KEY="k", KB_LLM_MODEL="fake-model",
            KB_LLM_MAX_RETRIES="0")
    assert main(["bench", "ingest", "--data", str(folder), "--llm"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["llm"]["calls"] == len(fake_openai.requests) > 0
    assert sum(report["llm"]["by_purpose"].values()) == report["llm"]["calls"]
    assert report["offline"]["chunks_per_100_pages"] == offline["offline"]["chunks_per_100_pages"]
    assert report["llm"]["calls_per_100_pages"] == round(100 * report["llm"]["calls"] / 6, 2)


def test_bench_ingest_stages_times_the_whole_ingest_and_the_embedder_alone(db_env: str, set_env: SetEnv,
                                                                          tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``kb bench ingest --stages --data DIR`` ingests the folder into a scratch collection (emptied first: a
    second run ingests again, nothing skipped as unchanged), times every stage, and embeds the same texts alone;
    the report is appended to ``--out``; a folder without supported files is refused."""
    from kb.cli import main

    set_env(KB_EMBEDDING_MODEL="hash:384", KB_INGEST_WORKERS="2")  # two files at a time, as kb ingest takes them
    folder = tmp_path / "docs"
    folder.mkdir()
    make_text_pdf(folder / "report.pdf", [f"Section {i}\n\n" + paragraph(f"page {i}", 8) for i in range(1, 5)])
    (folder / "notes.md").write_text("# Notes\n\n## Revenue\n\nRevenue grew 12%.\n\n## Costs\n\nCosts fell.\n")
    out = tmp_path / "ingest.md"
    for _ in range(2):
        assert main(["bench", "ingest", "--stages", "--data", str(folder), "--out", str(out)]) == 0
        text = capsys.readouterr().out
        assert "2 files (0 not ingested), 2 at a time (`KB_INGEST_WORKERS`), 4 pages" in text, text
        for stage in ("| parse |", "| tree |", "| chunking |", "| embedding |", "| store |"):
            assert stage in text, (stage, text)
        assert "of the embedder's limit" in text and "`hash:384`" in text
    assert out.read_text().count("## Ingest stages:") == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="no supported files"):
        main(["bench", "ingest", "--stages", "--data", str(empty)])
