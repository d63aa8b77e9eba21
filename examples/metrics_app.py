"""A tiny app for docker/compose.yaml: a store on VALKEY_URL with metrics on :9400.

Every few seconds it remembers and recalls something, so Prometheus and BetterDB
Monitor have live numbers to show.
"""

from __future__ import annotations

import asyncio
import os
import random

from prometheus_client import start_http_server

from betterdb_memory import MemoryStore


async def main() -> None:
    start_http_server(int(os.environ.get("METRICS_PORT", "9400")))
    store = await MemoryStore.connect(
        os.environ.get("VALKEY_URL", "valkey://localhost:6379"),
        # The library's default store name unless told otherwise (docker/compose.yaml's ACL
        # user may touch only the keys of the name it sets here).
        name=os.environ.get("BETTERDB_MEMORY_NAME", "betterdb_ac"),
        dedup=True,  # the same three facts again and again: reinforce them, do not write twins
    )
    facts = ["The user likes tea.", "The user lives in Lisbon.", "Deploys happen on Thursdays."]
    try:
        while True:
            await store.remember(random.choice(facts), thread_id="demo")
            await store.recall("what does the user drink?", thread_id="demo")
            await asyncio.sleep(5)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
