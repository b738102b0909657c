"""Names of the bundled local embedding models and the threads they run on (shared by ``embed`` and
``onnx_embed`` without importing one another at both ends)."""

from __future__ import annotations

from kb.core.cpu import available_cores
from kb.core.errors import ConfigError

BUNDLED_MINILM = "all-MiniLM-L6-v2"
ONNX_MINILM = f"{BUNDLED_MINILM}-onnx"
ONNX_MINILM_INT8 = f"{BUNDLED_MINILM}-onnx-int8"
ONNX_MINILM_SMOOTH = f"{BUNDLED_MINILM}-onnx-int8-smooth"
ONNX_PRECISION = {ONNX_MINILM: "fp32", ONNX_MINILM_INT8: "int8", ONNX_MINILM_SMOOTH: "int8-smooth"}
"""``KB_EMBEDDING_MODEL`` values of the bundled MiniLM on onnxruntime and the precision each runs at (fp32:
torch's vectors; int8: fastest; int8-smooth: int8 with activation outliers smoothed into the weights and the
feed-forward output kept fp32, close to torch's vectors)."""
ONNX_MODELS = frozenset(ONNX_PRECISION)
AUTO = "auto"
"""``KB_EMBEDDING_MODEL``'s default: the bundled model the database's vectors come from, else ``DEFAULT_MODEL``."""
DEFAULT_MODEL = ONNX_MINILM_SMOOTH
"""What ``auto`` runs for a database with no vectors yet (or vectors of an embedder that is not bundled)."""
BUNDLED_MODELS = frozenset({BUNDLED_MINILM, *ONNX_MODELS})


def resolve_model(configured: str, recorded: str | None, *, remote: bool = False) -> str:
    """The embedding model to run: ``configured`` unless it is ``auto``, which keeps a database's bundled
    vectors as they are (``recorded``: the model id its vectors come from) and gives a new one ``DEFAULT_MODEL``.
    A remote endpoint (``remote``) runs the recorded model, else needs its model named."""
    if configured != AUTO:
        return configured
    if remote:
        if recorded:
            return recorded  # the endpoint's model the database's vectors come from
        raise ConfigError("KB_EMBEDDING_MODEL must name the endpoint's model when KB_EMBEDDING_BASE_URL is set")
    return recorded if recorded in BUNDLED_MODELS else DEFAULT_MODEL


def embedding_threads(override: int | None = None) -> int:
    """Threads of a local embedding model: ``override`` (``KB_EMBEDDING_THREADS``) or the available cores (affinity,
    container CPU quota)."""
    if override is not None and override < 1:
        raise ConfigError(f"KB_EMBEDDING_THREADS must be at least 1, got {override}")
    return override or available_cores()
