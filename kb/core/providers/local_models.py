"""Names of the bundled local embedding models and the threads they run on (shared by ``embed`` and
``onnx_embed`` without importing one another at both ends)."""

from __future__ import annotations

import os

from kb.core.errors import ConfigError

BUNDLED_MINILM = "all-MiniLM-L6-v2"
ONNX_MINILM = f"{BUNDLED_MINILM}-onnx"
ONNX_MINILM_INT8 = f"{BUNDLED_MINILM}-onnx-int8"
ONNX_MODELS = frozenset({ONNX_MINILM, ONNX_MINILM_INT8})
"""``KB_EMBEDDING_MODEL`` values of the bundled MiniLM on onnxruntime (fp32: torch's vectors; int8: faster)."""


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, e.g. a container's cpuset), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity on macOS
        return max(1, os.cpu_count() or 1)


def embedding_threads(override: int | None = None) -> int:
    """Threads of a local embedding model: ``override`` (``KB_EMBEDDING_THREADS``) or the available cores."""
    if override is not None and override < 1:
        raise ConfigError(f"KB_EMBEDDING_THREADS must be at least 1, got {override}")
    return override or available_cores()
