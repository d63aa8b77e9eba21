"""How a LangGraph item is kept as a memory, and LangGraph's matching rules: no I/O.

The mapping ``adapters.langgraph.LangGraphStore`` writes and reads by (its module
docstring says why each choice): the memory id of ``(namespace, key)``, the tags of
a namespace's prefixes, the text embedded, the item read back from a memory's
metadata; and the rules of LangGraph's ``InMemoryStore`` it must agree with (namespace
labels, prefix / suffix conditions, search filters). Imported by that module, after
it has checked that the ``langgraph`` extra is installed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    MatchCondition,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

from ..core.models import MemoryItem

__all__ = [
    "META",
    "check_labels",
    "index_text",
    "item_id",
    "item_record",
    "literal_prefix",
    "matches_filter",
    "matches_namespace",
    "namespace_tags",
    "op_labels",
    "prefix_tag",
    "to_item",
]

#: The metadata key holding the item as written.
META = "langgraph"


def _digest(parts: Sequence[Any]) -> str:
    return hashlib.sha256(json.dumps(list(parts), ensure_ascii=False).encode("utf-8")).hexdigest()


def item_id(scope: str, namespace: Sequence[str], key: str) -> str:
    """The memory id of ``(namespace, key)`` under ``scope``: ``lg-`` + 64 hex digits."""
    return "lg-" + _digest([scope, list(namespace), key])


def prefix_tag(scope: str, prefix: Sequence[str]) -> str:
    """The tag every item whose namespace starts with ``prefix`` carries (``()``: all of ``scope``)."""
    return f"lg{len(prefix)}-" + _digest([scope, *prefix])[:32]


def namespace_tags(scope: str, namespace: Sequence[str]) -> list[str]:
    """The tags of an item in ``namespace``: one per prefix, the empty one and the whole included."""
    return [prefix_tag(scope, namespace[:depth]) for depth in range(len(namespace) + 1)]


def check_labels(labels: Sequence[Any]) -> None:
    """LangGraph's namespace label rule (its ``_validate_namespace_labels``): non-empty strings, no ``.`` or NUL.

    Checked for ops given to ``batch`` directly, which skip ``BaseStore``'s methods (this
    adapter hashes labels, so a ``.`` would do no harm here, but other stores split on it).

    Raises:
        InvalidNamespaceError: a label breaks the rule.
    """
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} in {tuple(labels)}: labels are non-empty strings"
                " without periods ('.') or NUL bytes"
            )


def op_labels(op: Op) -> list[Sequence[Any]]:
    """The namespace paths an op carries."""
    if isinstance(op, GetOp | PutOp):
        return [op.namespace]
    if isinstance(op, SearchOp):
        return [op.namespace_prefix]
    return [c.path for c in getattr(op, "match_conditions", None) or ()]  # ListNamespacesOp (others: none)


def literal_prefix(path: Sequence[str]) -> tuple[str, ...]:
    """The leading labels of a match path before its first ``*`` wildcard."""
    out: list[str] = []
    for label in path:
        if label == "*":
            break
        out.append(label)
    return tuple(out)


def matches_namespace(condition: MatchCondition, namespace: Sequence[str]) -> bool:
    """Whether ``namespace`` meets a prefix / suffix condition (``*`` matches one label).

    The rule of LangGraph's ``InMemoryStore`` (``_does_match``, MIT).
    """
    path = tuple(condition.path)
    match_type: str = condition.match_type  # typed as a Literal; checked all the same
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def matches_filter(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether an item's value meets a LangGraph search filter.

    Equality (nested dicts, lists element-wise) or operators ``$eq``, ``$ne``, ``$gt``,
    ``$gte``, ``$lt``, ``$lte`` (numbers), as LangGraph's ``InMemoryStore`` decides
    (``_compare_values``, MIT), so both stores return the same items.

    Raises:
        ValueError: an unknown ``$`` operator.
    """
    return not flt or all(_compare(value.get(k), v) for k, v in flt.items())


def _compare(item_value: Any, filter_value: Any) -> bool:
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(_operator(item_value, op, v) for op, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(_compare(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, list | tuple):
        return (
            isinstance(item_value, list | tuple)
            and len(item_value) == len(filter_value)
            and all(_compare(i, f) for i, f in zip(item_value, filter_value, strict=False))
        )
    return bool(item_value == filter_value)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        a, b = float(value), float(operand)
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]
    raise ValueError(f"Unsupported operator: {operator}")


def index_text(value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text embedded for ``value``: the strings at ``fields`` (LangGraph paths), one per line."""
    texts: list[str] = []
    for path in fields:
        texts.extend(get_text_at_path(value, path if path == "$" else tokenize_path(path)))
    return "\n".join(t for t in texts if t.strip())


def _when(epoch_ms: int | float) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000.0, tz=UTC)


def item_record(memory: MemoryItem) -> dict[str, Any] | None:
    """The item as written, from a memory's metadata (None: not one of this adapter's memories)."""
    meta = memory.metadata.get(META) if isinstance(memory.metadata, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("value"), dict):
        return None
    return meta


def to_item(memory: MemoryItem, *, score: float | None = None, search: bool = False) -> Item | None:
    """The LangGraph ``Item`` (``SearchItem`` when ``search``) a memory holds, or None if it holds none."""
    meta = item_record(memory)
    if meta is None:
        return None
    fields: dict[str, Any] = {
        "value": meta["value"],
        "key": str(meta["key"]),
        "namespace": tuple(meta["namespace"]),
        "created_at": _when(memory.created_at),
        # A first put's memory is created a moment after its update time was taken.
        "updated_at": _when(max(memory.created_at, meta.get("updated_at") or 0)),
    }
    return SearchItem(**fields, score=score) if search else Item(**fields)
