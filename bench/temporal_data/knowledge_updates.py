"""Knowledge updates without subjects: people whose attributes change over the years (issue 26).

A deterministic generator (``build(seed)``), nothing downloaded or copied. Each of
``entities`` people (default 240) gets two or three *exclusive* attributes (home city,
employer, job title, partner, car, phone, favourite hobby, school) whose value changes
one to four times between 2012 and 2025, each version a plain sentence dated by its
``valid_from`` and written without a subject, in wording that varies from version to
version ("Ada Moreau lives in Lisbon." then "Ada Moreau moved to Berlin."). Each chain
has a question about the present ("Where does Ada Moreau live?") whose answer is the
newest version.

Each person also gets one or two *both-current pairs*: two statements of a
many-valued attribute made at different times, both still true ("Ada Moreau likes
tea." / "Ada Moreau likes coffee."; languages, pets, instruments, friends, places
visited). A rule that ranks the newer above the older for these is a false
supersession.

Every person has a surname of their own; first names repeat (about three people each),
so "the same entity" cannot be read off a first name. Templates come in two disjoint
families per attribute (``Statement.family`` 0 or 1), recorded for analyses by wording.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["Chain", "Dataset", "Pair", "Statement", "assemble", "build", "pooled_people"]


@dataclass(frozen=True, slots=True)
class Statement:
    id: str
    text: str
    valid_from: int  # epoch ms
    entity: int
    attribute: str
    family: int


@dataclass(frozen=True, slots=True)
class Chain:
    """One exclusive attribute of one person: its versions oldest first, and a question."""

    entity: int
    attribute: str
    versions: tuple[Statement, ...]
    question: str

    @property
    def current(self) -> Statement:
        return self.versions[-1]


@dataclass(frozen=True, slots=True)
class Pair:
    """Two statements of a many-valued attribute, both current (older first)."""

    entity: int
    attribute: str
    older: Statement
    newer: Statement
    question: str


@dataclass(frozen=True, slots=True)
class Dataset:
    names: tuple[str, ...]
    chains: tuple[Chain, ...]
    pairs: tuple[Pair, ...]

    @property
    def statements(self) -> list[Statement]:
        out = [s for c in self.chains for s in c.versions]
        out += [s for p in self.pairs for s in (p.older, p.newer)]
        return out


FIRST = [
    "Ada",
    "Bruno",
    "Chloe",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Luca",
    "Maya",
    "Nils",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Umar",
    "Vera",
    "Wanda",
    "Xavier",
    "Yara",
    "Zane",
    "Aiko",
    "Boris",
    "Carmen",
    "Diego",
    "Edith",
    "Felix",
    "Gemma",
    "Hamid",
    "Ida",
    "Jasper",
    "Leila",
    "Marco",
    "Nora",
    "Oscar",
    "Priya",
    "Rafael",
    "Sofia",
    "Tomas",
    "Ursula",
    "Viktor",
    "Wen",
    "Yusuf",
    "Zoe",
    "Anton",
    "Bea",
    "Cyril",
    "Dana",
    "Emil",
    "Freya",
    "Gus",
    "Hana",
    "Ivan",
    "Julia",
    "Kofi",
    "Lena",
    "Milo",
    "Nadia",
    "Otto",
    "Paula",
    "Rex",
    "Selma",
    "Theo",
    "Uma",
    "Vito",
    "Willa",
]
LAST = [
    "Moreau",
    "Okafor",
    "Lindqvist",
    "Tanaka",
    "Rossi",
    "Novak",
    "Haddad",
    "Berg",
    "Castillo",
    "Weber",
    "Kowalski",
    "Nakamura",
    "Silva",
    "Dubois",
    "Fischer",
    "Ivanova",
    "Jensen",
    "Khan",
    "Larsen",
    "Mendes",
    "Nguyen",
    "Ortiz",
    "Petrov",
    "Quist",
    "Ramos",
    "Sato",
    "Torres",
    "Ueda",
    "Varga",
    "Walsh",
    "Yilmaz",
    "Zeller",
    "Abbott",
    "Brennan",
    "Costa",
    "Dahl",
    "Eriksen",
    "Ferreira",
    "Galli",
    "Holm",
    "Iqbal",
    "Jovanovic",
    "Keller",
    "Laine",
    "Marsh",
    "Nilsen",
    "Oliveira",
    "Pike",
    "Reyes",
    "Strand",
]

_SURNAME_HEADS = [
    "Ash",
    "Bram",
    "Cor",
    "Dun",
    "El",
    "Fen",
    "Gar",
    "Hal",
    "Ives",
    "Kel",
    "Lor",
    "Mar",
    "Nor",
    "Os",
    "Pem",
    "Quen",
    "Rad",
    "Sel",
    "Tor",
    "Vel",
]
_SURNAME_TAILS = [
    "by",
    "wood",
    "ford",
    "ton",
    "ley",
    "well",
    "mere",
    "stone",
    "worth",
    "field",
    "more",
    "croft",
]

CITIES = [
    "Lisbon",
    "Berlin",
    "Oslo",
    "Madrid",
    "Toronto",
    "Nairobi",
    "Osaka",
    "Dublin",
    "Prague",
    "Vienna",
    "Seattle",
    "Denver",
    "Lyon",
    "Porto",
    "Krakow",
    "Helsinki",
    "Melbourne",
    "Austin",
    "Bogota",
    "Lima",
    "Montreal",
    "Hamburg",
    "Seville",
    "Zurich",
    "Boston",
    "Chicago",
    "Accra",
    "Manila",
    "Hanoi",
    "Tallinn",
]
COMPANY_LIST = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark Industries",
    "Wayne Enterprises",
    "Tyrell",
    "Cyberdyne",
    "Soylent",
    "Wonka",
    "Aperture",
    "Massive Dynamic",
    "Oscorp",
    "Pied Piper",
    "Gringotts",
    "Monarch",
    "Nakatomi",
    "Dunder Mifflin",
]
JOBS = [
    "nurse",
    "software engineer",
    "teacher",
    "accountant",
    "architect",
    "pharmacist",
    "data analyst",
    "chef",
    "journalist",
    "product manager",
    "electrician",
    "lawyer",
    "dentist",
    "graphic designer",
    "pilot",
    "librarian",
    "paramedic",
    "translator",
    "civil engineer",
    "marketing director",
]
PARTNER_NAMES = [
    "Sam",
    "Alex",
    "Robin",
    "Jamie",
    "Charlie",
    "Morgan",
    "Casey",
    "Riley",
    "Avery",
    "Jordan",
    "Taylor",
    "Quincy",
    "Harper",
    "Rowan",
    "Sasha",
    "Noel",
    "Remy",
    "Dario",
    "Ingrid",
    "Mateo",
]
CARS = [
    "Toyota Corolla",
    "Tesla Model 3",
    "Volkswagen Golf",
    "Honda Civic",
    "Ford Focus",
    "Renault Clio",
    "BMW 3 Series",
    "Mazda MX-5",
    "Volvo XC60",
    "Fiat 500",
    "Kia Niro",
    "Subaru Outback",
    "Peugeot 208",
    "Nissan Leaf",
    "Skoda Octavia",
]
PHONES = [
    "iPhone 12",
    "iPhone 15",
    "Pixel 6",
    "Pixel 8",
    "Galaxy S21",
    "Galaxy S23",
    "Fairphone 5",
    "OnePlus 11",
    "Nokia G42",
    "Xperia 10",
    "Moto G84",
    "Nothing Phone 2",
]
HOBBIES = [
    "rock climbing",
    "chess",
    "pottery",
    "birdwatching",
    "sailing",
    "salsa dancing",
    "woodworking",
    "photography",
    "gardening",
    "marathon running",
    "painting",
    "fencing",
    "knitting",
    "surfing",
    "baking bread",
]
SCHOOLS = [
    "the University of Lisbon",
    "Trinity College",
    "MIT",
    "the Sorbonne",
    "ETH Zurich",
    "McGill",
    "Kyoto University",
    "Stanford",
    "Oxford",
    "the University of Toronto",
    "Charles University",
    "TU Delft",
]

# Exclusive attributes: (values, two template families, present-tense questions).
EXCLUSIVE: dict[str, tuple[list[str], tuple[tuple[str, ...], tuple[str, ...]], tuple[str, ...]]] = {
    "city": (
        CITIES,
        (
            ("{n} lives in {v}.", "{n} moved to {v}.", "{n} has relocated to {v}."),
            (
                "{n}'s home is in {v} now.",
                "{n} settled down in {v}.",
                "{n} rents a flat in {v} and lives there.",
            ),
        ),
        ("Where does {n} live?", "Which city is {n} based in now?"),
    ),
    "employer": (
        COMPANY_LIST,
        (
            ("{n} works at {v}.", "{n} joined {v}.", "{n} took a job at {v}."),
            ("{n} is employed by {v}.", "{n} started working for {v}.", "{n}'s employer is {v}."),
        ),
        ("Where does {n} work?", "Which company does {n} work for now?"),
    ),
    "job": (
        JOBS,
        (
            ("{n} works as a {v}.", "{n} became a {v}.", "{n} is a {v}."),
            ("{n}'s job title is {v}.", "{n} retrained and is now a {v}.", "{n} got a position as a {v}."),
        ),
        ("What is {n}'s job?", "What does {n} do for a living?"),
    ),
    "partner": (
        PARTNER_NAMES,
        (
            ("{n} is dating {v}.", "{n} married {v}.", "{n}'s partner is {v}."),
            ("{n} is in a relationship with {v}.", "{n} got engaged to {v}.", "{n} and {v} are a couple."),
        ),
        ("Who is {n}'s partner?", "Who is {n} in a relationship with?"),
    ),
    "car": (
        CARS,
        (
            ("{n} drives a {v}.", "{n} bought a {v}.", "{n}'s car is a {v}."),
            ("{n} traded the old car in for a {v}.", "{n} now commutes in a {v}.", "{n} leased a {v}."),
        ),
        ("What car does {n} drive?", "Which car does {n} have now?"),
    ),
    "phone": (
        PHONES,
        (
            ("{n} uses a {v}.", "{n} switched to a {v}.", "{n}'s phone is a {v}."),
            ("{n} got a new {v}.", "{n} carries a {v} these days.", "{n} upgraded to a {v}."),
        ),
        ("What phone does {n} use?", "Which phone does {n} have?"),
    ),
    "hobby": (
        HOBBIES,
        (
            (
                "{n}'s favourite hobby is {v}.",
                "{n}'s main pastime is {v}.",
                "{n} spends most weekends on {v}.",
            ),
            (
                "What {n} loves doing most is {v}.",
                "{n} is obsessed with {v} these days.",
                "{n}'s big passion is {v}.",
            ),
        ),
        ("What is {n}'s favourite hobby?", "What does {n} do in their free time?"),
    ),
    "school": (
        SCHOOLS,
        (
            ("{n} studies at {v}.", "{n} enrolled at {v}.", "{n} is a student at {v}."),
            ("{n} transferred to {v}.", "{n} was admitted to {v}.", "{n} attends {v}."),
        ),
        ("Where does {n} study?", "Which university does {n} attend?"),
    ),
}

# Many-valued attributes: pairs of values, two template families, a question.
MANY: dict[str, tuple[list[str], tuple[tuple[str, ...], tuple[str, ...]], str]] = {
    "likes": (
        [
            "tea",
            "coffee",
            "jazz",
            "hiking",
            "sushi",
            "old films",
            "chocolate",
            "board games",
            "the sea",
            "poetry",
            "spicy food",
            "cats",
        ],
        (("{n} likes {v}.", "{n} really enjoys {v}."), ("{n} is fond of {v}.", "{n} loves {v}.")),
        "What does {n} like?",
    ),
    "language": (
        [
            "Spanish",
            "French",
            "Japanese",
            "German",
            "Portuguese",
            "Mandarin",
            "Arabic",
            "Italian",
            "Swahili",
            "Korean",
        ],
        (
            ("{n} speaks {v}.", "{n} is fluent in {v}."),
            ("{n} can hold a conversation in {v}.", "{n} learned {v}."),
        ),
        "Which languages does {n} speak?",
    ),
    "pet": (
        ["a cat", "a dog", "a parrot", "two rabbits", "a tortoise", "a goldfish", "a hamster", "a ferret"],
        (("{n} has {v}.", "{n} adopted {v}."), ("{n} takes care of {v}.", "{n} owns {v}.")),
        "What pets does {n} have?",
    ),
    "instrument": (
        [
            "the piano",
            "the guitar",
            "the violin",
            "the drums",
            "the cello",
            "the flute",
            "the saxophone",
            "the ukulele",
        ],
        (
            ("{n} plays {v}.", "{n} is learning {v}."),
            ("{n} practises {v} every evening.", "{n} took up {v}."),
        ),
        "Which instruments does {n} play?",
    ),
    "friend": (
        PARTNER_NAMES,
        (
            ("{n} is friends with {v}.", "{n} often meets {v} for lunch."),
            ("{n} and {v} are close friends.", "{n} hangs out with {v}."),
        ),
        "Who are {n}'s friends?",
    ),
    "visited": (
        [
            "Japan",
            "Peru",
            "Iceland",
            "Morocco",
            "Vietnam",
            "Canada",
            "Greece",
            "Kenya",
            "Norway",
            "Chile",
            "India",
            "Mexico",
        ],
        (
            ("{n} has been to {v}.", "{n} travelled to {v}."),
            ("{n} visited {v} once.", "{n} spent a holiday in {v}."),
        ),
        "Which countries has {n} visited?",
    ),
}

_START = datetime(2012, 1, 1, tzinfo=UTC)
_SPAN_DAYS = 13 * 365


def _ms(d: datetime) -> int:
    return int(d.timestamp() * 1000)


def _dates(rng: random.Random, n: int) -> list[int]:
    """``n`` increasing dates at least 60 days apart between 2012 and 2025."""
    days = sorted(rng.sample(range(0, _SPAN_DAYS, 60), n))
    return [_ms(_START + timedelta(days=d + rng.randrange(0, 59), hours=rng.randrange(8, 20))) for d in days]


def people(rng: random.Random, entities: int) -> tuple[str, ...]:
    """``entities`` full names drawn with ``rng`` (shared by the fresh wording family).

    Every person has a surname of their own; first names repeat (about three people
    each), so "shared names" must weigh the whole name, as it must in a real store.
    """
    surnames = list(dict.fromkeys(LAST + [p + q for p in _SURNAME_HEADS for q in _SURNAME_TAILS]))
    if entities > len(surnames):
        raise ValueError(f"at most {len(surnames)} people")
    rng.shuffle(surnames)
    return tuple(f"{FIRST[rng.randrange(len(FIRST))]} {last}" for last in surnames[:entities])


def pooled_people(
    rng: random.Random, first: Sequence[str], heads: Sequence[str], tails: Sequence[str], entities: int
) -> tuple[str, ...]:
    """``entities`` full names from a fresh family's own pools: surnames (a head and a tail) unique,
    first names repeat. Draws from ``rng`` in a fixed order (one shuffle, then a first name each)."""
    surnames = [h + t for h in heads for t in tails]
    if entities > len(surnames):
        raise ValueError(f"at most {len(surnames)} people")
    rng.shuffle(surnames)
    return tuple(f"{first[rng.randrange(len(first))]} {last}" for last in surnames[:entities])


def assemble(
    rng: random.Random, names: tuple[str, ...], exclusive: Any, many: Any, *, prefix: str, family: int
) -> Dataset:
    """Chains and both-current pairs of a single-wording family (the fresh families' build).

    Per person: two or three exclusive attributes, each changing one to four times, and
    one or two many-valued attributes stated twice; ids ``<prefix>00001``...; every
    statement's ``family`` is ``family``. Draws from ``rng`` in a fixed order, so a seed
    gives the same set.
    """
    chains: list[Chain] = []
    pairs: list[Pair] = []
    counter = 0

    def sid() -> str:
        nonlocal counter
        counter += 1
        return f"{prefix}{counter:05d}"

    for e, name in enumerate(names):
        for attr in rng.sample(sorted(exclusive), rng.choice((2, 3))):
            values, templates, questions = exclusive[attr]
            n_versions = rng.choice((2, 2, 3, 3, 4, 5))  # 1-4 changes
            chosen = rng.sample(values, n_versions)
            versions = tuple(
                Statement(sid(), rng.choice(templates).format(n=name, v=v), at, e, attr, family)
                for v, at in zip(chosen, _dates(rng, n_versions), strict=True)
            )
            chains.append(Chain(e, attr, versions, rng.choice(questions).format(n=name)))
        for attr in rng.sample(sorted(many), rng.choice((1, 2))):
            mvalues, mtemplates, question = many[attr]
            a, b = rng.sample(mvalues, 2)
            made = [
                Statement(sid(), rng.choice(mtemplates).format(n=name, v=v), at, e, attr, family)
                for v, at in zip((a, b), _dates(rng, 2), strict=True)
            ]
            pairs.append(Pair(e, attr, made[0], made[1], question.format(n=name)))
    return Dataset(names, tuple(chains), tuple(pairs))


def build(seed: int = 26, entities: int = 240) -> Dataset:
    """The data set: deterministic for a seed (same statements, dates and questions)."""
    rng = random.Random(seed)
    names = people(rng, entities)
    chains: list[Chain] = []
    pairs: list[Pair] = []
    counter = 0

    def sid() -> str:
        nonlocal counter
        counter += 1
        return f"s{counter:05d}"

    for e, name in enumerate(names):
        for attr in rng.sample(sorted(EXCLUSIVE), rng.choice((2, 3))):
            values, families, questions = EXCLUSIVE[attr]
            n_versions = rng.choice((2, 2, 3, 3, 4, 5))  # 1-4 changes
            chosen = rng.sample(values, n_versions)
            dates = _dates(rng, n_versions)
            versions = []
            for v, at in zip(chosen, dates, strict=True):
                fam = rng.randrange(2)
                text = rng.choice(families[fam]).format(n=name, v=v)
                versions.append(Statement(sid(), text, at, e, attr, fam))
            chains.append(Chain(e, attr, tuple(versions), rng.choice(questions).format(n=name)))
        for attr in rng.sample(sorted(MANY), rng.choice((1, 2))):
            values, families, question = MANY[attr]
            a, b = rng.sample(values, 2)
            d1, d2 = _dates(rng, 2)
            made = []
            for v, at in ((a, d1), (b, d2)):
                fam = rng.randrange(2)
                made.append(Statement(sid(), rng.choice(families[fam]).format(n=name, v=v), at, e, attr, fam))
            pairs.append(Pair(e, attr, made[0], made[1], question.format(n=name)))
    return Dataset(names, tuple(chains), tuple(pairs))


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.names)} people, {len(ds.chains)} chains, {len(ds.pairs)} both-current pairs")
    for c in ds.chains[:3]:
        print(c.question, [s.text for s in c.versions])
    for p in ds.pairs[:3]:
        print(p.question, p.older.text, "|", p.newer.text)
