"""The house's layering, checked on the source: imports point down only, and no module imports itself back.

The layers are the folders: ``kb/core/`` (foundations) at the bottom, ``ingest/`` and ``router/`` (libraries) in
the middle, the rest of ``kb/`` (application: API, UI, CLI, MCP, serve, runtime, bench) on top. Every import
counts, at module level or inside a function, absolute or relative.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOUNDATIONS, LIBRARIES, APPLICATION = 0, 1, 2
LAYER_NAMES = {FOUNDATIONS: "a foundation (kb/core/)", LIBRARIES: "a library (ingest/, router/)",
               APPLICATION: "the application (kb/ outside kb/core/)"}
WEB = ("litestar", "uvicorn")
# kb.app is the ASGI application: only the CLI's serve command and the server entry name it
APP_USERS = ("kb.cli", "kb.serve")


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The layer a module's folder puts it in."""
    if module == "kb.core" or module.startswith("kb.core."):
        return FOUNDATIONS
    if module.split(".")[0] in ("ingest", "router"):
        return LIBRARIES
    return APPLICATION


def imported_names(path: Path, module: str) -> set[str]:
    """Every module name an import in ``path`` names (``from a import b`` gives ``a`` and ``a.b``), wherever the
    import stands; relative imports are resolved against the module's package."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def _sources() -> dict[str, set[str]]:
    files = [p for d in ("kb", "ingest", "router") for p in (ROOT / d).rglob("*.py")]
    return {_module(p): imported_names(p, _module(p)) for p in sorted(files)}


SOURCES = _sources()


def project_module(name: str, modules: Mapping[str, object]) -> str | None:
    """The project module an imported name refers to (its longest known prefix), or None for a third party."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(sources: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Module → the project modules it imports (not itself, not its parent packages)."""
    graph: dict[str, set[str]] = {}
    for mod, names in sources.items():
        targets = {project_module(n, sources) for n in names}
        graph[mod] = {t for t in targets if t and t != mod and not mod.startswith(t + ".")}
    return graph


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Each import loop as a chain ``a → b → … → a`` (one per strongly connected group; Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_chain(group, graph) for group in groups]


def _chain(group: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest loop through the group's first module, as a list of modules ending where it started."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    for v in queue:
        for w in sorted(graph.get(v, ()) & group):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return sorted(group)  # unreachable for a strongly connected group


def upward_imports(module: str, names: set[str]) -> Iterator[str]:
    """What ``module`` imports against the layering, each as ``module → import (why)``."""
    layer = layer_of(module)
    for name in sorted(names):
        target = project_module(name, SOURCES)
        if any(name == w or name.startswith(w + ".") for w in WEB) and layer < APPLICATION:
            yield f"{module} → {name} (the web framework belongs to the application)"
        if target is None:
            continue
        if layer_of(target) > layer:
            yield f"{module} → {target} ({LAYER_NAMES[layer]} imports {LAYER_NAMES[layer_of(target)]})"
        elif layer == LIBRARIES and layer_of(target) == LIBRARIES and target.split(".")[0] != module.split(".")[0]:
            yield f"{module} → {target} (the two libraries do not import each other)"
        if target == "kb.app" and module not in APP_USERS:
            yield f"{module} → kb.app (get the pool, providers and pipeline from kb.runtime)"


def test_the_tree_is_read() -> None:
    assert {"kb.runtime", "kb.core.settings", "ingest.pipeline", "router.pipeline", "kb.api.query"} <= set(SOURCES)
    assert layer_of("kb.core.db") == FOUNDATIONS and layer_of("router.store") == LIBRARIES
    assert layer_of("kb.cli") == APPLICATION and layer_of("kb") == APPLICATION


@pytest.mark.parametrize(("module", "imports"), SOURCES.items(), ids=list(SOURCES))
def test_imports_point_down(module: str, imports: set[str]) -> None:
    bad = sorted(set(upward_imports(module, imports)))
    assert not bad, "imports against the layers:\n  " + "\n  ".join(bad)


def test_no_import_loops() -> None:
    cycles = import_cycles(import_graph(SOURCES))
    assert not cycles, "import loops:\n  " + "\n  ".join(" → ".join(c) for c in cycles)


def test_the_checks_see_function_level_imports_loops_and_upward_imports(tmp_path: Path) -> None:
    """The checks themselves: an import inside a function counts, a loop is reported as its chain, and a
    foundation naming a library is upward."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from ingest.formats import SUPPORTED\n    from . import sibling\n", encoding="utf-8")
    assert {"ingest.formats", "ingest.formats.SUPPORTED", "kb.core.sibling"} <= imported_names(src, "kb.core.m")
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
    assert list(upward_imports("kb.core.settings", {"router.store"}))
    assert list(upward_imports("ingest.store", {"kb.cli"})) and list(upward_imports("router.facts", {"ingest.store"}))
    assert not list(upward_imports("router.store", {"kb.core.db"}))


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


DB_CALLS = frozenset({"fetch", "fetchrow", "fetchval", "execute", "executemany", "copy_records_to_table",
                      "copy_to_table", "cursor", "prepare"})
SQL_START = re.compile(r"^\s*(?:SELECT|INSERT|UPDATE|DELETE|WITH|ALTER|CREATE|DROP|SET|LOCK|TRUNCATE|COPY)\s")
"""How the project writes a statement: its keywords in capitals (a docstring's "Create a job …" is prose)."""


def sql_outside_store(path: Path) -> list[str]:
    """Database calls and SQL text in a library module, each as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DB_CALLS \
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id in {"store", "re", "executor"}):
            found.append(f"{node.lineno}: .{node.func.attr}(…)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_START.match(node.value) \
                and re.search(r"\b(?:FROM|INTO|TABLE|INDEX|SET|WHERE|LOCAL)\b", node.value):
            found.append(f"{node.lineno}: SQL text {node.value.strip()[:40]!r}")
    return found


LIBRARY_FILES = sorted(p for d in ("ingest", "router") for p in (ROOT / d).rglob("*.py") if p.name != "store.py")


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=[str(p.relative_to(ROOT)) for p in LIBRARY_FILES])
def test_library_sql_lives_in_its_store(path: Path) -> None:
    """Every statement ``router`` runs is in ``router/store.py``, every statement of ``ingest`` in
    ``ingest/store.py``: no other module of theirs holds SQL text or calls the database."""
    bad = sql_outside_store(path)
    assert not bad, f"{path.relative_to(ROOT)} runs SQL outside its store.py:\n  " + "\n  ".join(bad)


def test_the_sql_check_sees_calls_and_statements(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('Q = """\nSELECT id FROM chunks WHERE id = $1"""\n\nasync def f(pool):\n    return await pool.fetch(Q)\n',
                   encoding="utf-8")
    assert [x.split(":")[0] for x in sql_outside_store(src)] == ["1", "5"]
