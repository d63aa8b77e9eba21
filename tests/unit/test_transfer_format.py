"""The export format's pure parts: state key names, value encoding, header and row checks."""

from __future__ import annotations

import dataclasses

import pytest

from betterdb_memory.core.facts import subject_digest
from betterdb_memory.core.keys import ConsolidationKeys, KeySpace, Scope
from betterdb_memory.errors import ValidationError
from betterdb_memory.transfer._format import (
    FORMAT_VERSION,
    DocumentRow,
    EndRow,
    ExportHeader,
    KeyRow,
    decode_value,
    document_row,
    encode_value,
    key_kind,
    key_row,
    legacy_fields,
    matches_scope,
    parse_row,
)
from betterdb_memory.transfer._scan import ids_under


def relative(keys: KeySpace, key: str) -> str:
    assert key.startswith(keys.name + ":")
    return key[len(keys.name) + 1 :]


def test_state_key_kinds_follow_the_key_space() -> None:
    """Every L1 and consolidation key ``KeySpace`` builds is exported with its type; locks are not."""
    keys = KeySpace("app")
    sk = keys.session("assistant", "thread-1")
    ck = ConsolidationKeys(keys, Scope(thread_id="ada"))
    expected = {
        sk.turns: "list",
        sk.meta: "hash",
        sk.summary_cursor: "string",
        keys.agent_sessions("assistant"): "set",
        keys.agent_sessions(None): "set",
        ck.targets: "hash",
        ck.subjects: "hash",
        ck.consumed["summary"]: "zset",
        ck.consumed["facts"]: "zset",
        ck.history(subject_digest("home city")): "zset",
    }
    for key, kind in expected.items():
        assert key_kind(relative(keys, key)) == kind, key
    for key in (sk.summary_lock, ck.lock, keys.meta, keys.config, keys.doc("x"), keys.access("x")):
        assert key_kind(relative(keys, key)) is None, key
    assert key_kind("l1:mem:x") is None  # another store named "<name>:l1" is not ours


def test_every_session_key_but_the_lock_is_exported() -> None:
    """A key added to ``SessionKeys`` (as the OpenAI Agents session's items were) must travel too."""
    keys = KeySpace("app")
    sk = keys.session("assistant", "s-1")
    for field in dataclasses.fields(sk):
        kind = key_kind(relative(keys, getattr(sk, field.name)))
        assert (kind is None) == field.name.endswith("lock"), field.name
    base = relative(keys, sk.turns).removesuffix(":turns")
    assert (key_kind(base + ":agents:items"), key_kind(base + ":agents:folded")) == ("list", "string")


def test_values_round_trip_text_and_binary() -> None:
    for raw in (b"plain", "déjà vu", b"\xff\x00\x01"):
        encoded = encode_value(raw)
        back = decode_value(encoded)
        assert back == (raw.decode() if isinstance(raw, bytes) and isinstance(encoded, str) else raw)
    assert encode_value(b"\xff") == {"b64": "/w=="}
    with pytest.raises(ValidationError):
        decode_value(3, 7)


def test_header_versions() -> None:
    header = ExportHeader(store="app", model_id="m", dimensions=8, vectors=True, exported_at=1)
    assert ExportHeader.from_json(header.to_json()) == header
    for bad in (
        {"format": "other", "version": 1},
        {"format": "betterdb-memory", "version": FORMAT_VERSION + 1},
    ):
        with pytest.raises(ValidationError) as err:
            ExportHeader.from_json(bad, 1)
        assert err.value.code == "validation.import" and err.value.details["line"] == 1


def test_document_and_key_rows_parse_back() -> None:
    fields = {b"content": b"hi", b"vector": b"\x00\x00\x80?", b"created_at": b"1"}
    row = document_row("memory", "m1", fields, vector=[1.0], access=3, expire_at=99)
    assert row["fields"] == {"content": "hi", "created_at": "1"}  # the vector travels apart
    assert parse_row(row, 2) == DocumentRow(
        "memory", "m1", {"content": "hi", "created_at": "1"}, [1.0], 3, 99
    )
    z = key_row("cons:targets", "hash", {b"a": b'[null, null, "t"]'}, expire_at=None)
    assert parse_row(z, 3) == KeyRow("cons:targets", "hash", {"a": '[null, null, "t"]'}, None)
    hist = "cons:{" + "0" * 20 + "}:hist:" + "1" * 20
    zr = key_row(hist, "zset", [(b"m1", 1.5)], expire_at=5)
    assert parse_row(zr, 4) == KeyRow(hist, "zset", {"m1": 1.5}, 5)
    assert parse_row({"type": "end", "counts": {"memory": 1}}, 5) == EndRow({"memory": 1})


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"type": "memory", "id": "bad id", "fields": {"content": "x"}}, "bad memory id"),
        ({"type": "memory", "id": "a", "fields": {}}, "'content' string"),
        ({"type": "memory", "id": "a", "fields": {"content": "x"}, "vector": ["x"]}, "list of numbers"),
        ({"type": "memory", "id": "a", "fields": {"content": "x"}, "expire_at": "soon"}, "expire_at"),
        ({"type": "key", "key": "__mem_meta", "kind": "hash", "value": {}}, "not an exported state key"),
        ({"type": "key", "key": "cons:targets", "kind": "list", "value": []}, "not an exported state key"),
        ({"type": "key", "key": "cons:targets", "kind": "hash", "value": []}, "bad value"),
        ({"type": "what"}, "unknown row type"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_bad_rows_are_refused_with_their_line(row: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as err:
        parse_row(row, 12)
    assert err.value.details["line"] == 12


def test_scope_filter_and_ids() -> None:
    fields = {b"threadId": b"t", b"agentId": b"a", b"tags": b"x,y"}
    assert matches_scope(fields, Scope(thread_id="t"), ["x"])
    assert not matches_scope(fields, Scope(thread_id="t"), ["z"])
    assert not matches_scope(fields, Scope(namespace="n"))
    names = ["app:mem:abc", "app:mem:bad{id}", "app:hist:{app:mem:h1}", "other"]
    assert ids_under(names, "app:mem:") == ["abc"]
    assert ids_under(names, "app:hist:{app:mem:", "}") == ["h1"]


def test_legacy_rows_keep_id_times_and_scope() -> None:
    row = {"id": "m1", "content": "c", "importance": 0.8, "created_at": 1000, "last_accessed_at": 2000,
           "access_count": 2, "tags": ["x"], "thread_id": "t", "expires_at": 5000, "metadata": {"a": 1}}  # fmt: skip
    doc = legacy_fields(row, half_life_seconds=100.0, line=1)
    assert doc.id == "m1" and doc.expire_at == 5000 and doc.vector is None
    f = doc.fields
    assert (f["created_at"], f["last_accessed_at"], f["access_count"], f["expires_at"]) == (
        "1000",
        "2000",
        "2",
        "5000",
    )
    assert (f["threadId"], f["tags"], f["metadata"], f["importance"]) == ("t", "x", '{"a": 1}', "0.8")
    with pytest.raises(ValidationError, match="comma"):
        legacy_fields(row | {"tags": ["a,b"]}, half_life_seconds=100.0, line=1)
