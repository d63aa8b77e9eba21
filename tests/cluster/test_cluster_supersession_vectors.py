"""Same-slot supersession's vector reads on a 3-primary valkey-search cluster: one pipeline across slots.

The default recall's KNN returns no vectors; the few the rule compares are read after it
(``tiers.time_recall``), one ``HGET`` per memory, whose keys lie on several primaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import MemoryHit, MemoryStore
from betterdb_memory.embedders import OnnxEmbedder
from tests.integration.test_slot_kinds_recall import (
    CAT_SITTER,
    CAT_SITTER_QUESTION,
    ROLE_STORIES,
    assert_versions,
    role_story,
)

pytestmark = pytest.mark.integration


async def test_the_vectors_of_a_slot_s_versions_are_read_across_primaries(
    cluster_store_factory: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = cluster_store_factory(embedder=OnnxEmbedder())
    homes = [
        ("Ada lives in Lisbon.", "2019-09-01"),
        ("Ada moved to Porto.", "2021-03-01"),
        ("Ada moved to Berlin in May 2024.", "2024-05-01"),
    ]
    versions = [await store.remember(text, valid_from=when) for text, when in homes]
    for text in ("Bruno lives in Oslo.", "Greta Zeller works at Acme."):
        await store.remember(text, valid_from="2022-01-01")
    backend = store._rt.backend
    real = backend.pipeline
    read: list[str] = []

    async def pipeline(operation: str, steps: Sequence[Any], **kw: Any) -> list[Any]:
        read.extend(s[1] for s in steps if isinstance(s, tuple) and s[0] == "HGET")
        return await real(operation, steps, **kw)

    backend.pipeline = pipeline  # type: ignore[method-assign]
    hits = []
    for _ in range(100):  # the shards index asynchronously
        hits = await store.recall("Where does Ada live?", k=5, threshold=2.0, reinforce=False, explain=True)
        if len(hits) == 5:
            break
    assert [h.item.id for h in hits[:3]] == versions[::-1]
    assert hits[1].explain is not None and hits[1].explain.superseded_by == versions[2]
    assert set(read) == {store.keys.doc(m) for m in versions}
    assert len({await cluster_client.cluster_keyslot(k) for k in read}) > 1


async def _all_indexed(store: MemoryStore, question: str, *, k: int) -> list[MemoryHit]:
    """The explained recall of ``question`` once all ``k`` memories are found (the shards index asynchronously)."""
    hits: list[MemoryHit] = []
    for _ in range(100):
        hits = await store.recall(question, k=k, threshold=2.0, reinforce=False, explain=True)
        if len(hits) == k:
            break
    return hits


async def test_a_one_value_question_s_slot_on_a_cluster(
    cluster_store_factory: Callable[..., MemoryStore],
) -> None:
    """The slot a one-value question asks (core.slot_members) over memories on several primaries:
    the current version, worded apart from the two before it, ranks first."""
    store = cluster_store_factory(embedder=OnnxEmbedder())
    ids = [await store.remember(text, valid_from=when) for text, when in CAT_SITTER]
    assert_versions(await _all_indexed(store, CAT_SITTER_QUESTION, k=6), ids[4], (ids[0], ids[2]))


async def test_a_question_asking_who_holds_a_role_on_a_cluster(
    cluster_store_factory: Callable[..., MemoryStore],
) -> None:
    """A question with no asked noun that still asks one value ("Who cleans Otto's windows?",
    core.slot_question) over memories on several primaries: the newest version ranks first."""
    store = cluster_store_factory(embedder=OnnxEmbedder())
    texts, question = ROLE_STORIES[0]
    ids = [await store.remember(text, valid_from=when) for text, when in role_story(texts)]
    assert_versions(await _all_indexed(store, question, k=5), ids[4], (ids[0], ids[2]))
