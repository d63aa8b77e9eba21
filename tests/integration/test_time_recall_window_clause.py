"""The window's main-index clause (``core.time_recall.inside_clause``) matches what the issue calls inside, on random stores.

Inside: an event whose ``valid_from`` falls in ``[a, b)`` (its ``created_at`` when it has
no ``valid_from``: a document the reference library wrote), or a current state (a memory
with ``state_from``) begun before ``b``. Documents are written raw (every combination:
with and without ``valid_from``, written inside the window about another time, states
begun before, in and after it, several threads), the clause is sent as the recall sends
it (``knn_search_args``, KNN over every document), alone and ANDed with a thread scope,
and the engine's answer must equal the rule's. RediSearch 2.10.5 loses documents under a
negation below a union once ANDed with a scope, depending on the documents' order
(``core.validity``): many seeds, every window shape (closed, open on either side, empty).
Run it on valkey-search with ``scripts/with-valkey-search.sh standalone``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from betterdb_memory.backend.dialect import probe
from betterdb_memory.core.codec import as_text
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import (
    VECTOR_FIELD,
    IndexSpec,
    MemoryFilter,
    create_index_args,
    knn_search_args,
)
from betterdb_memory.core.time_recall import inside_clause
from betterdb_memory.core.timewindow import TimeWindow

pytestmark = pytest.mark.integration

DIM = 4
DOCS = 40
SEEDS = 6
WINDOWS = 12
THREADS = ("t1", "t2")


def _doc(rng: random.Random) -> dict[str, int | str]:
    doc: dict[str, int | str] = {"created_at": rng.randint(0, 100), "threadId": rng.choice(THREADS)}
    kind = rng.random()
    if kind < 0.25:
        pass  # the reference's: no valid_from
    elif kind < 0.5:  # a state: valid_from = state_from (a memory with a subject)
        doc["valid_from"] = doc["state_from"] = rng.randint(0, 100)
    else:
        doc["valid_from"] = rng.randint(0, 100)
    return doc


def _window(rng: random.Random) -> TimeWindow:
    a, b = sorted(rng.sample(range(-5, 106), 2))
    shape = rng.random()
    if shape < 0.2:
        a = None  # type: ignore[assignment]  # "before ..."
    elif shape < 0.4:
        b = None  # type: ignore[assignment]  # "since ..."
    elif shape < 0.45:
        b = a  # empty
    return TimeWindow(start_ms=a, end_ms=b, text="", span=(0, 0), query="")


def _inside(doc: dict[str, int | str], w: TimeWindow) -> bool:
    if "state_from" in doc and (w.end_ms is None or int(doc["state_from"]) < w.end_ms):
        return True
    when = int(doc.get("valid_from", doc["created_at"]))
    return (w.start_ms is None or when >= w.start_ms) and (w.end_ms is None or when < w.end_ms)


def _ids(reply: Any, prefix: str) -> set[str]:
    if isinstance(reply, dict):
        return {as_text(r.get(b"id", r.get("id")))[len(prefix) :] for r in reply.get(b"results", [])}
    return {
        as_text(x)[len(prefix) :]
        for x in reply[1:]
        if isinstance(x, bytes | str) and as_text(x).startswith(prefix)
    }


async def test_the_clause_matches_the_rule(client: Any, unique_name: str) -> None:
    caps = await probe(client)
    checked = 0
    for seed in range(SEEDS):
        rng = random.Random(26_000 + seed)
        name = f"{unique_name}s{seed}"
        prefix, index = f"{name}:mem:", f"{name}:mem:idx"
        await client.execute_command(*create_index_args(IndexSpec(index, prefix, DIM), caps))
        docs = {str(i): _doc(rng) for i in range(DOCS)}
        try:
            pipe = client.pipeline(transaction=False)
            for i, doc in docs.items():
                vec = np.asarray([rng.uniform(0.1, 1.0) for _ in range(DIM)], dtype=np.float32).tobytes()
                pipe.hset(f"{prefix}{i}", mapping={**doc, VECTOR_FIELD: vec})
            await pipe.execute()
            blob = np.ones(DIM, dtype=np.float32).tobytes()
            for _ in range(WINDOWS):
                w = _window(rng)
                clause = inside_clause(w)
                for thread in (None, *THREADS):
                    flt = MemoryFilter(scope=Scope(thread_id=thread), clauses=(clause,))
                    args = knn_search_args(index, blob, k=DOCS, flt=flt, return_fields=("created_at",))
                    got = _ids(await client.execute_command(*args), prefix)
                    expected = {
                        i for i, d in docs.items() if _inside(d, w) and thread in (None, d["threadId"])
                    }
                    assert got == expected, (
                        f"seed {seed}, window [{w.start_ms}, {w.end_ms}), thread {thread}, {caps.engine}: "
                        f"query {args[2]!r}\nengine only {sorted(got - expected)}, rule only {sorted(expected - got)}"
                        f"\n{ {i: docs[i] for i in got ^ expected} }"
                    )
                    checked += 1
        finally:
            await client.execute_command("FT.DROPINDEX", index)
            await client.delete(*(f"{prefix}{i}" for i in docs))
    assert checked == SEEDS * WINDOWS * (1 + len(THREADS))
