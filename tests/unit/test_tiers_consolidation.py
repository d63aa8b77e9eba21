"""``tiers.consolidation``: the round trips of one summary consolidation (over a recording backend).

The run's decisions are unit-tested in tests/unit/test_consolidation.py and its storage
against the engine in tests/integration/test_consolidation.py; here, its commands in order.
"""

from __future__ import annotations

from typing import Any

from betterdb_memory.backend import scripts
from betterdb_memory.core.keys import Scope
from betterdb_memory.testing import ScriptedSummarizer
from tests.unit.parts import Parts, build, search_reply


def _script_candidates(p: Parts) -> None:
    """Two candidates: one page, the page's last creation time again (ties), then nothing newer."""

    def hit(mid: str, created: int) -> tuple[str, dict[str, Any]]:
        return p.rt.keys.doc(mid), {"content": f"text {mid}", "created_at": created, "importance": 0.5}

    p.backend.reply(search_reply(2, hit("m1", 1000), hit("m2", 2000)))
    p.backend.reply(search_reply(1, hit("m2", 2000)))
    p.backend.reply(search_reply(0))


async def test_a_summary_that_keeps_its_sources_marks_them_consumed_under_the_scope_lock() -> None:
    p = build()
    ck = p.consolidation._keys_of(Scope(thread_id="t"))
    p.backend.reply(1)  # the target registered
    p.backend.reply(1)  # the lock taken
    _script_candidates(p)
    p.backend.reply([None, None])  # neither consumed before
    result = await p.consolidation.consolidate(
        "summary", ScriptedSummarizer("digest"), thread_id="t", delete_sources=False
    )
    assert result.consolidated == 2 and result.deleted == 0
    ops = [(t.operation, t.names) for t in p.backend.sent]
    assert ops == [
        ("consolidate", ["HSET"]),
        ("lock", ["EVALSHA"]),
        ("consolidate", ["FT.SEARCH"]),
        ("consolidate", ["FT.SEARCH"]),
        ("consolidate", ["FT.SEARCH"]),
        ("consolidate", ["ZMSCORE"]),
        ("remember", ["HSET"]),
        ("consolidate", ["ZADD"]),
        ("unlock", ["EVALSHA"]),
    ]
    sent = p.backend.sent
    assert sent[0].commands == (("HSET", ck.targets, ck.tag, '[null, null, "t"]'),)
    assert sent[1].commands[0][:4] == ("EVALSHA", scripts.LOCK.sha, 1, ck.lock)
    assert sent[5].commands == (("ZMSCORE", ck.consumed["summary"], "m1", "m2"),)
    assert sent[6].commands[0][1] == p.rt.keys.doc(result.created[0])
    [(zadd, key, now, m1, again, m2)] = sent[7].commands
    assert (zadd, key, m1, m2) == ("ZADD", ck.consumed["summary"], "m1", "m2") and now == again
    assert sent[8].commands[0][:4] == ("EVALSHA", scripts.UNLOCK.sha, 1, ck.lock)


async def test_a_summary_that_deletes_its_sources_sends_their_deletes_in_one_round_trip() -> None:
    p = build()
    p.backend.reply(1)
    p.backend.reply(1)
    _script_candidates(p)
    p.backend.reply([None, 1.5])  # m2 was consumed by an earlier run: only m1 is folded
    p.backend.reply(1)  # the digest written
    p.backend.reply(1, 1)  # m1 deleted
    result = await p.consolidation.consolidate("summary", ScriptedSummarizer("digest"), thread_id="t")
    assert result.consolidated == 1 and result.deleted == 1
    deletes = p.backend.sent[-2]
    keys = p.rt.keys
    assert deletes.operation == "forget"
    assert deletes.commands == (("DEL", keys.doc("m1")), ("DEL", keys.access("m1"), keys.updates("m1")))
