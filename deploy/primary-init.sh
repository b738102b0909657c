#!/bin/sh
# Run once by the pgvector/pgvector image's entrypoint when the primary's data directory is created
# (/docker-entrypoint-initdb.d): a replication role for the read replica and the pg_hba line that lets it
# stream the WAL. The primary's own settings (wal_level=replica, max_wal_senders) are in docker-compose.yml.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v repl_password="$KB_REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'repl_password';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
