"""The routing strategy list is declared once (``router.types.Strategy``) and every surface accepts exactly
the registered routers: the API request, ``kb query``, the MCP tool and ``kb bench`` (financebench/docugami,
load). Adding a strategy to the registry and forgetting a surface fails here; lists defined from the registry
(``kb bench latency``'s, the bench defaults) are not restated."""

from __future__ import annotations

import types
from pathlib import Path

import msgspec
import pytest

from kb.bench.load import sample_questions
from kb.bench.strategies import FLAT, parse_strategies
from kb.cli import build_parser
from kb.core.errors import ValidationError
from router.routing import ROUTERS
from router.types import QueryRequest, checked

REGISTERED = tuple(ROUTERS)


@pytest.mark.parametrize("strategy", REGISTERED)
def test_api_accepts_every_registered_strategy(strategy: str) -> None:
    req = msgspec.convert({"query": "What was revenue?", "strategy": strategy}, QueryRequest)
    assert checked(req).strategy == strategy


def test_api_schema_and_validation_list_exactly_the_registry() -> None:
    (_, components) = msgspec.json.schema_components([QueryRequest])
    assert sorted(components["QueryRequest"]["properties"]["strategy"]["enum"]) == sorted(REGISTERED)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"query": "q", "strategy": "nope"}, QueryRequest)


def test_kb_query_choices_are_the_registry() -> None:
    parser = build_parser()
    for s in REGISTERED:
        assert parser.parse_args(["query", "q", "--strategy", s]).strategy == s
    with pytest.raises(SystemExit):
        parser.parse_args(["query", "q", "--strategy", "nope"])


async def test_mcp_query_tool_lists_the_registry() -> None:
    from kb.mcp_server import build_mcp_server

    tools = await build_mcp_server(types.SimpleNamespace()).list_tools()  # the tools read services only when called
    query = next(t for t in tools if t.name == "query")
    schema = query.input_schema if hasattr(query, "input_schema") else query.inputSchema
    assert tuple(schema["properties"]["strategy"]["enum"]) == REGISTERED


def test_kb_bench_runs_every_registered_strategy_and_flat_baseline() -> None:
    args = build_parser().parse_args(["bench", "financebench", "--data", "x"])
    assert parse_strategies(args.strategies) == (*REGISTERED, *FLAT)
    with pytest.raises(ValidationError):
        parse_strategies("auto,nope")


@pytest.mark.parametrize("strategy", REGISTERED)
def test_kb_bench_load_keeps_a_sample_question_strategy(strategy: str, tmp_path: Path) -> None:
    questions = tmp_path / "QUESTIONS.md"
    questions.write_text(f"# Questions\n\n### 1\n\n**Question:** What?\n\n**Strategy:** {strategy}\n")
    assert sample_questions(questions) == [("What?", strategy)]
