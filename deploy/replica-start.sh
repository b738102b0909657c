#!/bin/sh
# The read replica's entrypoint (runs as the postgres user): on first start, copy the primary with
# pg_basebackup -R (which writes standby.signal and primary_conninfo) through a physical replication slot,
# so the primary keeps the WAL the replica has not replayed; then run Postgres as a hot standby.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h db -p 5432 -q; do echo "replica: waiting for the primary"; sleep 2; done
  rm -rf "${PGDATA:?}"/*
  if ! pg_basebackup -h db -p 5432 -U replicator -D "$PGDATA" -R -X stream -C -S kb_replica; then
    echo "replica: creating slot kb_replica failed (made by an earlier replica?): copying through it as it is"
    rm -rf "${PGDATA:?}"/*
    pg_basebackup -h db -p 5432 -U replicator -D "$PGDATA" -R -X stream -S kb_replica
  fi
  chmod 700 "$PGDATA"
fi
exec postgres -c hot_standby=on -c shared_buffers=1GB
