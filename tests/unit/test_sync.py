"""The sync classes' surface without a server: typed declarations complete, construction refused or checked."""

from __future__ import annotations

import ast
import inspect
import threading
from pathlib import Path
from typing import Any

import pytest

import betterdb_memory.sync as sync_module
from betterdb_memory import (
    AgentMemory,
    BetterDBMemoryError,
    MemoryStore,
    SyncAgentMemory,
    SyncMemoryStore,
    SyncReentrancyError,
)

PAIRS = [(SyncMemoryStore, MemoryStore), (SyncAgentMemory, AgentMemory)]


def public_members(cls: type) -> dict[str, object]:
    """Public members, bases first; a method the store takes from a part is the part's function."""
    out: dict[str, object] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for k, v in vars(klass).items():
            if not k.startswith("_"):
                out[k] = v if isinstance(v, property | classmethod | staticmethod) else getattr(klass, k)
    return out


def defined_in_source(class_name: str) -> set[str]:
    """The names the class body of ``class_name`` in sync.py defines (a def per member: greppable)."""
    tree = ast.parse(Path(sync_module.__file__).read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    return {node.name for node in cls.body if isinstance(node, ast.FunctionDef)}


def kind_of(member: object) -> str | None:
    if isinstance(member, property):
        return "property"
    if isinstance(member, classmethod):
        return "constructor" if inspect.iscoroutinefunction(member.__func__) else None
    if inspect.isfunction(member):
        return "method"
    return None


@pytest.mark.parametrize(("sync_cls", "async_cls"), PAIRS, ids=["store", "agent"])
def test_every_public_member_is_written_out(sync_cls: type[Any], async_cls: type) -> None:
    """Each public member of the async class is a def in the generated class, or the hand-written base's.

    When this fails, run ``python scripts/gen_sync.py`` (test_gen_sync checks the file is current).
    """
    written = defined_in_source(sync_cls.__name__)
    base = sync_cls.__mro__[1]
    missing = [
        name
        for name, member in public_members(async_cls).items()
        if kind_of(member) is not None
        and name not in sync_cls._not_forwarded
        and name not in written
        and not hasattr(base, name)
    ]
    assert not missing, missing


@pytest.mark.parametrize(("sync_cls", "async_cls"), PAIRS, ids=["store", "agent"])
def test_every_public_member_is_blocking(sync_cls: type[Any], async_cls: type) -> None:
    """Every public member is there, none a coroutine; properties stay properties."""
    for name, member in public_members(async_cls).items():
        if kind_of(member) is None or name in sync_cls._not_forwarded:
            continue
        value = getattr(sync_cls, name)
        assert not inspect.iscoroutinefunction(value), name
        assert isinstance(value, property) == isinstance(member, property), name


def test_the_constructor_refuses_arguments() -> None:
    """SyncMemoryStore(client=...) is refused: the async client must be made on the private loop."""
    with pytest.raises(TypeError, match=r"SyncMemoryStore\.connect\(url, \.\.\.\) or SyncMemoryStore\.wrap"):
        SyncMemoryStore(client=object())
    with pytest.raises(TypeError, match=r"SyncAgentMemory\.connect"):
        SyncAgentMemory()


def test_wrap_checks_what_the_factory_built_and_stops_its_thread() -> None:
    """A factory building the wrong thing is a TypeError, raised after the loop thread is stopped."""
    before = set(threading.enumerate())
    with pytest.raises(TypeError, match="not int"):
        SyncMemoryStore.wrap(lambda: 3)  # type: ignore[arg-type, return-value]

    async def wrong() -> str:
        return "not a store"

    with pytest.raises(TypeError, match="returned str, not MemoryStore"):
        SyncMemoryStore.wrap(wrong)  # type: ignore[arg-type]
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("betterdb-memory-loop-")]


def test_the_factory_runs_on_the_private_loop_and_its_errors_propagate() -> None:
    """The factory runs on the loop thread; what it raises reaches the caller unchanged."""
    seen: list[str] = []

    def factory() -> MemoryStore:
        seen.append(threading.current_thread().name)
        raise BetterDBMemoryError("no store today", code="test.refused")

    with pytest.raises(BetterDBMemoryError) as err:
        SyncMemoryStore.wrap(factory)
    assert err.value.code == "test.refused"
    assert seen and seen[0].startswith("betterdb-memory-loop-") and seen[0] != threading.current_thread().name


def test_reentrancy_error_family() -> None:
    assert issubclass(SyncReentrancyError, BetterDBMemoryError) and issubclass(
        SyncReentrancyError, RuntimeError
    )
    assert SyncReentrancyError("x").code == "state.reentrant_sync_call"
