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
ON_THE_BRIDGE = {"close", "wrap"}  # defined once on the shared base, for every sync class


def declarations(class_name: str) -> dict[str, str]:
    """What the class body of ``class_name`` in sync.py declares: name -> the generator call, or "defined"."""
    tree = ast.parse(Path(sync_module.__file__).read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    out: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
                out[stmt.targets[0].id] = ast.unparse(stmt.value)
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = "defined"
        elif isinstance(node, ast.Assign):
            out.update((t.id, "defined") for t in node.targets if isinstance(t, ast.Name))
    return out


def generator_for(member: object) -> str | None:
    if isinstance(member, property):
        return "_forward_settable" if member.fset is not None else "_forward"
    if isinstance(member, classmethod):
        return "_constructor" if inspect.iscoroutinefunction(member.__func__) else None
    if inspect.iscoroutinefunction(member):
        return "_blocking"
    if inspect.isfunction(member):
        return "_on_loop"
    return None


@pytest.mark.parametrize(("sync_cls", "async_cls"), PAIRS, ids=["store", "agent"])
def test_every_public_member_is_declared_for_type_checkers(sync_cls: type[Any], async_cls: type) -> None:
    """Each public member of the async class has its one TYPE_CHECKING line (or a sync definition).

    Methods are generated at import whatever this says; the lines are what mypy and IDEs
    see. When this fails, paste the lines it prints into the class's TYPE_CHECKING block.
    """
    declared = declarations(sync_cls.__name__)
    missing, wrong = [], []
    for name, member in sync_module._public_members(async_cls):
        generator = generator_for(member)
        if generator is None or name in sync_cls._not_forwarded or name in ON_THE_BRIDGE:
            continue
        line = f"{generator}({async_cls.__name__}.{name})"
        if name not in declared:
            missing.append(f"        {name} = {line}")
        elif declared[name] not in ("defined", line):
            wrong.append(f"{name} = {declared[name]}  (expected {line})")
    assert not missing, f"add to the TYPE_CHECKING block of {sync_cls.__name__}:\n" + "\n".join(missing)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("sync_cls", "async_cls"), PAIRS, ids=["store", "agent"])
def test_every_public_member_is_generated(sync_cls: type[Any], async_cls: type) -> None:
    """At runtime nothing depends on the declarations: every public member is there, none a coroutine."""
    for name, member in sync_module._public_members(async_cls):
        if generator_for(member) is None or name in sync_cls._not_forwarded:
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
