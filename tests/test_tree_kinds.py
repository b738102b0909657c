"""Offline trees of documents beyond SEC filings (tests/docgen.py): lecture notes in Type 3 fonts, a two-column
paper, a 170-page annual report with a contents list over several pages, a regulator's release, an earnings
release. Each must find its sections with the right start page (±1), nested as printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.pdf_read import read_pdf
from ingest.pdf_tree import build_pdf_tree
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from kb.core.types import DocumentTree, TreeNode
from tests.docgen import KINDS, Made, find, matched, section_recall

MODES = {
    "lecture_notes": "no_toc",
    "lecture_notes_toc": "toc_pages",
    "lecture_notes_book": "no_toc",
    "lecture_notes_book_toc": "toc_pages",
    "tex_article": "no_toc",
    "dvips_notes": "no_toc",
    "dvips_notes_unnumbered": "no_toc",
    "research_paper": "no_toc",
    "annual_report": "toc_pages",
    "annual_report_number_first": "toc_pages",
    "annual_report_no_toc": "no_toc",
    "regulatory_release": "no_toc",
    "earnings_release": "no_toc",
    "earnings_release_tables": "no_toc",
    "institutional_report": "toc_pages",
}


async def _tree(made: Made) -> DocumentTree:
    return await build_pdf_tree(read_pdf(made.path), OfflineChatModel(), IngestSettings())


def _node(tree: DocumentTree, made: Made, title: str) -> TreeNode:
    node = find(tree, next(t for t in made.truth if t.title == title))
    assert node is not None, title
    return node


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_sections_found_with_their_start_pages(tmp_path: Path, kind: str) -> None:
    made = KINDS[kind](tmp_path / f"{kind}.pdf")
    tree = await _tree(made)
    assert tree.source_mode == MODES[kind]
    missed = [t for t in made.truth if not matched(tree, t)]
    assert section_recall(tree, made.truth) >= 0.95, missed
    exact = sum(matched(tree, t, 0) for t in made.truth)
    assert exact >= 0.9 * len(made.truth)
    assert len(tree.nodes) <= len(made.truth) + 3  # no invented sections beyond a preface or an abstract


async def test_levels_follow_the_numbering(tmp_path: Path) -> None:
    made = KINDS["lecture_notes"](tmp_path / "notes.pdf")
    tree = await _tree(made)
    for t in made.truth:
        assert _node(tree, made, t.title).level == t.level, t


async def test_lettered_subsections_restart_under_each_part(tmp_path: Path) -> None:
    made = KINDS["regulatory_release"](tmp_path / "release.pdf")
    tree = await _tree(made)
    by_id = {n.node_id: n for n in tree.nodes}
    letters = [t for t in made.truth if t.level == 2]
    assert sum(t.title.startswith("A. ") for t in letters) >= 3  # the letters do start again
    part = None
    for t in made.truth:
        node = find(tree, t, 0)
        assert node is not None and node.level == t.level, t
        if t.level == 1:
            part = t
        else:
            assert part is not None and by_id[node.parent_id].title == part.title  # type: ignore[index]


async def test_unnumbered_back_matter_joins_the_numbered_sections(tmp_path: Path) -> None:
    made = KINDS["research_paper"](tmp_path / "paper.pdf")
    tree = await _tree(made)
    refs = _node(tree, made, "References")
    conclusion = _node(tree, made, "6 Conclusion")
    assert refs.level == conclusion.level == 1 and refs.parent_id is None
    assert conclusion.end <= refs.start


async def test_tex_titles_read_as_printed(tmp_path: Path) -> None:
    """TeX through dvips and Ghostscript (OT1 ligatures and dashes, words cut at kerns, every font at 0.1 Tf):
    every numbered section, subsection and subsubsection with its exact title, level and start page."""
    made = KINDS["tex_article"](tmp_path / "notes.pdf")
    tree = await _tree(made)
    assert [(n.title, n.level, n.start) for n in tree.nodes] == [(t.title, t.level, t.page) for t in made.truth]
    assert any("fi" in t.title for t in made.truth) and any("\u2013" in t.title for t in made.truth)


@pytest.mark.parametrize("kind", ["dvips_notes", "dvips_notes_unnumbered"])
async def test_dvips_word_blocks_read_as_printed(tmp_path: Path, kind: str) -> None:
    """The issue-41 notes (Ghostscript 9.06: every word its own block at size 0.12, boxes 0.1 pt high): lines
    rebuilt from the words' origins, sizes from the glyph advances, so every section and subsection is found
    with its title, level and start page, numbered or told only by size and the space above."""
    made = KINDS[kind](tmp_path / f"{kind}.pdf")
    tree = await _tree(made)
    assert made.page_count >= 50 and not tree.warnings
    assert [(n.title, n.level, n.start) for n in tree.nodes] == [(t.title, t.level, t.page) for t in made.truth]


async def test_table_titles_are_sections_and_table_rows_are_not(tmp_path: Path) -> None:
    """An earnings release: every bold or display-size heading is a node, table titles included
    ("Reconciliation of GAAP to Non-GAAP …"); bold group labels and total rows are not."""
    made = KINDS["earnings_release_tables"](tmp_path / "release.pdf")
    tree = await _tree(made)
    assert sorted((n.title, n.start) for n in tree.nodes) == sorted((t.title, t.page) for t in made.truth)


async def test_institutional_report_sections_from_contents_and_body(tmp_path: Path) -> None:
    """A long institutional report: parts and chapters from the contents (over two pages), the unnumbered
    sections inside each chapter from the body; no running head or sidebar box becomes a section."""
    made = KINDS["institutional_report"](tmp_path / "report.pdf")
    tree = await _tree(made)
    assert made.page_count >= 100
    assert [(n.title, n.level, n.start) for n in tree.nodes if n.title != "Preface"] == [
        (t.title, t.level, t.page) for t in made.truth
    ]
