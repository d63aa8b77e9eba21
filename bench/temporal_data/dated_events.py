"""Dated events and questions with relative time expressions (issue 26, "time in the question").

A deterministic generator (``build(seed)``): one person's diary of about 880 events
over 2023-2024 (meals, workouts, work, friends, shopping, appointments, outings,
films and books), each a plain sentence with no date in it and its day as
``valid_from``; and questions asked at some ``as_of`` day with a time expression
("Where did I eat out last weekend?", "What did I buy in May 2023?"), each with the
window it means, computed here by plain calendar arithmetic written apart from the
parser it checks. Questions without a time expression ("Who did I have dinner with at
Nopa?") check that the parser leaves them alone.

Weeks start on Monday; a month or day without a year is its most recent occurrence
on or before ``as_of``; all in UTC.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

__all__ = ["Dataset", "Event", "Question", "build"]


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    text: str
    valid_from: int
    topic: str


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    as_of: int
    topic: str
    expression: str | None  # the time expression as written, or None
    start: int | None  # expected window, epoch ms, half-open
    end: int | None


@dataclass(frozen=True, slots=True)
class Dataset:
    events: tuple[Event, ...]
    questions: tuple[Question, ...]


FRIENDS = ["Sara", "Tom", "Ines", "Kofi", "Mei", "Lars", "Ana", "Raj", "Chloe", "Pedro", "Yuki", "Omar"]
RESTAURANTS = [
    "Nopa",
    "Casa Lola",
    "the Golden Wok",
    "Trattoria Nonna",
    "Sushi Kan",
    "the Blue Door",
    "Le Petit Zinc",
    "Tandoor House",
]
TOPICS: dict[str, tuple[tuple[str, ...], dict[str, list[str]], tuple[str, ...]]] = {
    "dinner": (
        (
            "Had dinner at {r} with {f}.",
            "Ate {dish} at {r}.",
            "Tried the tasting menu at {r} with {f}.",
            "Grabbed lunch at {r}.",
        ),
        {
            "dish": [
                "ramen",
                "a margherita pizza",
                "paella",
                "a Thai curry",
                "oysters",
                "a burger",
                "dumplings",
            ]
        },
        ("Where did I eat out", "Which restaurant did I go to", "Where did I have dinner"),
    ),
    "workout": (
        (
            "Went for a {km} km run along the river.",
            "Did a {cls} class at the gym.",
            "Swam {laps} laps at the pool.",
            "Cycled to the coast and back.",
        ),
        {
            "km": ["5", "8", "10", "12", "21"],
            "cls": ["spin", "yoga", "pilates", "boxing", "HIIT"],
            "laps": ["20", "30", "40"],
        },
        ("What exercise did I do", "How did I work out", "Which workouts did I do"),
    ),
    "work": (
        (
            "Presented the {p} roadmap to the team.",
            "Had a one-on-one with {f} about {p}.",
            "Shipped the {p} release.",
            "Wrote the design doc for {p}.",
        ),
        {"p": ["Atlas", "Beacon", "Comet", "Delta", "Ember"]},
        ("What did I work on", "Which projects did I work on", "What happened at work"),
    ),
    "social": (
        (
            "Met {f} for coffee at {cafe}.",
            "Went to {f}'s birthday party.",
            "Played board games at {f}'s place.",
            "Called {f} to catch up.",
        ),
        {"cafe": ["Blue Bottle", "the corner café", "Flat White", "Bean There"]},
        ("Who did I meet", "Which friends did I see", "Who did I hang out with"),
    ),
    "shopping": (
        ("Bought a {item} at {shop}.", "Ordered a new {item} online.", "Returned the {item} to {shop}."),
        {
            "item": [
                "rain jacket",
                "coffee grinder",
                "desk lamp",
                "pair of boots",
                "backpack",
                "blender",
                "monitor",
            ],
            "shop": ["Ikea", "Decathlon", "the mall", "Fnac"],
        },
        ("What did I buy", "What did I shop for", "Which things did I purchase"),
    ),
    "health": (
        (
            "Had a {a} appointment with Dr. {doc}.",
            "Got my {shot} shot at the pharmacy.",
            "Went to the {a} for a check-up.",
        ),
        {
            "a": ["dentist", "eye doctor", "physio", "GP"],
            "doc": ["Silva", "Brown", "Okoye", "Lee"],
            "shot": ["flu", "covid booster", "tetanus"],
        },
        (
            "Which medical appointments did I have",
            "Did I see a doctor",
            "What health appointments did I go to",
        ),
    ),
    "outing": (
        (
            "Took a day trip to {town}.",
            "Visited the {museum}.",
            "Hiked up {hill} with {f}.",
            "Spent the afternoon at the {park}.",
        ),
        {
            "town": ["Sintra", "Cascais", "Évora", "Óbidos"],
            "museum": ["science museum", "modern art museum", "aquarium"],
            "hill": ["Monte Verde", "the ridge trail"],
            "park": ["botanical garden", "city park", "beach"],
        },
        ("Where did I go", "Which places did I visit", "What trips did I take"),
    ),
    "media": (
        (
            "Watched {film} at the cinema.",
            "Finished reading {book}.",
            "Binged the new season of {show}.",
            "Went to a {band} concert.",
        ),
        {
            "film": ["Dune", "Past Lives", "Oppenheimer", "Perfect Days"],
            "book": ["Middlemarch", "Piranesi", "The Overstory"],
            "show": ["Slow Horses", "The Bear"],
            "band": ["jazz", "indie rock", "string quartet"],
        },
        ("What did I watch or read", "Which films or books did I enjoy", "What entertainment did I have"),
    ),
}
MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}

_FIRST_DAY = date(2023, 1, 1)
_DAYS = 731


def _ms(d: date, hour: int = 0) -> int:
    return int(datetime(d.year, d.month, d.day, hour, tzinfo=UTC).timestamp() * 1000)


def _month_start(d: date, back: int = 0) -> date:
    total = d.year * 12 + d.month - 1 - back
    return date(total // 12, total % 12 + 1, 1)


def _next_month(d: date) -> date:
    return _month_start(d, -1)


def _expressions(rng: random.Random, today: date) -> list[tuple[str, date | None, date | None]]:
    """Expressions asked on ``today`` with their windows (local days, half-open)."""
    monday = today - timedelta(days=today.weekday())
    n_days = rng.randint(2, 6)
    n_months = rng.randint(2, 5)
    past_month = _month_start(today, rng.randint(1, 14))
    day_back = today - timedelta(days=rng.randint(3, 300))
    m_since = _month_start(today, rng.randint(1, 8))
    out = [
        ("yesterday", today - timedelta(days=1), today),
        ("last week", monday - timedelta(days=7), monday),
        ("this week", monday, monday + timedelta(days=7)),
        ("last weekend", monday - timedelta(days=2), monday),
        (f"{n_days} days ago", today - timedelta(days=n_days), today - timedelta(days=n_days - 1)),
        (
            f"{NUMBER_WORDS[n_days]} days ago",
            today - timedelta(days=n_days),
            today - timedelta(days=n_days - 1),
        ),
        ("last month", _month_start(today, 1), _month_start(today)),
        ("this month", _month_start(today), _next_month(today)),
        (
            f"{NUMBER_WORDS[n_months]} months ago",
            _month_start(today, n_months),
            _month_start(today, n_months - 1),
        ),
        (f"in {MONTH_NAMES[past_month.month - 1]} {past_month.year}", past_month, _next_month(past_month)),
        (
            f"on {day_back.day} {MONTH_NAMES[day_back.month - 1]} {day_back.year}",
            day_back,
            day_back + timedelta(days=1),
        ),
        (
            f"on {MONTH_NAMES[day_back.month - 1]} {day_back.day}, {day_back.year}",
            day_back,
            day_back + timedelta(days=1),
        ),
        (f"since {MONTH_NAMES[m_since.month - 1]}", m_since, None)
        if m_since.year == today.year
        else ("last year", date(today.year - 1, 1, 1), date(today.year, 1, 1)),
        ("this year", date(today.year, 1, 1), date(today.year + 1, 1, 1)),
        ("two weeks ago", monday - timedelta(days=14), monday - timedelta(days=7)),
    ]
    if today.year == 2024:
        out += [
            ("before 2024", None, date(2024, 1, 1)),
            ("in 2023", date(2023, 1, 1), date(2024, 1, 1)),
            ("last year", date(2023, 1, 1), date(2024, 1, 1)),
        ]
    return out


def build(seed: int = 26, questions: int = 320, plain_questions: int = 100) -> Dataset:
    """The data set: deterministic for a seed."""
    rng = random.Random(seed)
    events: list[Event] = []
    for offset in range(_DAYS):
        day = _FIRST_DAY + timedelta(days=offset)
        for _ in range(rng.choice((0, 1, 1, 1, 2, 2))):
            topic = rng.choice(sorted(TOPICS))
            templates, slots, _ = TOPICS[topic]
            fill = {k: rng.choice(v) for k, v in slots.items()}
            text = rng.choice(templates).format(r=rng.choice(RESTAURANTS), f=rng.choice(FRIENDS), **fill)
            events.append(Event(f"e{len(events):05d}", text, _ms(day, rng.randint(7, 21)), topic))
    qs: list[Question] = []
    while len(qs) < questions:
        today = date(2023, 7, 1) + timedelta(days=rng.randrange(549))
        expr, lo, hi = rng.choice(_expressions(rng, today))
        topic = rng.choice(sorted(TOPICS))
        stem = rng.choice(TOPICS[topic][2])
        text = (
            f"{stem} {expr}?"
            if rng.random() < 0.7
            else f"{expr[0].upper() + expr[1:]}, {stem[0].lower() + stem[1:]}?"
        )
        qs.append(
            Question(
                text,
                _ms(today, 12),
                topic,
                expr,
                None if lo is None else _ms(lo),
                None if hi is None else _ms(hi),
            )
        )
    for _ in range(plain_questions):
        today = date(2023, 7, 1) + timedelta(days=rng.randrange(549))
        topic = rng.choice(sorted(TOPICS))
        stem = rng.choice(TOPICS[topic][2])
        tail = rng.choice(
            ("", f" with {rng.choice(FRIENDS)}", " on my own", f" at {rng.choice(RESTAURANTS)}", " the most")
        )
        qs.append(Question(f"{stem}{tail}?", _ms(today, 12), topic, None, None, None))
    return Dataset(tuple(events), tuple(qs))


if __name__ == "__main__":
    ds = build()
    print(f"{len(ds.events)} events, {len(ds.questions)} questions")
    for q in ds.questions[:5] + ds.questions[-3:]:
        print(q.text, q.expression, q.start, q.end)
