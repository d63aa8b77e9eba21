"""A ``where`` tree evaluated in Python over one memory's stored fields: the client-side check.

Results of a filtered query are checked again here, as scopes are
(``query.item_matches``): an index created by another library (case-insensitive TAG
fields) can widen a positive tag condition, never a result this check lets through.
The differential test holds the engine's answers to this function's, filter by filter.

It reads the document as the engine indexes it: TAG values as stored (a multi-valued
field split on ``,``), numbers parsed as floats (a value that does not parse, or is not
finite, is missing, as for the engine, which would not index it), a declared tag
field's presence from the ``present`` field, and a field with a fallback (``valid_from``)
from its fallback when absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .codec import as_text
from .filter_fields import PRESENCE_FIELD, FieldSpec
from .filters import And, Const, Exists, Match, Node, Not, Or, Range

__all__ = ["evaluate", "referenced_fields"]


def _number(fields: Mapping[str, Any], name: str) -> float | None:
    raw = fields.get(name)
    if raw is None:
        return None
    try:
        out = float(raw)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _numeric_value(fields: Mapping[str, Any], spec: FieldSpec) -> float | None:
    value = _number(fields, spec.doc_field)
    if value is None and spec.fallback is not None:
        return _number(fields, spec.fallback)
    return value


def _tag_values(fields: Mapping[str, Any], spec: FieldSpec) -> list[str]:
    text = as_text(fields.get(spec.doc_field))
    if not text:
        return []
    return [v for v in text.split(",") if v] if spec.multi else [text]


def evaluate(node: Node, fields: Mapping[str, Any]) -> bool:
    """Whether a memory's HASH fields (``str`` keys; ``bytes`` or ``str`` values) satisfy the filter."""
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Match):
        spec = node.field
        if spec.type == "tag":
            return not set(_tag_values(fields, spec)).isdisjoint(node.values)
        number = _numeric_value(fields, spec)
        return number is not None and number in node.values
    if isinstance(node, Range):
        number = _numeric_value(fields, node.field)
        if number is None:
            return False
        if node.low is not None and (number < node.low or (number == node.low and not node.low_inclusive)):
            return False
        return node.high is None or number < node.high or (number == node.high and node.high_inclusive)
    if isinstance(node, Exists):
        spec = node.field
        if spec.exists_by == "presence":
            return spec.name in as_text(fields.get(PRESENCE_FIELD)).split(",")
        return _numeric_value(fields, spec) is not None
    if isinstance(node, Not):
        return not evaluate(node.child, fields)
    if isinstance(node, And):
        return all(evaluate(c, fields) for c in node.children)
    return any(evaluate(c, fields) for c in node.children)


def referenced_fields(node: Node) -> tuple[str, ...]:
    """The HASH fields ``evaluate`` reads for this filter, sorted (what a query must RETURN to re-check)."""
    out: set[str] = set()

    def walk(n: Node) -> None:
        if isinstance(n, Match | Range | Exists):
            if isinstance(n, Exists) and n.field.exists_by == "presence":
                out.add(PRESENCE_FIELD)
            else:
                out.add(n.field.doc_field)
                if n.field.fallback:
                    out.add(n.field.fallback)
        elif isinstance(n, Not):
            walk(n.child)
        elif isinstance(n, And | Or):
            for c in n.children:
                walk(c)

    walk(node)
    return tuple(sorted(out))
