"""Names (core/names.py): ``name_mates`` gives the pairs ``same_name`` gives, pair by pair.

The rest of the module (leading names, name runs) is tested with the rule it serves,
in test_core_supersession.py.
"""

from __future__ import annotations

import itertools
import random

import pytest

from betterdb_memory.core.names import SELF_NAME, name_mates, namesake, same_name


def _brute(names: list[str | None]) -> list[list[int]]:
    return [
        [j for j, b in enumerate(names) if j != i and a and b and same_name(a, b)]
        for i, a in enumerate(names)
    ]


def test_name_mates_by_example() -> None:
    names = [
        "ada moreau",
        "ada",
        "moreau",
        "greta zeller",
        "greta ashby",
        None,
        "ada",
        SELF_NAME,
        SELF_NAME,
        "",
    ]
    assert name_mates(names) == [[1, 2, 6], [0, 6], [0], [], [], [], [0, 1], [8], [7], []]


def test_parts_must_be_whole_words_at_either_end() -> None:
    # "ada maria" is a first part of "ada maria moreau", "maria" a middle one, "ad" no word.
    names = ["ada maria moreau", "ada maria", "maria", "ad", "maria moreau", "ada moreau"]
    assert name_mates(names) == _brute(names)
    assert name_mates(names)[0] == [1, 4]


@pytest.mark.parametrize("seed", range(20))
def test_name_mates_is_same_name_pair_by_pair(seed: int) -> None:
    rng = random.Random(seed)
    words = ["ada", "moreau", "greta", "zeller", "ashby", "ivan", "reyes", "12", SELF_NAME]
    pool: list[str | None] = [None]
    for n in (1, 2, 3):
        pool += [" ".join(w) for w in itertools.islice(itertools.permutations(words, n), 40)]
    names = [rng.choice(pool) for _ in range(rng.randint(0, 60))]
    assert name_mates(names) == _brute(names)


@pytest.mark.parametrize("seed", range(20))
def test_name_groups_are_name_mates_by_name(seed: int) -> None:
    """Each listed group less an index is that index's mates; an index in no group has none."""
    from betterdb_memory.core.names import name_groups

    rng = random.Random(seed)
    pool = ["ada", "ada moreau", "moreau", "greta zeller", "greta", "<self>", "tom", "lena park", None, ""]
    names = [rng.choice(pool) for _ in range(rng.randint(0, 40))]
    mates = name_mates(names)
    grouped: dict[int, list[int]] = {}
    for own, group in name_groups(names):
        assert group == sorted(group) and set(own) <= set(group) and len(group) > 1
        for i in own:
            assert i not in grouped
            grouped[i] = [j for j in group if j != i]
    assert [grouped.get(i, []) for i in range(len(names))] == mates


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("kwame westleigh", "kwame northleigh", True),  # one first name, two people
        ("greta zeller", "anna zeller", True),  # one surname, two people
        ("kwame westleigh", "kwame", False),  # the same name, shortened
        ("ada moreau", "ada moreau", False),
        ("ada moreau", "bruno costa", False),  # nothing shared
        (SELF_NAME, "ada", False),
    ],
)
def test_namesake(a: str, b: str, expected: bool) -> None:
    assert namesake(a, b) is expected and namesake(b, a) is expected
