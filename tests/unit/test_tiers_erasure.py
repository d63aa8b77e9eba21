"""``tiers.erasure``: the round trips of ``erase`` and ``forget_by_scope`` (over a recording backend).

That nothing of an erased agent survives is tested against the engine in
tests/integration/test_l1_erase.py and test_consolidation_erase.py; here, what is sent.
"""

from __future__ import annotations

import pytest

from betterdb_memory.backend import scripts
from betterdb_memory.errors import StoreConnectionError, ValidationError
from tests.unit.parts import build, search_reply


async def test_erase_of_one_thread_deletes_its_session_then_its_memories_then_their_state() -> None:
    p = build()
    keys = p.rt.keys
    sk = keys.session("a", "t")
    p.backend.reply(3, 1)  # the session held 3 turns; removed from the agent's set
    p.backend.reply(search_reply(1, (keys.doc("m1"), {})))  # one memory in the scope
    p.backend.reply(1, 1)
    p.backend.reply([1, keys.history_prefix() + "{" + keys.doc("m0") + "}"])  # one past version (NOCONTENT)
    p.backend.reply(1)
    p.backend.reply({})  # no scope with subjects
    p.backend.reply({})  # no consolidation target
    assert await p.erasure.erase(agent_id="a", thread_id="t") == 4  # versions are not counted
    l1, page, deletes, hist_page, hist_deletes, subjects, targets = p.backend.sent
    assert subjects.commands == (("HGETALL", keys.subject_scopes),)
    assert (l1.operation, l1.commands) == (
        "erase",
        (
            ("EVALSHA", scripts.ERASE_SESSION.sha, len(sk.all()), *sk.all()),
            ("SREM", keys.agent_sessions("a"), "t"),
        ),
    )
    assert page.operation == "forget_by_scope" and page.searches[0][:3] == (
        "FT.SEARCH",
        keys.index,
        "(@threadId:{t} @agentId:{a})",
    )
    assert deletes.commands == (("DEL", keys.doc("m1")), ("DEL", keys.access("m1"), keys.updates("m1")))
    # The scope's superseded versions go too, found through the history index.
    assert hist_page.searches[0][:3] == ("FT.SEARCH", f"{keys.name}:hist:idx", "(@threadId:{t} @agentId:{a})")
    assert hist_deletes.commands == (("DEL", keys.history_prefix() + "{" + keys.doc("m0") + "}"),)
    assert targets.commands == (("HGETALL", keys.consolidation_targets),)


async def test_forget_by_scope_refuses_an_empty_selector_before_sending_anything() -> None:
    p = build()
    with pytest.raises(ValidationError):
        await p.erasure.forget_by_scope()
    assert p.backend.sent == []


async def test_a_fault_mid_way_reports_how_many_were_deleted() -> None:
    p = build()
    keys = p.rt.keys
    p.backend.reply(search_reply(3, (keys.doc("m1"), {}), (keys.doc("m2"), {})))
    p.backend.reply(2, 0)
    p.backend.reply(StoreConnectionError("gone"))
    with pytest.raises(StoreConnectionError) as caught:
        await p.erasure.forget_by_scope(thread_id="t")
    assert caught.value.details["deleted"] == 2
    assert [t.operation for t in p.backend.sent] == ["forget_by_scope", "forget", "forget_by_scope"]


async def test_a_page_of_documents_already_gone_is_read_again_not_taken_for_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """valkey-search drops a deleted document from its index after the DEL answered: a page can
    list only memories already gone while real matches wait behind it. The loop reads again."""
    monkeypatch.setattr("betterdb_memory.tiers.erasure._STALE_PAGE_PAUSES", (0.0, 0.0))
    p = build()
    keys = p.rt.keys
    p.backend.reply(search_reply(3, (keys.doc("m1"), {}), (keys.doc("m2"), {})))
    p.backend.reply(0, 0)  # both already deleted (by an earlier, timed-out call)
    p.backend.reply(search_reply(1, (keys.doc("m3"), {})))  # the index caught up: the real match
    p.backend.reply(1, 0)
    p.backend.reply([0])  # no past versions
    p.backend.reply({})  # no scope with subjects
    p.backend.reply({})  # no consolidation target
    assert await p.erasure.forget_by_scope(thread_id="t") == 1
    sent = p.backend.sent
    assert [t.operation for t in sent[:4]] == ["forget_by_scope", "forget", "forget_by_scope", "forget"]
    assert sent[3].commands[0] == ("DEL", keys.doc("m3"))


async def test_a_page_that_stays_stale_stops_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("betterdb_memory.tiers.erasure._STALE_PAGE_PAUSES", (0.0,))
    p = build()
    keys = p.rt.keys
    for _ in range(2):
        p.backend.reply(search_reply(2, (keys.doc("m1"), {})))
        p.backend.reply(0, 0)
    p.backend.reply([0])
    p.backend.reply({})
    p.backend.reply({})
    with pytest.warns(UserWarning, match="still lists 1 deleted"):
        assert await p.erasure.forget_by_scope(thread_id="t") == 0
