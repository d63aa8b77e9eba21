"""core.arguments: the one set of numeric validators, one code per mistake, the class by where the value was given."""

from __future__ import annotations

import math

import pytest

from betterdb_memory.core.arguments import check_int, check_number, is_int, is_number
from betterdb_memory.errors import ConfigurationError, ValidationError


@pytest.mark.parametrize(
    ("value", "expected"), [(1, True), (0, True), (True, False), (1.0, False), ("1", False)]
)
def test_is_int_refuses_bools(value: object, expected: bool) -> None:
    assert is_int(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, True), (1.5, True), (math.nan, True), (False, False), ("1", False), (None, False)],
)
def test_is_number_refuses_bools_and_strings(value: object, expected: bool) -> None:
    assert is_number(value) is expected


@pytest.mark.parametrize(
    ("value", "reason"), [(True, "type"), ("3", "type"), (3.0, "type"), (0, "range"), (11, "range")]
)
@pytest.mark.parametrize("setting", [False, True])
def test_check_int_one_code_per_mistake(value: object, reason: str, setting: bool) -> None:
    with pytest.raises(ValidationError) as caught:
        check_int(value, "n", minimum=1, maximum=10, setting=setting)
    family = "configuration" if setting else "validation"
    assert caught.value.code == f"{family}.{reason}"
    assert type(caught.value) is (ConfigurationError if setting else ValidationError)
    assert caught.value.details["argument"] == "n"
    assert "n must be an integer within 1..10" in caught.value.message


def test_check_int_returns_the_value_and_leaves_open_bounds_open() -> None:
    assert check_int(5, "n") == 5
    assert check_int(-5, "n", maximum=0) == -5
    assert check_int(10**12, "n", minimum=0) == 10**12


@pytest.mark.parametrize(
    ("value", "kwargs", "reason"),
    [
        (False, {}, "type"),
        ("1", {}, "type"),
        (math.nan, {}, "nonfinite"),
        (math.inf, {"minimum": 0.0}, "nonfinite"),
        (0, {"positive": True}, "range"),
        (-0.5, {"minimum": 0.0}, "range"),
        (2.5, {"minimum": 0.0, "maximum": 2.0}, "range"),
    ],
)
@pytest.mark.parametrize("setting", [False, True])
def test_check_number_one_code_per_mistake(
    value: object, kwargs: dict[str, float], reason: str, setting: bool
) -> None:
    with pytest.raises(ValidationError) as caught:
        check_number(value, "x", setting=setting, **kwargs)  # type: ignore[arg-type]
    assert caught.value.code == ("configuration." if setting else "validation.") + reason


def test_check_number_gives_a_float() -> None:
    out = check_number(3, "x", positive=True)
    assert out == 3.0 and isinstance(out, float)
    assert check_number(0, "x", minimum=0.0) == 0.0
