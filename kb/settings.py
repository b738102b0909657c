"""All configuration, read once from ``KB_*`` environment variables.

Groups: database, llm, embedding, retrieval, ingest (tree building), server.
``get_settings()`` is cached; tests call ``get_settings.cache_clear()`` after
changing the environment.
"""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kb.errors import ConfigError


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


def _int(name: str, default: int) -> int:
    raw = _env(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc


def _float(name: str, default: float) -> float:
    raw = _env(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


def _bool(name: str, default: bool) -> bool:
    raw = _env(name)
    if raw is None:
        return default
    return raw.lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class DatabaseSettings:
    url: str | None  # KB_DATABASE_URL; None → embedded server in data_dir
    data_dir: Path  # KB_DATA_DIR
    pool_min: int = 1
    pool_max: int = 10
    connect_timeout_s: float = 5.0  # KB_DB_CONNECT_TIMEOUT_S: a new connection (or a pool slot) waits at most this
    command_timeout_s: float = 30.0  # KB_DB_COMMAND_TIMEOUT_S: one SQL statement (not an ingest transaction)


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None  # KB_LLM_BASE_URL; None (and no key) → offline provider
    model: str
    api_key: str | None = field(repr=False)  # secret: never in a repr, a traceback or a log
    timeout_s: float
    max_retries: int
    concurrency: int
    cache: bool

    @property
    def offline(self) -> bool:
        return self.base_url is None and self.api_key is None


@dataclass(frozen=True)
class EmbeddingSettings:
    model: str  # "all-MiniLM-L6-v2" (bundled), "hash:<dim>" or a sentence-transformers path
    batch_size: int
    rerank_model: str | None  # cross-encoder name/path; None → rerank skipped
    base_url: str | None = None  # KB_EMBEDDING_BASE_URL: an OpenAI-compatible /embeddings endpoint
    api_key: str | None = field(default=None, repr=False)  # KB_EMBEDDING_API_KEY: secret, never in a repr
    dimensions: int | None = None  # KB_EMBEDDING_DIMENSIONS: requested (and expected) vector size
    timeout_s: float = 30.0  # KB_EMBEDDING_TIMEOUT_S
    max_retries: int = 3  # KB_EMBEDDING_MAX_RETRIES: 429, 5xx and timeouts, with backoff


@dataclass(frozen=True)
class RetrievalSettings:
    dense_weight: float
    bm25_weight: float
    rank_dense_weight: float  # cross-node chunk ranking: dense share (rest BM25)
    semantic_top_k: int  # chunk hits used by DocScore
    hnsw_ef_search: int
    max_nodes_per_doc: int
    doc_concurrency: int
    tree_prompt_tokens: int  # above this a tree is searched top-down
    description_shortlist: int
    max_cross_refs: int
    max_iterations: int = 2  # LLM mode: retrieval rounds with a sufficiency judgement between them (1: one pass)


@dataclass(frozen=True)
class IngestSettings:
    root: Path  # KB_INGEST_ROOT: admin ingest paths must resolve inside it
    toc_check_page_num: int
    max_page_num_each_node: int
    max_token_num_each_node: int
    min_node_token: int
    summary_token_threshold: int
    chunk_tokens: int
    chunk_overlap_tokens: int
    min_chunk_chars: int
    workers: int  # parser processes
    run_worker: bool  # the API process also runs one ingest worker
    job_stale_s: int  # a running item whose heartbeat is older is resumed
    max_upload_mb: int = 200  # POST /kb/admin/documents body limit
    max_file_mb: int = 200  # KB_MAX_FILE_MB: a file (or a .docx unpacked) larger than this fails with that reason
    max_pages: int = 5000  # KB_MAX_PAGES: a PDF with more pages fails with that reason
    max_chunks: int = 50_000  # KB_MAX_CHUNKS_PER_FILE: a file that yields more chunks fails with that reason
    file_timeout_s: float = 3600.0  # KB_FILE_TIMEOUT_S: one file's ingest; beyond it the file fails with this reason


@dataclass(frozen=True)
class ServerSettings:
    host: str
    port: int
    admin_token: str | None = field(repr=False)  # secrets: never in a repr, a traceback or a log
    api_token: str | None = field(repr=False)
    log_format: str  # "json" | "console"
    log_level: str
    max_connections: int = 1000  # KB_MAX_CONNECTIONS: open connections and requests; beyond it a 503
    header_timeout_s: float = 10.0  # KB_HEADER_TIMEOUT_S: a connection must send its request headers in this time
    max_header_kb: int = 64  # KB_MAX_HEADER_KB: request line and headers together
    max_json_kb: int = 1024  # KB_MAX_JSON_KB: body limit of every JSON endpoint (uploads: KB_MAX_UPLOAD_MB)


@dataclass(frozen=True)
class Settings:
    database: DatabaseSettings
    llm: LLMSettings
    embedding: EmbeddingSettings
    retrieval: RetrievalSettings
    ingest: IngestSettings
    server: ServerSettings
    _secret_names: tuple[str, ...] = field(default=("api_key", "admin_token", "api_token"), repr=False)

    def masked(self) -> dict[str, dict[str, Any]]:
        """Effective settings as a dict with secrets and URL passwords masked."""
        out: dict[str, dict[str, Any]] = {}
        for f in fields(self):
            if f.name.startswith("_"):
                continue
            group = asdict(getattr(self, f.name))
            for key, value in group.items():
                if key in self._secret_names and value:
                    group[key] = "***"
                elif isinstance(value, Path):
                    group[key] = str(value)
                elif key == "url" and value and "@" in str(value):
                    group[key] = _mask_url(str(value))
            out[f.name] = group
        return out


def _mask_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


@functools.cache
def get_settings() -> Settings:
    """Read the environment once."""
    data_dir = Path(_env("KB_DATA_DIR", "./.kb") or "./.kb").expanduser().resolve()
    return Settings(
        database=DatabaseSettings(
            url=_env("KB_DATABASE_URL"),
            data_dir=data_dir,
            pool_min=_int("KB_DB_POOL_MIN", 1),
            pool_max=_int("KB_DB_POOL_MAX", 10),
            connect_timeout_s=_float("KB_DB_CONNECT_TIMEOUT_S", 5.0),
            command_timeout_s=_float("KB_DB_COMMAND_TIMEOUT_S", 30.0),
        ),
        llm=LLMSettings(
            base_url=_env("KB_LLM_BASE_URL"),
            model=_env("KB_LLM_MODEL", "gpt-4o-mini") or "gpt-4o-mini",
            api_key=_env("KB_LLM_API_KEY"),
            timeout_s=_float("KB_LLM_TIMEOUT_S", 60.0),
            max_retries=_int("KB_LLM_MAX_RETRIES", 3),
            concurrency=_int("KB_LLM_CONCURRENCY", 8),
            cache=_bool("KB_LLM_CACHE", True),
        ),
        embedding=EmbeddingSettings(
            model=_env("KB_EMBEDDING_MODEL", "all-MiniLM-L6-v2") or "all-MiniLM-L6-v2",
            batch_size=_int("KB_EMBEDDING_BATCH", 64),
            rerank_model=_env("KB_RERANK_MODEL"),
            base_url=_env("KB_EMBEDDING_BASE_URL"),
            api_key=_env("KB_EMBEDDING_API_KEY"),
            dimensions=_int("KB_EMBEDDING_DIMENSIONS", 0) or None,
            timeout_s=_float("KB_EMBEDDING_TIMEOUT_S", 30.0),
            max_retries=_int("KB_EMBEDDING_MAX_RETRIES", 3),
        ),
        retrieval=RetrievalSettings(
            dense_weight=_float("KB_DENSE_WEIGHT", 0.5),
            bm25_weight=_float("KB_BM25_WEIGHT", 0.5),
            rank_dense_weight=_float("KB_RANK_DENSE_WEIGHT", 0.9),
            semantic_top_k=_int("KB_SEMANTIC_TOP_K", 60),
            hnsw_ef_search=_int("KB_HNSW_EF_SEARCH", 100),
            max_nodes_per_doc=_int("KB_MAX_NODES_PER_DOC", 4),
            doc_concurrency=_int("KB_DOC_CONCURRENCY", 4),
            tree_prompt_tokens=_int("KB_TREE_PROMPT_TOKENS", 12000),
            description_shortlist=_int("KB_DESCRIPTION_SHORTLIST", 50),
            max_cross_refs=_int("KB_MAX_CROSS_REFS", 3),
            max_iterations=max(1, _int("KB_MAX_ITERATIONS", 2)),
        ),
        ingest=IngestSettings(
            root=Path(_env("KB_INGEST_ROOT", ".") or ".").expanduser().resolve(),
            toc_check_page_num=_int("KB_TOC_CHECK_PAGE_NUM", 20),
            max_page_num_each_node=_int("KB_MAX_PAGE_NUM_EACH_NODE", 10),
            max_token_num_each_node=_int("KB_MAX_TOKEN_NUM_EACH_NODE", 20000),
            min_node_token=_int("KB_MIN_NODE_TOKEN", 40),
            summary_token_threshold=_int("KB_SUMMARY_TOKEN_THRESHOLD", 200),
            chunk_tokens=_int("KB_CHUNK_TOKENS", 160),
            chunk_overlap_tokens=_int("KB_CHUNK_OVERLAP_TOKENS", 32),
            min_chunk_chars=_int("KB_MIN_CHUNK_CHARS", 20),
            workers=_int("KB_INGEST_WORKERS", max(1, min(2, os.cpu_count() or 1))),
            run_worker=_bool("KB_RUN_WORKER", True),
            job_stale_s=_int("KB_JOB_STALE_S", 120),
            max_upload_mb=_int("KB_MAX_UPLOAD_MB", 200),
            max_file_mb=_int("KB_MAX_FILE_MB", 200),
            max_pages=_int("KB_MAX_PAGES", 5000),
            max_chunks=_int("KB_MAX_CHUNKS_PER_FILE", 50_000),
            file_timeout_s=_float("KB_FILE_TIMEOUT_S", 3600.0),
        ),
        server=ServerSettings(
            host=_env("KB_HOST", "127.0.0.1") or "127.0.0.1",
            port=_int("KB_PORT", 8000),
            admin_token=_env("KB_ADMIN_TOKEN"),
            api_token=_env("KB_API_TOKEN"),
            log_format=_env("KB_LOG_FORMAT", "console") or "console",
            log_level=_env("KB_LOG_LEVEL", "info") or "info",
            max_connections=_int("KB_MAX_CONNECTIONS", 1000),
            header_timeout_s=_float("KB_HEADER_TIMEOUT_S", 10.0),
            max_header_kb=_int("KB_MAX_HEADER_KB", 64),
            max_json_kb=_int("KB_MAX_JSON_KB", 1024),
        ),
    )
