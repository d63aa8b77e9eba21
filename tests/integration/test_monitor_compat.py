"""BetterDB Monitor on a store this library wrote: its exact commands, what it would display.

Monitor (the public BetterDB-inc/monitor repository) reads a memory store in three ways,
reproduced here command for command with a raw client:

* discovery and sampling (``apps/api/src/ai-observability``): ``HGETALL __betterdb:caches``,
  JSON markers of ``type`` ``agent_memory`` (``prefix``, ``stats_key``, ``index_name``,
  ``capabilities``...), ``GET __betterdb:heartbeat:<field>`` for liveness, ``HGETALL`` of
  the marker's stats key (``evictions``) and of ``<name>:__mem_config``
  (``recall.threshold``), and ``FT.INFO`` of ``index_name`` or ``<name>:mem:idx``
  (``num_docs``, sizes, ``indexing``/``percent_indexed``), refused unless the index name
  matches ``^[a-zA-Z_][a-zA-Z0-9_.\\-:]*$``;
* its memory tools and memory proposals (``apps/api/src/mcp/memory/mcp-memory.service.ts``,
  ``proprietary/memory-proposals/memory-apply.dispatcher.ts``), which run the reference
  TypeScript ``MemoryStore`` (``packages/agent-memory/src/MemoryStore.ts``): ``HGETALL
  <name>:mem:<id>``; ``FT.SEARCH <name>:mem:idx <filter> RETURN 10 content importance tags
  created_at last_accessed_at access_count source threadId agentId namespace SORTBY
  created_at DESC LIMIT <offset> <limit> DIALECT 2``; ``<filter>=>[KNN <4k> @vector $vec
  AS __score] PARAMS 2 vec <float32> LIMIT 0 <4k> DIALECT 2``; ``DEL <name>:mem:<id>``;
  and forget-by-scope as ``FT.SEARCH <filter> LIMIT 0 500`` then ``DEL`` of the keys.
  Filters are ``(@threadId:{v} @agentId:{v} @namespace:{v} @tags:{t}...)`` with values
  escaped, or ``@created_at:[-inf +inf]`` for everything;
* its OTLP ingest (``apps/api/src/ai-observability/otel-ingest.service.ts``): a span that
  is not a root is kept only when its instrumentation scope starts with ``@betterdb/``;
  trace correlation then wants scope ``@betterdb/agent-memory``, ``cache.name`` and a
  boolean ``cache.hit``.

Every store here is written through this library's public API only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from betterdb_memory import MemoryStore

pytestmark = pytest.mark.integration

REGISTRY_KEY = "__betterdb:caches"
PROTOCOL_KEY = "__betterdb:protocol"
HEARTBEAT_PREFIX = "__betterdb:heartbeat:"
INDEX_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.\-:]*$")  # Monitor's vector-index.parser.ts
MATCH_ALL = "@created_at:[-inf +inf]"
LIST_RETURN = [
    "content",
    "importance",
    "tags",
    "created_at",
    "last_accessed_at",
    "access_count",
    "source",
    "threadId",
    "agentId",
    "namespace",
]
# Characters Monitor's tag escaping (valkey-search-kit) puts a backslash before.
TAG_SPECIALS = frozenset(",.<>{}[]\"'!@#$%^&*()-+=~|/\\:; ")

DIMS = 8
THREAD = "user:42 / main"  # punctuation and a space: escaped in queries, raw in documents


def escape_tag(value: str) -> str:
    return "".join("\\" + ch if ch in TAG_SPECIALS else ch for ch in value)


def scope_filter(
    *,
    thread_id: str | None = None,
    agent_id: str | None = None,
    namespace: str | None = None,
    tags: list[str] | None = None,
) -> str:
    clauses = []
    if thread_id is not None:
        clauses.append(f"@threadId:{{{escape_tag(thread_id)}}}")
    if agent_id is not None:
        clauses.append(f"@agentId:{{{escape_tag(agent_id)}}}")
    if namespace is not None:
        clauses.append(f"@namespace:{{{escape_tag(namespace)}}}")
    for tag in tags or []:
        clauses.append(f"@tags:{{{escape_tag(tag)}}}")
    return f"({' '.join(clauses)})" if clauses else MATCH_ALL


def at_distance(distance: float) -> list[float]:
    cos = 1.0 - distance
    vector = [0.0] * DIMS
    vector[0] = cos
    vector[1] = math.sqrt(max(0.0, 1.0 - cos * cos))
    return vector


class TableEmbed:
    """A user embed_fn: known texts at known cosine distances from "q" (e0)."""

    def __init__(self) -> None:
        self.table: dict[str, list[float]] = {"q": at_distance(0.0)}

    def put(self, text: str, distance: float) -> str:
        self.table[text] = at_distance(distance)
        return text

    async def __call__(self, text: str) -> list[float]:
        if text in self.table:
            return list(self.table[text])
        vector = [0.0] * DIMS
        vector[2 + sum(text.encode()) % (DIMS - 2)] = 1.0
        return vector


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def hash_reply(raw: Any) -> dict[str, Any]:
    """Monitor's parseHashReply: a flat list or a dict, keys as text (values left raw)."""
    if isinstance(raw, dict):
        return {text(k): v for k, v in raw.items()}
    return {text(raw[i]): raw[i + 1] for i in range(0, len(raw) - 1, 2)}


def search_reply(raw: Any) -> tuple[int, list[tuple[str, dict[str, str]]]]:
    """An FT.SEARCH reply as the reference's parser reads it: total, then (key, fields)."""
    total = int(raw[0])
    hits: list[tuple[str, dict[str, str]]] = []
    i = 1
    while i < len(raw):
        key = text(raw[i])
        fields: dict[str, str] = {}
        if i + 1 < len(raw) and isinstance(raw[i + 1], list):
            pairs = raw[i + 1]
            for j in range(0, len(pairs) - 1, 2):
                # binary (the vector) is skipped, as the reference's parser does
                with contextlib.suppress(UnicodeDecodeError):
                    fields[text(pairs[j])] = text(pairs[j + 1])
            i += 2
        else:
            i += 1
        hits.append((key, fields))
    return total, hits


def ft_info(raw: Any) -> dict[str, Any]:
    return {text(raw[i]): raw[i + 1] for i in range(0, len(raw) - 1, 2)}


def attribute_types(info: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for attr in info.get("attributes", []):
        tokens = [text(t) if isinstance(t, bytes | str) else t for t in attr]
        ident = tokens[tokens.index("identifier") + 1] if "identifier" in tokens else None
        kind = tokens[tokens.index("type") + 1] if "type" in tokens else None
        if ident is not None and kind is not None:
            out[str(ident)] = str(kind).upper()
    return out


def now_ms() -> int:
    return int(time.time() * 1000)


def assert_recent_ms(value: str) -> None:
    """Monitor shows ``new Date(parseInt(value))``: a date of now, not of 1970."""
    ms = int(value)
    assert abs(ms - now_ms()) < 120_000, f"{value} is not a recent epoch-ms time"


@pytest.fixture(autouse=True)
def no_product_analytics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BETTERDB_TELEMETRY", "false")
    monkeypatch.setenv("DO_NOT_TRACK", "1")


@pytest.fixture
def embed() -> TableEmbed:
    return TableEmbed()


@pytest.fixture
async def stores(
    client: Any, unique_name: str, embed: TableEmbed
) -> AsyncIterator[Callable[..., MemoryStore]]:
    made: list[MemoryStore] = []

    def factory(**options: Any) -> MemoryStore:
        options.setdefault("client", client)
        options.setdefault("name", f"{unique_name}_{len(made)}")
        options.setdefault("embed_fn", embed)
        store = MemoryStore(**options)
        made.append(store)
        return store

    try:
        yield factory
    finally:
        for store in made:
            await store.close()


@pytest.fixture
async def store(stores: Callable[..., MemoryStore]) -> MemoryStore:
    s = stores()
    await s.ensure_index()
    return s


def name_of(store: MemoryStore) -> str:
    name = getattr(store, "name", None) or getattr(store, "_name", None)
    assert isinstance(name, str)
    return name


async def written(store: MemoryStore, embed: TableEmbed) -> dict[str, str]:
    """Four memories through the public API; content -> id."""
    ids = {}
    ids["oldest"] = await store.remember(
        embed.put("oldest", 0.30),
        importance=0.2,
        tags=["pref", "ui"],
        source="chat",
        thread_id=THREAD,
        agent_id="agent/7",
        namespace="acme.prod",
    )
    await asyncio.sleep(0.005)
    ids["middle"] = await store.remember(
        embed.put("middle", 0.10), importance=0.8, tags=["pref"], thread_id=THREAD
    )
    await asyncio.sleep(0.005)
    ids["newest"] = await store.remember(embed.put("newest", 0.20), thread_id=THREAD)
    ids["elsewhere"] = await store.remember(embed.put("elsewhere", 0.05), thread_id="other")
    return ids


async def monitor_list(client: Any, name: str, filter_query: str, offset: int = 0, limit: int = 20) -> Any:
    return await client.execute_command(
        "FT.SEARCH",
        f"{name}:mem:idx",
        filter_query,
        "RETURN",
        str(len(LIST_RETURN)),
        *LIST_RETURN,
        "SORTBY",
        "created_at",
        "DESC",
        "LIMIT",
        str(offset),
        str(limit),
        "DIALECT",
        "2",
    )


# ======================================================================================
# Discovery, heartbeat, stats, config, FT.INFO (the AI Cache & Memory dashboard)
# ======================================================================================


async def test_discovery_marker_and_heartbeat(stores: Callable[..., MemoryStore], client: Any) -> None:
    store = stores(discovery=True)
    await store.ensure_index()
    await store.ensure_discovery_ready()
    name = name_of(store)

    registry = {
        k: text(v) for k, v in hash_reply(await client.execute_command("HGETALL", REGISTRY_KEY)).items()
    }
    found = []
    for field, value in registry.items():
        marker = json.loads(value)
        if isinstance(marker, dict) and marker.get("type") == "agent_memory" and marker.get("prefix") == name:
            found.append((field, marker))
    assert len(found) == 1, f"one agent_memory marker with prefix {name!r}: {registry}"
    field, marker = found[0]
    assert field == f"{name}:mem"  # the memory tier's field, distinct from an agent cache's `name`
    assert isinstance(marker["version"], str) and marker["version"]
    assert marker["stats_key"] == f"{name}:__mem_stats"
    assert marker.get("index_name", f"{name}:mem:idx") == f"{name}:mem:idx"
    assert "recall" in marker.get("capabilities", [])
    assert marker.get("protocol_version", 1) == 1
    assert await client.execute_command("GET", PROTOCOL_KEY) is not None

    heartbeat = await client.execute_command("GET", f"{HEARTBEAT_PREFIX}{field}")
    assert heartbeat is not None  # alive
    assert await client.ttl(f"{HEARTBEAT_PREFIX}{field}") > 0

    await store.close()
    assert await client.execute_command("GET", f"{HEARTBEAT_PREFIX}{field}") is None  # not alive


async def test_sample_stats_config_and_ft_info(
    stores: Callable[..., MemoryStore], client: Any, embed: TableEmbed
) -> None:
    store = stores(max_items_per_scope=2, discovery=True)
    await store.ensure_index()
    await store.ensure_discovery_ready()
    name = name_of(store)
    for i in range(3):  # the third write evicts one
        await store.remember(embed.put(f"m{i}", 0.1), importance=0.1 * (i + 1), thread_id="t1")
        await asyncio.sleep(0.002)
    await store.remember(embed.put("unscoped", 0.1))

    marker = json.loads(text(await client.execute_command("HGET", REGISTRY_KEY, f"{name}:mem")))
    stats = {
        k: text(v)
        for k, v in hash_reply(await client.execute_command("HGETALL", marker["stats_key"])).items()
    }
    assert float(stats["evictions"]) == 1

    # A threshold set through Monitor (a memory proposal) is a cosine distance for the store too.
    await client.execute_command("HSET", f"{name}:__mem_config", "recall.threshold", "0.5")
    cfg = {
        k: text(v)
        for k, v in hash_reply(await client.execute_command("HGETALL", f"{name}:__mem_config")).items()
    }
    assert float(cfg["recall.threshold"]) == 0.5
    await store.refresh_config()
    assert store.current_config().threshold == pytest.approx(0.5)

    index_name = marker.get("index_name") or f"{name}:mem:idx"
    assert INDEX_NAME_RE.match(index_name)
    info = ft_info(await client.execute_command("FT.INFO", index_name))
    assert int(info["num_docs"]) == 3  # two in t1 after the eviction, one unscoped
    size_mb = float(text(info.get("vector_index_sz_mb", 0))) or sum(
        float(text(info.get(k, 0)))
        for k in ("inverted_sz_mb", "offset_vectors_sz_mb", "doc_table_size_mb", "key_table_size_mb")
    )
    if "backfill_in_progress" in info:  # valkey-search has no *_sz_mb fields: bytes per attribute
        size_mb = sum(
            int(text(attr[i + 1]))
            for attr in info.get("attributes", [])
            for i in range(0, len(attr) - 1, 2)
            if text(attr[i]) == "user_indexed_memory"
        ) / (1024 * 1024)
    assert size_mb > 0
    if "indexing" in info:  # RediSearch
        deadline = time.monotonic() + 5
        while int(info["indexing"]) != 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            info = ft_info(await client.execute_command("FT.INFO", index_name))
        assert int(info["indexing"]) == 0
    else:  # valkey-search
        assert text(info["state"]) == "ready"


async def test_index_follows_the_reference_schema(store: MemoryStore, client: Any) -> None:
    info = ft_info(await client.execute_command("FT.INFO", f"{name_of(store)}:mem:idx"))
    types = attribute_types(info)
    expected = {
        "vector": "VECTOR",
        "threadId": "TAG",
        "agentId": "TAG",
        "namespace": "TAG",
        "tags": "TAG",
        "source": "TAG",
        "importance": "NUMERIC",
        "created_at": "NUMERIC",
        "last_accessed_at": "NUMERIC",
        "access_count": "NUMERIC",
    }
    for field, kind in expected.items():
        assert types.get(field) == kind, f"{field}: {types}"
    assert types.get("content") in ("TEXT", None)  # TEXT where the engine has it
    definition = info["index_definition"]
    tokens = [text(t) if isinstance(t, bytes | str) else t for t in definition]
    assert tokens[tokens.index("key_type") + 1] == "HASH"
    prefixes = tokens[tokens.index("prefixes") + 1]
    assert [text(p) for p in prefixes] == [f"{name_of(store)}:mem:"]


# ======================================================================================
# Memory tools: list, get, recall, forget (mcp-memory.service.ts -> MemoryStore.ts)
# ======================================================================================


async def test_list_tool(store: MemoryStore, client: Any, embed: TableEmbed) -> None:
    name = name_of(store)
    ids = await written(store, embed)
    total, hits = search_reply(await monitor_list(client, name, scope_filter(thread_id=THREAD)))
    assert total == 3
    assert [key for key, _ in hits] == [f"{name}:mem:{ids[c]}" for c in ("newest", "middle", "oldest")]
    fields = dict(hits)[f"{name}:mem:{ids['oldest']}"]
    assert fields["content"] == "oldest"
    assert float(fields["importance"]) == pytest.approx(0.2)
    assert fields["tags"] == "pref,ui"
    assert fields["threadId"] == THREAD  # raw, not hashed or escaped
    assert fields["agentId"] == "agent/7"
    assert fields["namespace"] == "acme.prod"
    assert fields["source"] == "chat"
    assert int(fields["access_count"]) == 0
    assert_recent_ms(fields["created_at"])
    assert int(fields["last_accessed_at"]) >= int(fields["created_at"])

    total, _ = search_reply(await monitor_list(client, name, MATCH_ALL))
    assert total == 4
    total, hits = search_reply(
        await monitor_list(client, name, scope_filter(thread_id=THREAD, tags=["pref", "ui"]))
    )
    assert [key for key, _ in hits] == [f"{name}:mem:{ids['oldest']}"]
    total, hits = search_reply(
        await monitor_list(client, name, scope_filter(agent_id="agent/7", namespace="acme.prod"))
    )
    assert total == 1
    total, hits = search_reply(await monitor_list(client, name, MATCH_ALL, offset=1, limit=2))
    assert total == 4 and len(hits) == 2


async def test_get_tool(store: MemoryStore, client: Any, embed: TableEmbed) -> None:
    name = name_of(store)
    ids = await written(store, embed)
    raw = hash_reply(await client.execute_command("HGETALL", f"{name}:mem:{ids['oldest']}"))
    assert raw, "HGETALL <name>:mem:<id> of an id remember() returned must find the document"
    fields = {k: text(v) for k, v in raw.items() if k != "vector"}
    assert fields["content"] == "oldest"
    assert fields["threadId"] == THREAD
    assert fields["tags"] == "pref,ui"
    assert_recent_ms(fields["created_at"])
    assert len(raw["vector"]) == DIMS * 4  # float32


async def test_get_tool_sees_the_libraries_reinforcement(
    store: MemoryStore, client: Any, embed: TableEmbed
) -> None:
    name = name_of(store)
    ids = await written(store, embed)
    hits = await store.recall("q", thread_id=THREAD, k=1)
    assert [h.item.content for h in hits] == ["middle"]
    await store.close()  # flushes the access snapshot (a running store: within reinforce_write_interval)
    raw = hash_reply(await client.execute_command("HGETALL", f"{name}:mem:{ids['middle']}"))
    assert int(text(raw["access_count"])) == 1
    assert int(text(raw["last_accessed_at"])) >= int(text(raw["created_at"]))
    assert_recent_ms(text(raw["last_accessed_at"]))


async def test_recall_tool(store: MemoryStore, client: Any, embed: TableEmbed) -> None:
    name = name_of(store)
    ids = await written(store, embed)
    k = 2
    vector = struct.pack(f"<{DIMS}f", *at_distance(0.0))
    for filter_query, expected in (
        (scope_filter(thread_id=THREAD), ["middle", "newest", "oldest"]),
        (MATCH_ALL, ["elsewhere", "middle", "newest", "oldest"]),
    ):
        raw = await client.execute_command(
            "FT.SEARCH",
            f"{name}:mem:idx",
            f"{filter_query}=>[KNN {k * 4} @vector $vec AS __score]",
            "PARAMS",
            "2",
            "vec",
            vector,
            "LIMIT",
            "0",
            str(k * 4),
            "DIALECT",
            "2",
        )
        _, hits = search_reply(raw)
        by_id = {key.removeprefix(f"{name}:mem:"): fields for key, fields in hits}
        assert sorted(by_id[ids[c]]["content"] for c in expected) == sorted(expected)
        assert set(by_id) == {ids[c] for c in expected}
        for content in expected:
            distance = float(by_id[ids[content]]["__score"])
            assert distance == pytest.approx(float(embed_distance(content)), abs=1e-3)
            assert by_id[ids[content]]["threadId"] in (THREAD, "other")


def embed_distance(content: str) -> float:
    return {"oldest": 0.30, "middle": 0.10, "newest": 0.20, "elsewhere": 0.05}[content]


async def test_forget_tool_and_count_heals_after_a_direct_del(
    store: MemoryStore, client: Any, embed: TableEmbed
) -> None:
    name = name_of(store)
    ids = await written(store, embed)
    assert await store.count(thread_id=THREAD) == 3
    removed = await client.execute_command("DEL", f"{name}:mem:{ids['middle']}")
    assert removed == 1  # Monitor reports the memory as forgotten

    # the library agrees at once: count, get, recall
    assert await store.count(thread_id=THREAD) == 2
    assert await store.get(ids["middle"]) is None
    hits = await store.recall("q", thread_id=THREAD, threshold=2.0)
    assert sorted(h.item.content for h in hits) == ["newest", "oldest"]
    info = ft_info(await client.execute_command("FT.INFO", f"{name}:mem:idx"))
    assert int(info["num_docs"]) == 3
    # and later writes in the scope still count right
    await store.remember(embed.put("after", 0.4), thread_id=THREAD)
    assert await store.count(thread_id=THREAD) == 3


async def test_memory_proposal_forget_by_scope(store: MemoryStore, client: Any, embed: TableEmbed) -> None:
    name = name_of(store)
    await written(store, embed)

    async def monitor_forget_by_scope(**scope: Any) -> int:
        deleted = 0
        for _ in range(100):
            raw = await client.execute_command(
                "FT.SEARCH", f"{name}:mem:idx", scope_filter(**scope), "LIMIT", "0", "500", "DIALECT", "2"
            )
            _, hits = search_reply(raw)
            keys = [key for key, _ in hits]
            if not keys:
                break
            removed = int(await client.execute_command("DEL", *keys))
            deleted += removed
            if removed == 0:
                break
        return deleted

    assert await monitor_forget_by_scope(thread_id=THREAD, tags=["pref", "ui"]) == 1
    assert await store.count(thread_id=THREAD) == 2
    assert await monitor_forget_by_scope(thread_id=THREAD) == 2
    assert await store.count(thread_id=THREAD) == 0
    assert await store.count(thread_id="other") == 1
    hits = await store.recall("q", threshold=2.0)
    assert [h.item.content for h in hits] == ["elsewhere"]


# ======================================================================================
# Store names Monitor cannot show
# ======================================================================================


@pytest.mark.parametrize("bad", ["1store", "my store", "a/b", "{tagged}", "", "-dash", "naïve"])
async def test_store_names_monitor_cannot_show_are_refused(client: Any, embed: TableEmbed, bad: str) -> None:
    assert not INDEX_NAME_RE.match(f"{bad}:mem:idx")

    async def open_store() -> None:
        store = MemoryStore(client=client, name=bad, embed_fn=embed)
        try:
            await store.ensure_index()
        finally:
            await store.close()

    with pytest.raises(ValueError) as caught:  # at construction, or at the latest at ensure_index()
        await open_store()
    message = str(caught.value)
    assert repr(bad) in message or (bad and bad in message) or "name" in message.lower()


@pytest.mark.parametrize("good", ["_private", "app.v2-prod:eu", "A"])
async def test_store_names_monitor_can_show_are_accepted(
    client: Any, embed: TableEmbed, unique_name: str, good: str
) -> None:
    name = f"{good}{unique_name}" if good != "A" else f"A{unique_name}"
    assert INDEX_NAME_RE.match(f"{name}:mem:idx")
    store = MemoryStore(client=client, name=name, embed_fn=embed)
    try:
        await store.ensure_index()
        mid = await store.remember(embed.put("named", 0.1), thread_id="t")
        raw = hash_reply(await client.execute_command("HGETALL", f"{name}:mem:{mid}"))
        assert text(raw["content"]) == "named"
    finally:
        await store.close()


# ======================================================================================
# Spans: instrumentation scope, names, attributes (OTel SDK, in its own process)
# ======================================================================================

SPAN_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, math, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import valkey.asyncio as valkey

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    from betterdb_memory import MemoryStore, Fact

    url, name = sys.argv[1], sys.argv[2]

    def at(d):
        c = 1.0 - d
        return [c, math.sqrt(max(0.0, 1.0 - c * c)), 0.0, 0.0]

    TABLE = {"q": at(0.0), "close": at(0.1), "miss": [0.0, 0.0, 1.0, 0.0]}

    async def embed(text):
        return list(TABLE.get(text, [0.0, 0.0, 0.0, 1.0]))

    async def summarize(items):
        return "digest"

    async def extract(items):
        return [Fact(subject="s", statement="a fact")]

    async def main():
        client = valkey.Valkey.from_url(url)
        store = MemoryStore(client=client, name=name, embed_fn=embed)
        app = trace.get_tracer("my-agent-app")
        with app.start_as_current_span("chat.turn"):
            await store.ensure_index()
            mid = await store.remember("close", thread_id="t1")
            await store.remember("other", thread_id="t2")
            hits = await store.recall("q", thread_id="t1")
            assert [h.item.id for h in hits] == [mid], hits
            assert await store.recall("miss", thread_id="t1") == []
            await store.consolidate(mode="summary", summarize=summarize, thread_id="t2")
            await store.consolidate(mode="facts", extract_facts=extract, thread_id="t1")
            await store.forget(mid)
            await store.forget_by_scope(thread_id="t2")
        await store.close()
        await client.aclose()
        out = []
        for span in exporter.get_finished_spans():
            out.append({
                "name": span.name,
                "scope": span.instrumentation_scope.name if span.instrumentation_scope else "",
                "root": span.parent is None,
                "attributes": {k: v for k, v in (span.attributes or {}).items()
                               if isinstance(v, (str, bool, int, float))},
            })
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def run_span_script(valkey_url: str, name: str) -> list[dict[str, Any]]:
    env = dict(os.environ, BETTERDB_TELEMETRY="false", DO_NOT_TRACK="1")
    env.pop("OTEL_TRACES_EXPORTER", None)
    proc = subprocess.run(
        [sys.executable, "-c", SPAN_SCRIPT, valkey_url, name],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    spans: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return spans


def monitor_keeps(span: dict[str, Any]) -> bool:
    """otel-ingest.service.ts: @betterdb/* scopes, plus roots for context."""
    return span["scope"].startswith("@betterdb/") or span["root"]


def test_spans_reach_monitor(valkey_url: str, unique_name: str) -> None:
    spans = run_span_script(valkey_url, unique_name)
    library = [s for s in spans if s["name"] != "chat.turn"]
    assert library, "the library emitted no span"
    for span in library:
        assert monitor_keeps(span), f"Monitor drops {span['name']!r} (scope {span['scope']!r})"
        assert span["scope"].startswith("@betterdb/"), span  # kept even when not a root
        assert span["scope"] == "@betterdb/agent-memory", span
        assert span["name"].startswith("agent_memory."), span
        assert span["attributes"].get("cache.name") == unique_name, span
        # trace correlation: the instance is cache.key's prefix, else cache.name
        key = span["attributes"].get("cache.key")
        if isinstance(key, str) and ":" in key:
            assert key.split(":", 1)[0] == unique_name
    names = {s["name"] for s in library}
    assert {"agent_memory.remember", "agent_memory.recall", "agent_memory.consolidate"} <= names
    recalls = [s for s in library if s["name"] == "agent_memory.recall"]
    assert [s["attributes"].get("cache.hit") for s in recalls] == [True, False]
