"""LangGraph ``search(filter=...)`` on indexed fields: which value keys are declared, what a put
indexes, and which part of a filter the index answers. No I/O.

``LangGraphStore(..., filter_fields={"status": "tag", "priority": "numeric"})`` names
top-level keys of the items' values; the store declares them as metadata fields
``lg_<key>`` (``store_fields``: ``MemoryStore(metadata_fields=store_fields(...))``).
A put copies each declared key's value into the memory's metadata (``indexed_values``),
refusing a value the index and LangGraph's own comparison could disagree on: a tag
field holds one string (LangGraph compares a list by equality, the index by
membership), a numeric field one int or float (not a bool).

A filter is split (``split_filter``): a declared key whose condition is a scalar of its
type, or ``$eq $ne`` (both types) and ``$gt $gte $lt $lte`` (numeric) with operands of
its type, becomes ``where`` (answered by the index); everything else (undeclared keys,
nested dicts, list equality, an operand of another type, unknown operators) stays for
``matches_filter`` on the pages the index returns. The one difference left:
LangGraph's ``InMemoryStore`` raises on ``$gt`` over a missing key, the index finds no
match there (MongoDB's rule).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from ..core.arguments import is_number
from ..core.escaping import validate_tag_value
from ..errors import ConfigurationError, ValidationError

__all__ = [
    "FIELD_PREFIX",
    "check_filter_fields",
    "declared_filter_fields",
    "indexed_values",
    "split_filter",
    "store_fields",
]

#: A declared LangGraph key ``k`` is the store's metadata field ``lg_k``.
FIELD_PREFIX = "lg_"

FieldType = Literal["numeric", "tag"]
_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,60}$")
_RANGE = ("$gt", "$gte", "$lt", "$lte")


def check_filter_fields(filter_fields: object) -> dict[str, FieldType]:
    """``filter_fields`` checked: a mapping of value key -> ``"tag"`` | ``"numeric"``.

    Raises:
        ConfigurationError: not a mapping, a key that is not an identifier, another type.
    """
    if filter_fields is None:
        return {}
    if not isinstance(filter_fields, Mapping):
        raise ConfigurationError(
            "filter_fields must be a mapping of value key -> 'tag' | 'numeric'",
            code="configuration.type",
            details={"argument": "filter_fields"},
        )
    out: dict[str, FieldType] = {}
    for key, ftype in filter_fields.items():
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise ConfigurationError(
                f"filter_fields key {key!r} must be a letter then letters, digits or '_' (at most 61)",
                code="configuration.field_name",
                details={"argument": "filter_fields", "field": repr(key)},
            )
        if ftype not in ("tag", "numeric"):
            raise ConfigurationError(
                f"filter_fields[{key!r}] is {ftype!r}; one of 'tag', 'numeric'",
                code="configuration.choice",
                details={"argument": "filter_fields", "field": key, "allowed": ["numeric", "tag"]},
            )
        out[key] = "numeric" if ftype == "numeric" else "tag"
    return out


def store_fields(filter_fields: Mapping[str, str]) -> dict[str, FieldType]:
    """The ``MemoryStore(metadata_fields=...)`` declaration a ``LangGraphStore``'s ``filter_fields`` need."""
    return {FIELD_PREFIX + k: t for k, t in check_filter_fields(filter_fields).items()}


def declared_filter_fields(filter_fields: object, declared: Mapping[str, str]) -> dict[str, FieldType]:
    """``filter_fields`` checked, and checked to be declared by the store (``declared``: its
    ``metadata_fields``) with the same types.

    Raises:
        ConfigurationError: see ``check_filter_fields``; or the store lacks one of them.
    """
    fields = check_filter_fields(filter_fields)
    wanted = store_fields(fields)
    if any(declared.get(name) != ftype for name, ftype in wanted.items()):
        raise ConfigurationError(
            f"filter_fields need the store to declare them: MemoryStore(metadata_fields={wanted!r}) "
            "(LangGraphStore.store_fields(filter_fields) builds it)",
            code="configuration.invalid",
            details={"argument": "filter_fields", "needed": dict(wanted)},
        )
    return fields


def _fits(ftype: FieldType, value: object) -> bool:
    return isinstance(value, str) if ftype == "tag" else is_number(value)


def _operand(ftype: FieldType, value: object) -> bool:
    """A filter operand the index can take: of the field's type, and a tag value the store could
    hold (one it would refuse on a put can match nothing: the client path says so)."""
    if not _fits(ftype, value):
        return False
    if ftype == "tag":
        try:
            validate_tag_value(value, name="filter")
        except ValidationError:
            return False
    return True


def indexed_values(value: Mapping[str, Any], fields: Mapping[str, FieldType]) -> dict[str, Any]:
    """The metadata a put adds: ``lg_<key>`` for each declared key the value holds (not None).

    Raises:
        ValidationError: ``validation.metadata_field``, a value that does not fit its type.
    """
    out: dict[str, Any] = {}
    for key, ftype in fields.items():
        v = value.get(key)
        if v is None:
            continue
        if not _fits(ftype, v):
            raise ValidationError(
                f"value[{key!r}] is a declared {ftype} filter field: "
                + ("one string" if ftype == "tag" else "an int or float (not a bool)")
                + f", not {type(v).__name__}",
                code="validation.metadata_field",
                details={"argument": "value", "field": key, "reason": "type"},
            )
        out[FIELD_PREFIX + key] = v
    return out


def _translated(ftype: FieldType, cond: object) -> object | None:
    """The ``where`` condition of one declared key's LangGraph condition, or None (client-side)."""
    if not isinstance(cond, Mapping):
        return cond if _operand(ftype, cond) else None
    if not cond:
        return None
    allowed = ("$eq", "$ne", *(_RANGE if ftype == "numeric" else ()))
    if all(isinstance(op, str) and op in allowed and _operand(ftype, v) for op, v in cond.items()):
        return dict(cond)
    return None


def split_filter(
    flt: Mapping[str, Any] | None, fields: Mapping[str, FieldType]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``where`` for the index, the rest for ``matches_filter``) of a LangGraph filter."""
    where: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, cond in (flt or {}).items():
        ftype = fields.get(key)
        translated = None if ftype is None else _translated(ftype, cond)
        if translated is None:
            rest[key] = cond
        else:
            where[FIELD_PREFIX + key] = translated
    return where, rest
