"""The MCP server (``betterdb_memory.adapters.mcp``) through the ``mcp`` SDK's own client.

In-process (``mcp.Client(server)``) for every tool and error, and end to end through
``betterdb-memory mcp`` over stdio and streamable HTTP. The npm conformance suite runs
in ``tests/conformance``.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (make test installs it)")

from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from betterdb_memory import MemoryItem, MemoryStore
from betterdb_memory.adapters.mcp import TOOL_NAMES, Memory, create_server

pytestmark = pytest.mark.integration


@pytest.fixture
def server(make_store: Callable[..., MemoryStore]) -> MCPServer:
    """The server over a fresh store; each test connects with ``async with Client(server)``
    (anyio's task groups must be entered and left in one task, a fixture's are not)."""
    return create_server(make_store())


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A successful call's structured content (the client has checked it against the output schema)."""
    result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult) and not result.is_error, result
    assert result.structured_content is not None
    return result.structured_content


async def error(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A failed call's ``{"code", "message", "details"}``; its text carries the code too."""
    result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult) and result.is_error, result
    assert result.structured_content is not None
    err: dict[str, Any] = result.structured_content["error"]
    assert result.content[0].text == f"[{err['code']}] {err['message']}"  # type: ignore[union-attr]
    return err


def test_memory_shape_is_memory_items_fields() -> None:
    assert list(Memory.__annotations__) == [f.name for f in dataclasses.fields(MemoryItem)]


async def test_lists_every_tool_with_schemas_and_hints(server: MCPServer) -> None:
    async with Client(server) as mcp_client:
        await _lists_every_tool_with_schemas_and_hints(mcp_client)


async def _lists_every_tool_with_schemas_and_hints(mcp_client: Client) -> None:
    tools = {t.name: t for t in (await mcp_client.list_tools()).tools}
    assert tuple(tools) == TOOL_NAMES
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object" and tool.output_schema
        assert tool.annotations is not None
    assert tools["remember"].input_schema["required"] == ["content"]
    assert tools["retrieve_context"].input_schema["required"] == ["thread_id", "query"]
    assert tools["recall"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["forget"].annotations.destructive_hint is True  # type: ignore[union-attr]


async def test_every_tool_against_the_real_store(server: MCPServer) -> None:
    async with Client(server) as mcp_client:
        await _every_tool_against_the_real_store(mcp_client)


async def _every_tool_against_the_real_store(mcp_client: Client) -> None:
    mid = (
        await call(mcp_client, "remember", content="Ada lives in Lisbon.", thread_id="ada", importance=0.9)
    )["id"]
    await call(mcp_client, "remember", content="Grace likes tea.", thread_id="grace", tags=["drink"])
    hits = (await call(mcp_client, "recall", query="Ada lives in Lisbon", thread_id="ada"))["hits"]
    assert [h["memory"]["id"] for h in hits] == [mid]
    assert hits[0]["memory"]["content"] == "Ada lives in Lisbon." and 0 < hits[0]["score"] <= 1
    page = await call(mcp_client, "list", limit=1)
    assert page["total"] == 2 and len(page["items"]) == 1 and page["next_cursor"]
    rest = await call(mcp_client, "list", limit=1, cursor=page["next_cursor"])
    assert {page["items"][0]["id"], rest["items"][0]["id"]} >= {mid}
    assert (await call(mcp_client, "list", tags=["drink"]))["items"][0]["content"] == "Grace likes tea."
    stats = await call(mcp_client, "stats")
    assert stats["items"] == 2 and stats["embedder"].startswith("hashing") and stats["index_ready"] is True
    turn = await call(
        mcp_client,
        "store_turn",
        thread_id="ada",
        user_message="Where do I live?",
        assistant_message="In Lisbon.",
    )
    assert len(turn["turn_id"]) == 32
    ctx = await call(mcp_client, "retrieve_context", thread_id="ada", query="Ada Lisbon", token_budget=500)
    assert "User: Where do I live?\nAssistant: In Lisbon." in ctx["text"]
    assert [t["user_message"] for t in ctx["turns"]] == ["Where do I live?"]
    assert ctx["tokens_used"]["total"] <= 500 and ctx["token_budget"] == 500
    assert (await call(mcp_client, "forget", id=mid)) == {"deleted": True}
    assert (await call(mcp_client, "forget", id=mid)) == {"deleted": False}


async def test_time_arguments_and_fact_history(server: MCPServer) -> None:
    """Issue 26's model through the tools: remember's valid_from and subject, recall's and list's
    as_of / since / until, fact_history; a bad time is a tool error with its code."""
    async with Client(server) as mcp_client:
        lisbon = (
            await call(
                mcp_client,
                "remember",
                content="Ada lives in Lisbon.",
                thread_id="ada",
                subject="home city",
                valid_from="2020-03-01",
            )
        )["id"]
        berlin = (
            await call(
                mcp_client,
                "remember",
                content="Ada moved to Berlin.",
                thread_id="ada",
                subject="home city",
                valid_from=1714521600000,
            )
        )["id"]
        rowing = (
            await call(
                mcp_client, "remember", content="Ada took up rowing.", thread_id="ada", valid_from="2022-06"
            )
        )["id"]
        ask = {"query": "Where does Ada live?", "thread_id": "ada", "threshold": 2.0}
        now = {h["memory"]["id"]: h for h in (await call(mcp_client, "recall", **ask))["hits"]}
        assert set(now) == {berlin, rowing} and now[berlin]["superseded_by"] is None
        then = (await call(mcp_client, "recall", **ask, as_of="2021-01-01"))["hits"]
        assert [h["memory"]["id"] for h in then] == [lisbon]
        assert then[0]["memory"]["valid_until"] == 1714521600000
        window = await call(mcp_client, "list", thread_id="ada", since="2022-01-01", until="2023-01-01")
        assert [i["id"] for i in window["items"]] == [rowing] and window["total"] == 1
        past = await call(mcp_client, "list", thread_id="ada", as_of="2021-01-01")
        assert [i["id"] for i in past["items"]] == [lisbon]
        versions = (await call(mcp_client, "fact_history", subject="Home City", thread_id="ada"))["versions"]
        assert [(v["id"], v["current"]) for v in versions] == [(berlin, True), (lisbon, False)]
        assert versions[1]["valid_until"] == versions[0]["valid_from"] == 1714521600000
        assert (await call(mcp_client, "fact_history", subject="home city"))["versions"] == []  # exact scope
        err = await error(mcp_client, "remember", content="Ada moved to Paris.", valid_from="next May")
        assert err["code"] == "validation.time_format"
        err = await error(mcp_client, "list", since="2024", until="2023")
        assert err["code"] == "validation.time_window"
        err = await error(mcp_client, "recall", query="what did Ada do yesterday", tz="Mars/Olympus")
        assert err["code"] == "validation.timezone"
        assert (await call(mcp_client, "list", thread_id="ada"))["total"] == 2  # nothing half-written


async def test_recall_hits_name_the_newer_statement_they_rank_below(
    make_store: Callable[..., MemoryStore],
) -> None:
    """Same-slot supersession through the tool (the shipped ONNX embedder): an older bank of
    Maya's says which newer statement it ranks below, so an agent can tell it is likely outdated."""
    from betterdb_memory.embedders import OnnxEmbedder

    store = make_store(embedder=OnnxEmbedder())
    texts = [
        ("Maya Varga moved their account to Chase.", "2014-04-29"),
        ("Maya Varga plays tennis.", "2018-06-01"),
        ("Maya Varga banks with Barclays.", "2020-04-20"),
        ("Maya Varga moved their account to HSBC.", "2020-06-16"),
    ]
    ids = [await store.remember(text, valid_from=when) for text, when in texts]
    async with Client(create_server(store)) as mcp_client:
        hits = (
            await call(mcp_client, "recall", query="Which bank does Maya Varga use?", k=4, threshold=2.0)
        )["hits"]
    by_id = {h["memory"]["id"]: h for h in hits}
    assert hits[0]["memory"]["id"] == ids[3] and hits[0]["superseded_by"] is None
    assert by_id[ids[2]]["superseded_by"] is not None and by_id[ids[1]]["superseded_by"] is None


async def test_store_errors_are_tool_errors_with_their_code(server: MCPServer) -> None:
    async with Client(server) as mcp_client:
        await _store_errors_are_tool_errors_with_their_code(mcp_client)


async def _store_errors_are_tool_errors_with_their_code(mcp_client: Client) -> None:
    err = await error(mcp_client, "remember", content="   ")
    assert err["code"] == "validation.empty" and err["details"]["argument"] == "content"
    assert (await error(mcp_client, "remember", content="x", importance=7))["code"] == "validation.range"
    assert (await error(mcp_client, "remember", content="x", thread_id="a,b"))["code"] == "validation.comma"
    assert (await error(mcp_client, "recall", query="x", k=0))["code"].startswith("validation.")
    assert (await error(mcp_client, "forget", id="not an id"))["code"] == "validation.memory_id"
    assert (await error(mcp_client, "list", cursor="garbage"))["code"].startswith("validation.")
    assert (await error(mcp_client, "store_turn", thread_id="t", user_message="", assistant_message="a"))[
        "code"
    ] == "validation.empty"
    assert (await error(mcp_client, "retrieve_context", thread_id="t", query="q", token_budget=0))[
        "code"
    ] == "validation.budget"


async def test_wrong_argument_types_are_refused_by_the_schema(server: MCPServer) -> None:
    async with Client(server) as mcp_client:
        await _wrong_argument_types_are_refused_by_the_schema(mcp_client)


async def _wrong_argument_types_are_refused_by_the_schema(mcp_client: Client) -> None:
    result = await mcp_client.call_tool("remember", {"content": 5})
    assert result.is_error and "content" in result.content[0].text  # type: ignore[union-attr]
    assert (await mcp_client.call_tool("no_such_tool", {})).is_error


# -- end to end through the CLI ------------------------------------------------------------------


def _cli(valkey_url: str, name: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "betterdb_memory.cli", "mcp", "--url", valkey_url, "--name", name,
            "--embedder", "hashing", *extra]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(valkey_url: str, unique_name: str) -> Iterator[str]:
    """``betterdb-memory mcp --http`` on a free local port; yields its endpoint URL."""
    yield from run_http_server(valkey_url, unique_name)


def run_http_server(
    valkey_url: str, name: str, *extra: str, env: dict[str, str] | None = None, log: IO[str] | None = None
) -> Iterator[str]:
    """Start ``betterdb-memory mcp --http`` on a free port, wait until it listens, stop it after.

    ``extra``: more options (``--host``, ``--token-file``, ``--namespace`` ...); ``env``:
    the server's whole environment (default: this one's); ``log``: where its output goes.
    """
    port = free_port()
    with tempfile.TemporaryFile("w+") as own_log:
        log = log or own_log
        command = _cli(valkey_url, name, "--http", "--port", str(port), *extra)
        proc = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"the MCP server exited with {proc.returncode}: {log.read()}")
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    pytest.fail("the MCP server did not listen within 30 s")
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _round_trip(client: Client) -> None:
    assert tuple(t.name for t in (await client.list_tools()).tools) == TOOL_NAMES
    mid = (await call(client, "remember", content="Ada lives in Lisbon.", thread_id="ada"))["id"]
    assert [
        h["memory"]["id"] for h in (await call(client, "recall", query="Ada Lisbon", thread_id="ada"))["hits"]
    ] == [mid]
    assert (await error(client, "remember", content=""))["code"] == "validation.empty"
    assert (await call(client, "forget", id=mid))["deleted"] is True


async def test_cli_serves_over_stdio(valkey_url: str, unique_name: str) -> None:
    command, *args = _cli(valkey_url, unique_name)
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with Client(params) as client:
        await _round_trip(client)


async def test_cli_serves_streamable_http(http_server: str) -> None:
    async with Client(http_server) as client:
        await _round_trip(client)


def test_missing_extra_is_a_configuration_error_naming_it(valkey_url: str, unique_name: str) -> None:
    """Without ``mcp`` the import and the CLI say which extra to install (no bare ImportError)."""
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "from betterdb_memory import ConfigurationError\n"
        "try:\n"
        "    import betterdb_memory.adapters.mcp\n"
        "except ConfigurationError as exc:\n"
        "    assert exc.code == 'configuration.missing_extra' and exc.details['extra'] == 'mcp', exc\n"
        "    assert \"pip install 'betterdb-memory[mcp]'\" in str(exc)\n"
        "else:\n"
        "    raise SystemExit('imported')\n"
        "from betterdb_memory.cli import main\n"
        f"sys.exit(main(['mcp', '--url', {valkey_url!r}, '--name', {unique_name!r}, '--embedder', 'hashing']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "configuration.missing_extra" in done.stderr and "betterdb-memory[mcp]" in done.stderr


def test_importing_the_package_and_cli_loads_no_framework() -> None:
    code = (
        "import sys, betterdb_memory, betterdb_memory.cli, betterdb_memory.adapters\n"
        "bad = [m for m in ('mcp', 'agents', 'starlette', 'uvicorn') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
