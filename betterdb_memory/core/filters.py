"""The ``where=`` filter language: parsed and checked into a small typed tree, before any I/O.

The language (MongoDB's operators and meaning, over the fields of
``filter_fields.FilterSchema``)::

    {"priority": {"$gte": 2}, "project": {"$in": ["apollo", "gemini"]},
     "$or": [{"source": "web"}, {"tags": "urgent"}], "$not": {"thread_id": "t1"}}

* keys of one mapping are ANDed; a bare value means ``$eq``;
* field operators: ``$eq $ne $gt $gte $lt $lte $in $nin $exists`` (``$gt``... on
  numeric fields only); logical: ``$and`` / ``$or`` (a non-empty list of filters),
  ``$not`` (one filter);
* MongoDB's semantics: a comparison on a missing field is false; ``$ne`` / ``$nin``
  match a memory without the field; ``$exists`` tests presence. A multi-valued TAG
  (``tags``, a declared tag field holding a list) matches ``$eq`` / ``$in`` when any of
  its values does, as MongoDB's arrays do.

Two-valued logic makes the tree small: ``$ne`` is ``Not(Match)``, ``$nin`` is
``Not(Match)`` of the list, ``$exists: false`` is ``Not(Exists)``, and constants fold
(``{}`` is ``TRUE``; ``$exists`` on a field every memory has is a constant). The engine
query (``filter_query``) and the client-side check (``filter_eval``) read the same tree.

Bounds (documented in the README's filter table): at most ``MAX_FILTER_DEPTH`` nested
``$and`` / ``$or`` / ``$not``, at most ``MAX_FILTER_TERMS`` terms (each operator counts
one, each value of an ``$in`` / ``$nin`` list one). Every mistake is a
``ValidationError`` with a ``validation.filter_*`` code and ``details`` naming the path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from ..errors import ValidationError
from .arguments import is_number
from .escaping import validate_tag_value
from .filter_fields import FieldSpec, FilterSchema, numeric_value

__all__ = [
    "FALSE",
    "FIELD_OPERATORS",
    "LOGICAL_OPERATORS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_TERMS",
    "TRUE",
    "And",
    "Const",
    "Exists",
    "Match",
    "Node",
    "Not",
    "Or",
    "Range",
    "and_",
    "not_",
    "or_",
    "parse_where",
]

#: Nested ``$and`` / ``$or`` / ``$not`` levels a filter may have.
MAX_FILTER_DEPTH: Final = 8
#: Terms a filter may have: each operator one, each ``$in`` / ``$nin`` value one.
MAX_FILTER_TERMS: Final = 128

FIELD_OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
LOGICAL_OPERATORS: Final = ("$and", "$or", "$not")
_RANGE_OPS: Final = ("$gt", "$gte", "$lt", "$lte")


# -- the tree -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Const:
    """Matches every memory (``TRUE``) or none (``FALSE``)."""

    value: bool


TRUE: Final = Const(True)
FALSE: Final = Const(False)


@dataclass(frozen=True, slots=True)
class Match:
    """The field holds one of ``values`` (``$eq``, ``$in``); false when it is missing."""

    field: FieldSpec
    values: tuple[str, ...] | tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Range:
    """A numeric field within bounds (``$gt`` ``$gte`` ``$lt`` ``$lte``); false when it is missing."""

    field: FieldSpec
    low: float | None = None
    low_inclusive: bool = True
    high: float | None = None
    high_inclusive: bool = True


@dataclass(frozen=True, slots=True)
class Exists:
    """The field is present (``$exists: true``)."""

    field: FieldSpec


@dataclass(frozen=True, slots=True)
class Not:
    child: Node


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Node, ...]


Node: TypeAlias = Const | Match | Range | Exists | Not | And | Or


def and_(children: Sequence[Node]) -> Node:
    """AND, flattened and folded: ``TRUE`` parts dropped, any ``FALSE`` makes it ``FALSE``."""
    out: list[Node] = []
    for c in children:
        if c == FALSE:
            return FALSE
        if c == TRUE:
            continue
        out.extend(c.children if isinstance(c, And) else (c,))
    return TRUE if not out else out[0] if len(out) == 1 else And(tuple(out))


def or_(children: Sequence[Node]) -> Node:
    """OR, flattened and folded: ``FALSE`` parts dropped, any ``TRUE`` makes it ``TRUE``."""
    out: list[Node] = []
    for c in children:
        if c == TRUE:
            return TRUE
        if c == FALSE:
            continue
        out.extend(c.children if isinstance(c, Or) else (c,))
    return FALSE if not out else out[0] if len(out) == 1 else Or(tuple(out))


def not_(child: Node) -> Node:
    """NOT, folded (constants flip, a double negation cancels: the logic is two-valued)."""
    if isinstance(child, Const):
        return Const(not child.value)
    if isinstance(child, Not):
        return child.child
    return Not(child)


# -- parsing ------------------------------------------------------------------------------


def _error(message: str, code: str, path: str, **details: Any) -> ValidationError:
    return ValidationError(message, code=code, details={"argument": "where", "path": path, **details})


class _Parser:
    def __init__(self, schema: FilterSchema) -> None:
        self.schema = schema
        self.terms = 0

    def count(self, n: int, path: str) -> None:
        self.terms += n
        if self.terms > MAX_FILTER_TERMS:
            raise _error(
                f"the filter has more than {MAX_FILTER_TERMS} terms (operators and list values)",
                "validation.filter_size",
                path,
                max=MAX_FILTER_TERMS,
            )

    def document(self, where: object, path: str, depth: int) -> Node:
        if not isinstance(where, Mapping):
            raise _error(
                f"{path} must be a mapping of field -> condition, not {type(where).__name__}",
                "validation.filter_type",
                path,
            )
        parts: list[Node] = []
        for key, value in where.items():
            if not isinstance(key, str):
                raise _error(f"{path}: field names are strings, not {key!r}", "validation.filter_field", path)
            sub = f"{path}.{key}"
            if key.startswith("$"):
                parts.append(self.logical(key, value, sub, depth))
            else:
                parts.append(self.field(key, value, sub))
        return and_(parts)

    def logical(self, op: str, value: object, path: str, depth: int) -> Node:
        if op not in LOGICAL_OPERATORS:
            hint = " (a field operator: write {field: {op: value}})" if op in FIELD_OPERATORS else ""
            raise _error(
                f"unknown operator {op!r} here{hint}; allowed: {', '.join(LOGICAL_OPERATORS)}",
                "validation.filter_operator",
                path,
                operator=op,
            )
        if depth + 1 > MAX_FILTER_DEPTH:
            raise _error(
                f"the filter nests $and/$or/$not deeper than {MAX_FILTER_DEPTH} levels",
                "validation.filter_depth",
                path,
                max=MAX_FILTER_DEPTH,
            )
        if op == "$not":
            return not_(self.document(value, path, depth + 1))
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise _error(f"{op} takes a list of filters", "validation.filter_type", path, operator=op)
        if not value:
            raise _error(f"{op} needs at least one filter", "validation.filter_empty", path, operator=op)
        children = [self.document(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        return and_(children) if op == "$and" else or_(children)

    def field(self, name: str, cond: object, path: str) -> Node:
        spec = self.schema.get(name)
        if spec is None:
            raise _error(
                f"{name!r} is not a field filters can use here; declare a metadata key in "
                f"metadata_fields to filter on it (fields: {', '.join(self.schema.names)})",
                "validation.filter_field",
                path,
                field=name,
            )
        if not isinstance(cond, Mapping):
            return self.operator(spec, "$eq", cond, path)
        if not cond:
            raise _error(f"{path}: an empty condition", "validation.filter_empty", path, field=name)
        parts: list[Node] = []
        for op, value in cond.items():
            if not isinstance(op, str) or not op.startswith("$"):
                raise _error(
                    f"{path}: {op!r} is not an operator (nested keys are not indexed; "
                    f"operators: {', '.join(FIELD_OPERATORS)})",
                    "validation.filter_operator",
                    path,
                    field=name,
                    operator=repr(op),
                )
            parts.append(self.operator(spec, op, value, f"{path}.{op}"))
        return and_(parts)

    def operator(self, spec: FieldSpec, op: str, value: object, path: str) -> Node:
        if op not in FIELD_OPERATORS:
            raise _error(
                f"unknown operator {op!r} on {spec.name!r}; allowed: {', '.join(FIELD_OPERATORS)}",
                "validation.filter_operator",
                path,
                field=spec.name,
                operator=op,
            )
        if op == "$exists":
            return self.exists(spec, value, path)
        if op in ("$in", "$nin"):
            if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
                raise _error(
                    f"{op} on {spec.name!r} takes a list of values",
                    "validation.filter_type",
                    path,
                    operator=op,
                )
            if not value:
                raise _error(f"{op} needs at least one value", "validation.filter_empty", path, operator=op)
            self.count(len(value), path)
            values = self.values(spec, op, value, path)
            match = Match(spec, values)
            return match if op == "$in" else not_(match)
        self.count(1, path)
        if op in _RANGE_OPS:
            if spec.type != "numeric":
                raise _error(
                    f"{op} compares numbers; {spec.name!r} is a tag field (use $eq/$ne/$in/$nin)",
                    "validation.filter_type",
                    path,
                    field=spec.name,
                    operator=op,
                )
            bound = float(self.values(spec, op, [value], path)[0])  # a numeric field's values are floats
            if op in ("$gt", "$gte"):
                return Range(spec, low=bound, low_inclusive=op == "$gte")
            return Range(spec, high=bound, high_inclusive=op == "$lte")
        if isinstance(value, list | tuple):
            raise _error(
                f"{op} on {spec.name!r} takes one value; use $in / $nin for a list",
                "validation.filter_type",
                path,
                field=spec.name,
                operator=op,
            )
        match = Match(spec, self.values(spec, op, [value], path))
        return match if op == "$eq" else not_(match)

    def exists(self, spec: FieldSpec, value: object, path: str) -> Node:
        self.count(1, path)
        if not isinstance(value, bool):
            raise _error(
                f"$exists takes True or False, not {value!r}",
                "validation.filter_type",
                path,
                operator="$exists",
            )
        if spec.exists_by is None:
            raise _error(
                f"$exists is not available on {spec.name!r}: betterdb-agent-memory writes it without a "
                "presence marker, so no engine could answer it exactly (use $ne / $nin, or a declared field)",
                "validation.filter_operator",
                path,
                field=spec.name,
                operator="$exists",
            )
        node: Node = TRUE if spec.exists_by == "always" else Exists(spec)
        return node if value else not_(node)

    def values(
        self, spec: FieldSpec, op: str, raw: Sequence[object], path: str
    ) -> tuple[str, ...] | tuple[float, ...]:
        if spec.type == "numeric":
            numbers: list[float] = []
            for v in raw:
                number = numeric_value(v, time=spec.time)
                if number is None:
                    finite = is_number(v)
                    kind = "a time (epoch ms or datetime)" if spec.time else "a number"
                    raise _error(
                        f"{op} on numeric field {spec.name!r} takes {kind}"
                        + (" that is finite" if finite else f", not {type(v).__name__}"),
                        "validation.filter_value" if finite else "validation.filter_type",
                        path,
                        field=spec.name,
                        operator=op,
                    )
                numbers.append(number)
            return tuple(dict.fromkeys(numbers))
        texts: list[str] = []
        for v in raw:
            if not isinstance(v, str):
                raise _error(
                    f"{op} on tag field {spec.name!r} takes strings, not {type(v).__name__}",
                    "validation.filter_type",
                    path,
                    field=spec.name,
                    operator=op,
                )
            try:
                texts.append(validate_tag_value(v, name=spec.name))
            except ValidationError as exc:
                raise _error(
                    f"{op} on {spec.name!r}: {exc.message}",
                    "validation.filter_value",
                    path,
                    field=spec.name,
                    operator=op,
                    reason=exc.code,
                ) from exc
        return tuple(dict.fromkeys(texts))


def parse_where(where: object, schema: FilterSchema) -> Node:
    """Check a ``where=`` argument and build its tree (``TRUE`` for ``None`` or ``{}``).

    Args:
        where: the filter (``None``: no filter).
        schema: the fields this store's index can filter on.

    Raises:
        ValidationError: ``validation.filter_field`` (a field that is not built in nor
            declared), ``validation.filter_operator`` (an unknown or misplaced operator,
            ``$exists`` on a field that cannot tell), ``validation.filter_type`` (a value
            or operator that does not fit the field's type: ``$gt`` on a tag, a string for
            a number, a bool, a scalar for ``$in``), ``validation.filter_value`` (NaN or
            infinity, a tag value breaking the scope-value rules), ``validation.filter_empty``
            (an empty ``$in`` / ``$nin`` / ``$and`` / ``$or`` or condition),
            ``validation.filter_depth``, ``validation.filter_size``.
    """
    if where is None:
        return TRUE
    return _Parser(schema).document(where, "where", 0)
