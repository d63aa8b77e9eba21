"""``tiers.transcripts``: the adapters' transcript mechanics, command by command (recording backend).

The adapters themselves run against the engine in tests/integration/test_adapter_openai_agents.py
and test_adapter_langchain.py; here, the scripts, their keys and arguments, and what is retried.
"""

from __future__ import annotations

from typing import Any

from betterdb_memory.backend import scripts
from betterdb_memory.testing import RecordingBackend
from betterdb_memory.tiers.transcripts import Transcript


def _transcript() -> tuple[RecordingBackend, Transcript]:
    backend = RecordingBackend()
    return backend, Transcript(backend, "s:items", "s:folded", operations="agents_session")


def _pairs(rest: list[Any]) -> tuple[list[str], int]:
    """A plan that folds entries two by two (a question and its answer)."""
    done = len(rest) // 2 * 2
    return [f"turn of {rest[i]!r}" for i in range(0, done, 2)], done


async def test_append_folds_the_completed_turns_with_one_append_and_one_advance() -> None:
    backend, transcript = _transcript()
    backend.reply([3, 1, [b"q", b"a"]])  # length 3, one folded, two pending
    backend.reply(1)  # this caller moved the mark
    turns = await transcript.append("add_items", ["q2", "a2"], ttl_ms=5000, plan=_pairs)
    assert turns == ["turn of b'q'"]
    append, advance = backend.sent
    assert append.operation == "agents_session.add_items" and not append.idempotent
    assert append.commands == (
        ("EVALSHA", scripts.TRANSCRIPT_APPEND.sha, 2, "s:items", "s:folded", 5000, "q2", "a2"),
    )
    assert advance.commands == (("EVALSHA", scripts.TRANSCRIPT_ADVANCE.sha, 1, "s:folded", 1, 3, 5000),)
    assert not advance.idempotent  # a replay would find the mark moved by itself and drop the turns


async def test_append_returns_no_turns_when_another_writer_folded_them_first() -> None:
    backend, transcript = _transcript()
    backend.reply([2, 0, [b"q", b"a"]])
    backend.reply(0)
    assert await transcript.append("add_items", ["a"], ttl_ms=5000, plan=_pairs) == ()


async def test_append_sends_no_advance_when_nothing_completes_a_turn() -> None:
    backend, transcript = _transcript()
    backend.reply([1, 0, [b"q"]])
    assert await transcript.append("add_items", ["q"], ttl_ms=5000, plan=_pairs) == ()
    assert len(backend.sent) == 1


async def test_read_pop_and_clear_are_single_commands_named_by_the_adapter() -> None:
    backend, transcript = _transcript()
    backend.reply([b"x", b"y"])
    backend.reply(b"y")
    backend.reply(2)
    assert await transcript.read("get_items", last=2) == [b"x", b"y"]
    assert await transcript.pop("pop_item") == b"y"
    await transcript.clear("clear_session")
    read, pop, clear = backend.sent
    assert (read.operation, read.commands, read.idempotent) == (
        "agents_session.get_items",
        (("LRANGE", "s:items", -2, -1),),
        True,
    )
    assert (
        pop.commands == (("EVALSHA", scripts.TRANSCRIPT_POP.sha, 2, "s:items", "s:folded"),)
        and not pop.idempotent
    )
    assert clear.commands == (("DEL", "s:items", "s:folded"),)
