"""The engine's answer to a ``where`` filter equals the client-side evaluator's, on random stores.

No ``MemoryStore`` (it does not take ``where=`` yet): each store is an index of this
library's schema (``query.create_index_args``, ``valid_from`` included) and the declared
fields (``filter_fields.schema_args``), made with FT.CREATE on the session server, and
documents written exactly as the write path will write them (``record.encode_record``
then ``filter_fields.index_fields``; ``valid_from`` on some). Every random filter
(``tests/filter_cases.py``) is sent twice, as a filter-only query and as a KNN query
pre-filtered by it with k = the number of documents, and both answers must equal
``filter_eval.evaluate`` over the documents: zero mismatches.

Profiles: the default one (a few hundred (store, filter) pairs, seconds) runs in every
session; ``BETTERDB_FILTERS_DIFFERENTIAL=long`` runs >= 5,000 pairs per engine.
``BETTERDB_FILTERS_SEED`` changes the base seed; a mismatch prints its seed.
Run it on valkey-search with ``scripts/with-valkey-search.sh standalone``.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import pytest

from betterdb_memory.backend.dialect import probe
from betterdb_memory.core.codec import as_text
from betterdb_memory.core.filter_eval import evaluate
from betterdb_memory.core.filter_fields import FilterSchema, index_fields, schema_args
from betterdb_memory.core.filter_query import compile_where, hybrid_query, standalone_query
from betterdb_memory.core.filters import parse_where
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import SCORE_ALIAS, VECTOR_FIELD, IndexSpec, create_index_args
from betterdb_memory.core.record import NewMemory, encode_record
from tests.filter_cases import DECLARED, random_memory, random_where

pytestmark = pytest.mark.integration

DIM = 8
LONG = os.environ.get("BETTERDB_FILTERS_DIFFERENTIAL", "").strip().lower() == "long"
STORES, FILTERS, DOCS = (50, 110, 40) if LONG else (4, 60, 30)
BASE_SEED = int(os.environ.get("BETTERDB_FILTERS_SEED", "27000"))
SCHEMA = FilterSchema(DECLARED, valid_from=True)


def _record(m: dict[str, Any], rng: random.Random) -> list[Any]:
    """The HSET field list of one memory: the write path's record, its index fields, ``valid_from``."""
    memory = NewMemory(
        content="x",
        scope=Scope(namespace=m.get("namespace"), agent_id=m.get("agent_id"), thread_id=m.get("thread_id")),
        importance=m["importance"],
        tags=tuple(m.get("tags", ())),
        source=m.get("source"),
        metadata=m["metadata"],
    )
    vector = np.asarray([rng.uniform(0.1, 1.0) for _ in range(DIM)], dtype=np.float32)
    fields, _ = encode_record(memory, vector, now_ms=m["created_at"], half_life_seconds=3600.0)
    for key, value in index_fields(m["metadata"], DECLARED, strict=False).items():
        fields += [key, value]
    if "valid_from" in m:
        fields += ["valid_from", str(m["valid_from"])]
    return fields


def _ids(reply: Any, prefix: str) -> set[str]:
    """Document ids of an FT.SEARCH reply (RESP2 array, NOCONTENT or with fields; or a RESP3 map)."""
    if isinstance(reply, dict):
        return {as_text(r.get(b"id", r.get("id")))[len(prefix) :] for r in reply.get(b"results", [])}
    out: set[str] = set()
    for item in reply[1:]:
        if isinstance(item, bytes | str) and as_text(item).startswith(prefix):
            out.add(as_text(item)[len(prefix) :])
    return out


async def _one_store(client: Any, caps: Any, name: str, seed: int) -> int:
    """Build one random store, check FILTERS random filters against it; returns the pairs checked."""
    rng = random.Random(seed)
    prefix, index = f"{name}:mem:", f"{name}:mem:idx"
    create = create_index_args(IndexSpec(index, prefix, DIM, extra_schema=tuple(schema_args(DECLARED))), caps)
    await client.execute_command(*create)
    docs: dict[str, dict[str, str]] = {}
    try:
        pipe = client.pipeline(transaction=False)
        for i in range(DOCS):
            m = random_memory(rng)
            fields = _record(m, rng)
            pipe.execute_command("HSET", f"{prefix}{i}", *fields)
            docs[str(i)] = {as_text(fields[j]): fields[j + 1] for j in range(0, len(fields), 2)}
        await pipe.execute()
        blob = np.asarray([1.0] * DIM, dtype=np.float32).tobytes()
        knn = f"KNN {DOCS} @{VECTOR_FIELD} $vec AS {SCORE_ALIAS}"
        wheres = [random_where(rng) for _ in range(FILTERS)]
        pipe = client.pipeline(transaction=False)
        queries: list[tuple[str, str]] = []
        for where in wheres:
            expr = compile_where(parse_where(where, SCHEMA), caps)
            flat, hybrid = standalone_query(caps, expr), hybrid_query(knn, expr)
            queries.append((flat, hybrid))
            pipe.execute_command("FT.SEARCH", index, flat, "NOCONTENT", "LIMIT", "0", "1000", "DIALECT", "2")
            pipe.execute_command(
                "FT.SEARCH", index, hybrid, "PARAMS", "2", "vec", blob,
                "RETURN", "1", SCORE_ALIAS, "LIMIT", "0", "1000", "DIALECT", "2",
            )  # fmt: skip
        replies = await pipe.execute()
        for n, where in enumerate(wheres):
            node = parse_where(where, SCHEMA)
            expected = {i for i, fields in docs.items() if evaluate(node, fields)}
            for shape, reply, query in (
                ("filter", replies[2 * n], queries[n][0]),
                ("knn", replies[2 * n + 1], queries[n][1]),
            ):
                got = _ids(reply, prefix)
                if got != expected:
                    pytest.fail(
                        f"mismatch (seed {seed}, filter {n}, {shape} query, engine {caps.engine}): "
                        f"where={where!r}\nquery={query!r}\nengine only: "
                        f"{ {i: docs[i] for i in got - expected} }\nevaluator only: "
                        f"{ {i: docs[i] for i in expected - got} }"
                    )
        return len(wheres)
    finally:
        await client.execute_command("FT.DROPINDEX", index)
        await client.delete(*(f"{prefix}{i}" for i in range(DOCS)))


async def test_engine_answers_equal_the_evaluator(client: Any, unique_name: str) -> None:
    """Zero mismatches between FT.SEARCH (filter-only and KNN-prefiltered) and ``evaluate``."""
    caps = await probe(client)
    if not caps.filter_queries:
        pytest.skip(f"{caps.engine} {caps.version_string} runs no query without KNN")
    pairs = 0
    for s in range(STORES):
        pairs += await _one_store(client, caps, f"{unique_name}s{s}", BASE_SEED + s)
    assert pairs == STORES * FILTERS
