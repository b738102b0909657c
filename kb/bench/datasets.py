"""Benchmark question sets, declared once in :data:`DATASETS`: FinanceBench (jsonl with evidence pages),
Docugami 10-Q (CSV with glob patterns) and Loong (plain-text reports, questions over the whole collection)."""

from __future__ import annotations

import csv
import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import structlog

from kb.bench.entities import right_entities
from kb.bench.metrics import QuestionRun, needed_cited, needed_recall
from kb.core.errors import ValidationError
from kb.core.text import jsonl_objects

log = structlog.get_logger("kb.bench.datasets")


class BenchQuestion(msgspec.Struct, frozen=True):
    """One question with its ground truth, in document names (PDF file names relative to ``pdfs/``).

    ``evidence`` holds (document name, 1-based page) pairs; empty when the dataset has no page labels.
    ``skip`` is a reason when the question cannot be scored (then it is reported, not counted).
    """

    qid: str
    question: str
    qtype: str
    relevant: tuple[str, ...]
    evidence: tuple[tuple[str, int], ...] = ()
    skip: str | None = None
    answer: str = ""  # the reference answer (for answer_number_recall)
    companies: tuple[str, ...] = ()  # Loong levels 2-3: the companies the answer picks or sorts among
    categories: tuple[tuple[str, tuple[str, ...]], ...] = ()  # Loong level 3: label → companies of the reference


class BenchDataset(msgspec.Struct, frozen=True):
    """A corpus and its questions. ``pdf_dir``: the folder ingested (``pdfs/``, Loong's ``docs/``); ``files``:
    the document file names in it. ``anonymize``: ingest the files under neutral names, so that nothing
    (metadata, titles, descriptions, name matching) can be learned from the file names."""

    name: str
    pdf_dir: Path
    metadata_path: Path | None
    files: tuple[str, ...]
    questions: tuple[BenchQuestion, ...]
    has_pages: bool
    anonymize: bool = False


def pdf_files(data_dir: Path) -> tuple[Path, tuple[str, ...]]:
    """``DIR/pdfs`` and the PDF file names in it (sorted); raises ``ValidationError`` when there are none."""
    pdf_dir = data_dir / "pdfs"
    if not pdf_dir.is_dir():
        raise ValidationError(f"{data_dir}: expected a folder pdfs/ with the corpus")
    files = tuple(sorted(p.name for p in pdf_dir.iterdir() if p.is_file() and p.suffix.lower() == ".pdf"))
    if not files:
        raise ValidationError(f"{pdf_dir}: no PDF files")
    return pdf_dir, files


def _stem(name: str) -> str:
    return name[:-4] if name.lower().endswith(".pdf") else name


def load_financebench(data_dir: Path, questions: Path | None = None) -> BenchDataset:
    """FinanceBench open-source layout: ``pdfs/``, ``documents.jsonl``, ``questions.jsonl``.

    Evidence pages are zero-indexed in the file and converted to our 1-based pages.
    """
    pdf_dir, files = pdf_files(data_dir)
    by_stem = {_stem(f): f for f in files}
    qpath = questions or data_dir / "questions.jsonl"
    if not qpath.is_file():
        raise ValidationError(f"question file not found: {qpath}")
    out: list[BenchQuestion] = []
    for line_no, row in jsonl_objects(qpath.read_text(encoding="utf-8-sig"), qpath.name, ValidationError):
        qid = str(row.get("financebench_id") or f"q{line_no}")
        text = str(row.get("question") or "").strip()
        qtype = str(row.get("question_type") or "unknown")
        doc = by_stem.get(_stem(str(row.get("doc_name") or "")))
        skip = None
        if not text:
            skip = "empty question"
        elif doc is None:
            skip = f"document {row.get('doc_name')!r} not in pdfs/"
        evidence: list[tuple[str, int]] = []
        for ev in row.get("evidence") or []:
            page = ev.get("evidence_page_num")
            ev_doc = by_stem.get(_stem(str(ev.get("doc_name") or row.get("doc_name") or "")))
            if isinstance(page, int) and ev_doc is not None:
                evidence.append((ev_doc, page + 1))
        if skip is None and not evidence:
            skip = "no evidence page"
        out.append(BenchQuestion(qid=qid, question=text, qtype=qtype, relevant=(doc,) if doc else (),
                                 evidence=tuple(dict.fromkeys(evidence)), skip=skip,
                                 answer=str(row.get("answer") or "")))
    meta = data_dir / "documents.jsonl"
    return BenchDataset(name="financebench", pdf_dir=pdf_dir, metadata_path=meta if meta.is_file() else None,
                        files=files, questions=tuple(out), has_pages=True)


def _find_csv(data_dir: Path) -> Path:
    found = sorted(p for p in data_dir.glob("*.csv") if p.is_file())
    if len(found) != 1:
        raise ValidationError(f"{data_dir}: expected exactly one Q&A CSV (found {len(found)}); use --questions")
    return found[0]


def match_sources(patterns: str, files: tuple[str, ...]) -> tuple[str, ...]:
    """File names matched by Docugami ``Source Docs`` glob patterns (several may be separated by , ; or newline)."""
    matched: list[str] = []
    for pat in (p.strip() for p in re.split(r"[,;\n]", patterns)):
        if not pat:
            continue
        for f in files:
            if fnmatch.fnmatchcase(f, pat) or fnmatch.fnmatchcase(_stem(f), pat):
                matched.append(f)
    return tuple(dict.fromkeys(matched))


def load_docugami(data_dir: Path, questions: Path | None = None) -> BenchDataset:
    """Docugami KG-RAG 10-Q layout: ``pdfs/`` and a CSV with Question, Source Docs (globs), Question Type."""
    pdf_dir, files = pdf_files(data_dir)
    qpath = questions or _find_csv(data_dir)
    with qpath.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and not {"Question", "Source Docs"} <= set(rows[0]):
        raise ValidationError(f"{qpath.name}: needs the columns 'Question' and 'Source Docs'")
    out: list[BenchQuestion] = []
    for i, row in enumerate(rows, start=1):
        text = (row.get("Question") or "").strip()
        pattern = (row.get("Source Docs") or "").strip()
        relevant = match_sources(pattern, files)
        skip = None
        if not text:
            skip = "empty question"
        elif not relevant:
            skip = f"Source Docs {pattern!r} match no file in pdfs/"
        out.append(BenchQuestion(qid=f"q{i}", question=text, qtype=(row.get("Question Type") or "unknown").strip(),
                                 relevant=relevant, skip=skip, answer=(row.get("Answer") or "").strip()))
    return BenchDataset(name="docugami", pdf_dir=pdf_dir, metadata_path=None, files=files, questions=tuple(out),
                        has_pages=False, anonymize=True)


def _loong_answer(raw: Any) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
    """A Loong reference as text, and its categories when it maps labels to companies (level 3)."""
    if isinstance(raw, dict):
        cats = tuple((str(k), tuple(str(c) for c in (v if isinstance(v, list) else [v]))) for k, v in raw.items())
        return "; ".join(f"{k}: {', '.join(v)}" for k, v in cats), cats
    if isinstance(raw, list):
        return "; ".join(str(x) for x in raw), ()
    return str(raw or ""), ()


def load_loong(data_dir: Path, questions: Path | None = None) -> BenchDataset:
    """Loong layout: ``docs/*.txt`` (reports as plain text) and ``questions.jsonl`` with ``{id, level, query,
    answer, names, docs, needed}``. The question asked is ``query`` (the collection-wide phrasing), the
    relevant documents are ``needed`` (``docs`` when absent), file stems mapped to the files of ``docs/``."""
    from ingest.formats import SUPPORTED

    doc_dir = data_dir / "docs"
    if not doc_dir.is_dir():
        raise ValidationError(f"{data_dir}: expected a folder docs/ with the reports")
    files = tuple(sorted(p.name for p in doc_dir.iterdir() if p.is_file() and p.suffix.lower() in SUPPORTED))
    if not files:
        raise ValidationError(f"{doc_dir}: no documents")
    by_stem = {Path(f).stem: f for f in files}
    qpath = questions or data_dir / "questions.jsonl"
    if not qpath.is_file():
        raise ValidationError(f"question file not found: {qpath}")
    rows = [row for _, row in jsonl_objects(qpath.read_text(encoding="utf-8-sig"), qpath.name, ValidationError)]
    if questions is not None and rows and all(set(r) <= {"id", "query"} for r in rows):
        rows = _reworded(data_dir / "questions.jsonl", rows)
    out: list[BenchQuestion] = []
    for line_no, row in enumerate(rows, 1):
        level = row.get("level")
        text = str(row.get("query") or row.get("question") or "").strip()
        stems = [str(x) for x in (row.get("needed") or row.get("docs") or [])]
        missing = [x for x in stems if x not in by_stem]
        skip = "empty question" if not text else f"reports not in docs/: {', '.join(missing)}" if missing else None
        if skip is None and not stems:
            skip = "no needed reports"
        answer, cats = _loong_answer(row.get("answer"))
        names = tuple(str(n) for n in row.get("names") or ())
        out.append(BenchQuestion(qid=str(row.get("id") or f"q{line_no}"), question=text, qtype=f"level {level}",
                                 relevant=tuple(by_stem[x] for x in stems if x in by_stem), skip=skip, answer=answer,
                                 companies=names if level in (2, 3) else (), categories=cats))
    return BenchDataset(name="loong", pdf_dir=doc_dir, metadata_path=None, files=files, questions=tuple(out),
                        has_pages=False)


def _reworded(dev: Path, rewordings: list[dict]) -> list[dict]:
    """The dev questions with their ``query`` replaced by rewordings keyed by ``id`` (a file of ``{id, query}``
    lines: ``bench/rewordings``), in the rewordings' order; an id the dev file lacks is an error."""
    by_id = {str(r.get("id")): r for _, r in jsonl_objects(dev.read_text(encoding="utf-8-sig"), dev.name,
                                                            ValidationError)}
    unknown = [str(r.get("id")) for r in rewordings if str(r.get("id")) not in by_id]
    if unknown:
        raise ValidationError(f"rewordings of unknown questions: {', '.join(unknown[:5])}")
    return [{**by_id[str(r["id"])], "query": r["query"]} for r in rewordings]


def loong_collection(data_dir: Path) -> str:
    """``bench-loong-en`` for ``…/loong-en-dev``: the folder name without ``-dev``, prefixed ``loong-`` if need be."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", data_dir.name).strip("-._").removesuffix("-dev") or "data"
    return f"bench-{stem if stem.startswith('loong') else 'loong-' + stem}"[:64]


def loong_scores(q: BenchQuestion, run: QuestionRun) -> dict[str, float]:
    """Loong's own per-question metrics: needed reports cited by the answer, and ``right_entities``."""
    m = {"needed_cited": needed_cited(q.relevant, run.cited_docs),
         "needed_recall": needed_recall(q.relevant, run.cited_docs)}
    if q.companies and (r := right_entities(run.answer_text, q.question, q.companies, q.answer,
                                            q.categories)) is not None:
        m["right_entities"] = r
    return m


@dataclass(frozen=True)
class DatasetSpec:
    """One benchmark dataset: how to load it and what is particular to it.

    ``collection``: the default collection for a data folder (else ``bench-<name>``); ``scope_top_docs``:
    routed questions leave ``top_docs`` unset, so the question's scope chooses how many documents (the API's
    default; for questions over many reports), else the harness asks for a fixed number; ``score``: the
    dataset's own per-question metrics, named in ``metrics``.
    """

    name: str
    load: Callable[[Path, Path | None], BenchDataset]
    summary: str
    collection: Callable[[Path], str] | None = None
    scope_top_docs: bool = False
    score: Callable[[BenchQuestion, QuestionRun], dict[str, float]] | None = None
    metrics: tuple[str, ...] = ()


DATASETS: Mapping[str, DatasetSpec] = {d.name: d for d in (
    DatasetSpec("financebench", load_financebench, "FinanceBench: pdfs/, documents.jsonl, questions.jsonl"),
    DatasetSpec("docugami", load_docugami, "Docugami KG-RAG 10-Qs: pdfs/ and a Q&A CSV"),
    DatasetSpec("loong", load_loong, "Loong: docs/*.txt reports and questions.jsonl (levels 1-4)",
                collection=loong_collection, scope_top_docs=True, score=loong_scores,
                metrics=("needed_cited", "needed_recall", "right_entities")),
)}
"""Every question dataset of ``kb bench`` (name → spec): adding one is an entry here and its loader."""


def dataset_spec(name: str) -> DatasetSpec:
    spec = DATASETS.get(name)
    if spec is None:
        raise ValidationError(f"unknown dataset {name!r}; use any of {', '.join(DATASETS)}")
    return spec


def default_collection(name: str, data_dir: Path) -> str:
    """The collection a dataset is ingested into when ``--collection`` is not given."""
    spec = DATASETS.get(name)
    return spec.collection(data_dir) if spec is not None and spec.collection is not None else f"bench-{name}"


def load_dataset(name: str, data_dir: Path, questions: Path | None = None) -> BenchDataset:
    ds = dataset_spec(name).load(data_dir, questions)
    log.info("bench.dataset_loaded", dataset=name, files=len(ds.files), questions=len(ds.questions),
             skipped=sum(1 for q in ds.questions if q.skip))
    return ds
