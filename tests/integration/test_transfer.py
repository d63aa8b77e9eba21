"""Lossless export / import and in-place re-embedding, on the real engine (and through the CLI)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import valkey.asyncio as avalkey

from betterdb_memory import Fact, HashingEmbedder, MemoryStore
from betterdb_memory._env import URL_ENV_VARS
from betterdb_memory.core.keys import ConsolidationKeys, Scope
from betterdb_memory.errors import ConfigurationError, ConsolidationBusyError, ValidationError
from betterdb_memory.progress import NullProgress
from betterdb_memory.testing import ScriptedFactExtractor
from betterdb_memory.transfer import export_store, import_store, reembed
from betterdb_memory.transfer.reembed import _Run

pytestmark = pytest.mark.integration

# Keys that describe the store's deployment, not its data: not exported (README, Export).
# Bookkeeping, not data: the meta/config/stats hashes, and the journal of subject writes not
# yet taken off (tiers.subject_repair: its entries carry the time of each store's own writes).
_NOT_DATA = ("__mem_meta", "__mem_config", "__mem_stats", ":subj:pending")


async def dump(client: avalkey.Valkey, name: str) -> dict[str, tuple[str, Any, int]]:
    """Every key of store ``name`` as (type, value, PTTL), the name replaced by ``N`` in key names."""
    out: dict[str, tuple[str, Any, int]] = {}
    async for raw in client.scan_iter(match=f"{name}:*", count=1000):
        key = raw.decode()
        if any(part in key for part in _NOT_DATA) or key.endswith("lock"):
            continue
        kind = (await client.type(key)).decode()
        value: Any
        if kind == "hash":
            value = await client.hgetall(key)
        elif kind == "list":
            value = await client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(await client.smembers(key))
        elif kind == "zset":
            value = await client.zrange(key, 0, -1, withscores=True)
        else:
            value = await client.get(key)
        out[key.replace(name, "N")] = (kind, value, await client.pttl(key))
    return out


def same_store(a: dict[str, tuple[str, Any, int]], b: dict[str, tuple[str, Any, int]]) -> None:
    """Equal keys, types and values; TTLs within 1 s (time passes between the two dumps)."""
    assert sorted(a) == sorted(b)
    for key, (kind, value, ttl) in a.items():
        kind2, value2, ttl2 = b[key]
        assert (kind, value) == (kind2, value2), key
        assert (ttl < 0) == (ttl2 < 0) and abs(ttl - ttl2) <= 1000, (key, ttl, ttl2)


async def populate(store: MemoryStore) -> dict[str, str]:
    """Memories of every shape, recalled (access counts), a superseded fact, L1 turns; the ids by role."""
    ids = {
        "plain": await store.remember("Ada lives in Lisbon.", thread_id="ada"),
        "rich": await store.remember(
            "Ada prefers green tea in the morning.",
            importance=0.9,
            tags=["prefs", "drinks"],
            source="chat",
            ttl=3600,
            thread_id="ada",
            agent_id="assistant",
            namespace="acme",
            sensitivity="pii",
            metadata={"origin": "onboarding", "n": 3},
        ),
        "other": await store.remember("The quarterly report is due on Thursday.", importance=0.2),
    }
    await store.update(ids["other"], content="The quarterly report is due on Friday.", importance=0.3)
    await store.recall("green tea morning", namespace="acme", threshold=2.0)
    await store.recall("green tea morning", namespace="acme", threshold=2.0)
    await store.recall("Lisbon", thread_id="ada", threshold=2.0)
    first = ScriptedFactExtractor([Fact("home city", "Ada lives in Lisbon", date="2024-01-01")])
    await store.consolidate(mode="facts", extract_facts=first, thread_id="ada")
    ids["moved"] = await store.remember("Ada moved to Berlin.", thread_id="ada")
    second = ScriptedFactExtractor([Fact("home city", "Ada lives in Berlin", date="2024-06-01")])
    await store.consolidate(mode="facts", extract_facts=second, thread_id="ada")
    for n in range(3):
        await store.store_turn("t1", f"question {n}", f"answer {n}", agent_id="assistant")
    await store.store_turn("t2", "hello", "hi", agent_id=None)
    return ids


async def ranking(store: MemoryStore) -> list[list[tuple[str, float]]]:
    out = []
    for query in ("Where does Ada live?", "tea", "report due", "Berlin"):
        hits = await store.recall(query, threshold=2.0, k=10, reinforce=False)
        out.append([(h.item.id, h.score) for h in hits])
    return out


def same_ranking(a: list[list[tuple[str, float]]], b: list[list[tuple[str, float]]]) -> None:
    """The same hits in the same order, scores equal up to the recency that passed between the calls."""
    assert [[i for i, _ in hits] for hits in a] == [[i for i, _ in hits] for hits in b]
    assert [[s for _, s in hits] for hits in a] == [
        pytest.approx([s for _, s in hits], abs=1e-4) for hits in b
    ]


async def test_an_export_carries_the_exact_access_snapshot_the_documents_lag_behind(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """Reinforcement writes a document's access snapshot after a lag (tiers.reinforce); an
    export taken meanwhile writes the exact count and time, so the imported documents (what
    Monitor reads) hold them."""
    source = make_store(embedder=HashingEmbedder(64), reinforce_write_interval=3600)
    mid = await source.remember("Ada prefers green tea in the morning.", thread_id="ada")
    for _ in range(2):
        await source.recall("green tea morning", thread_id="ada", threshold=2.0)
    exact = await source.get(mid)
    assert exact is not None and exact.access_count == 2
    assert int(await client.hget(source.keys.doc(mid), "access_count")) == 0  # lagging
    buf = io.StringIO()
    await export_store(source, buf)
    target = make_store(name=unique_name + "_b", embedder=HashingEmbedder(64))
    await import_store(target, buf.getvalue().splitlines())
    count, last = await client.hmget(target.keys.doc(mid), "access_count", "last_accessed_at")
    assert (int(count), int(last)) == (2, exact.last_accessed_at)
    assert await target.get(mid) == exact


@pytest.mark.parametrize("vectors", [True, False], ids=["with-vectors", "re-embedded"])
async def test_round_trip_keeps_everything(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str, vectors: bool
) -> None:
    """Export then import under a new name: every key, field, count, TTL, history and turn is the same.

    (Write-through reinforcement, so the source's documents hold their exact access
    snapshot for the key-by-key comparison; a lagging source: the next test.)"""
    source = make_store(embedder=HashingEmbedder(64), reinforce_write_interval=0)
    ids = await populate(source)
    history = await source.fact_history("home city", thread_id="ada")
    assert [r.current for r in history] == [True, False]  # a superseded fact exists to carry over
    before = await ranking(source)

    buf = io.StringIO()
    exported = await export_store(source, buf, vectors=vectors)
    assert (exported.memories, exported.history) == (5, 1) and exported.keys >= 6
    lines = buf.getvalue().splitlines()
    header = json.loads(lines[0])
    assert header | {"exported_at": 0, "library": ""} == {
        "format": "betterdb-memory", "version": 1, "store": unique_name, "model_id": "hashing-v1-64",
        "dimensions": 64, "vectors": vectors, "exported_at": 0, "library": "",
    }  # fmt: skip
    assert json.loads(lines[-1]) == {
        "type": "end",
        "counts": {"memory": 5, "history": 1, "key": exported.keys},
    }

    target = make_store(name=unique_name + "_b", embedder=HashingEmbedder(64))
    imported = await import_store(target, lines)
    assert (imported.memories, imported.history, imported.keys) == (5, 1, exported.keys)
    assert imported.embedded == (0 if vectors else 6)
    same_store(await dump(client, unique_name), await dump(client, unique_name + "_b"))

    # Through the public API as well: times, counts, TTL, scope, history, L1.
    for mid in ids.values():
        assert await target.get(mid) == await source.get(mid)
        assert await target.history(mid) == await source.history(mid)
    assert [v.content for v in await target.history(ids["other"])] == [
        "The quarterly report is due on Thursday."
    ]
    rich = await target.get(ids["rich"])
    assert rich is not None and rich.access_count == 3 and rich.expires_at is not None
    assert rich.metadata == {"origin": "onboarding", "n": 3} and rich.tags == ["prefs", "drinks"]
    assert (
        abs(await client.pttl(target.keys.doc(ids["rich"])) - await client.pttl(source.keys.doc(ids["rich"])))
        < 1000
    )
    assert await target.fact_history("home city", thread_id="ada") == history
    assert await target.get_recent_turns("t1", agent_id="assistant") == await source.get_recent_turns(
        "t1", agent_id="assistant"
    )
    assert await target.get_session_metadata("t1", agent_id="assistant") == await source.get_session_metadata(
        "t1", agent_id="assistant"
    )
    same_ranking(await ranking(target), before)

    # Idempotent: importing again changes nothing.
    await import_store(target, lines)
    same_store(await dump(client, unique_name), await dump(client, unique_name + "_b"))


async def test_expired_rows_are_skipped_and_ttl_is_what_remains(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """A memory whose TTL ran out after the export is not imported; another keeps only what is left."""
    source = make_store(embedder=HashingEmbedder(64))
    short = await source.remember("short lived", ttl=1.5)
    long = await source.remember("long lived", ttl=60)
    buf = io.StringIO()
    await export_store(source, buf)
    await asyncio.sleep(1.6)
    target = make_store(name=unique_name + "_b", embedder=HashingEmbedder(64))
    res = await import_store(target, buf.getvalue().splitlines())
    assert (res.memories, res.expired) == (1, 1)
    assert await target.get(short) is None
    ttl = await client.pttl(target.keys.doc(long))
    assert 56_000 < ttl <= 58_500


async def test_scoped_export_and_bad_files(make_store: Callable[..., MemoryStore], unique_name: str) -> None:
    """A scope exports its memories only; a truncated, foreign or newer file is refused with a code."""
    source = make_store(embedder=HashingEmbedder(64))
    await populate(source)
    buf = io.StringIO()
    res = await export_store(source, buf, thread_id="ada")
    rows = [json.loads(line) for line in buf.getvalue().splitlines()[1:-1]]
    assert res.keys == 0 and {r["type"] for r in rows} == {"memory", "history"}
    assert all(r["fields"]["threadId"] == "ada" for r in rows)

    target = make_store(name=unique_name + "_b", embedder=HashingEmbedder(64))
    lines = buf.getvalue().splitlines()
    with pytest.raises(ValidationError, match="cut short") as cut:
        await import_store(target, lines[:-1])
    assert cut.value.code == "validation.import"
    assert await target.count() == len([r for r in rows if r["type"] == "memory"])  # what it held is in
    newer = json.dumps(json.loads(lines[0]) | {"version": 99})
    with pytest.raises(ValidationError, match="version 99"):
        await import_store(target, [newer, *lines[1:]])
    with pytest.raises(ValidationError, match="unknown row type"):
        await import_store(target, [lines[0], '{"type": "surprise"}'])
    with pytest.raises(ValidationError, match="not an exported state key"):
        await import_store(
            target, [lines[0], '{"type": "key", "key": "__mem_meta", "kind": "hash", "value": {}}']
        )
    # A progress without begin/advance/end: a typed error before anything is read or written.
    held = await target.count()
    for call in (
        export_store(source, io.StringIO(), progress=object()),  # type: ignore[arg-type]
        import_store(target, lines, progress=object()),  # type: ignore[arg-type]
        source.forget_by_scope(thread_id="ada", progress=object()),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValidationError) as bad:
            await call
        assert bad.value.code == "validation.type"
    assert await target.count() == held and await source.count(thread_id="ada") > 0


async def test_version_0_files_import_with_ids_and_times(
    make_store: Callable[..., MemoryStore], unique_name: str
) -> None:
    """A file the CLI wrote before the format had a header (MemoryItem rows) keeps its ids and times."""
    created = int(time.time() * 1000) - 86_400_000
    row = {
        "id": "legacy-1", "content": "Ada lives in Lisbon", "importance": 0.8, "created_at": created,
        "last_accessed_at": created + 1000, "access_count": 4, "tags": ["x"], "source": None,
        "thread_id": "ada", "agent_id": None, "namespace": None, "sensitivity": "none", "kind": "memory",
        "subject": None, "expires_at": None, "metadata": {"k": 1}, "date": None, "model_id": "other",
    }  # fmt: skip
    target = make_store(embedder=HashingEmbedder(64))
    res = await import_store(target, [json.dumps(row)])
    assert (res.version, res.memories, res.embedded) == (0, 1, 1)
    item = await target.get("legacy-1")
    assert item is not None
    assert (item.created_at, item.last_accessed_at, item.access_count) == (created, created + 1000, 4)
    assert (item.tags, item.thread_id, item.metadata, item.importance) == (["x"], "ada", {"k": 1}, 0.8)
    assert (await target.recall("Lisbon", thread_id="ada", threshold=2.0))[0].item.id == "legacy-1"


# -- re-embedding ---------------------------------------------------------------------------


async def stored_vector(client: avalkey.Valkey, key: str) -> list[float]:
    return np.frombuffer(await client.hget(key, "vector"), dtype="<f4").tolist()


async def embedding(text: str) -> list[float]:
    return [float(x) for x in (await HashingEmbedder(32).embed([text]))[0]]


async def vector_lengths(client: avalkey.Valkey, keys: Sequence[str]) -> set[int]:
    return {await client.hstrlen(k, "vector") for k in keys}


async def test_reembed_moves_the_store_to_the_new_model(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """64-d to 32-d in place: same index name, prefix and field; the meta names the new model; all kept."""
    old = make_store(embedder=HashingEmbedder(64))
    ids = await populate(old)
    items = {mid: await old.get(mid) for mid in ids.values()}
    superseded = (await old.fact_history("home city", thread_id="ada"))[1].id
    hist_key = ConsolidationKeys(old.keys, Scope()).hist_doc(superseded)

    res = await reembed(old, HashingEmbedder(32), batch=2)
    assert (res.model_id, res.dimensions, res.previous_model_id) == ("hashing-v1-32", 32, "hashing-v1-64")
    assert res.embedded == 5 + 1 and res.fixed == 0 and res.history == 1 and not res.already
    assert res.unavailable_seconds > 0 and res.backfill_seconds >= 0

    meta = {k.decode(): v.decode() for k, v in (await client.hgetall(old.keys.meta)).items()}
    assert (meta["model_id"], meta["dimensions"], meta["index"]) == (
        "hashing-v1-32",
        "32",
        f"{unique_name}:mem:idx",
    )
    assert await vector_lengths(client, [old.keys.doc(m) for m in ids.values()] + [hist_key]) == {32 * 4}
    leftovers = [k async for k in client.scan_iter(match=f"{unique_name}:__mem_reembed*")]
    assert leftovers == []
    with pytest.raises(ConfigurationError) as refused:  # the old model no longer opens the store
        await old.recall("Ada", threshold=2.0)
    assert refused.value.code == "configuration.model_mismatch"

    new = make_store(embedder=HashingEmbedder(32))
    info = await new.index_info()
    assert info is not None and info.dimensions == 32 and info.num_docs == 5
    hits = await new.recall("green tea in the morning", namespace="acme", reinforce=False)
    assert hits[0].item.id == ids["rich"]
    hits = await new.recall("Ada moved to Berlin", thread_id="ada", reinforce=False)
    assert hits[0].item.id == ids["moved"]
    for mid, item in items.items():
        assert await new.get(mid) == item  # times, counts and every field unchanged
    assert [r.current for r in await new.fact_history("home city", thread_id="ada")] == [True, False]
    again = await reembed(new, HashingEmbedder(32))
    assert again.already and again.embedded == 0


class FailingEmbedder:
    """HashingEmbedder(32) that raises on embedding call ``fail_at`` (a model outage half-way)."""

    def __init__(self, fail_at: int) -> None:
        self.inner = HashingEmbedder(32)
        self.calls = 0
        self.fail_at = fail_at
        self.texts = 0

    @property
    def dimensions(self) -> int:
        return 32

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("model endpoint down")
        self.texts += len(texts)
        return await self.inner.embed(texts)


async def test_reembed_resumes_after_a_failure_with_no_loss(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """The model fails after 3 batches; recall still works on the old index; a re-run finishes the rest."""
    old = make_store(embedder=HashingEmbedder(64))
    contents = [f"memory number {n} about topic {n % 7}" for n in range(50)]
    ids = await old.remember_many(contents)
    created = {mid: (await old.get(mid)).created_at for mid in ids}  # type: ignore[union-attr]

    failing = FailingEmbedder(fail_at=4)
    with pytest.raises(RuntimeError, match="endpoint down"):
        await reembed(old, failing, batch=8)
    # 3 batches of at most 8 (SCAN decides how the keys come, so a batch may hold fewer).
    done_before = failing.texts
    assert 3 <= done_before <= 24
    state = await client.hgetall(f"{unique_name}:__mem_reembed")
    assert state[b"phase"] == b"embedding" and state[b"model_id"] == b"hashing-v1-32"
    # Nothing switched yet: the old model still recalls on the old index.
    assert (await old.recall("memory number 7 about topic 0", reinforce=False))[0].item.content == contents[7]

    working = FailingEmbedder(fail_at=0)
    res = await reembed(old, working, batch=8)
    assert res.resumed and res.embedded == working.texts == 50 - done_before  # nothing twice, nothing lost

    new = make_store(embedder=HashingEmbedder(32))
    assert await new.count() == 50
    assert await vector_lengths(client, [new.keys.doc(m) for m in ids]) == {32 * 4}
    for n in (0, 13, 49):
        hits = await new.recall(contents[n], reinforce=False)
        assert hits[0].item.id == ids[n] and hits[0].item.created_at == created[ids[n]]
        assert await stored_vector(client, new.keys.doc(ids[n])) == pytest.approx(
            await embedding(contents[n])
        )


async def test_reembed_switching_to_a_third_model_is_refused_until_finished(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """A move cut during the switch must be finished with its model; an abandoned embed phase is discarded."""
    old = make_store(embedder=HashingEmbedder(64))
    await old.remember_many(["one", "two", "three"])
    with pytest.raises(RuntimeError):
        await reembed(old, FailingEmbedder(fail_at=2), batch=1)
    # Another model while still embedding: the abandoned side vectors are dropped, and it completes.
    res = await reembed(old, HashingEmbedder(48))
    assert not res.resumed and res.embedded == 3
    await client.hset(
        f"{unique_name}:__mem_reembed", mapping={"model_id": "x", "dimensions": "8", "phase": "switching"}
    )
    with pytest.raises(ConfigurationError) as busy:
        await reembed(old, HashingEmbedder(16))
    assert busy.value.code == "configuration.reembed_in_progress"
    await client.delete(f"{unique_name}:__mem_reembed")
    # One run at a time: a second one waits for the lock, then gives up with a typed error.
    async with old.backend.lock(f"{unique_name}:__mem_reembed:lock", ttl=30, wait=1):
        with pytest.raises(ConsolidationBusyError):
            await reembed(old, HashingEmbedder(16), lock_wait=0.2)


async def test_a_memory_edited_after_its_new_vector_was_made_gets_one_of_its_new_text(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """The switch checks each side vector against its content (SHA-1); a stale one is replaced."""
    old = make_store(embedder=HashingEmbedder(64))
    mid = await old.remember("Ada lives in Lisbon")
    run = _Run(old, HashingEmbedder(32), 8, NullProgress())
    await run.embed_pass("memory", "embed", None)
    await client.hset(
        run.state_key, mapping={"model_id": "hashing-v1-32", "dimensions": "32", "phase": "switching"}
    )
    await client.hset(old.keys.doc(mid), "content", "Grace writes compilers")  # another client, meanwhile
    res = await reembed(old, HashingEmbedder(32))
    assert res.resumed and res.embedded == 1  # the stale side vector was embedded again
    assert await stored_vector(client, old.keys.doc(mid)) == pytest.approx(
        await embedding("Grace writes compilers")
    )
    assert [k async for k in client.scan_iter(match=f"{unique_name}:__mem_reembed*")] == []


# -- the CLI, through the installed entry point --------------------------------------------------

ENTRY_POINT = Path(sys.executable).with_name("betterdb-memory")


def cli(*argv: str) -> tuple[int, str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in URL_ENV_VARS}
    done = subprocess.run(
        [str(ENTRY_POINT), *argv], capture_output=True, text=True, env=environ, timeout=180, check=False
    )
    return done.returncode, done.stdout, done.stderr


def test_cli_export_import_reembed(valkey_url: str, unique_name: str, tmp_path: Path) -> None:
    """``export`` / ``import`` / ``reembed`` with ``--json``: JSON on stdout, progress lines on stderr."""
    common = ("--url", valkey_url, "--embedder", "hashing", "--json")
    ids = []
    for text in ("Ada lives in Lisbon", "Grace writes compilers"):
        code, out, err = cli(
            *common, "--name", unique_name, "remember", text, "--thread", "t", "--ttl", "600"
        )
        assert code == 0, err
        ids.append(json.loads(out)["id"])
    dump_file = tmp_path / "store.jsonl"
    code, out, err = cli(*common, "--name", unique_name, "export", str(dump_file), "--vectors")
    assert code == 0, err
    assert json.loads(out) | {"keys": 0} == {
        "memories": 2,
        "history": 0,
        "keys": 0,
        "expired": 0,
        "vectors": True,
    }
    assert "export memories: done, 2 in" in err  # not a terminal: plain lines
    header = json.loads(dump_file.read_text().splitlines()[0])
    assert (header["model_id"], header["dimensions"]) == ("hashing-v1-384", 384)

    other = unique_name + "_b"
    code, out, err = cli(*common, "--name", other, "import", str(dump_file))
    assert code == 0, err
    assert json.loads(out) == {
        "memories": 2,
        "history": 0,
        "keys": 0,
        "embedded": 0,
        "expired": 0,
        "version": 1,
    }
    assert "import: done, 4 in" in err
    code, out, err = cli(*common, "--name", other, "list", "--json")
    listed = json.loads(out)["items"]
    code, out, err = cli(*common, "--name", unique_name, "list", "--json")
    assert sorted(map(json.dumps, listed)) == sorted(map(json.dumps, json.loads(out)["items"]))

    code, out, err = cli(*common, "--name", other, "--dimensions", "64", "reembed", "--batch", "1")
    assert code == 0, err
    res = json.loads(out)
    assert (res["model_id"], res["previous_model_id"], res["embedded"]) == (
        "hashing-v1-64",
        "hashing-v1-384",
        2,
    )
    assert "reembed: embed: done, 2 in" in err
    code, out, err = cli(
        *common, "--name", other, "--dimensions", "64", "recall", "Ada lives in Lisbon", "--threshold", "2"
    )
    assert code == 0, err
    assert json.loads(out)[0]["id"] in ids
    code, out, err = cli(*common, "--name", other, "recall", "Where does Ada live?")  # 384-d: refused
    assert code == 2 and "configuration.model_mismatch" in err

    # Export to standard output: the JSONL alone on stdout, the summary on stderr.
    code, out, err = cli(*common, "--name", other, "--dimensions", "64", "export", "-")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0]["dimensions"] == 64 and rows[-1]["type"] == "end" and '"memories": 2' in err
