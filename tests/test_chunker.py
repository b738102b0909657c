"""Chunking: paragraph packing, sliding-window overlap, tables, page attribution, parents' own text."""

from __future__ import annotations

import msgspec
import pymupdf

from ingest.chunker import chunk_node, chunk_tree, own_text
from ingest.markdown_tree import build_markdown_tree
from ingest.summaries import summarize_tree
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from kb.core.text import count_tokens
from kb.core.types import DocumentTree, TreeNode


def node(text: str, *, start: int = 1, end: int = 1, unit: str = "line", node_id: str = "0003",
         path: tuple[str, ...] = ("Part I", "Risks"), parent_id: str | None = None, is_leaf: bool = True) -> TreeNode:
    return TreeNode(node_id=node_id, parent_id=parent_id, ordinal=int(node_id), level=len(path), title=path[-1],
                    start=start, end=end, text=text, summary="", path=path, is_leaf=is_leaf, unit=unit)


def sentence(i: int) -> str:
    return f"Sentence number {i} explains how the segment margin changed because of pricing and mix. "


def test_short_paragraphs_are_packed_up_to_the_budget() -> None:
    paragraphs = [f"Paragraph {i}: " + sentence(i).strip() for i in range(30)]
    chunks = chunk_node(node("\n\n".join(paragraphs)), chunk_tokens=100, overlap_tokens=20, min_chars=20)
    assert 1 < len(chunks) < 30
    assert all(c.token_count <= 100 and c.token_count == count_tokens(c.text) for c in chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    # packing never cuts a paragraph and keeps the order: every paragraph exactly once
    joined = "\n\n".join(c.text for c in chunks)
    assert [p for p in paragraphs if p in joined] == paragraphs
    assert all(c.page is None and c.heading_path == "Part I > Risks" and c.node_id == "0003" for c in chunks)


def test_long_paragraph_uses_sliding_window_with_overlap() -> None:
    para = "".join(sentence(i) for i in range(40))
    chunks = chunk_node(node(para), chunk_tokens=80, overlap_tokens=20, min_chars=20)
    assert len(chunks) >= 10 and all(c.token_count <= 80 for c in chunks)
    for a, b in zip(chunks, chunks[1:], strict=False):
        last_sentence = a.text.rsplit("Sentence number", 1)[1]
        assert b.text.startswith("Sentence number") and last_sentence in b.text  # overlap of whole sentences
    assert "number 0 " in chunks[0].text and "number 39 " in chunks[-1].text
    no_overlap = chunk_node(node(para), chunk_tokens=80, overlap_tokens=0, min_chars=20)
    assert len(no_overlap) < len(chunks)
    assert sum(c.token_count for c in no_overlap) <= count_tokens(para) + len(no_overlap)


def test_text_without_spaces_or_sentences_is_cut_by_tokens() -> None:
    blob = "x9" * 3000
    chunks = chunk_node(node(blob), chunk_tokens=100, overlap_tokens=20, min_chars=20)
    assert len(chunks) > 5 and all(c.token_count <= 100 for c in chunks)
    assert chunks[0].text.startswith("x9") and blob.endswith(chunks[-1].text)


def test_short_chunks_are_dropped() -> None:
    chunks = chunk_node(node("tiny"), chunk_tokens=100, overlap_tokens=20, min_chars=20)
    assert chunks == []


def test_pdf_table_lines_are_packed_not_one_chunk_per_line() -> None:
    rows = []
    for i in range(120):
        rows += [f"Line item {i}", "$", f"{i * 1234:,}", f"{i * 999:,}"]
    text = "Consolidated Statements of Operations\n" + "\n".join(rows)
    chunks = chunk_node(node(text, unit="page", start=5, end=5), chunk_tokens=160, overlap_tokens=32, min_chars=20)
    total = count_tokens(text)
    assert total / 160 <= len(chunks) <= 2 * total / 160  # ~budget-sized chunks, not 480 one-liners
    assert all(c.token_count <= 160 for c in chunks) and all(c.page == 5 for c in chunks)
    assert min(c.token_count for c in chunks[:-1]) > 80


def _pdf_pages(n: int) -> dict[int, str]:
    """Real PDF page texts generated with pymupdf (running header on every page)."""
    doc = pymupdf.open()
    for p in range(1, n + 1):
        page = doc.new_page()
        body = "\n".join(f"Page {p} line {i} describes revenue for region {p}-{i}." for i in range(25))
        page.insert_text((50, 50), f"ACME Corp | Form 10-K | {p}\n{body}", fontsize=9)
    texts = {i + 1: doc[i].get_text() for i in range(doc.page_count)}
    doc.close()
    return texts


def test_page_attribution_from_page_texts() -> None:
    pages = _pdf_pages(5)
    text = "\n".join(pages[p] for p in range(2, 5))  # node covers pages 2..4
    n = node(text, unit="page", start=2, end=4)
    chunks = chunk_node(n, chunk_tokens=120, overlap_tokens=0, min_chars=20, page_texts=pages)
    assert {c.page for c in chunks} == {2, 3, 4}
    for c in chunks:
        first_line = c.text.split("\n")[0]
        assert first_line in pages[c.page], (c.page, first_line)
    assert [c.page for c in chunks] == sorted(c.page for c in chunks)
    # without page texts a PDF chunk gets the node's first page
    assert {c.page for c in chunk_node(n, chunk_tokens=120, overlap_tokens=0, min_chars=20)} == {2}


def test_page_attribution_when_node_starts_mid_page_and_headers_were_stripped() -> None:
    pages = _pdf_pages(3)
    body = [pages[p].split("\n", 1)[1] for p in (1, 2, 3)]  # running headers removed from the node text
    text = body[0][len(body[0]) // 2 :] + "\n" + body[1] + "\n" + body[2]
    chunks = chunk_node(node(text, unit="page", start=1, end=3), chunk_tokens=100, overlap_tokens=0,
                        min_chars=20, page_texts=pages)
    assert chunks[0].page == 1 and chunks[-1].page == 3
    for c in chunks:
        assert c.text.split("\n")[0] in pages[c.page]


def test_chunk_tree_chunks_leaves_and_parents_own_text() -> None:
    para = " ".join(sentence(i) for i in range(3))
    md = f"# Annual Report\n\nIntro of the report. {para}\n\n## Revenue\n\n{para}\n\n## Costs\n\n{para}\n\n# Empty Parent\n\n## Child\n\n{para}\n"
    tree = build_markdown_tree(md, IngestSettings(min_node_token=0), title="r")
    chunks = chunk_tree(tree, IngestSettings(min_node_token=0, chunk_tokens=200))
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    paths = [c.heading_path for c in chunks]
    assert paths == ["Annual Report", "Annual Report > Revenue", "Annual Report > Costs", "Empty Parent > Child"]
    assert chunks[0].text.startswith("# Annual Report\n\nIntro of the report.")
    assert all(c.page is None for c in chunks)


def test_pdf_parent_text_spanning_children_is_cut_before_the_first_child() -> None:
    intro = "Part two intro explains the structure of the following items in detail for readers."
    child_a = "Item 5. Market for Registrant's Common Equity and related matters are described here at length."
    child_b = "Item 6. Reserved section with a sentence that is long enough to become a chunk by itself."
    parent = node(f"PART II\n{intro}\n{child_a}\n{child_b}", unit="page", start=10, end=12, node_id="0001",
                  path=("PART II",), is_leaf=False)
    kids = [
        node(child_a, unit="page", start=11, end=11, node_id="0002", path=("PART II", "Item 5"), parent_id="0001"),
        node(child_b, unit="page", start=12, end=12, node_id="0003", path=("PART II", "Item 6"), parent_id="0001"),
    ]
    assert own_text(parent, kids).strip() == f"PART II\n{intro}"
    tree = DocumentTree(nodes=(parent, *kids), page_count=12, source_mode="outline")
    chunks = chunk_tree(tree, IngestSettings(min_node_token=0))
    assert [c.node_id for c in chunks] == ["0001", "0002", "0003"]
    assert sum(c.text.count("Item 5.") for c in chunks) == 1  # children's text is not chunked twice
    # a parent whose text is only its own (heading only) yields no chunk
    bare = msgspec.structs.replace(parent, text="PART II")
    tree = DocumentTree(nodes=(bare, *kids), page_count=12, source_mode="outline")
    assert [c.node_id for c in chunk_tree(tree, IngestSettings(min_node_token=0))] == ["0002", "0003"]


async def test_pdf_sections_sharing_a_page_are_chunked_once_under_the_right_node() -> None:
    doc = pymupdf.open()
    filler = "The segment reported steady demand and stable pricing across all regions this year."
    content = {
        1: ["Item 1. Business", *[f"Business fact {i}. {filler}" for i in range(8)]],
        2: [*[f"Business tail {i}. {filler}" for i in range(4)], "Item 2. Properties",
            *[f"Property fact {i}. {filler}" for i in range(4)]],
        3: [*[f"Property tail {i}. {filler}" for i in range(6)]],
    }
    for p in (1, 2, 3):
        page = doc.new_page()
        page.insert_text((40, 60), "\n".join(content[p]), fontsize=8)
    pages = {i + 1: doc[i].get_text() for i in range(doc.page_count)}
    doc.close()

    def pdf_node(node_id: str, title: str, start: int, end: int) -> TreeNode:
        text = "\n\n".join(pages[p] for p in range(start, end + 1))  # whole pages, like the PDF tree
        return node(text, unit="page", start=start, end=end, node_id=node_id, path=(title,))

    tree = DocumentTree(nodes=(pdf_node("0000", "Item 1. Business", 1, 2),
                               pdf_node("0001", "Item 2. Properties", 2, 3)), page_count=3, source_mode="toc_pages")
    chunks = chunk_tree(tree, IngestSettings(min_node_token=0, chunk_tokens=60, chunk_overlap_tokens=0), pages)
    business = " ".join(c.text for c in chunks if c.node_id == "0000")
    properties = " ".join(c.text for c in chunks if c.node_id == "0001")
    assert "Business tail 3" in business and "Property fact" not in business
    assert properties.startswith("Item 2. Properties") and "Business tail" not in properties
    everything = " ".join(c.text for c in chunks)
    for lines in content.values():  # every line is chunked exactly once
        for line in lines:
            assert everything.count(line) == 1, line
    assert [c.page for c in chunks if c.node_id == "0001"][0] == 2
    assert [c.page for c in chunks if c.node_id == "0001"][-1] == 3
    # without page texts the shared page is chunked under both nodes
    assert sum(c.text.count("Business tail 0.") for c in chunk_tree(tree, IngestSettings(min_node_token=0, chunk_tokens=60))) == 2
    # summaries read the same trimmed sections
    summed = await summarize_tree(tree, OfflineChatModel(), IngestSettings(min_node_token=0, summary_token_threshold=10_000),
                                  page_texts=pages)
    assert "Business tail 3" in summed.nodes[0].summary and "Property" not in summed.nodes[0].summary
    assert summed.nodes[1].summary.startswith("Property fact 0.") and "Business" not in summed.nodes[1].summary


def test_chunk_end_page_when_text_runs_over_a_page_break() -> None:
    pages = _pdf_pages(5)
    text = "\n".join(pages[p] for p in range(2, 5))
    n = node(text, unit="page", start=2, end=4)
    big = chunk_node(n, chunk_tokens=2000, overlap_tokens=0, min_chars=20, page_texts=pages)
    assert len(big) == 1 and (big[0].page, big[0].page_end) == (2, 4)
    for c in chunk_node(n, chunk_tokens=120, overlap_tokens=0, min_chars=20, page_texts=pages):
        last_line = c.text.split("\n")[-1]
        assert c.page <= c.page_end and last_line in pages[c.page_end], (c.page, c.page_end, last_line)


def test_page_aligned_chunks_never_cross_a_page_break() -> None:
    pages = _pdf_pages(5)
    text = "\n".join(pages[p] for p in range(2, 5))
    n = node(text, unit="page", start=2, end=4)
    aligned = chunk_node(n, chunk_tokens=2000, overlap_tokens=0, min_chars=20, page_texts=pages, page_aligned=True)
    assert [(c.page, c.page_end) for c in aligned] == [(2, 2), (3, 3), (4, 4)]
    for p, c in zip(range(2, 5), aligned, strict=True):
        assert c.text.strip() == pages[p].strip()
    small = chunk_node(n, chunk_tokens=60, overlap_tokens=0, min_chars=20, page_texts=pages, page_aligned=True)
    assert len(small) > 3 and all(c.page == c.page_end and c.text in pages[c.page] for c in small)
    assert {c.page for c in small} == {2, 3, 4}


def test_a_chunk_starting_inside_a_table_keeps_its_title_and_header() -> None:
    from ingest.chunker import table_context

    page = ("Prose about the year ends here.\nConsolidated Statement of Cash Flows\nYears ended December 31\n"
            "(Millions) 2018 2017 2016\nNet income 5,363 4,869 5,058\nInventories (509) (387) 57\n"
            "Purchases of property, plant and equipment (PP&E) (1,577) (1,373) (1,420)\n")
    row = page.index("Purchases")
    assert table_context(page, row) == ("Consolidated Statement of Cash Flows | Years ended December 31 | "
                                        "(Millions) 2018 2017 2016")
    assert table_context(page, page.index("Consolidated")) == ""  # not inside a table
    assert table_context(page, row, floor=page.index("Net income")) == ""  # the header is on an earlier page
    long_node = node(page + "\n".join(f"Line item {i} {100 + i:,} {200 + i:,} {300 + i:,}" for i in range(60)),
                     unit="page", start=1, end=1)
    chunks = chunk_node(long_node, chunk_tokens=60, overlap_tokens=0, min_chars=20)
    inside = [c for c in chunks if c.text.startswith("Line item")]
    assert inside and all(c.context.endswith("(Millions) 2018 2017 2016") for c in inside)
