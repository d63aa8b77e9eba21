"""Crash points of a write, driven deterministically: a store whose writer dies inside or between its round trips.

``cut(store, at=..., keep=...)`` wraps the store's backend: the first pipeline ``at``
accepts is sent with only the steps ``keep`` accepts (none: the round trip never left;
every one: it ran and its reply was lost), and then ``error`` is raised, as the writer's
process dying there would leave it (``Crashed``, a ``BaseException`` like a kill), or as a
lost connection would (a ``StoreConnectionError``). A pipeline torn in the middle is what
a cluster leaves when one node takes its slots' commands and another does not, and what
a cut connection leaves on a single server (the commands before the cut ran).

Works on every engine (embedded, valkey-search standalone, the cluster): it acts on
round trips, not on sockets (``tests/reliability/conftest.FaultProxy`` cuts sockets, on a
single server only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from betterdb_memory import MemoryStore
from betterdb_memory.backend.commands import Script, ScriptCall, Step
from betterdb_memory.backend.scripts import RETIRE, SUBJECT_DROP, SUBJECT_PUT, SUBJECT_TRIM

__all__ = [
    "Crashed",
    "cut",
    "docs_of",
    "end_dates",
    "is_script",
    "journal_of",
    "off_subject",
    "pointer_of",
    "round_trip_1",
    "round_trip_2",
]


class Crashed(BaseException):
    """The writer's process died here: nothing after this point ran."""


def is_script(step: Step, *scripts: Script) -> bool:
    return isinstance(step, ScriptCall) and any(step.script.sha == s.sha for s in scripts)


def round_trip_1(steps: Sequence[Step]) -> bool:
    """A subject write's first round trip: the documents, ``SUBJECT_PUT``, the journal."""
    return any(is_script(s, SUBJECT_PUT) for s in steps)


def round_trip_2(steps: Sequence[Step]) -> bool:
    """A subject write's second round trip: the moves to history and the end dates."""
    return any(is_script(s, RETIRE, SUBJECT_TRIM) for s in steps)


def end_dates(steps: Sequence[Step]) -> bool:
    """A round trip that shortens versions' validity (``SUBJECT_TRIM``): a correction's, a tie's, a past write's."""
    return any(is_script(s, SUBJECT_TRIM) for s in steps)


def off_subject(steps: Sequence[Step]) -> bool:
    """A retraction's second round trip: the version taken off its subject (``SUBJECT_DROP``)."""
    return any(is_script(s, SUBJECT_DROP) for s in steps)


def docs_of(store: MemoryStore) -> Callable[[Step], bool]:
    """The steps writing a memory's document (its slot's, on a cluster)."""
    prefix = store.keys.doc_prefix

    def keep(step: Step) -> bool:
        return isinstance(step, tuple) and step[0] in ("HSET", "PEXPIRE") and str(step[1]).startswith(prefix)

    return keep


def journal_of(store: MemoryStore) -> Callable[[Step], bool]:
    """The journal's commands (``<name>:subj:pending``)."""
    key = f"{store.keys.name}:subj:pending"  # (a literal: also on code without a journal)
    return lambda step: isinstance(step, tuple) and len(step) > 1 and step[1] == key


def pointer_of(store: MemoryStore) -> Callable[[Step], bool]:
    """The subjects' own slot: ``SUBJECT_PUT`` and the registry."""
    subj = f"{store.keys.name}:subj:"
    return lambda step: (
        is_script(step, SUBJECT_PUT)
        or (
            isinstance(step, tuple)
            and str(step[1]).startswith(subj)
            and not str(step[1]).endswith(":pending")
        )
    )


@contextmanager
def cut(
    store: MemoryStore,
    *,
    at: Callable[[Sequence[Step]], bool],
    keep: Callable[[Step], bool] = lambda step: False,
    error: BaseException | None = None,
) -> Iterator[list[Sequence[Step]]]:
    """Within the block, the first pipeline ``at`` accepts sends only what ``keep`` accepts, then raises.

    Yields the list the torn pipeline's steps are appended to (to check it happened).
    """
    backend = store.backend
    real = backend.pipeline
    torn: list[Sequence[Step]] = []

    async def pipeline(operation: str, commands: Sequence[Step], **kwargs: Any) -> list[Any]:
        if torn or not at(commands):
            return await real(operation, commands, **kwargs)
        torn.append(commands)
        sent = [s for s in commands if keep(s)]
        if sent:
            await real(operation, sent)
        raise (
            error if error is not None else Crashed(f"{operation}: died after {len(sent)} of {len(commands)}")
        )

    backend.pipeline = pipeline  # type: ignore[method-assign]
    try:
        yield torn
    finally:
        backend.pipeline = real  # type: ignore[method-assign]
