-- Which embedder the stored vectors (chunks, nodes, document descriptions) come from: one row, written at the
-- first start (adopting the configured embedder when the vector columns have its dimension) and by
-- `kb reembed`, which also bumps the generation (a process started before it may no longer write vectors).
CREATE TABLE embedder_state (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    model_id   text NOT NULL,
    dimension  integer NOT NULL CHECK (dimension > 0),
    generation integer NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- `kb reembed` stages the new vectors here (any dimension) before swapping them in, in one transaction;
-- rows are keyed by the target embedder, so an interrupted run resumes where it stopped.
CREATE TABLE reembed_chunks (
    model_id  text NOT NULL,
    dimension integer NOT NULL,
    chunk_id  bigint NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (model_id, dimension, chunk_id)
);
CREATE TABLE reembed_nodes (
    model_id    text NOT NULL,
    dimension   integer NOT NULL,
    document_id bigint NOT NULL,
    node_id     text NOT NULL,
    embedding   vector NOT NULL,
    PRIMARY KEY (model_id, dimension, document_id, node_id)
);
CREATE TABLE reembed_documents (
    model_id    text NOT NULL,
    dimension   integer NOT NULL,
    document_id bigint NOT NULL,
    embedding   vector NOT NULL,
    PRIMARY KEY (model_id, dimension, document_id)
);
