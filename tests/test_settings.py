"""Settings are declared once (kb/core/settings.py): every variable is read from the environment by its declaration,
documented in the README table rendered from it, printed by `kb config`, and KB_EMBEDDING_BATCH reaches the
embedder."""

from __future__ import annotations

import re
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kb.cli import main
from kb.core.errors import ConfigError
from kb.core.settings import Settings, get_settings, setting_docs, settings_table
from tests.conftest import SetEnv, ingest

ROOT = Path(__file__).resolve().parent.parent


def test_readme_table_is_the_declarations() -> None:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- settings-table: [^>]*-->\n(.*?)<!-- /settings-table -->", readme, re.S)
    assert found, "README has no generated settings table"
    assert found.group(1) == settings_table(), "README table is stale: paste `kb config --format markdown`"


def test_declarations_are_complete_and_unique() -> None:
    docs = list(setting_docs())
    envs = [d.env for d in docs]
    assert len(envs) == len(set(envs)), "a variable is declared twice"
    assert all(re.fullmatch(r"KB_[A-Z0-9_]+", e) for e in envs)
    assert all(d.doc and "\n" not in d.doc for d in docs), [d.env for d in docs if not d.doc]
    assert {d.env for d in docs if d.secret} == {"KB_LLM_API_KEY", "KB_EMBEDDING_API_KEY", "KB_ADMIN_TOKEN",
                                                 "KB_API_TOKEN"}
    # every KB_* name the product's code uses is a declared setting
    used: set[str] = set()
    for package in ("kb", "ingest", "router"):
        for path in (ROOT / package).rglob("*.py"):
            used |= set(re.findall(r"\bKB_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    assert used - set(envs) == set(), "undeclared variables in the code"


RANGED: dict[str, tuple[str, Any]] = {"KB_OCR_DPI": ("150", 150)}
"""Settings whose values have bounds the generic sample (7) is outside of: a value inside them."""


def _sample(kind: Any, default: Any, tmp_path: Path) -> tuple[str, Any]:
    """A value to put in the environment for a field of this type, and what the field must then hold."""
    if typing.get_origin(kind) is typing.Literal:  # one of a few words: the last (not the default)
        return typing.get_args(kind)[-1], typing.get_args(kind)[-1]
    base = next((a for a in typing.get_args(kind) if a is not type(None)), kind)
    if base is bool:
        return ("false", False) if default else ("true", True)
    if base is int:
        return "7", 7
    if base is float:
        return "0.25", 0.25
    if base is Path:
        return str(tmp_path / "elsewhere"), (tmp_path / "elsewhere").resolve()
    return "some-value", "some-value"


def test_every_setting_is_read_from_its_variable(kb_env: dict[str, str], set_env: SetEnv, tmp_path: Path) -> None:
    expected: dict[tuple[str, str], Any] = {}
    env: dict[str, str] = {}
    hints = typing.get_type_hints(Settings)
    for group, cls in hints.items():
        field_types = typing.get_type_hints(cls)
        for f in fields(cls):
            raw, value = RANGED.get(f.metadata["env"]) or _sample(field_types[f.name], f.default, tmp_path)
            env[f.metadata["env"]] = raw
            expected[(group, f.name)] = value
    settings = set_env(**env)
    for (group, name), value in expected.items():
        assert getattr(getattr(settings, group), name) == value, (group, name)


def test_bad_numbers_name_their_variable(kb_env: dict[str, str], set_env: SetEnv) -> None:
    with pytest.raises(ConfigError, match="KB_RANK_DENSE_WEIGHT must be a number"):
        set_env(KB_RANK_DENSE_WEIGHT="high")
    set_env(KB_RANK_DENSE_WEIGHT="0.5", KB_EMBEDDING_DIMENSIONS="0", KB_MAX_ITERATIONS="0")
    s = get_settings()
    assert s.embedding.dimensions is None and s.retrieval.max_iterations == 1  # 0 means unset / at least one


def test_kb_config_formats(kb_env: dict[str, str], set_env: SetEnv, capsys: pytest.CaptureFixture[str]) -> None:
    set_env(KB_ADMIN_TOKEN="adm-secret-1", KB_PORT="8123", KB_DATABASE_URL="postgresql://u:pw@db/kb")
    assert main(["config", "--format", "env"]) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert set(lines) == {d.env for d in setting_docs()}
    assert lines["KB_PORT"] == "8123" and lines["KB_ADMIN_TOKEN"] == "***" and lines["KB_API_TOKEN"] == ""
    assert lines["KB_DATABASE_URL"] == "postgresql://u:***@db/kb" and lines["KB_LLM_CACHE"] == "true"
    assert main(["config", "--format", "markdown"]) == 0
    assert capsys.readouterr().out == settings_table()
    assert main(["config", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"port": 8123' in out and "adm-secret-1" not in out and "pw@" not in out
    assert main(["config"]) == 0  # for people: every variable by name, with its value and meaning
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("KB_")}
    assert set(rows) == {d.env for d in setting_docs()}
    assert rows["KB_PORT"].split()[1] == "8123" and "  # " in rows["KB_PORT"]
    assert rows["KB_ADMIN_TOKEN"].split()[1] == "***" and rows["KB_API_TOKEN"].split()[1] == "(unset)"


class RecordingEmbedder:
    """Hash vectors; records how many texts each call carried."""

    def __init__(self) -> None:
        from kb.core.providers.embed import HashEmbedder

        self.inner = HashEmbedder(384)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.sizes: list[int] = []

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.sizes.append(len(texts))
        return self.inner.embed_batch(texts)


async def test_embedding_batch_setting_reaches_the_embedder(db_env: str, set_env: SetEnv, tmp_path: Path) -> None:
    """KB_EMBEDDING_BATCH=50: ingest sends the embedder batches of 50 (a wrapper once capped them at 32)."""
    from kb.runtime import open_runtime

    settings = set_env(KB_EMBEDDING_BATCH="50", KB_EMBEDDING_MODEL="hash:384")
    folder = tmp_path / "docs"
    folder.mkdir()
    sections = "\n\n".join(f"## Section {i}\n\n" + " ".join(f"Segment {i} item {j} grew by {i * j} units."
                                                             for j in range(40)) for i in range(60))
    (folder / "long.md").write_text("# Long report\n\n" + sections + "\n")
    embedder = RecordingEmbedder()
    rt = await open_runtime(settings, embedder=embedder)
    try:
        job = await ingest(rt, folder)
        assert job.counts == {"ok": 1}, [(i.name, i.error) for i in job.items]
        chunks = await rt.pool.fetchval("SELECT count(*) FROM chunks")
    finally:
        await rt.close()
    assert chunks > 100
    assert max(embedder.sizes) == 50, embedder.sizes
