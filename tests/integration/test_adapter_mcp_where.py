"""The MCP ``recall`` / ``list`` tools' ``where`` argument (issue 27), through the SDK's client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (make test installs it)")

from mcp import Client
from mcp.types import CallToolResult

from betterdb_memory import MemoryStore
from betterdb_memory.adapters.mcp import FixedScope, create_server

pytestmark = pytest.mark.integration

FIELDS = {"priority": "numeric", "project": "tag"}


async def _call(client: Client, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult) and result.structured_content is not None
    return bool(result.is_error), result.structured_content


async def _seed(store: MemoryStore) -> None:
    await store.remember("apollo plan", namespace="a", metadata={"priority": 3, "project": "apollo"})
    await store.remember("gemini plan", namespace="a", metadata={"priority": 1, "project": "gemini"})
    await store.remember("other tenant plan", namespace="b", metadata={"priority": 3, "project": "apollo"})


async def test_recall_and_list_take_where(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=FIELDS)
    await _seed(store)
    async with Client(create_server(store)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("recall", "list"):
            assert "where" in tools[name].input_schema["properties"]
            assert "priority (numeric)" in (tools[name].description or "")
            assert "$nin" in (tools[name].description or "") or "$nin" in str(tools[name].input_schema)
        failed, out = await _call(client, "list", where={"priority": {"$gte": 2}})
        assert not failed and sorted(i["content"] for i in out["items"]) == [
            "apollo plan",
            "other tenant plan",
        ]
        failed, out = await _call(
            client, "recall", query="plan", threshold=2.0, where={"project": {"$ne": "apollo"}}
        )
        assert not failed and [h["memory"]["content"] for h in out["hits"]] == ["gemini plan"]
        failed, out = await _call(client, "list", where={"priority": {"$gt": "high"}})
        assert failed and out["error"]["code"] == "validation.filter_type"
        failed, out = await _call(client, "recall", query="plan", where={"secret": 1})
        assert failed and out["error"]["code"] == "validation.filter_field"


async def test_a_confined_server_where_can_only_narrow(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=FIELDS)
    await _seed(store)
    async with Client(create_server(store, scope=FixedScope(namespace="a"))) as client:
        for where in (
            {"namespace": "b"},
            {"$or": [{"namespace": "b"}, {"namespace": "a"}]},
            {"namespace": {"$ne": "a"}},
            {"$not": {"namespace": "a"}},
        ):
            failed, out = await _call(client, "list", where=where)
            assert not failed
            assert all(i["namespace"] == "a" for i in out["items"]), where
            failed, out = await _call(client, "recall", query="plan", threshold=2.0, where=where)
            assert not failed
            assert all(h["memory"]["namespace"] == "a" for h in out["hits"]), where
        failed, out = await _call(client, "list", where={"project": "apollo"})
        assert [i["content"] for i in out["items"]] == ["apollo plan"]
