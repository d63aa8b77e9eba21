"""A second fresh wording family of the knowledge-update set: the clean held-out check (issue 26).

Written before the learned slot classifier (``core.slot_model``) and measured once on
main's code before any change; nothing was fitted or tuned on it, and its misses were
not read. New people (first names and surnames of their own), new values, new sentence
templates and questions for known kinds of attribute, and kinds none of the earlier
sets has: exclusive dentist, insurer, internet provider, hairdresser, neighbourhood;
many-valued children, collections, volunteering, podcasts, qualifications.

The shape follows ``knowledge_updates``: ``build(seed)`` is deterministic, 240 people by
default, two or three exclusive attributes each changing one to four times between 2012
and 2025, one or two both-current pairs each, surnames unique, first names shared.
"""

from __future__ import annotations

import random

from .knowledge_updates import Dataset, assemble, pooled_people

__all__ = ["EXCLUSIVE", "MANY", "build", "people"]

FIRST = [
    "Anouk", "Bastian", "Céline", "Dawit", "Esme", "Florin", "Gideon", "Hana", "Ilse", "Joaquin",
    "Katya", "Lorenzo", "Mireille", "Nadia", "Orla", "Petra", "Rafael", "Signe", "Tomasz", "Ulla",
    "Valentin", "Wren", "Yusuf", "Zofia", "Amara", "Benedikt", "Cosima", "Darius", "Elif", "Fintan",
    "Giulia", "Henrik", "Isolde", "Kwame", "Lucian", "Marisol", "Niamh", "Otto", "Priya", "Ruben",
]  # fmt: skip
_HEADS = ["Alder", "Birch", "Crane", "Drake", "Ember", "Frost", "Glen", "Heath", "Ivor", "Kirk",
          "Lark", "Moss", "North", "Oak", "Pine", "Reed", "Stone", "Thorn", "West", "Wolf"]  # fmt: skip
_TAILS = ["hurst", "combe", "dale", "bridge", "wick", "ham", "shaw", "gate", "low", "brook", "leigh", "sey"]

NEIGHBOURHOODS = ["Kreuzberg", "Alfama", "Le Marais", "Trastevere", "Shoreditch", "Gracia", "Vesterbro",
                  "Jordaan", "Södermalm", "Neukölln", "Brooklyn Heights", "Montmartre"]  # fmt: skip
CITIES = ["Valencia", "Gothenburg", "Leipzig", "Bilbao", "Ghent", "Turin", "Brno", "Tampere", "Cork",
          "Aarhus", "Graz", "Lausanne", "Vancouver", "Adelaide", "Kyoto", "Busan", "Quito", "Durban"]  # fmt: skip
COMPANIES = ["Northwind", "Contoso", "Fabrikam", "Blue Yonder", "Vortex Labs", "Helix Bio", "Quantia",
             "Lumen Works", "Orbital Freight", "Tessera", "Kestrel Systems", "Brightline"]  # fmt: skip
JOBS = ["veterinarian", "sommelier", "physiotherapist", "urban planner", "sound engineer", "midwife",
        "tax adviser", "firefighter", "museum curator", "UX researcher", "carpenter", "social worker"]  # fmt: skip
PARTNERS = [
    "Elias",
    "Mira",
    "Theo",
    "Lena",
    "Jonah",
    "Clara",
    "Nico",
    "Ruth",
    "Felipe",
    "Ines",
    "Arlo",
    "Sia",
]
CARS = ["Hyundai Ioniq 5", "Audi A4", "Citroen C3", "Seat Leon", "Mini Cooper", "Polestar 2",
        "Dacia Duster", "Lexus RX", "Opel Astra", "Jeep Renegade"]  # fmt: skip
BANKS = ["Rabobank", "Nordea", "Lloyds", "Triodos", "Bunq", "Credit Agricole", "Wise", "Commerzbank"]
DOCTORS = ["Dr Varga", "Dr Ibsen", "Dr Quaye", "Dr Rinaldi", "Dr Sato", "Dr Ferris", "Dr Holt"]
DENTISTS = ["Dr Kaur", "Dr Lind", "Dr Moreno", "Dr Adeyemi", "Dr Castell", "Dr Brandt"]
INSURERS = ["Allianz", "Aviva", "AXA", "Zurich Insurance", "Generali", "Direct Line", "Mapfre"]
ISPS = ["Vodafone", "BT", "Virgin Media", "Orange", "Telekom", "Ziggo", "Sky Broadband", "Fastweb"]
HAIRDRESSERS = [
    "Cut Above",
    "Salon Lumi",
    "The Barber Shop on Elm",
    "Studio Nine",
    "Mane Street",
    "Clip Joint",
]

# Exclusive attributes: (values, templates, present-tense questions), wording of this family only.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "city": (
        CITIES,
        (
            "{n} relocated for good to {v}.",
            "These days {n} has a place in {v}.",
            "{n}'s address is in {v}.",
            "{n} left for {v} and stayed.",
        ),
        ("What city is {n} in now?", "Where has {n} made their home?"),
    ),
    "neighbourhood": (
        NEIGHBOURHOODS,
        (
            "{n} rents in {v}.",
            "{n} found a flat in the {v} district.",
            "{n}'s street is in {v}.",
            "{n} moved house to {v}.",
        ),
        ("Which neighbourhood does {n} live in?", "What part of town is {n} in?"),
    ),
    "employer": (
        COMPANIES,
        (
            "{n} accepted an offer from {v}.",
            "{n}'s paycheck comes from {v}.",
            "{n} is a {v} employee.",
            "{n} went to work at {v}.",
        ),
        ("Which company is {n} at?", "Who pays {n}'s salary?"),
    ),
    "job": (
        JOBS,
        (
            "{n} is now employed as a {v}.",
            "{n} switched careers to become a {v}.",
            "{n} trained as a {v}.",
            "By trade, {n} is a {v}.",
        ),
        ("What line of work is {n} in?", "What job does {n} have?"),
    ),
    "partner": (
        PARTNERS,
        (
            "{n} fell for {v} and they are together.",
            "{n}'s other half is {v}.",
            "{n} wed {v}.",
            "{n} started going out with {v}.",
        ),
        ("Who is {n}'s significant other?", "Who is {n} going out with?"),
    ),
    "car": (
        CARS,
        (
            "{n} drives around in a {v}.",
            "{n} bought a second-hand {v}.",
            "The car {n} has is a {v}.",
            "{n} swapped cars and got a {v}.",
        ),
        ("Which car is {n} driving?", "What vehicle does {n} own?"),
    ),
    "bank": (
        BANKS,
        (
            "{n} keeps their savings at {v}.",
            "{n} switched banks to {v}.",
            "{n} has a {v} account.",
            "{n}'s salary is paid into {v}.",
        ),
        ("Where does {n} keep their money?", "What is {n}'s bank?"),
    ),
    "doctor": (
        DOCTORS,
        (
            "{n}'s physician is {v}.",
            "{n} is a patient of {v}.",
            "{n} changed GP to {v}.",
            "{n} books appointments with {v}.",
        ),
        ("Which doctor does {n} see?", "Who is {n}'s GP?"),
    ),
    "dentist": (
        DENTISTS,
        (
            "{n}'s dentist is {v}.",
            "{n} gets teeth cleaned by {v}.",
            "{n} signed up with {v} for dental care.",
            "{n} goes to {v} for fillings.",
        ),
        ("Who is {n}'s dentist?", "Which dentist does {n} go to?"),
    ),
    "insurer": (
        INSURERS,
        (
            "{n} is insured with {v}.",
            "{n} took out a policy with {v}.",
            "{n}'s insurance is through {v}.",
            "{n} switched insurance to {v}.",
        ),
        ("Who insures {n}?", "Which insurance company does {n} use?"),
    ),
    "isp": (
        ISPS,
        (
            "{n}'s internet comes from {v}.",
            "{n} has broadband with {v}.",
            "{n} signed a fibre contract with {v}.",
            "{n} changed internet provider to {v}.",
        ),
        ("Who is {n}'s internet provider?", "Which broadband does {n} have?"),
    ),
    "hairdresser": (
        HAIRDRESSERS,
        (
            "{n} gets a haircut at {v}.",
            "{n}'s hairdresser is {v}.",
            "{n} started going to {v} for haircuts.",
            "{n} books the hair salon {v}.",
        ),
        ("Where does {n} get their hair cut?", "Who is {n}'s hairdresser?"),
    ),
}

# Many-valued attributes: values, templates, a question (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "likes": (
        ["rooibos", "flat whites", "bossa nova", "kayaking", "dim sum", "horror films", "macarons", "sudoku"],
        ("{n} has a soft spot for {v}.", "{n} is crazy about {v}.", "Nothing makes {n} happier than {v}."),
        "What does {n} enjoy?",
    ),
    "language": (
        ["Finnish", "Czech", "Vietnamese", "Catalan", "Urdu", "Swedish", "Tagalog", "Hungarian"],
        ("{n} picked up some {v}.", "{n} is conversational in {v}.", "{n} can translate from {v}."),
        "Which languages does {n} know?",
    ),
    "children": (
        ["a son called Leo", "a daughter called Ava", "a son called Max", "a daughter called Zoe", "twins"],
        ("{n} has {v}.", "{n} became a parent: {v}.", "{n} is raising {v}."),
        "What children does {n} have?",
    ),
    "collects": (
        ["vinyl records", "stamps", "vintage cameras", "comic books", "fountain pens", "postcards"],
        ("{n} collects {v}.", "{n} has a shelf full of {v}.", "{n} hunts flea markets for {v}."),
        "What does {n} collect?",
    ),
    "volunteers": (
        ["a food bank", "an animal shelter", "the local library", "a hospice", "a youth football club"],
        ("{n} volunteers at {v}.", "{n} gives Saturdays to {v}.", "{n} helps out at {v} unpaid."),
        "Where does {n} volunteer?",
    ),
    "podcasts": (
        [
            "a history podcast",
            "a true crime show",
            "a science podcast",
            "a comedy podcast",
            "a chess podcast",
        ],
        ("{n} listens to {v}.", "{n} never misses an episode of {v}.", "{n} subscribes to {v}."),
        "Which podcasts does {n} follow?",
    ),
    "qualification": (
        ["a first aid certificate", "a diving licence", "a sailing permit", "an MBA", "a forklift licence"],
        ("{n} holds {v}.", "{n} earned {v}.", "{n} passed the exam for {v}."),
        "What qualifications does {n} have?",
    ),
    "visited": (
        ["Georgia", "Jordan", "Sri Lanka", "Estonia", "Bolivia", "Namibia", "Laos", "Croatia"],
        ("{n} toured {v}.", "{n} took a holiday in {v}.", "{n} flew out to see {v}."),
        "Which places has {n} been to?",
    ),
    "friend": (
        PARTNERS,
        ("{n} plays cards with {v}.", "{n} and {v} have been mates since school.", "{n} texts {v} daily."),
        "Who are {n}'s mates?",
    ),
}


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names of this family's own pools: surnames unique, first names repeat."""
    return pooled_people(rng, FIRST, _HEADS, _TAILS, entities)


def build(seed: int = 9026, entities: int = 240) -> Dataset:
    """The second fresh set: deterministic for a seed. ``Statement.family`` is 3 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="g", family=3)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
