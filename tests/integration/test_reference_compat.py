"""One store, two libraries: betterdb-agent-memory 0.7.0 (the reference) and this one.

A store the reference created and wrote (its own ``ensure_index``, on the session
server) is opened by ``betterdb_memory.MemoryStore`` under the same name and used as it
is: recall, count, get, list, forget, forget_by_scope and consolidate work on its
documents, exact scopes stay exact on its case-insensitive TAG fields, and this
library's writes land in the same index, where the reference reads them back with the
right fields. The other way round too: the reference reads and writes a store this
library created.

Needs the ``compat`` extra (``pip install -e .[compat]``); skipped without it.

The reference's ``get`` decodes every hash field as UTF-8, so it crashes on a float32
vector whose bytes are not valid UTF-8 (a bug of the reference, not part of the
contract). The embedding here only uses the components 0 and 0.5 (float32 bytes
``00 00 00 3f``), which are valid UTF-8, so that the reference's ``get`` can be used
to read this library's documents back.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import betterdb_memory
from betterdb_memory import MemoryStore

ref = pytest.importorskip(
    "betterdb_agent_memory",
    reason="betterdb-agent-memory 0.7.0 is not installed (pip install -e .[compat])",
)

pytestmark = pytest.mark.integration

DIMS = 16
QUERY = "q"


def halves(*positions: int) -> list[float]:
    """A unit vector: 0.5 at four positions (float32 bytes that are valid UTF-8)."""
    assert len(positions) == 4
    vector = [0.0] * DIMS
    for p in positions:
        vector[p] = 0.5
    return vector


# cosine distance from QUERY = 1 - overlap / 4
NEAR = {
    QUERY: halves(0, 1, 2, 3),
    "d000": halves(0, 1, 2, 3),
    "d025": halves(0, 1, 2, 4),
    "d025b": halves(0, 1, 3, 5),
    "d050": halves(0, 1, 4, 5),
    "d075": halves(0, 4, 5, 6),
}


class HalvesEmbed:
    def __init__(self) -> None:
        self.table: dict[str, list[float]] = dict(NEAR)

    def like(self, text: str, template: str) -> str:
        self.table[text] = list(NEAR[template])
        return text

    async def __call__(self, text: str) -> list[float]:
        if text in self.table:
            return list(self.table[text])
        h = zlib.crc32(text.encode())
        positions = sorted({8 + (h >> (3 * i)) % 8 for i in range(10)})[:4]
        while len(positions) < 4:
            positions.append(next(p for p in range(8, 16) if p not in positions))
        return halves(*positions)


@pytest.fixture(autouse=True)
def no_product_analytics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BETTERDB_TELEMETRY", "false")
    monkeypatch.setenv("DO_NOT_TRACK", "1")


@pytest.fixture
def embed() -> HalvesEmbed:
    return HalvesEmbed()


@pytest.fixture
async def pair(
    client: Any, unique_name: str, embed: HalvesEmbed
) -> AsyncIterator[Callable[[], tuple[Any, MemoryStore]]]:
    """(reference store, our store), same client, same name; both closed after the test."""
    made: list[Any] = []

    def factory() -> tuple[Any, MemoryStore]:
        theirs = ref.MemoryStore(
            client=client,
            name=unique_name,
            embed_fn=embed,
            analytics=False,
            telemetry=ref.MemoryTelemetryOptions(registry=CollectorRegistry()),
        )
        ours = MemoryStore(client=client, name=unique_name, embed_fn=embed)
        made.extend([theirs, ours])
        return theirs, ours

    try:
        yield factory
    finally:
        for store in made:
            await store.close()


def by_content(items: list[Any]) -> dict[str, Any]:
    return {item.content: item for item in items}


def same_fields(a: Any, b: Any) -> None:
    """A reference MemoryItem and ours describe the same document."""
    assert a.id == b.id
    assert a.content == b.content
    assert a.importance == pytest.approx(b.importance)
    assert list(a.tags) == list(b.tags)
    assert a.created_at == b.created_at
    assert a.source == b.source
    assert (a.thread_id, a.agent_id, a.namespace) == (b.thread_id, b.agent_id, b.namespace)


async def write_reference_corpus(theirs: Any, embed: HalvesEmbed) -> dict[str, str]:
    ids = {}
    ids["a"] = await theirs.remember(
        embed.like("alice's first", "d000"),
        importance=0.9,
        tags=["x", "y"],
        source="chat",
        thread_id="alice",
        agent_id="bot",
        namespace="prod",
    )
    await asyncio.sleep(0.005)
    ids["b"] = await theirs.remember(embed.like("alice's second", "d025"), tags=["x"], thread_id="alice")
    ids["A"] = await theirs.remember(embed.like("other Alice", "d000"), thread_id="Alice")
    ids["bob"] = await theirs.remember(embed.like("bob's", "d050"), thread_id="bob", tags=["x", "y"])
    return ids


# ======================================================================================
# A reference store, opened by this library
# ======================================================================================


async def test_we_read_a_reference_store(
    pair: Callable[[], tuple[Any, MemoryStore]], embed: HalvesEmbed
) -> None:
    theirs, ours = pair()
    await theirs.ensure_index()
    ids = await write_reference_corpus(theirs, embed)
    await ours.ensure_index()  # adopts the existing index

    hits = await ours.recall(QUERY, thread_id="alice", threshold=2.0)
    assert sorted(h.item.content for h in hits) == ["alice's first", "alice's second"]  # exact: not "Alice"
    first = next(h for h in hits if h.item.content == "alice's first")
    assert first.distance == pytest.approx(0.0, abs=1e-3)
    assert first.similarity == pytest.approx(1.0, abs=1e-3)
    assert first.item.id == ids["a"]
    assert list(first.item.tags) == ["x", "y"]
    assert (first.item.source, first.item.agent_id, first.item.namespace) == ("chat", "bot", "prod")
    assert first.item.importance == pytest.approx(0.9)
    second = next(h for h in hits if h.item.content == "alice's second")
    assert second.distance == pytest.approx(0.25, abs=1e-3)
    assert [h.item.content for h in await ours.recall(QUERY, thread_id="Alice")] == ["other Alice"]
    assert sorted(h.item.content for h in await ours.recall(QUERY, tags=["x", "y"], threshold=2.0)) == [
        "alice's first",
        "bob's",
    ]

    assert await ours.count(thread_id="alice") == 2
    assert await ours.count(thread_id="Alice") == 1
    assert await ours.count(thread_id="bob") == 1

    for key in ("a", "b", "A", "bob"):
        mine = await ours.get(ids[key])
        assert mine is not None
        # the reference's own get, on its own documents (its vectors here are valid UTF-8)
        same_fields(mine, await theirs.get(ids[key]))

    page = await ours.list(betterdb_memory.MemoryListOptions(thread_id="alice"))
    assert page.total == 2
    assert [item.content for item in page.items] == ["alice's second", "alice's first"]  # newest first


async def test_we_forget_on_a_reference_store(
    pair: Callable[[], tuple[Any, MemoryStore]], embed: HalvesEmbed
) -> None:
    theirs, ours = pair()
    await theirs.ensure_index()
    ids = await write_reference_corpus(theirs, embed)
    await ours.ensure_index()

    assert await ours.forget(ids["b"]) is True
    assert await theirs.get(ids["b"]) is None
    assert await ours.count(thread_id="alice") == 1

    # tags are ALL tags, and the scope is exact on the reference's case-insensitive TAGs
    assert await ours.forget_by_scope(thread_id="alice", tags=["x", "y"]) == 1
    assert await theirs.get(ids["a"]) is None
    assert await ours.forget_by_scope(thread_id="alice") == 0
    assert await theirs.get(ids["A"]) is not None
    assert await ours.count(thread_id="Alice") == 1
    assert await ours.forget_by_scope(tags=["x", "y"]) == 1  # bob's
    remaining = await theirs.list(ref.MemoryListOptions())
    assert [item.content for item in remaining.items] == ["other Alice"]


async def test_we_consolidate_a_reference_store(
    pair: Callable[[], tuple[Any, MemoryStore]], embed: HalvesEmbed
) -> None:
    theirs, ours = pair()
    await theirs.ensure_index()
    for text in ("first note", "second note", "third note"):
        await theirs.remember(text, thread_id="t", tags=["g"])
        await asyncio.sleep(0.005)
    await theirs.remember("unrelated", thread_id="u")
    await ours.ensure_index()
    seen: list[str] = []

    async def summarize(items: list[Any]) -> str:
        seen.extend(item.content for item in items)
        return "the three notes"

    result = await ours.consolidate(mode="summary", summarize=summarize, thread_id="t")
    assert seen == ["first note", "second note", "third note"]  # oldest -> newest
    assert (result.consolidated, result.deleted, len(result.created)) == (3, 3, 1)
    summary = await theirs.get(result.created[0])
    assert summary is not None
    assert (summary.content, summary.source, summary.thread_id) == ("the three notes", "summary", "t")
    # the reference does not re-fold a summary this library wrote
    again = await theirs.consolidate(mode="summary", summarize=summarize, thread_id="t")
    assert again.consolidated == 0
    assert await ours.count(thread_id="u") == 1


async def test_fact_state_is_shared_with_the_reference(
    pair: Callable[[], tuple[Any, MemoryStore]], embed: HalvesEmbed
) -> None:
    theirs, ours = pair()
    await theirs.ensure_index()
    await theirs.remember("I work at Acme since 2024-01-02", thread_id="t")
    await ours.ensure_index()

    async def extract(items: list[Any]) -> list[Any]:
        return [ref.Fact(subject="employer", statement="works at Acme", date="2024-01-02")]

    async def extract_ours(items: list[Any]) -> list[Any]:
        return [betterdb_memory.Fact(subject="employer", statement="works at Acme", date="2024-01-02")]

    result = await ours.consolidate(mode="facts", extract_facts=extract_ours, thread_id="t")
    assert len(result.created) == 1
    fact = await theirs.get(result.created[0])
    assert fact is not None
    assert (fact.content, fact.source, fact.subject, fact.date) == (
        "[2024-01-02] works at Acme",
        "fact",
        "employer",
        "2024-01-02",
    )
    # the reference sees our fact as the current one: its re-run is idempotent
    rerun = await theirs.consolidate(mode="facts", extract_facts=extract, thread_id="t")
    assert (rerun.created, rerun.deleted, rerun.facts) == ([], 0, 1)


async def test_our_writes_land_in_the_reference_index(
    pair: Callable[[], tuple[Any, MemoryStore]], client: Any, unique_name: str, embed: HalvesEmbed
) -> None:
    theirs, ours = pair()
    await theirs.ensure_index()
    await write_reference_corpus(theirs, embed)
    await ours.ensure_index()
    indexes_before = {
        i.decode() if isinstance(i, bytes) else i for i in await client.execute_command("FT._LIST")
    }

    before = int(time.time() * 1000)
    mid = await ours.remember(
        embed.like("ours, in alice", "d025b"),
        importance=0.7,
        tags=["x", "z"],
        source="tool",
        thread_id="alice",
        agent_id="bot",
        namespace="prod",
    )
    after = int(time.time() * 1000)

    indexes_after = {
        i.decode() if isinstance(i, bytes) else i for i in await client.execute_command("FT._LIST")
    }
    assert indexes_after == indexes_before, "a new write must not create another index"
    info = await client.execute_command("FT.INFO", f"{unique_name}:mem:idx")
    fields = {
        (k.decode() if isinstance(k, bytes) else k): v for k, v in zip(info[::2], info[1::2], strict=False)
    }
    assert int(fields["num_docs"]) == 5

    item = await theirs.get(mid)
    assert item is not None
    assert item.content == "ours, in alice"
    assert item.importance == pytest.approx(0.7)
    assert item.tags == ["x", "z"]
    assert (item.source, item.thread_id, item.agent_id, item.namespace) == ("tool", "alice", "bot", "prod")
    assert before - 1000 <= item.created_at <= after + 1000  # epoch ms
    assert item.access_count == 0

    hits = await theirs.recall(QUERY, thread_id="alice", threshold=0.3, reinforce=False)
    found = next(h for h in hits if h.item.id == mid)
    # the reference's composite score on our document: fresh (recency ~1), importance 0.7
    assert found.score == pytest.approx(0.6 * (1 - 0.25 / 2) + 0.25 + 0.15 * 0.7, abs=5e-3)
    listed = await theirs.list(ref.MemoryListOptions(thread_id="alice"))
    assert listed.items[0].id == mid  # newest first

    # our reinforcement is visible to the reference, once its snapshot is flushed (close
    # flushes; a running store within reinforce_write_interval)
    await ours.recall("ours, in alice", thread_id="alice", k=1)
    await ours.close()
    reinforced = await theirs.get(mid)
    assert reinforced is not None and reinforced.access_count == 1


# ======================================================================================
# A store this library created, used by the reference
# ======================================================================================


async def test_the_reference_uses_a_store_we_created(
    pair: Callable[[], tuple[Any, MemoryStore]], embed: HalvesEmbed
) -> None:
    theirs, ours = pair()
    await ours.ensure_index()
    await theirs.ensure_index()  # finds ours: leaves it as it is
    a = await ours.remember(embed.like("ours a", "d000"), tags=["x", "y"], thread_id="alice", importance=0.6)
    await asyncio.sleep(0.005)
    b = await ours.remember(embed.like("ours b", "d050"), tags=["x"], thread_id="alice")
    await ours.remember(embed.like("ours bob", "d000"), thread_id="bob")

    hits = await theirs.recall(QUERY, thread_id="alice", threshold=1.0, reinforce=False)
    assert sorted(h.item.content for h in hits) == ["ours a", "ours b"]
    mine = await ours.get(a)
    theirs_a = await theirs.get(a)
    assert mine is not None and theirs_a is not None
    same_fields(mine, theirs_a)
    listed = await theirs.list(ref.MemoryListOptions(thread_id="alice"))
    assert [item.id for item in listed.items] == [b, a] and listed.total == 2

    # a document the reference writes is ours to read and count at once
    theirs_id = await theirs.remember(embed.like("theirs in alice", "d025"), thread_id="alice", tags=["x"])
    assert await ours.count(thread_id="alice") == 3
    got = await ours.get(theirs_id)
    assert got is not None and got.content == "theirs in alice"
    assert sorted(
        h.item.content for h in await ours.recall(QUERY, thread_id="alice", tags=["x"], threshold=1.0)
    ) == [
        "ours a",
        "ours b",
        "theirs in alice",
    ]

    # the reference's deletes are seen at once
    assert await theirs.forget_by_scope(thread_id="alice", tags=["x", "y"]) == 1
    assert await ours.count(thread_id="alice") == 2
    assert await theirs.forget(b) is True
    assert await ours.count(thread_id="alice") == 1
    assert await ours.get(b) is None
    assert await ours.count(thread_id="bob") == 1
