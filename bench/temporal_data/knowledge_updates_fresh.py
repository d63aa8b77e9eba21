"""A fresh wording family of the knowledge-update set, kept only as a held-out check (issue 26).

``knowledge_updates`` is the set the same-slot supersession rule was designed on: its
templates were read while the rule was written. This module generates the same kind of
data (``build(seed)``, deterministic, nothing downloaded) in wording nobody tuned on:
new sentence templates for the same attributes, new present-tense questions, and new
kinds of attribute, exclusive (bank, doctor, football club) and many-valued (sports,
allergies, dishes someone cooks). Nothing may be fitted on it: the figures it gives are
the honest estimate for a new user's phrasing.

The people, dates and numbers of versions follow ``knowledge_updates``: 240 people by
default, two or three exclusive attributes each changing one to four times between 2012
and 2025, one or two both-current pairs each, surnames unique, first names shared.
"""

from __future__ import annotations

import random

from .knowledge_updates import (
    CARS,
    CITIES,
    COMPANY_LIST,
    HOBBIES,
    JOBS,
    PARTNER_NAMES,
    PHONES,
    SCHOOLS,
    Dataset,
    assemble,
    people,
)

__all__ = ["EXCLUSIVE", "MANY", "build"]

BANKS = [
    "Barclays",
    "ING",
    "Monzo",
    "Santander",
    "HSBC",
    "Revolut",
    "Deutsche Bank",
    "BNP Paribas",
    "N26",
    "Chase",
]
DOCTORS = ["Dr Patel", "Dr Okoye", "Dr Lambert", "Dr Chen", "Dr Alvarez", "Dr Novak", "Dr Haas", "Dr Mensah"]
CLUBS = [
    "Arsenal",
    "Benfica",
    "Ajax",
    "Celtic",
    "Juventus",
    "Porto",
    "Napoli",
    "Feyenoord",
    "Sevilla",
    "Lazio",
]

# Exclusive attributes: (values, templates, present-tense questions). New wording only:
# no template or question here appears in ``knowledge_updates``.
EXCLUSIVE: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "city": (
        CITIES,
        (
            "{n} is living in {v} these days.",
            "{n} packed up and went to live in {v}.",
            "{n} bought an apartment in {v}.",
            "{n} calls {v} home.",
        ),
        ("Which city does {n} live in?", "Where is {n} living at the moment?"),
    ),
    "employer": (
        COMPANY_LIST,
        (
            "{n} is on the payroll at {v}.",
            "{n} got hired by {v}.",
            "{n} has a job with {v}.",
            "{n} signed a contract with {v}.",
        ),
        ("Who is {n}'s employer?", "Which firm employs {n}?"),
    ),
    "job": (
        JOBS,
        (
            "{n} earns a living as a {v}.",
            "{n} now works full time as a {v}.",
            "{n}'s profession is {v}.",
            "{n} qualified as a {v}.",
        ),
        ("What is {n}'s occupation?", "What is {n}'s profession?"),
    ),
    "partner": (
        PARTNER_NAMES,
        (
            "{n} has been seeing {v}.",
            "{n} and {v} moved in together.",
            "{n} is with {v} now.",
            "{n}'s girlfriend or boyfriend is {v}.",
        ),
        ("Who is {n} dating?", "Who is {n} with?"),
    ),
    "car": (
        CARS,
        (
            "{n} gets around in a {v}.",
            "{n} picked up a used {v}.",
            "{n}'s vehicle is a {v}.",
            "{n} owns a {v} now.",
        ),
        ("What does {n} drive?", "What is {n}'s car?"),
    ),
    "phone": (
        PHONES,
        (
            "{n}'s mobile is a {v}.",
            "{n} replaced the old handset with a {v}.",
            "{n} is on a {v}.",
            "{n} bought a {v} as a new phone.",
        ),
        ("What is {n}'s phone?", "Which mobile does {n} use?"),
    ),
    "hobby": (
        HOBBIES,
        (
            "{n}'s spare time goes into {v}.",
            "{n} has got really into {v}.",
            "{n}'s favourite pastime is {v}.",
            "Outside work, {n} mostly does {v}.",
        ),
        ("What is {n}'s main hobby?", "How does {n} spend their spare time?"),
    ),
    "school": (
        SCHOOLS,
        (
            "{n} is doing a degree at {v}.",
            "{n} got a place at {v}.",
            "{n} goes to {v}.",
            "{n} is taking courses at {v}.",
        ),
        ("Which school does {n} go to?", "Where is {n} a student?"),
    ),
    "bank": (
        BANKS,
        (
            "{n} banks with {v}.",
            "{n} moved their account to {v}.",
            "{n}'s bank is {v}.",
            "{n} opened a current account at {v}.",
        ),
        ("Which bank does {n} use?", "Who does {n} bank with?"),
    ),
    "doctor": (
        DOCTORS,
        (
            "{n}'s family doctor is {v}.",
            "{n} registered with {v} as their GP.",
            "{n} sees {v} for checkups.",
            "{n}'s GP is {v}.",
        ),
        ("Who is {n}'s doctor?", "Which GP is {n} registered with?"),
    ),
    "club": (
        CLUBS,
        (
            "{n} supports {v}.",
            "{n} is a season-ticket holder at {v}.",
            "{n}'s football team is {v}.",
            "{n} cheers for {v} every weekend.",
        ),
        ("Which football club does {n} support?", "What team does {n} support?"),
    ),
}

# Many-valued attributes: values, templates, a question (both statements stay true).
MANY: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    "likes": (
        [
            "green tea",
            "espresso",
            "blues",
            "camping",
            "ramen",
            "musicals",
            "cheesecake",
            "crosswords",
            "mountains",
        ],
        ("{n} is a big fan of {v}.", "{n} adores {v}.", "{n} can't get enough of {v}."),
        "What is {n} a fan of?",
    ),
    "language": (
        ["Dutch", "Greek", "Turkish", "Hindi", "Polish", "Russian", "Thai", "Hebrew"],
        ("{n} gets by in {v}.", "{n} is taking {v} lessons.", "{n} reads and writes {v}."),
        "What languages can {n} speak?",
    ),
    "pet": (
        ["a beagle", "a budgie", "a rescue cat", "a lizard", "three hens", "a guinea pig"],
        ("{n} looks after {v}.", "{n} lives with {v}.", "{n} brought home {v}."),
        "Which animals does {n} keep?",
    ),
    "friend": (
        PARTNER_NAMES,
        (
            "{n} goes climbing with {v}.",
            "{n} grew up with {v} and they are still close.",
            "{n} calls {v} every week.",
        ),
        "Who is {n} close to?",
    ),
    "visited": (
        ["Portugal", "Egypt", "New Zealand", "Cuba", "Scotland", "Nepal", "Argentina", "Turkey"],
        ("{n} went on a trip to {v}.", "{n} backpacked through {v}.", "{n} spent two weeks in {v}."),
        "Where has {n} travelled?",
    ),
    "sport": (
        ["tennis", "badminton", "squash", "volleyball", "table tennis", "rugby", "cycling", "swimming"],
        ("{n} plays {v}.", "{n} does {v} on Sundays.", "{n} joined a {v} team."),
        "Which sports does {n} do?",
    ),
    "allergy": (
        ["peanuts", "pollen", "shellfish", "dust", "penicillin", "cats", "gluten"],
        ("{n} is allergic to {v}.", "{n} reacts badly to {v}.", "{n} has an allergy to {v}."),
        "What is {n} allergic to?",
    ),
    "cooks": (
        ["paella", "dumplings", "lasagne", "curry", "pancakes", "risotto", "tacos"],
        ("{n} makes great {v}.", "{n} often cooks {v}.", "{n} learned to make {v}."),
        "What does {n} cook?",
    ),
}


def build(seed: int = 2612, entities: int = 240) -> Dataset:
    """The fresh set: deterministic for a seed. ``Statement.family`` is 2 (this family)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    return assemble(rng, names, EXCLUSIVE, MANY, prefix="f", family=2)


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
    for c in ds.chains[:4]:
        print(c.question, [s.text for s in c.versions])
    for p in ds.pairs[:4]:
        print(p.question, p.older.text, "|", p.newer.text)
