"""Evidence as passages under a token budget (issue 22 item 2).

After ranking, each evidence chunk grows into a passage: a chunk on a financial statement page brings its
whole page when it fits, a table chunk brings the table's title and column header (stored with the chunk as
``context``), and the rest take their neighbouring chunks of the same section, a round at a time (±1, ±2, …)
in rank order, until ``KB_EVIDENCE_TOKENS`` is spent. Every ranked evidence chunk stays in (the budget only
limits growth); passages of one section that meet are merged, so no text is given twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
import msgspec

from kb.core.text import count_tokens
from router import store
from router.types import RetrievedChunk

MAX_ROUNDS = 4  # neighbours up to ±4 chunks (with the default chunk size, about two pages of text)


@dataclass(frozen=True)
class Piece:
    """One stored chunk as a passage is built from it."""

    chunk_id: int
    doc_id: int
    node_id: str
    ordinal: int
    text: str
    page: int | None
    page_end: int | None
    tokens: int
    context: str
    statement: str


def _piece(r: asyncpg.Record) -> Piece:
    return Piece(chunk_id=r["id"], doc_id=r["document_id"], node_id=r["node_id"], ordinal=r["ordinal"],
                 text=r["text"], page=r["page"], page_end=r["page_end"], tokens=r["token_count"],
                 context=r["context"] or "", statement=r["statement"] or "")


@dataclass
class _Passage:
    core: RetrievedChunk
    pieces: dict[int, Piece]  # by ordinal
    holds: int = 1  # ranked evidence chunks merged into it

    @property
    def span(self) -> tuple[int, int]:
        return min(self.pieces), max(self.pieces)


def join_overlapping(a: str, b: str, max_overlap: int = 800) -> str:
    """``a`` then ``b`` without the text they share (consecutive chunks overlap by a few sentences)."""
    limit = min(len(a), len(b), max_overlap)
    for k in range(limit, 15, -1):
        if a.endswith(b[:k]):
            return a + b[k:]
    b_start = b[: min(len(b), 60)]
    if len(b_start) >= 20 and (i := a.rfind(b_start)) >= 0 and a[i:] == b[: len(a) - i]:
        return a + b[len(a) - i:]
    return f"{a}\n{b}"


def _text(pieces: Sequence[Piece]) -> str:
    out = pieces[0].text
    for p in pieces[1:]:
        out = join_overlapping(out, p.text)
    context = pieces[0].context.strip()
    if context and not out.lstrip().startswith(context[:40]):
        out = f"{context}\n{out}"
    return out


def _merged(p: _Passage) -> RetrievedChunk:
    pieces = [p.pieces[o] for o in sorted(p.pieces)]
    if len(pieces) == 1 and not pieces[0].context:
        return p.core
    c = msgspec.structs.replace(p.core, holds=p.holds)
    if c.unit == "page":
        pages = [x for q in pieces for x in (q.page, q.page_end) if x is not None]
        span = (min(pages), max(pages)) if pages else c.pages
    else:
        span = c.pages
    return msgspec.structs.replace(c, text=_text(pieces), pages=span)


async def passages(pool: asyncpg.Pool, evidence: Sequence[RetrievedChunk], budget: int) -> tuple[RetrievedChunk, ...]:
    """The evidence chunks grown into passages within ``budget`` tokens (0: the chunks as they are)."""
    stored = [c for c in evidence if c.chunk_id > 0]
    if budget <= 0 or not stored:
        return tuple(evidence)
    rows = {r["id"]: _piece(r) for r in await store.passage_chunks(pool, [c.chunk_id for c in stored])}
    built: list[_Passage | RetrievedChunk] = []
    for c in evidence:
        piece = rows.get(c.chunk_id)
        built.append(_Passage(core=c, pieces={piece.ordinal: piece}) if piece else c)
    live = [p for p in built if isinstance(p, _Passage)]
    spent = sum(x.tokens + count_tokens(x.context) for p in live for x in p.pieces.values())
    spent += sum(count_tokens(c.text) for c in built if not isinstance(c, _Passage))
    spent = await _whole_statement_pages(pool, live, budget, spent)
    for r in range(1, MAX_ROUNDS + 1):
        if spent >= budget:
            break
        spent = await _grow(pool, live, r, budget, spent)
    return tuple(_merged(p) if isinstance(p, _Passage) else p for p in _dedupe(built))


async def _whole_statement_pages(pool: asyncpg.Pool, live: list[_Passage], budget: int, spent: int) -> int:
    """A chunk of a financial statement page brings the page's other chunks (of its section) when they fit."""
    wanted = [p for p in live if any(x.statement for x in p.pieces.values())]
    if not wanted:
        return spent
    near = await _fetch_around(pool, wanted, 12)
    for p in wanted:
        core = next(iter(p.pieces.values()))
        same_page = [x for x in near.get((core.doc_id, core.node_id), [])
                     if x.page is not None and x.page == core.page and x.ordinal not in p.pieces]
        cost = sum(x.tokens for x in same_page)
        if same_page and spent + cost <= budget:
            p.pieces.update({x.ordinal: x for x in same_page})
            spent += cost
    return spent


async def _grow(pool: asyncpg.Pool, live: list[_Passage], r: int, budget: int, spent: int) -> int:
    """Round ``r``: each passage, in rank order, takes the chunk before and after it while the budget lasts."""
    near = await _fetch_around(pool, live, r)
    for p in live:
        lo, hi = p.span
        for ordinal in (hi + 1, lo - 1):
            x = next((x for x in near.get((p.core.doc_id, p.core.node_id), []) if x.ordinal == ordinal), None)
            if x is None or ordinal in p.pieces or spent + x.tokens > budget:
                continue
            p.pieces[ordinal] = x
            spent += x.tokens
    return spent


async def _fetch_around(pool: asyncpg.Pool, live: Sequence[_Passage], reach: int) -> dict[tuple[int, str], list[Piece]]:
    docs, nodes, los, his = [], [], [], []
    for p in live:
        lo, hi = p.span
        docs.append(p.core.doc_id)
        nodes.append(p.core.node_id)
        los.append(lo - reach)
        his.append(hi + reach)
    out: dict[tuple[int, str], list[Piece]] = {}
    seen: set[int] = set()
    for r in await store.neighbour_chunks(pool, docs, nodes, los, his):
        if r["id"] not in seen:
            seen.add(r["id"])
            x = _piece(r)
            out.setdefault((x.doc_id, x.node_id), []).append(x)
    return out


def _dedupe(built: list[_Passage | RetrievedChunk]) -> list[_Passage | RetrievedChunk]:
    """Passages of one section that meet or overlap become one (at the better-ranked one's place)."""
    out: list[_Passage | RetrievedChunk] = []
    for p in built:
        if not isinstance(p, _Passage):
            out.append(p)
            continue
        lo, hi = p.span
        host = next((q for q in out if isinstance(q, _Passage) and q.core.doc_id == p.core.doc_id
                     and q.core.node_id == p.core.node_id and q.span[0] <= hi + 1 and lo <= q.span[1] + 1), None)
        if host is None:
            out.append(p)
        else:
            host.pieces.update(p.pieces)
            host.holds += p.holds
    return out
