"""The evidence-ranking policy: every weight and threshold that orders evidence, named, one instance per mode.

``offline`` is the measured behaviour of the offline pipeline (FinanceBench dev figures in the comments);
``llm`` lets the model's tree-search choices decide: evidence from the nodes it chose comes first, ordered
by the in-node fused score of spec 001 under the node's sub-query, small chosen sections are handed over
whole (spec 003), and document-wide cosine hits and cross-references only fill the remaining slots.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb.providers import ChatModel


@dataclass(frozen=True)
class RankingPolicy:
    """Numbers of evidence ranking. ``KB_RANK_DENSE_WEIGHT`` (dense vs BM25 share of question similarity)
    and the in-node fusion weights stay settings; everything else is here."""

    name: str
    relevance_share: float = 0.8
    """Cross-node score = relevance_share · question similarity + node_prior_share · node prior
    (FinanceBench page_recall@10 by node prior share: 0.0 → 0.51, 0.2 → 0.53, 0.35 → 0.47)."""
    node_prior_share: float = 0.2
    doc_rank_decay: float = 0.5
    """A chosen node's prior is 1/(1+j) for its rank j in its document, times 1/(1 + decay · document rank)."""
    direct_hits_per_k: int = 2
    """Chunk-level hits inside the routed documents per requested evidence piece (2, 3, 4: same page recall)."""
    direct_hit_prior: float = 0.3
    """Prior of a node reached only by a chunk-level hit."""
    cross_ref_prior: float = 0.3
    """Prior of a node reached by a cross-reference ("see Note 7")."""
    doc_weight_floor: float = 0.5
    """A routed document's chunk weight: floor + (1 − floor) · its routing score / the best score."""
    multi_dense_weight: float = 0.5
    """Dense share when a needed document's chunks are ranked by its own sub-question (multi-document
    questions). Docugami Multi-Doc answer_number_recall (auto): 0.9 → 0.335, 0.7 → 0.388, 0.5 → 0.370; the
    sample comparison states both revenues at 0.5 only (0.6 and 0.3: one; 0.7 and 0.9: none)."""
    chosen_nodes_first: bool = False
    """Evidence from the nodes the model chose first (by node rank, then in-node fused score); other
    chunks fill the remaining slots and are marked ``fill`` in the trace."""
    whole_section_tokens: int = 0
    """A chosen node whose own text has at most this many tokens is handed to synthesis whole (0: never)."""


OFFLINE = RankingPolicy(name="offline")
LLM = RankingPolicy(name="llm", chosen_nodes_first=True, whole_section_tokens=1200)


def policy_for(chat: ChatModel) -> RankingPolicy:
    """The offline policy for the offline provider, the LLM policy otherwise."""
    return OFFLINE if chat.offline else LLM
