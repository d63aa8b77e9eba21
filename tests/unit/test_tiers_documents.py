"""``tiers.documents``: deletes count what a retried round trip may have done (recording backend).

The fault itself (a reply cut after the deletes ran) is driven through a fault proxy in
tests/reliability; here, the rule: after a re-send, a delete's replies tell only what
the last attempt found, so ``forget`` answers True and ``delete_ids`` counts every id.
"""

from __future__ import annotations

from tests.unit.parts import build


async def test_forget_is_true_when_a_retry_finds_nothing_left() -> None:
    p = build()
    p.backend.reply(None, None, 0, 0, 0)
    assert await p.docs.forget("m1") is False  # sent once: nothing existed
    p.backend.resends = 1  # the first attempt's reply was lost: it may have deleted m1
    p.backend.reply(None, None, 0, 0, 0)
    assert await p.docs.forget("m1") is True


async def test_forgetting_a_version_of_a_subject_takes_it_off_its_subject() -> None:
    from betterdb_memory.backend import scripts

    p = build()
    p.backend.reply(b"d1", None, 1, 0, 0)
    p.backend.reply(1)
    assert await p.docs.forget("m1") is True
    read, drop = p.backend.sent
    assert read.commands[0] == ("HGET", p.rt.keys.doc("m1"), "subject_key")
    assert read.commands[1] == ("HGET", p.rt.keys.hist_doc("m1"), "subject_key")
    assert drop.commands == (
        (
            "EVALSHA",
            scripts.SUBJECT_DROP.sha,
            2,
            p.rt.keys.subject("d1"),
            p.rt.keys.subject_versions("d1"),
            "m1",
            "0",
        ),
    )


async def test_forgetting_a_superseded_version_deletes_its_history_document() -> None:
    p = build()
    p.backend.reply(None, b"d1", 0, 0, 1)  # no current document; its history document existed
    p.backend.reply(0)  # not the pointer's current
    assert await p.docs.forget("m1") is True
    read, drop = p.backend.sent
    assert read.commands[-1] == ("DEL", p.rt.keys.hist_doc("m1"))
    assert drop.commands[0][3:] == (p.rt.keys.subject("d1"), p.rt.keys.subject_versions("d1"), "m1", "0")


async def test_delete_ids_counts_every_id_after_a_retry() -> None:
    p = build()
    p.backend.reply(1, 0)
    assert await p.docs.delete_ids(["a", "b"]) == 1
    p.backend.resends = 1
    p.backend.reply(0, 0)
    assert await p.docs.delete_ids(["a", "b"]) == 2
    assert [t.operation for t in p.backend.sent] == ["forget", "forget"]
