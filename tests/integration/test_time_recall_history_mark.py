"""A windowed recall asks the history index only when the window may hold a past version.

The meta hash's ``history`` field (``core.history_mark``): ``"0"`` when a process opened
the store and found no past version, ``"u<ms>"`` from the first retirement on, ``<ms>`` the
latest ``valid_until`` of any version moved to history (raised by every path that moves
one, before the move), ``"1"`` when that bound is unknown (an older version's mark). A
windowed recall reads it in its own round trip; a window that starts at or after the bound
holds no past version and sends no history query; another process's retirement reaches the
next windowed recall, and a store an older version wrote (no field, or ``"1"``) still finds
its past versions. The queries are counted by a spy over the store's real backend.
"""

from __future__ import annotations

import asyncio
import io
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import Fact, MemoryStore
from betterdb_memory.core.times import to_ms
from betterdb_memory.testing import ScriptedFactExtractor
from betterdb_memory.transfer import export_store, import_store

pytestmark = pytest.mark.integration

QUESTION = "Where did Ada live in 2022?"
ROOT = Path(__file__).resolve().parents[2]


def count_history_queries(store: MemoryStore) -> list[int]:
    """Count the FT.SEARCH calls on the store's history index (a spy over the real backend)."""
    seen = [0]
    backend: Any = store.backend
    name = f"{store.name}:hist:idx"
    search, pipeline = backend.search, backend.pipeline

    def note(args: Sequence[Any]) -> None:
        if len(args) > 1 and args[0] == "FT.SEARCH" and args[1] == name:
            seen[0] += 1

    async def spy_search(operation: str, args: Sequence[Any], **kw: Any) -> Any:
        note(args)
        return await search(operation, args, **kw)

    async def spy_pipeline(operation: str, commands: Any, **kw: Any) -> Any:
        for args in kw.get("searches", ()):
            note(args)
        return await pipeline(operation, commands, **kw)

    backend.search, backend.pipeline = spy_search, spy_pipeline
    return seen


BERLIN_BOUND = f"u{to_ms('2024-05-01')}".encode()  # the latest valid_until of ``_ada``'s past versions


async def mark(client: avalkey.Valkey, store: MemoryStore) -> bytes | None:
    value: bytes | None = await client.hget(store.keys.meta, "history")
    return value


async def _ada(store: MemoryStore) -> tuple[str, str, str]:
    out = []
    for city, year in (("Porto", "2015-03-01"), ("Lisbon", "2020-03-01"), ("Berlin", "2024-05-01")):
        out.append(
            await store.remember(
                f"Ada lives in {city}.", thread_id="ada", subject="home city", valid_from=to_ms(year)
            )
        )
    return out[0], out[1], out[2]


async def test_a_store_that_never_retired_a_version_sends_no_history_query(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    trip = await store.remember("Ada visited Rome.", thread_id="ada", valid_from=to_ms("2022-04-01"))
    await store.remember("Ada bought a bike.", thread_id="ada", valid_from=to_ms("2019-04-01"))
    assert await mark(client, store) == b"0"  # opened over an empty history index
    seen = count_history_queries(store)
    for _ in range(3):
        hits = await store.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
        assert hits[0].item.id == trip  # the window still ranks what lies inside it first
    assert seen == [0]
    # The spy sees the history query once a version was retired.
    _, lisbon, _ = await _ada(store)
    assert await mark(client, store) == BERLIN_BOUND  # Lisbon's version ended when Berlin's began
    hits = await store.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon and seen == [1]
    await store.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert seen == [2]  # asked in the recall's own round trip from then on


async def test_another_process_s_retirement_reaches_the_next_windowed_recall(
    make_store: Callable[..., MemoryStore], valkey_url: str, unique_name: str
) -> None:
    """Process A learned "no history"; process B retires versions; A's next windowed recall finds them."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from betterdb_memory import HashingEmbedder, MemoryStore
        from betterdb_memory.core.times import to_ms

        async def main():
            store = await MemoryStore.connect({valkey_url!r}, name={unique_name!r}, embedder=HashingEmbedder())
            try:
                for city, year in (("Porto", "2015-03-01"), ("Lisbon", "2020-03-01"), ("Berlin", "2024-05-01")):
                    print(await store.remember(
                        f"Ada lives in {{city}}.", thread_id="ada", subject="home city", valid_from=to_ms(year)
                    ))
            finally:
                await store.close()

        asyncio.run(main())
        """
    )
    store = make_store()
    seen = count_history_queries(store)
    await store.remember("Ada visited Rome.", thread_id="ada", valid_from=to_ms("2022-04-01"))
    await store.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert seen == [0]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()
    _, lisbon, _ = out.decode().split()
    hits = await store.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon and seen == [1]


async def test_a_store_without_the_mark_still_finds_its_past_versions(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """A store an older version wrote (no field): a new process finds its past versions and marks it."""
    writer = make_store()
    _, lisbon, _ = await _ada(writer)
    await client.hdel(writer.keys.meta, "history")
    reader = make_store()
    hits = await reader.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon
    assert (
        await mark(client, reader) == b"1"
    )  # its opening counted the history index's documents (bound unknown)
    # The field gone under a running process (not known to hold any): absent means "ask".
    fresh = make_store()
    await fresh.recall("Ada", thread_id="ada", k=1, threshold=2.0, reinforce=False)
    await client.hdel(writer.keys.meta, "history")
    hits = await fresh.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon


async def test_consolidation_marks_the_store_before_it_retires_a_fact(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """A fact superseded by consolidation reaches a windowed recall of a process that saw no history."""
    store, reader = make_store(), make_store()
    await reader.recall("anything in 2024", k=1, threshold=2.0, reinforce=False)  # learns "0"
    await store.remember("Ada said she lives in Paris.", thread_id="t")
    first = ScriptedFactExtractor([Fact("home city", "Ada lives in Paris", "2024-01-01")])
    (paris,) = (await store.consolidate("facts", extract_facts=first, thread_id="t")).fact_ids
    assert await mark(client, store) == b"0"
    await store.remember("Ada said she moved to Berlin.", thread_id="t")
    second = ScriptedFactExtractor([Fact("home city", "Ada lives in Berlin", "2024-06-01")])
    await store.consolidate("facts", extract_facts=second, thread_id="t")
    assert await mark(client, store) == f"u{to_ms('2024-06-01')}".encode()  # Paris ended when Berlin began
    hits = await reader.recall(
        "Where did Ada live in March 2024?", thread_id="t", k=10, threshold=2.0, reinforce=False
    )
    assert paris in {h.item.id for h in hits}


async def test_an_import_of_past_versions_marks_the_store(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """Imported history rows reach a windowed recall of a process that had seen no history."""
    source = make_store()
    _, lisbon, _ = await _ada(source)
    buf = io.StringIO()
    await export_store(source, buf)
    target = make_store(name=unique_name + "_b")
    await target.recall(QUESTION, thread_id="ada", k=1, threshold=2.0, reinforce=False)  # learns "0"
    assert await mark(client, target) == b"0"
    await import_store(target, buf.getvalue().splitlines())
    assert await mark(client, target) == BERLIN_BOUND  # the imported past versions' latest end
    hits = await target.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon


async def test_a_window_after_every_retirement_sends_no_history_query(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """The bound: a window starting at or after it holds no past version; one before it asks."""
    store = make_store()
    _, lisbon, berlin = await _ada(store)
    trip = await store.remember("Ada visited Rome.", thread_id="ada", valid_from=to_ms("2025-06-10"))
    seen = count_history_queries(store)
    later = "Where did Ada travel in June 2025?"  # [2025-06-01, 2025-07-01): after Berlin began
    for _ in range(2):  # the first reads the mark in its round trip, then decides; the second by it
        hits = await store.recall(later, thread_id="ada", k=3, threshold=2.0, reinforce=False)
        # Inside: the trip (dated in it) and Berlin's version (current, begun before it).
        assert {h.item.id for h in hits[:2]} == {trip, berlin} and seen == [0]
        assert all(h.item.valid_until is None for h in hits)
    hits = await store.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon and seen == [1]  # 2022: before the bound, asked
    # An open start ("before 2024") may hold any past version.
    hits = await store.recall(
        "Where did Ada live before 2016?", thread_id="ada", k=3, threshold=2.0, reinforce=False
    )
    assert seen == [2]
    # Marked "1" (an older version of the library: bound unknown): every window asks.
    await client.hset(store.keys.meta, "history", "1")
    await store.recall(later, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    await store.recall(later, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert seen == [4]
    # A writer never lowers a bound, nor turns an unknown one into a bound.
    await store.remember(
        "Ada lives in Madrid.", thread_id="ada", subject="home city", valid_from=to_ms("2026-01-01")
    )
    assert await mark(client, store) == b"1"


async def test_another_process_s_later_retirement_reaches_a_window_the_old_bound_left_out(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """This process last read a bound before the window; another retires a version valid in it."""
    reader, writer = make_store(), make_store()
    _, _, berlin = await _ada(writer)
    seen = count_history_queries(reader)
    later = "Where did Ada live in June 2025?"
    await reader.recall(later, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    await reader.recall(later, thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert seen == [0]  # the bound (May 2024) is before June 2025
    await writer.remember(
        "Ada lives in Rome.", thread_id="ada", subject="home city", valid_from=to_ms("2025-09-01")
    )
    assert await mark(client, writer) == f"u{to_ms('2025-09-01')}".encode()
    hits = await reader.recall(later, thread_id="ada", k=3, threshold=2.0, reinforce=False, explain=True)
    assert seen == [1]  # the mark read in this recall's round trip: asked in one more
    assert hits[0].item.id == berlin and hits[0].item.valid_until == to_ms("2025-09-01")
