"""Calibration of each embedder's ``default_threshold`` on paraphrase / unrelated pairs.

The pairs are memory-style statements (facts, preferences, plans) and a paraphrase
of each, written for this file; the unrelated pairs match each statement with the
paraphrase of a statement on another topic. ``report`` prints the figures quoted
next to each ``DEFAULT_THRESHOLD`` (run with ``-s``); the tests fail if a
threshold stops separating the pairs as well as the comment claims.
"""

from __future__ import annotations

import numpy as np
import pytest

from betterdb_memory.embedders import Embedder, HashingEmbedder, default_threshold_of

PARAPHRASES: list[tuple[str, str]] = [
    ("The user's favourite colour is blue.", "The user said their favorite color is blue."),
    ("I am allergic to peanuts.", "Peanuts give me an allergic reaction."),
    ("My daughter starts school in September.", "In September my daughter begins school."),
    ("We moved to Berlin last year.", "Last year we relocated to Berlin."),
    (
        "The deploy failed because the database migration timed out.",
        "The migration to the database timed out, so the deployment failed.",
    ),
    ("Please send invoices to accounts@example.com.", "Invoices should go to accounts@example.com."),
    ("I prefer tea over coffee in the morning.", "In the mornings I'd rather drink tea than coffee."),
    (
        "The meeting with Anna is moved to Thursday at 3pm.",
        "Anna's meeting has been rescheduled to 3pm on Thursday.",
    ),
    ("My laptop is a ThinkPad X1 running Fedora.", "I use a ThinkPad X1 with Fedora installed."),
    ("The project deadline is the end of March.", "We have to finish the project by the end of March."),
    ("I run five kilometres every Saturday.", "Every Saturday I go for a 5 km run."),
    ("Our cat is called Miso.", "The cat's name is Miso."),
    ("The API rate limit is 100 requests per minute.", "You can make at most 100 API requests each minute."),
    ("I'm vegetarian and don't eat fish either.", "I don't eat meat or fish; I'm vegetarian."),
    ("The production database runs PostgreSQL 16.", "Prod uses PostgreSQL version 16 as its database."),
    ("My flight to Tokyo leaves on the 12th.", "I fly to Tokyo on the 12th."),
    (
        "The customer wants a refund for the broken blender.",
        "A refund was requested by the customer because the blender broke.",
    ),
    ("I speak Spanish and a little Portuguese.", "I can speak Spanish, and some Portuguese too."),
    (
        "The staging server restarts every night at 2am.",
        "Every night at 2am the staging server is restarted.",
    ),
    ("I'd like replies to be short and to the point.", "Keep your answers brief and to the point, please."),
    ("The invoice total was 420 euros.", "It came to 420 euros on the invoice."),
    ("Tests must pass before merging to main.", "Nothing gets merged into main until the tests pass."),
    ("My brother lives in Toronto.", "Toronto is where my brother lives."),
    ("The printer on the third floor is out of toner.", "There's no toner left in the third-floor printer."),
    ("I usually work from home on Fridays.", "On Fridays I mostly work from home."),
    ("The wifi password was changed yesterday.", "Yesterday someone changed the password for the wifi."),
    ("Our team uses Python for the backend.", "The backend our team writes is in Python."),
    ("She is learning to play the violin.", "She has started violin lessons."),
    ("The car needs new tyres before winter.", "Before winter comes, the car has to get new tires."),
    ("The user is in the Central European time zone.", "The user's timezone is CET."),
    ("I can't stand horror movies.", "I really dislike horror films."),
    ("The quarterly report is due next Monday.", "Next Monday is the deadline for the quarterly report."),
    ("The kitchen tap is leaking.", "There is a leak in the kitchen faucet."),
    ("I'm saving money for a house.", "I am putting money aside to buy a home."),
    (
        "The build uses Docker images from our private registry.",
        "Our private registry provides the Docker images the build uses.",
    ),
    ("Remind me to call the dentist tomorrow.", "Tomorrow I need a reminder to phone the dentist."),
    ("用户喜欢喝绿茶。", "用户平时爱喝绿茶。"),
    ("我明天要去北京出差。", "明天我去北京出差。"),
    ("Пользователь живёт в Москве.", "Пользователь сейчас живёт в Москве."),
    ("Я не ем мясо.", "Мясо я не ем."),
]


def _unrelated() -> list[tuple[str, str]]:
    # Statement i against the paraphrase of statement i+7: a different topic, with the
    # same length and style distribution as the positives.
    n = len(PARAPHRASES)
    return [(PARAPHRASES[i][0], PARAPHRASES[(i + 7) % n][1]) for i in range(n)]


UNRELATED = _unrelated()


async def similarities(embedder: Embedder, pairs: list[tuple[str, str]]) -> np.ndarray:
    """Similarity on the store's scale, (1 + cos) / 2, for each pair."""
    left = await embedder.embed([a for a, _ in pairs])
    right = await embedder.embed([b for _, b in pairs])
    cos = np.sum(left * right, axis=1)
    return np.asarray((1.0 + cos) / 2.0)


async def report(embedder: Embedder) -> tuple[np.ndarray, np.ndarray, int]:
    """Print the figures for the threshold comment; return (positives, negatives, correct)."""
    pos = await similarities(embedder, PARAPHRASES)
    neg = await similarities(embedder, UNRELATED)
    threshold = default_threshold_of(embedder)
    assert threshold is not None
    correct = int(np.sum(pos >= threshold) + np.sum(neg < threshold))
    print(
        f"\n{embedder.model_id}: unrelated {neg.min():.3f}-{neg.max():.3f} (mean {neg.mean():.3f}), "
        f"paraphrase {pos.min():.3f}-{pos.max():.3f} (mean {pos.mean():.3f}); "
        f"threshold {threshold} classifies {correct}/{len(pos) + len(neg)}"
    )
    return pos, neg, correct


def test_calibration_set_is_well_formed() -> None:
    """Forty pairs of each kind, and no unrelated pair is accidentally a paraphrase pair."""
    assert len(PARAPHRASES) == len(UNRELATED) == 40
    assert not set(UNRELATED) & set(PARAPHRASES)


async def test_hashing_threshold_separates_word_sharing_pairs() -> None:
    """The hashing threshold keeps every unrelated pair out and misses at most one paraphrase."""
    pos, neg, correct = await report(HashingEmbedder())
    assert correct >= 79
    assert neg.max() < HashingEmbedder.default_threshold
    assert pos.mean() - neg.mean() > 0.1


async def test_onnx_threshold_separates_paraphrases() -> None:
    """The MiniLM threshold separates the pairs as well as the comment next to it says."""
    pytest.importorskip("onnxruntime")
    from betterdb_memory.embedders import OnnxEmbedder

    pos, neg, correct = await report(OnnxEmbedder())
    assert correct >= 80
    assert neg.max() < OnnxEmbedder.default_threshold <= pos.min()
