"""Key names: exact strings, id <-> key round trips, cluster slots, and no scope collisions."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.keys import KeySpace, Scope, validate_memory_id, validate_store_name
from betterdb_memory.errors import ValidationError

SCOPE = Scope.of(namespace="acme", agent_id="bot", thread_id="t1")
# Pinned: consolidation state and L1 keys embed these digests; a change orphans existing data.
SCOPE_TAG = "8d8cdb735248fb6e8d27"
SESSION_TAG = "55053b8ff909c57de4ef"  # (agent "bot", thread "t1")
MEMORY_ID = "0b7c1f52-3f7e-4b51-9a53-5b2a8f3c1d11"


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM), the checksum of the Valkey cluster spec."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def hash_slot(key: str) -> int:
    """Cluster slot of a key: only the first non-empty ``{...}`` counts when present."""
    raw = key.encode()
    start = raw.find(b"{")
    if start != -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc16(raw) % 16384


def test_crc16_matches_the_cluster_spec_reference_values() -> None:
    """The spec's test vector, and hash tags: only the braces' content is hashed."""
    assert crc16(b"123456789") == 0x31C3
    assert hash_slot("{user1000}.following") == hash_slot("{user1000}.followers") == hash_slot("user1000")
    assert hash_slot("foo{}{bar}") == crc16(b"foo{}{bar}") % 16384
    assert hash_slot("foo{{bar}}zap") == hash_slot("{bar")


# -- exact strings ----------------------------------------------------------------------------


def test_store_level_keys() -> None:
    """Index, prefix and the store's own keys, all under ``<name>:`` (betterdb-agent-memory's names)."""
    ks = KeySpace("mem")
    assert (ks.doc_prefix, ks.index, ks.meta, ks.config, ks.stats) == (
        "mem:mem:",
        "mem:mem:idx",
        "mem:__mem_meta",
        "mem:__mem_config",
        "mem:__mem_stats",
    )


def test_scope_tag_is_pinned() -> None:
    """The scope tag is 20 hex digits of a length-prefixed BLAKE2b digest."""
    assert SCOPE.tag == SCOPE_TAG
    assert re.fullmatch(r"[0-9a-f]{20}", Scope().tag)


def test_memory_keys_exact() -> None:
    """``<name>:mem:<id>`` (what Monitor's HGETALL / DEL address) and the access counter."""
    ks = KeySpace("mem")
    assert ks.doc(MEMORY_ID) == f"mem:mem:{MEMORY_ID}"
    assert ks.access(MEMORY_ID) == f"mem:acc:{{mem:mem:{MEMORY_ID}}}"
    assert ks.consolidation_base(SCOPE_TAG) == f"mem:cons:{{{SCOPE_TAG}}}"
    assert ks.cap_lock("abc") == "mem:caplock:abc"


def test_session_keys_exact() -> None:
    """L1 keys of one (agent, thread) share ``{<session tag>}``."""
    s = KeySpace("mem").session("bot", "t1")
    base = f"mem:l1:{{{SESSION_TAG}}}"
    assert (s.turns, s.meta, s.summary_lock, s.summary_cursor) == (
        f"{base}:turns",
        f"{base}:meta",
        f"{base}:summary_lock",
        f"{base}:summary_cursor",
    )
    assert KeySpace("mem").agent_sessions("bot") == "mem:l1:agent:20ff0d68523f9c97d4ed"


# -- round trips and slots --------------------------------------------------------------------


def test_new_memory_id_is_a_uuid4_string() -> None:
    """As the reference makes them; valid and unique."""
    ids = {KeySpace.new_memory_id() for _ in range(100)}
    assert len(ids) == 100
    for mid in ids:
        assert validate_memory_id(mid) == mid
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", mid)


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_doc_and_memory_id_of_round_trip(as_bytes: bool) -> None:
    """``memory_id_of(doc(id)) == id`` for str keys and for the bytes a client hands back."""
    ks = KeySpace("my-store.v2")
    for _ in range(50):
        mid = ks.new_memory_id()
        key = ks.doc(mid)
        assert key.startswith(ks.doc_prefix)
        assert ks.memory_id_of(key.encode() if as_bytes else key) == mid


def test_a_memory_and_its_access_counter_share_a_slot() -> None:
    """The reinforcement script and forget's ``DEL doc counter`` touch one slot."""
    ks = KeySpace("mem")
    for _ in range(50):
        mid = ks.new_memory_id()
        assert hash_slot(ks.doc(mid)) == hash_slot(ks.access(mid))


def test_session_keys_share_a_slot() -> None:
    """turns / meta / summary lock / cursor of one session: one slot."""
    ks = KeySpace("mem")
    for agent, thread in (("bot", "t1"), (None, "t1"), ("a", "b:c")):
        s = ks.session(agent, thread)
        assert len({hash_slot(k) for k in (s.turns, s.meta, s.summary_lock, s.summary_cursor)}) == 1


def test_memories_spread_over_slots() -> None:
    """Documents are spread over the cluster rather than piled on one slot."""
    ks = KeySpace("mem")
    slots = {hash_slot(ks.doc(ks.new_memory_id())) for _ in range(200)}
    assert len(slots) > 150


# -- collisions ---------------------------------------------------------------------------------


def test_separator_and_none_cases_never_collide() -> None:
    """("a:", "b") vs ("a", ":b"), None vs "", and a value moved to another field: all distinct."""
    tags = [
        Scope(namespace="a:", agent_id="b").tag,
        Scope(namespace="a", agent_id=":b").tag,
        Scope(namespace=None, agent_id="x").tag,
        Scope(namespace="", agent_id="x").tag,
        Scope(namespace="x").tag,
        Scope(thread_id="x").tag,
        Scope(namespace="", agent_id="", thread_id="").tag,
        Scope().tag,
    ]
    assert len(set(tags)) == len(tags)
    ks = KeySpace("mem")
    assert ks.session(None, "t").turns != ks.session("", "t").turns
    assert ks.session("a:", "b").turns != ks.session("a", ":b").turns


optional_text = st.none() | st.text(max_size=8, alphabet="a:b{}|\x00\x01 é")


@settings(max_examples=200, deadline=None)
@given(
    x=st.tuples(optional_text, optional_text, optional_text),
    y=st.tuples(optional_text, optional_text, optional_text),
)
def test_distinct_scopes_have_distinct_tags(
    x: tuple[str | None, str | None, str | None], y: tuple[str | None, str | None, str | None]
) -> None:
    """Different (namespace, agent, thread) never share a tag (or an L1 session tag)."""
    if x == y:
        assert Scope(*x).tag == Scope(*y).tag
        return
    assert Scope(*x).tag != Scope(*y).tag
    if x[1:] != y[1:] and x[2] is not None and y[2] is not None:
        ks = KeySpace("s")
        assert ks.session(x[1], x[2]).turns != ks.session(y[1], y[2]).turns


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "mem", "My-Store_1.0", "_a", "app:prod", "betterdb_ac", "x" * 200])
def test_valid_store_names(name: str) -> None:
    """What BetterDB Monitor shows: a letter or ``_`` first, then letters, digits, ``_ . - :``."""
    assert validate_store_name(name) == name
    assert KeySpace(name).name == name


@pytest.mark.parametrize(
    "name",
    ["", "0abc", "1store", "{tag}", "a b", "-a", ".a", "x" * 201, "é", "abc\n", "a\x00", "a:mem", "a:mem:b",
     "a:", None, 5, b"mem"],
)  # fmt: skip
def test_invalid_store_names_are_rejected(name: object) -> None:
    """Names Monitor cannot show, braces, spaces, non-str, and a ``mem`` part (it would nest one
    store's documents inside another's index prefix): ``validation.name``."""
    with pytest.raises(ValidationError) as info:
        KeySpace(name)  # type: ignore[arg-type]
    assert info.value.code == "validation.name"


@pytest.mark.parametrize(
    "memory_id",
    ["", "-abc", "a b", "a{b}c", "{x}", "a*", "a?", "a\n", "x" * 201, None, 5, MEMORY_ID.encode()],
)
def test_invalid_memory_ids_are_rejected(memory_id: object) -> None:
    """``validation.memory_id`` before any key is built: no braces (slot), glob or space characters."""
    with pytest.raises(ValidationError) as info:
        validate_memory_id(memory_id)
    assert info.value.code == "validation.memory_id"
    if isinstance(memory_id, str):
        with pytest.raises(ValidationError):
            KeySpace("mem").doc(memory_id)


def test_new_memory_ids_stay_unique_and_well_formed_across_batches() -> None:
    """Ids are made 256 at a time: across several batches, each is a fresh UUID4 string."""
    ids = [KeySpace.new_memory_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    for mid in ids:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", mid)
    variants = {mid[19] for mid in ids}
    assert variants == set("89ab")  # the variant's free bits are random, its fixed ones set


def test_a_remembered_scope_is_the_same_scope_and_bad_values_still_fail() -> None:
    """``Scope.of`` keeps the scopes it built from plain strings; checks still run for anything else."""
    a = Scope.of(thread_id="t", agent_id="a")
    assert Scope.of(thread_id="t", agent_id="a") is a
    assert a == Scope(agent_id="a", thread_id="t")
    assert Scope.of() == Scope()
    with pytest.raises(ValidationError):
        Scope.of(thread_id="t,u")
    with pytest.raises(ValidationError):
        Scope.of(thread_id=["t"])  # unhashable: checked, not looked up

    class Text(str):
        pass

    odd = Scope.of(thread_id=Text("t"), agent_id="a")
    assert odd == a and odd is not a  # a str subclass is checked and built, never kept
