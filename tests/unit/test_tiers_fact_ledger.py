"""``tiers.fact_ledger``: the commands that retire facts and read and purge their history (recording backend).

What a consolidation decides is tested in tests/unit/test_consolidation.py and against
the engine in tests/integration/test_consolidation.py; here, what goes on the wire.
"""

from __future__ import annotations

from betterdb_memory.backend import scripts
from betterdb_memory.core.facts import subject_digest, subject_key
from betterdb_memory.core.keys import Scope
from betterdb_memory.tiers.fact_ledger import _HIST_FIELDS
from tests.unit.parts import build

SCOPE = Scope(thread_id="t")


async def test_retire_moves_each_fact_with_the_retire_script_then_links_its_history() -> None:
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    p.backend.reply(1)  # f1 moved
    p.backend.reply(1, 1)  # its history linked
    p.backend.reply(0)  # f2 was gone already
    moved = await p.ledger.retire(
        ck, ["f1", "f2"], by="f9", retracted=False, subjects={"f1": "Ada's city"}, until="2026-01-01T00:00:00"
    )
    assert moved == 1
    retire1, link, retire2 = p.backend.sent
    keys = p.rt.keys
    assert retire1.commands == (
        ("EVALSHA", scripts.RETIRE.sha, 3, keys.doc("f1"), ck.hist_doc("f1"), keys.access("f1"),
         "1767225600000", "f9", "0"),  # valid_until in ms: the history index's NUMERIC field
    )  # fmt: skip
    digest = subject_digest("ada's city")
    (zadd, hset) = link.commands
    assert zadd[:2] == ("ZADD", ck.history(digest)) and zadd[3] == "f1"
    assert hset == ("HSET", ck.subjects, digest, "ada's city")
    assert retire2.commands[0][3:6] == (keys.doc("f2"), ck.hist_doc("f2"), keys.access("f2"))


async def test_fact_history_reads_the_ordered_ids_then_both_documents_of_each() -> None:
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    key = subject_key("city")
    old = [b"Ada lives in Porto", b"city", None, b"1000", b"f2", b"2026-01-01T00:00:00+00:00", b"0"]
    current = [b"Ada lives in Lisbon", b"city", None, b"2000", None, None, b"0"]
    p.backend.reply([b"f1", b"1.5", b"f2", b"2.5"])  # ZRANGE ... WITHSCORES, flat (RESP2)
    p.backend.reply(old, [None] * len(_HIST_FIELDS), [None] * len(_HIST_FIELDS), current)
    records = await p.ledger.fact_history("city", thread_id="t")
    ranged, docs = p.backend.sent
    assert ranged.commands == (("ZRANGE", ck.history(subject_digest(key)), 0, -1, "WITHSCORES"),)
    assert docs.commands == (
        ("HMGET", ck.hist_doc("f1"), *_HIST_FIELDS),
        ("HMGET", p.rt.keys.doc("f1"), *_HIST_FIELDS),
        ("HMGET", ck.hist_doc("f2"), *_HIST_FIELDS),
        ("HMGET", p.rt.keys.doc("f2"), *_HIST_FIELDS),
    )
    assert [(r.id, r.current, r.statement) for r in records] == [
        ("f2", True, "Ada lives in Lisbon"),
        ("f1", False, "Ada lives in Porto"),
    ]


async def test_purge_deletes_history_documents_and_drops_the_ids_no_memory_holds() -> None:
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    digest = subject_digest(subject_key("city"))
    p.backend.reply([b"f1", b"f2"])  # ZRANGE of the subject's history
    p.backend.reply(1, 0, 0, 1)  # f1's history doc deleted, f1 not current; f2 has none, f2 is current
    p.backend.reply(1)  # ZREM
    assert await p.ledger.purge_fact_history(subject="city", thread_id="t") == 1
    ranged, purge, zrem = p.backend.sent
    assert ranged.commands == (("ZRANGE", ck.history(digest), 0, -1),)
    assert purge.commands == (
        ("DEL", ck.hist_doc("f1")),
        ("EXISTS", p.rt.keys.doc("f1")),
        ("DEL", ck.hist_doc("f2")),
        ("EXISTS", p.rt.keys.doc("f2")),
    )
    assert zrem.commands == (("ZREM", ck.history(digest), "f1"),)


async def test_forgetting_a_scope_unlinks_its_consolidation_state_and_its_target_entry() -> None:
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    targets = p.rt.keys.consolidation_targets
    p.backend.reply(
        {ck.tag.encode(): b'[null, null, "t"]', b"other": b'[null, null, "u"]'}
    )  # HGETALL targets
    p.backend.reply([b"d1"])  # HKEYS subjects (purge: every subject)
    p.backend.reply([])  # ZRANGE of d1's history: empty
    p.backend.reply([b"d1"])  # HKEYS subjects (the history keys to unlink)
    state = [*ck.all_state(), ck.history("d1")]
    p.backend.reply(*([1] * (len(state) + 1)))
    await p.ledger.forget_scope_state(SCOPE)
    *_, unlink = p.backend.sent
    assert unlink.operation == "forget_by_scope"
    assert unlink.commands == (*(("UNLINK", key) for key in state), ("HDEL", targets, ck.tag.encode()))
