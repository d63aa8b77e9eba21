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


def test_new_memory_of_takes_every_field_in_order_and_builds_the_same_memory() -> None:
    """``new_memory_of`` bypasses ``NewMemory.__init__``: a field added to the class must be added to it too."""
    import dataclasses
    import inspect

    from betterdb_memory.core.record import new_memory_of

    names = [f.name for f in dataclasses.fields(NewMemory)]
    assert list(inspect.signature(new_memory_of).parameters) == names
    values: list[object] = ["text", Scope(thread_id="t"), 0.7, ("a",), "chat", 1.5, "pii", {"k": 1}, "fact",
                            "subj", "2024-05-01", "d1", VEC, "m1", 900, "sk", True]  # fmt: skip
    built = new_memory_of(*values)  # type: ignore[arg-type]
    assert built == NewMemory(*values)  # type: ignore[arg-type]
    assert [getattr(built, n) for n in names] == values
    assert encode_record(built, VEC, now_ms=NOW, half_life_seconds=HL) == encode_record(
        NewMemory(*values),  # type: ignore[arg-type]
        VEC,
        now_ms=NOW,
        half_life_seconds=HL,
    )
    try:
        built.content = "changed"  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("the memory must stay frozen")


# ---- encode_record against the encoder it replaced -------------------------------------------
import json  # noqa: E402
import math  # noqa: E402
from typing import Any  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from betterdb_memory.core.codec import encode_vector, join_tags  # noqa: E402
from betterdb_memory.core.record import Previous  # noqa: E402
from betterdb_memory.core.validity import keep_from_ms  # noqa: E402


def _encode_record_before(
    memory: NewMemory,
    vector: np.ndarray[Any, np.dtype[np.float32]],
    *,
    now_ms: int,
    half_life_seconds: float,
    fact_source: str = "fact",
    previous: Previous | None = None,
) -> tuple[list[Any], int]:
    # The encoder as it was before its new-memory shortcuts (verbatim): the oracle.
    scope = memory.scope
    created = previous.created_at if previous else now_ms
    accessed = previous.last_accessed_at if previous else now_ms
    fields: list[Any] = [
        "content", memory.content,
        "vector", encode_vector(vector),
        "importance", repr(memory.importance),
        "created_at", str(created),
        "last_accessed_at", str(accessed),
        "access_count", str(previous.access_count if previous else 0),
    ]  # fmt: skip
    if memory.tags:
        fields += ["tags", join_tags(memory.tags)]
    if scope.thread_id is not None:
        fields += ["threadId", scope.thread_id]
    if scope.agent_id is not None:
        fields += ["agentId", scope.agent_id]
    if scope.namespace is not None:
        fields += ["namespace", scope.namespace]
    if memory.source is not None:
        fields += ["source", memory.source]
    if memory.subject is not None:
        fields += ["subject", memory.subject]
    if memory.date:
        fields += ["date", memory.date]
    count = previous.access_count if previous else 0
    valid_from = memory.valid_from
    if valid_from is None and previous is not None:
        valid_from = previous.valid_from
    if valid_from is None and memory.subject_key is not None:
        valid_from = created  # a subject's versions are ordered by it: always written
    if valid_from is not None:
        fields += ["valid_from", str(valid_from)]
    if memory.subject_key is not None:
        fields += ["state_from", str(valid_from), "subject_key", memory.subject_key]
    # A subject's version counts from its write at the earliest (``validity.keep_from_ms``).
    seen = keep_from_ms(valid_from, created, accessed, count, state=memory.subject is not None)
    fields += ["keep", repr(keep_score(seen / 1000.0, memory.importance, half_life_seconds))]
    if memory.sensitivity != "none":
        fields += ["sensitivity", memory.sensitivity]
    derived = (
        "summary" if memory.source == "summary" else "fact" if memory.source == fact_source else "memory"
    )
    if memory.kind != derived:
        fields += ["kind", memory.kind]
    if memory.metadata:
        fields += ["metadata", json.dumps(memory.metadata, ensure_ascii=False)]
    ttl_ms = math.ceil(memory.ttl * 1000) if memory.ttl else 0
    if ttl_ms:
        fields += ["expires_at", str(now_ms + ttl_ms)]
    if memory.dedup_hash:
        fields += ["dedup", memory.dedup_hash]
    return fields, ttl_ms


_opt_text = st.none() | st.sampled_from(["a", "b c", "fact", "summary"])
_memories = st.builds(
    NewMemory,
    content=st.sampled_from(["x", "é text"]),
    scope=st.builds(Scope, namespace=_opt_text, agent_id=_opt_text, thread_id=_opt_text),
    importance=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    tags=st.sampled_from([(), ("a",), ("a", "b")]),
    source=st.none() | st.sampled_from(["fact", "summary", "web"]),
    ttl=st.none() | st.sampled_from([0.0, 0.0004, 1.5, 60.0]),
    sensitivity=st.sampled_from(["none", "low", "pii"]),
    metadata=st.sampled_from([{}, {"k": [1, "é"]}]),
    kind=st.sampled_from(["memory", "fact", "summary"]),
    subject=st.none() | st.just("City"),
    date=st.none() | st.just("2024-05-01"),
    dedup_hash=st.none() | st.just("d1"),
    valid_from=st.none() | st.sampled_from([0, 1_600_000_000_000, NOW, NOW + 10]),
    subject_key=st.none() | st.just("sk"),
)
_previous = st.none() | st.builds(
    Previous,
    created_at=st.sampled_from([1_500_000_000_000, NOW]),
    last_accessed_at=st.sampled_from([1_500_000_000_000, NOW, NOW + 5]),
    access_count=st.sampled_from([0, 3]),
    valid_from=st.none() | st.just(1_400_000_000_000),
)


@settings(max_examples=400, deadline=None)
@given(memory=_memories, previous=_previous, fact_source=st.sampled_from(["fact", "note"]))
def test_encode_record_writes_what_it_wrote_before(
    memory: NewMemory, previous: Previous | None, fact_source: str
) -> None:
    """The new-memory shortcuts (one timestamp text, no keep-from call) change no field."""
    args: dict[str, Any] = {
        "now_ms": NOW,
        "half_life_seconds": HL,
        "fact_source": fact_source,
        "previous": previous,
    }
    assert encode_record(memory, VEC, **args) == _encode_record_before(memory, VEC, **args)
