"""The one set of argument validators: "an int, not a bool, within bounds", and which class a mistake raises.

Which class a bad value raises depends on where the value was given, never on which
helper checks it:

* ``ConfigurationError`` (``configuration.<reason>``): a value that configures an object
  for its life: constructor and ``connect`` arguments (the store, embedders,
  summarisers, adapters), option dataclasses (``ContextBudget``, ...) and live-config
  fields. The validators take ``setting=True`` there.
* ``ValidationError`` (``validation.<reason>``): an argument of one operation
  (``remember``, ``recall``, ``store_turn``, ``list``, ``reembed``, ...); nothing was sent.

``ConfigurationError`` is a ``ValidationError``, so ``except ValidationError`` catches
both. One code per mistake in each family: ``.type`` (not an int / a number, or a
bool where a number is wanted), ``.nonfinite`` (NaN or infinity) and ``.range``
(outside the allowed bounds). ``is_int`` / ``is_number`` are the predicates behind them, for code that
filters instead of raising ("int, not bool" is written here and nowhere else).
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from ..errors import ConfigurationError, ValidationError

__all__ = ["check_int", "check_number", "is_int", "is_number"]


# -- numbers: "an int, not a bool, within bounds" ---------------------------------------------


# A tuple, not ``int | float``: ``isinstance`` with a union expression builds the union per
# call and takes a slower path; every numeric argument of every call is checked here.
_NUMBERS = (int, float)


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool`` (``True`` is an ``int`` to Python, never a count to us)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An ``int`` or ``float`` that is not a ``bool`` (finite or not)."""
    return isinstance(value, _NUMBERS) and not isinstance(value, bool)


def _bounds(minimum: float | None, maximum: float | None, positive: bool) -> str:
    if positive and maximum is None:
        return " > 0"
    if positive:
        return f" within 0..{maximum} (not 0)"
    if minimum is not None and maximum is not None:
        return f" within {minimum}..{maximum}"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def _invalid(name: str, message: str, mistake: str, *, setting: bool, **details: Any) -> ValidationError:
    """The error for one bad value: the class and code family by ``setting``, the reason by ``mistake``.

    Each code is spelled out (no f-string) so the catalog test finds it in the source.
    """
    info = {"argument": name, **details}
    if setting:
        if mistake == "range":
            return ConfigurationError(message, code="configuration.range", details=info)
        if mistake == "nonfinite":
            return ConfigurationError(message, code="configuration.nonfinite", details=info)
        return ConfigurationError(message, code="configuration.type", details=info)
    if mistake == "range":
        return ValidationError(message, code="validation.range", details=info)
    if mistake == "nonfinite":
        return ValidationError(message, code="validation.nonfinite", details=info)
    return ValidationError(message, code="validation.type", details=info)


def check_int(
    value: object,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    setting: bool = False,
) -> int:
    """``value`` as an ``int`` (not a ``bool``) within ``minimum..maximum`` (either may be open).

    Raises:
        ValidationError / ConfigurationError (``setting``): ``.type`` when it is not an
            int, ``.range`` when it is out of bounds.
    """
    if not is_int(value):
        what = f"{name} must be an integer{_bounds(minimum, maximum, False)}, not {value!r}"
        raise _invalid(name, what, "type", setting=setting, type=type(value).__name__)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        what = f"{name} must be an integer{_bounds(minimum, maximum, False)}, not {value!r}"
        raise _invalid(name, what, "range", setting=setting, min=minimum, max=maximum)
    return value


def check_number(
    value: object,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    positive: bool = False,
    setting: bool = False,
) -> float:
    """``value`` as a finite ``float`` (an int or float, not a ``bool``) within bounds.

    ``positive``: above 0 (0 itself refused); ``minimum`` / ``maximum`` are inclusive.

    Raises:
        ValidationError / ConfigurationError (``setting``): ``.type`` when it is not a
            number, ``.nonfinite`` for NaN or infinity, ``.range`` when it is out of bounds.
    """
    # The message is built only for a bad value: these checks run on every call's arguments.
    if not is_number(value):
        what = f"{name} must be a finite number{_bounds(minimum, maximum, positive)}, not {value!r}"
        raise _invalid(name, what, "type", setting=setting, type=type(value).__name__)
    out = float(value)
    if not math.isfinite(out):
        what = f"{name} must be a finite number{_bounds(minimum, maximum, positive)}, not {value!r}"
        raise _invalid(name, what, "nonfinite", setting=setting)
    if (
        (positive and out <= 0)
        or (minimum is not None and out < minimum)
        or (maximum is not None and out > maximum)
    ):
        what = f"{name} must be a finite number{_bounds(minimum, maximum, positive)}, not {value!r}"
        raise _invalid(name, what, "range", setting=setting, min=minimum, max=maximum)
    return out
