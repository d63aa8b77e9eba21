"""``tiers.fact_ledger``: the commands that retire facts and read and purge their history (recording backend).

What a consolidation decides is tested in tests/unit/test_consolidation.py and against
the engine in tests/integration/test_consolidation.py; here, what goes on the wire.
"""

from __future__ import annotations

from betterdb_memory.backend import scripts
from betterdb_memory.core.facts import subject_digest, subject_key
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.record import KINDS
from betterdb_memory.core.subjects import subject_key_of
from betterdb_memory.tiers.fact_ledger import _HIST_FIELDS
from tests.unit.parts import build

SCOPE = Scope(thread_id="t")


async def test_retire_moves_each_fact_with_the_retire_script_then_links_its_history() -> None:
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    p.backend.reply(1, 1)  # the store's history mark, f1 moved
    p.backend.reply(1, 1)  # its history linked
    p.backend.reply(0)  # f2 was gone already
    moved = await p.ledger.retire(
        ck, ["f1", "f2"], by="f9", retracted=False, subjects={"f1": "Ada's city"}, until=1767225600000
    )
    assert moved == 1
    retire1, link, retire2 = p.backend.sent
    keys = p.rt.keys
    assert retire1.commands == (
        ("EVALSHA", scripts.HISTORY_MARK.sha, 1, keys.meta, "1767225600000"),  # before the first move (core.history_mark)
        ("EVALSHA", scripts.RETIRE.sha, 3, keys.doc("f1"), ck.hist_doc("f1"), keys.access("f1"),
         "1767225600000", "f9", "0"),
    )  # fmt: skip
    digest = subject_digest("ada's city")
    (zadd, hset) = link.commands
    assert zadd[:2] == ("ZADD", ck.history(digest)) and zadd[3] == "f1"
    assert hset == ("HSET", ck.subjects, digest, "ada's city")
    assert retire2.commands[0][3:6] == (keys.doc("f2"), ck.hist_doc("f2"), keys.access("f2"))
    assert len(retire2.commands) == 1  # marked once per call


async def test_fact_history_reads_every_kinds_versions_and_the_legacy_list_then_both_documents() -> None:
    """One round trip of pointers and version lists (every kind, and the ledger's legacy list), one of documents."""
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    keys = p.rt.keys
    digests = [subject_key_of(SCOPE.tag, k, "city") for k in KINDS]
    fact = KINDS.index("fact")
    lists: list[object] = []
    for n, _ in enumerate(digests):
        lists += [b"f2", [b"f1", b"1000", b"f2", b"2000"]] if n == fact else [None, []]
    p.backend.reply(*lists, [b"f0"])  # the legacy list holds a fact retired before subjects
    old = [b"Ada lives in Porto", b"city", None, b"1000", b"f2", b"2000", b"0", b"1000", None]
    current = [b"Ada lives in Lisbon", b"city", None, b"2000", None, None, b"0", b"2000", None]
    legacy = [
        b"Ada lives in Faro",
        b"city",
        None,
        b"500",
        b"f1",
        b"2026-01-01T00:00:00+00:00",
        b"0",
        None,
        None,
    ]
    none = [None] * len(_HIST_FIELDS)
    p.backend.reply(old, none, none, current, legacy, none)
    records = await p.ledger.fact_history("City", thread_id="t")
    ranged, docs = p.backend.sent
    expected: list[tuple[object, ...]] = []
    for d in digests:
        expected += [
            ("HGET", keys.subject(d), "current"),
            ("ZRANGE", keys.subject_versions(d), 0, -1, "WITHSCORES"),
        ]
    expected.append(("ZRANGE", ck.history(subject_digest(subject_key("city"))), 0, -1))
    assert ranged.commands == tuple(expected)
    assert docs.commands == tuple(
        c
        for mid in ("f1", "f2", "f0")
        for c in (("HMGET", keys.hist_doc(mid), *_HIST_FIELDS), ("HMGET", keys.doc(mid), *_HIST_FIELDS))
    )
    assert [(r.id, r.current, r.statement) for r in records] == [
        ("f2", True, "Ada lives in Lisbon"),
        ("f1", False, "Ada lives in Porto"),
        ("f0", False, "Ada lives in Faro"),
    ]
    assert records[1].valid_until is not None and records[1].valid_until.timestamp() == 2.0  # ms, read as ms
    assert records[2].valid_until is not None and records[2].valid_until.year == 2026  # legacy ISO text


async def test_fact_history_retires_a_version_left_in_the_index() -> None:
    """A read of the subject repairs what a writer that crashed between its round trips left."""
    p = build()
    keys = p.rt.keys
    fact = KINDS.index("fact")
    lists: list[object] = []
    for n in range(len(KINDS)):
        lists += [b"f2", [b"f1", b"1000", b"f2", b"2000"]] if n == fact else [None, []]
    p.backend.reply(*lists, [])
    live_old = [b"Porto", b"city", None, b"1000", None, None, None, b"1000", None]
    current = [b"Lisbon", b"city", None, b"2000", None, None, None, b"2000", None]
    none = [None] * len(_HIST_FIELDS)
    p.backend.reply(none, live_old, none, current)
    p.backend.reply(1, 1)  # the store's history mark, RETIRE f1
    records = await p.ledger.fact_history("city", thread_id="t")
    *_, retire = p.backend.sent
    assert retire.commands == (
        ("EVALSHA", scripts.HISTORY_MARK.sha, 1, keys.meta, "2000"),  # before the move (core.history_mark)
        (
            "EVALSHA",
            scripts.RETIRE.sha,
            3,
            keys.doc("f1"),
            keys.hist_doc("f1"),
            keys.access("f1"),
            "2000",
            "f2",
            "0",
        ),
    )
    assert [(r.id, r.current, r.superseded_by) for r in records] == [("f2", True, None), ("f1", False, "f2")]


async def test_purge_deletes_history_documents_and_drops_the_ids_no_memory_holds() -> None:
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    keys = p.rt.keys
    digest = subject_digest(subject_key("city"))
    p.backend.reply([b"f1", b"f2"])  # ZRANGE of the subject's legacy history
    p.backend.reply(1, 0, 0, 1)  # f1's history doc deleted, f1 not current; f2 has none, f2 is current
    p.backend.reply(1)  # ZREM
    p.backend.reply(b"f4", [b"f3", b"1", b"f4", b"2"])  # the subject's pointer and versions
    p.backend.reply(1, 1)  # f3's history doc deleted, ZREM
    assert await p.ledger.purge_fact_history(subject="city", thread_id="t") == 2
    ranged, purge, zrem, versions, purge2 = p.backend.sent
    assert ranged.commands == (("ZRANGE", ck.history(digest), 0, -1),)
    assert purge.commands == (
        ("DEL", ck.hist_doc("f1")),
        ("EXISTS", p.rt.keys.doc("f1")),
        ("DEL", ck.hist_doc("f2")),
        ("EXISTS", p.rt.keys.doc("f2")),
    )
    assert zrem.commands == (("ZREM", ck.history(digest), "f1"),)
    d = subject_key_of(SCOPE.tag, "fact", "city")
    assert versions.commands[0] == ("HGET", keys.subject(d), "current")
    assert purge2.commands == (("DEL", keys.hist_doc("f3")), ("ZREM", keys.subject_versions(d), "f3"))


async def test_forgetting_a_scope_unlinks_its_subjects_and_its_consolidation_state() -> None:
    p = build()
    ck = p.ledger.keys_of(SCOPE)
    keys = p.rt.keys
    targets = keys.consolidation_targets
    p.backend.reply({ck.tag.encode(): b'[null, null, "t"]', b"other": b'[null, null, "u"]'})  # subject scopes
    p.backend.reply([b"d1"])  # HKEYS of the scope's subjects
    p.backend.reply(b"m2", [b"m1", b"1", b"m2", b"2"])  # d1's pointer and versions
    p.backend.reply(1, 0, 1, 0)  # UNLINK the history documents, the pointer and its list; the journal
    p.backend.reply(1, 1)  # UNLINK the scope's list, HDEL its entry
    p.backend.reply(
        {ck.tag.encode(): b'[null, null, "t"]', b"other": b'[null, null, "u"]'}
    )  # HGETALL targets
    p.backend.reply([b"d1"])  # HKEYS subjects (purge: every subject)
    p.backend.reply([])  # ZRANGE of d1's history: empty
    p.backend.reply([b"d1"])  # HKEYS subjects (the history keys to unlink)
    state = [*ck.all_state(), ck.history("d1")]
    p.backend.reply(*([1] * (len(state) + 1)))
    await p.ledger.forget_scope_state(SCOPE)
    sent = p.backend.sent
    assert sent[3].commands == (
        ("UNLINK", keys.hist_doc("m1")),
        ("UNLINK", keys.hist_doc("m2")),
        ("UNLINK", keys.subject("d1"), keys.subject_versions("d1")),
        ("ZREM", keys.subject_pending, "d1:m1", "d1:m2"),  # its unsettled writes, if any
    )
    assert sent[4].commands == (("UNLINK", keys.subject_scope(ck.tag)), ("HDEL", keys.subject_scopes, ck.tag))
    unlink = sent[-1]
    assert unlink.operation == "forget_by_scope"
    assert unlink.commands == (*(("UNLINK", key) for key in state), ("HDEL", targets, ck.tag.encode()))


async def test_fact_history_drops_versions_whose_documents_are_gone() -> None:
    """Evicted or expired (no document, or past expires_at): never current, off the list and the pointer."""
    p = build()
    keys = p.rt.keys
    fact = KINDS.index("fact")
    d = subject_key_of(SCOPE.tag, "fact", "city")
    lists: list[object] = []
    for n in range(len(KINDS)):
        lists += [b"f2", [b"f1", b"1000", b"f2", b"2000"]] if n == fact else [None, []]
    p.backend.reply(*lists, [])
    old = [b"Porto", b"city", None, b"1000", b"f2", b"2000", b"0", b"1000", None]
    expired = [b"Lisbon", b"city", None, b"2000", None, None, None, b"2000", b"1"]
    none = [None] * len(_HIST_FIELDS)
    p.backend.reply(old, none, none, expired)
    p.backend.reply(1)  # SUBJECT_DROP f2
    records = await p.ledger.fact_history("city", thread_id="t")
    *_, drop = p.backend.sent
    assert drop.commands == (
        ("EVALSHA", scripts.SUBJECT_DROP.sha, 2, keys.subject(d), keys.subject_versions(d), "f2", "0"),
    )
    assert [(r.id, r.current) for r in records] == [("f1", False)]
