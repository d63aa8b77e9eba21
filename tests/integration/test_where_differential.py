"""``MemoryStore.list`` / ``count`` / ``recall`` / ``recall_by_vector`` with ``where=`` equal a plain-Python evaluation.

The store-level twin of ``test_filters_differential.py``: the memories go in through
``remember_many`` (the real write path: declared fields, ``present``, ``valid_from``),
random filters (``tests/filter_cases.py``: hostile tag values, missing fields, mixed
types) go through the public API, and every answer must equal ``filter_eval.evaluate``
over the documents as stored (read back with ``HGETALL``): zero mismatches. The write
path is checked too: the stored ``meta_*`` / ``present`` fields are exactly what
``index_fields`` says the metadata gives.

Profiles: the default (2 stores x 40 filters, each asked four ways: seconds) runs in
every session; ``BETTERDB_FILTERS_DIFFERENTIAL=long`` runs 40 stores x 130 filters
(5,200 (store, filter) pairs). ``BETTERDB_FILTERS_SEED`` changes the base seed; a
mismatch prints its seed. On valkey-search: ``scripts/with-valkey-search.sh standalone``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import pytest

from betterdb_memory import MemoryStore
from betterdb_memory.core.codec import as_text
from betterdb_memory.core.filter_eval import evaluate
from betterdb_memory.core.filter_fields import (
    DECLARED_PREFIX,
    PRESENCE_FIELD,
    FilterSchema,
    index_fields,
)
from betterdb_memory.core.filters import parse_where
from betterdb_memory.errors import ValidationError
from tests.filter_cases import DECLARED, random_memory, random_where

pytestmark = pytest.mark.integration

LONG = os.environ.get("BETTERDB_FILTERS_DIFFERENTIAL", "").strip().lower() == "long"
STORES, FILTERS, DOCS = (40, 130, 40) if LONG else (2, 40, 30)
BASE_SEED = int(os.environ.get("BETTERDB_FILTERS_SEED", "27500"))
SCHEMA = FilterSchema(DECLARED, valid_from=True)


def _writable(m: dict[str, Any]) -> dict[str, Any]:
    """The ``remember_many`` item of a random memory; declared values that do not fit move to another key."""
    meta: dict[str, Any] = {}
    for key, value in m["metadata"].items():
        try:
            index_fields({key: value}, DECLARED, strict=True)
        except ValidationError:
            key = f"x_{key}"  # kept, not indexed
        meta[key] = value
    item: dict[str, Any] = {"content": "memory", "importance": m["importance"], "metadata": meta}
    for name in ("thread_id", "agent_id", "namespace", "source", "tags", "valid_from"):
        if name in m:
            item[name] = m[name]
    return item


async def _one_store(store: MemoryStore, client: Any, seed: int) -> int:
    rng = random.Random(seed)
    items = [_writable(random_memory(rng)) for _ in range(DOCS)]
    ids = await store.remember_many(items)
    docs: dict[str, dict[str, Any]] = {}
    for mid, item in zip(ids, items, strict=True):
        raw = await client.hgetall(store.keys.doc(mid))
        fields = {as_text(k): v for k, v in raw.items() if as_text(k) != "vector"}
        stored = {
            k: as_text(v) for k, v in fields.items() if k.startswith(DECLARED_PREFIX) or k == PRESENCE_FIELD
        }
        assert stored == index_fields(item["metadata"], DECLARED), f"seed {seed}: write path"
        docs[mid] = fields
    vector = [1.0] * store.embedder.dimensions
    for n in range(FILTERS):
        where = random_where(rng)
        node = parse_where(where, SCHEMA)
        expected = {mid for mid, fields in docs.items() if evaluate(node, fields)}
        page = await store.list(where=where, limit=1000)
        answers = {
            "list": {i.id for i in page.items},
            "recall_by_vector": {
                h.item.id
                for h in await store.recall_by_vector(
                    vector, where=where, k=1000, threshold=2.0, reinforce=False
                )
            },
        }
        # A text recall: the KNN and the full-text candidates (the where clause inside the text
        # query's branches), re-ranked.
        answers["recall"] = {
            h.item.id
            for h in await store.recall("memory", where=where, k=1000, threshold=2.0, reinforce=False)
        }
        counted = await store.count(where=where)
        for how, got in answers.items():
            if got != expected or counted != len(expected) or page.total != len(expected):
                pytest.fail(
                    f"mismatch (seed {seed}, filter {n}, {how}): where={where!r}\n"
                    f"count={counted} total={page.total} expected={len(expected)}\n"
                    f"engine only: { {i: docs[i] for i in got - expected} }\n"
                    f"evaluator only: { {i: docs[i] for i in expected - got} }"
                )
    return FILTERS


async def test_store_answers_equal_the_evaluator(
    make_store: Callable[..., MemoryStore], client: Any, unique_name: str
) -> None:
    pairs = 0
    for s in range(STORES):
        store = make_store(name=f"{unique_name}s{s}", metadata_fields=dict(DECLARED.fields))
        if s == 0:
            await store.count()
            caps = store.index.caps
            if not caps.filter_queries:
                pytest.skip(f"{caps.engine} {caps.version_string} runs no query without KNN")
        try:
            pairs += await _one_store(store, client, BASE_SEED + s)
        finally:
            await store.forget_by_scope(where={"importance": {"$gte": 0}})
    assert pairs == STORES * FILTERS
