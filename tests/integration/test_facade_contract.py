"""The ``AgentMemory`` facade contract of betterdb-agent-memory 0.7.0 (seed 003), on the real engine.

The seed README's quick start runs with only its import changed; ``AgentMemoryOptions``
reaches both tiers; ``initialize()`` / ``close()`` do what the reference's do (index,
discovery of both tiers, config refresh; both torn down even if one fails); the cache
tiers are betterdb-agent-cache's own (``check`` / ``store`` ..., its keys, its Monitor
marker); its product analytics stay off unless asked for.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import valkey.asyncio as avalkey
from betterdb_agent_cache import AgentCache, LlmStoreOptions, TierDefaults, ToolPolicy
from betterdb_agent_cache.errors import AgentCacheUsageError
from betterdb_agent_cache.types import AnalyticsOptions, DiscoveryOptions
from prometheus_client import CollectorRegistry

from betterdb_memory import (
    AgentMemory,
    AgentMemoryClosedError,
    AgentMemoryConfig,
    AgentMemoryOptions,
    AgentMemoryRecallConfig,
    ConfigurationError,
    HashingEmbedder,
    MemoryConfigRefreshConfig,
    MemoryStore,
    RecallWeights,
)
from betterdb_memory.facade import _resolve_analytics

from .test_l1_support import keys_of

pytestmark = pytest.mark.integration

SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "003_14b50c5030df8f9e.txt"
REGISTRY = "__betterdb:caches"

_hashing = HashingEmbedder()


async def embed(text: str) -> list[float]:
    return [float(x) for x in (await _hashing.embed([text]))[0]]


def _opts(client: Any, name: str, **kw: Any) -> AgentMemoryOptions:
    return AgentMemoryOptions(client=client, name=name, embed_fn=embed, **kw)


async def _hget(client: Any, key: str, field: str) -> str | None:
    raw = await client.hget(key, field)
    return None if raw is None else raw.decode() if isinstance(raw, bytes) else raw


# -- the seed README, verbatim but for the import -----------------------------------------


def _quick_start_block() -> str:
    text = SEED.read_text(encoding="utf-8")
    start = text.index("## Quick start")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)  # type: ignore[union-attr]


@pytest.mark.skipif(not SEED.exists(), reason="seed README not beside the repository")
def test_seed_quick_start_runs_with_only_the_import_changed(valkey_url: str, tmp_path: Path) -> None:
    """The block as written; the import line changed, ``embed`` filled, and the
    ``localhost:6379`` of the example pointed at the test server. Run in a fresh
    interpreter (its own loop, DO_NOT_TRACK unset) and check what it printed and wrote."""
    block = _quick_start_block()
    assert "from betterdb_agent_memory import AgentMemory, AgentMemoryOptions" in block
    code = block.replace("from betterdb_agent_memory import", "from betterdb_memory import")
    # The placeholder body: a toy embedding that puts both texts of the example close.
    code = code.replace(
        "    # Replace with a real embedding model (OpenAI, sentence-transformers, ...).\n    ...\n",
        "    words = text.lower().replace('?', ' ').replace('.', ' ').split()\n"
        "    return [1.0] + [0.05 * words.count(w) for w in ('user', 'ui', 'dark', 'mode')]\n",
    )
    url = urlsplit(valkey_url)
    host, port = url.hostname, url.port or 6379
    code = code.replace('host="localhost", port=6379', f'host="{host}", port={port}')
    assert code.count("from betterdb_memory import") == 1 and "..." not in code
    name = "betterdb_ac"  # the example's default name; this test cleans it up after
    script = tmp_path / "quick_start.py"
    script.write_text(
        code
        + textwrap.dedent(
            f"""
            import asyncio, json, sys
            async def _after():
                c = valkey.Valkey(host="{host}", port={port}, decode_responses=True)
                reg = await c.hgetall("__betterdb:caches")
                out = {{
                    "registry": sorted(k for k in reg if k in ("{name}", "{name}:mem")),
                    "instance_id": await c.exists("{name}:__instance_id"),
                    "posthog": "posthog" in sys.modules,
                    "heartbeat_left": await c.exists("__betterdb:heartbeat:{name}"),
                }}
                for k in [k async for k in c.scan_iter(match="{name}:*")]:
                    await c.delete(k)
                try:
                    await c.execute_command("FT.DROPINDEX", "{name}:mem:idx")
                except Exception:
                    pass
                await c.aclose()
                print("AFTER", json.dumps(out))
            asyncio.run(main())
            asyncio.run(_after())
            """
        ),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DO_NOT_TRACK", "BETTERDB_TELEMETRY")}
    env["HOME"] = str(tmp_path)  # agent-cache analytics would write ~/.betterdb/instance_id
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    hit = [line for line in lines if line.endswith("User prefers dark mode and concise answers.")]
    assert len(hit) == 1, done.stdout
    assert 0 < float(hit[0].split()[0]) <= 1
    after = json.loads(lines[-1].removeprefix("AFTER "))
    assert after == {
        "registry": [name, f"{name}:mem"],
        "instance_id": 0,
        "posthog": False,
        "heartbeat_left": 0,
    }
    assert not (tmp_path / ".betterdb").exists()


# -- options reach their tier ---------------------------------------------------------------


async def test_options_reach_the_memory_store(client: Any, unique_name: str) -> None:
    """Every ``AgentMemoryConfig`` field lands on the store the facade builds."""
    weights = RecallWeights(similarity=0.5, recency=0.3, importance=0.2)
    registry = CollectorRegistry()
    opts = _opts(
        client,
        unique_name,
        memory=AgentMemoryConfig(
            default_threshold=0.5,
            recall=AgentMemoryRecallConfig(weights=weights, half_life_seconds=3600),
            max_items_per_scope=7,
            discovery=False,
            config_refresh=MemoryConfigRefreshConfig(enabled=True, interval_ms=1000),
        ),
    )
    opts.telemetry.registry = registry
    agent = AgentMemory(opts)
    try:
        assert isinstance(agent.memory, MemoryStore) and agent.memory.name == unique_name
        assert agent.memory.client is client
        cfg = agent.memory.current_config()
        assert cfg.threshold == 0.5 and cfg.half_life_seconds == 3600 and cfg.max_items_per_scope == 7
        assert (cfg.weights.similarity, cfg.weights.recency, cfg.weights.importance) == (0.5, 0.3, 0.2)
        await agent.initialize()
        # discovery=False: no memory marker; the cache tiers' marker is independent.
        assert await _hget(client, REGISTRY, f"{unique_name}:mem") is None
        assert json.loads(await _hget(client, REGISTRY, unique_name) or "{}")["type"] == "agent_cache"
        # config refresh runs at the configured period
        await client.hset(f"{unique_name}:__mem_config", "recall.threshold", "1.25")
        for _ in range(40):
            if agent.memory.current_config().threshold == 1.25:
                break
            await asyncio.sleep(0.1)
        assert agent.memory.current_config().threshold == 1.25
        # one registry for both tiers' metrics
        await agent.memory.remember("hello there", thread_id="t")
        await agent.memory.recall("hello", thread_id="t")
        await agent.llm.check({"model": "m", "messages": [{"role": "user", "content": "x"}]})
        families = {m.name for m in registry.collect()}
        assert any(f.startswith("agent_memory") for f in families), families
        assert any(f.startswith("agent_cache") for f in families), families
    finally:
        await agent.close()


async def test_cache_options_reach_the_cache_tiers(client: Any, unique_name: str) -> None:
    """``default_ttl`` / ``tier_defaults`` / ``cost_table`` are AgentCacheOptions' own."""
    from betterdb_agent_cache import ModelCost

    agent = AgentMemory(
        _opts(
            client,
            unique_name,
            default_ttl=600,
            tier_defaults={"llm": TierDefaults(ttl=120)},
            cost_table={"m": ModelCost(input_per_1k=1.0, output_per_1k=2.0)},
        )
    )
    try:
        await agent.initialize()
        params = {"model": "m", "messages": [{"role": "user", "content": "2+2?"}], "temperature": 0}
        assert (await agent.llm.check(params)).hit is False
        key = await agent.llm.store(params, "4", LlmStoreOptions(tokens={"input": 1000, "output": 500}))
        assert key.startswith(f"{unique_name}:llm:")
        assert 110 < await client.ttl(key) <= 120
        hit = await agent.llm.check({**params, "messages": [{"content": "2+2?", "role": "user"}]})
        assert hit.hit and hit.response == "4" and hit.output_tokens == 500
        tool_key = await agent.tool.store("weather", {"city": "Oslo"}, '{"t": -3}')
        assert tool_key.startswith(f"{unique_name}:tool:weather:") and 590 < await client.ttl(tool_key) <= 600
        stats = await agent.cache.stats()
        assert (stats.llm.hits, stats.llm.misses) == (1, 1) and stats.cost_saved_micros == 2_000_000
    finally:
        await agent.close()


async def test_options_form_accepts_keyword_and_foreign_options(client: Any, unique_name: str) -> None:
    """``AgentMemory(options=...)`` as in the reference's signature; refusals are typed."""
    agent = AgentMemory(options=_opts(client, unique_name))
    await agent.close()
    with pytest.raises(ConfigurationError):
        AgentMemory(_opts(client, unique_name), client=client)
    with pytest.raises(ConfigurationError):
        AgentMemory(AgentMemoryOptions(client=None, embed_fn=embed))
    with pytest.raises(ValueError, match="embed_fn"):  # the reference raises ValueError here too
        AgentMemory(AgentMemoryOptions(client=client, name=unique_name))
    assert AgentMemoryOptions(client=client, embed_fn=embed).name == "betterdb_ac"


# -- lifecycle --------------------------------------------------------------------------------


async def test_initialize_readies_index_discovery_and_config(client: Any, unique_name: str) -> None:
    agent = AgentMemory(_opts(client, unique_name))
    try:
        await agent.initialize()
        await agent.initialize()  # idempotent
        info = await client.execute_command("FT.INFO", f"{unique_name}:mem:idx")
        assert info
        mem = json.loads(await _hget(client, REGISTRY, f"{unique_name}:mem") or "{}")
        cache = json.loads(await _hget(client, REGISTRY, unique_name) or "{}")
        assert mem["type"] == "agent_memory" and cache["type"] == "agent_cache"
        assert mem["prefix"] == cache["prefix"] == unique_name
        # both tiers alive for Monitor (the cache heartbeat is the facade's, see facade.py)
        assert await client.exists(f"__betterdb:heartbeat:{unique_name}:mem")
        assert await client.exists(f"__betterdb:heartbeat:{unique_name}")
        assert 0 < await client.ttl(f"__betterdb:heartbeat:{unique_name}") <= 60
        assert await client.get("__betterdb:protocol") in (b"1", "1")
        # tool policies written by Monitor's cache proposals are picked up (refresh on start)
        await client.hset(f"{unique_name}:__tool_policies", "search", json.dumps({"ttl": 42}))
        await agent.tool.refresh_policies()
        assert agent.tool.get_policy("search") == ToolPolicy(ttl=42)
    finally:
        await agent.close()
    assert not await client.exists(f"__betterdb:heartbeat:{unique_name}")
    assert not await client.exists(f"__betterdb:heartbeat:{unique_name}:mem")
    assert await _hget(client, REGISTRY, unique_name) is not None  # history kept for Monitor


async def test_initialize_surfaces_a_cache_name_collision(client: Any, unique_name: str) -> None:
    await client.hset(REGISTRY, unique_name, json.dumps({"type": "semantic_cache", "prefix": unique_name}))
    agent = AgentMemory(_opts(client, unique_name))
    try:
        with pytest.raises(AgentCacheUsageError, match="collision"):
            await agent.initialize()
    finally:
        await agent.close()
        await client.hdel(REGISTRY, unique_name)


async def test_built_outside_an_event_loop_still_registers(client: Any, unique_name: str) -> None:
    """AgentCache starts discovery only inside a running loop; initialize() makes up for it."""
    agent = await asyncio.to_thread(AgentMemory, _opts(client, unique_name))
    try:
        await agent.initialize()
        assert json.loads(await _hget(client, REGISTRY, unique_name) or "{}")["type"] == "agent_cache"
        assert isinstance(agent.cache, AgentCache)
        await agent.session.set("t", "step", "1")
        assert await agent.session.get("t", "step") == "1"
    finally:
        await agent.close()


async def test_the_cache_marker_waits_for_the_memory_index(client: Any, unique_name: str) -> None:
    """The cache tiers register with Monitor once the memory index exists for this user (so a
    user never writes the marker of a name it cannot use; test_tenants.py): at the memory tier's
    first operation without ``initialize()``, or at once around a store that is ready already.
    Cache calls alone do not register it (they never touch the memory index)."""
    agent = AgentMemory(_opts(client, unique_name))
    try:
        await agent.llm.check({"model": "m", "messages": [{"role": "user", "content": "x"}]})
        await agent.cache.ensure_discovery_ready()
        assert await _hget(client, REGISTRY, unique_name) is None  # cache calls alone: no marker
        await agent.memory.remember("the index is readied by this first write")
        await agent.cache.ensure_discovery_ready()
        assert json.loads(await _hget(client, REGISTRY, unique_name) or "{}")["type"] == "agent_cache"
    finally:
        await agent.close()
    await client.hdel(REGISTRY, unique_name)
    store = MemoryStore(client=client, name=unique_name, embed_fn=embed)
    await store.ensure_index()
    around = AgentMemory(store=store)
    try:
        await around.cache.ensure_discovery_ready()
        assert json.loads(await _hget(client, REGISTRY, unique_name) or "{}")["type"] == "agent_cache"
    finally:
        await around.close()


class _Boom(Exception):
    pass


async def test_close_tears_down_both_tiers_even_if_one_fails(
    client: Any, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = AgentMemory(_opts(client, unique_name))
    await agent.initialize()

    async def fail() -> None:
        raise _Boom

    cache = agent.cache
    monkeypatch.setattr(cache, "shutdown", fail)
    with pytest.raises(_Boom):
        await agent.close()
    assert agent.closed
    # the store was still closed: its heartbeat is gone
    assert not await client.exists(f"__betterdb:heartbeat:{unique_name}:mem")
    await AgentCache.shutdown(cache)  # what the failed call left running

    other = AgentMemory(_opts(client, unique_name + "b"))
    await other.initialize()
    store = other.memory
    monkeypatch.setattr(store, "close", fail)
    with pytest.raises(_Boom):
        await other.close()
    assert not await client.exists(f"__betterdb:heartbeat:{unique_name}b")  # cache tier stopped
    await MemoryStore.close(store)


async def test_calls_after_close_raise_a_clear_error(client: Any, unique_name: str) -> None:
    agent = AgentMemory(_opts(client, unique_name))
    await agent.initialize()
    await agent.close()
    await agent.close()  # idempotent
    for attr in ("memory", "llm", "tool", "session", "cache"):
        with pytest.raises(AgentMemoryClosedError, match="closed"):
            getattr(agent, attr)
    with pytest.raises(AgentMemoryClosedError):
        await agent.initialize()
    with pytest.raises(AgentMemoryClosedError):
        await agent.erase(agent_id="a")
    assert issubclass(AgentMemoryClosedError, RuntimeError)


# -- product analytics -----------------------------------------------------------------------


def test_cache_analytics_are_off_unless_asked_and_do_not_track_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    assert AgentMemoryOptions(client=object(), embed_fn=embed).analytics.disabled is True
    assert _resolve_analytics(None).disabled is True
    assert _resolve_analytics(AnalyticsOptions(disabled=False)).disabled is False  # explicitly on
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    asked = AnalyticsOptions(disabled=False, stats_interval_s=7)
    resolved = _resolve_analytics(asked)
    assert resolved.disabled is True and resolved.stats_interval_s == 7 and asked.disabled is False


async def test_facade_keeps_the_cache_analytics_off(client: Any, unique_name: str) -> None:
    """Default options: no PostHog client, no install id in Valkey."""
    agent = AgentMemory(_opts(client, unique_name))
    try:
        await agent.initialize()
        await asyncio.sleep(0.05)  # let AgentCache's fire-and-forget analytics init run
        assert not await client.exists(f"{unique_name}:__instance_id")
        # (That posthog is never imported is checked in a fresh interpreter below: in this
        # process another test may have imported it already.)
    finally:
        await agent.close()


# -- this library's forms beside the reference's -------------------------------------------


async def test_keyword_store_and_connect_forms_share_the_cache_api(
    client: Any, valkey_url: str, unique_name: str
) -> None:
    agent = AgentMemory(
        client=client, name=unique_name, embedder=HashingEmbedder(), tier_defaults={"tool": TierDefaults(ttl=30)},
        cache_discovery=DiscoveryOptions(enabled=False),
    )  # fmt: skip
    async with agent:
        key = await agent.tool.store("search", {"q": "a"}, "r")
        assert 0 < await client.ttl(key) <= 30
        assert await _hget(client, REGISTRY, unique_name) is None
    assert agent.closed

    store = MemoryStore(client=client, name=unique_name + "s", embedder=HashingEmbedder())
    wrapped = AgentMemory(store=store)
    async with wrapped:
        assert wrapped.memory is store and wrapped.name == unique_name + "s"
        assert (await wrapped.llm.check({"model": "m", "messages": []})).hit is False

    connected = await AgentMemory.connect(valkey_url, name=unique_name + "c", embedder=HashingEmbedder())
    async with connected:
        await connected.session.set("t", "k", "v")
        assert await connected.session.get_all("t") == {"k": "v"}
        owned = connected.memory
    assert owned._owned_client
    c2 = avalkey.Valkey.from_url(valkey_url)
    try:
        assert await keys_of(c2, unique_name + "c")
    finally:
        await c2.aclose()


def test_the_cache_tiers_public_names_are_re_exported() -> None:
    """betterdb-agent-memory re-exports betterdb-agent-cache's names; so does this package."""
    import betterdb_agent_cache

    import betterdb_memory

    for name in betterdb_agent_cache.__all__:
        assert getattr(betterdb_memory, name) is getattr(betterdb_agent_cache, name), name
        assert name in betterdb_memory.__all__, name
    assert betterdb_memory.AnalyticsOptions is AnalyticsOptions
    assert issubclass(AgentMemoryOptions, betterdb_agent_cache.AgentCacheOptions)
