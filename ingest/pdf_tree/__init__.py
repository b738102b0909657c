"""PageIndex tree building for PDFs (spec 000 §3.1–3.7), offline first, LLM optional.

The flat section list ("structure code, title, start page") comes from, in order of
preference: the embedded outline, a printed table of contents (with page numbers, or
without them), or the body's own headings ("no TOC"). Every list is verified (does the
title appear on its page?), fixed (search between correct neighbours) or abandoned for
the next mode. Then, identically for all modes: a ``Preface`` is inserted when the first
section starts after page 1, ``appear_start`` decides whether the previous section ends on
the page before, the list becomes a tree by structure codes, and nodes over the page or
token limit are subdivided with the no-TOC method on their own page range (page windows
when there is no heading inside). Node ids are assigned depth first.

Every LLM step has an offline implementation (layout heuristics and fuzzy title
matching), the default. With a real model (``chat.offline`` False) the LLM detects the
printed TOC (one batched call for the first pages) and transforms it (one call), locates
titles the offline search missed, generates the structure group by group when there is no
TOC, and generates the sub-structure of large nodes. Verification and ``appear_start``
stay offline. Calls run under a semaphore, within a budget of about 14 calls per 100 pages,
and stop after three provider errors in a row; a failed or malformed reply falls back to
the offline step for that piece.

Modules: ``entries`` (the flat list and structure codes), ``matching`` (title look-ups on pages),
``toc`` (printed TOC, offline), ``headings`` (no-TOC layout headings), ``llm`` (the LLM steps) and
``builder`` (the flow above).
"""

from ingest.pdf_read import ParsedPdf, read_pdf
from ingest.pdf_tree.builder import build_pdf_tree
from ingest.pdf_tree.llm import page_groups
from kb.core.types import DocumentTree

__all__ = ["DocumentTree", "ParsedPdf", "build_pdf_tree", "page_groups", "read_pdf"]
