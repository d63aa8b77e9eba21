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


def test_int_not_bool_is_written_once() -> None:
    """No module but core/arguments.py spells "an int, not a bool" by hand (use is_int / check_int)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "betterdb_memory"

    def isinstance_of(node: ast.AST) -> tuple[str, str] | None:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node = node.operand
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            return ast.unparse(node.args[0]), ast.unparse(node.args[1])
        return None

    copies = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "arguments.py" and path.parent.name == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.BoolOp):
                continue
            checks = [c for c in map(isinstance_of, node.values) if c is not None]
            subjects_bool = {s for s, kind in checks if kind == "bool"}
            subjects_num = {s for s, kind in checks if "int" in kind or "float" in kind}
            if subjects_bool & subjects_num:
                copies.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert not copies, f"hand-written int-not-bool checks: {copies}"
