"""A ``where=`` argument on its way into a store query: parsed before I/O, compiled for the index in use.

Two steps, because what a filter may name depends on two things known at different times:

1. ``parse`` (at the API boundary, before any I/O): the store's declaration
   (``metadata_fields``) decides which fields exist and their types; a mistake is a
   ``ValidationError`` and nothing is sent.
2. ``compile_for`` (once the index is known, ``IndexManager.ensure_ready``): the index
   in use may lack a declared field (an index made before the declaration, until the
   build-beside-and-switch migration has run) or ``valid_from`` (an index made before
   time-aware memory). Naming such a field is refused (``validation.filter_field``,
   ``details["reason"] == "indexing"``) rather than answered from a partial index: on
   valkey-search an unknown field is an error, on RediSearch an empty result
   (shared/VALKEY_SEARCH_DIALECT.md, point 8).

The result, ``Where``, is what ``query.MemoryFilter.where`` holds: the compiled text that
``query.build_filter`` appends as one AND clause, the HASH fields the client-side
re-check reads, and that re-check (``filter_eval.evaluate``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ValidationError
from .dialect import Capabilities, capabilities_for
from .filter_eval import evaluate, referenced_fields
from .filter_fields import DECLARED_PREFIX, PRESENCE_FIELD, FilterSchema, MetadataFields
from .filter_query import compile_where
from .filters import TRUE, Node, parse_where
from .query import CHECK_FIELDS, IndexLayout, MemoryFilter, item_matches
from .where_clause import WhereClause

__all__ = [
    "MAX_QUERY_BYTES",
    "Where",
    "check_fields",
    "check_query_size",
    "compile_for",
    "names_declared",
    "parse",
    "result_matches",
]

#: Bytes a whole query string may take: valkey-search refuses longer ones. The same bound on
#: RediSearch, so a filter is accepted or refused alike on every engine.
MAX_QUERY_BYTES: Final = 10_240
_ANY_ENGINE: Final = capabilities_for("redisearch", (2, 10, 0))


@dataclass(frozen=True, slots=True)
class Where:
    """A parsed ``where`` compiled for one index (``query.WhereClause``).

    Attributes:
        node: the filter tree (``filters.parse_where``).
        text: its query text (``filter_query.compile_where``), one AND clause.
        fields: the HASH fields ``matches`` reads (RETURNed by a query that re-checks).
    """

    node: Node
    text: str
    fields: tuple[str, ...]

    def matches(self, fields: Mapping[str, Any]) -> bool:
        """The client-side re-check of one result's raw fields (``filter_eval.evaluate``)."""
        return evaluate(self.node, fields)


def parse(where: object, declared: MetadataFields) -> Node | None:
    """Check a ``where=`` argument against the store's declaration, before any I/O.

    Returns None for no filter (``None`` or ``{}``: not a selector); ``FALSE`` stays a
    node (it selects nothing). ``valid_from`` is accepted here and checked against
    the index by ``compile_for``.

    Raises:
        ValidationError: every ``validation.filter_*`` of ``filters.parse_where``.
    """
    if where is None:
        return None
    node = parse_where(where, FilterSchema(declared, valid_from=True))
    if node == TRUE:
        return None
    # The query text is the same on every engine: its size is known now, before any I/O
    # (the engine named in errors does not matter here; exact tags refuse nothing).
    compile_where(node, _ANY_ENGINE)
    return node


def compile_for(node: Node, caps: Capabilities, layout: IndexLayout) -> Where:
    """The ``Where`` of a parsed filter on the index in use.

    Raises:
        ValidationError: ``validation.filter_field`` (reason ``indexing``) when the
            index lacks a field the filter names; ``validation.filter_size``.
        CommandNotSupportedError: ``server.filter_unsupported`` (``compile_where``).
    """
    fields = referenced_fields(node)
    missing = [f for f in fields if not layout.has(f) or (f == "valid_from" and not layout.valid_from)]
    if missing:
        raise ValidationError(
            f"the index in use does not hold {', '.join(missing)} yet (declared after it was built, "
            "or made by an older version); filters on it are refused until the index is rebuilt",
            code="validation.filter_field",
            details={"argument": "where", "reason": "indexing", "fields": missing},
        )
    return Where(node, compile_where(node, caps, exact_tags=layout.case_sensitive), fields)


def names_declared(where: WhereClause) -> bool:
    """Whether a filter reads a declared metadata field (which the history index of superseded
    versions does not hold: ``as_of`` reads and the history half of an erasure cannot use it)."""
    return any(f.startswith(DECLARED_PREFIX) or f == PRESENCE_FIELD for f in where.fields)


#: Bytes a query adds around its filter clauses (``MATCH_ALL``, parentheses, the KNN clause).
_QUERY_FRAME: Final = 96


def check_query_size(clauses: str) -> None:
    """Refuse filter clauses (``query.build_filter``: scope and ``where`` together) whose query would
    exceed ``MAX_QUERY_BYTES``.

    Raises:
        ValidationError: ``validation.filter_size``.
    """
    size = len(clauses.encode("utf-8")) + _QUERY_FRAME
    if size > MAX_QUERY_BYTES:
        raise ValidationError(
            f"the query is {size} bytes with its filters; at most {MAX_QUERY_BYTES}",
            code="validation.filter_size",
            details={"argument": "where", "bytes": size, "max": MAX_QUERY_BYTES},
        )


def check_fields(flt: MemoryFilter, check: bool) -> tuple[str, ...]:
    """What a query must RETURN for ``result_matches``: the scope checks' fields when ``check``
    (``IndexManager.needs_check``), and the ``where`` filter's always (it is always re-checked)."""
    out = CHECK_FIELDS if check else ()
    return out if flt.where is None else (*out, *flt.where.fields)


def result_matches(fields: Mapping[str, Any], flt: MemoryFilter, check: bool) -> bool:
    """The client-side check of one result: all of ``query.item_matches`` when ``check``
    (``IndexManager.needs_check``), else the ``where`` filter alone (the fields
    ``check_fields`` asked for)."""
    if check:
        return item_matches(fields, flt)
    return flt.where is None or flt.where.matches(fields)
