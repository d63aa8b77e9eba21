"""The betterdb-memory demo: an agent's memory on the embedded Valkey Search engine.

Run with ``make demo`` (or ``betterdb-memory demo``). It starts the embedded engine in a temporary data dir
(set VALKEY_URL to use your own server instead), uses the offline ONNX embedder
(all-MiniLM-L6-v2), and shows what the library does, step by step.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time

from betterdb_memory import MemoryStore
from betterdb_memory.server import server_url_from_env


def heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 70 - len(text)))


async def run(url: str | None = None) -> None:
    """Run the scripted demo on ``url``, or on a temporary embedded engine when None."""
    with tempfile.TemporaryDirectory(prefix="betterdb-demo-") as data_dir:
        t0 = time.perf_counter()
        store = await MemoryStore.connect(url, name="demo", data_dir=None if url else data_dir)
        try:
            await store.ensure_index()
            caps = store.capabilities
            assert caps is not None
            heading("engine")
            print(
                f"{caps.engine} {caps.version_string} | embedder {store.embedder.model_id} "
                f"({store.embedder.dimensions}-d) | ready in {time.perf_counter() - t0:.2f}s"
            )

            heading("remember three facts")
            facts = [
                ("The user's name is Ada and she lives in Lisbon.", 0.9, ["profile"]),
                ("Ada prefers answers in bullet points, no longer than five lines.", 0.7, ["preference"]),
                ("Ada's team deploys to production every Thursday afternoon.", 0.5, ["work"]),
            ]
            for content, importance, tags in facts:
                mid = await store.remember(
                    content, importance=importance, tags=tags, agent_id="assistant", thread_id="ada"
                )
                print(f"  {mid[:28]}...  importance={importance:.1f}  {content}")

            heading("recall by meaning")
            for question in ("Where is the user based?", "How should I format my reply?"):
                hits = await store.recall(
                    question, k=2, threshold=0.6, agent_id="assistant", thread_id="ada", explain=True
                )
                print(f"  Q: {question}")
                for hit in hits:
                    parts = hit.explain
                    assert parts is not None
                    print(
                        f"    score={hit.score:.3f} (similarity {parts.similarity:.3f}, recency {parts.recency:.3f},"
                        f" importance {parts.importance:.2f})  {hit.item.content}"
                    )

            heading("stats")
            st = await store.stats()
            print(
                f"  items={st.items} scopes={st.scopes} remembers={st.counters.get('remembers', 0)}"
                f" index_ready={st.index.ready if st.index else None}"
            )
            await store.forget_by_scope(agent_id="assistant", thread_id="ada")
        finally:
            await store.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    asyncio.run(run(server_url_from_env()))


if __name__ == "__main__":
    main()
