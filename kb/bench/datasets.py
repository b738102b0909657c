"""Benchmark question sets: FinanceBench (jsonl with evidence pages) and Docugami 10-Q (CSV with glob patterns)."""

from __future__ import annotations

import csv
import fnmatch
import re
from pathlib import Path

import msgspec
import structlog

from kb.errors import ValidationError
from kb.text import jsonl_objects

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


class BenchDataset(msgspec.Struct, frozen=True):
    """A corpus and its questions. ``anonymize``: ingest the PDFs under neutral names, so that nothing
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


def load_dataset(name: str, data_dir: Path, questions: Path | None = None) -> BenchDataset:
    if name == "financebench":
        ds = load_financebench(data_dir, questions)
    elif name == "docugami":
        ds = load_docugami(data_dir, questions)
    else:
        raise ValidationError(f"unknown dataset {name!r}")
    log.info("bench.dataset_loaded", dataset=name, files=len(ds.files), questions=len(ds.questions),
             skipped=sum(1 for q in ds.questions if q.skip))
    return ds
