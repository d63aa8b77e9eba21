"""A fourth fresh wording family of the knowledge-update set: this round's held-out check (issue 26).

Written and measured once on the code as it stood at this round's start (commit
5055889), before any change to the rule, the model or its training data. Nothing is
fitted or tuned on it and its individual misses are not read while tuning; only its
totals are reported, before and after. New people (name pools of its own), new values,
new sentence templates and questions, including shapes the earlier families lack (a
time adverbial first, "these days", a relative clause, "no longer ... but"). Kinds:
exclusive city, employer, job, car, landlord, dentist, broadband provider, hairdresser,
commute, bank; many-valued podcasts, allergies, volunteering, courses taken, recipes.
Several of them (car, landlord, commute, bank, allergies, courses) are also kinds of the
rule-3 training generator (``slot_training``) and of earlier families, in other
wordings (three course values happen to coincide with the generator's); the family was
not written from them, and nothing was fitted again this round.

The shape follows ``knowledge_updates``: ``build(seed)`` is deterministic, 240 people by
default, two or three exclusive attributes each changing one to four times between 2012
and 2025, one or two both-current pairs each, surnames unique, first names shared.
"""

from __future__ import annotations

import random

from .knowledge_updates import Dataset, assemble, pooled_people

__all__ = ["EXCLUSIVE", "MANY", "build", "people"]

FIRST = [
    "Agnieszka", "Bram", "Clio", "Dorian", "Elsbeth", "Ferran", "Greer", "Hugo", "Isolde", "Jonas",
    "Keira", "Lazlo", "Mirela", "Niamh", "Oskar", "Perpetua", "Quentin", "Rosalind", "Stellan", "Thea",
    "Ugo", "Viveka", "Wendell", "Ximena", "Yannick", "Zuzana", "Aurelio", "Brigid", "Cassius", "Delphine",
    "Emrys", "Fenna", "Gustavo", "Henrike", "Ignatius", "Jolene", "Kasimir", "Linnea", "Matthias", "Noor",
]  # fmt: skip
_HEADS = ["Ash", "Bram", "Crag", "Dun", "Elm", "Fen", "Gor", "Holl", "Ivy", "Kirk",
          "Lang", "Mor", "Nor", "Oak", "Penn", "Quar", "Rud", "Stan", "Thorn", "Wick"]  # fmt: skip
_TAILS = ["ford", "well", "combe", "ley", "worth", "ham", "by", "dale", "field", "gate", "shaw", "ton"]

CITIES = ["Seville", "Trondheim", "Dresden", "Lyon", "Utrecht", "Verona", "Krakow", "Aalborg", "Limerick",
          "Tartu", "Ljubljana", "Geneva", "Halifax", "Perth", "Sapporo", "Taipei", "Cusco", "Accra"]  # fmt: skip
COMPANIES = ["Harbourlight Media", "Ironbark Engineering", "Juniper Logistics", "Kingfisher Retail",
             "Lodestar Insurance", "Meridian Pharma", "Nightjar Games", "Oakhurst Legal",
             "Pelican Airways", "Quillfeather Publishing", "Riverstone Energy", "Silverline Robotics"]  # fmt: skip
JOBS = ["radiographer", "structural engineer", "barista", "court interpreter", "forester", "optician",
        "dental hygienist", "bookbinder", "ship's pilot", "actuary", "glassblower", "speech therapist"]  # fmt: skip
CARS = ["Volvo XC40", "Toyota Yaris", "Skoda Octavia", "Tesla Model 3", "Fiat 500", "Kia Niro", "Mini Cooper"]
LANDLORDS = [
    "Mrs Abernathy",
    "Grainger Lettings",
    "a housing co-op",
    "Mr Vasquez",
    "the council",
    "Homefield Rentals",
]
DENTISTS = ["Dr Osei", "Dr Lindgren", "Smile Street Dental", "Dr Marchetti", "Bridge Road Dental", "Dr Kaur"]
BROADBAND = ["Virgin Media", "BT", "Sky Broadband", "Hyperoptic", "Vodafone Fibre", "Plusnet", "TalkTalk"]
HAIRDRESSERS = ["Cut Above", "a barber called Tomas", "Salon Lumi", "Mane Street", "a stylist named Priya"]
COMMUTES = ["by bike", "by tram", "on the train", "by car", "on foot", "by ferry", "by bus"]
BANKS = ["Monzo", "Barclays", "ING", "Santander", "a credit union", "Revolut", "Nationwide"]

# Exclusive attributes: (values, templates, present-tense questions), wording of this family only.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "city": (
        CITIES,
        (
            "These days {n} has a flat in {v}.",
            "{n} relocated to {v}.",
            "Home for {n} is {v}.",
            "{n} settled down in {v}.",
        ),
        ("In which city is {n} based?", "Where does {n} live these days?"),
    ),
    "employer": (
        COMPANIES,
        (
            "{n} started a new position at {v}.",
            "{n} is employed at {v}.",
            "The company {n} works for is {v}.",
            "{n} signed a contract with {v}.",
        ),
        ("Who does {n} work for now?", "What company is {n} at?"),
    ),
    "job": (
        JOBS,
        (
            "{n} retrained as a {v}.",
            "By trade, {n} is a {v}.",
            "{n} is working as a {v}.",
            "{n}'s occupation is {v}.",
        ),
        ("What is {n}'s job?", "What does {n} work as?"),
    ),
    "car": (
        CARS,
        (
            "{n} drives a {v}.",
            "{n} traded in the old car for a {v}.",
            "The car in {n}'s driveway is a {v}.",
            "{n} bought a {v}.",
        ),
        ("What car does {n} drive?", "Which car does {n} have?"),
    ),
    "landlord": (
        LANDLORDS,
        (
            "{n} rents from {v}.",
            "{n}'s landlord is {v}.",
            "{n} pays rent to {v}.",
            "The flat {n} lives in is let by {v}.",
        ),
        ("Who is {n}'s landlord?", "Who does {n} rent from?"),
    ),
    "dentist": (
        DENTISTS,
        (
            "{n} sees {v} for check-ups.",
            "{n}'s dentist is {v}.",
            "{n} registered with {v} for dental care.",
            "{n} no longer goes to the old dentist but to {v}.",
        ),
        ("Who is {n}'s dentist?", "Which dentist does {n} go to?"),
    ),
    "broadband": (
        BROADBAND,
        (
            "{n}'s internet comes from {v}.",
            "{n} signed up for broadband with {v}.",
            "At home, {n} is connected through {v}.",
            "{n}'s broadband provider is {v}.",
        ),
        ("Who provides {n}'s internet?", "Which broadband does {n} have?"),
    ),
    "hairdresser": (
        HAIRDRESSERS,
        (
            "{n} gets haircuts at {v}.",
            "{n}'s hairdresser is {v}.",
            "{n} books a trim with {v} every month.",
            "{n} found a new hairdresser: {v}.",
        ),
        ("Who cuts {n}'s hair?", "Where does {n} get a haircut?"),
    ),
    "commute": (
        COMMUTES,
        (
            "{n} commutes {v}.",
            "{n} gets to the office {v}.",
            "Every morning {n} travels to work {v}.",
            "{n} switched to commuting {v}.",
        ),
        ("How does {n} get to work?", "How does {n} commute?"),
    ),
    "bank": (
        BANKS,
        (
            "{n} banks with {v}.",
            "{n}'s current account is at {v}.",
            "{n} moved the savings to {v}.",
            "{n} opened an account with {v} and closed the old one.",
        ),
        ("Which bank does {n} use?", "Where does {n} bank?"),
    ),
}

# Many-valued attributes: values, templates, a question (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "podcasts": (
        [
            "a history podcast",
            "a true crime show",
            "a science podcast",
            "a comedy podcast",
            "a chess podcast",
        ],
        ("{n} listens to {v}.", "{n} subscribed to {v}.", "{n} never misses an episode of {v}."),
        "Which podcasts does {n} listen to?",
    ),
    "allergies": (
        ["peanuts", "cats", "pollen", "penicillin", "shellfish", "dust mites"],
        ("{n} is allergic to {v}.", "{n} reacts badly to {v}.", "{n} found out about an allergy to {v}."),
        "What is {n} allergic to?",
    ),
    "volunteering": (
        [
            "a food bank",
            "an animal shelter",
            "a literacy charity",
            "the local hospice",
            "a beach clean-up group",
        ],
        ("{n} volunteers at {v}.", "{n} gives Saturdays to {v}.", "{n} helps out at {v}."),
        "Where does {n} volunteer?",
    ),
    "courses": (
        [
            "a pottery course",
            "a first-aid course",
            "an evening class in Italian",
            "a coding bootcamp",
            "a photography workshop",
        ],
        ("{n} took {v}.", "{n} signed up for {v}.", "{n} completed {v}."),
        "Which courses has {n} taken?",
    ),
    "recipes": (
        ["a lentil curry", "sourdough bread", "paella", "lemon tart", "dumplings", "ratatouille"],
        ("{n} knows how to make {v}.", "{n} cooks {v} for friends.", "{n} perfected {v}."),
        "What can {n} cook?",
    ),
}


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names of this family's own pools: surnames unique, first names repeat."""
    return pooled_people(rng, FIRST, _HEADS, _TAILS, entities)


def build(seed: int = 4426, entities: int = 240) -> Dataset:
    """The fourth fresh set: deterministic for a seed. ``Statement.family`` is 5 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="k", family=5)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
