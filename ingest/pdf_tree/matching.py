"""Title matching: does a section title start a line of a page (exactly, fuzzily, or by its beginning)?"""

from __future__ import annotations

import difflib
import unicodedata
from dataclasses import dataclass

from ingest.pdf_read import ParsedPdf
from kb.core.text import normalize_title


def compact(text: str) -> str:
    """Title key for fuzzy matching: accents stripped, lowercase alphanumerics only, no spaces."""
    t = unicodedata.normalize("NFKD", text)
    if not t.isascii():  # no ASCII character combines
        t = "".join(ch for ch in t if not unicodedata.combining(ch))
    return normalize_title(t).replace(" ", "")


@dataclass(frozen=True)
class Match:
    line: int
    tail: int  # characters of the last matched line after the title
    fuzzy: bool


class PageLines:
    """Compact per-line keys of every page, built lazily, for title look-ups."""

    def __init__(self, parsed: ParsedPdf) -> None:
        self.parsed = parsed
        self.n = len(parsed.pages)
        self._keys: dict[int, list[str]] = {}
        self._raw: dict[int, list[str]] = {}

    def raw(self, page: int) -> list[str]:
        if page not in self._raw:
            self._raw[page] = self.parsed.pages[page - 1].text.split("\n")
        return self._raw[page]

    def keys(self, page: int) -> list[str]:
        if page not in self._keys:
            self._keys[page] = [compact(x) for x in self.raw(page)]
        return self._keys[page]

    def margin(self, page: int) -> frozenset[int]:
        m = self.parsed.margins
        return frozenset(m[page - 1]) if page - 1 < len(m) else frozenset()

    def find(self, title: str, page: int, *, strict: bool = False, relaxed: bool = False) -> Match | None:
        """Where ``title`` starts a line of ``page`` (content lines first, then running headers)."""
        if not 1 <= page <= self.n:
            return None
        t = compact(title)
        if len(t) < 2:
            return None
        keys = self.keys(page)
        margin = self.margin(page)
        first = t[0]
        for use_margin in (False, True):
            for i, k in enumerate(keys):
                if not k or k[0] != first or (i in margin) != use_margin:  # a line starting otherwise never matches
                    continue
                m = self._match_at(keys, i, t, strict, relaxed)
                if m is not None:
                    return m
        return None

    @staticmethod
    def _match_at(keys: list[str], i: int, t: str, strict: bool, relaxed: bool) -> Match | None:
        if keys[i][:1] != t[:1]:
            return None
        window = keys[i]
        j = i
        while len(window) < len(t) and j + 1 < len(keys) and j - i < 3:
            j += 1
            window += keys[j]
        limit = max(8, len(t) // 3)
        if window.startswith(t):
            tail = len(window) - len(t)  # rest of the last line after the title
            if not strict or tail <= limit:
                return Match(i, tail, False)
            return None
        if len(t) >= 8:
            head = window[: len(t)]
            sm = difflib.SequenceMatcher(None, t, head, autojunk=False)
            if sm.real_quick_ratio() >= 0.85 and sm.quick_ratio() >= 0.85 and sm.ratio() >= 0.85:
                tail = max(0, len(window) - len(t))
                if not strict or tail <= limit:
                    return Match(i, tail, True)
        if relaxed and len(t) >= 30:
            prefix = t[: max(24, len(t) // 3)]
            if window.startswith(prefix):
                return Match(i, 0, True)
        return None

    def scan(self, title: str, lo: int, hi: int, *, strict: bool = True) -> tuple[int, Match] | None:
        """First page in ``lo..hi`` whose content lines start with ``title``."""
        for p in range(max(1, lo), min(self.n, hi) + 1):
            m = self.find(title, p, strict=strict)
            if m is not None:
                return p, m
        return None

    def at_top(self, page: int, line: int | None) -> bool:
        """Does the content before ``line`` on ``page`` amount to no more than a page header?"""
        if line is None:
            return False
        raw = self.raw(page)
        margin = self.margin(page)
        before = [raw[i] for i in range(min(line, len(raw))) if i not in margin]
        return sum(len(x) for x in before) <= 200 and all(len(x) <= 100 for x in before)
