"""``tiers.upserts``: what a write under a caller's id reads of the memory it replaces (over a recording backend)."""

from __future__ import annotations

import json

from betterdb_memory.backend import scripts
from betterdb_memory.tiers.upserts import _UPSERT_FIELDS, HISTORY_MAX, read_existing
from tests.unit.parts import build

NOW_MS = 1_700_000_000_000


def _row(**fields: bytes) -> list[bytes | None]:
    """An HMGET reply of the fields an upsert reads (absent ones: None)."""
    return [fields.get(name) for name in _UPSERT_FIELDS]


async def test_existing_memories_are_read_in_one_round_trip_of_three_commands_per_id() -> None:
    p = build()
    keys = p.rt.keys
    stored = _row(
        content=b"old text", created_at=b"1000", last_accessed_at=b"2000", access_count=b"3",
        importance=b"0.7", tags=b"a,b", metadata=b'{"k": 1}',
    )  # fmt: skip
    p.backend.reply(
        stored, b"5", 1, [None] * len(_UPSERT_FIELDS), b"2", 0, [None] * len(_UPSERT_FIELDS), None, 0
    )
    existing, leftovers = await read_existing(p.rt, ["m1", "m2", "m3"], NOW_MS)
    [trip] = p.backend.sent
    assert trip.operation == "remember" and trip.idempotent
    assert trip.commands == tuple(
        c
        for mid in ("m1", "m2", "m3")
        for c in (
            ("HMGET", keys.doc(mid), *_UPSERT_FIELDS),
            ("GET", keys.access(mid)),
            ("EXISTS", keys.updates(mid)),
        )
    )
    old = existing["m1"]
    assert old.content == "old text" and old.vector is None
    assert (old.previous.created_at, old.previous.access_count) == (1000, 5)  # the counter beats the snapshot
    assert json.loads(old.entry)["tags"] == ["a", "b"]
    assert set(existing) == {"m1"} and leftovers == {"m2"}  # m2: a counter left behind by a deleted memory


async def test_an_upsert_replaces_its_memory_with_one_script_call() -> None:
    p = build()
    keys = p.rt.keys
    stored = _row(
        content=b"old", created_at=b"1000", last_accessed_at=b"2000", access_count=b"0", metadata=b"{}"
    )
    p.backend.reply(stored, None, 0)  # the read: m1 exists
    p.backend.reply(1)  # the replace
    [mid] = await p.long_term.remember_many([{"content": "new", "id": "m1", "ttl": 60}])
    assert mid == "m1"
    _, write = p.backend.sent
    [(name, sha, numkeys, doc, updates, ttl, entry, history_max, *fields)] = write.commands
    assert (name, sha, numkeys, doc, updates) == (
        "EVALSHA",
        scripts.REPLACE.sha,
        2,
        keys.doc("m1"),
        keys.updates("m1"),
    )
    assert ttl == 60_000 and history_max == HISTORY_MAX and json.loads(entry)["content"] == "old"
    assert dict(zip(fields[::2], fields[1::2], strict=True))["content"] == "new"
