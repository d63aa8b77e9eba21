"""``betterdb_memory.testing``: the helpers shipped for users' own tests work end to end."""

from __future__ import annotations

from betterdb_memory import Fact
from betterdb_memory.testing import ScriptedFactExtractor, ScriptedSummarizer, temporary_store


async def test_temporary_store_runs_a_real_engine_and_cleans_up() -> None:
    async with temporary_store(max_items_per_scope=5) as store:
        mid = await store.remember("Ada lives in Lisbon", thread_id="ada")
        hits = await store.recall("Ada lives in Lisbon", thread_id="ada")
        assert [h.item.id for h in hits] == [mid]
        url = store.client.connection_pool.connection_kwargs["port"]
    assert url  # the server and its data dir are gone after the block


async def test_scripted_seams_drive_consolidation_and_record_their_inputs() -> None:
    summarize = ScriptedSummarizer("digest one", "digest two")
    extract = ScriptedFactExtractor([Fact("city", "lives in Lisbon", "2024-01-01")])
    async with temporary_store() as store:
        await store.remember_many([{"content": f"note {i}", "thread_id": "t"} for i in range(3)])
        facts = await store.consolidate("facts", extract_facts=extract, thread_id="t")
        result = await store.consolidate("summary", summarize, thread_id="t")
        assert result.consolidated == 3 and len(summarize.calls) == 1 and len(summarize.calls[0]) == 3
        digest = await store.get(result.created[0])
        assert digest is not None and digest.content == "digest one" and digest.source == "summary"
        # one batch shares one creation time: the extractor saw all three (ties are ordered by id)
        assert facts.facts == 1 and sorted(i.content for i in extract.calls[0]) == [
            "note 0",
            "note 1",
            "note 2",
        ]
