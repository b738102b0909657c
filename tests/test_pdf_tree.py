"""PDF reading and PageIndex tree building on synthetic PDFs (tests/pdfgen.py)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from ingest.pdf_read import NO_TEXT_LAYER, numbering_of, read_pdf
from ingest.pdf_tree import build_pdf_tree, page_groups
from ingest.prompts import GENERATE, HEADINGS, LOCATE, TOC_DETECT, TOC_TRANSFORM
from kb.core.errors import IngestError, LLMError
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from kb.core.types import DocumentTree
from tests.fakes import ScriptedChat
from tests.pdfgen import (
    Sec,
    make_corrupt_pdf,
    make_encrypted_pdf,
    make_glyph_code_pdf,
    make_image_only_pdf,
    make_report_pdf,
    make_truncated_pdf,
    make_zero_page_pdf,
)

OFFLINE = OfflineChatModel()

SECTIONS = [
    Sec("1 Introduction", 1, 4),
    Sec("1.1 Background", 2, 3),
    Sec("1.2 Scope of the Study", 2, 2),
    Sec("2 Methods", 1, 6),
    Sec("2.1 Data Sources", 2, 3, new_page=True),
    Sec("3 Results", 1, 5),
    Sec("4 Discussion", 1, 3),
]


def check_invariants(tree: DocumentTree, pages: list[str]) -> None:
    """Depth-first ids, consistent parents/levels/paths, page ranges and texts."""
    by_id = {}
    for i, n in enumerate(tree.nodes):
        assert n.node_id == f"{i:04d}" and n.ordinal == i
        assert 1 <= n.start <= n.end <= tree.page_count
        assert n.unit == "page" and n.summary == ""
        assert n.text == "\n\n".join(pages[p - 1] for p in range(n.start, n.end + 1))
        assert n.path[-1] == n.title
        if n.parent_id is None:
            assert n.level == 1 and len(n.path) == 1
        else:
            parent = by_id[n.parent_id]  # parents come first (depth-first order)
            assert n.level == parent.level + 1 and n.path[:-1] == parent.path
            assert not parent.is_leaf
        by_id[n.node_id] = n
    parents = {n.parent_id for n in tree.nodes}
    for n in tree.nodes:
        assert n.is_leaf == (n.node_id not in parents)


async def build(path: Path, chat: Any = OFFLINE, **kw: Any) -> tuple[DocumentTree, list[str]]:
    parsed = read_pdf(path)
    tree = await build_pdf_tree(parsed, chat, IngestSettings(**kw))
    pages = [parsed.body_text(p.number) for p in parsed.pages]
    check_invariants(tree, pages)
    return tree, pages


def titled(tree: DocumentTree) -> dict[str, Any]:
    return {n.title: n for n in tree.nodes}


def assert_matches_layout(tree: DocumentTree, layout: Any) -> None:
    nodes = titled(tree)
    for placed in layout.sections:
        node = nodes[placed.title]
        assert node.start == placed.page, placed.title
        assert node.level == placed.level, placed.title


# ---------------------------------------------------------------------------- read_pdf


def test_read_pdf_pages_tokens_outline_labels(tmp_path: Path) -> None:
    layout = make_report_pdf(
        tmp_path / "r.pdf",
        SECTIONS,
        outline=True,
        printed_toc="pages",
        front_matter_pages=2,
        page_labels=True,
    )
    parsed = read_pdf(layout.path)
    assert parsed.page_count == layout.page_count == parsed.total_pages
    assert [p.number for p in parsed.pages] == list(range(1, layout.page_count + 1))
    assert all(p.tokens > 0 for p in parsed.pages)
    assert parsed.outline[0] == (1, "1 Introduction", 3)
    assert parsed.page_labels[:4] == ("i", "ii", "1", "2")
    assert parsed.body_font_size == 10.0
    heads = {h.text: h for h in parsed.headings}
    assert (
        heads["2 Methods"].size == 18.0
        and heads["2 Methods"].bold
        and heads["2 Methods"].numbering == "dec:2"
    )
    assert heads["1.1 Background"].numbering == "dec:1.1"
    # the printed page number in the footer is a running footer, not content
    body = parsed.pages[2].text.split("\n")
    assert body[-1] == "1" and len(body) - 1 in parsed.margins[2]
    assert pickle.loads(pickle.dumps(parsed)) == parsed  # built in a worker process
    short = read_pdf(layout.path, max_pages=3)
    assert short.page_count == 3 and short.total_pages == layout.page_count


def test_numbering_patterns() -> None:
    assert numbering_of("Item 7. Management’s Discussion") == "item:7"
    assert numbering_of("ITEM 1A RISK FACTORS") == "item:1A"
    assert numbering_of("PART II") == "part:II"
    assert numbering_of("Note 3 — Revenue") == "note:3"
    assert numbering_of("1.2.3 Detailed Design") == "dec:1.2.3"
    assert numbering_of("Note 13 (Pension plans) for the service cost") == ""  # a reference in prose
    assert numbering_of("10 cents per share") == ""
    assert numbering_of("section 1.409A of the Code") == ""


@pytest.mark.parametrize(
    ("maker", "reason"),
    [
        (make_encrypted_pdf, "encrypted PDF; password required"),
        (make_corrupt_pdf, "corrupt or unreadable PDF"),
        (make_zero_page_pdf, "zero pages"),
    ],
)
def test_read_pdf_rejects_bad_files(tmp_path: Path, maker: Any, reason: str) -> None:
    path = maker(tmp_path / "bad.pdf")
    with pytest.raises(IngestError) as err:
        read_pdf(path)
    assert reason in err.value.detail


@pytest.mark.parametrize("maker", [make_image_only_pdf, make_glyph_code_pdf], ids=["scan", "type3-glyph-codes"])
async def test_no_text_layer_gives_a_node_per_page_and_a_warning(tmp_path: Path, maker: Any) -> None:
    """A scan, or Type 3 glyphs whose codes are not characters: a page-per-node tree, never an exception."""
    path = maker(tmp_path / "scan.pdf", pages=3)
    with pymupdf.open(path) as doc:
        raw = "".join(p.get_text() for p in doc)
    assert sum(c.isalpha() for c in raw) <= 0.3 * len("".join(raw.split()))  # its own text layer: no words
    parsed = read_pdf(path)  # no OCR engine given
    scan = ("3 of 3 pages have no text layer; OCR not available: see README (Scanned PDFs)",) \
        if maker is make_image_only_pdf else ()  # glyph codes are text, just not characters: not a scan
    assert parsed.warnings == (NO_TEXT_LAYER, *scan) and parsed.page_count == 3
    assert all(p.text == "" for p in parsed.pages)
    tree, _ = await build(path)
    assert [(n.title, n.start, n.end) for n in tree.nodes] == [(f"Page {p}", p, p) for p in (1, 2, 3)]
    assert NO_TEXT_LAYER in tree.warnings and tree.source_mode == "pages"


def test_read_pdf_rejects_truncated_and_missing(tmp_path: Path) -> None:
    good = make_report_pdf(tmp_path / "good.pdf", SECTIONS).path
    with pytest.raises(IngestError, match="corrupt or unreadable|zero pages|no text layer"):
        read_pdf(make_truncated_pdf(tmp_path / "cut.pdf", good))
    with pytest.raises(IngestError, match="corrupt or unreadable"):
        read_pdf(tmp_path / "missing.pdf")


# ---------------------------------------------------------------------------- the three modes + outline


async def test_outline_mode(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "o.pdf", SECTIONS, outline=True)
    tree, _ = await build(layout.path)
    assert tree.source_mode == "outline" and tree.llm_calls == 0
    assert [n.title for n in tree.nodes] == [s.title for s in layout.sections]  # first section on page 1
    assert_matches_layout(tree, layout)
    nodes = titled(tree)
    assert nodes["1.1 Background"].parent_id == nodes["1 Introduction"].node_id
    assert nodes["2.1 Data Sources"].parent_id == nodes["2 Methods"].node_id


async def test_outline_that_does_not_match_the_pages_falls_back(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "o.pdf", SECTIONS)
    doc = pymupdf.open(layout.path)
    doc.set_toc([[1, f"Bookmark {i}", p] for i, p in enumerate((1, 3, 5), 1)])
    doc.save(tmp_path / "o2.pdf")
    doc.close()
    tree, _ = await build(tmp_path / "o2.pdf")
    assert tree.source_mode == "no_toc"
    assert any("outline" in w for w in tree.warnings)
    assert_matches_layout(tree, layout)


async def test_printed_toc_with_page_numbers_and_roman_front_matter(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "t.pdf", SECTIONS, printed_toc="pages", front_matter_pages=2)
    assert layout.sections[0].page == 3 and layout.sections[0].printed == 1  # offset of two pages
    tree, _ = await build(layout.path)
    assert tree.source_mode == "toc_pages" and not tree.warnings
    preface = tree.nodes[0]
    assert (preface.title, preface.start, preface.end, preface.level) == ("Preface", 1, 2, 1)
    assert_matches_layout(tree, layout)


async def test_printed_toc_offset_found_from_titles_without_page_footers(tmp_path: Path) -> None:
    layout = make_report_pdf(
        tmp_path / "t.pdf", SECTIONS, printed_toc="pages", front_matter_pages=3, page_numbers=False
    )
    tree, _ = await build(layout.path)
    assert tree.source_mode == "toc_pages"
    assert_matches_layout(tree, layout)


async def test_printed_toc_without_page_numbers(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "n.pdf", SECTIONS, printed_toc="no_pages", front_matter_pages=1)
    tree, _ = await build(layout.path)
    assert tree.source_mode == "toc_no_pages"
    assert tree.nodes[0].title == "Preface" and tree.nodes[0].end == 1
    assert_matches_layout(tree, layout)


async def test_no_toc_font_size_headings(tmp_path: Path) -> None:
    sections = [
        Sec("Executive Summary", 1, 3),
        Sec("Market Overview", 1, 4),
        Sec("Regional Demand", 2, 3),
        Sec("Pricing Pressure", 2, 3),
        Sec("Outlook", 1, 3),
    ]
    layout = make_report_pdf(tmp_path / "f.pdf", sections)
    tree, _ = await build(layout.path)
    assert tree.source_mode == "no_toc"
    assert [n.title for n in tree.nodes] == [s.title for s in sections]
    assert_matches_layout(tree, layout)
    nodes = titled(tree)
    assert nodes["Pricing Pressure"].parent_id == nodes["Market Overview"].node_id


async def test_no_toc_sec_filing_headings(tmp_path: Path) -> None:
    sections = [
        Sec("PART I", 1, 1),
        Sec("Item 1. Business", 2, 4, new_page=False),
        Sec("Item 1A. Risk Factors", 2, 5, new_page=True),
        Sec("PART II", 1, 1),
        Sec("Item 7. Management's Discussion and Analysis", 2, 6, new_page=False),
        Sec("Item 8. Financial Statements and Supplementary Data", 2, 2, new_page=True),
        Sec("Note 1 - Summary of Significant Accounting Policies", 3, 4),
        Sec("Note 2 - Revenue", 3, 3),
        Sec("Note 3 - Income Taxes", 3, 3),
    ]
    layout = make_report_pdf(tmp_path / "k.pdf", sections, front_matter_pages=1, sec_style=True)
    tree, _ = await build(layout.path)
    assert tree.source_mode == "no_toc"
    nodes = titled(tree)
    assert_matches_layout(tree, layout)
    assert nodes["Item 7. Management's Discussion and Analysis"].parent_id == nodes["PART II"].node_id
    assert (
        nodes["Note 2 - Revenue"].parent_id
        == nodes["Item 8. Financial Statements and Supplementary Data"].node_id
    )
    assert nodes["Preface"].start == 1 and nodes["Preface"].end == 1


# ---------------------------------------------------------------------------- shared post-processing


async def test_preface_inserted_when_first_section_starts_later(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "p.pdf", SECTIONS, outline=False, front_matter_pages=2)
    tree, _ = await build(layout.path)
    first = tree.nodes[0]
    assert (first.title, first.start, first.end, first.is_leaf) == ("Preface", 1, 2, True)
    assert "Annual Report 2024" in first.text
    no_preface, _ = await build(make_report_pdf(tmp_path / "q.pdf", SECTIONS).path)
    assert "Preface" not in titled(no_preface)


async def test_appear_start_sets_end_pages(tmp_path: Path) -> None:
    sections = [
        Sec("Alpha Overview", 1, 9),  # fills one page and part of the next
        Sec("Beta Details", 1, 3, new_page=False),  # starts in the middle of Alpha's last page
        Sec("Gamma Summary", 1, 3),  # starts at the top of a new page
    ]
    layout = make_report_pdf(tmp_path / "a.pdf", sections, outline=True)
    alpha, beta, gamma = layout.sections
    assert beta.page == alpha.page + 1 and not beta.at_top and gamma.at_top
    tree, _ = await build(layout.path)
    nodes = titled(tree)
    assert nodes["Alpha Overview"].end == beta.page  # shares the page Beta starts on
    assert nodes["Beta Details"].end == gamma.page - 1  # Gamma starts at the top of its page
    assert nodes["Gamma Summary"].end == layout.page_count


async def test_large_node_without_headings_is_split_into_page_windows(tmp_path: Path) -> None:
    sections = [Sec("Opening", 1, 2), Sec("Long Appendix", 1, 160), Sec("Closing", 1, 2)]
    layout = make_report_pdf(tmp_path / "w.pdf", sections, outline=True)
    tree, _ = await build(layout.path)
    again, _ = await build(layout.path)
    nodes = titled(tree)
    appendix = nodes["Long Appendix"]
    kids = [n for n in tree.nodes if n.parent_id == appendix.node_id]
    assert len(kids) >= 2 and all(re.search(r"\(pp?\. \d+(–\d+)?\)$", k.title) for k in kids)
    assert kids[0].start == appendix.start and kids[-1].end == nodes["Closing"].start - 1
    assert all(n.end - n.start + 1 <= 10 for n in tree.nodes)
    assert again == tree  # deterministic


async def test_large_node_is_split_at_its_inner_headings(tmp_path: Path) -> None:
    sections = [
        Sec("Part A Overview", 1, 3),
        Sec("Part B Operations", 1, 4),
        Sec("Manufacturing Network", 2, 40, new_page=True),
        Sec("Logistics and Distribution", 2, 40, new_page=True),
        Sec("Part C Outlook", 1, 3),
    ]
    # the printed TOC lists level-1 sections only: Part B (~12 pages) must be subdivided
    layout = make_report_pdf(
        tmp_path / "s.pdf", sections, printed_toc="pages", toc_levels=1, front_matter_pages=1
    )
    tree, _ = await build(layout.path)
    assert tree.source_mode == "toc_pages"
    nodes = titled(tree)
    part_b = nodes["Part B Operations"]
    assert nodes["Manufacturing Network"].parent_id == part_b.node_id
    assert nodes["Logistics and Distribution"].parent_id == part_b.node_id
    assert nodes["Manufacturing Network"].start == layout.page_of("Manufacturing Network")
    assert part_b.end < nodes["Manufacturing Network"].start  # the parent keeps only its own pages
    assert all(n.end - n.start + 1 <= 10 for n in tree.nodes)


async def test_token_limit_also_subdivides(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "k.pdf", [Sec("Only Section", 1, 30)], outline=True)
    parsed = read_pdf(layout.path)
    total = sum(p.tokens for p in parsed.pages)
    tree = await build_pdf_tree(parsed, OFFLINE, IngestSettings(max_token_num_each_node=total // 3))
    leaves = [n for n in tree.nodes if n.is_leaf]
    assert len(leaves) >= 3
    assert all(
        sum(parsed.pages[p - 1].tokens for p in range(n.start, n.end + 1)) <= total // 3 for n in leaves
    )


def test_page_groups_overlap_by_one_page(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "g.pdf", [Sec("Only Section", 1, 60)])
    parsed = read_pdf(layout.path)
    limit = sum(p.tokens for p in parsed.pages[:3])
    groups = page_groups(parsed, 1, parsed.page_count, limit)
    assert groups[0][0] == 1 and groups[-1][-1] == parsed.page_count and len(groups) >= 2
    for a, b in zip(groups, groups[1:], strict=False):
        assert b[0] == a[-1]  # one page of overlap
        assert sum(min(parsed.pages[p - 1].tokens, limit) + 12 for p in a) <= limit or len(a) == 1


# ---------------------------------------------------------------------------- the LLM path


async def test_llm_toc_detection_and_transform(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "l.pdf", SECTIONS, printed_toc="pages", front_matter_pages=2)
    entries = [
        {"structure": "1", "title": "1 Introduction", "page": 1},
        {"structure": "1.1", "title": "1.1 Background", "page": 1},
        {"structure": "1.2", "title": "1.2 Scope of the Study", "page": 2},
        {"structure": "2", "title": "2 Methods", "page": 3},
        {"structure": "2.1", "title": "2.1 Data Sources", "page": 4},
        {"structure": "3", "title": "3 Results", "page": 5},
        {"structure": "4", "title": "4 Discussion", "page": 6},
    ]
    chat = ScriptedChat(
        {
            TOC_DETECT: [{"pages": [{"page": p, "is_toc": p == 2} for p in range(1, 9)], "page_numbers_given": True}],
            TOC_TRANSFORM: [{"entries": entries}],
        },
        default=LLMError("unexpected call"),
    )
    tree, _ = await build(layout.path, chat)
    assert [p for p, _ in chat.calls] == ["tree.toc_detect", "tree.toc_transform"]
    assert "<page_2>" in chat.calls[0][1] and "Table of Contents" in chat.calls[1][1]
    assert tree.source_mode == "toc_pages" and tree.llm_calls == 2
    assert_matches_layout(tree, layout)


async def test_llm_failures_degrade_to_offline_steps(tmp_path: Path) -> None:
    layout = make_report_pdf(tmp_path / "e.pdf", SECTIONS, printed_toc="pages", front_matter_pages=2)
    chat = ScriptedChat(default=LLMError("provider down"))
    tree, _ = await build(layout.path, chat)
    assert tree.source_mode == "toc_pages"
    assert_matches_layout(tree, layout)
    assert tree.llm_calls == len(chat.calls) >= 1


async def test_llm_given_up_after_three_provider_errors(tmp_path: Path) -> None:
    sections = [Sec(f"Section {i} Title", 1, 90) for i in range(1, 6)]  # five ~12-page sections
    layout = make_report_pdf(tmp_path / "d.pdf", sections)
    chat = ScriptedChat(default=LLMError("provider down"))
    tree, _ = await build(layout.path, chat)
    assert tree.source_mode == "no_toc" and {s.title for s in sections} <= set(titled(tree))
    assert all(n.end - n.start + 1 <= 10 for n in tree.nodes)  # subdivided offline
    assert tree.llm_calls == len(chat.calls) == 3


@pytest.mark.parametrize(
    "garbage",
    [
        {"unexpected": "shape"},
        ["a", "list"],
        "just text",
        {"pages": "yes", "entries": [{"structure": 3, "title": None, "physical_index": "abc"}]},
        {"entries": [{"structure": "1", "title": "Invented Heading", "physical_index": 999, "page": -4}]},
    ],
)
async def test_llm_malformed_replies_still_give_a_tree(tmp_path: Path, garbage: Any) -> None:
    sections = [Sec(f"Chapter {i} Topic {i}", 1, 8) for i in range(1, 6)]
    layout = make_report_pdf(tmp_path / "m.pdf", sections, heading_sizes=(10.0,), printed_toc=None)
    chat = ScriptedChat.same_reply(garbage)  # a valid (hallucinating) reply where it fits a step, else malformed
    tree, _ = await build(layout.path, chat)
    assert tree.nodes and tree.llm_calls == len(chat.calls)
    covered = set()
    for n in tree.nodes:
        covered.update(range(n.start, n.end + 1))
    assert covered == set(range(1, layout.page_count + 1))  # a partial tree still covers every page
    assert "Invented Heading" not in titled(tree)


async def test_llm_generates_structure_when_layout_has_no_signal(tmp_path: Path) -> None:
    # headings set in the body font and weight: no layout signal, no TOC, no outline
    sections = [Sec(t, 1, 8) for t in ("Origins of the Fund", "Investment Approach", "Risk Controls")]
    layout = make_report_pdf(tmp_path / "g.pdf", sections, heading_sizes=(10.0,))
    doc = pymupdf.open(layout.path)
    plain = pymupdf.open()
    for page in doc:  # redraw every line in the regular font so headings look like body text
        new = plain.new_page(width=page.rect.width, height=page.rect.height)
        for block in page.get_text("dict")["blocks"]:
            for line in block.get("lines", []):
                for span in line["spans"]:
                    new.insert_text(span["origin"], span["text"], fontsize=10, fontname="helv")
    plain.save(tmp_path / "plain.pdf")
    offline_tree, _ = await build(tmp_path / "plain.pdf")
    assert len(offline_tree.nodes) == 1  # offline sees no headings: one node for the whole short document

    def generate(prompt: str) -> dict[str, Any]:
        pages = [int(x) for x in re.findall(r"<physical_index_(\d+)>", prompt)]
        found = [
            {"structure": str(i + 1), "title": s.title, "physical_index": s.page}
            for i, s in enumerate(layout.sections)
            if s.page in pages
        ]
        return {
            "entries": found
            + [{"structure": "9", "title": "Hallucinated Section", "physical_index": pages[0]}]
        }

    chat = ScriptedChat({TOC_DETECT: [{"pages": [], "page_numbers_given": False}], GENERATE: generate,
                         LOCATE["tree.fix"]: {"entries": []}}, default=LLMError("unexpected call"))
    tree, _ = await build(tmp_path / "plain.pdf", chat)
    assert tree.source_mode == "no_toc"
    nodes = titled(tree)
    for s in layout.sections:
        assert nodes[s.title].start == s.page
    assert "Hallucinated Section" not in nodes  # failed verification, dropped
    purposes = [p for p, _ in chat.calls]
    assert purposes[:2] == ["tree.toc_detect", "tree.generate"]
    assert set(purposes) <= {"tree.toc_detect", "tree.generate", "tree.fix"}  # fix: the hallucinated entry


async def test_llm_call_budget_is_bounded(tmp_path: Path) -> None:
    sections = [Sec(f"Section {i} Title", 1, 14) for i in range(1, 9)]
    layout = make_report_pdf(tmp_path / "b.pdf", sections, heading_sizes=(10.0,))
    chat = ScriptedChat.same_reply({"entries": []})
    tree, _ = await build(layout.path, chat)
    assert tree.llm_calls == len(chat.calls) <= max(4, 14 * layout.page_count // 100)


async def test_llm_decides_an_ambiguous_page_range(tmp_path: Path) -> None:
    """An outline naming chapters only; one chapter holds subsection headings no layout rule takes (issue 27
    item 4). Offline the tree keeps the outline; with an LLM, one ``tree.headings`` call for that range alone
    decides, and its picks (not the lines it leaves out) become subsections with their pages."""
    sections = [Sec("Overview of the Year", 1, 12), Sec("Markets and Prices", 2, 12, new_page=False),
                Sec("Funding Conditions", 2, 12, new_page=False), Sec("A Note on Method", 2, 4, new_page=False),
                Sec("Operations", 1, 20), Sec("Governance", 1, 20), Sec("Accounts", 1, 20)]
    layout = make_report_pdf(tmp_path / "r.pdf", sections)
    with pymupdf.open(layout.path) as doc:
        doc.set_toc([[1, s.title, s.page] for s in layout.sections if s.level == 1])
        doc.save(tmp_path / "outlined.pdf")
    offline, _ = await build(tmp_path / "outlined.pdf")
    assert offline.source_mode == "outline" and "Markets and Prices" not in titled(offline)

    def decide(prompt: str) -> dict[str, list[int]]:
        listed = dict(re.findall(r"^\[(\d+)\] p\.\d+ [\d.]+pt \w+: (.+)$", prompt, re.M))
        return {"headings": [int(k) for k, text in listed.items() if text != "A Note on Method"]}

    chat = ScriptedChat({HEADINGS: decide}, default=LLMError("unexpected call"))
    tree, _ = await build(tmp_path / "outlined.pdf", chat)
    assert [p for p, _ in chat.calls] == ["tree.headings"]  # one range was ambiguous, one call
    assert "Overview of the Year" in chat.calls[0][1] and "A Note on Method" in chat.calls[0][1]
    nodes = titled(tree)
    for s in layout.sections[1:3]:
        assert nodes[s.title].start == s.page and nodes[s.title].level == 2
    assert "A Note on Method" not in nodes and tree.llm_calls == 1


def test_a_page_of_figures_has_a_text_layer(tmp_path: Path) -> None:
    """Mostly figures, few letters: still text (the no-text-layer test counts letters against symbols)."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 46), "Price list of the spare parts catalogue, in US dollars", fontsize=12)
    for k in range(40):
        page.insert_text((72, 80 + 16 * k), f"{k + 1:>3}   {1000 + 37 * k:,}.00   ({k * 3.5:.1f})%   $12,{k:03d}", fontsize=9)
    doc.save(tmp_path / "figures.pdf")
    doc.close()
    parsed = read_pdf(tmp_path / "figures.pdf")
    text = parsed.pages[0].text
    assert sum(c.isalpha() for c in text) < 0.3 * sum(not c.isspace() for c in text)  # letters are few
    assert parsed.warnings == () and "1,000.00" in text


async def test_a_lone_surrogate_in_a_page_is_measured_as_cl100k_counts_it() -> None:
    """A glyph's ToUnicode map can give a lone surrogate (pymupdf's glyph-by-glyph reading passes it through): the
    tree's byte bound on a node's tokens reads it as the replacement character cl100k counts, not as an error."""
    from ingest.pdf_tree import ParsedPdf
    from kb.core.types import PageText

    text = "\ud800 Revenue grew in every segment of the business.\n" * 1000  # about 10,000 tokens a page
    parsed = ParsedPdf(pages=tuple(PageText(number=i + 1, text=text) for i in range(3)), outline=(), headings=(),
                       body_font_size=10.0)
    settings = IngestSettings()
    tree = await build_pdf_tree(parsed, OfflineChatModel(), settings)
    assert sum(p.tokens for p in parsed.pages) > settings.max_token_num_each_node  # so the node was split by tokens
    leaves = [n for n in tree.nodes if n.is_leaf]
    assert len(leaves) > 1
    assert all(sum(parsed.pages[p - 1].tokens for p in range(n.start, n.end + 1)) <= settings.max_token_num_each_node
               or n.start == n.end for n in leaves)
