"""A model-based test: random sequences of public calls, every answer checked against ``model.Model``.

A Hypothesis ``RuleBasedStateMachine`` drives a real ``MemoryStore`` on the session
server (a fresh store name per example, explicit vectors, so nothing depends on an
embedder's notion of similarity) through ``remember`` (with and without ids: upserts,
scopes, tags, a cap of ``CAP`` per scope), ``update``, ``forget``,
``forget_by_scope``, ``get``, ``list``, ``count``, ``recall_by_vector``, consolidation
into facts with a scripted extractor (facts are memories of kind ``fact``: listed,
counted, capped and evicted like the others; a subject's new fact supersedes its
current one), L1 turns and export/import into a second store. After every step: the whole store holds exactly
the model's memories (nothing acknowledged missing, nothing deleted back), and
counts per scope equal the model's. A failing sequence is shrunk and printed by
Hypothesis.

Each example runs its store on an event loop of its own (``asyncio.Runner``): the
state machine's rules are plain functions. Profiles: ``BETTERDB_MODEL_EXAMPLES``
(default 40) examples of up to ``BETTERDB_MODEL_STEPS`` (default 40) steps; ``make
soak`` raises both.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import uuid
from collections import Counter
from collections.abc import Awaitable
from typing import Any, ClassVar, TypeVar

import numpy as np
import pytest
import valkey.asyncio as avalkey
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from betterdb_memory import Fact, HashingEmbedder, MemoryNotFoundError, MemoryStore
from betterdb_memory.transfer import export_store, import_store

from .conftest import DIM
from .model import HALF_LIFE, WINDOW, Filter, Model, ScriptedFact, Target

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

T = TypeVar("T")

CAP = 3
EXAMPLES = int(os.environ.get("BETTERDB_MODEL_EXAMPLES", "40"))
STEPS = int(os.environ.get("BETTERDB_MODEL_STEPS", "40"))
#: The Hypothesis profile of every model test (test_model_time.py too).
MODEL_SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
# Consolidation rules (on by default; BETTERDB_MODEL_FACTS=0 leaves them out).
FACTS = os.environ.get("BETTERDB_MODEL_FACTS", "1") == "1"

namespaces = st.sampled_from([None, "n1", "n2"])
agents = st.sampled_from([None, "a1", "a2"])
threads = st.sampled_from([None, "t1", "t2"])
tag_sets = st.lists(st.sampled_from(["x", "y", "X"]), max_size=2, unique=True)
# A ladder with ties (0.5 twice as likely) and the log2 floor (0.0 and 0.0005 tie there).
importances = st.sampled_from([0.0, 0.0005, 0.1, 0.5, 0.5, 0.9, 1.0])
filters = st.builds(Filter, namespaces, agents, threads, tag_sets.map(tuple))
fixed_ids = st.sampled_from(["m0", "m1", "m2", "m3"])
# Consolidation targets: exact scopes, none inside another (a target's candidates and
# current facts are read with filter semantics, its subjects are exact: see the report).
targets: st.SearchStrategy[Target] = st.sampled_from([("n1", "a1", "t1"), ("n2", "a2", "t2")])
scripted_facts = st.builds(
    ScriptedFact,
    subject=st.sampled_from(["city", "City ", "job"]),  # two normalised subjects
    statement=st.sampled_from(["Paris", "paris", "Berlin"]),  # "Paris" == "paris" once normalised
    date=st.sampled_from([None, "2021-01-01", "2022-01-01"]),
    tombstone=st.sampled_from([False, False, False, True]),
)
scripts = st.lists(scripted_facts, min_size=1, max_size=3)


def vector(seed: int) -> list[float]:
    """A random unit vector: nearest to itself by far among the few dozen of one example."""
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return [float(x) for x in v / np.linalg.norm(v)]


def _drop_store(client: avalkey.Valkey, name: str) -> Awaitable[None]:
    async def drop() -> None:
        keys = [k async for k in client.scan_iter(match=f"{name}:*", count=1000)]
        if keys:
            await client.delete(*keys)
        for index in (f"{name}:mem:idx", f"{name}:hist:idx"):  # valkey-search allows 1,000 per server
            with contextlib.suppress(Exception):  # no index made (a store that never wrote)
                await client.execute_command("FT.DROPINDEX", index)

    return drop()


class StoreMachine(RuleBasedStateMachine):
    url = ""  # set by the test from the session server's fixture
    calls: ClassVar[Counter[str]] = Counter()  # what the examples exercised, printed by the test

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        self.name = f"model{uuid.uuid4().hex[:10]}"
        self.model = Model(CAP)
        self.seeds = 0
        self.turn_no = 0
        self.client: avalkey.Valkey = self.run(self._client())
        self.store = MemoryStore(
            client=self.client,
            name=self.name,
            embedder=HashingEmbedder(),
            max_items_per_scope=CAP,
            half_life_seconds=HALF_LIFE,
            discovery=False,
            max_session_turns=WINDOW,
            summarize_batch=0,
        )

    async def _client(self) -> avalkey.Valkey:
        return avalkey.Valkey.from_url(self.url)

    def run(self, aw: Awaitable[T]) -> T:
        self.calls["store calls"] += 1

        async def bounded() -> T:
            return await asyncio.wait_for(aw, 60)  # a hang fails the example, never the suite

        return self.runner.run(bounded())

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
            self.run(_drop_store(self.client, self.name))
            self.run(self.client.aclose())
        finally:
            self.runner.close()

    # -- memories ----------------------------------------------------------------------

    ids = Bundle("ids")

    @initialize()
    def start(self) -> None:
        self.run(self.store.ensure_index())

    @rule(
        target=ids,
        mid=st.none() | fixed_ids,
        importance=importances,
        tags=tag_sets,
        namespace=namespaces,
        agent_id=agents,
        thread_id=threads,
        ttl=st.sampled_from([None, None, 3600]),
    )
    def remember(
        self,
        mid: str | None,
        importance: float,
        tags: list[str],
        namespace: str | None,
        agent_id: str | None,
        thread_id: str | None,
        ttl: int | None = None,
    ) -> str:
        self.seeds += 1
        self.calls["remember"] += 1
        content = f"memory {self.seeds}"
        got = self.run(
            self.store.remember(
                content,
                id=mid,
                importance=importance,
                tags=tags or None,
                namespace=namespace,
                agent_id=agent_id,
                thread_id=thread_id,
                vector=vector(self.seeds),
                ttl=ttl,
            )
        )
        if mid is not None:
            assert got == mid, "an upsert answers the id it was given"
        else:
            assert got not in self.model.memories and got not in self.model.deleted, "a fresh id"
        ev = self.model.write(
            got,
            content,
            importance,
            tags,
            namespace,
            agent_id,
            thread_id,
            self.seeds,
            expiring=ttl is not None,
        )
        if ev.sure or ev.ties:
            found = self.run(self.store.get_many([*ev.sure, *ev.ties]))
            gone = {m for m, item in zip([*ev.sure, *ev.ties], found, strict=True) if item is None}
            assert set(ev.sure) <= gone, f"the lowest keep-scores {ev.sure} must go, gone: {gone}"
            tied_gone = gone & set(ev.ties) - set(ev.sure)
            assert len(tied_gone) == ev.more, (
                f"{ev.more} of the tied {ev.ties} must go, gone: {sorted(tied_gone)}"
            )
            self.model.forget(gone)
            self.calls["evictions"] += len(gone)
        return got

    # Two more ways in, into a few crowded scopes: caps and their evictions every few steps.
    @rule(target=ids, mid=st.none() | fixed_ids, importance=importances, tags=st.sampled_from([[], ["x"]]),
          thread_id=st.sampled_from([None, "t1"]))  # fmt: skip
    def remember_crowded(
        self, mid: str | None, importance: float, tags: list[str], thread_id: str | None
    ) -> str:
        return self.remember(mid, importance, tags, "n1", None, thread_id)

    @rule(target=ids, importance=importances, agent_id=st.sampled_from(["a1", "a2"]))
    def remember_agent(self, importance: float, agent_id: str) -> str:
        return self.remember(None, importance, [], None, agent_id, None)

    @rule(
        mid=ids,
        importance=st.none() | importances,
        tags=st.none() | tag_sets,
        new_content=st.booleans(),
        ttl=st.sampled_from([None, None, 0, 7200]),
    )
    def update(
        self, mid: str, importance: float | None, tags: list[str] | None, new_content: bool, ttl: int | None
    ) -> None:
        content = f"updated {mid} {self.seeds}" if new_content else None
        if mid not in self.model.memories:
            with pytest.raises(MemoryNotFoundError):
                self.run(self.store.update(mid, importance=importance, tags=tags, content=content, ttl=ttl))
            return
        item = self.run(self.store.update(mid, importance=importance, tags=tags, content=content, ttl=ttl))
        self.model.update(mid, importance, tags, content, ttl)
        self._same(item, mid)

    @rule(mid=consumes(ids))
    def forget(self, mid: str) -> None:
        existed = mid in self.model.memories
        assert self.run(self.store.forget(mid)) is existed
        self.model.forget([mid])

    @rule(flt=filters)
    def forget_by_scope(self, flt: Filter) -> None:
        if flt.unscoped:
            return
        n = self.run(self.store.forget_by_scope(**flt.kwargs()))
        assert n == self.model.forget([m.id for m in self.model.matching(flt)])
        if not flt.tags:  # the whole scope: its targets' subjects, fact history and consumed sources
            self.model.forget_targets(flt)

    @rule(mid=ids)
    def get(self, mid: str) -> None:
        item = self.run(self.store.get(mid))
        if mid in self.model.memories:
            assert item is not None, f"{mid} was acknowledged and not deleted"
            self._same(item, mid)
        else:
            assert item is None, f"{mid} was deleted and came back"

    @rule(flt=filters)
    def list_and_count(self, flt: Filter) -> None:
        want = {m.id for m in self.model.matching(flt)}
        page = self.run(self.store.list(limit=1000, **flt.kwargs()))
        assert {i.id for i in page.items} == want
        assert page.total == len(want)
        for item in page.items:
            self._same(item, item.id)
        assert self.run(self.store.count(**flt.kwargs())) == len(want)

    @rule(flt=filters, probe=st.none() | ids)
    def recall_by_vector(self, flt: Filter, probe: str | None) -> None:
        target = self.model.memories.get(probe) if probe is not None else None
        own = target.vector_seed if target is not None else None
        seed = own if own is not None else 10**6 + self.seeds
        hits = self.run(
            self.store.recall_by_vector(vector(seed), k=50, threshold=2.0, reinforce=False, **flt.kwargs())
        )
        want = {m.id for m in self.model.matching(flt)}
        assert {h.item.id for h in hits} == want, "recall returns exactly the scope"
        if target is not None and own is not None and target.id in want:
            assert hits[0].item.id == target.id, "a memory's own vector finds it first"

    # -- consolidation -----------------------------------------------------------------

    facts = Bundle("facts")

    @rule(target=ids, scope=targets, mid=st.none() | fixed_ids, importance=importances,
          tags=st.sampled_from([[], ["x"]]))  # fmt: skip
    def remember_in_target(self, scope: Target, mid: str | None, importance: float, tags: list[str]) -> str:
        """A source for consolidation (in a target scope, so capped there: facts get evicted too)."""
        self.calls["remember_in_target"] += 1
        return self.remember(mid, importance, tags, *scope)

    @precondition(lambda self: FACTS)
    @rule(target=facts, scope=targets, script=scripts, importance=importances, fresh=st.booleans())
    def consolidate_facts(
        self, scope: Target, script: list[ScriptedFact], importance: float, fresh: bool
    ) -> Any:
        """``fresh``: remember a source there first (sources are rare in random scopes)."""
        self.calls["consolidate"] += 1
        if fresh:
            self.remember(None, 0.5, [], *scope)
        run = self.model.plan_facts(scope, script)
        seen: list[list[str]] = []

        def extract(items: list[Any]) -> list[Fact]:
            seen.append([i.id for i in items])
            return [Fact(f.subject, f.statement, f.date, f.tombstone) for f in script]

        ns, agent, thread = scope
        result = self.run(
            self.store.consolidate(
                "facts", extract_facts=extract, namespace=ns, agent_id=agent, thread_id=thread,
                fact_importance=importance,
            )
        )  # fmt: skip
        assert seen == ([run.candidates] if run.candidates else []), (
            "the extractor sees the unconsumed sources, oldest first"
        )
        assert result.candidates == len(run.candidates)
        assert len(result.created) == len(run.puts), f"facts written: {result.created}, model: {run.puts}"
        assert sorted(result.unmatched_tombstones) == sorted(run.unmatched)
        assert result.unchanged == run.unchanged
        self.model.apply_facts(run, result.created, importance)
        self.calls["facts written"] += len(result.created)
        want = set(self.model.current_facts(scope).values())
        assert set(result.fact_ids) == want, f"current facts {sorted(result.fact_ids)}, model {sorted(want)}"
        return multiple(*result.created)

    @rule(mid=facts)
    def get_fact(self, mid: str) -> None:
        item = self.run(self.store.get(mid))
        if mid in self.model.memories:
            assert item is not None, f"fact {mid} is current and missing"
            self._same(item, mid)
        elif mid in self.model.history:  # history may be readable, never as a current fact
            assert item is None or item.valid_until is not None, f"superseded fact {mid} is current again"
        else:
            assert item is None, f"fact {mid} was deleted and came back"

    @rule(mid=consumes(facts))
    def forget_fact(self, mid: str) -> None:
        got = self.run(self.store.forget(mid))
        if mid in self.model.memories:
            assert got is True
            self.model.forget([mid])
        elif mid in self.model.history:  # a past version: deleted, off its subject
            self.model.forget_past(mid)
        else:
            assert got is False

    # -- L1 ----------------------------------------------------------------------------

    @rule(agent_id=agents, thread_id=st.sampled_from(["t1", "t2"]))
    def store_turn(self, agent_id: str | None, thread_id: str) -> None:
        self.turn_no += 1
        user = f"turn {self.turn_no}"
        self.run(self.store.store_turn(thread_id, user, f"re {self.turn_no}", agent_id=agent_id))
        self.model.store_turn(agent_id, thread_id, user)

    @rule(agent_id=agents, thread_id=st.sampled_from(["t1", "t2"]), k=st.integers(2, 4))
    def store_turns_concurrently(self, agent_id: str | None, thread_id: str, k: int) -> None:
        """Concurrent writers on one session: their turns land last, each once, in an order the
        server chose (the model adopts it) and that their timestamps agree with."""
        users = [f"turn {self.turn_no + i + 1}" for i in range(k)]
        self.turn_no += k

        async def together() -> list[Any]:
            await asyncio.gather(
                *(self.store.store_turn(thread_id, u, "re", agent_id=agent_id) for u in users)
            )
            return await self.store.get_recent_turns(thread_id, agent_id=agent_id)

        turns = self.run(together())
        before = self.model.recent(agent_id, thread_id, None)
        got = [t.user_message for t in turns]
        keep = len(got) - k  # older turns still in the window
        assert len(got) == min(len(before) + k, WINDOW)
        assert got[:keep] == before[len(before) - keep :], "the older turns stay as they were"
        assert sorted(got[keep:]) == sorted(users), f"the concurrent turns {users} are the last ones: {got}"
        for u in got[keep:]:
            self.model.store_turn(agent_id, thread_id, u)
        stamps = [t.timestamp for t in turns]
        assert stamps == sorted(stamps), "turns in their timestamps' order"

    @rule(agent_id=agents, thread_id=st.sampled_from(["t1", "t2"]), n=st.none() | st.integers(1, 7))
    def get_recent_turns(self, agent_id: str | None, thread_id: str, n: int | None) -> None:
        turns = self.run(self.store.get_recent_turns(thread_id, agent_id=agent_id, n=n))
        assert [t.user_message for t in turns] == self.model.recent(agent_id, thread_id, n)
        stamps = [t.timestamp for t in turns]
        assert stamps == sorted(stamps), "turns in their timestamps' order"

    @rule(agent_id=agents, thread_id=st.sampled_from(["t1", "t2"]))
    def clear_session(self, agent_id: str | None, thread_id: str) -> None:
        self.run(self.store.clear_session(thread_id, agent_id=agent_id))
        self.model.clear_session(agent_id, thread_id)

    # -- export / import ---------------------------------------------------------------

    @precondition(lambda self: bool(self.model.memories))
    @rule()
    def transfer(self) -> None:
        """Export with vectors and import into a fresh store: the copy holds exactly the model."""
        self.run(self._transfer())

    async def _transfer(self) -> None:
        out = io.StringIO()
        await export_store(self.store, out, vectors=True)
        name = f"{self.name}c"
        copy = MemoryStore(
            client=self.client, name=name, embedder=HashingEmbedder(), discovery=False,
            max_session_turns=WINDOW, summarize_batch=0,
        )  # fmt: skip
        try:
            await import_store(copy, io.StringIO(out.getvalue()))
            page = await copy.list(limit=1000)
            assert {i.id for i in page.items} == set(self.model.memories)
            for item in page.items:
                self._same(item, item.id)
            for (agent, thread), users in self.model.turns.items():
                turns = await copy.get_recent_turns(thread, agent_id=agent)
                assert [t.user_message for t in turns] == users
        finally:
            await copy.close()
            await _drop_store(self.client, name)

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def holds_exactly_the_model(self) -> None:
        page = self.run(self.store.list(limit=1000))
        stored = {i.id for i in page.items}
        model = set(self.model.memories)
        assert not model - stored, f"acknowledged and missing: {sorted(model - stored)}"
        assert not stored - model, f"not in the model (deleted or evicted, back): {sorted(stored - model)}"
        assert self.run(self.store.count()) == len(model)
        for ns in ("n1", "n2"):
            want = len(self.model.matching(Filter(namespace=ns)))
            assert self.run(self.store.count(namespace=ns)) == want, f"count of namespace {ns}"

    def _same(self, item: Any, mid: str) -> None:
        m = self.model.memories[mid]
        got = (
            item.content,
            item.importance,
            sorted(item.tags),
            item.namespace,
            item.agent_id,
            item.thread_id,
            item.expires_at is not None,
            item.kind,
        )
        want = (
            m.content,
            m.importance,
            list(m.tags),
            m.namespace,
            m.agent_id,
            m.thread_id,
            m.expiring,
            m.kind,
        )
        assert got == want, f"{mid}: stored {got}, model {want}"


def test_the_store_agrees_with_its_model(valkey_url: str) -> None:
    """Random call sequences on a real store answer exactly what the README's semantics say."""
    StoreMachine.url = valkey_url
    StoreMachine.calls.clear()
    run_state_machine_as_test(
        StoreMachine,
        settings=MODEL_SETTINGS,
    )
    print(f"model test: {EXAMPLES} examples of up to {STEPS} steps: {dict(StoreMachine.calls)}")


@pytest.mark.parametrize(
    ("leaves", "current"),
    [
        ("evicted", True),
        ("retracted in the same run", True),
        ("retracted at its start in the same run", True),
    ],
)
def test_a_dated_version_after_a_current_one_left_is_current(
    valkey_url: str, leaves: str, current: bool
) -> None:
    """Found by the model: a subject's current fact leaves, evicted by a capped write, or
    retracted by a tombstone that the extractor lists before the new statement. The subject is
    then stated again, dated 2022 (before the version that left, which started at its write).
    An evicted version has left, so the new one is current (docs/concepts/time.md, "One version
    at each instant"). A statement after a tombstone of its subject in the same run is a
    correction ("A retraction with its replacement"): current from 2022, the retracted version
    (begun later, at its write) valid at no instant; it used to be a past version, leaving no
    current fact. The tombstone dated 2021 ends Paris where it began either way. ``fact_ids``
    names what the store lists: it used to name the new fact current while it was in history,
    and the tombstone was applied after the statement, so the last case had no current fact."""

    async def scenario() -> None:
        client = avalkey.Valkey.from_url(valkey_url)
        name = f"model{uuid.uuid4().hex[:10]}"
        store = MemoryStore(
            client=client, name=name, embedder=HashingEmbedder(), discovery=False,
            max_items_per_scope=3, half_life_seconds=HALF_LIFE,
        )  # fmt: skip
        scope = {"namespace": "n1", "agent_id": "a1", "thread_id": "t1"}
        try:
            await store.remember("source 0", importance=0.9, **scope)
            first = await store.consolidate(
                "facts", extract_facts=lambda items: [Fact("city", "Paris")], fact_importance=0.0, **scope
            )
            await store.remember("source 1", importance=0.5, **scope)
            if leaves == "evicted":
                await store.remember(
                    "source 2", importance=0.5, **scope
                )  # evicts the fact (lowest keep-score)
                assert await store.get(first.created[0]) is None
            again = [Fact("city", "Berlin", "2022-01-01")]
            if leaves != "evicted":
                dated = "2021-01-01" if "at its start" in leaves else None
                again.insert(0, Fact("city", "", dated, tombstone=True))
            second = await store.consolidate("facts", extract_facts=lambda items: again, **scope)
            listed = {i.id for i in (await store.list(limit=100, **scope)).items if i.kind == "fact"}
            assert set(second.fact_ids) == listed, "fact_ids names the facts the store lists"
            assert second.fact_ids == (second.created if current else [])
        finally:
            await store.close()
            await _drop_store(client, name)
            await client.aclose()

    asyncio.run(scenario())
