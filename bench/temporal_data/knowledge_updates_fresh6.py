"""A sixth fresh wording family of the knowledge-update set: round questionslot's held-out check (issue 26).

Written and committed before any change of this round (2026-12-03), measured on the
code as the round found it and once more on the round's final code. Nothing is fitted
or tuned on it and its individual misses are not read; only totals are reported.

Every kind of attribute here is new to the project's data: none is a kind of the
designed-on set, of the five earlier fresh families or of the rule-3 training generator
(``slot_training``) as that stood when this file was written. Exclusive (one value at a
time): dog walker, cloud storage, parking space, allotment plot, bedtime, daily step
goal, piano teacher, coffee machine, citizenship, electric scooter. Many-valued (both
stay true): mountains climbed, musicals seen, fossils found, quilts sewn, sculptures
sold, escape rooms solved. The wordings are new too: reported speech ("According to
...", "Word is that ..."), "lately", a fronted object, "nowadays" at the end, and
questions such as "Who walks ...'s dog?" or "Which scooter does ... ride?".

The shape follows ``knowledge_updates_fresh5``: ``build(seed)`` is deterministic, 240
people by default, two or three exclusive attributes each changing one to four times
between 2012 and 2025, one or two both-current pairs each, surnames unique, first names
shared (name pools of this family's own).
"""

from __future__ import annotations

import random

from .knowledge_updates import Dataset, assemble, pooled_people

__all__ = ["EXCLUSIVE", "MANY", "build", "people"]

FIRST = [
    "Aurelio", "Brigitta", "Casimir", "Delphine", "Eamon", "Fenella", "Gervase", "Henrike", "Ignatius",
    "Jessamy", "Kasimir", "Leocadia", "Mungo", "Noemi", "Oswin", "Perpetua", "Quillon", "Rosalind",
    "Sigmund", "Thomasina", "Urban", "Verity", "Wolfram", "Xanthe", "Ysolde", "Zebedee", "Albertine",
    "Bertram", "Clementine", "Desmond", "Ermengarde", "Fitzroy", "Godiva", "Horatio", "Imogen", "Jolyon",
    "Kerensa", "Lysander", "Morwenna", "Niall",
]  # fmt: skip
_HEADS = ["Ash", "Bram", "Crom", "Dun", "Eld", "Fern", "Gor", "Holl", "Ive", "Kin",
          "Lang", "Moss", "Nor", "Oak", "Pen", "Quar", "Rad", "Stan", "Thorn", "Wend"]  # fmt: skip
_TAILS = ["acre", "by", "combe", "croft", "dale", "field", "ford", "holme", "ley", "mere", "shaw", "ton"]

DOG_WALKERS = ["a student called Priya", "Paws & Co", "the neighbour's teenager", "Waggy Walks",
               "a retired postman, Len", "Happy Tails Collective"]  # fmt: skip
CLOUDS = ["Dropbox", "Google Drive", "iCloud", "OneDrive", "pCloud", "a Nextcloud box at home"]
PARKING = ["bay 14 under the office", "a spot behind the bakery", "space B7 in the residents' garage",
           "the driveway of a rented lock-up", "level 3 of the Quayside car park",
           "a permit bay on Elm Road"]  # fmt: skip
PLOTS = ["plot 9 at Meadow Lane allotments", "plot 31 by the railway", "half a plot at Sandy Hill",
         "plot 4 near the canal", "the corner plot at Greenhill", "plot 22 at the Abbey site"]  # fmt: skip
BEDTIMES = ["10 pm", "half past ten", "11 pm", "midnight", "9:30 pm", "quarter to eleven"]
STEP_GOALS = ["6,000", "7,500", "8,000", "10,000", "12,000", "15,000"]
PIANO_TEACHERS = ["Mr Halvorsen", "a conservatoire student, Mei", "Madame Roux", "the church organist",
                  "an online tutor from Vienna", "Mrs Abernethy"]  # fmt: skip
COFFEE_MACHINES = ["a Moka pot", "a Nespresso Vertuo", "a Gaggia Classic", "a Sage Barista Express",
                   "an AeroPress", "a De'Longhi bean-to-cup"]  # fmt: skip
CITIZENSHIPS = ["British", "Irish", "Canadian", "German", "New Zealand", "Portuguese"]
SCOOTERS = ["a Xiaomi Pro 2", "a Segway Ninebot", "a Pure Air", "an Apollo City", "a Unagi Model One",
            "a Kaabo Mantis"]  # fmt: skip

# Exclusive attributes: (values, templates, present-tense questions), wording of this family only.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "dog_walker": (
        DOG_WALKERS,
        (
            "{n}'s dog gets walked by {v}.",
            "According to {n}, {v} takes the dog out at lunchtime.",
            "{n} hired {v} to walk the dog.",
            "The dog walker {n} pays is {v}.",
        ),
        ("Who walks {n}'s dog?", "Who is {n}'s dog walker?"),
    ),
    "cloud": (
        CLOUDS,
        (
            "{n} backs up every photo to {v}.",
            "{n}'s files live on {v} nowadays.",
            "Word is that {n} moved all documents to {v}.",
            "{n} stores work files in {v}.",
        ),
        ("Where does {n} keep files online?", "Which cloud storage does {n} use?"),
    ),
    "parking": (
        PARKING,
        (
            "{n} parks in {v}.",
            "{n}'s parking space is {v}.",
            "{n} lately leaves the car in {v}.",
            "{n} rents {v} for the car.",
        ),
        ("Where does {n} park?", "Which parking space does {n} have?"),
    ),
    "allotment": (
        PLOTS,
        (
            "{n} grows vegetables on {v}.",
            "{n} took on {v}.",
            "{n}'s allotment is {v}.",
            "Beans and courgettes: {n} tends them on {v}.",
        ),
        ("Which allotment plot does {n} have?", "Where is {n}'s allotment?"),
    ),
    "bedtime": (
        BEDTIMES,
        (
            "{n} goes to bed at {v}.",
            "{n} is usually asleep by {v}.",
            "Lights out for {n} is {v} nowadays.",
            "{n} turns in at {v}.",
        ),
        ("What time does {n} go to bed?", "When does {n} go to sleep?"),
    ),
    "step_goal": (
        STEP_GOALS,
        (
            "{n}'s daily step goal is {v}.",
            "{n} aims for {v} steps a day.",
            "{n} set the fitness tracker to {v} steps.",
            "Every day {n} tries to walk {v} steps.",
        ),
        ("How many steps a day does {n} aim for?", "What is {n}'s step goal?"),
    ),
    "piano_teacher": (
        PIANO_TEACHERS,
        (
            "{n} takes piano lessons with {v}.",
            "{n}'s piano teacher is {v}.",
            "{n} lately studies piano under {v}.",
            "According to {n}, {v} teaches the Thursday piano lesson.",
        ),
        ("Who teaches {n} piano?", "Who is {n}'s piano teacher?"),
    ),
    "coffee_machine": (
        COFFEE_MACHINES,
        (
            "{n} makes coffee with {v}.",
            "{n}'s kitchen has {v} for coffee.",
            "{n} replaced the coffee maker with {v}.",
            "The morning espresso {n} drinks comes from {v}.",
        ),
        ("What does {n} make coffee with?", "Which coffee machine does {n} have?"),
    ),
    "citizenship": (
        CITIZENSHIPS,
        (
            "{n} holds {v} citizenship.",
            "{n} is a {v} citizen.",
            "{n} naturalised and is {v} now.",
            "{n}'s passport is {v}.",
        ),
        ("What nationality is {n}?", "Which citizenship does {n} hold?"),
    ),
    "scooter": (
        SCOOTERS,
        (
            "{n} rides {v} to work.",
            "{n} zips around town on {v}.",
            "{n}'s e-scooter is {v}.",
            "{n} bought {v} as an electric scooter.",
        ),
        ("Which scooter does {n} ride?", "What electric scooter does {n} have?"),
    ),
}

# Many-valued attributes: values, templates, a question (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "mountains": (
        ["Ben Nevis", "Mont Blanc", "Kilimanjaro", "Snowdon", "the Matterhorn", "Mount Toubkal"],
        ("{n} has climbed {v}.", "{n} reached the summit of {v}.", "{n} once hiked up {v}."),
        "Which mountains has {n} climbed?",
    ),
    "musicals": (
        ["Hamilton", "Les Miserables", "Cats", "Wicked", "The Lion King", "Chicago"],
        ("{n} has seen {v} on stage.", "{n} watched {v} in the West End.", "{n} loved seeing {v}."),
        "Which musicals has {n} seen?",
    ),
    "fossils": (
        ["an ammonite", "a trilobite", "a shark tooth", "a crinoid stem", "a belemnite"],
        ("{n} found {v} on the beach.", "{n} dug up {v}.", "{n} keeps {v} found on a fossil hunt."),
        "What fossils has {n} found?",
    ),
    "quilts": (
        [
            "a patchwork quilt for a niece",
            "a log-cabin quilt",
            "a baby quilt",
            "a star quilt",
            "a wall quilt",
        ],
        ("{n} sewed {v}.", "{n} finished {v} last winter.", "{n} has made {v}."),
        "What quilts has {n} made?",
    ),
    "sculptures": (
        ["a bronze hare", "a marble bust", "a driftwood heron", "a clay horse", "a steel spiral"],
        ("{n} sold {v} at the gallery.", "{n} made and sold {v}.", "A collector bought {n}'s {v}."),
        "Which sculptures has {n} sold?",
    ),
    "escape_rooms": (
        ["the Pharaoh's Tomb", "Lab 13", "the Haunted Manor", "the Bank Heist", "the Submarine"],
        (
            "{n} solved {v} escape room.",
            "{n}'s team beat {v} escape room.",
            "{n} got out of {v} escape room.",
        ),
        "Which escape rooms has {n} solved?",
    ),
}


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names of this family's own pools: surnames unique, first names repeat."""
    return pooled_people(rng, FIRST, _HEADS, _TAILS, entities)


def build(seed: int = 6262, entities: int = 240) -> Dataset:
    """The sixth fresh set: deterministic for a seed. ``Statement.family`` is 7 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="q", family=7)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
