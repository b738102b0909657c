"""The PDF tree builder: flat section list (outline, printed TOC, or body headings), verified and fixed, then
start/end pages, nesting, subdivision of large nodes and the output nodes (see the package docstring)."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field, replace

import structlog

from ingest.pdf_read import PAGES_ONLY, HeadingCandidate, ParsedPdf, clean_text
from ingest.pdf_tree.entries import DetectedToc, FlatEntry, codes_from_levels, neighbour_range
from ingest.pdf_tree.headings import heading_styles, no_toc_entries, split_entries
from ingest.pdf_tree.llm import TreeLlm
from ingest.pdf_tree.matching import PageLines, compact
from ingest.pdf_tree.toc import detect_toc_offline, parse_toc_items
from kb.core.providers import ChatModel
from kb.core.settings import IngestSettings
from kb.core.types import DocumentTree, TreeNode

log = structlog.get_logger("ingest.pdf_tree")

MAX_DEPTH = 8
AMBIGUOUS_PAGES = 3  # a leaf this long with unadopted heading-like lines is a range the LLM decides
AMBIGUOUS_MAX_LINES = 40  # heading-like lines listed for one range
PREFACE = "Preface"


@dataclass
class _Node:
    title: str
    start: int
    end: int
    line: int | None = None
    stop: tuple[int, int] | None = None  # (page, line) where the next section starts, if on ``end``
    children: list[_Node] = field(default_factory=list)


class _Builder:
    def __init__(self, parsed: ParsedPdf, chat: ChatModel, settings: IngestSettings) -> None:
        self.parsed = parsed
        self.settings = settings
        self.n = len(parsed.pages)
        self.lines = PageLines(parsed)
        self.warnings: list[str] = []
        self.llm = TreeLlm(parsed, settings, self.lines, chat, self.warn)
        self.toc_pages: frozenset[int] = frozenset()
        self.body_start = 1

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    # ------------------------------------------------------------------ main flow

    async def build(self) -> DocumentTree:
        reasons = [w for w in self.parsed.warnings if w in PAGES_ONLY]
        if reasons:  # nothing to read, or no lines to trust: one node per page, and say so
            self.warnings.extend(self.parsed.warnings)
            nodes = self.emit([_Node(f"Page {p}", p, p) for p in range(1, self.n + 1)])
            log.warning("ingest.tree_pages_only", pages=self.n, reason=reasons[0])
            return DocumentTree(nodes=tuple(nodes), page_count=self.n, source_mode="pages", unit="page",
                                warnings=tuple(self.warnings))
        entries, mode = await self.flat_list()
        entries = self.with_preface(entries)
        entries = self.appear_start(entries)
        roots = self.to_tree(entries, self.n)
        if not roots:
            roots = [_Node(self._doc_title(), 1, self.n)]
        if mode in ("toc_pages", "toc_no_pages"):
            self.refine_leaves(roots)
        await asyncio.gather(*(self.subdivide(r, 0) for r in roots))
        await self.decide_ambiguous(roots)  # after the steps that split large nodes: they spend the budget first
        nodes = self.emit(roots)
        log.info(
            "ingest.tree_built",
            mode=mode,
            pages=self.n,
            nodes=len(nodes),
            llm_calls=self.llm.calls,
            warnings=len(self.warnings),
        )
        return DocumentTree(
            nodes=tuple(nodes),
            page_count=self.n,
            source_mode=mode,
            unit="page",
            warnings=tuple(self.warnings),
            llm_calls=self.llm.calls,
        )

    async def flat_list(self) -> tuple[list[FlatEntry], str]:
        outline = self.outline_entries()
        if outline:
            ok, entries = await self.check(outline, "outline")
            if ok:
                return entries, "outline"
        toc = await self.detect_toc()
        if toc is not None:
            self.toc_pages = frozenset(toc.pages)
            self.body_start = max(toc.pages) + 1 if max(toc.pages) < self.n else 1
            log.info(
                "ingest.toc_detected",
                pages=list(toc.pages),
                items=len(toc.items),
                numbered=toc.with_page_numbers,
            )
            if toc.with_page_numbers:
                ok, entries = await self.check(await self.map_printed_pages(toc), "toc_pages")
                if ok:
                    return entries, "toc_pages"
            ok, entries = await self.check(await self.locate_titles(toc), "toc_no_pages")
            if ok:
                return entries, "toc_no_pages"
        if self.llm.available:
            generated = await self.llm.generate(1, self.n)
            if generated:
                ok, entries = await self.check(generated, "no_toc")
                if ok:
                    return entries, "no_toc"
        entries = no_toc_entries(self.parsed, 1, self.n, skip_pages=self.toc_pages)
        return entries, "no_toc"

    # ------------------------------------------------------------------ mode 0: outline

    def outline_entries(self) -> list[FlatEntry]:
        items = [
            (lvl, clean_text(t), p) for lvl, t, p in self.parsed.outline if 1 <= p <= self.n and clean_text(t)
        ]
        if len(items) < 2:
            return []
        pages = [p for _, _, p in items]
        if self.n > 3 and max(pages) - min(pages) + 1 < 0.5 * self.n:
            self.warn("embedded outline covers too little of the document; ignored")
            return []
        codes = codes_from_levels([lvl for lvl, _, _ in items])
        return [FlatEntry(code, t, p) for code, (_, t, p) in zip(codes, items, strict=True)]

    # ------------------------------------------------------------------ verification and fixing

    def verify(self, entries: list[FlatEntry]) -> tuple[float, list[FlatEntry]]:
        out = []
        for e in entries:
            if e.page is None:
                out.append(replace(e, verified=False))
                continue
            m = self.lines.find(e.title, e.page, relaxed=True)
            out.append(replace(e, verified=m is not None, line=m.line if m else e.line))
        accuracy = sum(1 for e in out if e.verified) / len(out) if out else 0.0
        return accuracy, out

    async def check(self, entries: list[FlatEntry], mode: str) -> tuple[bool, list[FlatEntry]]:
        """Verify; accuracy 1 → accept, > 0.6 → fix wrong entries, else give the mode up."""
        if not entries:
            return False, []
        accuracy, entries = self.verify(entries)
        log.info("ingest.toc_verified", mode=mode, entries=len(entries), accuracy=round(accuracy, 3))
        if accuracy <= 0.6:
            self.warn(
                f"{mode}: {len(entries)} entries failed verification (accuracy {accuracy:.2f}); fell back"
            )
            return False, []
        if accuracy < 1.0:
            entries = await self.fix(entries)
        entries = self.clean(entries, mode)
        return bool(entries), entries

    def _bounds(self, entries: list[FlatEntry], i: int) -> tuple[int, int]:
        return neighbour_range(entries, i, self.body_start, self.n)

    async def fix(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        """Search wrong entries between their correct neighbours (offline, then LLM), ≤ 3 rounds."""
        for _ in range(3):
            wrong = [i for i, e in enumerate(entries) if not e.verified]
            if not wrong:
                break
            progress = False
            for i in wrong:
                lo, hi = self._bounds(entries, i)
                found = self.lines.scan(entries[i].title, lo, hi, strict=True)
                if found is None:
                    for p in range(lo, hi + 1):
                        m = self.lines.find(entries[i].title, p, relaxed=True)
                        if m is not None:
                            found = (p, m)
                            break
                if found is not None:
                    entries[i] = replace(entries[i], page=found[0], line=found[1].line, verified=True)
                    progress = True
            wrong = [i for i, e in enumerate(entries) if not e.verified]
            if wrong and self.llm.available:
                progress = await self.llm.fix(entries, wrong, self.body_start) or progress
            if not progress:
                break
        left = sum(1 for e in entries if not e.verified)
        if left:
            log.info("ingest.toc_fix_incomplete", unresolved=left)
        return entries

    def clean(self, entries: list[FlatEntry], mode: str) -> list[FlatEntry]:
        """Drop unresolved entries (keeping estimated pages for page-numbered modes) and out-of-order ones."""
        keep_unverified = mode in ("outline", "toc_pages")
        out: list[FlatEntry] = []
        dropped = 0
        for e in entries:
            if e.page is None or not (1 <= e.page <= self.n) or (not e.verified and not keep_unverified):
                dropped += 1
                continue
            if out and e.page < out[-1].page:  # type: ignore[operator]
                if not e.verified:
                    dropped += 1
                    continue
                while out and out[-1].page > e.page and not out[-1].verified:  # type: ignore[operator]
                    out.pop()
                    dropped += 1
                if out and out[-1].page > e.page:  # type: ignore[operator]
                    dropped += 1
                    continue
            out.append(e)
        if dropped:
            self.warn(f"{mode}: {dropped} of {len(entries)} entries could not be placed and were dropped")
        return out

    # ------------------------------------------------------------------ modes 1/2: printed TOC

    async def detect_toc(self) -> DetectedToc | None:
        check = self.settings.toc_check_page_num
        offline = detect_toc_offline(self.parsed, check)
        if not self.llm.available:
            return offline
        found = await self.llm.detect_toc(check)
        if found is None:
            return offline
        pages, numbered = found
        if not pages:
            if offline is not None:
                self.warn("LLM saw no table of contents; using the one found by layout")
            return offline
        items = await self.llm.transform(pages)
        if items is None:
            items = parse_toc_items(self.parsed, pages)
            numbered = sum(1 for it in items if it.printed) >= 0.5 * max(1, len(items))
        if len(items) < 2:
            return offline
        return DetectedToc(tuple(pages), tuple(items), numbered)

    async def map_printed_pages(self, toc: DetectedToc) -> list[FlatEntry]:
        """Printed TOC page numbers → physical pages by the most common offset (titles and page labels)."""
        votes: Counter[int] = Counter()
        for it in toc.items:
            if not (it.printed and it.printed.isdigit()):
                continue
            p = int(it.printed)
            offsets = set()
            for phys in range(max(self.body_start, p - 5), min(self.n, p + 60) + 1):
                if self.lines.find(it.title, phys, strict=True) is not None:
                    offsets.add(phys - p)
            votes.update(offsets)
        label_votes: Counter[int] = Counter()
        for phys, label in enumerate(self.parsed.page_labels, start=1):
            if phys >= self.body_start and label.isdigit():
                label_votes[phys - int(label)] += 1
        if not votes and self.llm.available:
            votes = await self.llm.offset_votes(toc, self.body_start)
        if votes:
            offset = max(votes, key=lambda o: (votes[o], label_votes[o], -abs(o)))
        elif label_votes:
            offset = label_votes.most_common(1)[0][0]
        else:
            offset = 0
        log.info("ingest.toc_offset", offset=offset, votes=votes[offset] if votes else 0)
        arabic_pages: dict[int, int] = {}
        other_pages: dict[str, int] = {}
        for phys, label in enumerate(self.parsed.page_labels, start=1):
            if phys < self.body_start or not label:
                continue
            if label.isdigit():
                arabic_pages.setdefault(int(label), phys)
            else:
                other_pages.setdefault(label.lower(), phys)
        codes = codes_from_levels([it.level for it in toc.items])
        out = []
        current = offset  # the offset can change inside a document (unnumbered inserted pages)
        for code, it in zip(codes, toc.items, strict=True):
            page: int | None = None
            line: int | None = None
            if it.printed and it.printed.isdigit():
                p = int(it.printed)
                tries = [arabic_pages.get(p), p + current, p + offset]
                for phys in tries:
                    if phys is None or not 1 <= phys <= self.n:
                        continue
                    m = self.lines.find(it.title, phys, relaxed=True)
                    if m is not None:
                        page, line = phys, m.line
                        current = phys - p
                        break
                if page is None:
                    page = next((x for x in tries if x is not None and 1 <= x <= self.n), None)
            elif it.printed:
                page = other_pages.get(it.printed.lower())
            out.append(FlatEntry(code, it.title, page, line))
        return self._fill_missing(out)

    def _fill_missing(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        """Entries without a page (e.g. ``PART II``): the first page of the next entry with one."""
        out = list(entries)
        for i in range(len(out) - 1, -1, -1):
            if out[i].page is None:
                nxt = next((e.page for e in out[i + 1 :] if e.page is not None), None)
                if nxt is not None:
                    out[i] = replace(out[i], page=nxt)
        return out

    async def locate_titles(self, toc: DetectedToc) -> list[FlatEntry]:
        """TOC without page numbers: each title's first page, scanning forward in order."""
        codes = codes_from_levels([it.level for it in toc.items])
        out: list[FlatEntry] = []
        cursor = self.body_start
        for code, it in zip(codes, toc.items, strict=True):
            found = self.lines.scan(it.title, cursor, self.n, strict=True)
            if found is None:
                out.append(FlatEntry(code, it.title, None))
                continue
            page, m = found
            out.append(FlatEntry(code, it.title, page, m.line, verified=True))
            cursor = page
        missing = [i for i, e in enumerate(out) if e.page is None]
        if missing and self.llm.available:
            found_llm = await self.llm.locate(
                [out[i].title for i in missing], self.body_start, self.n, "tree.toc_locate"
            )
            for k, page in found_llm.items():
                i = missing[k]
                m = self.lines.find(out[i].title, page, relaxed=True)
                out[i] = replace(out[i], page=page, line=m.line if m else None, verified=m is not None)
        return out

    # ------------------------------------------------------------------ shared post-processing

    def with_preface(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        if entries and entries[0].page and entries[0].page > 1:
            return [FlatEntry("0", PREFACE, 1, None, True, True), *entries]
        return entries

    def appear_start(self, entries: list[FlatEntry]) -> list[FlatEntry]:
        """Does each section start at the top of its start page? (offline layout check)"""
        out = []
        for e in entries:
            if e.title == PREFACE and e.page == 1 and e.structure == "0":
                out.append(e)
                continue
            line = e.line
            if line is None and e.page is not None:
                m = self.lines.find(e.title, e.page, relaxed=True)
                line = m.line if m else None
            at_top = self.lines.at_top(e.page, line) if (e.page is not None and line is not None) else False
            out.append(replace(e, line=line, appear_start=at_top))
        return out

    def to_tree(
        self, entries: list[FlatEntry], last_page: int, stop: tuple[int, int] | None = None
    ) -> list[_Node]:
        """Start/end pages (spec 3.5.3) and nesting by structure codes (spec 3.5.4)."""
        entries = [e for e in entries if e.page is not None]
        roots: list[_Node] = []
        by_code: dict[str, _Node] = {}
        for i, e in enumerate(entries):
            start = int(e.page or 1)
            node_stop = stop
            if i + 1 < len(entries):
                nxt = entries[i + 1]
                end = int(nxt.page or start) - (1 if nxt.appear_start else 0)
                node_stop = (int(nxt.page or start), nxt.line) if nxt.line is not None else None
            else:
                end = last_page
            node = _Node(_title(e.title), start, max(start, min(end, last_page)), e.line, node_stop)
            parent = None
            code = e.structure
            while "." in code and parent is None:
                code = code.rsplit(".", 1)[0]
                parent = by_code.get(code)
            (parent.children if parent is not None else roots).append(node)
            by_code[e.structure] = node
        return roots

    # ------------------------------------------------------------------ large nodes

    def _tokens(self, lo: int, hi: int) -> int:
        return sum(self.parsed.pages[p - 1].tokens for p in range(lo, hi + 1))

    def _bytes(self, lo: int, hi: int) -> int:
        """UTF-8 bytes of pages ``lo..hi`` (a lone surrogate, which a glyph's ToUnicode map can give, as the 3 bytes
        of the replacement character cl100k counts it as)."""
        return sum(len(self.parsed.pages[p - 1].text.encode("utf-8", "surrogatepass")) for p in range(lo, hi + 1))

    def _too_big(self, start: int, end: int) -> bool:
        """More pages than a node may hold, or more tokens: pages of fewer bytes than that are not counted (a
        cl100k token is at least one byte)."""
        limit = self.settings.max_token_num_each_node
        return end > start and (
            end - start + 1 > self.settings.max_page_num_each_node
            or (self._bytes(start, end) > limit and self._tokens(start, end) > limit)
        )

    def refine_leaves(self, roots: list[_Node]) -> None:
        """Sections a contents list leaves out but the body shows (issue 27 item 2): when one unnumbered heading
        style a point or more above the body recurs inside at least half of the contents' leaf sections (two
        pages or more), and is not the style of those sections' own titles, its headings become their children.
        (Bold headings at body size, as SEC filings set their sub-headings, are left to subdivision by size.)"""
        leaves = [n for n in _walk(roots) if not n.children and n.end > n.start]
        if len(leaves) < 3:
            return
        titles = {compact(n.title) for n in _walk(roots)}
        best: tuple[int, list[list[FlatEntry]]] | None = None
        for style in heading_styles(self.parsed, self.body_start, self.n, after=None, skip_pages=self.toc_pages):
            first = style[0]
            if (
                not first.style.startswith("plain")
                or first.h.size < self.parsed.body_font_size + 1.0  # bold at body size: a filing's run-in labels
                or sum(_names_a_node(compact(c.title), titles) for c in style) > 0.2 * len(style)
            ):
                continue
            per_leaf = [
                [
                    FlatEntry(str(i + 1), c.title, c.h.page, c.h.line, verified=True)
                    for i, c in enumerate(x for x in style if _inside(x.h.page, x.h.line, leaf))
                ]
                for leaf in leaves
            ]
            covered = sum(1 for e in per_leaf if e)
            pages = sum(leaf.end - leaf.start + 1 for leaf, e in zip(leaves, per_leaf, strict=True) if e)
            if covered >= 0.5 * len(leaves) and sum(map(len, per_leaf)) <= 2 * pages and (
                best is None or covered > best[0]
            ):
                best = (covered, per_leaf)
        if best is None:
            return
        added = sum(self._attach(leaf, entries) for leaf, entries in zip(leaves, best[1], strict=True))
        log.info("ingest.tree_refined", leaves=best[0], nodes=added)

    def _attach(self, leaf: _Node, entries: list[FlatEntry]) -> int:
        """``entries`` as the leaf's subsections (the leaf's own span ends where the first begins); how many."""
        if not entries:
            return 0
        entries = self.appear_start(entries)
        children = self.to_tree(entries, leaf.end, leaf.stop)
        if children:
            first = entries[0]
            leaf.end = max(leaf.start, int(first.page or leaf.start) - (1 if first.appear_start else 0))
            leaf.children = children
        return len(children)

    async def decide_ambiguous(self, roots: list[_Node]) -> None:
        """Where the layout cannot tell (issue 27 item 4): a leaf section of ``AMBIGUOUS_PAGES`` pages or more,
        within the node limits, holding two or more bold or larger heading-like lines that no rule took as
        sections. With an LLM configured, one ``tree.headings`` call per such range decides which head
        subsections (within the tree's LLM budget; verified: the line is on its page). Offline nothing changes."""
        if not self.llm.available:
            return
        body = self.parsed.body_font_size
        titles = {compact(n.title) for n in _walk(roots)}
        ranges: list[tuple[_Node, list[HeadingCandidate]]] = []
        for leaf in _walk(roots):
            if leaf.children or leaf.end - leaf.start + 1 < AMBIGUOUS_PAGES or self._too_big(leaf.start, leaf.end):
                continue
            cands = [
                h for h in self.parsed.headings
                if _inside(h.page, h.line, leaf) and h.page not in self.toc_pages and (h.bold or h.size >= body + 0.5)
                and not _names_a_node(compact(h.text), titles)
            ][:AMBIGUOUS_MAX_LINES]
            if len(cands) >= 2:
                ranges.append((leaf, cands))
        ranges = ranges[: self.llm.steps.remaining]
        picks = await asyncio.gather(*(self.llm.pick_headings(leaf.title, leaf.start, leaf.end, cands)
                                       for leaf, cands in ranges))
        for (leaf, _), picked in zip(ranges, picks, strict=True):
            self._attach(leaf, [FlatEntry(str(i + 1), h.text, h.page, h.line, verified=True)
                                for i, h in enumerate(picked or [])])
        if ranges:
            log.info("ingest.tree_ambiguous_decided", ranges=len(ranges), decided=sum(p is not None for p in picks))

    async def subdivide(self, node: _Node, depth: int) -> None:
        """Split a node over the page or token limit on its own range, then recurse (spec 3.6)."""
        if self._too_big(node.start, node.end) and depth < MAX_DEPTH:
            new, own_end = await self.split(node)
            if new:
                node.end = own_end
                if self._too_big(node.start, node.end):  # a long stretch before the first heading
                    lead = self.windows(node)
                    if lead:
                        node.end = node.start
                        new = lead + new
                node.children = new + node.children
        await asyncio.gather(*(self.subdivide(c, depth + 1) for c in node.children))

    async def split(self, node: _Node) -> tuple[list[_Node], int]:
        """Children covering the node's own range, and the node's narrowed end page."""
        lo, hi = node.start, node.end
        after = (lo, node.line) if node.line is not None else None
        key = compact(node.title)
        entries: list[FlatEntry] | None = None
        if self.llm.available:
            generated = await self.llm.generate(lo, hi)
            if generated:
                _, checked = self.verify(generated)
                entries = [e for e in checked if e.verified]
        if not entries:
            entries = split_entries(
                self.parsed, lo, hi, after=after, before=node.stop, skip_pages=self.toc_pages
            )
        entries = [
            e
            for e in entries
            if e.page is not None
            and lo <= e.page <= hi
            and (node.stop is None or (e.page, e.line if e.line is not None else -1) < node.stop)
        ]
        while entries and entries[0].page == lo and compact(entries[0].title) == key:
            entries = entries[1:]
        if entries:
            entries = self.appear_start(entries)
            children = self.to_tree(entries, hi, node.stop)
            if children and not (len(children) == 1 and children[0].start == lo and children[0].end == hi):
                first = entries[0]
                own_end = int(first.page or lo) - (1 if first.appear_start else 0)
                return children, max(lo, own_end)
        return self.windows(node), lo

    def windows(self, node: _Node) -> list[_Node]:
        """Split a range without headings into page windows "<title> (pp. a–b)"."""
        lo, hi = node.start, node.end
        limit_pages = self.settings.max_page_num_each_node
        limit_tokens = self.settings.max_token_num_each_node
        spans: list[tuple[int, int]] = []
        a = lo
        tokens = 0
        for p in range(lo, hi + 1):
            t = self.parsed.pages[p - 1].tokens
            if p > a and (p - a >= limit_pages or tokens + t > limit_tokens):
                spans.append((a, p - 1))
                a, tokens = p, 0
            tokens += t
        spans.append((a, hi))
        if len(spans) < 2:
            return []
        base = re.sub(r"\s*\(pp?\. [^)]*\)$", "", node.title)
        return [
            _Node(
                f"{base} (p. {s})" if s == e else f"{base} (pp. {s}–{e})", s, e, None if s > lo else node.line
            )
            for s, e in spans
        ]

    # ------------------------------------------------------------------ output

    def _doc_title(self) -> str:
        for line in self.parsed.pages[0].text.split("\n"):
            if 3 <= len(line) <= 80 and sum(ch.isalpha() for ch in line) >= 3:
                return line
        return "Document"

    def emit(self, roots: list[_Node]) -> list[TreeNode]:
        out: list[TreeNode] = []

        def walk(node: _Node, parent_id: str | None, level: int, path: tuple[str, ...]) -> None:
            node_id = f"{len(out):04d}"
            my_path = (*path, node.title)
            text = "\n\n".join(self.parsed.body_text(p) for p in range(node.start, node.end + 1))
            out.append(
                TreeNode(
                    node_id=node_id,
                    parent_id=parent_id,
                    ordinal=len(out),
                    level=level,
                    title=node.title,
                    start=node.start,
                    end=node.end,
                    text=text,
                    summary="",
                    path=my_path,
                    is_leaf=not node.children,
                    unit="page",
                )
            )
            for child in node.children:
                walk(child, node_id, level + 1, my_path)

        for r in roots:
            walk(r, None, 1, ())
        return out


def _walk(nodes: list[_Node]) -> list[_Node]:
    out: list[_Node] = []
    for n in nodes:
        out.append(n)
        out.extend(_walk(n.children))
    return out


def _names_a_node(key: str, titles: set[str]) -> bool:
    """Is this heading (compacted) a node's title, also without its number ("1 Title" / "Title")?"""
    return bool(key) and any(t == key or (t.endswith(key) and len(key) >= 0.6 * len(t)) for t in titles)


def _inside(page: int, line: int, node: _Node) -> bool:
    """Is (page, line) within ``node``'s range: after its title line and before the next section starts?"""
    start = (node.start, node.line if node.line is not None else -1)
    return start < (page, line) and page <= node.end and (node.stop is None or (page, line) < node.stop)


def _title(text: str) -> str:
    t = clean_text(text)
    t = re.sub(r"(?:\s*[.…·_]){2,}\s*\d*$", "", t).strip()
    return t[:200] or "Untitled"


async def build_pdf_tree(parsed: ParsedPdf, chat: ChatModel, settings: IngestSettings) -> DocumentTree:
    """Build the PageIndex tree of a parsed PDF (see the module docstring)."""
    return await _Builder(parsed, chat, settings).build()
