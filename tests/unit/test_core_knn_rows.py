"""core.knn_rows: a KNN reply read by position gives the pairs the dict way gives (the old recall loop)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.codec import as_text, to_float
from betterdb_memory.core.knn_rows import _LAYOUTS, _READ, PairReader
from betterdb_memory.core.models import _PLAIN, MemoryItem, item_from_fields, ranking_item
from betterdb_memory.core.query import SCORE_ALIAS
from betterdb_memory.core.replies import parse_search_reply
from tests.unit.test_core_fixtures import CLUSTER_CAPTURES, MEM_CAPTURES, reply

PREFIX = "cap:mem:"


def oracle(
    reply_: Any,
    *,
    prefix: str = PREFIX,
    now_ms: float = 1e12,
    pending: Mapping[str, tuple[int, int]] | None = None,
    slim: bool = False,
    fact_source: str = "fact",
) -> tuple[list[tuple[MemoryItem, float]], list[str]]:
    """``Recall._search``'s loop before ``core.knn_rows`` (parsed hits, then an item per dict), verbatim."""
    pending = pending or {}

    def memory_id_of(key: str) -> str:  # SessionKeys.memory_id_of
        return key[len(prefix) :] if key.startswith(prefix) else key

    out, expired = [], []
    for hit in parse_search_reply(reply_).hits:
        f = hit.fields
        score = f.get(SCORE_ALIAS)
        if score is None and SCORE_ALIAS not in f:
            continue
        expires = f.get("expires_at")
        if expires is not None and (expires := as_text(expires)) and to_float(expires) <= now_ms:
            expired.append(memory_id_of(hit.key))
            continue
        mid = memory_id_of(hit.key)
        seen = pending.get(mid)
        item = (
            ranking_item(mid, f, seen=seen)
            if slim
            else item_from_fields(mid, f, fact_source=fact_source, seen=seen)
        )
        distance = to_float(score)
        distance = distance if distance > 0.0 else 0.0
        out.append((item, distance if distance < 2.0 else 2.0))
    return out, expired


def exact(pairs: list[tuple[MemoryItem, float]]) -> list[tuple[str, ...]]:
    """Pairs to compare to the bit: each field's type and repr (so 0.0 vs -0.0, 1 vs 1.0 and NaN count)."""
    return [
        tuple(f"{type(v).__name__}:{v!r}" for v in (*dataclasses.astuple(item), distance))
        for item, distance in pairs
    ]


def read(reply_: Any, **options: Any) -> tuple[list[tuple[MemoryItem, float]], list[str]]:
    defaults: dict[str, Any] = {
        "prefix": PREFIX,
        "now_ms": 1e12,
        "pending": {},
        "slim": False,
        "fact_source": "fact",
    }
    reader = PairReader(**{**defaults, **options})
    return reader.reply(reply_), reader.expired


def with_distance(node: Any) -> Any:
    """A captured reply with its ``score`` alias renamed to the recall's (``SCORE_ALIAS``)."""
    if isinstance(node, dict):
        return {with_distance(k): with_distance(v) for k, v in node.items()}
    if isinstance(node, list):
        return [with_distance(v) for v in node]
    if node == b"score":
        return SCORE_ALIAS.encode()
    return SCORE_ALIAS if node == "score" else node


CAPTURED = [(c, "mem_knn_hybrid") for c in MEM_CAPTURES] + [
    (c, "mem_cluster_knn_hybrid") for c in CLUSTER_CAPTURES
]


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "decoded"])
@pytest.mark.parametrize(("capture_name", "reply_name"), CAPTURED)
@pytest.mark.parametrize("slim", [False, True])
def test_captured_knn_replies_read_as_the_dict_way(
    capture_name: str, reply_name: str, text: bool, slim: bool
) -> None:
    """RESP2 and RESP3, RediSearch and valkey-search (standalone and cluster), bytes or decoded."""
    got = with_distance(reply(capture_name, reply_name, text=text))
    pairs, _ = read(got, slim=slim)
    assert pairs, "the capture holds hits"
    assert exact(pairs) == exact(oracle(got, slim=slim)[0])
    assert {item.id for item, _ in pairs} <= {"1", "3", "5", "7", "9"}


def row(key: str, fields: list[tuple[str, bytes | None]]) -> list[Any]:
    return [key.encode(), [x for name, value in fields for x in (name.encode(), value)]]


PLAIN = {
    SCORE_ALIAS: b"0.25",
    "content": b"Grace likes sailing",
    "importance": b"0.7",
    "created_at": b"1764633600000",
    "last_accessed_at": b"1764633700000",
    "access_count": b"3",
    "threadId": b"t1",
    "agentId": b"a",
    "namespace": b"ns",
    "valid_from": b"1764600000000",
}


def test_plain_rows_and_others_keep_their_places() -> None:
    """A row with an optional field goes the dict way in its place; keys without the prefix keep theirs."""
    rows = [
        *row(PREFIX + "a", list(PLAIN.items())),
        *row(PREFIX + "b", [*PLAIN.items(), ("tags", b"x,y"), ("metadata", b'{"k": 1}')]),
        *row("other:c", [(SCORE_ALIAS, b"-0.0001"), ("content", b"c")]),
        *row(PREFIX + "d", [("content", b"no distance")]),  # left out (expired between match and load)
        PREFIX.encode() + b"e",  # a key without fields (NOCONTENT-like)
        *row(PREFIX + "f", [(SCORE_ALIAS, b"3.5"), ("expires_at", b"5")]),  # expired: its id kept
    ]
    got = [6, *rows]
    pairs, expired = read(got, now_ms=10.0)
    assert [(item.id, d) for item, d in pairs] == [("a", 0.25), ("b", 0.25), ("other:c", 0.0)]
    assert pairs[1][0].tags == ["x", "y"] and pairs[1][0].metadata == {"k": 1}
    assert expired == ["f"]
    assert exact(pairs) == exact(oracle(got, now_ms=10.0)[0])


def test_rows_of_other_containers_go_the_dict_way() -> None:
    """A row's fields as a tuple or a map (not a list): read by name, in its place."""
    fields = [x for name, value in PLAIN.items() for x in (name.encode(), value)]
    got = [
        3,
        b"cap:mem:a",
        tuple(fields),
        b"cap:mem:b",
        fields,
        b"cap:mem:c",
        dict(zip(fields[::2], fields[1::2], strict=True)),
    ]
    pairs, _ = read(got)
    assert [item.id for item, _ in pairs] == ["a", "b", "c"]
    assert exact(pairs) == exact(oracle(got)[0])


def test_a_repeated_name_reads_as_the_dict_keeps_it() -> None:
    """The dict keeps a name's last value; so does the reader (the row goes the dict way)."""
    got = [1, *row(PREFIX + "a", [(SCORE_ALIAS, b"0.5"), ("content", b"first"), ("content", b"last")])]
    pairs, _ = read(got)
    assert pairs[0][0].content == "last"
    assert exact(pairs) == exact(oracle(got)[0])


def test_lagging_accesses_and_an_exact_check() -> None:
    """``pending`` raises an item's access as ``item_from_fields(seen=)``; ``keep`` filters on the fields."""
    got = [2, *row(PREFIX + "a", list(PLAIN.items())), *row(PREFIX + "b", list(PLAIN.items()))]
    pending = {"a": (1764633800000, 9), "b": (1, 1)}
    pairs, _ = read(got, pending=pending)
    assert [(p[0].last_accessed_at, p[0].access_count) for p in pairs] == [
        (1764633800000, 9),
        (1764633700000, 3),
    ]
    assert exact(pairs) == exact(oracle(got, pending=pending)[0])
    reader = PairReader(
        prefix=PREFIX, now_ms=0.0, pending={}, slim=False, fact_source="fact", keep=lambda f: False
    )
    assert reader.reply(got) == []


def test_layouts_are_learned_once_per_name_tuple() -> None:
    """A plain row's names get a getter by position; names with an optional field go the dict way (None)."""
    read([1, *row(PREFIX + "a", [(SCORE_ALIAS, b"0.5"), ("content", b"x"), ("agentId", b"q")])])
    read([1, *row(PREFIX + "a", [(SCORE_ALIAS, b"0.5"), ("content", b"x"), ("tags", b"t")])])
    assert _LAYOUTS[(SCORE_ALIAS.encode(), b"content", b"agentId")] is not None
    assert _LAYOUTS[(SCORE_ALIAS.encode(), b"content", b"tags")] is None


# Values a field may hold in a reply: numbers, garbage, non-finite, empty, bytes that are no UTF-8, None (RESP3 null).
VALUES = st.one_of(
    st.sampled_from(
        [b"0", b"1", b"-1", b"0.5", b"1e300", b"nan", b"inf", b"-inf", b"", b"abc", b"\xff\xfe", b" 7 "]
    ),
    st.integers(-(10**15), 10**15).map(lambda n: str(n).encode()),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda x: repr(x).encode()),
    st.binary(max_size=6),
    st.none(),
)
NAMES = st.sampled_from(
    [
        *PLAIN,
        "tags",
        "metadata",
        "kind",
        "source",
        "sensitivity",
        "expires_at",
        "valid_until",
        "subject",
        "date",
    ]
)
FIELDS = st.one_of(
    # plain rows (the reader's own way): a distance, then any of the plain fields once each
    st.lists(st.tuples(st.sampled_from(list(PLAIN)), VALUES), max_size=10, unique_by=lambda f: f[0]).map(
        lambda fields: [(SCORE_ALIAS, b"0.3"), *fields]
    ),
    st.lists(st.tuples(NAMES, VALUES), max_size=12),  # anything: optional fields, repeated names
)
ROW = st.tuples(st.sampled_from([PREFIX + "m1", PREFIX + "m2", "x:" + "m3", PREFIX]), FIELDS)


@settings(max_examples=400, deadline=None)
@given(
    rows=st.lists(ROW, max_size=6),
    slim=st.booleans(),
    pending=st.dictionaries(
        st.sampled_from(["m1", "m2"]), st.tuples(st.integers(0, 2 * 10**12), st.integers(0, 9))
    ),
    fact_source=st.sampled_from(["fact", "summary", "x"]),
)
def test_any_rows_read_as_the_dict_way(
    rows: list[tuple[str, list[tuple[str, bytes | None]]]],
    slim: bool,
    pending: dict[str, tuple[int, int]],
    fact_source: str,
) -> None:
    """Random rows (any field subset, repeated names, hostile values): the same items, distances, order, expiries."""
    got = [len(rows), *(x for key, fields in rows for x in row(key, fields))]
    options: dict[str, Any] = {"slim": slim, "pending": pending, "fact_source": fact_source, "now_ms": 1e12}
    try:
        want = oracle(got, **options)
    except Exception as exc:  # the dict way raises on this row: so must the reader
        with pytest.raises(type(exc)):
            read(got, **options)
        return
    pairs, expired = read(got, **options)
    assert exact(pairs) == exact(want[0])
    assert expired == want[1]
    assert all(type(item) is MemoryItem and not math.isnan(d) for item, d in pairs)


def test_the_reader_reads_every_field_a_plain_row_may_hold() -> None:
    """A field added to ``models._PLAIN`` (``item_from_fields``' short way) must be read by position too."""
    assert set(_READ) == _PLAIN and len(_READ) == len(_PLAIN)
