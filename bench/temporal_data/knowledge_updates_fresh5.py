"""A fifth fresh wording family of the knowledge-update set: round kindcv's held-out check (issue 26).

Written and committed before any change of round kindcv, measured on the code as the
round found it, and measured exactly once more on the round's final code. Nothing is
fitted or tuned on it and its individual misses are not read; only totals are reported.

Every kind of attribute here is new to the project's data: none is a kind of the
designed-on set, of the four earlier fresh families or of the rule-3 training generator
(``slot_training``) as that stood when this file was written. Exclusive (one value at a
time): pharmacy, childminder, pension provider, shoe size, chess rating, boat,
coworking space, publisher, choir voice part, wake-up time. Many-valued (both stay
true): patents, bylines (publications written for), boards sat on, dances, birds
spotted, guest lectures. The wordings are new too: passives, a leading "As of now",
"Since ...", a cleft ("It is ... that"), "these days" in the middle, appositives, and
questions such as "Who minds ...'s children?" or "What's ...'s shoe size?".

The shape follows ``knowledge_updates_fresh4``: ``build(seed)`` is deterministic, 240
people by default, two or three exclusive attributes each changing one to four times
between 2012 and 2025, one or two both-current pairs each, surnames unique, first names
shared (name pools of this family's own).
"""

from __future__ import annotations

import random

from .knowledge_updates import Dataset, assemble, pooled_people

__all__ = ["EXCLUSIVE", "MANY", "build", "people"]

FIRST = [
    "Anouk", "Bastiaan", "Cosima", "Dagfinn", "Eulalia", "Florin", "Gwendolyn", "Hamish", "Ilse", "Joaquin",
    "Katarina", "Leopold", "Marisol", "Nikolai", "Ottilie", "Pieter", "Romilly", "Sebastiano", "Tamsin",
    "Ulrich", "Valeska", "Wilhelmina", "Xavier", "Yolanda", "Zeno", "Ambrose", "Beatrix", "Cyprian",
    "Dagny", "Evander", "Fiorella", "Gideon", "Hester", "Isidore", "Juniper", "Konstantin", "Lucasta",
    "Maximilian", "Nerys", "Orlando",
]  # fmt: skip
_HEADS = ["Bel", "Cal", "Dray", "Ember", "Fal", "Glen", "Hart", "Inch", "Jar", "Kel",
          "Lark", "Mar", "Nether", "Orr", "Pem", "Rook", "Sel", "Tarr", "Ul", "Vane"]  # fmt: skip
_TAILS = [
    "bridge",
    "brook",
    "cott",
    "don",
    "grave",
    "hurst",
    "more",
    "port",
    "stead",
    "thwaite",
    "wick",
    "wood",
]

PHARMACIES = ["Boots on the high street", "Lloyds Pharmacy", "a family chemist called Patel's",
              "the hospital pharmacy", "Rowlands", "an online pharmacy, Pharmly"]  # fmt: skip
CHILDMINDERS = ["a nanny named Rosa", "Little Acorns nursery", "Mrs Okafor next door", "an au pair from Lyon",
                "the after-school club", "grandma Edie"]  # fmt: skip
PENSIONS = ["Aviva", "Legal & General", "Scottish Widows", "Nest", "Royal London", "Standard Life"]
SHOE_SIZES = ["38", "39", "40", "41", "42", "43", "44", "45"]
CHESS_RATINGS = ["1420", "1580", "1655", "1730", "1810", "1890", "1975", "2040"]
BOATS = ["a wooden dinghy", "a narrowboat called Willow", "a 30-foot sloop", "a canoe", "a motor launch",
         "a catamaran named Petrel"]  # fmt: skip
COWORKING = ["WeWork Moorgate", "The Hive", "Second Home", "a desk at Huckletree", "Spaces on Canal Street",
             "the library's study hub"]  # fmt: skip
PUBLISHERS = ["Faber", "Penguin Random House", "a small press, Inkwell Books", "HarperCollins", "Bloomsbury",
              "Granta"]  # fmt: skip
VOICES = ["soprano", "alto", "tenor", "bass", "mezzo-soprano", "baritone"]
WAKE_TIMES = ["5 am", "6 am", "half past six", "7 am", "8 am", "nine"]

# Exclusive attributes: (values, templates, present-tense questions), wording of this family only.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "pharmacy": (
        PHARMACIES,
        (
            "{n} picks up prescriptions from {v}.",
            "The pharmacy {n} relies on is {v}.",
            "{n} switched pharmacies and now uses {v}.",
            "Prescriptions for {n} are filled at {v}.",
        ),
        ("Which pharmacy does {n} use?", "Where does {n} get prescriptions filled?"),
    ),
    "childminder": (
        CHILDMINDERS,
        (
            "{n}'s children are looked after by {v}.",
            "While {n} is at work, the kids stay with {v}.",
            "{n} arranged childcare with {v}.",
            "It is {v} that minds {n}'s little ones.",
        ),
        ("Who minds {n}'s children?", "Who does {n}'s childcare?"),
    ),
    "pension": (
        PENSIONS,
        (
            "{n} pays into a pension with {v}.",
            "{n}'s retirement savings sit with {v}.",
            "{n} transferred the pension pot to {v}.",
            "The pension {n} contributes to is run by {v}.",
        ),
        ("Who is {n}'s pension with?", "Which pension provider does {n} have?"),
    ),
    "shoe_size": (
        SHOE_SIZES,
        (
            "{n} wears size {v} shoes.",
            "{n}'s feet are a size {v}.",
            "{n} takes a {v} in shoes.",
            "As of now, {n} buys shoes in size {v}.",
        ),
        ("What's {n}'s shoe size?", "What size shoes does {n} wear?"),
    ),
    "chess_rating": (
        CHESS_RATINGS,
        (
            "{n}'s chess rating is {v}.",
            "{n} is rated {v} at chess.",
            "After the last tournament, {n}'s Elo stands at {v}.",
            "{n} reached a chess rating of {v}.",
        ),
        ("What is {n}'s chess rating?", "How strong is {n} at chess, by rating?"),
    ),
    "boat": (
        BOATS,
        (
            "{n} owns {v}.",
            "{n} sails {v} on weekends.",
            "Moored at the marina is {n}'s boat, {v}.",
            "{n} sold the old boat and bought {v}.",
        ),
        ("What boat does {n} have?", "What kind of boat does {n} own?"),
    ),
    "coworking": (
        COWORKING,
        (
            "{n} works remotely from {v}.",
            "{n} rents a hot desk at {v}.",
            "{n}'s coworking space is {v}.",
            "Since giving up the home office, {n} works out of {v}.",
        ),
        ("Where does {n} work from?", "Which coworking space does {n} use?"),
    ),
    "publisher": (
        PUBLISHERS,
        (
            "{n}'s novels are published by {v}.",
            "{n} signed a book deal with {v}.",
            "{n}'s publisher is {v}.",
            "{n}, a novelist, is with {v} these days.",
        ),
        ("Who publishes {n}'s books?", "Who is {n}'s publisher?"),
    ),
    "voice": (
        VOICES,
        (
            "{n} sings {v} in the choir.",
            "In the community choir, {n} is a {v}.",
            "{n} moved to the {v} section.",
            "{n}'s voice part is {v}.",
        ),
        ("What part does {n} sing in the choir?", "Which voice does {n} sing?"),
    ),
    "wake_time": (
        WAKE_TIMES,
        (
            "{n} gets up at {v}.",
            "{n}'s alarm goes off at {v}.",
            "{n} these days wakes at {v}.",
            "{n} starts the day at {v}.",
        ),
        ("What time does {n} get up?", "When does {n} wake up?"),
    ),
}

# Many-valued attributes: values, templates, a question (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "patents": (
        [
            "a water filter",
            "a folding bicycle lock",
            "a solar window blind",
            "a hearing-aid battery",
            "a seed-planting drone",
        ],
        ("{n} holds a patent on {v}.", "{n} was granted a patent for {v}.", "{n} is the inventor of {v}."),
        "What has {n} patented?",
    ),
    "bylines": (
        ["The Guardian", "Wired", "The Economist", "National Geographic", "the New Yorker"],
        ("{n} writes for {v}.", "{n} has a byline in {v}.", "{n} contributes articles to {v}."),
        "Which publications does {n} write for?",
    ),
    "boards": (
        ["a hospital trust", "a rugby club", "a housing charity", "a school", "an arts festival"],
        ("{n} sits on the board of {v}.", "{n} is a trustee of {v}.", "{n} joined the board of {v}."),
        "Which boards is {n} on?",
    ),
    "dances": (
        ["the tango", "salsa", "the waltz", "flamenco", "swing", "the foxtrot"],
        ("{n} can dance {v}.", "{n} learned {v} at evening lessons.", "{n} dances {v} well."),
        "What dances does {n} know?",
    ),
    "birds": (
        ["a kingfisher", "a golden eagle", "a hoopoe", "a puffin", "a bittern", "a red kite"],
        ("{n} has spotted {v}.", "{n} ticked off {v} on a birding trip.", "{n} photographed {v}."),
        "Which birds has {n} seen?",
    ),
    "lectures": (
        ["Oxford", "MIT", "the Sorbonne", "ETH Zurich", "the University of Tokyo"],
        ("{n} gave a guest lecture at {v}.", "{n} was invited to speak at {v}.", "{n} has lectured at {v}."),
        "Where has {n} given guest lectures?",
    ),
}


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names of this family's own pools: surnames unique, first names repeat."""
    return pooled_people(rng, FIRST, _HEADS, _TAILS, entities)


def build(seed: int = 5151, entities: int = 240) -> Dataset:
    """The fifth fresh set: deterministic for a seed. ``Statement.family`` is 6 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="m", family=6)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
