"""Same-slot supersession reads only the stored vectors it compares (core/supersession.py ``vector_needs``).

The default recall's KNN returns no vectors (50 x 1.5 KB of reply at 384 dimensions);
the vectors of candidates that share a leading name with another, and of those the
question names, are read after it in one pipelined round trip, and none when no two
candidates can be versions of one statement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from betterdb_memory import MemoryStore
from betterdb_memory.core.query import VECTOR_FIELD
from betterdb_memory.embedders import OnnxEmbedder

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder()


def spy(store: MemoryStore) -> tuple[list[Sequence[Any]], list[Sequence[Any]]]:
    """(the FT.SEARCH arguments the store sends, the keyed commands of its pipelines)."""
    backend = store._rt.backend
    searches: list[Sequence[Any]] = []
    commands: list[Sequence[Any]] = []
    real_search, real_pipeline = backend.search, backend.pipeline

    async def search(operation: str, args: Sequence[Any]) -> Any:
        searches.append(args)
        return await real_search(operation, args)

    async def pipeline(operation: str, steps: Sequence[Any], **kw: Any) -> list[Any]:
        searches.extend(kw.get("searches", ()))
        commands.extend(s for s in steps if isinstance(s, tuple))
        return await real_pipeline(operation, steps, **kw)

    backend.search = search  # type: ignore[method-assign]
    backend.pipeline = pipeline  # type: ignore[method-assign]
    return searches, commands


def returned(args: Sequence[Any]) -> list[str]:
    words = [a.decode("latin-1") if isinstance(a, bytes) else str(a) for a in args]
    if "RETURN" not in words:
        return []
    at = words.index("RETURN")
    return words[at + 2 : at + 2 + int(words[at + 1])]


async def test_only_the_name_mates_vectors_are_read(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    store = make_store(embedder=onnx)
    lisbon = await store.remember("Ada lives in Lisbon.", valid_from="2021-09-01")
    berlin = await store.remember("Ada moved to Berlin in May 2024.", valid_from="2024-05-01")
    for text in ("Bruno lives in Oslo.", "Greta Zeller works at Acme.", "The user likes green tea."):
        await store.remember(text, valid_from="2022-01-01")
    searches, commands = spy(store)
    hits = await store.recall("Where does Ada live?", k=3, threshold=2.0, reinforce=False, explain=True)
    assert [h.item.id for h in hits[:2]] == [berlin, lisbon]
    assert hits[1].explain is not None and hits[1].explain.superseded_by == berlin
    knn = [
        s for s in searches if s[0] == "FT.SEARCH" and "KNN" in str(s[2])
    ]  # FT.INFO: the index size (valkey-search)
    assert knn and all(VECTOR_FIELD not in returned(s) for s in knn)
    read = [c for c in commands if c[0] == "HGET" and c[2] == VECTOR_FIELD]
    assert sorted(c[1] for c in read) == sorted(store.keys.doc(m) for m in (lisbon, berlin))


async def test_no_vector_is_read_without_two_statements_of_one_name(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    store = make_store(embedder=onnx)
    ids = [
        await store.remember(text, valid_from=f"202{i}-01-01")
        for i, text in enumerate(["Ada lives in Lisbon.", "Bruno moved to Oslo.", "Greta works at Acme."])
    ]
    _, commands = spy(store)
    hits = await store.recall("Where does Ada live?", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == ids[0]
    assert not [c for c in commands if c[0] == "HGET"]


async def test_a_memory_gone_before_its_vector_is_read_is_left_out_of_the_rule(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    """Its vector reads as nothing: the rule runs on the others, the recall does not fail."""
    store = make_store(embedder=onnx)
    lisbon = await store.remember("Ada lives in Lisbon.", valid_from="2021-09-01")
    berlin = await store.remember("Ada moved to Berlin in May 2024.", valid_from="2024-05-01")
    backend = store._rt.backend
    real = backend.pipeline

    async def pipeline(operation: str, steps: Sequence[Any], **kw: Any) -> list[Any]:
        replies = await real(operation, steps, **kw)
        return [None if isinstance(s, tuple) and s[0] == "HGET" and s[1] == store.keys.doc(lisbon) else r
                for s, r in zip([*steps, *kw.get("searches", ())], replies, strict=False)]  # fmt: skip

    backend.pipeline = pipeline  # type: ignore[method-assign]
    hits = await store.recall("Where does Ada live?", k=2, threshold=2.0, reinforce=False, explain=True)
    assert {h.item.id for h in hits} == {lisbon, berlin}
    assert all(h.explain is not None and h.explain.superseded_by is None for h in hits)
