"""``testing``: the recording backend records real commands, answers from its script, refuses once closed; ``temporary_store`` is typed."""

from __future__ import annotations

import pytest

from betterdb_memory.backend import Backend, scripts
from betterdb_memory.backend.commands import score_pairs, wire
from betterdb_memory.errors import StoreClosedError, StoreConnectionError
from betterdb_memory.testing import RecordingBackend, RoundTrip


async def test_round_trips_are_recorded_with_their_commands_searches_and_retry_flag() -> None:
    recording = RecordingBackend()
    backend: Backend = recording  # the protocol the parts take
    recording.reply(1, 1, [0])
    out = await backend.pipeline(
        "op",
        [("HSET", "k", "f", "v"), scripts.UNLOCK.call(["lock"], ["tok"])],
        idempotent=False,
        searches=[["FT.SEARCH", "i", "*"]],
    )
    assert out == [1, 1, [0]]  # one reply per command, in order
    assert recording.sent == [
        RoundTrip(
            "op",
            (("HSET", "k", "f", "v"), ("EVALSHA", scripts.UNLOCK.sha, 1, "lock", "tok")),
            (("FT.SEARCH", "i", "*"),),
            idempotent=False,
        )
    ]
    assert recording.sent[0].names == ["HSET", "EVALSHA", "FT.SEARCH"]


async def test_an_unscripted_round_trip_answers_the_default_and_a_miscount_fails_the_test() -> None:
    backend = RecordingBackend(default=None)
    assert await backend.pipeline("op", [("GET", "a"), ("GET", "b")]) == [None, None]
    backend.reply(1)
    with pytest.raises(AssertionError, match="2 commands sent, 1 replies scripted"):
        await backend.pipeline("op", [("GET", "a"), ("GET", "b")])


async def test_a_scripted_exception_is_raised_and_a_closed_backend_refuses() -> None:
    backend = RecordingBackend()
    backend.reply(StoreConnectionError("down"))
    with pytest.raises(StoreConnectionError):
        await backend.command("op", "GET", "k")
    backend.closed = True
    with pytest.raises(StoreClosedError):
        await backend.command("op", "GET", "k")
    assert len(backend.sent) == 1  # a refused round trip is not recorded


async def test_scan_yields_the_scripted_names_of_one_pass() -> None:
    backend = RecordingBackend()
    backend.reply(["s:mem:1", "s:mem:2"])
    assert [names async for names in backend.scan("export", "s:mem:*")] == [["s:mem:1", "s:mem:2"]]
    assert backend.commands == [("SCAN", 0, "MATCH", "s:mem:*", "COUNT", 1000)]


def test_a_script_call_is_its_evalsha_on_the_wire_and_scores_pair_up() -> None:
    call = scripts.LOCK.call(["k"], ["tok", "100"])
    assert wire(call) == ("EVALSHA", scripts.LOCK.sha, 1, "k", "tok", "100")
    assert wire(("DEL", "k")) == ("DEL", "k")
    assert score_pairs([b"a", b"1.5", b"b", b"2"]) == [(b"a", 1.5), (b"b", 2.0)]
    assert score_pairs([[b"a", 1.5]]) == [(b"a", 1.5)]  # RESP3 answers pairs
    assert len({s.sha for s in scripts.ALL}) == len(scripts.ALL)  # no script registered twice


def test_temporary_store_options_are_the_constructors_keywords_with_their_types() -> None:
    """``StoreOptions`` types ``temporary_store(**options)``; it must follow ``MemoryStore``'s signature."""
    import inspect
    import typing

    from betterdb_memory.store import MemoryStore
    from betterdb_memory.testing import StoreOptions

    params = inspect.signature(MemoryStore.__init__).parameters
    wanted = {
        n: str(p.annotation) for n, p in params.items() if n not in {"self", "client", "name", "dimensions"}
    }
    declared = {
        n: typing.cast(typing.ForwardRef, t).__forward_arg__ for n, t in StoreOptions.__annotations__.items()
    }
    assert declared == wanted
