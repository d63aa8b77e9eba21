"""An eighth fresh wording family: a diagnostic of questions that say nothing of number (issue 26).

Not a held-out check: written (2026-12-03, evening, round questionform) to study false
supersession where a question names no asked noun, and free to be read miss by miss
(the seventh family, which measures the same thing, stays clean). Every kind here is new
to the project's data: none is a kind of the designed-on set or of the seven earlier
fresh families; "things written" is near the training generator's "songs" and "poems"
(``slot_training``, round 3), the rest are not kinds of it. Exclusive (one value at a time), asked with no noun: home heating,
hob, caravan storage, coffee beans supplier, ironing, mooring, hedge cutting, garage for
the car's MOT, reading glasses' strength, the route to school. Many-valued (both stay
true), asked with no noun too: places cycled, things sung, people babysat for, things
painted, things written, things sold at the market.

The shape follows ``knowledge_updates_fresh7``: ``build(seed)`` is deterministic, 240
people by default, two or three exclusive attributes each changing one to four times
between 2012 and 2025, one or two both-current pairs each, surnames unique, first names
shared (name pools of this family's own).
"""

from __future__ import annotations

import random

from .knowledge_updates import Dataset, assemble, pooled_people

__all__ = ["EXCLUSIVE", "MANY", "build", "people"]

FIRST = [
    "Agatha", "Barnaby", "Cordelia", "Dashiell", "Elspeth", "Fabian", "Gwendolyn", "Hector", "Iona",
    "Jasper", "Katrin", "Leopold", "Mabel", "Nikolai", "Ottilie", "Peregrine", "Rhiannon", "Silas",
    "Tabitha", "Ulysses", "Vivienne", "Winifred", "Yannick", "Zinnia", "Ambrose", "Beatrix", "Crispin",
    "Drusilla", "Emrys", "Flavia", "Gulliver", "Honora", "Isidore", "Jemima", "Kit", "Lettice",
]  # fmt: skip
_HEADS = ["Bal", "Cal", "Dor", "Esk", "Fal", "Grim", "Hal", "Ild", "Jar", "Kir",
          "Lod", "Mal", "Nid", "Orm", "Pol", "Ros", "Sol", "Tam", "Ulv", "Wen"]  # fmt: skip
_TAILS = [
    "garth",
    "haven",
    "hithe",
    "low",
    "more",
    "port",
    "rigg",
    "sett",
    "thwaite",
    "vale",
    "water",
    "worth",
]

HEATING = ["a gas boiler", "an air-source heat pump", "a wood-burning stove", "night storage heaters",
           "an oil-fired boiler", "underfloor electric heating"]  # fmt: skip
HOBS = ["a gas hob", "an induction hob", "an Aga", "a ceramic hob", "a camping stove", "a range cooker"]
CARAVAN_SITES = ["a farm near Ludlow", "the storage compound at Hatton", "a neighbour's paddock",
                 "Secure Store on the bypass", "a barn outside Dorking", "the club site at Tewkesbury"]  # fmt: skip
BEANS = ["a roastery in Hackney", "Union Coffee by post", "the Italian deli", "a subscription from Pact",
         "the farmers' market stall", "a Kenyan cooperative online"]  # fmt: skip
IRONING = ["a laundry service, Pressed", "Mrs Akhtar down the road", "the dry cleaner on Station Road",
           "a teenager from next door", "Ironing Angels", "a housekeeper, Lidia"]  # fmt: skip
MOORINGS = ["Ramsgate marina", "a swinging mooring at Salcombe", "the pontoon at Lymington",
            "a canal berth at Braunston", "the harbour wall at Padstow", "a river mooring in Henley"]  # fmt: skip
HEDGES = ["a tree surgeon, Owen", "GreenEdge Landscapes", "the man with the flail mower", "a gardener, Bill",
          "Hedge Masters", "a local handyman"]  # fmt: skip
GARAGES = ["Kwik Fit", "the Halfords in town", "a village garage run by Ken", "the main dealer",
           "a mobile mechanic", "Station Motors"]  # fmt: skip
GLASSES = ["+1.0 readers", "+1.5 readers", "+2.0 readers", "+2.5 varifocals", "+3.0 readers",
           "bifocals at +1.75"]  # fmt: skip
SCHOOL_RUNS = ["by bike along the river", "on the 42 bus", "in the car via the ring road", "on foot past the park",
               "by scooter", "in a lift-share with the Patels"]  # fmt: skip

# Exclusive attributes: (values, templates, present-tense questions), none naming an asked noun.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "heating": (
        HEATING,
        (
            "{n} heats the house with {v}.",
            "{n} had {v} installed for heating.",
            "{n}'s home is warmed by {v}.",
            "{n} now relies on {v} in winter.",
        ),
        ("What does {n} heat the house with?", "How does {n} keep the house warm?"),
    ),
    "hob": (
        HOBS,
        (
            "{n} cooks on {v}.",
            "{n}'s kitchen has {v}.",
            "{n} put in {v} when the kitchen was redone.",
            "{n} fries breakfast on {v}.",
        ),
        ("What does {n} cook on?",),
    ),
    "caravan": (
        CARAVAN_SITES,
        (
            "{n} stores the caravan at {v}.",
            "{n}'s caravan is kept at {v}.",
            "{n} pays a fee to park the caravan at {v}.",
            "Over winter the caravan of {n} sits at {v}.",
        ),
        ("Where does {n} keep the caravan?",),
    ),
    "beans": (
        BEANS,
        (
            "{n} buys coffee beans from {v}.",
            "{n} gets beans from {v}.",
            "{n}'s coffee beans come from {v}.",
            "{n} orders beans from {v} every month.",
        ),
        ("Where does {n} get coffee beans?",),
    ),
    "ironing": (
        IRONING,
        (
            "{n}'s ironing is done by {v}.",
            "{n} sends the shirts to {v}.",
            "{n} pays {v} to do the ironing.",
            "{n} leaves the ironing to {v}.",
        ),
        ("Who does {n}'s ironing?", "Who irons {n}'s shirts?"),
    ),
    "mooring": (
        MOORINGS,
        (
            "{n} moors the yacht at {v}.",
            "{n}'s boat is berthed at {v}.",
            "{n} rents a berth at {v}.",
            "{n} keeps the sailing boat at {v}.",
        ),
        ("Where does {n} moor the boat?",),
    ),
    "hedge": (
        HEDGES,
        (
            "{n}'s hedge is trimmed by {v}.",
            "{n} gets {v} to cut the hedge.",
            "{n} pays {v} to keep the hedge tidy.",
            "{n} books {v} for the hedge each spring.",
        ),
        ("Who cuts {n}'s hedge?",),
    ),
    "mot": (
        GARAGES,
        (
            "{n} takes the car to {v} for its MOT.",
            "{n}'s car is serviced at {v}.",
            "{n} trusts {v} with the car's MOT.",
            "{n} books the MOT with {v}.",
        ),
        ("Where does {n} get the car's MOT done?",),
    ),
    "glasses": (
        GLASSES,
        (
            "{n} reads with {v}.",
            "{n}'s reading glasses are {v}.",
            "{n} was prescribed {v}.",
            "{n} needs {v} to read the paper.",
        ),
        ("What does {n} wear to read?",),
    ),
    "school_run": (
        SCHOOL_RUNS,
        (
            "{n} takes the children to school {v}.",
            "{n} does the school run {v}.",
            "The school run for {n} goes {v}.",
            "{n} gets the kids to school {v}.",
        ),
        ("How does {n} get the kids to school?",),
    ),
}

# Many-valued attributes: values, templates, a question naming no noun (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "cycling": (
        ["the canal towpath", "Box Hill", "the Peak District", "the coast road", "the forest trails"],
        ("{n} cycles along {v}.", "{n} rides to {v} on Sundays.", "{n} did a bike ride through {v}."),
        "Where does {n} cycle?",
    ),
    "singing": (
        ["jazz standards", "Welsh hymns", "sea shanties", "Schubert songs", "pop covers"],
        ("{n} sings {v}.", "{n} performs {v} at open mics.", "{n} learned to sing {v}."),
        "What does {n} sing?",
    ),
    "babysitting": (
        ["the Okonjo family", "a neighbour's twins", "a colleague's toddler", "the vicar's children"],
        ("{n} babysits for {v}.", "{n} looks after {v} on Saturday nights.", "{n} minds {v} sometimes."),
        "Who does {n} babysit for?",
    ),
    "painting": (
        ["seascapes", "portraits of dogs", "abstract canvases", "botanical watercolours", "city skylines"],
        ("{n} paints {v}.", "{n} exhibited {v} at the library.", "{n} has painted {v}."),
        "What does {n} paint?",
    ),
    "writing": (
        ["short stories", "a food blog", "crossword clues", "song lyrics", "letters to the editor"],
        ("{n} writes {v}.", "{n} publishes {v}.", "{n} spends evenings writing {v}."),
        "What does {n} write?",
    ),
    "market": (
        ["honey", "scented candles", "sourdough loaves", "knitted hats", "chutney"],
        ("{n} sells {v} at the market.", "{n} has a stall selling {v}.", "{n} sold out of {v} on Saturday."),
        "What does {n} sell at the market?",
    ),
}


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names of this family's own pools: surnames unique, first names repeat."""
    return pooled_people(rng, FIRST, _HEADS, _TAILS, entities)


def build(seed: int = 8484, entities: int = 240) -> Dataset:
    """The eighth fresh set: deterministic for a seed. ``Statement.family`` is 9 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="s", family=9)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
