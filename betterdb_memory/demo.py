"""The betterdb-memory demo: one agent's memory, end to end, on a real Valkey Search engine.

Run with ``make demo`` (or ``betterdb-memory demo``). It starts the embedded engine in a
temporary data dir (set ``VALKEY_URL`` to use your own server instead) and embeds with the
offline ONNX model (all-MiniLM-L6-v2). Every number it prints comes from a real call:

1. **engine**: what the library probed and how long start-up took.
2. **facts injected**: ``remember`` with importance, tags, metadata and the date each
   became true (``valid_from``).
3. **conversation**: a scripted agent loop. Before each reply the agent assembles its
   context (``retrieve_context``); after it, the turn is stored (``store_turn``). The
   replies are scripted (no LLM), the memory calls are not.
4. **context under a budget**: the next prompt's memories and turns with tokens per
   part, budget, utilisation and assembly time.
5. **recall, explained**: composite scores split into similarity, recency, importance.
   "Where does Ada live?" answers Berlin: of two statements of one attribute of one
   person, the newer by ``valid_from`` ranks first (same-slot supersession, no subject,
   no LLM). A question with a time in it ("in 2022") searches that window only.
6. **consolidation, facts mode**: a deterministic extractor turns two home-city memories
   into facts; the newer supersedes the older and ``fact_history`` shows both.
7. **metrics**: the ``agent_memory_*`` Prometheus samples these calls produced, read from a
   private registry.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
import uuid
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from .core.context import RetrievedContext
from .core.facts import Fact
from .core.models import MemoryItem
from .embedders.onnx import OnnxEmbedder
from .server import server_url_from_env
from .store import MemoryStore

__all__ = ["main", "run"]

AGENT = "assistant"
THREAD = "ada-chat"
BUDGET = 150
# The threshold is a cosine-distance ceiling (0..2; a hit needs distance <= it). The ONNX
# embedder's calibrated one (0.6, similarity 0.70) admits paraphrases; a context wants
# memories that are related, so this store recalls up to distance 0.9 (similarity 0.55,
# where similarity = 1 - distance / 2).
THRESHOLD = 0.9

# (content, importance, tags, metadata, valid_from): what the agent already knows about Ada,
# each with the date it learned it (when the statement became true: ``valid_from``).
FACTS: tuple[tuple[str, float, list[str], dict[str, str], str], ...] = (
    (
        "Ada lives in Lisbon.",
        0.9,
        ["profile", "home"],
        {"subject": "home city", "as_of": "2021-09-01"},
        "2021-09-01",
    ),
    ("Ada is vegetarian and allergic to peanuts.", 0.9, ["profile", "diet"], {}, "2021-09-01"),
    ("Ada prefers short answers as bullet lists.", 0.7, ["preference"], {}, "2022-03-14"),
    ("Ada's team deploys to production every Thursday afternoon.", 0.4, ["work"], {}, "2023-01-09"),
)

# (user message, scripted reply, memory the agent writes after the turn or None).
CONVERSATION: tuple[tuple[str, str, tuple[str, dict[str, str]] | None], ...] = (
    ("Hi! Can you suggest a vegetarian place for dinner?", "Sure, peanut-free too. Which area?", None),
    (
        "Near home, please. Oh, and I moved to Berlin in May.",
        "Congratulations on the move! Berlin has great vegetarian places.",
        ("Ada moved to Berlin in May 2024.", {"subject": "home city", "as_of": "2024-05-01"}),
    ),
    ("Any idea for Saturday afternoon?", "A walk in Tempelhofer Feld, then coffee in Neukölln.", None),
)

NEXT_MESSAGE = "Find a vegetarian dinner place near my home for Friday."
QUESTIONS = ("Where does Ada live?", "What should Ada not eat?", "What did Ada ask of me in 2022?")


def heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 76 - len(text)))


def extract_home_facts(items: Sequence[MemoryItem]) -> list[Fact]:
    """A deterministic fact extractor (an LLM does this in production): memories that carry a subject."""
    return [
        Fact(subject=i.metadata["subject"], statement=i.content, date=i.metadata["as_of"])
        for i in items
        if "subject" in i.metadata
    ]


async def show_engine(store: MemoryStore, started: float) -> None:
    heading("engine")
    await store.ensure_index()
    caps = store.capabilities
    assert caps is not None  # set by ensure_index
    print(
        f"  {caps.engine} {caps.version_string} | embedder {store.embedder.model_id}"
        f" ({store.embedder.dimensions}-d) | store {store.name!r}"
        f" | distance threshold {store.effective_threshold():.2f}"
        f" | ready in {time.perf_counter() - started:.2f}s"
    )


async def inject_facts(store: MemoryStore) -> None:
    heading("facts injected (remember)")
    for content, importance, tags, metadata, valid_from in FACTS:
        # A statement with a date says when it became true (valid_from), as a user would.
        await store.remember(
            content,
            importance=importance,
            tags=tags,
            metadata=metadata,
            agent_id=AGENT,
            valid_from=valid_from,
        )
        print(f"  since {valid_from}  importance={importance:.1f}  tags={','.join(tags):<16} {content}")


async def converse(store: MemoryStore) -> None:
    heading("conversation (retrieve_context, then store_turn; replies scripted)")
    for user, reply, learned in CONVERSATION:
        ctx = await store.retrieve_context(THREAD, user, token_budget=BUDGET, agent_id=AGENT)
        print(f"  user:      {user}")
        print(f"             [context: memories {len(ctx.memories)}, turns {len(ctx.turns)}, "
              f"{ctx.total_tokens_used} tokens, {ctx.retrieval_ms:.1f} ms]")  # fmt: skip
        print(f"  assistant: {reply}")
        await store.store_turn(THREAD, user, reply, agent_id=AGENT)
        if learned is not None:
            content, metadata = learned
            await store.remember(
                content,
                importance=0.9,
                tags=["profile", "home"],
                metadata=metadata,
                agent_id=AGENT,
                valid_from=metadata.get("as_of"),
            )
            print(f"             [remembered: {content}]")


def print_budget(ctx: RetrievedContext) -> None:
    used = ctx.tokens_used
    rows = (
        ("system reserve", ctx.system_reserve, "left for your system prompt"),
        ("memories", used.memories, f"{len(ctx.memories)} chosen, {ctx.skipped_memories} did not fit"),
        ("turns", used.turns, f"{len(ctx.turns)} chosen, {ctx.skipped_turns} did not fit"),
        ("current turn", used.current_turn, "the new user message"),
    )
    for label, tokens, note in rows:
        print(f"  {label:<15}{tokens:>5} tokens  ({note})")
    print(
        f"  {'used / usable':<15}{ctx.total_tokens_used:>5} / {ctx.usable_budget} of budget {ctx.token_budget}"
        f"  utilisation {ctx.budget_utilisation:.0%}  assembled in {ctx.retrieval_ms:.1f} ms"
    )


async def show_context(store: MemoryStore) -> None:
    heading(f"context for the next message, token_budget={BUDGET}")
    ctx = await store.retrieve_context(THREAD, NEXT_MESSAGE, token_budget=BUDGET, agent_id=AGENT)
    print(f"  next message: {NEXT_MESSAGE}")
    print_budget(ctx)
    print("  --- rendered ---")
    for line in ctx.render().splitlines():
        print(f"  | {line}")


async def show_recall(store: MemoryStore) -> None:
    heading("recall, explained (score = 0.6 sim + 0.25 recency + 0.15 importance)")
    for question in QUESTIONS:
        hits = await store.recall(question, k=3, agent_id=AGENT, explain=True)
        print(f"  Q: {question}")
        content = {hit.item.id: hit.item.content for hit in hits}
        for hit in hits:
            parts = hit.explain
            assert parts is not None  # explain=True
            print(
                f"    {hit.score:.3f} = sim {parts.similarity:.3f} | rec {parts.recency:.3f}"
                f" | imp {parts.importance:.2f}   {hit.item.content}"
            )
            if parts.time_window is not None and hit is hits[0]:
                print(f"          time window understood: {parts.time_window}")
            if parts.superseded_by is not None:
                newer = content.get(parts.superseded_by, parts.superseded_by)
                print(f"          superseded by the newer statement of the same attribute: {newer}")
        if not hits:
            print("    (nothing within the distance threshold)")


async def show_consolidation(store: MemoryStore) -> None:
    heading('consolidation, mode="facts" (newest date wins)')
    for run_no in (1, 2):
        res = await store.consolidate(mode="facts", extract_facts=extract_home_facts, agent_id=AGENT)
        print(
            f"  run {run_no}: candidates={res.candidates} created={len(res.created)}"
            f" superseded={res.superseded} unchanged={res.unchanged} current facts={res.facts}"
        )
    print('  fact_history("home city"), newest first:')
    for rec in await store.fact_history("home city", agent_id=AGENT):
        state = "current   " if rec.current else "superseded"
        until = f"  (valid until {rec.valid_until:%Y-%m-%d})" if rec.valid_until else ""
        print(f"    {state} since {rec.date}: {rec.statement}{until}")
    print(
        "  (recall above answered Berlin with no subject and no LLM: same-slot supersession ranks the\n"
        "   newer statement of one attribute of one person above the older, by valid_from; the fact\n"
        "   history keeps both versions with their validity)"
    )


def show_metrics(registry: CollectorRegistry, store_name: str) -> None:
    heading("Prometheus metrics of this store (agent_memory_*, private registry)")
    zero: set[str] = set()
    for family in registry.collect():
        for sample in family.samples:
            if not sample.name.startswith("agent_memory_") or sample.labels.get("store_name") != store_name:
                continue
            if sample.name.endswith(("_bucket", "_created")):
                continue
            if not sample.value:
                zero.add(family.name)
                continue
            labels = ",".join(f"{k}={v}" for k, v in sample.labels.items() if k != "store_name")
            name = f"{sample.name}{{{labels}}}" if labels else sample.name
            print(f"  {name:<70}{sample.value:g}")
    if zero:
        print(f"  at zero: {', '.join(sorted(n.removeprefix('agent_memory_') for n in zero))}")


async def cleanup(store: MemoryStore) -> None:
    """Leave a shared server as we found it (a temporary one is deleted anyway)."""
    await store.erase(agent_id=AGENT)
    await store.purge_fact_history(agent_id=AGENT)


async def run(url: str | None = None) -> None:
    """Run the scripted demo on ``url``, or on a temporary embedded engine when None."""
    registry = CollectorRegistry()
    with tempfile.TemporaryDirectory(prefix="betterdb-demo-") as data_dir:
        started = time.perf_counter()
        options: dict[str, Any] = {
            "registry": registry,
            "embedder": OnnxEmbedder(),
            "default_threshold": THRESHOLD,
        }
        name = f"demo-{uuid.uuid4().hex[:8]}"  # never collides with a store on a shared server
        store = await MemoryStore.connect(url, name=name, data_dir=data_dir, **options)
        try:
            await show_engine(store, started)
            await inject_facts(store)
            await converse(store)
            await show_context(store)
            await show_recall(store)
            await show_consolidation(store)
            await store.stats()  # refreshes the items gauge
            show_metrics(registry, store.name)
            await cleanup(store)
        finally:
            await store.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    asyncio.run(run(server_url_from_env()))


if __name__ == "__main__":
    main()
