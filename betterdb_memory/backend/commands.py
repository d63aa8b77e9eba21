"""Commands as values: what a part asks the backend to send, built without a client.

A part does not hold a pipeline; it builds a list of commands and hands it to the
backend (``Backend.pipeline``), which queues them into one non-transactional
pipeline, in order, one round trip. So what a part sends is plain data a unit test
compares with ``==`` (``testing.RecordingBackend``), and the backend stays the only
code that touches the client.

* A **command** is a tuple of its name and arguments, exactly as they go on the
  wire: ``("HSET", key, "content", "x")``, ``("DEL", key1, key2)``,
  ``("ZRANGE", key, 0, -1, "WITHSCORES")``. Its reply is the client's for that
  command name (valkey-py maps replies by name: ``HGETALL`` a dict, ``HEXISTS`` a
  bool, ...), never shaped by options: ``ZRANGE ... WITHSCORES`` answers the flat
  list (``score_pairs`` pairs it).
* A **script call** (``ScriptCall``) names a ``Script`` of the registry
  (``backend.scripts``), its keys and its arguments; it goes out as a plain
  ``EVALSHA sha numkeys keys... args...``.

Cluster routing derives from the keys: valkey-py's cluster pipeline sends each
command to the node that holds its first key (a script's keys share one slot).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["Attempts", "Command", "Script", "ScriptCall", "Step", "score_pairs", "wire"]

#: One command: its name, then its arguments as sent (``str``, ``bytes``, ``int``, ``float``).
Command: TypeAlias = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script of the registry: its name (for errors and tests), source and SHA1."""

    name: str
    source: str
    sha: str

    @classmethod
    def of(cls, name: str, source: str) -> Script:
        """A script with its SHA1 computed from ``source`` (what ``SCRIPT LOAD`` answers)."""
        return cls(name, source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())

    def call(self, keys: Sequence[str], args: Sequence[Any] = ()) -> ScriptCall:
        """This script run on ``keys`` with ``args`` (a value; nothing is sent)."""
        return ScriptCall(self, tuple(keys), tuple(args))


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """One run of a registered script: sent as ``EVALSHA`` (loaded again on ``NOSCRIPT``)."""

    script: Script
    keys: tuple[str, ...]
    args: tuple[Any, ...] = ()

    def command(self) -> Command:
        """The ``EVALSHA`` command this call is on the wire."""
        return ("EVALSHA", self.script.sha, len(self.keys), *self.keys, *self.args)


#: What a pipeline carries: commands and script calls, in order.
Step: TypeAlias = Command | ScriptCall


@dataclass(slots=True)
class Attempts:
    """How many times a round trip went out, filled in by ``Backend.pipeline(..., attempts=)``.

    A write retried after a connection fault cannot know what the attempt it replaced
    did (its deletes may have run before the reply was lost), so a caller that counts
    what its commands changed reads ``retried`` to know when the replies tell only what
    the last attempt found. A ``NOSCRIPT`` re-send counts too: the plain commands before
    the script ran in the first send.
    """

    count: int = 0

    @property
    def retried(self) -> bool:
        """Whether the round trip went out more than once."""
        return self.count > 1


def wire(step: Step) -> Command:
    """The command ``step`` is on the wire (a script call becomes its ``EVALSHA``)."""
    return step.command() if isinstance(step, ScriptCall) else step


def score_pairs(flat: Sequence[Any]) -> list[tuple[Any, float]]:
    """``[(member, score), ...]`` from a ``ZRANGE ... WITHSCORES`` reply (flat in RESP2, pairs in RESP3)."""
    if flat and isinstance(flat[0], list | tuple):
        return [(m, float(s)) for m, s in flat]
    return [(flat[i], float(flat[i + 1])) for i in range(0, len(flat) - 1, 2)]
