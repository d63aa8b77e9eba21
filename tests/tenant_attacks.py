"""What tenant A tries against tenant B's store, and how a refusal is judged (issue 30).

Shared by the tenant tests of one server (tests/integration/test_tenants.py, both engines)
and of the valkey-search cluster (tests/cluster/test_cluster_acl.py), so both make the
same attempts, one call per public coroutine method of ``MemoryStore`` (read from the
class: ``public_coroutines``, checked by test_tenants.py) plus export and import, and
judge them alike:

* a library call must raise ``PermissionDeniedError`` (``server.no_permission``); any
  other outcome, a result or another error, fails the test (``refused``);
* a raw command must be refused by the server as a permission error (valkey-search
  refuses an index whose prefixes the user may not read with a plain ``ERR``, worded as a
  permission error); an unknown command counts when the caller allows it
  (``raw_refused``).
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
import valkey.exceptions as vexc

from betterdb_memory import ExtractedFact, Fact, MemoryStore, PermissionDeniedError, Turn
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.errors import CommandNotSupportedError, classify_server_error
from betterdb_memory.transfer import export_store, import_store

__all__ = [
    "CALL_TIMEOUT",
    "NOT_ATTACKS",
    "SILENT_WHEN_READY",
    "Attack",
    "Extractor",
    "Summarizer",
    "attack_store",
    "export_tampered",
    "public_coroutines",
    "raw_refused",
    "refused",
    "store_attacks",
]

CALL_TIMEOUT = 60.0  # generous: a refused call answers at once, a hang must fail the test
#: Coroutine methods that are no attack surface: lifecycle of the caller's own object.
NOT_ATTACKS = {"close", "connect", "__aenter__", "__aexit__"}
#: Once a store's index is ready these send nothing (they only wait for what readiness started,
#: whose refusals are logged: a store keeps working without Monitor); a fresh store covers them.
SILENT_WHEN_READY = {"ensure_discovery_ready", "ensure_config_refresh_started"}

Attack = Callable[[MemoryStore], Awaitable[Any]]


class Extractor:
    """A fact extractor, so that ``extract_memories`` reaches the server."""

    async def extract(self, turns: Sequence[Turn]) -> list[ExtractedFact]:
        return [ExtractedFact("the user drinks tea", topic_tags=("tea",), importance=0.4)]


class Summarizer:
    """A summarizer, so that ``summarize_session`` reaches the server."""

    async def summarize(self, turns: Sequence[Turn], previous: str | None = None) -> str:
        return "they talked"


def public_coroutines() -> set[str]:
    """``MemoryStore``'s public coroutine methods: each must have an attack."""
    return {
        n
        for n in dir(MemoryStore)
        if (not n.startswith("_") or n in NOT_ATTACKS)
        and inspect.iscoroutinefunction(getattr(MemoryStore, n, None))
    } - NOT_ATTACKS


def store_attacks(ids: Sequence[str], own: str, export: Sequence[str]) -> dict[str, Attack]:
    """One call per public coroutine method of ``MemoryStore`` (and export, import), aimed at B's data.

    ``ids``: B's memory ids (the first is updated, read, forgotten); ``own``: an id'd memory
    of B (its history is read); ``export``: B's export, tampered, for import.
    """
    mid = ids[0]
    vec = [1.0] + [0.0] * 383

    def summary(items: Any) -> str:
        return "stolen"

    def facts(items: Any) -> list[Fact]:
        return [Fact("city", "lives in Rome", "2022-01-01")]

    async def consolidate_facts(s: MemoryStore) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return await s.consolidate_facts(extract_facts=facts, agent_id="c")

    return {
        "ensure_index": lambda s: s.ensure_index(),
        "ensure_discovery_ready": lambda s: s.ensure_discovery_ready(),
        "ensure_config_refresh_started": lambda s: s.ensure_config_refresh_started(),
        "index_info": lambda s: s.index_info(),
        "migrate_index": lambda s: s.migrate_index(),
        "stats": lambda s: s.stats(),
        "refresh_config": lambda s: s.refresh_config(),
        "remember": lambda s: s.remember("planted by a", agent_id="ag", thread_id="th", tags=["private"]),
        "remember_many": lambda s: s.remember_many([{"content": "planted", "agent_id": "ag"}]),
        "update": lambda s: s.update(own, content="overwritten by a"),
        "get": lambda s: s.get(mid),
        "get_many": lambda s: s.get_many(list(ids)),
        "forget": lambda s: s.forget(mid),
        "history": lambda s: s.history(own),
        "recall": lambda s: s.recall("tea", k=5, threshold=2.0, agent_id="ag"),
        "recall_by_vector": lambda s: s.recall_by_vector(vec, k=5, threshold=2.0),
        "search_candidates": lambda s: s.search_candidates(
            np.asarray(vec, dtype=np.float32), MemoryFilter(), 5
        ),
        "count": lambda s: s.count(agent_id="ag"),
        "list": lambda s: s.list(agent_id="ag"),
        "forget_by_scope": lambda s: s.forget_by_scope(agent_id="ag"),
        "erase": lambda s: s.erase(agent_id="ag"),
        "store_turn": lambda s: s.store_turn("s1", "planted question", "planted answer", agent_id="ag"),
        "get_recent_turns": lambda s: s.get_recent_turns("s1", agent_id="ag"),
        "get_session_metadata": lambda s: s.get_session_metadata("s1", agent_id="ag"),
        "clear_session": lambda s: s.clear_session("s1", agent_id="ag"),
        "retrieve_context": lambda s: s.retrieve_context("s1", "tea", token_budget=2000, agent_id="ag"),
        "extract_memories": lambda s: s.extract_memories("s1", agent_id="ag"),
        "summarize_session": lambda s: s.summarize_session("s1", agent_id="ag"),
        "consolidate": lambda s: s.consolidate("summary", summary, agent_id="ag"),
        "consolidate_facts": consolidate_facts,
        "fact_history": lambda s: s.fact_history("city", agent_id="c"),
        "purge_fact_history": lambda s: s.purge_fact_history(subject="city", agent_id="c"),
        # Not MemoryStore methods, but public calls on a store: the transfer functions.
        "export_store": lambda s: export_store(s, io.StringIO()),
        "import_store": lambda s: import_store(s, list(export)),
    }


async def export_tampered(store: MemoryStore) -> list[str]:
    """``store``'s export (taken by the operator) with every memory's content rewritten: what
    tenant A would import over B's store."""
    out = io.StringIO()
    await export_store(store, out)
    lines = []
    for line in out.getvalue().splitlines():
        row = json.loads(line)
        if row.get("type") == "memory":
            row["fields"]["content"] = "overwritten by import"
        lines.append(json.dumps(row))
    return lines


async def refused(label: str, call: Awaitable[Any], refusals: dict[str, str]) -> None:
    """Await a library call; record its ``PermissionDeniedError``, fail on anything else."""
    try:
        result = await asyncio.wait_for(call, CALL_TIMEOUT)
    except PermissionDeniedError as exc:
        refusals[label] = f"[{exc.code}] {exc.message}"
        return
    except Exception as exc:
        raise AssertionError(
            f"{label}: refused with {type(exc).__name__}, not PermissionDeniedError: {exc}"
        ) from exc
    raise AssertionError(
        f"{label}: tenant A's call on B's store was NOT refused; it returned {result!r}"[:500]
    )


async def attack_store(store: MemoryStore, attacks: dict[str, Attack], label: str) -> dict[str, str]:
    """Every attack on ``store`` (each must be refused); the refusals by ``<label> <call>``."""
    refusals: dict[str, str] = {}
    for name, attack in attacks.items():
        if store.index.ready and name in SILENT_WHEN_READY:
            assert await asyncio.wait_for(attack(store), CALL_TIMEOUT) is None
            continue
        await refused(f"{label} {name}", attack(store), refusals)
    return refusals


async def raw_refused(
    label: str, call: Awaitable[Any], refusals: dict[str, str], *, unknown_command: bool = False
) -> None:
    """Await a raw command; record the server's refusal, fail if it ran.

    A permission error, or (``unknown_command``) a command the engine does not have.
    """
    try:
        reply = await asyncio.wait_for(call, CALL_TIMEOUT)
    except vexc.NoPermissionError as exc:
        refusals[label] = str(exc)
        return
    except vexc.ResponseError as exc:
        kinds: tuple[type[Exception], ...] = (PermissionDeniedError,)
        if unknown_command:
            kinds += (CommandNotSupportedError,)
        if classify_server_error(str(exc)) not in kinds:
            raise AssertionError(f"{label}: not a refusal: {exc}") from exc
        refusals[label] = str(exc)
        return
    raise AssertionError(f"{label}: tenant A ran it on B's data: {reply!r}"[:400])
