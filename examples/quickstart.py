"""Quick start: remember, recall, store turns, assemble a context, clean up.

Run: ``python examples/quickstart.py``. With ``VALKEY_URL`` set it uses that server
(any Valkey with valkey-search or RediSearch); otherwise it starts the embedded engine
in a temporary data dir that is deleted at the end. Embeddings come from the offline
ONNX model (the ``onnx`` extra).
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from betterdb_memory import MemoryStore

THREAD = "ada"
AGENT = "assistant"


async def main() -> None:
    url = os.environ.get("VALKEY_URL") or None  # None: the embedded engine
    with tempfile.TemporaryDirectory(prefix="betterdb-quickstart-") as data_dir:
        store = await MemoryStore.connect(url, name="example-quickstart", data_dir=data_dir)
        try:
            await run(store)
        finally:
            await store.close()


async def run(store: MemoryStore) -> None:
    # Long-term memories (L2): recalled by meaning, scored with recency and importance.
    await store.remember("Ada lives in Lisbon.", importance=0.9, tags=["profile"], agent_id=AGENT)
    await store.remember("Ada is allergic to peanuts.", importance=1.0, tags=["health"], agent_id=AGENT)
    await store.remember("Ada likes jazz concerts.", importance=0.4, tags=["hobby"], agent_id=AGENT)
    print(f"memories stored: {await store.count(agent_id=AGENT)}")

    for question in ("Where does Ada live?", "Which foods is Ada allergic to?"):
        hits = await store.recall(question, k=2, agent_id=AGENT)
        print(f"recall {question!r}:")
        for hit in hits:
            print(f"  {hit.score:.3f}  {hit.item.content}")

    # Short-term turns (L1) and a context for the next LLM call, within a token budget.
    await store.store_turn(THREAD, "Any plans for tonight?", "There is a jazz gig at 9.", agent_id=AGENT)
    await store.store_turn(THREAD, "Book it, please.", "Done: two tickets.", agent_id=AGENT)
    ctx = await store.retrieve_context(
        THREAD, "What should Ada eat before the jazz gig?", token_budget=512, agent_id=AGENT
    )
    print(f"context: {ctx.total_tokens_used}/{ctx.usable_budget} tokens ({ctx.budget_utilisation:.0%})")
    print(ctx.render())

    # Clean up, so a shared server is left as it was found.
    erased = await store.erase(agent_id=AGENT)
    print(f"erased {erased} memories and turns")


if __name__ == "__main__":
    asyncio.run(main())
