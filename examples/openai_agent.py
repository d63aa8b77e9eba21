"""An agent loop with OpenAI chat completions and betterdb-memory.

Each user message: assemble a context under a token budget (``retrieve_context``:
relevant long-term memories plus recent turns), send it to the model, store the turn
(``store_turn``). After the first session, an OpenAI fact extractor mines the turns
for durable facts (``extract_memories``); a second session on a new thread then
answers from those long-term memories.

Needs ``OPENAI_API_KEY`` (and the ``openai`` extra); without it the script says so
and exits 0. ``OPENAI_MODEL`` picks the chat model (default ``gpt-4o-mini``) and
``OPENAI_BASE_URL`` any OpenAI-compatible endpoint. Embeddings stay local (the ONNX
model); pass ``embedder=OpenAIEmbedder(...)`` to ``connect`` to use OpenAI's instead.

Run: ``OPENAI_API_KEY=... python examples/openai_agent.py`` (``VALKEY_URL`` for your
server, otherwise the embedded engine in a temporary data dir).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from typing import Any

from betterdb_memory import MemoryStore, OpenAIFactExtractor, RetrievedContext

AGENT = "openai-agent"
SESSIONS = {
    "session-1": [
        "Hi! I'm Ada. I'm vegetarian and I just moved to Berlin.",
        "Suggest a dinner idea for tonight.",
    ],
    "session-2": ["Which city do I live in, and is there anything I don't eat?"],
}
SYSTEM = "You are a concise assistant. Use what you remember about the user when it helps."
# The threshold is a cosine-distance ceiling (0..2; a hit needs distance <= it). The ONNX
# embedder's calibrated one (0.6, similarity 0.70) admits paraphrases; a first-person
# question ("where do I live?") sits further from a stored fact ("The user lives in
# Berlin"), so context recall goes up to distance 0.9 (similarity 1 - 0.9 / 2 = 0.55).
THRESHOLD = 0.9


def prompt(ctx: RetrievedContext, user: str) -> list[dict[str, str]]:
    """Memories into the system message; recent turns replayed as chat messages."""
    system = SYSTEM
    if ctx.memories:
        system += "\n\nWhat you remember:\n" + "\n".join(f"- {h.item.content}" for h in ctx.memories)
    messages = [{"role": "system", "content": system}]
    for turn in ctx.turns:
        messages.append({"role": "user", "content": turn.user_message})
        messages.append({"role": "assistant", "content": turn.assistant_message})
    messages.append({"role": "user", "content": user})
    return messages


async def chat_turn(store: MemoryStore, llm: Any, model: str, thread: str, user: str) -> None:
    ctx = await store.retrieve_context(thread, user, token_budget=2000, agent_id=AGENT)
    response = await llm.chat.completions.create(model=model, messages=prompt(ctx, user))
    reply = response.choices[0].message.content or ""
    await store.store_turn(thread, user, reply, agent_id=AGENT)
    print(f"user:      {user}")
    print(
        f"           [context: {len(ctx.memories)} memories, {len(ctx.turns)} turns, {ctx.total_tokens_used} tokens]"
    )
    print(f"assistant: {reply}\n")


async def run(llm: Any, model: str) -> None:
    url = os.environ.get("VALKEY_URL") or None  # None: the embedded engine
    extractor = OpenAIFactExtractor(model=model, client=llm)  # shares our client; we close it
    with tempfile.TemporaryDirectory(prefix="betterdb-openai-") as data_dir:
        store = await MemoryStore.connect(
            url,
            name="example-openai-agent",
            data_dir=data_dir,
            fact_extractor=extractor,
            default_threshold=THRESHOLD,
        )
        try:
            await store.erase(agent_id=AGENT)  # start clean if an earlier run was interrupted
            for thread, messages in SESSIONS.items():
                print(f"== {thread}")
                for user in messages:
                    await chat_turn(store, llm, model, thread, user)
                if thread == "session-1":
                    ids = await store.extract_memories(thread, agent_id=AGENT)
                    facts = await store.get_many(ids)
                    print("long-term memories extracted from session-1:")
                    for item in facts:
                        if item is not None:
                            print(
                                f"  - {item.content}  (tags {', '.join(item.tags) or '-'}, {item.sensitivity})"
                            )
                    print()
            await store.erase(agent_id=AGENT)
        finally:
            await store.close()


async def main() -> int:
    if not os.environ.get("OPENAI_API_KEY"):
        print("OPENAI_API_KEY is not set: skipping the OpenAI agent example (nothing was run).")
        return 0
    try:
        from openai import AsyncOpenAI
    except ImportError:
        print("the openai package is missing: pip install 'betterdb-memory[openai]'", file=sys.stderr)
        return 2
    model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    llm = AsyncOpenAI()  # reads OPENAI_API_KEY and OPENAI_BASE_URL
    try:
        await run(llm, model)
    finally:
        await llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
