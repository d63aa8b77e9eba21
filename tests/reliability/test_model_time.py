"""A model-based test of subjects, supersession and history (issue 30), beside ``test_model``.

A Hypothesis ``RuleBasedStateMachine`` drives a real ``MemoryStore`` through
``remember(subject=..., valid_from=...)`` with subjects from a tiny set (one spelled two
ways: they normalise to one) and dates from a small set (ties included), ``forget`` of a
current version, ``get`` of every id ever written, ``list`` / ``count`` now and
``as_of`` one of the dates, and ``fact_history``. The model is docs/concepts/time.md
written out as plain Python: within the exact scope a subject has at most one current
version; a write not older than the current one supersedes it (which then ends where the
new one begins; a tie: the later write wins); an older-dated write enters the history as
a past version (valid until the next version's start, the versions before it shortened
to its own start); forgetting the current version leaves none, and a write then becomes
current unless a version left (valid at some instant) starts after it; forgetting a past
version leaves a gap.
At every instant at most one version of a subject is valid. Same profiles as ``test_model``
(``BETTERDB_MODEL_EXAMPLES`` / ``BETTERDB_MODEL_STEPS``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar, TypeVar

import pytest
import valkey.asyncio as avalkey
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from betterdb_memory import HashingEmbedder, MemoryStore

from .test_model import EXAMPLES, MODEL_SETTINGS, STEPS, _drop_store, vector

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

T = TypeVar("T")


DATES = ["2020-01-01", "2021-01-01", "2022-01-01", "2023-01-01"]
# Probes at the dates themselves (a version's first instant) and between them.
PROBES = [*DATES, "2019-06-01", "2020-06-01", "2022-06-01", "2024-06-01"]
SUBJECTS = {"home": "home", "Home ": "home", "job": "job"}  # spelling -> normalised
THREADS = ["t1", "t2"]  # None would list every thread: not one exact scope


def ms(day: str) -> int:
    return int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() * 1000)


@dataclass
class Version:
    id: str
    key: tuple[str | None, str | None]  # (thread, normalised subject); subject None: no subject
    valid_from: int
    valid_until: int | None = None  # None: open (the current one, or a past one before a gap)
    current: bool = False
    forgotten: bool = False


class TimeModel:
    def __init__(self) -> None:
        self.versions: dict[str, Version] = {}
        self.current: dict[tuple[str | None, str | None], str] = {}

    def of(self, key: tuple[str | None, str | None]) -> list[Version]:
        """The subject's versions still recorded, by valid_from then write order."""
        return [v for v in self.versions.values() if v.key == key and not v.forgotten]

    def write(self, mid: str, thread: str | None, subject: str | None, vf: int) -> None:
        key = (thread, subject)
        v = Version(mid, key, vf)
        others = self.of(key)
        self.versions[mid] = v
        if subject is None:
            v.current = True
            return
        # The latest version wins (a tie: the later write). With a current one, that is
        # the current one; with none (forgotten), any version left may start later.
        cur_id = self.current.get(key)
        valid_somewhen = [o.valid_from for o in others if o.valid_until != o.valid_from]  # not a tie's loser
        latest = self.versions[cur_id].valid_from if cur_id else max(valid_somewhen, default=None)
        if latest is None or vf >= latest:
            v.current = True
            self.current[key] = mid
            if cur_id:
                self.versions[cur_id].current = False
        else:
            v.valid_until = min(o.valid_from for o in others if o.valid_from > vf)
        # Every version that began at or before it ends where it begins (only ever shortened).
        for o in others:
            if o.valid_from <= vf and (o.valid_until is None or o.valid_until > vf):
                o.valid_until = vf

    def forget(self, mid: str) -> None:
        v = self.versions[mid]
        v.forgotten, v.current = True, False
        if self.current.get(v.key) == mid:
            del self.current[v.key]

    def forget_past(self, mid: str) -> None:
        """A superseded version forgotten: the others' validity is untouched (a gap where it was)."""
        self.versions[mid].forgotten = True

    def now(self, thread: str | None) -> set[str]:
        return {v.id for v in self.versions.values() if v.current and v.key[0] == thread}

    def at(self, thread: str | None, t: int) -> set[str]:
        out = {
            v.id
            for v in self.versions.values()
            if v.key[0] == thread and not v.forgotten and v.valid_from <= t
            and (v.current or (v.valid_until is not None and t < v.valid_until))
        }  # fmt: skip
        keys = [self.versions[i].key for i in out if self.versions[i].key[1] is not None]
        assert len(keys) == len(set(keys)), f"the model holds two versions of a subject at {t}"
        return out


class TimeMachine(RuleBasedStateMachine):
    url = ""
    calls: ClassVar[Counter[str]] = Counter()  # what the examples exercised, printed by the test

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        self.name = f"modelt{uuid.uuid4().hex[:10]}"
        self.model = TimeModel()
        self.seeds = 0
        self.client: avalkey.Valkey = self.run(self._client())
        self.store = MemoryStore(
            client=self.client, name=self.name, embedder=HashingEmbedder(), discovery=False, summarize_batch=0
        )

    async def _client(self) -> avalkey.Valkey:
        return avalkey.Valkey.from_url(self.url)

    def run(self, aw: Awaitable[T]) -> T:
        self.calls["store calls"] += 1

        async def bounded() -> T:
            return await asyncio.wait_for(aw, 60)

        return self.runner.run(bounded())

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
            self.run(_drop_store(self.client, self.name))
            self.run(self.client.aclose())
        finally:
            self.runner.close()

    @initialize()
    def start(self) -> None:
        self.run(self.store.ensure_index())

    @rule(
        spelling=st.sampled_from([*SUBJECTS, None]),
        day=st.sampled_from(DATES),
        thread=st.sampled_from(THREADS),
    )
    def remember(self, spelling: str | None, day: str, thread: str | None) -> None:
        self.calls["remember"] += 1
        self.seeds += 1
        got = self.run(
            self.store.remember(
                f"fact {self.seeds}",
                id=f"v{self.seeds:03d}",  # fresh and replayable (Hypothesis draws among them)
                subject=spelling,
                valid_from=day,
                thread_id=thread,
                vector=vector(self.seeds),
            )
        )
        assert got == f"v{self.seeds:03d}"
        self.model.write(got, thread, SUBJECTS[spelling] if spelling else None, ms(day))

    # Writes twice as often as any read: subjects then get several versions in an example.
    @rule(spelling=st.sampled_from(["home", "Home "]), day=st.sampled_from(DATES))
    def remember_home(self, spelling: str, day: str) -> None:
        self.remember(spelling, day, "t1")

    @rule(data=st.data())
    def forget_current(self, data: st.DataObject) -> None:
        self.calls["forget_current"] += 1
        live = sorted(v.id for v in self.model.versions.values() if v.current)
        if not live:
            return
        mid = data.draw(st.sampled_from(live))
        assert self.run(self.store.forget(mid)) is True
        self.model.forget(mid)

    @rule(data=st.data())
    def forget_past(self, data: st.DataObject) -> None:
        self.calls["forget_past"] += 1
        past = sorted(
            v.id
            for v in self.model.versions.values()
            if not v.current and not v.forgotten and v.key[1] is not None
        )
        if not past:
            return
        mid = data.draw(st.sampled_from(past))
        assert self.run(self.store.forget(mid)) is True
        self.model.forget_past(mid)

    @rule(data=st.data())
    def get_any(self, data: st.DataObject) -> None:
        self.calls["get_any"] += 1
        if not self.model.versions:
            return
        v = self.model.versions[data.draw(st.sampled_from(sorted(self.model.versions)))]
        item = self.run(self.store.get(v.id))
        if v.forgotten:
            assert item is None, f"{v.id} was forgotten and came back"
            return
        assert item is not None, f"{v.id} is a current or past version"
        assert item.valid_from == v.valid_from
        want_until = None if v.current else v.valid_until
        assert item.valid_until == want_until, f"{v.id}: valid_until {item.valid_until}, model {want_until}"

    @rule(thread=st.sampled_from(THREADS))
    def list_and_count_now(self, thread: str | None) -> None:
        self.calls["list_and_count_now"] += 1
        want = self.model.now(thread)
        page = self.run(self.store.list(limit=1000, thread_id=thread))
        assert {i.id for i in page.items} == want
        assert self.run(self.store.count(thread_id=thread)) == len(want)

    @rule(thread=st.sampled_from(THREADS), day=st.sampled_from(PROBES))
    def list_and_count_as_of(self, thread: str | None, day: str) -> None:
        self.calls["list_and_count_as_of"] += 1
        t = ms(day)
        page = self.run(self.store.list(limit=1000, thread_id=thread, as_of=day))
        got = {i.id for i in page.items}
        n = self.run(self.store.count(thread_id=thread, as_of=day))
        assert n == len(got), "count(as_of) agrees with list(as_of)"
        want = self.model.at(thread, t)
        assert got == want, f"as_of {day}: store {sorted(got)}, model {sorted(want)}"

    @rule(spelling=st.sampled_from(list(SUBJECTS)), thread=st.sampled_from(THREADS))
    def fact_history(self, spelling: str, thread: str | None) -> None:
        self.calls["fact_history"] += 1
        key = (thread, SUBJECTS[spelling])
        got = self.run(self.store.fact_history(spelling, thread_id=thread))
        want = self.model.of(key)
        assert {r.id for r in got} == {v.id for v in want}, "every recorded version, nothing forgotten"
        stamps = [int(r.valid_from.timestamp() * 1000) if r.valid_from else None for r in got]
        assert stamps == sorted((v.valid_from for v in want), reverse=True), "newest first by valid_from"
        for r in got:
            v = self.model.versions[r.id]
            assert r.current is v.current, f"{r.id}: current {r.current}, model {v.current}"

    @invariant()
    def one_current_per_subject(self) -> None:
        for thread in THREADS:
            page = self.run(self.store.list(limit=1000, thread_id=thread))
            assert {i.id for i in page.items} == self.model.now(thread)


def test_subjects_and_history_agree_with_their_model(valkey_url: str) -> None:
    """Random subject writes, forgets and reads answer what docs/concepts/time.md says."""
    TimeMachine.url = valkey_url
    TimeMachine.calls.clear()
    run_state_machine_as_test(
        TimeMachine,
        settings=MODEL_SETTINGS,
    )
    print(f"model time test: {EXAMPLES} examples of up to {STEPS} steps: {dict(TimeMachine.calls)}")


async def _as_of(
    store: MemoryStore, writes: list[tuple[str, str]], forget: str | None, then: str
) -> list[str]:
    """Write ``home`` versions (id, valid_from) in order, forgetting ``forget`` after the second."""
    await store.ensure_index()
    for i, (mid, day) in enumerate(writes):
        await store.remember(
            f"fact {mid}", id=mid, subject="home", valid_from=day, thread_id="t1", vector=vector(i)
        )
        if i == 1 and forget is not None:
            assert await store.forget(forget)
    page = await store.list(limit=100, thread_id="t1", as_of=then)
    return sorted(i.id for i in page.items)


@pytest.mark.parametrize(
    ("writes", "forget", "then", "want"),
    [
        pytest.param(
            [("a", "2020-01-01"), ("b", "2021-01-01"), ("c", "2020-01-01")],
            None,
            "2020-06-01",
            ["c"],  # a tie: the later write wins, the earlier one is valid at no instant
            id="tied-past-write",
        ),
        pytest.param(
            [("a", "2022-01-01"), ("b", "2020-01-01"), ("c", "2021-01-01")],
            "a",
            "2021-06-01",
            ["c"],  # no current one and nothing later: c is current, b ends where it begins
            id="write-after-forget",
        ),
    ],
)
async def test_one_version_of_a_subject_at_each_instant(
    valkey_url: str, writes: list[tuple[str, str]], forget: str | None, then: str, want: list[str]
) -> None:
    """docs/concepts/time.md: "so each instant has one version"."""
    client = avalkey.Valkey.from_url(valkey_url)
    name = f"modelt{uuid.uuid4().hex[:10]}"
    store = MemoryStore(
        client=client, name=name, embedder=HashingEmbedder(), discovery=False, summarize_batch=0
    )
    try:
        got = await _as_of(store, writes, forget, then)
    finally:
        await store.close()
        await _drop_store(client, name)
        await client.aclose()
    assert got == want, f"as_of {then}: {got}"
