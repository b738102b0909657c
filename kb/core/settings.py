"""All configuration, read once from ``KB_*`` environment variables.

Each setting is declared once, as a field of its group (database, llm, embedding, retrieval, ingest,
server) made by :func:`setting`: its environment variable, default, type (the annotation) and a one-line
doc. ``get_settings()`` reads the environment from those declarations and is cached (tests call
``get_settings.cache_clear()`` after changing the environment); ``kb config`` and the README's
configuration table (:func:`settings_table`, checked by a test) are rendered from them, and every group
can be built with its defaults (``IngestSettings(min_node_token=0)``).
"""

from __future__ import annotations

import functools
import os
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from kb.core.errors import ConfigError


def setting(env: str, default: Any = None, doc: str = "", *, secret: bool = False,
            factory: Callable[[], Any] | None = None, shown: str | None = None,
            normalize: Callable[[Any], Any] | None = None) -> Any:
    """Declare one setting: ``env`` variable, ``default`` (or a ``factory``), one-line ``doc``.

    ``secret`` keeps the value out of reprs and masks it in ``kb config``; ``shown`` replaces the default
    in the README table when it is computed; ``normalize`` maps a read value (or the default) to the stored one.
    """
    meta = {"env": env, "doc": doc, "secret": secret, "shown": shown, "normalize": normalize}
    if factory is not None:
        return field(default_factory=factory, repr=not secret, metadata=meta)
    return field(default=default, repr=not secret, metadata=meta)


def _in_range(name: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


@dataclass(frozen=True)
class DatabaseSettings:
    url: str | None = setting("KB_DATABASE_URL", None,
                              "any Postgres ≥ 15 with pgvector ≥ 0.6; unset → embedded server in `KB_DATA_DIR`")
    data_dir: Path = setting("KB_DATA_DIR", Path("./.kb"), shown="`./.kb`",
                          doc="embedded Postgres data (`pg/`), uploads and exported ONNX embedders (`models/`)")
    pool_min: int = setting("KB_DB_POOL_MIN", 1, "asyncpg pool size, lower bound")
    pool_max: int = setting("KB_DB_POOL_MAX", 10, "asyncpg pool size, upper bound")
    connect_timeout_s: float = setting("KB_DB_CONNECT_TIMEOUT_S", 5.0,
                                       "a new connection (or a pool slot) waits at most this "
                                       "(a frozen database is a 503, not a hang)")
    command_timeout_s: float = setting("KB_DB_COMMAND_TIMEOUT_S", 30.0,
                                       "one SQL statement waits at most this (not an ingest transaction)")
    read_urls: str | None = setting("KB_DATABASE_READ_URLS", None,
                                    "comma-separated Postgres streaming replicas for the query path's reads "
                                    "(round robin; down, lagging or read-write ones are skipped; the primary "
                                    "serves when none is healthy)")
    read_max_lag_s: float = setting("KB_DATABASE_READ_MAX_LAG_S", 10.0,
                                    "a replica that has not replayed what the primary wrote this long ago is skipped")
    read_check_s: float = setting("KB_DATABASE_READ_CHECK_S", 5.0, "replica health check interval (background)")
    vector_type: str = setting("KB_VECTOR_TYPE", "vector",
                               "`vector` (float32) or `halfvec` (float16: half the vector storage and HNSW "
                               "index); a database storing the other type is converted at start")

    @property
    def replica_urls(self) -> tuple[str, ...]:
        """``KB_DATABASE_READ_URLS`` split on commas."""
        return tuple(u.strip() for u in (self.read_urls or "").split(",") if u.strip())


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None = setting("KB_LLM_BASE_URL", None,
                                   "OpenAI-compatible endpoint; with `KB_LLM_API_KEY` unset too → offline provider")
    model: str = setting("KB_LLM_MODEL", "gpt-4o-mini", "model name sent to the endpoint")
    api_key: str | None = setting("KB_LLM_API_KEY", None, "bearer key of the endpoint (masked in `kb config`)",
                                  secret=True)
    timeout_s: float = setting("KB_LLM_TIMEOUT_S", 60.0, "per-call timeout")
    max_retries: int = setting("KB_LLM_MAX_RETRIES", 3, "retries with backoff and jitter on 429, 5xx and timeouts")
    concurrency: int = setting("KB_LLM_CONCURRENCY", 8, "parallel LLM calls")
    cache: bool = setting("KB_LLM_CACHE", True, "cache responses in Postgres by (model, prompt hash)")

    @property
    def offline(self) -> bool:
        return self.base_url is None and self.api_key is None


@dataclass(frozen=True)
class EmbeddingSettings:
    model: str = setting("KB_EMBEDDING_MODEL", "auto",
                         "`auto`: the bundled model the database's vectors come from, and for a new database "
                         "`all-MiniLM-L6-v2-onnx-int8-smooth` (see ONNX embeddings); or a bundled model by name: "
                         "`all-MiniLM-L6-v2` (run per `KB_EMBEDDING_RUNTIME`), `all-MiniLM-L6-v2-onnx`, "
                         "`all-MiniLM-L6-v2-onnx-int8`; a local sentence-transformers path; `hash:384` (fast "
                         "hashing, for tests/benchmarks); with `KB_EMBEDDING_BASE_URL`, the model name the server "
                         "knows (`auto`: the one the database records)")
    runtime: Literal["onnx", "torch"] = setting("KB_EMBEDDING_RUNTIME", "onnx",
                           "how `all-MiniLM-L6-v2` (by that name) runs: `onnx` (onnxruntime, fp32: torch's vectors to cosine "
                           "1 − 1e-6, about 1.6× faster; exported once from the bundled weights into "
                           "`KB_MODEL_DIR`; falls back to torch when it cannot be) or `torch` (sentence-transformers)")
    model_dir: Path | None = setting("KB_MODEL_DIR", None,
                                     "where the exported ONNX embedders are kept; unset → `KB_DATA_DIR/models`")
    batch_size: int = setting("KB_EMBEDDING_BATCH", 64, "texts per embedding batch (local model or request)")
    threads: int | None = setting("KB_EMBEDDING_THREADS", None,
                                  "threads of the local embedding model (torch intra-op; the ONNX models run "
                                  "this many texts at once, one thread each); unset or 0 → the CPU cores the "
                                  "process may use (its affinity, capped by a container's CPU quota)",
                                  normalize=lambda v: v or None)
    rerank_model: str | None = setting("KB_RERANK_MODEL", None,
                                       "local cross-encoder path/name; unset → rerank skipped (noted in the trace)")
    base_url: str | None = setting("KB_EMBEDDING_BASE_URL", None,
                                   "an OpenAI-compatible `/embeddings` endpoint; unset → the local model "
                                   "(see Remote embeddings)")
    api_key: str | None = setting("KB_EMBEDDING_API_KEY", None,
                                  "bearer key of the embeddings endpoint (masked in `kb config`)", secret=True)
    dimensions: int | None = setting("KB_EMBEDDING_DIMENSIONS", None,
                                     "vector size asked of the endpoint and expected in every reply; "
                                     "unset → probed once at start", normalize=lambda v: v or None)
    timeout_s: float = setting("KB_EMBEDDING_TIMEOUT_S", 30.0, "per-request timeout of the embeddings endpoint")
    max_retries: int = setting("KB_EMBEDDING_MAX_RETRIES", 3,
                               "embeddings endpoint: retries with backoff on 429, 5xx and timeouts")


@dataclass(frozen=True)
class RetrievalSettings:
    dense_weight: float = setting("KB_DENSE_WEIGHT", 0.5, "in-node fusion: dense weight (spec 001)")
    bm25_weight: float = setting("KB_BM25_WEIGHT", 0.5, "in-node fusion: BM25 weight (spec 001)")
    rank_dense_weight: float = setting(
        "KB_RANK_DENSE_WEIGHT", 0.9,
        "dense share when ranking chunks across nodes and documents, the rest BM25 (FinanceBench "
        "page_recall@10: 0.5 → 0.43, 0.75 → 0.44, 0.9 → 0.48, 1.0 → 0.50; financial tables defeat BM25)")
    semantic_top_k: int = setting("KB_SEMANTIC_TOP_K", 60, "chunk hits behind DocScore")
    evidence_tokens: int = setting(
        "KB_EVIDENCE_TOKENS", 2000,
        "evidence handed to synthesis, in tokens: each ranked chunk grows into a passage (its statement page "
        "whole, its table's header, its neighbouring chunks) until this is spent; 0 = the chunks alone")
    hnsw_ef_search: int = setting("KB_HNSW_EF_SEARCH", 100, "HNSW search breadth")
    max_nodes_per_doc: int = setting("KB_MAX_NODES_PER_DOC", 4, "tree search: nodes picked per document")
    doc_concurrency: int = setting("KB_DOC_CONCURRENCY", 4, "documents tree-searched in parallel")
    doc_cache_mb: int = setting("KB_DOC_CACHE_MB", 256,
                                "chunks and vectors of recently asked documents kept per server process (a query's "
                                "cosines and in-node candidates computed from them, not read again); 0: none kept")
    tree_prompt_tokens: int = setting("KB_TREE_PROMPT_TOKENS", 12000,
                                      "LLM tree search: above this a tree is searched top-down, one level at a time")
    description_shortlist: int = setting("KB_DESCRIPTION_SHORTLIST", 50,
                                         "description routing: documents shortlisted by description similarity (shown to the LLM)")
    max_cross_refs: int = setting("KB_MAX_CROSS_REFS", 3, "cross-references followed per question")
    max_iterations: int = setting("KB_MAX_ITERATIONS", 2,
                                  "LLM mode: retrieval rounds, a sufficiency judgement between two "
                                  "(1 = one pass; offline: always one)", normalize=lambda v: max(1, v))
    strict_figures: bool = setting(
        "KB_STRICT_FIGURES", False,
        "an LLM answer's sentence stating a figure that its cited evidence does not state is dropped (always "
        "flagged in the trace as unsupported_figures)")


@dataclass(frozen=True)
class IngestSettings:
    root: Path = setting("KB_INGEST_ROOT", Path("."), "admin ingest paths must resolve inside it")
    toc_check_page_num: int = setting("KB_TOC_CHECK_PAGE_NUM", 20, "PageIndex: pages searched for a printed TOC")
    max_page_num_each_node: int = setting("KB_MAX_PAGE_NUM_EACH_NODE", 10,
                                          "PageIndex: a larger node is split into children")
    max_token_num_each_node: int = setting("KB_MAX_TOKEN_NUM_EACH_NODE", 20000,
                                           "PageIndex: a node with more tokens is split into children")
    min_node_token: int = setting("KB_MIN_NODE_TOKEN", 40, "Markdown thinning: a section whose whole subtree has fewer tokens absorbs its children")
    summary_token_threshold: int = setting("KB_SUMMARY_TOKEN_THRESHOLD", 200,
                                           "node text shorter than this is its own summary")
    chunk_tokens: int = setting("KB_CHUNK_TOKENS", 160,
                                "chunk size in tokens (the embedder reads about 200; measured: README, Benchmarks)")
    chunk_overlap_tokens: int = setting("KB_CHUNK_OVERLAP_TOKENS", 32, "sliding-window overlap between chunks")
    defer_vector_index: bool = setting("KB_INGEST_DEFER_INDEX", True,
                                       "a job adding more chunks than are stored builds the vector index once at "
                                       "its end instead of inserting each chunk into it")
    chunk_page_aligned: bool = setting("KB_CHUNK_PAGE_ALIGNED", True,
                                       "PDF: every page is chunked on its own (no chunk crosses a page break, "
                                       "so a chunk cites one page)")
    min_chunk_chars: int = setting("KB_MIN_CHUNK_CHARS", 20, "shorter chunks are dropped")
    workers: int = setting("KB_INGEST_WORKERS", factory=_default_workers, shown="min(2, CPUs)",
                           doc="parser processes (0: parse in the worker process)")
    run_worker: bool = setting("KB_RUN_WORKER", True, "the API process also runs one ingest worker")
    nice: int = setting("KB_INGEST_NICE", 10,
                        "CPU priority of ingest below queries (0-19 nice steps): the parser processes and the "
                        "threads embedding ingested text take only what queries leave; 0: the same priority",
                        normalize=lambda v: _in_range("KB_INGEST_NICE", v, 0, 19))
    cpu_cores: int | None = setting("KB_CPU_CORES", None,
                                    "cores the heavy work of every `kb` process on this machine shares: a text "
                                    "through the embedding model, a file's parse, tree, chunking each holds one, and a "
                                    "process answering questions keeps one free of them (README: Sharing the cores); unset "
                                    "or 0 → the cores this process may use (affinity, container CPU quota)",
                                    normalize=lambda v: _in_range("KB_CPU_CORES", v, 1, 4096) if v else None)
    cpu_dir: Path | None = setting("KB_CPU_DIR", None,
                                   "folder of that budget's lock files, shared by the processes that share the "
                                   "cores; unset → `<tmp>/kb-cpu-<uid>`")
    job_stale_s: int = setting("KB_JOB_STALE_S", 120,
                               "a claimed file with no heartbeat for this long is resumed "
                               "(a file that kills its worker 3 times is failed)")
    max_upload_mb: int = setting("KB_MAX_UPLOAD_MB", 200, "body limit of `POST /kb/admin/documents`")
    max_file_mb: int = setting("KB_MAX_FILE_MB", 200,
                               "a file larger than this (or a `.docx` that unpacks to more) fails alone with that "
                               "reason; checked before the file is read")
    ocr: bool = setting("KB_OCR", True, "read PDF pages without a text layer (scans) by OCR when Tesseract's "
                        "language data is installed (README: Scanned PDFs); false: leave them empty, said per document")
    ocr_languages: str = setting("KB_OCR_LANGUAGES", "eng+chi_sim",
                                 "Tesseract languages for OCR, `+`-separated (those installed are used)")
    ocr_dpi: int = setting("KB_OCR_DPI", 300, "resolution a scanned page is read at",
                           normalize=lambda v: _in_range("KB_OCR_DPI", v, 72, 600))
    max_pages: int = setting("KB_MAX_PAGES", 5000, "a PDF with more pages fails alone with that reason")
    max_chunks: int = setting("KB_MAX_CHUNKS_PER_FILE", 50_000, "a file yielding more chunks fails alone with that reason")
    file_timeout_s: float = setting("KB_FILE_TIMEOUT_S", 3600.0,
                                    "one file's ingest; beyond it the file fails with that reason and its parser "
                                    "process is killed")


@dataclass(frozen=True)
class ServerSettings:
    host: str = setting("KB_HOST", "127.0.0.1", "bind address")
    port: int = setting("KB_PORT", 8000, "bind port")
    admin_token: str | None = setting("KB_ADMIN_TOKEN", None, "bearer token of the admin endpoints (see Auth)",
                                      secret=True)
    api_token: str | None = setting("KB_API_TOKEN", None, "bearer token of the read endpoints, `/schema`, `/metrics` and `/mcp` (see Auth)",
                                    secret=True)
    log_format: str = setting("KB_LOG_FORMAT", "console", "`console`, or `json` for JSON lines (request lines `http.request` at info in JSON, at debug on the console)")
    log_level: str = setting("KB_LOG_LEVEL", "info", "log level")
    max_connections: int = setting("KB_MAX_CONNECTIONS", 1000,
                                   "`kb serve`: open connections and running requests beyond this get 503")
    header_timeout_s: float = setting("KB_HEADER_TIMEOUT_S", 10.0,
                                      "`kb serve`: request headers must arrive within this time")
    max_header_kb: int = setting("KB_MAX_HEADER_KB", 64, "`kb serve`: request line and headers together at most this")
    max_json_kb: int = setting("KB_MAX_JSON_KB", 1024,
                               "body limit of every JSON endpoint (uploads: `KB_MAX_UPLOAD_MB`)")
    body_timeout_s: float = setting("KB_BODY_TIMEOUT_S", 30.0,
                                    "a request body that pauses this long (or a JSON body not complete within "
                                    "it) gets a 408 and its connection is closed")
    query_concurrency: int = setting("KB_QUERY_CONCURRENCY", 0,
                                     "questions answered at once per server process, the rest wait their turn in "
                                     "order (a heavy question then does not slow every other); 0: 4 offline, 32 "
                                     "with an LLM (its calls wait on the network)")
    warmup_s: float = setting("KB_WARMUP_S", 10.0,
                              "at start, before it is ready: the server loads its collections' documents (chunks, "
                              "vectors and trees, up to `KB_DOC_CACHE_MB`), their chunks' token counts and the "
                              "measure names' vectors for at most this long; 0: not at all")
    query_queue_s: float = setting("KB_QUERY_QUEUE_S", 30.0,
                                   "a question that waited this long for its turn gets a 503 \"Service overloaded\" "
                                   "with Retry-After (0: no limit)")
    send_timeout_s: float = setting("KB_SEND_TIMEOUT_S", 60.0,
                                    "`kb serve`: a client that reads none of a response for this long (its socket "
                                    "buffer full) is dropped and its connection closed (0: never)")
    max_client_connections: int = setting("KB_MAX_CLIENT_CONNECTIONS", 64,
                                          "`kb serve`: open connections from one client address; beyond it "
                                          "a 503 (0: no cap; behind a proxy every client is the proxy)")
    allowed_hosts: str = setting("KB_ALLOWED_HOSTS", "",
                                 "comma-separated host names a request's `Host` may name besides IP addresses, "
                                 "`localhost` and `KB_HOST`; `*`: any (see Security)")
    page_cache_mb: int = setting("KB_PAGE_CACHE_MB", 512,
                                 "rendered page images kept on disk; beyond it the least recently used go")
    lines_cache_mb: int = setting("KB_LINES_CACHE_MB", 64,
                                  "parsed lines of text sources kept in memory for `/kb/documents/{id}/lines`")


@dataclass(frozen=True)
class Settings:
    database: DatabaseSettings
    llm: LLMSettings
    embedding: EmbeddingSettings
    retrieval: RetrievalSettings
    ingest: IngestSettings
    server: ServerSettings

    def masked(self) -> dict[str, dict[str, Any]]:
        """Effective settings as a dict with secrets and URL passwords masked."""
        out: dict[str, dict[str, Any]] = {}
        for group_field in fields(self):
            group_obj = getattr(self, group_field.name)
            group = asdict(group_obj)
            for f in fields(group_obj):
                value = group[f.name]
                if f.metadata["secret"] and value:
                    group[f.name] = "***"
                elif isinstance(value, Path):
                    group[f.name] = str(value)
                elif f.name == "url" and value and "@" in str(value):
                    group[f.name] = _mask_url(str(value))
            out[group_field.name] = group
        return out


    def env_lines(self) -> list[str]:
        """The effective settings as ``variable=value`` lines (secrets masked; unset values empty)."""
        masked = self.masked()
        lines = []
        for d in setting_docs():
            value = masked[d.group][d.name]
            shown = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
            lines.append(f"{d.env}={shown}")
        return lines


def _mask_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def _base_type(annotation: Any) -> type:
    """``int`` for ``int`` and ``int | None``."""
    if isinstance(annotation, types.UnionType):
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def _parse(name: str, kind: type, raw: str) -> Any:
    if typing.get_origin(kind) is Literal:  # one of a few words
        allowed = typing.get_args(kind)
        if raw.strip().lower() not in allowed:
            raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {raw!r}")
        return raw.strip().lower()
    if kind is bool:
        return raw.lower() in {"1", "true", "yes", "on"}
    if kind is int:
        try:
            return int(raw)
        except ValueError as exc:
            raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc
    if kind is float:
        try:
            return float(raw)
        except ValueError as exc:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
    return kind(raw)


def _default(f: Field[Any]) -> Any:
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


def _read_group(cls: type[Any]) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        meta = f.metadata
        kind = _base_type(hints[f.name])
        raw = _env(meta["env"])
        value = _default(f) if raw is None else _parse(meta["env"], kind, raw)
        if kind is Path and value is not None:
            value = Path(value).expanduser().resolve()
        if meta["normalize"] is not None:
            value = meta["normalize"](value)
        values[f.name] = value
    return cls(**values)


@functools.cache
def get_settings() -> Settings:
    """Read the environment once."""
    return Settings(**{name: _read_group(cls) for name, cls in typing.get_type_hints(Settings).items()})


@dataclass(frozen=True)
class SettingDoc:
    """One setting as documented: variable, shown default, one-line meaning, group and field name."""

    env: str
    default: str
    doc: str
    group: str
    name: str
    secret: bool


def _shown(f: Field[Any]) -> str:
    if f.metadata["shown"] is not None:
        return f.metadata["shown"]
    value = _default(f)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return f"`{value}`"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def setting_docs() -> Iterator[SettingDoc]:
    """Every setting in declaration order."""
    for group, cls in typing.get_type_hints(Settings).items():
        for f in fields(cls):
            yield SettingDoc(env=f.metadata["env"], default=_shown(f), doc=f.metadata["doc"],
                             group=group, name=f.name, secret=f.metadata["secret"])


def settings_table() -> str:
    """The README's configuration table (Markdown), one row per variable."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    rows += [f"| `{d.env}` | {d.default} | {d.doc} |" for d in setting_docs()]
    return "\n".join(rows) + "\n"
