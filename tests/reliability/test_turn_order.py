"""Order under concurrency: a session's turns come back in the order of their own timestamps.

The order of a session's turns is decided by the server (the append script numbers
and pushes each turn atomically); the timestamp must be taken there too, or turns
stored concurrently come back in an order their timestamps contradict.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest

from betterdb_memory import MemoryStore

pytestmark = [pytest.mark.integration, pytest.mark.reliability]


async def test_concurrent_turns_come_back_in_their_timestamps_order(
    make_store: Callable[..., MemoryStore],
) -> None:
    """200 concurrent store_turn calls: seq and timestamp agree, and every turn is there once."""
    store = make_store(max_session_turns=500, summarize_batch=0)
    ids = await asyncio.gather(*(store.store_turn("t", f"u{i}", f"a{i}", agent_id="a") for i in range(200)))
    turns = await store.get_recent_turns("t", agent_id="a")
    assert sorted(t.id for t in turns) == sorted(ids)
    assert [t.seq for t in turns] == list(range(1, 201))
    stamps = [t.timestamp for t in turns]
    inversions = sum(1 for a, b in itertools.pairwise(stamps) if b < a)
    assert inversions == 0, f"{inversions} turns are older than the turn stored before them"
    meta = await store.get_session_metadata("t", agent_id="a")
    assert meta is not None and meta.created_at == stamps[0] and meta.last_active == stamps[-1]
