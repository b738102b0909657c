"""List questions over prose: "What segments does Northwind report?" is answered by the sentence that counts
them ("We report three segments.") and the names the report lists after it (the section titles of each one),
not by a sentence that states some figure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kb.core import lexicon as lx
from kb.core.text import split_sentences
from router.types import RetrievedChunk

_COUNT = "|".join([*(w for w in lx.NUMBER_WORDS if w.isascii()), r"\d{1,2}"])
_TITLE = re.compile(r"^[A-Z][\w&,'’ -]{2,60}$")


@dataclass(frozen=True)
class Members:
    """The sentence counting the asked things, its chunk, and the names listed after it (empty when the
    report does not list exactly that many)."""

    chunk: int
    sentence: str
    names: tuple[str, ...]
    listed: bool = False  # the sentence names them itself ("two segments, Groceries and Pharmacy")

    @property
    def named(self) -> bool:
        """Whether the answer names the members (listed after the sentence or in it)."""
        return bool(self.names) or self.listed


def asked_members(question: str) -> str:
    """The plural noun whose members a question asks for ("segments"), "" when it asks for none."""
    m = lx.MEMBERS_ASKED.search(question)
    return m.group(1).lower() if m and m.group(1).lower() not in lx.STOP_WORDS else ""


def counted_members(noun: str, chunks: Sequence[RetrievedChunk]) -> Members | None:
    """The first sentence (by evidence rank) that counts the asked things ("We report three segments", "four
    reportable segments"), with the names listed after it: the next lines that are titles, as many as counted."""
    counts = re.compile(rf"(?i)\b({_COUNT})\s+(?:[a-z-]+\s+)?{re.escape(noun)}\b")
    for ci, c in enumerate(chunks):
        for s in split_sentences(c.text):
            m = counts.search(s)
            if m is None:
                continue
            n = int(m.group(1)) if m.group(1).isdigit() else lx.NUMBER_WORDS[m.group(1).lower()]
            items = [x.strip() for x in re.split(r",|;|:|\band\b", s[m.end():]) if x.strip()][:n]
            listed = len(items) == n and all(x[:1].isupper() for x in items)  # ": Groceries and Pharmacy"
            return Members(ci, " ".join(s.split()), _titles_after(c.text, s, n), listed)
    return None


def _titles_after(text: str, sentence: str, n: int) -> tuple[str, ...]:
    """``n`` title lines (a capitalised line of a few words, no full stop, no figure) after the sentence, as a
    report heads each member's part; none unless exactly that many stand before the text ends."""
    head = " ".join(sentence.split()[:4])
    flat = [ln.strip().lstrip("#").strip() for ln in text.splitlines()]
    start = next((i for i, ln in enumerate(flat) if head in " ".join(ln.split())), None)
    if start is None:
        return ()
    titles = [ln for i, ln in enumerate(flat) if i > start and _is_title(flat[i - 1], ln)]
    return tuple(titles[:n]) if len(titles) >= n and n > 1 else ()


def _is_title(before: str, line: str) -> bool:
    """A heading line: capitalised, six words at most, no figure, no closing stop, after a blank line or a line
    that ends a sentence (a wrapped line of prose follows one that does not)."""
    return bool(_TITLE.match(line)) and len(line.split()) <= 6 and not any(ch.isdigit() for ch in line) \
        and not line.endswith((".", ":", ";")) and (not before or before.endswith((".", ":", ")", "”", "!", "?")))


def titled_members(noun: str, chunks: Sequence[RetrievedChunk]) -> Members | None:
    """With no sentence counting them: a title naming the asked things ("Segment results") and the titles under
    it in the same passage (each segment's part), two at least; the title is the sentence quoted."""
    stem = noun[:-1] if noun.endswith("s") else noun
    for ci, c in enumerate(chunks):
        lines = [ln.strip().lstrip("#").strip() for ln in c.text.splitlines()]
        for i, ln in enumerate(lines):
            if not (_is_title(lines[i - 1] if i else "", ln) and re.search(rf"(?i)\b{re.escape(stem)}s?\b", ln)):
                continue
            under = [x for j, x in enumerate(lines) if j > i + 1 and _is_title(lines[j - 1], x)]
            if len(under) >= 2:
                return Members(ci, ln, tuple(under))
    return None
