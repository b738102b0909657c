"""docker-compose.yml (issue 26 item 5): the services and their wiring, read as Compose reads the file.

No Docker daemon runs in the test environment, so nothing is started here: this checks that the primary is
set up to stream WAL, that the replica copies it with pg_basebackup -R as the replication role the primary's
init script creates, that the API replicas read from the replica and write to the primary, and that every
``KB_*`` variable the file sets is a real setting."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb.core.settings import setting_docs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _mounted(service: dict[str, Any], target: str) -> Path:
    """The repository file mounted at ``target`` in a service."""
    for volume in service["volumes"]:
        source, _, rest = volume.partition(":")
        if rest.split(":")[0] == target:
            return ROOT / source
    raise AssertionError(f"nothing mounted at {target}")


def test_the_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"db", "db-replica", "api", "worker"}
    assert services["api"]["deploy"]["replicas"] == 2 and services["worker"]["deploy"]["replicas"] == 2
    assert services["api"]["ports"] == ["8000-8001:8000"]  # one host port per API replica
    assert {"pgdata", "pgdata-replica"} <= set(compose["volumes"])
    assert services["db"]["image"] == services["db-replica"]["image"]  # the same Postgres + pgvector


def test_the_primary_streams_wal_to_a_replication_role(compose: dict[str, Any]) -> None:
    db = compose["services"]["db"]
    command = " ".join(db["command"])
    assert "wal_level=replica" in command and re.search(r"max_wal_senders=[1-9]", command)
    init = _mounted(db, "/docker-entrypoint-initdb.d/10-replication.sh").read_text()
    assert "CREATE ROLE replicator WITH REPLICATION LOGIN" in init
    assert "host replication replicator all scram-sha-256" in init and "pg_hba.conf" in init
    assert "KB_REPLICATION_PASSWORD" in init and "KB_REPLICATION_PASSWORD" in db["environment"]


def test_the_replica_copies_the_primary_and_runs_as_a_standby(compose: dict[str, Any]) -> None:
    replica = compose["services"]["db-replica"]
    script_path = _mounted(replica, "/usr/local/bin/replica-start.sh")
    assert replica["entrypoint"] == ["sh", "/usr/local/bin/replica-start.sh"]
    script = script_path.read_text()
    basebackup = [line for line in script.splitlines() if line.strip().startswith(("pg_basebackup", "if ! pg_basebackup"))]
    assert basebackup and all(" -h db " in b and " -U replicator " in b and " -R " in b for b in basebackup)
    assert "exec postgres" in script and "hot_standby=on" in script
    assert replica["user"] == "postgres" and replica["depends_on"]["db"]["condition"] == "service_healthy"
    assert replica["environment"]["PGPASSWORD"] == compose["services"]["db"]["environment"]["KB_REPLICATION_PASSWORD"]
    for path in (script_path, _mounted(compose["services"]["db"], "/docker-entrypoint-initdb.d/10-replication.sh")):
        assert subprocess.run(["sh", "-n", str(path)], check=False).returncode == 0, path


def test_api_reads_from_the_replica_and_writes_to_the_primary(compose: dict[str, Any]) -> None:
    api, worker = compose["services"]["api"], compose["services"]["worker"]
    assert "@db:5432/kb" in api["environment"]["KB_DATABASE_URL"]
    assert "@db-replica:5432/kb" in api["environment"]["KB_DATABASE_READ_URLS"]
    assert api["environment"]["KB_RUN_WORKER"] == "false" and "kb serve" in api["command"]
    assert "@db:5432/kb" in worker["environment"]["KB_DATABASE_URL"]
    assert "KB_DATABASE_READ_URLS" not in worker["environment"] and "kb worker" in worker["command"]


def test_every_kb_variable_is_a_setting(compose: dict[str, Any]) -> None:
    known = {d.env for d in setting_docs()}
    used = {k for s in compose["services"].values() for k in s.get("environment", {}) if k.startswith("KB_")}
    assert used - {"KB_REPLICATION_PASSWORD"} <= known  # that one is the primary's init script's
    assert {"KB_DATABASE_URL", "KB_DATABASE_READ_URLS", "KB_RUN_WORKER"} <= used


def _compose_command() -> list[str] | None:
    """``docker compose`` (the plugin) or ``docker-compose`` (the standalone command), whichever is here."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True,
                                                 check=False).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.mark.skipif(_compose_command() is None, reason="neither docker compose nor docker-compose is installed")
def test_compose_config_accepts_the_file() -> None:
    out = subprocess.run([*(_compose_command() or []), "config", "--quiet"], cwd=ROOT, capture_output=True,
                         text=True, env={"KB_ADMIN_TOKEN": "x", "PATH": "/usr/local/bin:/usr/bin:/bin"}, check=False)
    assert out.returncode == 0, out.stderr
