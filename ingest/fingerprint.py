"""What shaped a stored document besides its bytes: the settings and given metadata it was ingested with.

Re-running a folder skips a file only when its bytes *and* this fingerprint are unchanged; otherwise the file is
re-processed and the job says which part changed ("chunking settings changed", "metadata changed"). Each part is
a short hash of its values, so the reason can be named without storing the values twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import msgspec

from kb.core.settings import IngestSettings

PART_NAMES: Mapping[str, str] = {
    "chunking": "chunking settings",
    "tree": "tree settings",
    "embedder": "embedder",
    "llm": "LLM model (summaries, descriptions, trees)",
    "metadata": "metadata",
}
"""Each part of the fingerprint and how the job names it when it changed."""


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


class IngestKey(msgspec.Struct, frozen=True):
    """The parts' hashes (``PART_NAMES``); stored with the document (``documents.ingest_key``)."""

    parts: dict[str, str]

    def changes(self, stored: Mapping[str, str] | None) -> tuple[str, ...]:
        """The parts that differ from a stored fingerprint, by name ("chunking settings"); () when the same.
        A document stored before fingerprints existed (``None``) counts as the same: re-running a folder after
        an upgrade re-does nothing by itself (``--force`` does)."""
        if stored is None:
            return ()
        return tuple(PART_NAMES[k] for k in PART_NAMES if stored.get(k) != self.parts.get(k))


def ingest_key(settings: IngestSettings, *, embedder: str, llm: str, metadata: Mapping[str, Any]) -> IngestKey:
    """The fingerprint of a file's ingest: the settings that shape its tree and chunks, the embedder and the LLM
    that write its vectors and summaries, and the metadata given for it (folder metadata, its sidecar)."""
    return IngestKey(parts={
        "chunking": _digest([settings.chunk_tokens, settings.chunk_overlap_tokens, settings.chunk_page_aligned,
                             settings.min_chunk_chars]),
        "tree": _digest([settings.toc_check_page_num, settings.max_page_num_each_node,
                         settings.max_token_num_each_node, settings.min_node_token,
                         settings.summary_token_threshold]),
        "embedder": _digest(embedder),
        "llm": _digest(llm),
        "metadata": _digest(dict(metadata)),
    })
