"""A pytest plugin that records every round trip the process sends to Valkey, per test.

Used to check that a change of the transport leaves the wire traffic as it was: run the
same tests on two versions of the code and compare the files it writes
(``WIRE_LOG=/tmp/a.json python -m pytest -p bench.wire_record tests/integration/...``,
then ``python bench/wire_record.py /tmp/a.json /tmp/b.json``). A round trip is one
``send_command`` or one packed pipeline; each command is kept as its name, its number of
arguments and, for ``EVALSHA``, its number of keys (values, ids and SHAs differ between
runs and are left out).
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

_LOG: dict[str, list[list[str]]] = {}
_current: list[str] = ["<setup>"]


def _shape(args: Iterable[Any]) -> str:
    parts = list(args)
    name = parts[0].decode() if isinstance(parts[0], bytes) else str(parts[0])
    name = name.upper()
    if name in {"EVALSHA", "EVAL"}:
        return f"{name}/{parts[2]}keys/{len(parts)}"
    if len(parts) > 1 and name in {"MODULE", "SCRIPT", "CLIENT", "CONFIG", "INFO", "CLUSTER", "FT.CONFIG"}:
        name += " " + (parts[1].decode() if isinstance(parts[1], bytes) else str(parts[1])).upper()
    return f"{name}/{len(parts)}"


def _record(commands: Iterable[Iterable[Any]]) -> None:
    _LOG.setdefault(_current[0], []).append([_shape(c) for c in commands])


def pytest_configure(config: pytest.Config) -> None:
    from valkey.asyncio.connection import AbstractConnection

    send_command = AbstractConnection.send_command
    pack_commands = AbstractConnection.pack_commands

    async def recorded_send(self: Any, *args: Any, **kwargs: Any) -> None:
        _record([args])
        await send_command(self, *args, **kwargs)

    def recorded_pack(self: Any, commands: Iterable[Iterable[Any]]) -> Any:
        commands = [list(c) for c in commands]
        _record(commands)
        return pack_commands(self, commands)

    AbstractConnection.send_command = recorded_send  # type: ignore[method-assign]
    AbstractConnection.pack_commands = recorded_pack  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _current[0] = item.nodeid
    yield
    _current[0] = "<between>"


def pytest_unconfigure(config: pytest.Config) -> None:
    path = os.environ.get("WIRE_LOG")
    if path:
        with open(path, "w") as f:
            json.dump(_LOG, f, indent=0)


# Sent a number of times that depends on timing (waits for an index to be ready, a
# stats flush, a heartbeat) rather than on the code under test.
_POLLING = frozenset({"FT.INFO/2", "FT.INFO/3", "PING/1"})


def _trips(trips: list[list[str]]) -> Counter[str]:
    """Round trips as a multiset, each an unordered multiset of its commands (SCAN order is the server's)."""
    return Counter(" ; ".join(sorted(rt)) for rt in trips if not set(rt) <= _POLLING)


def _compare(a_path: str, b_path: str) -> int:
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    differ = 0
    for test in sorted(set(a) | set(b)):
        if test.startswith("<"):
            continue
        ca, cb = _trips(a.get(test, [])), _trips(b.get(test, []))
        if ca != cb:
            differ += 1
            print(f"== {test}")
            for rt in sorted(set(ca) | set(cb)):
                if ca[rt] != cb[rt]:
                    print(f"   {ca[rt]:>4} -> {cb[rt]:<4} {rt[:300]}")
    print(f"{differ} of {len(set(a) | set(b))} tests differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(_compare(sys.argv[1], sys.argv[2]))
