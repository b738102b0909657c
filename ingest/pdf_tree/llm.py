"""The LLM steps of PDF tree building: a budgeted, failure-tolerant caller and the steps that use it.

Every step has an offline counterpart in the builder; a ``None`` answer means: use it.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

import msgspec
import structlog

from ingest.pdf_read import HeadingCandidate, ParsedPdf, clean_text
from ingest.pdf_tree.entries import DetectedToc, FlatEntry, TocItem, codes_from_levels, neighbour_range
from ingest.pdf_tree.matching import PageLines, compact
from ingest.prompts import (
    GENERATE,
    HEADINGS,
    LOCATE,
    TOC_DETECT,
    TOC_TRANSFORM,
    GenEntry,
    generate_prompt,
    headings_prompt,
    locate_prompt,
    toc_detect_prompt,
    toc_transform_prompt,
)
from kb.core.errors import LLMError
from kb.core.providers import ChatModel
from kb.core.providers.chat import CountingChat
from kb.core.providers.steps import InvalidReply, LLMStep, ask
from kb.core.settings import IngestSettings
from kb.core.text import count_tokens, normalize_title, truncate_tokens

log = structlog.get_logger("ingest.pdf_tree")

LLM_CONCURRENCY = 4
LLM_CALLS_PER_100_PAGES = 14

R = TypeVar("R")


class LlmSteps:
    """Budgeted, bounded, failure-tolerant JSON calls; ``None`` means: use the offline step.

    After ``MAX_ERRORS_IN_A_ROW`` provider errors (not malformed replies) the LLM is no
    longer asked for this document.
    """

    MAX_ERRORS_IN_A_ROW = 3

    def __init__(self, chat: ChatModel, budget: int) -> None:
        self.chat = chat
        self.budget = budget
        self.calls = 0
        self.failures = 0
        self.errors_in_a_row = 0
        self._sem = asyncio.Semaphore(LLM_CONCURRENCY)

    @property
    def remaining(self) -> int:
        if self.chat.offline or self.errors_in_a_row >= self.MAX_ERRORS_IN_A_ROW:
            return 0
        return max(0, self.budget - self.calls)

    @property
    def available(self) -> bool:
        return self.remaining > 0

    async def ask(self, step: LLMStep[R], prompt: str) -> R | None:
        """The step's typed reply, or None (budget spent, provider failing, or a reply of the wrong shape)."""
        if not self.available:
            return None
        counted = CountingChat(self.chat)
        async with self._sem:
            try:
                reply = await ask(counted, step, prompt)
            except InvalidReply as exc:
                self.calls += counted.calls
                self.failures += 1
                log.warning("ingest.tree_llm_bad_reply", purpose=step.purpose, error=str(exc)[:300])
                return None
            except LLMError as exc:
                self.calls += max(1, counted.calls)
                self.failures += 1
                self.errors_in_a_row += 1
                log.warning("ingest.tree_llm_failed", purpose=step.purpose, error=str(exc)[:300])
                if self.errors_in_a_row == self.MAX_ERRORS_IN_A_ROW:
                    log.warning("ingest.tree_llm_disabled", calls=self.calls)
                return None
        self.calls += counted.calls
        self.errors_in_a_row = 0
        return reply


def _tagged(parsed: ParsedPdf, pages: Iterable[int], max_tokens: int) -> str:
    parts = []
    for p in pages:
        text = parsed.pages[p - 1].text
        if parsed.pages[p - 1].tokens > max_tokens:
            text = truncate_tokens(text, max_tokens)
        parts.append(f"<physical_index_{p}>\n{text}\n</physical_index_{p}>")
    return "\n".join(parts)


def page_groups(parsed: ParsedPdf, lo: int, hi: int, max_tokens: int) -> list[list[int]]:
    """Consecutive page groups of at most ``max_tokens`` tokens, overlapping by one page."""
    groups: list[list[int]] = []
    cur: list[int] = []
    tokens = 0
    for p in range(lo, hi + 1):
        t = min(parsed.pages[p - 1].tokens, max_tokens) + 12
        if cur and tokens + t > max_tokens:
            groups.append(cur)
            last = cur[-1]
            cur, tokens = [last], min(parsed.pages[last - 1].tokens, max_tokens) + 12
            if tokens + t > max_tokens:
                cur, tokens = [], 0
        cur.append(p)
        tokens += t
    if cur and (not groups or cur != groups[-1][-1:]):
        groups.append(cur)
    return groups


def _loose_on_page(title: str, text: str) -> bool:
    """Most of the title's words occur on the page (to accept an LLM's answer)."""
    words = [w for w in normalize_title(title).split() if len(w) >= 3]
    if not words:
        return compact(title) in compact(text)
    page_words = set(normalize_title(text).split())
    return sum(1 for w in words if w in page_words) >= 0.7 * len(words)


class TreeLlm:
    """The LLM steps of building one PDF's tree, within one call budget. Every step answers ``None`` (or
    finds nothing) when the LLM is unavailable or fails: the builder then uses its offline step."""

    def __init__(self, parsed: ParsedPdf, settings: IngestSettings, lines: PageLines, chat: ChatModel,
                 warn: Callable[[str], None]) -> None:
        self.parsed = parsed
        self.settings = settings
        self.n = len(parsed.pages)
        self.lines = lines
        self.steps = LlmSteps(chat, max(4, LLM_CALLS_PER_100_PAGES * self.n // 100))
        self.warn = warn

    @property
    def available(self) -> bool:
        return self.steps.available

    @property
    def calls(self) -> int:
        return self.steps.calls

    # ------------------------------------------------------------------ verification and fixing

    async def fix(self, entries: list[FlatEntry], wrong: list[int], body_start: int) -> bool:
        """Locate wrong entries between their verified neighbours; True if any was placed."""
        by_range: dict[tuple[int, int], list[int]] = {}
        for i in wrong:
            by_range.setdefault(neighbour_range(entries, i, body_start, self.n), []).append(i)
        progress = False
        jobs = []
        for (lo, hi), idxs in by_range.items():
            groups = page_groups(self.parsed, lo, hi, self.settings.max_token_num_each_node)
            if len(groups) > 2:
                continue  # too wide to ask about cheaply
            jobs.append((idxs, self.locate([entries[i].title for i in idxs], lo, hi, "tree.fix")))
        results = await asyncio.gather(*(job for _, job in jobs))
        for (idxs, _), found in zip(jobs, results, strict=True):
            for k, page in found.items():
                i = idxs[k]
                if _loose_on_page(entries[i].title, self.parsed.pages[page - 1].text):
                    m = self.lines.find(entries[i].title, page, relaxed=True)
                    entries[i] = replace(entries[i], page=page, line=m.line if m else None, verified=True)
                    progress = True
        return progress

    # ------------------------------------------------------------------ modes 1/2: printed TOC

    async def detect_toc(self, check: int) -> tuple[list[int], bool] | None:
        """The printed TOC's pages among the first ``check`` (one run) and whether it gives page numbers."""
        pages = range(1, min(check, self.n) + 1)
        body = "\n".join(
            f"<page_{p}>\n{truncate_tokens(self.parsed.pages[p - 1].text, 500)}\n</page_{p}>" for p in pages
        )
        reply = await self.steps.ask(TOC_DETECT, toc_detect_prompt(body))
        if reply is None:
            return None
        yes = sorted({p.page for p in reply.pages if p.is_toc and 1 <= p.page <= self.n})
        run: list[int] = []
        for p in yes:
            if run and p != run[-1] + 1:
                break  # the TOC ended
            run.append(p)
        return run, bool(reply.page_numbers_given)

    async def transform(self, pages: Sequence[int]) -> list[TocItem] | None:
        """The TOC on ``pages`` as items with levels and printed page numbers."""
        text = "\n".join(self.parsed.pages[p - 1].text for p in pages)
        text = re.sub(r"(?:\s*[.…·_]){3,}\s*", ": ", text)
        if count_tokens(text) > 15000:
            return None
        reply = await self.steps.ask(TOC_TRANSFORM, toc_transform_prompt(text))
        if reply is None:
            return None
        items = []
        for e in reply.entries:
            title = clean_text(e.title)
            if not title or not re.fullmatch(r"\d+(?:\.\d+)*", e.structure.strip()):
                continue
            printed = str(e.page) if e.page is not None and e.page > 0 else None
            items.append(TocItem(title, printed, e.structure.strip().count(".") + 1, "llm"))
        return items if len(items) >= 2 else None

    async def offset_votes(self, toc: DetectedToc, body_start: int) -> Counter[int]:
        """Printed-to-physical page offsets, one vote per TOC title found in the first page group."""
        groups = page_groups(self.parsed, body_start, self.n, self.settings.max_token_num_each_node)
        if not groups:
            return Counter()
        numbered = [it for it in toc.items if it.printed and it.printed.isdigit()]
        found = await self.locate(
            [it.title for it in numbered], groups[0][0], groups[0][-1], "tree.toc_index"
        )
        votes: Counter[int] = Counter()
        for k, phys in found.items():
            votes[phys - int(numbered[k].printed or 0)] += 1
        return votes

    async def locate(self, titles: list[str], lo: int, hi: int, purpose: str) -> dict[int, int]:
        """Ask, page group by page group, where each title starts; index → physical page."""
        if not titles:
            return {}
        groups = page_groups(self.parsed, lo, hi, self.settings.max_token_num_each_node)
        groups = groups[: self.steps.remaining]
        listing = "\n".join(f"{i}. {t}" for i, t in enumerate(titles))

        async def one(group: list[int]) -> list[tuple[int, int]]:
            prompt = locate_prompt(listing, _tagged(self.parsed, group, self.settings.max_token_num_each_node))
            reply = await self.steps.ask(LOCATE[purpose], prompt)
            if reply is None:
                return []
            return [
                (e.index, e.physical_index)
                for e in reply.entries
                if 0 <= e.index < len(titles)
                and e.physical_index is not None
                and group[0] <= e.physical_index <= group[-1]
            ]

        results = await asyncio.gather(*(one(g) for g in groups))
        found: dict[int, int] = {}
        for pairs in results:
            for idx, page in pairs:
                found.setdefault(idx, page)
        return found

    # ------------------------------------------------------------------ mode 3: no TOC

    async def generate(self, lo: int, hi: int) -> list[FlatEntry] | None:
        """Group-by-group structure generation (first group creates, later groups continue)."""
        groups = page_groups(self.parsed, lo, hi, self.settings.max_token_num_each_node)
        if not groups or len(groups) > self.steps.remaining:
            return None
        raw: list[GenEntry] = []
        for k, group in enumerate(groups):
            text = _tagged(self.parsed, group, self.settings.max_token_num_each_node)
            previous = None if k == 0 else msgspec.json.encode(
                [{"structure": e.structure, "title": e.title, "physical_index": e.physical_index} for e in raw[-60:]]
            ).decode()
            reply = await self.steps.ask(GENERATE, generate_prompt(text, previous))
            if reply is None:
                self.warn(
                    f"LLM structure generation failed for pages {group[0]}-{group[-1]}; used layout headings"
                )
                return None
            for e in reply.entries:
                if e.physical_index is None or not group[0] <= e.physical_index <= group[-1]:
                    continue
                if not re.fullmatch(r"\d+(?:\.\d+)*", e.structure.strip()) or not clean_text(e.title):
                    continue
                if (
                    raw
                    and compact(raw[-1].title) == compact(e.title)
                    and raw[-1].physical_index == e.physical_index
                ):
                    continue
                raw.append(e)
        if not raw:
            return None
        codes = codes_from_levels([e.structure.strip().count(".") + 1 for e in raw])
        return [FlatEntry(c, clean_text(e.title), e.physical_index) for c, e in zip(codes, raw, strict=True)]

    async def pick_headings(
        self, section: str, lo: int, hi: int, cands: Sequence[HeadingCandidate]
    ) -> list[HeadingCandidate] | None:
        """One call for one ambiguous page range: which of its heading-like lines head subsections (None: no answer)."""
        listing = "\n".join(
            f"[{k}] p.{h.page} {h.size:g}pt {'bold' if h.bold else 'regular'}: {h.text}" for k, h in enumerate(cands)
        )
        body = f"body text: {self.parsed.body_font_size:g}pt\n{listing}"
        reply = await self.steps.ask(HEADINGS, headings_prompt(section, f"{lo}-{hi}", body))
        if reply is None:
            self.warn(f"LLM heading decision failed for pages {lo}-{hi}; kept the layout's sections")
            return None
        return [cands[k] for k in sorted(set(reply.headings)) if 0 <= k < len(cands)]
