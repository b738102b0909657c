"""Every LLM step of ingest, declared once: purpose, system prompt, reply type and prompt builder.

Tree building (spec 000): tree.toc_detect, tree.toc_transform, tree.toc_index / tree.toc_locate / tree.fix
(locating titles on pages), tree.generate (structure from text without a table of contents); then
node_summary and doc_description. The JSON schema comes from the reply type (``kb.core.providers.steps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kb.core.providers.steps import LLMStep

# --------------------------------------------------------------------------- replies


class DetectPage(msgspec.Struct):
    page: int
    is_toc: bool


class DetectReply(msgspec.Struct):
    pages: list[DetectPage]
    page_numbers_given: bool = False


class TransformEntry(msgspec.Struct):
    structure: str
    title: str
    page: int | None = None


class TransformReply(msgspec.Struct):
    entries: list[TransformEntry]


class LocateEntry(msgspec.Struct):
    index: int
    physical_index: int | None = None


class LocateReply(msgspec.Struct):
    entries: list[LocateEntry]


class GenEntry(msgspec.Struct):
    structure: str
    title: str
    physical_index: int | None = None


class GenReply(msgspec.Struct):
    entries: list[GenEntry]


class SummaryItem(msgspec.Struct):
    node_id: str
    summary: str


class SummaryReply(msgspec.Struct):
    summaries: list[SummaryItem]


class DescriptionReply(msgspec.Struct):
    description: str


# --------------------------------------------------------------------------- steps

_SYSTEM_LOCATE = "You find the pages where given sections of a document start."
TOC_DETECT = LLMStep("tree.toc_detect", (
    "You find the table-of-contents pages of a document. A table of contents lists section titles, usually "
    "with page numbers. Abstracts, summaries, lists of figures or tables and ordinary text are not tables of "
    "contents."), DetectReply)
TOC_TRANSFORM = LLMStep("tree.toc_transform", "You convert a printed table of contents into structured JSON.",
                        TransformReply)
LOCATE = {purpose: LLMStep(purpose, _SYSTEM_LOCATE, LocateReply)
          for purpose in ("tree.toc_index", "tree.toc_locate", "tree.fix")}
"""Locating titles on pages, by what for: the printed-page offset, titles without page numbers, fixes."""
class HeadingsReply(msgspec.Struct):
    headings: list[int]  # the numbers of the listed lines that are subsection headings


HEADINGS = LLMStep("tree.headings", "You decide which lines of a document section are subsection headings, from "
                   "their text and how they are set. Reply with JSON only.", HeadingsReply)
GENERATE = LLMStep("tree.generate", "You extract the hierarchical structure (a table of contents) of a document "
                   "from its text.", GenReply)
NODE_SUMMARY = LLMStep("node_summary", "You summarise sections of long documents for a retrieval index. "
                       "Reply with JSON only.", SummaryReply)
DOC_DESCRIPTION = LLMStep("doc_description", "You describe documents for a document router. Reply with JSON only.",
                          DescriptionReply)


# --------------------------------------------------------------------------- prompt builders


def toc_detect_prompt(pages_text: str) -> str:
    return ("For each page below, answer whether it belongs to the document's table of contents, and whether "
            f"that table of contents gives page numbers.\n\n{pages_text}")


def toc_transform_prompt(toc_text: str) -> str:
    return (
        "Transform this table of contents into a flat list in reading order. For each entry give: structure "
        "(hierarchy code such as 1, 1.1, 1.2.3 that reflects the nesting), title (as written, without page "
        "number or leader dots) and page (the printed page number as an integer, or null when none).\n\n"
        f"Table of contents:\n{toc_text}"
    )


def locate_prompt(listing: str, tagged_pages: str) -> str:
    return (
        "The document text below is split into pages, each wrapped in <physical_index_N> tags. For each "
        "numbered section title in the list whose section starts in this text (its heading appears here), "
        "give its index and the N of the page where it starts. Leave out sections that do not start here."
        f"\n\nSections:\n{listing}\n\nDocument:\n" + tagged_pages
    )


def generate_prompt(tagged_pages: str, previous: str | None = None) -> str:
    """The first page group creates the structure; later groups continue ``previous`` (JSON)."""
    if previous is None:
        return (
            "The text below is the beginning of a document; pages are wrapped in <physical_index_N> tags. "
            "List its sections and subsections in order. For each give structure (hierarchy code such as "
            "1, 1.1, 1.2), title (the heading as written; only fix spacing) and physical_index (the N of the "
            f"page where the section starts). Use real headings only.\n\n{tagged_pages}"
        )
    return (
        f"Structure extracted so far from the earlier part of a document:\n{previous}\n\n"
        "Continue it with the sections that start in the next part below (pages wrapped in "
        "<physical_index_N> tags), keeping the numbering consistent. Return only the new sections, each "
        f"with structure, title and physical_index.\n\n{tagged_pages}"
    )


def summary_prompt(sections: str) -> str:
    return (
        "Summarise each document section below in one or two sentences (at most 50 words each).\n"
        "Say what the section covers and name its key facts, figures, entities and dates, so that a reader\n"
        "can tell from the summary alone whether the section answers a question. Do not begin with\n"
        '"This section". Return JSON {"summaries": [{"node_id": "...", "summary": "..."}]} with exactly one\n'
        "entry per section, using the node_id values given. Write each summary in the language of its section\n"
        f"(a Chinese section gets a Chinese summary).\n\n{sections}"
    )


def description_prompt(name: str, metadata: Mapping[str, Any], tree_outline: str) -> str:
    return (
        "You are given a table of contents structure of a document.\n"
        "Your task is to generate a one-sentence description for the document that makes it easy to\n"
        "distinguish from other documents, written in the document's own language.\n\n"
        f"Document name: {name}\nKnown metadata: {metadata}\nDocument tree structure:\n{tree_outline}\n\n"
        'Return JSON {"description": "<one sentence>"}.'
    )


def headings_prompt(section: str, pages: str, listing: str) -> str:
    """One ambiguous page range: which of its heading-like lines are subsection headings."""
    return (
        f'The section "{section}" of a document runs over pages {pages}. Its layout leaves open which of the lines '
        "below are headings of subsections within it. Each is listed as [number] page, font size and weight, "
        "text; the body text size comes first. Reply with the numbers of the lines that are subsection headings "
        "(not table titles or rows, captions, labels, running heads or sentences) as "
        f'{{"headings": [<number>, ...]}}.\n\n{listing}'
    )
