"""The house's layering, checked on the source: imports point down only.

Top: ``kb.api``, ``kb.app``, ``kb.cli``, ``kb.serve``, ``kb.mcp_server``, ``kb.bench``, and ``kb.runtime`` (the
composition root). Middle: ``ingest`` and ``router`` (libraries). Bottom: the rest of ``kb`` (foundations).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("kb.api", "kb.app", "kb.cli", "kb.serve", "kb.mcp_server", "kb.bench", "kb.bench_cli", "kb.runtime")
MIDDLE = ("ingest", "router")
WEB = ("litestar", "kb.api", "kb.app", "kb.cli", "kb.serve", "uvicorn")
# kb.app is the ASGI application: only the CLI's serve command and the server entry name it
APP_USERS = ("kb.cli", "kb.serve")


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _sources() -> list[tuple[str, set[str]]]:
    files = [p for d in ("kb", "ingest", "router") for p in (ROOT / d).rglob("*.py")]
    return [(_module(p), _imports(p)) for p in sorted(files)]


SOURCES = _sources()


def test_the_tree_is_read() -> None:
    mods = {m for m, _ in SOURCES}
    assert {"kb.runtime", "kb.settings", "ingest.pipeline", "router.pipeline", "kb.api.query"} <= mods


@pytest.mark.parametrize(("module", "imports"), SOURCES, ids=[m for m, _ in SOURCES])
def test_imports_point_down(module: str, imports: set[str]) -> None:
    if _within(module, MIDDLE):
        bad = {i for i in imports if _within(i, WEB) or _within(i, TOP)}
        other = "router" if module.startswith("ingest") else "ingest"
        bad |= {i for i in imports if _within(i, (other,))}
        assert not bad, f"{module} (a library) imports {sorted(bad)}"
    elif not _within(module, TOP):  # a foundation
        bad = {i for i in imports if _within(i, MIDDLE) or _within(i, TOP) or _within(i, WEB)}
        assert not bad, f"{module} (a foundation) imports {sorted(bad)}"
    if not _within(module, APP_USERS):
        assert not {i for i in imports if _within(i, ("kb.app",))}, \
            f"{module} imports kb.app: get the pool, providers and pipeline from kb.runtime"


def test_the_query_path_stays_readable() -> None:
    """Issue 20's bounds: router functions take at most 6 parameters (two prompt/score builders excepted) and
    ``QueryPipeline`` fits on one screen (its stages are functions over the query state)."""
    wide, pipeline_lines = [], 0
    for path in sorted((ROOT / "router").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in {"self", "cls"}]
                if len(names) >= 7:
                    wide.append(f"{path.stem}.{node.name}")
            elif isinstance(node, ast.ClassDef) and node.name == "QueryPipeline":
                pipeline_lines = node.end_lineno - node.lineno + 1
    assert sorted(wide) == ["prompts.multi_synthesis_prompt", "retrieve.rank_across_nodes"]
    assert 0 < pipeline_lines <= 60
