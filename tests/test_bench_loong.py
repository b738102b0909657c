"""``kb bench loong`` on a generated Loong-format corpus (a few small text reports the test writes), the
dataset registry, and the answer metrics: ``answer_figure_recall``, ``needed_cited``/``needed_recall`` and
``right_entities`` checked by hand. The real Loong dev data, when present, is only loaded (no ingest)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from kb.bench.cli import BENCHMARKS, RUNNERS, add_arguments, run
from kb.bench.datasets import DATASETS, default_collection, load_loong, loong_collection
from kb.bench.entities import question_groups, right_entities
from kb.bench.harness import BenchConfig, run_benchmark, run_cli
from kb.bench.metrics import (
    READINGS,
    QuestionRun,
    answer_figure_recall,
    answer_number_recall,
    needed_cited,
    needed_recall,
    question_metrics,
)
from kb.bench.report import render_markdown
from kb.runtime import Runtime

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
FILL = ("Management reviewed the segment results, the pricing environment, the cost of materials and the outlook "
        "for the coming year with the board, and the discussion follows the structure of prior filings. ")

REPORTS = {
    "2024-ZORBEX CORP-j": ("ZORBEX CORP", 2024, "Total revenue was $412,000 thousand.",
                           "Basic earnings per share was $(0.54) for the year.", "$7,963 thousand"),
    "2023-ZORBEX CORP-j": ("ZORBEX CORP", 2023, "Total revenue was $398,500 thousand.",
                           "The net loss narrowed as costs fell.", "$9,120 thousand"),
    "2024-Quillfeather Inc.-j": ("QUILLFEATHER INC.", 2024, "Total revenue was $905,300 thousand.",
                                 "Net income grew on municipal contracts.", "$20,410 thousand"),
    "2024-Marlin Holdings-j": ("MARLIN HOLDINGS", 2024, "Total revenue was $120,750 thousand.",
                               "Net income was stable.", "$3,880 thousand"),
}
COMPANIES = ["ZORBEX CORP", "Quillfeather Inc.", "Marlin Holdings"]
LISTED = "Companies: ZORBEX CORP, Quillfeather Inc. and Marlin Holdings. "
QUESTIONS = [
    {"id": "l1", "level": 1, "set": 1, "query": "What is the basic earnings per share of ZORBEX CORP?",
     "question": "What is the basic earnings per share?", "answer": "($0.54)", "names": ["ZORBEX CORP", "Quillfeather Inc."],
     "docs": ["2024-ZORBEX CORP-j", "2024-Quillfeather Inc.-j"], "needed": ["2024-ZORBEX CORP-j"]},
    {"id": "l2", "level": 2, "set": 1, "query": LISTED + "Which company has the highest total revenue?",
     "question": "Which company has the highest total revenue?", "answer": "Quillfeather Inc.", "names": COMPANIES,
     "docs": ["2024-ZORBEX CORP-j", "2024-Quillfeather Inc.-j", "2024-Marlin Holdings-j"],
     "needed": ["2024-ZORBEX CORP-j", "2024-Quillfeather Inc.-j", "2024-Marlin Holdings-j"]},
    {"id": "l3", "level": 3, "set": 1,
     "query": LISTED + "Please categorize the companies listed above by 'total revenue' into the following groups: "
                       "high revenue (over $500,000 thousand), low revenue (below $500,000 thousand). Place companies "
                       "into the same collection for the same category.",
     "question": "Please categorize …", "names": COMPANIES,
     "answer": {"high revenue": ["Quillfeather Inc."], "low revenue": ["ZORBEX CORP", "Marlin Holdings"]},
     "docs": ["2024-ZORBEX CORP-j", "2024-Quillfeather Inc.-j", "2024-Marlin Holdings-j"],
     "needed": ["2024-ZORBEX CORP-j", "2024-Quillfeather Inc.-j", "2024-Marlin Holdings-j"]},
    {"id": "l4", "level": 4, "set": 1,
     "query": "How did ZORBEX CORP's cash and cash equivalents change from 2023 to 2024?",
     "question": "How did the cash change?", "names": ["ZORBEX CORP"],
     "answer": "Cash and cash equivalents decreased from $9,120 thousand in 2023 to $7,963 thousand in 2024.",
     "docs": ["2023-ZORBEX CORP-j", "2024-ZORBEX CORP-j"], "needed": ["2023-ZORBEX CORP-j", "2024-ZORBEX CORP-j"]},
    {"id": "gone", "level": 1, "set": 1, "query": "What is the revenue of GONE LLC?", "question": "Revenue?",
     "answer": "$5 million", "names": ["GONE LLC"], "docs": ["2022-GONE LLC-j"], "needed": ["2022-GONE LLC-j"]},
]


def make_loong(root: Path) -> Path:
    """A Loong-layout folder: ``docs/*.txt`` and ``questions.jsonl``."""
    (root / "docs").mkdir(parents=True)
    for stem, (company, year, revenue, income, cash) in REPORTS.items():
        (root / "docs" / f"{stem}.txt").write_text(
            f"{company}\nANNUAL REPORT ON FORM 10-K FOR THE FISCAL YEAR {year}\n\n"
            f"BUSINESS\n\n{FILL * 4}\n\n"
            f"CONSOLIDATED STATEMENTS OF OPERATIONS\n\n{revenue} {income}\n{FILL * 3}\n\n"
            f"CONSOLIDATED BALANCE SHEETS\n\nCash and cash equivalents at the end of {year} were {cash}.\n{FILL * 3}\n",
            encoding="utf-8")
    (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    return root


# --------------------------------------------------------------------------- the registry


def test_benchmarks_are_declared_once() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    choices = next(a.choices for a in parser._actions if a.dest == "dataset")
    assert tuple(choices) == BENCHMARKS == (*DATASETS, *RUNNERS)
    assert {"financebench", "docugami", "loong"} <= set(DATASETS) and not set(DATASETS) & set(RUNNERS)
    assert default_collection("financebench", Path("/x/financebench-dev")) == "bench-financebench"
    assert loong_collection(Path("/data/loong-en-dev")) == "bench-loong-en"
    assert loong_collection(Path("/data/loong-zh-dev")) == "bench-loong-zh"
    assert loong_collection(Path("/data/my set")) == "bench-loong-my-set"
    assert BenchConfig(dataset="loong", data_dir=Path("/d/loong-zh-dev")).collection_name == "bench-loong-zh"


def test_absent_data_runs_nothing(tmp_path: Path) -> None:
    args = argparse.Namespace(dataset="loong", data=tmp_path / "loong-en-dev")
    with pytest.raises(SystemExit, match="no data folder"):
        run(args)  # before any database is opened


def test_loong_loader(tmp_path: Path) -> None:
    ds = load_loong(make_loong(tmp_path / "loong-en-dev"))
    assert ds.files == tuple(sorted(f"{s}.txt" for s in REPORTS)) and not ds.has_pages
    q = {x.qid: x for x in ds.questions}
    assert q["l1"].question == QUESTIONS[0]["query"] and q["l1"].qtype == "level 1"
    assert q["l1"].relevant == ("2024-ZORBEX CORP-j.txt",) and q["l1"].companies == ()
    assert q["l2"].companies == tuple(COMPANIES) and len(q["l2"].relevant) == 3
    assert q["l3"].categories == (("high revenue", ("Quillfeather Inc.",)),
                                  ("low revenue", ("ZORBEX CORP", "Marlin Holdings")))
    assert q["l3"].answer == "high revenue: Quillfeather Inc.; low revenue: ZORBEX CORP, Marlin Holdings"
    assert q["l4"].companies == () and q["l4"].relevant == ("2023-ZORBEX CORP-j.txt", "2024-ZORBEX CORP-j.txt")
    assert q["gone"].skip == "reports not in docs/: 2022-GONE LLC-j"


def test_loong_rewordings_replace_the_dev_queries_by_id(tmp_path: Path) -> None:
    """``--questions`` with ``{id, query}`` lines: the dev questions (answers, reports, companies) asked in other
    words; an id the dev file lacks is refused."""
    from kb.core.errors import ValidationError

    data = make_loong(tmp_path / "loong-en-dev")
    reworded = tmp_path / "reworded.jsonl"
    reworded.write_text(json.dumps({"id": "l2", "query": "Of Zorbex, Quillfeather and Marlin, whose revenue led?"})
                        + "\n" + json.dumps({"id": "l1", "query": "Zorbex revenue, please."}) + "\n")
    ds = load_loong(data, reworded)
    dev = {x.qid: x for x in load_loong(data).questions}
    assert [q.qid for q in ds.questions] == ["l2", "l1"]
    assert ds.questions[0].question.startswith("Of Zorbex") and ds.questions[1].question == "Zorbex revenue, please."
    assert ds.questions[0].answer == dev["l2"].answer and ds.questions[0].companies == dev["l2"].companies
    assert ds.questions[1].relevant == dev["l1"].relevant
    reworded.write_text(json.dumps({"id": "nope", "query": "?"}) + "\n")
    with pytest.raises(ValidationError, match="unknown questions: nope"):
        load_loong(data, reworded)


# --------------------------------------------------------------------------- metrics by hand


def test_answer_figure_recall() -> None:
    answer = "Cash decreased from $9,120 thousand in 2023 to $7,963 thousand in 2024."
    # the answer text is read like the evidence: scales, separators, years not counted
    assert answer_figure_recall(answer, "q", "- ZORBEX: cash was 7,963 in 2024 [2]") == 0.5
    assert answer_figure_recall(answer, "q", "$9.12 million then $7,963,000") == 1.0
    assert answer_figure_recall(answer, "q", "") == 0.0
    assert answer_figure_recall("Revenue grew by 9 points to 12 sites.", "q", "It grew [9] and [12].") == 0.0  # markers
    assert answer_figure_recall("It decreased.", "q", "9,120") is None  # no reference figure: not counted
    assert answer_figure_recall("$412 million", "Was revenue $412 million?", "nothing") is None  # asked, not answered
    # Chinese reports glue figures to words and scale by 亿/万
    assert answer_figure_recall("2015年第三季度为1066.59亿元。", "q", "负债和所有者权益总计为106,659,000,000.00元") == 1.0
    assert answer_figure_recall("使用权资产为62,192,637.31", "q", "使用权资产62,192,637.31元") == 1.0
    assert answer_figure_recall("营业收入3.5万元", "q", "营业收入为35,000元") == 1.0
    # what reached synthesis versus what reached the reader
    run = QuestionRun(qid="q", qtype="t", docs=("a",), chunks=(), nodes=None, latency_ms=1.0,
                      evidence_text="basic EPS $(0.54); diluted $(0.54)", answer_text="Basic EPS was negative [1].")
    m = question_metrics(("a",), (), run, (5,), False, answer="($0.54)", question="What is the basic EPS?")
    assert (m["answer_number_recall"], m["answer_figure_recall"]) == (1.0, 0.0)
    assert answer_number_recall("($0.54)", "q", run.evidence_text) == 1.0


def test_needed_citations() -> None:
    assert needed_cited(["a", "b"], ["b", "c", "a"]) == 1.0 and needed_recall(["a", "b"], ["b", "c", "a"]) == 1.0
    assert needed_cited(["a", "b"], ["a"]) == 0.0 and needed_recall(["a", "b"], ["a"]) == 0.5
    assert needed_cited([], ["a"]) == 0.0


GROUPS_Q = (LISTED + "Please categorize them by 'total revenue' into the following groups: high revenue (over $500,000 "
            "thousand), medium revenue (over $100,000 and below $500,000), and very low revenue (0 and below). Place …")
CATS = (("high revenue", ("Quillfeather Inc.",)), ("medium revenue", ("ZORBEX CORP", "Marlin Holdings")))


def test_right_entities_winner_and_order() -> None:
    q = LISTED + "Which company has the highest total revenue?"
    ref = "Quillfeather Inc."
    assert right_entities("Quillfeather Inc. has the highest total revenue, ahead of ZORBEX.", q, COMPANIES, ref) == 1.0
    assert right_entities("ZORBEX: $412m. QUILLFEATHER: $905m. Marlin: $121m.\nThe largest is Quillfeather.", q,
                          COMPANIES, ref) == 1.0  # a synonym of the question's superlative, at the end
    assert right_entities("Marlin Holdings has the highest revenue.", q, COMPANIES, ref) == 0.0
    # a per-document listing (what an extractive answer gives) names every company but gives no verdict
    listing = "Per document:\n- 2024-Quillfeather Inc.-j.txt: revenue $905,300 [1]\n- ZORBEX CORP: $412,000 [2]"
    assert right_entities(listing, q, COMPANIES, ref) == 0.0
    assert right_entities("The lowest is Marlin Holdings.", q, COMPANIES, ref) == 0.0  # the other sense
    ordered = "1. Marlin Holdings: $120,750. 2. ZORBEX CORP: $412,000. 3. Quillfeather Inc.: $905,300."
    asked = LISTED + "List the total revenue of each in ascending order."
    assert right_entities(ordered, asked, COMPANIES, ordered) == 1.0
    assert right_entities("Quillfeather 905,300; Zorbex 412,000; Marlin 120,750.\nAscending: Marlin Holdings, "
                          "Zorbex Corp, Quillfeather Inc.", asked, COMPANIES, ordered) == 1.0  # last mentions decide
    assert right_entities("Marlin Holdings, then Quillfeather, then ZORBEX CORP", asked, COMPANIES, ordered) == 0.0
    assert right_entities("Marlin Holdings then ZORBEX CORP", asked, COMPANIES, ordered) == 0.0  # one missing
    assert right_entities("anything", "What is ZORBEX's EPS?", COMPANIES, "($0.54)") is None


def test_right_entities_categories() -> None:
    assert question_groups(GROUPS_Q) == ["high revenue", "medium revenue", "very low revenue"]
    as_json = json.dumps({k: list(v) for k, v in CATS})
    assert right_entities(as_json, GROUPS_Q, COMPANIES, "", CATS) == 1.0
    headings = "High revenue:\n- Quillfeather Inc.\nMedium revenue:\n- ZORBEX CORP\n- Marlin Holdings"
    assert right_entities(headings, GROUPS_Q, COMPANIES, "", CATS) == 1.0
    # a label the reference leaves out but the question lists ("very low revenue") still counts as a placement
    prose = ("Quillfeather Inc. is high revenue; ZORBEX CORP is medium revenue, while Marlin Holdings is very low "
             "revenue.")
    assert right_entities(prose, GROUPS_Q, COMPANIES, "", CATS) == pytest.approx(2 / 3)
    # a restated list of groups is no heading: label-less lines below it place nothing
    restated = "Groups: high revenue, medium revenue, very low revenue.\n- Quillfeather Inc.: 905,300\n- ZORBEX: 412,000"
    assert right_entities(restated, GROUPS_Q, COMPANIES, "", CATS) == 0.0
    zh_q = "公司：珠江啤酒、美康生物、芒果超媒。请对上述公司财报按照“基本每股收益”进行划分，划分成：高收益（0.20元及以上），中收益（0.10元至0.20元），低收益（0.10元以下）。"
    zh = (("高收益", ("美康生物", "芒果超媒")), ("中收益", ()), ("低收益", ("珠江啤酒",)))
    assert question_groups(zh_q) == ["高收益", "中收益", "低收益"]
    assert right_entities("高收益：美康生物、芒果超媒；低收益：珠江啤酒。", zh_q, ["珠江啤酒", "美康生物", "芒果超媒"], "", zh) == 1.0
    assert right_entities("珠江啤酒属于高收益。", zh_q, ["珠江啤酒", "美康生物", "芒果超媒"], "", zh) == 0.0


@pytest.mark.skipif(not (SHARED / "loong-en-dev").is_dir(), reason="Loong dev data absent (../shared/data)")
@pytest.mark.parametrize("folder", ["loong-en-dev", "loong-zh-dev"])
def test_real_loong_questions_load_and_their_references_score_right(folder: str) -> None:
    """Every needed report maps to a file, and an answer written from each reference scores right_entities 1."""
    if not (SHARED / folder).is_dir():
        pytest.skip(f"{folder} absent")
    ds = load_loong(SHARED / folder)
    assert ds.questions and not [q.skip for q in ds.questions if q.skip]
    for q in ds.questions:
        assert q.relevant and q.qtype in {"level 1", "level 2", "level 3", "level 4"}
        if not q.companies:
            continue
        if q.categories:
            assert question_groups(q.question), q.question
            ideal = "\n".join(f"{label}: {', '.join(members)}" for label, members in q.categories)
        else:
            word = "最高" if "最高" in q.question else "highest"
            ideal = q.answer if "," in q.answer and ". " in q.answer else f"{q.answer} has the {word} figure."
        assert right_entities(ideal, q.question, q.companies, q.answer, q.categories) == 1.0, (q.qid, ideal)


# --------------------------------------------------------------------------- end to end


async def test_bench_loong_end_to_end(runtime: Runtime, tmp_path: Path) -> None:
    data = make_loong(tmp_path / "loong-en-dev")
    config = BenchConfig(dataset="loong", data_dir=data, strategies=("auto", "flat-bm25"))
    report = await run_benchmark(runtime, config)
    assert report.collection == "bench-loong-en" and report.environment["top_docs"] == "scope"
    assert (report.ingest.docs, report.ingest.reused) == (4, False)
    assert [s["qid"] for s in report.skipped] == ["gone"]
    for name in ("auto", "flat-bm25"):
        s = report.strategies[name]
        assert s["n"] == 4
        for metric in ("needed_cited", "needed_recall", "answer_number_recall", "answer_figure_recall",
                       "right_entities", "evidence_doc_coverage"):
            assert 0.0 <= s[metric] <= 1.0, (name, metric)
        assert s["page_recall@10"] is None  # text reports: no page labels
        readings = [s.get(f"reading_{k}") for k in READINGS]
        if name == "auto":  # how each question was read and answered: shares of the routed runs
            assert sum(readings) == pytest.approx(1.0), readings  # type: ignore[arg-type]
            assert s["reading_text"] == 1.0, readings  # all four read; their reports print no statements
        else:
            assert readings == [None] * len(READINGS)  # a flat baseline reads no question
        levels = report.by_type[name]
        assert set(levels) == {"level 1", "level 2", "level 3", "level 4"}
        assert levels["level 1"]["right_entities"] is None and levels["level 4"]["right_entities"] is None
        assert levels["level 2"]["right_entities"] is not None and levels["level 3"]["right_entities"] is not None
    for q in report.questions:
        for name, r in q["results"].items():
            cited = set(r["cited"])
            assert r["needed_cited"] == float(set(q["relevant"]) <= cited), (q["qid"], name)
            assert r["needed_recall"] == pytest.approx(len(set(q["relevant"]) & cited) / len(q["relevant"]), abs=1e-4)
            assert r["answer"]
    # level 1: "basic earnings per share" is in ZORBEX's 2024 report only; BM25's extractive answer quotes it
    l1 = next(q for q in report.questions if q["qid"] == "l1")["results"]["flat-bm25"]
    assert l1["docs"][0] == "2024-ZORBEX CORP-j.txt" and l1["needed_cited"] == 1.0
    assert "0.54" in l1["answer"] and l1["answer_figure_recall"] == 1.0 == l1["answer_number_recall"]

    out = tmp_path / "loong.json"
    args = argparse.Namespace(dataset="loong", data=data, questions=None, collection=None, strategies="flat-bm25",
                              k="5,10", json_out=out, reuse=True, limit=None)
    assert await asyncio.to_thread(run_cli, args) == 0
    doc = json.loads(out.read_text())
    assert doc["dataset"] == "loong" and doc["collection"] == "bench-loong-en" and doc["ingest"]["reused"] is True
    md = render_markdown(doc)
    assert "# kb bench loong" in md and "| needed_cited |" in md and "**right_entities**" in md
    assert "| level 3 (n=1) |" in md and "`right_entities` (levels 2–3)" in md
