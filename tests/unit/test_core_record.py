"""The stored record: exact HSET fields (the reference's first, ours after), and the way back."""

from __future__ import annotations

import numpy as np

from betterdb_memory.core.codec import decode_vector
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.models import item_from_fields
from betterdb_memory.core.record import NewMemory, encode_record
from betterdb_memory.core.scoring import keep_score

VEC = np.array([0.6, 0.8, 0.0], dtype=np.float32)
NOW = 1_700_000_000_123
HL = 604800.0


def _pairs(fields: list[object]) -> dict[str, object]:
    return dict(zip(fields[0::2], fields[1::2], strict=True))  # type: ignore[arg-type]


def test_a_plain_memory_is_the_reference_record_plus_keep() -> None:
    fields, ttl_ms = encode_record(NewMemory("hello"), VEC, now_ms=NOW, half_life_seconds=HL)
    assert ttl_ms == 0
    assert fields[0::2] == [
        "content", "vector", "importance", "created_at", "last_accessed_at", "access_count", "keep",
    ]  # fmt: skip
    f = _pairs(fields)
    assert (f["content"], f["importance"], f["created_at"], f["last_accessed_at"], f["access_count"]) == (
        "hello", "0.5", str(NOW), str(NOW), "0",
    )  # fmt: skip
    assert list(decode_vector(f["vector"])) == [np.float32(0.6), np.float32(0.8), np.float32(0.0)]  # type: ignore[arg-type]
    assert float(f["keep"]) == keep_score(NOW / 1000, 0.5, HL)  # type: ignore[arg-type]


def test_every_field_in_its_place_and_only_when_set() -> None:
    memory = NewMemory(
        "fact text",
        scope=Scope.of(namespace="ns", agent_id="a", thread_id="t"),
        importance=0.7,
        tags=("x", "y"),
        source="fact",
        ttl=1.5,
        sensitivity="pii",
        metadata={"k": [1]},
        kind="fact",
        subject="city",
        date="2024-01-01",
        dedup_hash="d1",
    )
    fields, ttl_ms = encode_record(memory, VEC, now_ms=NOW, half_life_seconds=HL)
    assert ttl_ms == 1500
    assert fields[0::2] == [
        "content",
        "vector",
        "importance",
        "created_at",
        "last_accessed_at",
        "access_count",
        "tags",
        "threadId",
        "agentId",
        "namespace",
        "source",
        "subject",
        "date",
        "keep",
        "sensitivity",
        "metadata",
        "expires_at",
        "dedup",
    ]  # fmt: skip  (kind "fact" follows from source "fact": not written)
    f = _pairs(fields)
    assert (f["tags"], f["threadId"], f["agentId"], f["namespace"]) == ("x,y", "t", "a", "ns")
    assert (f["expires_at"], f["metadata"]) == (str(NOW + 1500), '{"k": [1]}')


def test_kind_is_written_only_when_source_does_not_imply_it() -> None:
    summary, _ = encode_record(
        NewMemory("s", source="summary", kind="summary"), VEC, now_ms=NOW, half_life_seconds=HL
    )
    extracted, _ = encode_record(NewMemory("e", kind="extracted"), VEC, now_ms=NOW, half_life_seconds=HL)
    custom, _ = encode_record(
        NewMemory("f", source="facts", kind="fact"),
        VEC,
        now_ms=NOW,
        half_life_seconds=HL,
        fact_source="facts",
    )
    assert "kind" not in summary[0::2] and "kind" not in custom[0::2]
    assert _pairs(extracted)["kind"] == "extracted"


def test_round_trip_through_the_reader() -> None:
    memory = NewMemory("round", scope=Scope.of(thread_id="t"), tags=("a",), ttl=2, metadata={"m": 1})
    fields, _ = encode_record(memory, VEC, now_ms=NOW, half_life_seconds=HL)
    raw = {k: (v.encode() if isinstance(v, str) else v) for k, v in _pairs(fields).items()}
    item = item_from_fields("id-1", raw)
    assert (item.id, item.content, item.thread_id, item.tags, item.metadata) == (
        "id-1",
        "round",
        "t",
        ["a"],
        {"m": 1},
    )
    assert (item.created_at, item.last_accessed_at, item.expires_at, item.kind) == (
        NOW,
        NOW,
        NOW + 2000,
        "memory",
    )


def test_a_dated_event_keeps_from_its_date_and_a_subject_version_from_its_write() -> None:
    """docs/concepts/time.md: the keep-score counts from ``valid_from``, except that a subject's
    version (a state: it holds now) is never older than its write."""
    dated = 1_546_300_800_000  # 2019-01-01
    event, _ = encode_record(
        NewMemory("ran a marathon", valid_from=dated), VEC, now_ms=NOW, half_life_seconds=HL
    )
    assert float(_pairs(event)["keep"]) == keep_score(dated / 1000, 0.5, HL)  # type: ignore[arg-type]
    for memory in (
        NewMemory("lives in Lisbon", valid_from=dated, subject="home", subject_key="d" * 20),
        NewMemory("[2019-01-01] Lisbon", valid_from=dated, subject="home", kind="fact", source="fact"),
    ):
        state, _ = encode_record(memory, VEC, now_ms=NOW, half_life_seconds=HL)
        f = _pairs(state)
        assert f["valid_from"] == str(dated)  # the event time itself is kept as given
        assert float(f["keep"]) == keep_score(NOW / 1000, 0.5, HL)  # type: ignore[arg-type]
