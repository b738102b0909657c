"""The MCP server through the SDK's own client: `kb mcp` over stdio in a subprocess, and `/mcp` over
streamable HTTP in the API; both on a generated corpus in the real embedded Postgres."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from kb.app import create_app
from kb.runtime import Runtime
from tests.conftest import MODEL_DIR, SetEnv, runtime_over
from tests.corpus import build_corpus

pytestmark = pytest.mark.slow
TOOLS = {"query", "retrieve", "list_collections", "list_documents", "get_document_tree", "get_node"}
BASE = "http://127.0.0.1:8000"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
async def corpus(pg_uri: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    """The generated corpus (three Markdown reports, one PDF) ingested through a real job, once for the module;
    the tests only read it."""
    root = tmp_path_factory.mktemp("mcp")
    build_corpus(root / "corpus")
    async with runtime_over(pg_uri, "mcp_corpus", root / "corpus", ok=4, data_dir=root / "data") as rt:
        yield rt


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def _error(result: Any) -> str:
    assert result.is_error, result
    return " ".join(c.text for c in result.content)


async def _exercise(client: Client) -> None:
    """The tools an agent uses, good and bad input, against the corpus."""
    assert TOOLS <= {t.name for t in (await client.list_tools()).tools}
    colls = _data(await client.call_tool("list_collections", {}))["collections"]
    assert [(c["name"], c["documents"]) for c in colls] == [("default", 4)]

    docs = _data(await client.call_tool("list_documents", {}))["documents"]
    by_name = {d["name"]: d for d in docs}
    assert set(by_name) == {"zephyr-mining-2021.md", "zephyr-mining-2022.md", "voltaic-devices-2023.pdf",
                            "kestrel-airlines-2020.md"}
    zephyr = _data(await client.call_tool("list_documents", {"filters": {"company": "Zephyr Mining"}}))
    assert sorted(d["name"] for d in zephyr["documents"]) == ["zephyr-mining-2021.md", "zephyr-mining-2022.md"]
    later = _data(await client.call_tool("list_documents", {"filters": {"fiscal_year": {"gte": 2022}}}))
    assert "zephyr-mining-2021.md" not in {d["name"] for d in later["documents"]}

    pdf = by_name["voltaic-devices-2023.pdf"]
    tree = _data(await client.call_tool("get_document_tree", {"doc_id": pdf["doc_id"]}))
    assert tree["doc_name"] == "voltaic-devices-2023.pdf" and tree["unit"] == "page"

    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [x for n in nodes for x in (n, *walk(n.get("nodes", [])))]

    flat = walk(tree["structure"])

    md_id = by_name["zephyr-mining-2022.md"]["doc_id"]
    md = _data(await client.call_tool("get_document_tree", {"doc_id": md_id}))
    assert md["unit"] == "line" and len(walk(md["structure"])) > len(md["structure"])  # H2s under the H1
    top = _data(await client.call_tool("get_document_tree", {"doc_id": md_id, "max_depth": 1}))
    assert all("nodes" not in n for n in top["structure"])
    assert [n.get("child_count", 0) for n in top["structure"]] == [len(n.get("nodes", [])) for n in md["structure"]]
    parent = next(n for n in walk(md["structure"]) if n.get("nodes"))
    sub = _data(await client.call_tool("get_document_tree", {"doc_id": md_id, "node_id": parent["node_id"]}))
    assert sub["structure"] == [parent]
    safety = next(n for n in flat if n["title"] == "Product Safety")
    assert safety["start_index"] == 2 and "nodes" not in safety

    node = _data(await client.call_tool("get_node", {"doc_id": pdf["doc_id"], "node_id": safety["node_id"]}))
    assert "recalled 41,000 lithium battery packs" in node["text"]
    assert (node["start_index"], node["end_index"], node["truncated"]) == (2, 2, False)
    part = _data(await client.call_tool("get_node", {"doc_id": pdf["doc_id"], "node_id": safety["node_id"],
                                                     "max_chars": 100}))
    assert part["truncated"] and len(part["text"]) == 100 and part["next_offset"] == 100
    rest = _data(await client.call_tool("get_node", {"doc_id": pdf["doc_id"], "node_id": safety["node_id"],
                                                     "offset": 100, "max_chars": 200_000}))
    assert part["text"] + rest["text"] == node["text"]

    answer = _data(await client.call_tool("query", {"question": "Which company recalled lithium battery packs?",
                                                    "strategy": "semantic", "top_k": 3, "top_docs": 2,
                                                    "collection": "default"}))
    assert answer["answer"] and answer["citations"]
    assert answer["documents"][0]["name"] == "voltaic-devices-2023.pdf" and len(answer["documents"]) <= 2
    assert any("41,000" in c["text"] for c in answer["citations"])
    # the API's metadata filters: only that company's reports may answer, whatever the question matches best
    kept = _data(await client.call_tool("query", {"question": "Which company recalled lithium battery packs?",
                                                  "filters": {"company": "Zephyr Mining"}}))
    assert kept["documents"] and {d["name"] for d in kept["documents"]} <= {"zephyr-mining-2021.md",
                                                                            "zephyr-mining-2022.md"}
    assert all(c["doc_name"].startswith("zephyr-mining") for c in kept["citations"])
    assert "invalid filter key" in _error(await client.call_tool("query", {"question": "revenue?",
                                                                         "filters": {"a b": 1}}))
    # one document asked by name or id: routing skipped, only it cited
    named = _data(await client.call_tool("query", {"question": "What was the total revenue?",
                                                   "documents": ["zephyr-mining-2022.md"]}))
    assert [d["name"] for d in named["documents"]] == ["zephyr-mining-2022.md"] and "377.9" in named["answer"]
    by_id = _data(await client.call_tool("query", {"question": "What was the total revenue?",
                                                   "documents": [named["documents"][0]["doc_id"]]}))
    assert [d["name"] for d in by_id["documents"]] == ["zephyr-mining-2022.md"]
    assert "no document 'nope.md'" in _error(await client.call_tool("query", {"question": "revenue?",
                                                                            "documents": ["nope.md"]}))
    # the evidence without an answer: documents, sections with pages, passages with scores and citations
    found = _data(await client.call_tool("retrieve", {"question": "Which company recalled lithium battery packs?",
                                                      "top_k": 3}))
    assert "answer" not in found and found["documents"][0]["name"] == "voltaic-devices-2023.pdf"
    assert found["sections"] and all(s["pages"] for s in found["sections"] if s["doc_name"].endswith(".pdf"))
    ranks = [p["rank"] for p in found["passages"]]
    assert ranks == list(range(1, len(ranks) + 1)) and 1 <= len(ranks) <= 3
    assert any("41,000" in p["citation"]["text"] for p in found["passages"])
    # an argument a tool does not have is refused by name, not dropped (the schema says so too)
    schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    assert all(schemas[name]["additionalProperties"] is False for name in TOOLS)
    refused = _error(await client.call_tool("query", {"question": "Which company recalled lithium battery packs?",
                                                      "filter": {"company": "Zephyr Mining"}}))
    assert "no argument 'filter'" in refused and "filters" in refused
    assert "no argument 'depth'" in _error(await client.call_tool("get_document_tree", {"doc_id": pdf["doc_id"],
                                                                                        "depth": 1}))

    # bad input: MCP errors with the reason, and the server keeps serving
    assert "document 999999 does not exist" in _error(await client.call_tool("get_node", {"doc_id": 999999,
                                                                                           "node_id": "0000"}))
    assert "has no node 'nope'" in _error(await client.call_tool("get_node", {"doc_id": pdf["doc_id"],
                                                                              "node_id": "nope"}))
    assert "does not exist" in _error(await client.call_tool("get_document_tree", {"doc_id": 424242}))
    assert "has no node 'zz'" in _error(await client.call_tool("get_document_tree", {"doc_id": pdf["doc_id"],
                                                                                    "node_id": "zz"}))
    _error(await client.call_tool("get_document_tree", {"doc_id": pdf["doc_id"], "max_depth": 0}))
    assert "doc_id" in _error(await client.call_tool("get_document_tree", {"doc_id": "abc"}))
    _error(await client.call_tool("get_document_tree", {"doc_id": 2**70}))
    _error(await client.call_tool("get_document_tree", {}))
    assert "question" in _error(await client.call_tool("query", {"question": "x" * 5000}))
    _error(await client.call_tool("query", {"question": "revenue?", "strategy": "psychic"}))
    _error(await client.call_tool("query", {"question": "revenue?", "top_k": 500}))
    assert "collection 'nope' does not exist" in _error(await client.call_tool(
        "query", {"question": "revenue?", "collection": "nope"}))
    assert "NUL" in _error(await client.call_tool("query", {"question": "a\u0000b"}))
    assert "invalid filter key" in _error(await client.call_tool("list_documents", {"filters": {"a b": 1}}))
    _error(await client.call_tool("list_documents", {"filters": {"company": "a\u0000"}}))
    _error(await client.call_tool("list_documents", {"collection": "c" * 500}))
    _error(await client.call_tool("get_node", {"doc_id": pdf["doc_id"], "node_id": "n" * 10_000}))
    _error(await client.call_tool("no_such_tool", {}))
    assert _data(await client.call_tool("list_collections", {}))["collections"]  # still alive


async def test_stdio_kb_mcp_subprocess(corpus: Runtime, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update({"KB_DATABASE_URL": corpus.database_url, "KB_DATA_DIR": str(tmp_path / "data"),
                "KB_LOG_LEVEL": "warning", "HF_HUB_OFFLINE": "1", "KB_MODEL_DIR": str(MODEL_DIR)})
    params = StdioServerParameters(command=sys.executable, args=["-m", "kb.cli", "mcp"], env=env,
                                   cwd=str(REPO))
    async with Client(params, read_timeout_seconds=120) as client:
        await _exercise(client)


@asynccontextmanager
async def _http_client(rt: Runtime, *, host: str = "127.0.0.1", headers: dict[str, str] | None = None,
                       base: str = BASE) -> AsyncIterator[tuple[Client, httpx2.AsyncClient]]:
    app = create_app(runtime=rt, bound_host=host, run_worker=False)
    async with app.lifespan():
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base, headers=headers or {},
                                  timeout=120)
        async with http, Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            yield client, http


async def test_http_mcp_endpoint(corpus: Runtime) -> None:
    from prometheus_client import REGISTRY

    def answered() -> float:  # queries observed by /metrics
        return REGISTRY.get_sample_value("kb_query_stage_seconds_count", {"stage": "total"}) or 0.0

    async with _http_client(corpus) as (client, http):
        before = answered()
        await _exercise(client)
        assert answered() == before + 4  # the four answered MCP queries (untraced) are counted; `retrieve` answers none
        # a page on another origin (DNS rebinding) cannot drive the loopback-bound server
        accept = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        r = await http.post("/mcp/", headers=accept, json=body)  # a trailing slash is the same endpoint
        assert r.status_code == 200 and "get_document_tree" in r.text
        r = await http.post("/mcp", headers={**accept, "Host": "evil.example"}, json=body)
        assert r.status_code == 421 and "Host" in r.text
        r = await http.post("/mcp", headers={**accept, "Origin": "http://evil.example"}, json=body)
        assert r.status_code == 403 and "Origin" in r.text


async def test_http_mcp_needs_the_read_token(corpus: Runtime, set_env: SetEnv) -> None:
    corpus = dataclasses.replace(corpus, settings=set_env(KB_API_TOKEN="reader"))  # the module's runtime unchanged
    app = create_app(runtime=corpus, bound_host="0.0.0.0", run_worker=False)
    async with app.lifespan():
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            for auth in (None, "Bearer wrong"):
                r = await http.post("/mcp", json=body, headers={"Authorization": auth} if auth else {})
                assert r.status_code == 401 and r.json()["status"] == 401
    async with _http_client(corpus, host="0.0.0.0", headers={"Authorization": "Bearer reader"},
                            base="http://kb.internal") as (client, _):
        assert _data(await client.call_tool("list_collections", {}))["collections"][0]["documents"] == 4


async def test_http_mcp_requests_are_logged_under_their_path(runtime: Runtime,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from kb.core.logging import configure_logging

    configure_logging("json", "info")
    try:
        async with _http_client(runtime) as (client, _):
            assert _data(await client.call_tool("list_collections", {}))["collections"]
        lines = [json.loads(ln) for ln in capsys.readouterr().err.splitlines() if ln.startswith("{")]
        paths = {ln.get("path") for ln in lines if ln.get("event") == "http.request"}
        assert paths == {"/mcp"}, paths
    finally:
        configure_logging("console", "info")
