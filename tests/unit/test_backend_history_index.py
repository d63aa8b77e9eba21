"""The history index's schema, and the legacy ``valid_until`` rewrite (backend/history_index.py)."""

from __future__ import annotations

import json

from betterdb_memory.backend.history_index import (
    HISTORY_LAYOUT,
    HistoryIndex,
    history_index_args,
    history_index_name,
    numeric_ms,
)
from betterdb_memory.core.facts import subject_digest
from betterdb_memory.core.keys import ConsolidationKeys, KeySpace, Scope
from betterdb_memory.core.query import IndexSpec, MemoryFilter, build_filter
from betterdb_memory.testing import RecordingBackend


def test_the_history_index_is_beside_the_reference_one_under_its_own_prefix() -> None:
    keys = KeySpace("s")
    args = history_index_args(IndexSpec(index="s:mem:idx", prefix="s:mem:", dimensions=4, m=8), keys)
    assert history_index_name(keys) == "s:hist:idx"
    assert args[:8] == ["FT.CREATE", "s:hist:idx", "ON", "HASH", "PREFIX", "1", "s:hist:", "SCHEMA"]
    schema = args[8:]
    # same HNSW parameters as the main index
    assert schema[:4] == ["vector", "VECTOR", "HNSW", "12"] and schema[10:12] == ["M", "8"]
    for name in ("valid_from", "valid_until", "created_at"):
        assert schema[schema.index(name) + 1] == "NUMERIC"
    for name in ("threadId", "agentId", "namespace", "tags", "source", "sensitivity", "kind", "subject_key"):
        assert schema[schema.index(name) + 1] == "TAG"
    # what build_filter may name on it: never the keep-score or dedup fields
    assert "keep" not in schema and "dedup" not in schema
    flt = MemoryFilter(scope=Scope(thread_id="t"), max_keep=1.0, dedup="x", as_of=5, history=True)
    clause = build_filter(flt, HISTORY_LAYOUT)
    assert "@keep" not in clause and "@dedup" not in clause and "@valid_until:[(5 +inf]" in clause


def test_numeric_ms_reads_ms_and_iso_and_refuses_the_rest() -> None:
    assert numeric_ms(b"1714521600000") == "1714521600000"
    assert numeric_ms("2024-05-01T00:00:00+00:00") == "1714521600000"
    assert numeric_ms("2024-05-01T02:00:00+02:00") == "1714521600000"
    assert numeric_ms("soon") is None
    assert numeric_ms("") is None


async def test_legacy_history_is_found_through_the_ledger_keys_and_rewritten() -> None:
    keys = KeySpace("s")
    scope = Scope(thread_id="t")
    ck = ConsolidationKeys(keys, scope)
    digest = subject_digest("city")
    backend = RecordingBackend()
    backend.reply({scope.tag.encode(): json.dumps([None, None, "t"]).encode()})  # HGETALL targets
    backend.reply([digest.encode()])  # HKEYS subjects
    backend.reply([b"f1", b"f2", b"f3"])  # ZRANGE history
    backend.reply(b"2022-01-01T00:00:00+00:00", b"1640995200000", None)  # HGET valid_until of each
    backend.reply(1)  # the one rewrite
    assert await HistoryIndex(backend, keys).rewrite_legacy() == 1
    assert backend.sent[-1].commands == (("HSET", ck.hist_doc("f1"), "valid_until", "1640995200000"),)
    assert not any(c[0] == "SCAN" for trip in backend.sent for c in trip.commands)
