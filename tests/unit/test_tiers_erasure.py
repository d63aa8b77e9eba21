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
