"""``tiers.single_write``: ``remember`` writes exactly what ``remember_many`` of the same one item writes.

Each case runs twice on its own recording backend, once through ``remember`` (the
single path, or the batch path it hands over to) and once through ``remember_many``
(the batch path), with the clock and the new id fixed: the round trips (every command
and argument, the HASH fields among them), the span's attributes and the metrics must
be the same. A plain write must not touch the batch path; a write with an id, a
subject, dedup or a cap must.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from betterdb_memory.core.filter_fields import MetadataFields
from betterdb_memory.core.keys import KeySpace
from betterdb_memory.core.record import NewMemory
from betterdb_memory.core.requests import new_memory
from betterdb_memory.core.tunables import ConfigSnapshot
from betterdb_memory.errors import StoreClosedError, ValidationError
from betterdb_memory.observability.hub import StoreObservability
from betterdb_memory.tiers.single_write import remember_one
from tests.unit.parts import Parts, build, search_reply

NOW = 1_764_633_600.123
VEC = [0.6, 0.8, 0, 0, 0, 0, 0, 0]

# (remember's keyword arguments, whether the single path writes it itself)
CASES: dict[str, tuple[dict[str, Any], bool]] = {
    "plain": ({}, True),
    "scoped": ({"thread_id": "t", "agent_id": "a", "namespace": "n"}, True),
    "importance": ({"importance": 0.9, "thread_id": "t"}, True),
    "importance zero": ({"importance": 0, "thread_id": "t"}, True),
    "tags": ({"tags": ["b", "a", "b"], "thread_id": "t"}, True),
    "metadata": ({"metadata": {"k": [1, "é"], "n": 2.5, "cat": "x"}, "agent_id": "a"}, True),
    "ttl": ({"ttl": 1.5, "thread_id": "t"}, True),
    "ttl zero": ({"ttl": 0}, True),
    "valid_from": ({"valid_from": "2024-05", "thread_id": "t"}, True),
    "valid_from ms": ({"valid_from": 1_700_000_000_000}, True),
    "source and sensitivity": ({"source": "fact", "sensitivity": "pii"}, True),
    "summary source": ({"source": "summary"}, True),
    "vector": ({"vector": VEC, "thread_id": "t"}, True),
    "everything": (
        {
            "importance": 0.2,
            "tags": ["x"],
            "source": "web",
            "ttl": 60,
            "thread_id": "t",
            "agent_id": "a",
            "namespace": "n",
            "sensitivity": "low",
            "metadata": {"cat": "y"},
            "vector": VEC,
            "valid_from": "2025-01-02T03:04:05Z",
        },
        True,
    ),
    "id": ({"id": "mine-1", "thread_id": "t"}, False),
    "subject": ({"subject": "Home City", "thread_id": "t", "valid_from": 2}, False),
}


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock and the next new id, fixed: both paths write the same values."""
    monkeypatch.setattr(time, "time", lambda: NOW)
    monkeypatch.setattr(KeySpace, "new_memory_id", staticmethod(lambda: "fixed-id"))


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _parts(exporter: InMemorySpanExporter, *, dedup: bool = False, cap: int | None = None) -> Parts:
    p = build(dedup=dedup, config=ConfigSnapshot(max_items_per_scope=cap))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    p.rt.metadata_fields = MetadataFields.of({"cat": "tag", "n": "numeric"})
    p.rt.obs = StoreObservability(
        None,
        p.rt.keys,
        ConfigSnapshot(max_items_per_scope=cap),
        discovery=False,
        registry=CollectorRegistry(),
        tracer_provider=provider,
    )
    return p


def _script(p: Parts, case: str, *, dedup: bool, cap: int | None) -> None:
    """The same replies for both paths (what the server would answer to this write)."""
    if dedup:
        p.backend.reply(search_reply(0))  # no twin
    if case == "subject":
        # HSET, SUBJECT_PUT (nothing current before), the registry's two HSETs, the journal's
        # ZADD (tiers.subject_repair), the subject search
        p.backend.reply(1, [b"current", b"", b"fixed-id", [b"fixed-id", b"2"]], 1, 1, 1, search_reply(0))
    elif cap is not None and {"thread_id", "agent_id", "namespace"} & set(CASES[case][0]):
        writes = [1, 1] if CASES[case][0].get("ttl") else [1]
        p.backend.reply(*writes, [1])  # the write(s), then the scope's count: under the cap
    elif case == "id":
        p.backend.reply([None] * 9, None, 0)  # read_existing: nothing there (no counter, no history)


async def _run(
    exporter: InMemorySpanExporter, case: str, *, single: bool, dedup: bool = False, cap: int | None = None
) -> tuple[list[Any], dict[str, Any], dict[str, float | None], bool]:
    kwargs, _ = CASES[case]
    p = _parts(exporter, dedup=dedup, cap=cap)
    _script(p, case, dedup=dedup, cap=cap)
    batch_calls = []
    real = p.long_term._write_capped

    async def spy(memories: Any) -> Any:
        batch_calls.append(memories)
        return await real(memories)

    p.long_term._write_capped = spy  # type: ignore[assignment]
    exporter.clear()
    if single:
        mid = await p.long_term.remember("Ada moved to Berlin", **kwargs)
    else:
        [mid] = await p.long_term.remember_many([{"content": "Ada moved to Berlin", **kwargs}])
    assert mid == kwargs.get("id", "fixed-id")
    trips = [(t.operation, t.commands, t.searches, t.idempotent) for t in p.backend.sent]
    [span] = [s for s in exporter.get_finished_spans() if s.name == "agent_memory.remember"]
    reg = p.rt.obs.metrics
    names = ("agent_memory_remember_total", "agent_memory_items", "agent_memory_dedup_hits_total")
    metrics = {n: reg.registry.get_sample_value(n, {"store_name": "parts"}) for n in names}
    return trips, dict(span.attributes or {}), metrics, bool(batch_calls)


@pytest.mark.parametrize("case", list(CASES))
async def test_remember_writes_what_remember_many_writes(
    case: str, fixed: None, exporter: InMemorySpanExporter
) -> None:
    single = await _run(exporter, case, single=True)
    batch = await _run(exporter, case, single=False)
    assert single[:3] == batch[:3]
    assert single[3] is not CASES[case][1]  # the batch path only for what the single path hands over
    if CASES[case][1]:
        [(op, commands, searches, _)] = single[0][:1]
        assert (op, commands[0][:2], searches) == ("remember", ("HSET", "parts:mem:fixed-id"), ())


@pytest.mark.parametrize("case", ["plain", "tags", "ttl", "metadata", "valid_from"])
@pytest.mark.parametrize(("dedup", "cap"), [(True, None), (False, 5), (True, 5)])
async def test_dedup_and_a_cap_go_the_batch_way_and_write_the_same(
    case: str, dedup: bool, cap: int | None, fixed: None, exporter: InMemorySpanExporter
) -> None:
    single = await _run(exporter, case, single=True, dedup=dedup, cap=cap)
    batch = await _run(exporter, case, single=False, dedup=dedup, cap=cap)
    assert single[:3] == batch[:3]
    assert single[3]


async def test_a_cap_set_after_the_index_is_ready_applies_to_the_write_it_was_read_by(
    fixed: None, exporter: InMemorySpanExporter
) -> None:
    """The cap is read when the batch path reads it (after embedding): the embedded vector goes along."""
    p = _parts(exporter)
    p.backend.reply(1, [1])
    calls = []
    real_embed = p.rt.embed

    async def embed(texts: Any) -> Any:
        calls.append(list(texts))
        p.rt.obs.live._current = ConfigSnapshot(max_items_per_scope=3)  # a refresh while embedding
        return await real_embed(texts)

    p.rt.embed = embed  # type: ignore[method-assign]
    await p.long_term.remember("x", thread_id="t")
    assert calls == [["x"]]  # embedded once
    [trip] = p.backend.sent
    assert [c[0] for c in trip.commands] == ["HSET"] and trip.searches[0][0] == "FT.SEARCH"


async def _write_either(p: Parts, memory: NewMemory, *, single: bool) -> None:
    """``memory`` written by the single path, or by the batch path (``_remember``) alone."""
    if single:
        await remember_one(p.rt, memory, p.long_term._write_capped, importance=None, ttl=None)
    else:
        await p.long_term._remember([memory], mark=None)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"metadata": {"n": "not a number"}}, "validation.metadata_field"),
        ({"metadata": {"cat": "a,b"}}, "validation.comma"),
    ],
)
async def test_a_declared_fields_error_is_the_batch_paths_and_nothing_is_sent(
    kwargs: dict[str, Any], code: str, exporter: InMemorySpanExporter
) -> None:
    errors = []
    for single in (True, False):
        p = _parts(exporter)
        memory = new_memory("x", dimensions=p.rt.embedder.dimensions, **kwargs)
        with pytest.raises(ValidationError) as info:
            await _write_either(p, memory, single=single)
        assert p.backend.sent == []
        errors.append((info.value.code, str(info.value), info.value.details))
    assert errors[0] == errors[1] and errors[0][0] == code


async def test_a_closed_store_raises_as_the_batch_path_does(exporter: InMemorySpanExporter) -> None:
    errors = []
    for single in (True, False):
        p = _parts(exporter)
        p.backend.closed = True
        memory = new_memory("x", dimensions=p.rt.embedder.dimensions, vector=VEC)
        with pytest.raises(StoreClosedError) as info:
            await _write_either(p, memory, single=single)
        errors.append((info.value.code, str(info.value)))
    assert errors[0] == errors[1] and errors[0][0] == "state.closed"


async def test_a_vector_whose_length_was_learned_late_is_refused_by_item_name(
    exporter: InMemorySpanExporter,
) -> None:
    """A vector checked while the dimension was unknown (0) fails as the batch path fails it."""
    errors = []
    for single in (True, False):
        p = _parts(exporter)
        memory = new_memory("x", dimensions=0, vector=[1.0, 2.0])
        with pytest.raises(ValidationError) as info:
            await _write_either(p, memory, single=single)
        assert p.backend.sent == []
        errors.append((info.value.code, str(info.value), info.value.details))
    assert errors[0] == errors[1] and "vector of item 0" in errors[0][1]
