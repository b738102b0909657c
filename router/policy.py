"""The evidence-ranking policy: every weight and threshold that orders evidence, named, one instance per mode.

``offline`` is the measured behaviour of the offline pipeline (FinanceBench dev figures in the comments);
``llm`` lets the model's tree-search choices decide: evidence from the nodes it chose comes first, ordered
by the in-node fused score of spec 001 under the node's sub-query, small chosen sections are handed over
whole (spec 003), and document-wide cosine hits and cross-references only fill the remaining slots.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb.core.providers import ChatModel


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
    page_diversity: bool = True
    """A chunk whose pages a better chunk of the same document already covers waits until every page has had
    its turn. FinanceBench page_recall@10 (auto / metadata / semantic / description): 0.479 → 0.531, 0.417 →
    0.500, 0.260 → 0.312, 0.344 → 0.427; Docugami evidence_doc_coverage (auto) 0.881 → 0.973."""
    leaf_chunk_hits: float = 0.3
    """Offline tree search: leaf score = leaf_chunk_hits · NodeScore over chunk hits + leaf_title_dense ·
    title/summary cosine + leaf_title_bm25 · title/summary BM25 (FinanceBench page_recall@10: 0.6/0.2/0.2 → 0.48,
    0.4/0.3/0.3 → 0.50, 0.3/0.35/0.35 → 0.52, 0.2/0.4/0.4 → 0.52, 0.8/0.1/0.1 → 0.48)."""
    leaf_title_dense: float = 0.35
    leaf_title_bm25: float = 0.35
    leaf_keep_ratio: float = 0.35
    """Offline tree search keeps leaves scoring at least this share of the best leaf (up to max nodes)."""
    leaf_statement: float = 0.3
    """Offline tree search: added to a leaf holding a financial statement the question names ("… shown in the
    cash flow statement"; statement pages recognised at ingest, ``ingest.statements``)."""
    statement_share: float = 0.15
    """Cross-node ranking: added to a chunk on a page of a statement the question names."""
    statement_docs: int = 2
    statement_hits_per_doc: int = 3
    """Chunks of the named statements' pages (nearest the question), per statement, that join the candidates of
    each of the best routed documents, whatever tree search chose."""
    statement_prior: float = 0.5
    """Prior of a node reached only through a named statement's page."""


@dataclass(frozen=True)
class RoutingPolicy:
    """Numbers of document routing (the same in both modes: the LLM adds steps, it does not reweigh these)."""

    auto_semantic: float = 0.75
    """auto: score = auto_semantic · DocScore / best + auto_description · description match + prior_weight · prior."""
    auto_description: float = 0.25
    prior_weight: float = 2.0
    """The period/type prior outranks similarity: a stated period or type decides, similarity breaks ties."""
    description_dense: float = 0.5
    """Description shortlist: dense · description cosine + (1 − dense) · BM25 over name, title, description."""
    common_lexeme_share: float = 0.6
    """Full-text routing ignores lexemes found in more than this share of a collection's documents (≥ 5 docs)."""
    selective_lexeme_budget: float = 0.05
    """Candidate rows come from the rarest lexemes whose document counts sum to at most this share."""
    year_exact: float = 1.0
    """Period prior: the stated year (the latest one some document has) …"""
    year_other_stated: float = 0.7
    """… another stated year (the newest report carries earlier years as comparatives)."""
    comparative_years: int = 2
    """A year no report is of: a report at most this many years later restates it as a comparative."""
    date_exact: float = 0.5
    """A whole date the question writes ("through July 1, 2023") on which a report's period ends."""
    quarter: float = 0.4
    doc_type: float = 0.5
    """A stated document type (10-K, 10-Q, 8-K, earnings release)."""
    implied_type: float = 0.3
    """A type the wording implies (non-GAAP measures, guidance → earnings release; votes, officer changes → 8-K),
    among one company's documents only."""
    quarterly_for_quarter: float = 0.5
    """No stated type, a quarter asked: quarterly reports of that entity."""
    annual_with_year: float = 0.6
    """No stated type, an annual question: annual reports (0.3 when no year is stated either)."""
    annual_without_year: float = 0.3
    recency_step: float = 0.1
    """No stated year: the latest year +0.3, each year older 0.1 less."""
    recency_max: float = 0.3
    latest_period: float = 0.5
    """"latest"/"most recent": the document with the latest period end."""


OFFLINE = RankingPolicy(name="offline")
ROUTING = RoutingPolicy()
LLM = RankingPolicy(name="llm", chosen_nodes_first=True, whole_section_tokens=1200)


def policy_for(chat: ChatModel) -> RankingPolicy:
    """The offline policy for the offline provider, the LLM policy otherwise."""
    return OFFLINE if chat.offline else LLM


@dataclass(frozen=True)
class MeaningPolicy:
    """When a measure is found by meaning (``router.meaning``): the cosine similarity of the question's unplaced
    words to the nearest measure name, and its lead over the nearest name of another measure. all-MiniLM-L6-v2
    on hand-written phrases: "cash burned by operations" → cash from operations 0.81; "headcount" → 0.35 (no
    measure); "money made from selling products" → cost of products sold 0.67 and "pay shareholders" → equity 0.72
    (both wrong, below the threshold); "money generated from operations" → cash from operations 0.78."""

    threshold: float = 0.75
    margin: float = 0.08
    lines: int = 3  # the collection's printed lines nearest to the words, matched beside the measure names
    zh_threshold: float = 0.40
    """Chinese words (MiniLM reads no Chinese) are matched by their characters: the idf-weighted Dice of
    character pairs with a measure's Chinese name or a printed line. Hand-written phrases: "支付给员工的现金" →
    支付给职工以及为职工支付的现金 0.52 (next measure 0.23); "卖东西收到的钱" → 销售商品、提供劳务收到的现金 0.51 (0.25);
    "员工工资" → 应付职工薪酬 0.23 and "交的税" 0.36 (both below: no measure); a long line holding nearly all the
    words asked scores 0.8 × that share when higher ("交了多少税费" → 支付的各项税费 0.45)."""
    zh_margin: float = 0.15


MEANING = MeaningPolicy()
