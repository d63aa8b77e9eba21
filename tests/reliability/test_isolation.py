"""Tenant isolation under hostile scope and tag values (hypothesis, real engine).

A "victim" memory lives in scope A; an attacker writes into a hostile scope B and
then recalls, lists, counts, deletes and fills B past its capacity. Every victim
must survive and never show up in B's results. Victims and attackers share one
query vector, so a leaking filter would return the victim at distance 0.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from betterdb_memory import HashingEmbedder, MemoryStore, Scope, ValidationError
from betterdb_memory.keys import KeySpace

from .conftest import scan_keys, unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

FIXED = unit(7)
VICTIMS = ("alice", "team-{a}|b*")
DIMENSIONS = ("thread_id", "agent_id", "namespace")

# Every character with a meaning in TAG / query syntax, plus whitespace of several kinds.
SYNTAX = [*list("{}|\\-@*()[]$:;'\",.%~!^&=<>?/+#`"), " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x00"]
SPACES = ["\u00a0", "\u2003", "\u200b", "\u3000", "\u2028", "\ufeff"]


def _variants(v: str) -> list[str]:
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in v)
    return [
        v.upper(), v.title(), v.swapcase(), f"{v} ", f" {v}", f"{v}\t", f"\n{v}", f"{v}\u00a0",
        f"{v}\u200b", v[:-1], v[1:], f"{v}*", f"{v[:3]}*", "*", f"%{v}%", f"{{{v}}}", f"{v}|x",
        f"x|{v}", f"-{v}", f"\\{v}", f"{v}\\", f"@{v}", f"{v}\x00", fullwidth, v.replace("i", "İ"),
        v.replace("i", "ı"), f"{v},{v}", f"{v} {v}", v + v,
    ]  # fmt: skip


VARIANTS = sorted({x for v in VICTIMS for x in _variants(v)} - set(VICTIMS))


def _valid(s: str) -> bool:
    return bool(s.strip()) and len(s.encode("utf-8", "surrogatepass")) <= 1024 and s not in VICTIMS


hostile = st.one_of(
    st.sampled_from(VARIANTS),
    st.text(alphabet=st.sampled_from([*SYNTAX, *SPACES, "a", "A", "1", "_", "é"]), min_size=1, max_size=24),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40),
    st.lists(
        st.sampled_from(["😀", "👩‍👩‍👧", "🇫🇷", "🏳️‍🌈", "\u200d", "\ufe0f", "🔥"]), min_size=1, max_size=8
    ).map("".join),
    st.builds(
        lambda ch, n: ch * (n // len(ch.encode())),
        st.sampled_from(["x", "é", "€", "😀", "{", "\\", "|"]),
        st.integers(min_value=900, max_value=1024),
    ),
).filter(_valid)

SETTINGS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
}


def _ids(hits: Any) -> set[str]:
    return {h.item.id for h in hits}


def _scope_kwargs(dim: str, value: str) -> dict[str, str]:
    if dim == "all":
        return {d: value for d in DIMENSIONS}
    return {dim: value}


_VICTIM_KEYS = {(v, d) for v in VICTIMS for d in (*DIMENSIONS, "all")}


class _Victims:
    """Victim memories of one store: one per (victim value, dimension), all at ``FIXED``."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], str] = {}

    async def plant(self, store: MemoryStore, *, tags: bool = False) -> None:
        for v in VICTIMS:
            for dim in (*DIMENSIONS, "all"):
                scope = {"thread_id": "T"} if tags else _scope_kwargs(dim, v)
                extra = {"tags": [v, f"{dim}-{v}"]} if tags else {}
                mid = await store.remember(f"victim memory of {v} by {dim}", vector=FIXED, **scope, **extra)
                self.ids[(v, dim)] = mid

    async def assert_intact(self, store: MemoryStore) -> None:
        ids = list(self.ids.values())
        alive = await store.get_many(ids)
        gone = [key for key, item in zip(self.ids, alive, strict=True) if item is None]
        assert not gone, f"victims deleted or evicted: {gone}"


@pytest.fixture
async def capped(client: Any, unique_name: str) -> AsyncIterator[tuple[MemoryStore, _Victims]]:
    """One store per test function (not per example), capped at 2 per scope, victims planted."""
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(), max_items_per_scope=2)
    victims = _Victims()
    await victims.plant(store)
    yield store, victims
    await store.close()


@pytest.fixture
async def tagged(client: Any, unique_name: str) -> AsyncIterator[tuple[MemoryStore, _Victims]]:
    """One uncapped store per test function; tagged victims in the shared scope ``T``."""
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder())
    victims = _Victims()
    await victims.plant(store, tags=True)
    yield store, victims
    await store.close()


_serial = itertools.count()


@settings(max_examples=600, **SETTINGS)  # type: ignore[arg-type]
@given(dim=st.sampled_from([*DIMENSIONS, "all"]), value=hostile, probe=st.sampled_from(sorted(_VICTIM_KEYS)))
@example(dim="thread_id", value="Alice", probe=("alice", "thread_id"))
@example(dim="agent_id", value="alice ", probe=("alice", "agent_id"))
@example(dim="namespace", value="*", probe=("alice", "namespace"))
@example(dim="all", value="team-{a}|b", probe=("team-{a}|b*", "all"))
@example(dim="thread_id", value="team\\-\\{a\\}\\|b\\*", probe=("team-{a}|b*", "thread_id"))
async def test_hostile_scope_values_never_reach_another_scope(
    capped: tuple[MemoryStore, _Victims], dim: str, value: str, probe: tuple[str, str]
) -> None:
    """Recall, list, count, forget_by_scope, dedup and eviction in hostile scope B never touch scope A."""
    store, victims = capped
    n = next(_serial)
    scope = _scope_kwargs(dim, value)
    # Three writes into a scope capped at two: one eviction, inside B only. The last
    # one repeats a victim's content: dedup must not hand back a victim's id.
    written = await store.remember_many(
        [
            {"content": f"attack {n} one", "vector": FIXED, "importance": 0.0, **scope},
            {"content": f"attack {n} two", "vector": FIXED, **scope},
            {"content": f"victim memory of {VICTIMS[0]} by {dim}", "vector": FIXED, **scope},
        ]
    )
    assert not set(written) & set(victims.ids.values())
    alive = {m for m, item in zip(written, await store.get_many(written), strict=True) if item}
    assert len(alive) == 2 and written[0] not in alive  # the unimportant one was evicted
    hits = await store.recall_by_vector(FIXED, k=50, threshold=2.0, reinforce=n % 2 == 0, **scope)
    assert _ids(hits) == alive
    assert {i.id for i in (await store.list(limit=50, **scope)).items} == alive
    assert await store.count(**scope) == 2
    assert await store.forget_by_scope(**scope) == 2
    assert await store.count(**scope) == 0
    await victims.assert_intact(store)
    assert await store.count() == len(victims.ids)
    # The victim's own scope still finds it (its filter, too, is intact).
    v_scope = _scope_kwargs(probe[1], probe[0])
    hits = await store.recall_by_vector(FIXED, k=50, threshold=2.0, reinforce=False, **v_scope)
    assert victims.ids[probe] in _ids(hits)


@settings(max_examples=500, **SETTINGS)  # type: ignore[arg-type]
@given(value=hostile, scoped=st.booleans())
@example(value="ALICE", scoped=True)
@example(value="alice|x", scoped=False)
@example(value="thread_id-alice ", scoped=True)
async def test_hostile_tags_never_reach_another_tag(
    tagged: tuple[MemoryStore, _Victims], value: str, scoped: bool
) -> None:
    """In one shared scope, a tag filter with a hostile value matches only that exact tag."""
    store, victims = tagged
    n = next(_serial)
    written = await store.remember_many(
        [
            {"content": f"tag attack {n}", "vector": FIXED, "thread_id": "T", "tags": [value]},
            {"content": f"tag attack {n} b", "vector": FIXED, "thread_id": "T", "tags": [value, "z"]},
        ]
    )
    where = {"thread_id": "T"} if scoped else {}
    hits = await store.recall_by_vector(FIXED, k=100, threshold=2.0, tags=[value], **where)
    assert _ids(hits) == set(written)
    page = await store.list(tags=[value], limit=100, **where)
    assert {i.id for i in page.items} == set(written)
    assert await store.forget_by_scope(tags=[value], **where) == 2
    await victims.assert_intact(store)
    assert await store.count(thread_id="T") == len(victims.ids)


@settings(max_examples=3000, deadline=None, database=None)
@given(
    a=st.tuples(*[st.none() | st.text(max_size=12) for _ in DIMENSIONS]),
    b=st.tuples(*[st.none() | st.text(max_size=12) for _ in DIMENSIONS]),
)
@example(a=("a:", "b", None), b=("a", ":b", None))
@example(a=(None, "x", None), b=("", "x", None))
@example(a=("ab", None, None), b=("a", "b", None))
@example(a=(None, None, "x"), b=("x", None, None))
@example(a=("\x00N", None, None), b=(None, None, None))
@example(a=("\x01", "", None), b=("", "\x01", None))
def test_distinct_scopes_never_share_keys(a: tuple[str | None, ...], b: tuple[str | None, ...]) -> None:
    """Distinct (namespace, agent, thread) tuples give distinct scope tags, keys and ids."""
    assume(a != b)
    ks = KeySpace("iso")
    sa, sb = Scope(*a), Scope(*b)
    assert sa.tag != sb.tag
    assert set(ks.scope_keys(sa.tag)).isdisjoint(ks.scope_keys(sb.tag))
    ida, idb = ks.new_memory_id(sa), ks.new_memory_id(sb)
    assert ks.doc(ida) != ks.doc(idb)
    assert ks.memory_id_of(ks.doc(ida)) == ida and ks.scope_tag_of(ida) == sa.tag


@settings(max_examples=200, **SETTINGS)  # type: ignore[arg-type]
@given(
    dim=st.sampled_from([*DIMENSIONS, "tags"]),
    value=st.one_of(
        st.text(
            alphabet=st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x0c", "\u3000", "\u2003"]), max_size=6
        ),
        st.text(alphabet=st.characters(categories=("Cs",)), min_size=1, max_size=3),
        st.builds(lambda ch, n: ch * n, st.sampled_from(["x", "é", "😀"]), st.integers(1025, 1100)).filter(
            lambda s: len(s.encode("utf-8", "surrogatepass")) > 1024
        ),
        st.sampled_from([0, 1.5, b"alice", ["alice"], object()]),
    ),
)
async def test_invalid_scope_values_are_refused_and_write_nothing(
    client: Any, unique_name: str, dim: str, value: object
) -> None:
    """Empty, whitespace-only, surrogate, over-long and non-string scope values raise before any I/O."""
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder())
    kw: dict[str, Any] = {"tags": [value]} if dim == "tags" else {dim: value}
    with pytest.raises(ValidationError) as err:
        await store.remember("hello", vector=FIXED, **kw)
    assert err.value.code.startswith("validation.")
    with pytest.raises(ValidationError):
        await store.recall_by_vector(FIXED, **kw)
    with pytest.raises(ValidationError):
        await store.forget_by_scope(**kw)
    await store.close()
    assert await scan_keys(client, f"{unique_name}:*") == []
