-- Document frequency of full-text lexemes per collection: IDF weights for routing and
-- full-text search (Postgres ts_rank has no IDF). Maintained by the document writer.
CREATE TABLE lexeme_df (
    collection_id bigint NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    lexeme        text NOT NULL,
    df            integer NOT NULL,
    PRIMARY KEY (collection_id, lexeme)
);

INSERT INTO lexeme_df (collection_id, lexeme, df)
SELECT d.collection_id, s.lx, count(*)
FROM documents d
CROSS JOIN LATERAL (
    SELECT DISTINCT unnest(tsvector_to_array(c.tsv)) AS lx FROM chunks c WHERE c.document_id = d.id
) s
GROUP BY d.collection_id, s.lx;
