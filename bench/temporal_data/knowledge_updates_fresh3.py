"""A third fresh wording family of the knowledge-update set: the before/after check of the pair model (issue 26).

Written and measured on the code of the learned veto (``core.slot_model`` as of this
round's start) before any change to the model or its training data; nothing is fitted
or tuned on it and its misses are not read. New people (name pools of its own), new
values, new sentence templates and questions, with sentence shapes the earlier sets
lack (a leading clause, a possessive subject, a passive), and kinds none of the earlier
sets or the training generator has: exclusive accountant, energy supplier, mobile
carrier, personal trainer; many-valued board games, races run, festivals, cousins,
houseplants. ``knowledge_updates_fresh2`` stays the older clean check.

The shape follows ``knowledge_updates``: ``build(seed)`` is deterministic, 240 people by
default, two or three exclusive attributes each changing one to four times between 2012
and 2025, one or two both-current pairs each, surnames unique, first names shared.
"""

from __future__ import annotations

import random

from .knowledge_updates import Dataset, assemble, pooled_people

__all__ = ["EXCLUSIVE", "MANY", "build", "people"]

FIRST = [
    "Aoife", "Bertil", "Calla", "Desmond", "Eira", "Faustino", "Gwen", "Hamish", "Ingrid", "Jasper",
    "Kalinda", "Leif", "Maelle", "Nils", "Odile", "Paulo", "Quincy", "Rhea", "Sven", "Tamsin",
    "Umar", "Vesna", "Willa", "Xavier", "Yara", "Zeno", "Alma", "Boris", "Carys", "Dmitar",
    "Edda", "Fabian", "Gaia", "Hector", "Idris", "Juliette", "Kofi", "Liv", "Marek", "Nell",
]  # fmt: skip
_HEADS = ["Bex", "Cull", "Dray", "Eg", "Fitch", "Gul", "Hask", "Jarn", "Kemb", "Lud",
          "Myn", "Nash", "Orm", "Pryd", "Rook", "Sut", "Trev", "Umb", "Vard", "Yarl"]  # fmt: skip
_TAILS = ["stock", "thwaite", "cliffe", "holm", "nett", "ridge", "caster", "marsh", "pool", "lane", "burn",
          "haven"]  # fmt: skip

CITIES = ["Porto", "Uppsala", "Nantes", "Salzburg", "Bologna", "Antwerp", "Gdansk", "Oulu", "Galway",
          "Odense", "Innsbruck", "Basel", "Montreal", "Hobart", "Osaka", "Daegu", "Lima", "Mombasa"]  # fmt: skip
COMPANIES = ["Pinecrest Analytics", "Redwood Telecom", "Saltmarsh Studios", "Tidewater Shipping",
             "Umbra Security", "Vantage Dental Labs", "Wexford Textiles", "Yellowtail Software",
             "Zenith Biotech", "Arcadia Hotels", "Bramble Foods", "Copperleaf Bank"]  # fmt: skip
JOBS = ["paramedic", "cartographer", "pastry chef", "air traffic controller", "librarian", "geologist",
        "tattoo artist", "data engineer", "locksmith", "translator", "pharmacist", "stage manager"]  # fmt: skip
PARTNERS = ["Anders", "Bianca", "Cyril", "Dalia", "Errol", "Frida", "Gideon", "Hilde", "Ivo", "Jana",
            "Konrad", "Lucia"]  # fmt: skip
PHONES = ["Fairphone 5", "OnePlus 12", "Pixel 8 Pro", "iPhone 15", "Galaxy S23", "Moto G84", "Sony Xperia 10"]
SCHOOLS = ["the Sorbonne", "Trinity College Dublin", "ETH Zurich", "the University of Bergen",
           "Charles University", "the University of Porto", "McGill", "the Open University"]  # fmt: skip
ACCOUNTANTS = ["Mr Okafor", "Ms Lindqvist", "Hart & Daughters", "Mr Baptiste", "Numbers Ltd", "Ms Kowal"]
ENERGY = ["Octopus Energy", "EDF", "Iberdrola", "Vattenfall", "E.ON", "Ovo", "Engie"]
CARRIERS = ["Three", "O2", "T-Mobile", "Lebara", "giffgaff", "Movistar", "Telia"]
TRAINERS = ["Coach Dana", "a trainer called Reza", "Marco from the club", "Coach Ilse", "a trainer named Ben"]

# Exclusive attributes: (values, templates, present-tense questions), wording of this family only.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "city": (
        CITIES,
        (
            "After the move, {n} is living in {v}.",
            "{n} now calls {v} home.",
            "{n} packed up and went to live in {v}.",
            "{n} is a resident of {v}.",
        ),
        ("Which city does {n} live in at the moment?", "Where is {n} living?"),
    ),
    "employer": (
        COMPANIES,
        (
            "{n} was hired by {v}.",
            "{n} is on the payroll at {v}.",
            "At work, {n} is with {v}.",
            "{n}'s employer is now {v}.",
        ),
        ("Where is {n} working?", "Which firm employs {n}?"),
    ),
    "job": (
        JOBS,
        (
            "{n} earns a living as a {v}.",
            "{n} got a job as a {v}.",
            "In {n}'s working life, the role is {v}.",
            "{n} qualified and works as a {v}.",
        ),
        ("What does {n} do for work?", "What is {n}'s profession?"),
    ),
    "partner": (
        PARTNERS,
        (
            "{n} is in a relationship with {v}.",
            "{n} moved in with {v}.",
            "{n}'s spouse is {v}.",
            "{n} and {v} are a couple.",
        ),
        ("Who is {n} with?", "Who is {n}'s partner?"),
    ),
    "phone": (
        PHONES,
        (
            "{n} carries a {v}.",
            "{n} upgraded to a {v}.",
            "The phone {n} uses is a {v}.",
            "{n}'s mobile is a {v}.",
        ),
        ("What phone does {n} use?", "Which mobile does {n} have?"),
    ),
    "school": (
        SCHOOLS,
        (
            "{n} was admitted to {v}.",
            "{n} is doing a degree at {v}.",
            "{n} is studying at {v}.",
            "{n} goes to lectures at {v}.",
        ),
        ("Where does {n} study?", "Which university is {n} at?"),
    ),
    "accountant": (
        ACCOUNTANTS,
        (
            "{n}'s accountant is {v}.",
            "{n}'s tax returns are done by {v}.",
            "{n} hired {v} to do the books.",
            "{n} switched accountants to {v}.",
        ),
        ("Who is {n}'s accountant?", "Who does {n}'s taxes?"),
    ),
    "energy": (
        ENERGY,
        (
            "{n} gets electricity from {v}.",
            "{n}'s energy supplier is {v}.",
            "{n} pays the gas bill to {v}.",
            "{n} switched energy supplier to {v}.",
        ),
        ("Who supplies {n}'s energy?", "Which energy company does {n} use?"),
    ),
    "carrier": (
        CARRIERS,
        (
            "{n}'s mobile plan is with {v}.",
            "{n} is on a {v} contract.",
            "{n} ported the number to {v}.",
            "{n}'s network provider is {v}.",
        ),
        ("Which mobile network is {n} on?", "Who is {n}'s phone carrier?"),
    ),
    "trainer": (
        TRAINERS,
        (
            "{n} works out with {v}.",
            "{n}'s personal trainer is {v}.",
            "{n} is coached by {v} at the gym.",
            "{n} booked sessions with {v}.",
        ),
        ("Who is {n}'s personal trainer?", "Who trains {n}?"),
    ),
}

# Many-valued attributes: values, templates, a question (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "likes": (
        ["marzipan", "jazz clubs", "long walks", "sushi", "thrillers", "gardening", "espresso", "snow"],
        ("{n} adores {v}.", "{n} has always liked {v}.", "{n} gets excited about {v}."),
        "What does {n} like?",
    ),
    "language": (
        ["Greek", "Polish", "Korean", "Dutch", "Swahili", "Portuguese", "Hebrew", "Thai"],
        ("{n} reads {v} well.", "{n} took lessons in {v}.", "{n} can chat in {v}."),
        "What languages does {n} speak?",
    ),
    "board_games": (
        ["Scrabble", "Ticket to Ride", "Carcassonne", "backgammon", "Risk", "Pandemic"],
        ("{n} owns a copy of {v}.", "{n} plays {v} with the neighbours.", "{n} is good at {v}."),
        "Which board games does {n} play?",
    ),
    "races": (
        ["the Berlin marathon", "a 10k in the park", "a half marathon", "a trail ultra", "a charity fun run"],
        ("{n} ran {v}.", "{n} finished {v}.", "{n} completed {v} last season."),
        "Which races has {n} run?",
    ),
    "festivals": (
        ["Glastonbury", "Roskilde", "Primavera Sound", "a folk festival", "a film festival"],
        ("{n} went to {v}.", "{n} camped at {v}.", "{n} got tickets for {v}."),
        "Which festivals has {n} been to?",
    ),
    "cousins": (
        [
            "a cousin in Oslo",
            "a cousin called Mats",
            "a cousin who is a pilot",
            "twin cousins",
            "a cousin in Rome",
        ],
        ("{n} has {v}.", "{n} visits {v} every summer.", "{n} keeps in touch with {v}."),
        "Which cousins does {n} have?",
    ),
    "houseplants": (
        ["a fiddle-leaf fig", "a monstera", "cacti", "a bonsai", "ferns", "a peace lily"],
        ("{n} looks after {v}.", "{n} bought {v} for the flat.", "{n} waters {v} every week."),
        "Which plants does {n} keep?",
    ),
}


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names of this family's own pools: surnames unique, first names repeat."""
    return pooled_people(rng, FIRST, _HEADS, _TAILS, entities)


def build(seed: int = 9326, entities: int = 240) -> Dataset:
    """The third fresh set: deterministic for a seed. ``Statement.family`` is 4 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="h", family=4)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
