"""Building the store's parts over a ``testing.RecordingBackend``, for command-level unit tests.

Each part takes its dependencies in its constructor; these helpers wire the usual ones
(a ``Runtime`` on the key space ``parts``, an index known to be ready on RediSearch
2.10, an 8-dimension hashing embedder) so a test states only the part it exercises
and the commands it expects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from betterdb_memory import HashingEmbedder
from betterdb_memory.backend.index import IndexManager
from betterdb_memory.core.dialect import capabilities_for
from betterdb_memory.core.keys import KeySpace
from betterdb_memory.core.tunables import ConfigSnapshot
from betterdb_memory.lifecycle import Supervisor
from betterdb_memory.observability.hub import StoreObservability
from betterdb_memory.testing import RecordingBackend
from betterdb_memory.tiers.capacity import Capacity
from betterdb_memory.tiers.consolidation import Consolidation
from betterdb_memory.tiers.documents import Documents
from betterdb_memory.tiers.erasure import Erasure
from betterdb_memory.tiers.fact_ledger import FactLedger
from betterdb_memory.tiers.long_term import LongTermMemory
from betterdb_memory.tiers.recall import Recall
from betterdb_memory.tiers.runtime import Runtime, Settings
from betterdb_memory.tiers.scopes import ScopeReader
from betterdb_memory.tiers.session_config import SessionConfig
from betterdb_memory.tiers.sessions import Sessions
from betterdb_memory.tiers.summaries import RollingSummaries

__all__ = ["Parts", "build", "runtime", "search_reply"]


def runtime(
    backend: RecordingBackend | None = None, *, config: ConfigSnapshot | None = None, **settings: Any
) -> Runtime:
    """A ``Runtime`` over ``backend`` (a new ``RecordingBackend`` when None); ``config``:
    the tunables in force (the cap among them)."""
    backend = backend or RecordingBackend()
    keys = KeySpace("parts")
    embedder = HashingEmbedder(dimensions=8)
    index = IndexManager(backend, keys, embedder)
    index.capabilities = backend.capabilities
    index.ready = True  # no probe: the index is taken as created
    return Runtime(
        keys=keys,
        backend=backend,
        index=index,
        embedder=embedder,
        obs=StoreObservability(None, keys, config or ConfigSnapshot(), discovery=False),
        supervisor=Supervisor(),
        settings=Settings(default_threshold=0.33, **settings),
    )


@dataclass
class Parts:
    """Every part of a store, wired as ``MemoryStore`` wires them, over one recording backend."""

    rt: Runtime
    backend: RecordingBackend
    scopes: ScopeReader
    docs: Documents
    capacity: Capacity
    recall: Recall
    long_term: LongTermMemory
    ledger: FactLedger
    consolidation: Consolidation
    summaries: RollingSummaries
    sessions: Sessions
    erasure: Erasure


def build(
    *,
    cluster: bool = False,
    session: SessionConfig | None = None,
    config: ConfigSnapshot | None = None,
    **settings: Any,
) -> Parts:
    """The parts over a new ``RecordingBackend`` (``cluster``: addressed as a cluster)."""
    backend = RecordingBackend(cluster=cluster, capabilities=capabilities_for("redisearch", (2, 10, 0)))
    rt = runtime(backend, config=config, **settings)
    cfg = session or SessionConfig.of(summarize_batch=0)
    scopes, docs = ScopeReader(rt), Documents(rt)
    capacity = Capacity(rt, scopes, docs)
    recall = Recall(rt, docs)
    long_term = LongTermMemory(rt, capacity, recall, docs)
    # Scripted round trips: no journal probe before the first read (tiers.subject_repair);
    # its own tests (test_tiers_subject_repair.py) set it due.
    long_term.subjects.repair._next_probe = math.inf
    ledger = FactLedger(rt, scopes, long_term)
    consolidation = Consolidation(rt, scopes, long_term, docs, ledger)
    summaries = RollingSummaries(rt, cfg, long_term)
    sessions = Sessions(rt, cfg, summaries=summaries, recall=recall, long_term=long_term)
    erasure = Erasure(rt, scopes=scopes, docs=docs, ledger=ledger, sessions=sessions, summaries=summaries)
    return Parts(
        rt,
        backend,
        scopes,
        docs,
        capacity,
        recall,
        long_term,
        ledger,
        consolidation,
        summaries,
        sessions,
        erasure,
    )


def search_reply(total: int, *hits: tuple[str, dict[str, Any]]) -> list[Any]:
    """A RESP2 FT.SEARCH reply: the total, then each hit's key and its fields as a flat list."""
    out: list[Any] = [total]
    for key, fields in hits:
        out += [key.encode(), [x for k, v in fields.items() for x in (k.encode(), str(v).encode())]]
    return out
