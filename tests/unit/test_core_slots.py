"""``core.slots``: Valkey's hash slot of a key, and multi-key deletes grouped by it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from valkey.crc import key_slot as valkey_key_slot

from betterdb_memory.core.slots import DELETE_CHUNK, deletes, key_slot


@given(st.binary(max_size=40) | st.text(max_size=40).map(str.encode))
def test_the_slot_is_valkeys_for_any_key(raw: bytes) -> None:
    assert key_slot(raw) == valkey_key_slot(raw)


def test_hash_tags_and_the_documented_examples() -> None:
    # https://valkey.io/topics/cluster-spec/: "123456789" is CRC16 0x31C3; tags pick the slot.
    assert key_slot("123456789") == 0x31C3 % 16384
    assert key_slot("{user1000}.following") == key_slot("{user1000}.followers") == key_slot("user1000")
    assert key_slot("foo{}{bar}") == key_slot("foo{}{bar}")  # an empty tag: the whole key
    assert key_slot("s:acc:{s:mem:m1}") == key_slot("s:mem:m1")


def test_a_single_server_deletes_everything_in_one_command_per_kind() -> None:
    commands, lead = deletes(["a", "b", "c"], ["x", "y"], cluster=False)
    assert (commands, lead) == ([("DEL", "a", "b", "c"), ("DEL", "x", "y")], 1)
    assert deletes([], [], cluster=False) == ([], 0)


def test_a_cluster_gets_one_command_per_slot_and_counted_keys_lead() -> None:
    docs = [f"s:mem:{i}" for i in range(50)] + ["{t}:mem:1", "{t}:mem:2"]
    sides = [f"s:acc:{{{d}}}" for d in docs]
    commands, lead = deletes(docs, sides, cluster=True)
    head, tail = commands[:lead], commands[lead:]
    assert sorted(k for c in head for k in c[1:]) == sorted(docs)
    assert sorted(k for c in tail for k in c[1:]) == sorted(sides)
    for command in commands:
        assert command[0] == "DEL" and len({key_slot(k) for k in command[1:]}) == 1
    assert ("DEL", "{t}:mem:1", "{t}:mem:2") in head  # one slot, one command
    assert lead == len({key_slot(d) for d in docs})


def test_a_long_delete_is_cut_into_chunks() -> None:
    keys = [f"k{i}" for i in range(DELETE_CHUNK * 2 + 1)]
    commands, lead = deletes(keys, cluster=False, verb="UNLINK")
    assert lead == 3 and [len(c) - 1 for c in commands] == [DELETE_CHUNK, DELETE_CHUNK, 1]
    assert commands[0][0] == "UNLINK" and [k for c in commands for k in c[1:]] == keys
