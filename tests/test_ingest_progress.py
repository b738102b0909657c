"""A long file's progress moves inside it: the pages a parser process has read, the chunks written so far."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest import pipeline, store
from ingest.formats import parse_file
from ingest.parse_progress import PageCounter, page_counter
from ingest.pipeline import IngestContext, make_executor
from ingest.printed import printed_labels
from kb.core.settings import get_settings
from kb.runtime import Runtime
from tests.pdfgen import Sec, make_report_pdf, make_text_pdf


def _pages(n: int) -> list[str]:
    return [f"Page {i} of the long report. Revenue of segment {i % 7} rose by {i % 13} percent." for i in range(n)]


def test_the_parser_counts_pages_and_reads_printed_numbers_in_the_same_pass(tmp_path: Path) -> None:
    path = tmp_path / "r.pdf"
    make_report_pdf(path, [Sec("Revenue", paragraphs=12), Sec("Risks", paragraphs=12)], front_matter_pages=2)
    data = path.read_bytes()
    with page_counter() as counter:
        assert counter.read() == (0, 0)  # before the first page
        parsed = parse_file(data, "pdf", None, counter)
        assert counter.read() == (parsed.pdf.total_pages, parsed.pdf.total_pages)
    assert parsed.printed_pages and parsed.printed_pages == printed_labels(data)  # the standalone reading agrees
    assert not Path(counter.path).exists()  # the counter file is removed


def test_a_counter_whose_file_is_gone_is_ignored(tmp_path: Path) -> None:
    counter = PageCounter(tmp_path / "gone.pages")
    counter.write(3, 10)  # the parser's write to a removed file: no error
    assert counter.read() == (0, 0)


async def test_reading_a_long_pdf_in_a_parser_process_reports_pages_as_they_are_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "READ_POLL_S", 0.01)
    path = make_text_pdf(tmp_path / "long.pdf", _pages(600))
    seen: list[tuple[str, int, int]] = []
    ctx = IngestContext(pool=None, embedder=None, chat=None, settings=get_settings().ingest,  # type: ignore[arg-type]
                        executor=make_executor(1))
    with ctx:
        parsed = await pipeline._parse(ctx, path.read_bytes(), "pdf", lambda *at: seen.append(at))
    assert parsed.pdf is not None and parsed.pdf.total_pages == 600
    reading = [done for stage, done, total in seen if stage == "reading" and total == 600]
    assert any(0 < done < 600 for done in reading), seen  # counted up while the parser read
    assert reading == sorted(reading)


async def test_storing_a_document_reports_the_chunks_written(
        runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kb.runtime import build_ingest_context

    monkeypatch.setattr(store, "STORE_STEP", 4)
    path = make_text_pdf(tmp_path / "short.pdf", _pages(14))
    seen: list[tuple[str, int, int]] = []
    with build_ingest_context(runtime, processes=False) as ctx:
        outcome = await pipeline.ingest_file(ctx, path, name="short.pdf", collection_id=1,
                                             progress=lambda *at: seen.append(at))
    assert outcome.status == "ok" and outcome.chunks > 8, outcome
    chunking = [(done, total) for stage, done, total in seen if stage == "chunking"]
    assert chunking[0] == (0, outcome.nodes) and all(total == outcome.nodes for _, total in chunking)
    storing = [(done, total) for stage, done, total in seen if stage == "storing"]
    n = outcome.chunks
    assert storing == [(0, n), *((at, n) for at in range(0, n, 4)), (n, n)]
    count = await runtime.pool.fetchval("SELECT count(*) FROM chunks WHERE document_id = $1", outcome.document_id)
    assert count == n  # every batch went in
