-- Core schema: collections, documents, tree nodes, embedded chunks, ingest jobs, LLM usage.
-- {{EMBEDDING_DIM}} is replaced by the migrator with the configured embedder's dimension.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE collections (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO collections (name, description) VALUES ('default', 'Default knowledge base');

CREATE TABLE documents (
    id             bigserial PRIMARY KEY,
    collection_id  bigint NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    name           text NOT NULL,
    source_path    text NOT NULL DEFAULT '',
    sha256         text NOT NULL,
    file_type      text NOT NULL,
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    title          text NOT NULL DEFAULT '',
    description    text NOT NULL DEFAULT '',
    description_embedding vector({{EMBEDDING_DIM}}),
    page_count     integer NOT NULL DEFAULT 0,
    tree_mode      text NOT NULL DEFAULT '',
    node_count     integer NOT NULL DEFAULT 0,
    chunk_count    integer NOT NULL DEFAULT 0,
    warnings       text[] NOT NULL DEFAULT '{}',
    status         text NOT NULL DEFAULT 'ready',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (collection_id, name)
);
CREATE INDEX documents_collection_idx ON documents (collection_id);
CREATE INDEX documents_sha_idx ON documents (collection_id, sha256);
CREATE INDEX documents_metadata_gin ON documents USING gin (metadata jsonb_path_ops);

CREATE TABLE nodes (
    document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    node_id     text NOT NULL,
    parent_id   text,
    ordinal     integer NOT NULL,
    level       integer NOT NULL,
    title       text NOT NULL,
    start_index integer NOT NULL,
    end_index   integer NOT NULL,
    unit        text NOT NULL DEFAULT 'page',
    is_leaf     boolean NOT NULL,
    summary     text NOT NULL DEFAULT '',
    text        text NOT NULL DEFAULT '',
    path        text[] NOT NULL DEFAULT '{}',
    embedding   vector({{EMBEDDING_DIM}}),
    PRIMARY KEY (document_id, node_id)
);

CREATE TABLE chunks (
    id          bigserial PRIMARY KEY,
    document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    collection_id bigint NOT NULL,
    node_id     text NOT NULL,
    ordinal     integer NOT NULL,
    text        text NOT NULL,
    page        integer,
    token_count integer NOT NULL,
    heading_path text NOT NULL DEFAULT '',
    embedding   vector({{EMBEDDING_DIM}}) NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english', heading_path || ' ' || text)) STORED,
    FOREIGN KEY (document_id, node_id) REFERENCES nodes(document_id, node_id) ON DELETE CASCADE
);
CREATE INDEX chunks_doc_node_idx ON chunks (document_id, node_id);
CREATE INDEX chunks_collection_idx ON chunks (collection_id);
CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);
CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops);

-- Embedding cache keyed by (model, sha256(text)): re-ingest of unchanged text costs nothing.
CREATE TABLE embedding_cache (
    model     text NOT NULL,
    sha256    text NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (model, sha256)
);

CREATE TABLE ingest_jobs (
    id            bigserial PRIMARY KEY,
    collection_id bigint NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    root_path     text NOT NULL,
    recursive     boolean NOT NULL DEFAULT false,
    metadata_path text,
    status        text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    error         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz
);

CREATE TABLE ingest_job_items (
    id          bigserial PRIMARY KEY,
    job_id      bigint NOT NULL REFERENCES ingest_jobs(id) ON DELETE CASCADE,
    path        text NOT NULL,
    name        text NOT NULL,
    status      text NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'ok', 'skipped', 'failed', 'unsupported')),
    error       text,
    document_id bigint,
    pages       integer NOT NULL DEFAULT 0,
    chunks      integer NOT NULL DEFAULT 0,
    seconds     double precision,
    worker      text,
    attempts    integer NOT NULL DEFAULT 0,
    heartbeat_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    UNIQUE (job_id, path)
);
CREATE INDEX ingest_job_items_claim_idx ON ingest_job_items (status, job_id);

CREATE TABLE llm_calls (
    id                bigserial PRIMARY KEY,
    purpose           text NOT NULL,
    model             text NOT NULL,
    prompt_hash       text NOT NULL,
    prompt_tokens     integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    duration_ms       double precision NOT NULL DEFAULT 0,
    cached            boolean NOT NULL DEFAULT false,
    ok                boolean NOT NULL DEFAULT true,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX llm_calls_created_idx ON llm_calls (created_at);

CREATE TABLE llm_cache (
    model       text NOT NULL,
    prompt_hash text NOT NULL,
    response    text NOT NULL,
    prompt_tokens     integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, prompt_hash)
);
