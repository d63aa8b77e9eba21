"""A seventh fresh wording family of the knowledge-update set: round questionform's held-out check (issue 26).

Written and committed before any change of this round (2026-12-03, evening), measured on
the code as the round found it and once more on the round's final code. Nothing is
fitted or tuned on it and its individual misses are not read; only totals are reported.

Every kind of attribute here but one is new to the project's data: none is a kind of
the designed-on set or of the six earlier fresh families, and only "vegetables grown"
is near a kind of the rule-3 training generator (``slot_training``'s round-1 "plant",
"grows tomatoes", which only the many-valued veto is fitted on; noticed after the first
measurement, the data left as committed). Exclusive (one value at a
time): podiatrist, morning train, window cleaner, mobile tariff, office desk, local pub,
financial adviser, boiler service, milk delivery, rowing seat. Many-valued (both stay
true): climbing partners, mentees, venues played, things knitted, vegetables grown,
bridges photographed. Unlike the sixth family, most many-valued questions name no
plural noun ("Who does ... go climbing with?", "Where does ... perform?", "What does
... knit?"), so a rule that reads a question saying nothing of number as asking one
value is tested for false supersession here. The wordings are new too: cleft sentences
("It is ... who ..."), a fronted time ("Most mornings ..."), "these days" in the middle.

The shape follows ``knowledge_updates_fresh6``: ``build(seed)`` is deterministic, 240
people by default, two or three exclusive attributes each changing one to four times
between 2012 and 2025, one or two both-current pairs each, surnames unique, first names
shared (name pools of this family's own).
"""

from __future__ import annotations

import random

from .knowledge_updates import Dataset, assemble, pooled_people

__all__ = ["EXCLUSIVE", "MANY", "build", "people"]

FIRST = [
    "Adair", "Blodwen", "Cosmo", "Dagny", "Ewart", "Florian", "Ginevra", "Hamish", "Isolde", "Jerome",
    "Kestrel", "Lavinia", "Magnus", "Nerys", "Octavia", "Piran", "Quenby", "Ruairi", "Saoirse", "Tobiah",
    "Ulrika", "Vesna", "Wystan", "Xavier", "Yolande", "Zephyr", "Anselm", "Bettina", "Cedric", "Dorcas",
    "Evander", "Fionnuala", "Gideon", "Hermione", "Ivo", "Juniper", "Kenelm", "Lucasta", "Merrick", "Nella",
]  # fmt: skip
_HEADS = ["Ald", "Bex", "Carr", "Dray", "Elm", "Fell", "Glen", "Hart", "Ing", "Kell",
          "Lyn", "Marr", "Ness", "Ore", "Pyke", "Rook", "Sker", "Tarn", "Wyke", "Yarr"]  # fmt: skip
_TAILS = [
    "bridge",
    "bury",
    "castle",
    "cote",
    "den",
    "hurst",
    "ing",
    "lock",
    "minster",
    "ridge",
    "stead",
    "wick",
]

PODIATRISTS = ["Ms Okafor at the Foot Clinic", "a mobile podiatrist, Dev", "Dr Lindqvist",
               "the chiropody team at St Mary's", "Sole Solutions on King Street", "Mr Pettifer"]  # fmt: skip
TRAINS = ["the 7:12 from Didcot", "the 6:48 stopping service", "the 8:05 fast train", "the 7:40 to Paddington",
          "the first Elizabeth line train", "the 6:55 from Tonbridge"]  # fmt: skip
WINDOW_CLEANERS = ["Crystal Clear Ltd", "a lad called Robbie", "Squeegee Sam", "the Brightpane team",
                   "Mr Doherty with his ladder", "ClearView Services"]  # fmt: skip
TARIFFS = ["a £12 SIM-only plan", "unlimited data for £25 a month", "a pay-as-you-go bundle",
           "a 5 GB plan at £8", "a family plan shared with a sister", "a £40 contract with a new handset"]  # fmt: skip
DESKS = ["desk 4C by the window", "a hot desk on the second floor", "the corner desk near the kitchen",
         "desk 12 in the quiet zone", "a standing desk by the lifts", "bench B in the open-plan area"]  # fmt: skip
PUBS = ["the Red Lion", "the Crown and Anchor", "the Fox and Hounds", "the Old Bell", "the Ship Inn",
        "the Dog and Duck"]  # fmt: skip
ADVISERS = ["a woman called Helen Marsh", "Brightwater Wealth", "an independent adviser, Tunde",
            "the bank's own planner", "Morland & Price", "a retired actuary, Mr Gale"]  # fmt: skip
BOILER_FIRMS = ["HeatRight", "British Gas", "a local plumber, Gareth", "Warmfix Heating", "Octopus's engineers",
                "Hotspur Boilers"]  # fmt: skip
MILKMEN = ["the Modern Milkman", "Ted from Hillside Dairy", "Milk & More", "the Lane End farm van",
           "a co-op round", "Parkside Creamery"]  # fmt: skip
SEATS = ["bow", "stroke", "seat three", "seat five", "seat six", "the cox's seat"]

# Exclusive attributes: (values, templates, present-tense questions), wording of this family only.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "podiatrist": (
        PODIATRISTS,
        (
            "{n} sees {v} about a bunion.",
            "It is {v} who treats {n}'s feet.",
            "{n}'s podiatrist these days is {v}.",
            "{n} books foot appointments with {v}.",
        ),
        ("Who looks after {n}'s feet?", "Who is {n}'s podiatrist?"),
    ),
    "train": (
        TRAINS,
        (
            "{n} catches {v}.",
            "Most mornings {n} is on {v}.",
            "{n} commutes into town on {v}.",
            "{n} switched to {v} into the city.",
        ),
        ("Which train does {n} catch?", "What train does {n} take in the morning?"),
    ),
    "window_cleaner": (
        WINDOW_CLEANERS,
        (
            "{n}'s windows are cleaned by {v}.",
            "{n} pays {v} to do the windows.",
            "It is {v} who washes {n}'s windows.",
            "{n} has {v} round monthly for the windows.",
        ),
        ("Who cleans {n}'s windows?", "Who is {n}'s window cleaner?"),
    ),
    "tariff": (
        TARIFFS,
        (
            "{n} is on {v}.",
            "{n}'s phone plan is {v}.",
            "{n} signed up for {v}.",
            "For the mobile, {n} these days pays for {v}.",
        ),
        ("How much does {n} pay for their phone each month?", "Which mobile tariff is {n} on?"),
    ),
    "desk": (
        DESKS,
        (
            "{n} works at {v}.",
            "{n}'s desk is {v}.",
            "At the office {n} sits at {v}.",
            "{n} was given {v} in the office.",
        ),
        ("Where does {n} sit at the office?", "Which desk does {n} use at work?"),
    ),
    "local_pub": (
        PUBS,
        (
            "{n}'s local is {v}.",
            "{n} drinks at {v} on Fridays.",
            "It is {v} where {n} meets friends for a pint.",
            "{n} these days prefers {v} for a drink.",
        ),
        ("Where does {n} go for a pint?", "What is {n}'s local pub?"),
    ),
    "adviser": (
        ADVISERS,
        (
            "{n} takes money advice from {v}.",
            "{n}'s financial adviser is {v}.",
            "It is {v} who manages {n}'s investments.",
            "{n} hired {v} to plan the savings.",
        ),
        ("Who advises {n} on money?", "Who is {n}'s financial adviser?"),
    ),
    "boiler": (
        BOILER_FIRMS,
        (
            "{n}'s boiler is serviced by {v}.",
            "{n} has a boiler cover plan with {v}.",
            "Every autumn {v} services {n}'s boiler.",
            "{n} calls {v} when the heating breaks.",
        ),
        ("Who services {n}'s boiler?", "Which company looks after {n}'s boiler?"),
    ),
    "milk": (
        MILKMEN,
        (
            "{n} gets milk delivered by {v}.",
            "{n}'s doorstep milk comes from {v}.",
            "Most mornings {v} leaves two pints for {n}.",
            "{n} ordered a milk round from {v}.",
        ),
        ("Who delivers {n}'s milk?", "Who brings {n} milk?"),
    ),
    "rowing_seat": (
        SEATS,
        (
            "{n} rows at {v} in the club eight.",
            "In the boat {n} sits at {v}.",
            "{n}'s seat in the eight is {v}.",
            "The coach put {n} at {v}.",
        ),
        ("Where does {n} sit in the boat?", "Which seat does {n} row in?"),
    ),
}

# Many-valued attributes: values, templates, a question (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "climbing_partners": (
        ["Ravi", "a colleague, Maud", "the Thompson twins", "an old school friend, Jo", "Keiko"],
        ("{n} goes climbing with {v}.", "{n} bouldered with {v} at the wall.", "{n} belays for {v}."),
        "Who does {n} go climbing with?",
    ),
    "mentees": (
        [
            "a graduate, Amir",
            "two apprentices",
            "a new nurse, Bea",
            "a junior designer, Ola",
            "a student, Finn",
        ],
        ("{n} mentors {v}.", "{n} meets {v} every fortnight as a mentor.", "{n} coaches {v} at work."),
        "Who does {n} mentor?",
    ),
    "venues": (
        ["the Jazz Cellar", "the town hall", "a pub in Camden", "the summer festival", "the cathedral"],
        ("{n} plays gigs at {v}.", "{n} performs at {v}.", "{n}'s band has a slot at {v}."),
        "Where does {n} perform?",
    ),
    "knitting": (
        ["scarves", "tea cosies", "baby blankets", "socks", "jumpers for the dog"],
        ("{n} knits {v}.", "{n} knitted {v} for the fair.", "{n} makes {v} on the needles."),
        "What does {n} knit?",
    ),
    "vegetables": (
        ["tomatoes", "runner beans", "courgettes", "leeks", "purple carrots"],
        ("{n} grows {v}.", "{n} planted {v} this spring.", "{n} harvests {v} from the garden."),
        "What does {n} grow in the garden?",
    ),
    "bridges": (
        [
            "the Forth Bridge",
            "Tower Bridge",
            "the Golden Gate",
            "the Clifton Suspension Bridge",
            "the Millau Viaduct",
        ],
        ("{n} photographed {v}.", "{n} took pictures of {v}.", "{n} has shot {v} at dusk."),
        "Which bridges has {n} photographed?",
    ),
}


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names of this family's own pools: surnames unique, first names repeat."""
    return pooled_people(rng, FIRST, _HEADS, _TAILS, entities)


def build(seed: int = 7373, entities: int = 240) -> Dataset:
    """The seventh fresh set: deterministic for a seed. ``Statement.family`` is 8 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="r", family=8)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
