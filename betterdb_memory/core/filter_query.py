"""A ``where`` tree as search-engine query text: the same string on RediSearch 2.10 and valkey-search 1.2.

Forms (shared/VALKEY_SEARCH_DIALECT.md, point 16: tag syntax, exclusive ranges,
negation and OR are the same on both engines), every value through ``escaping``:

============================  ==============================================
tree                          query
============================  ==============================================
``Match`` tag                 ``@f:{a|b}`` (any of the values)
``Match`` numeric             ``@f:[v v]``, several: ``(@f:[a a]|@f:[b b])``
``Range``                     ``@f:[lo hi]``, ``(`` before an exclusive bound
``Exists`` numeric            ``@f:[-inf +inf]``
``Exists`` declared tag       ``@present:{name}`` (``filter_fields``)
``Not``                       ``-x``
``And`` / ``Or``              ``(a b)`` / ``(a|b)`` (``Or``: only of parts without a negation)
``TRUE`` / ``FALSE``          ``MATCH_ALL`` / ``-MATCH_ALL``
============================  ==============================================

Negation is the complement over the whole index on both engines, documents missing
the field included (probed on RediSearch 2.10.5 and valkey-search 1.2.1, with and
without KNN), which is MongoDB's ``$ne`` / ``$nin`` / ``$not``. Every compound is
parenthesised: nothing depends on the engines' precedence rules.

**No negation below a union.** RediSearch 2.10.5 (the embedded engine) loses matches
when a negation sits inside a union that an intersection drives: with documents
``{c:2000, v:1000}``, ``{c:2000}``, ``{c:1000, v:2000}``, the query
``(@v:[2000 2000]|(@c:[2000 2000] -@v:[-inf +inf]))`` finds the last two, and the same
ANDed with anything (``@c:[-inf +inf]`` included) finds only the last (its NOT
iterator's ``SkipTo`` answers "not found" without moving, and the union reads the
child's position from it). The differential test met it in about one random filter in
400; valkey-search is not affected. So an ``Or`` with a negation anywhere below it is
written by De Morgan, ``NOT(AND(NOT a, NOT b))``, double negations cancelling
(``_union_safe``): zero mismatches over 22,000 random (store, filter) pairs on
RediSearch 2.10.5 and 11,000 on valkey-search 1.2.1, each sent as a filter-only and as a
KNN query (bench/probe_negation_in_union.py shows the bug). The same text is sent to
both engines. A field with a fallback (``valid_from``, read as ``created_at`` when
absent: issue 26) is therefore ``-(-@valid_from:R -(@created_at:R -@valid_from:[-inf +inf]))``,
not the union ``(@valid_from:R|(@created_at:R -@valid_from:[-inf +inf]))``.

What an engine cannot answer is a ``CommandNotSupportedError`` (``server.filter_unsupported``,
details naming the engine and the operation), never a scan in the client:
valkey-search 1.0 runs no query without KNN (``require_filter_queries``), and an index
whose TAG fields are case-insensitive (made by another library) cannot answer a
negated tag condition exactly (its match of ``$ne: "a"`` would leave out ``"A"``; a
positive one only widens, which the client-side check trims).
"""

from __future__ import annotations

from typing import Final

from ..errors import CommandNotSupportedError, ValidationError
from .dialect import Capabilities
from .escaping import escape_tag, format_number
from .filter_fields import PRESENCE_FIELD, FieldSpec
from .filters import And, Const, Exists, Match, Node, Not, Or, Range, and_, not_, or_
from .query import MATCH_ALL

__all__ = [
    "MAX_WHERE_QUERY_BYTES",
    "compile_where",
    "hybrid_query",
    "require_filter_queries",
    "standalone_query",
]

#: Bytes the compiled ``where`` may take. valkey-search refuses a query string over 10,240
#: bytes; this leaves room for the scope filter and the KNN clause. The same bound on
#: RediSearch, so a filter is accepted or refused alike on every engine.
MAX_WHERE_QUERY_BYTES: Final = 8192


def _unsupported(caps: Capabilities, operation: str, why: str) -> CommandNotSupportedError:
    return CommandNotSupportedError(
        f"{caps.engine} {caps.version_string} cannot run {operation}: {why}",
        code="server.filter_unsupported",
        details={"engine": caps.engine, "version": caps.version_string, "operation": operation},
    )


def _range(low: float | None, low_inc: bool, high: float | None, high_inc: bool) -> str:
    lo = "-inf" if low is None else ("" if low_inc else "(") + format_number(low)
    hi = "+inf" if high is None else ("" if high_inc else "(") + format_number(high)
    return f"[{lo} {hi}]"


def _ranges(fieldname: str, ranges: list[str]) -> str:
    parts = [f"@{fieldname}:{r}" for r in ranges]
    return parts[0] if len(parts) == 1 else "(" + "|".join(parts) + ")"


def _numeric(spec: FieldSpec, ranges: list[str]) -> str:
    """A numeric field in any of ``ranges``; with a fallback, by De Morgan (no negation in a union)."""
    own = _ranges(spec.doc_field, ranges)
    if spec.fallback is None:
        return own
    # own OR (fallback AND NOT has-own)  ==  NOT(NOT own AND NOT(fallback AND NOT has-own))
    return f"-(-{own} -({_ranges(spec.fallback, ranges)} -@{spec.doc_field}:[-inf +inf]))"


def _negation_free(node: Node) -> bool:
    """Whether the node's query text holds no negation (a fallback field's text does)."""
    if isinstance(node, Not):
        return False
    if isinstance(node, And | Or):
        return all(_negation_free(c) for c in node.children)
    if isinstance(node, Match | Range | Exists):
        return node.field.fallback is None
    return node.value


def _union_safe(node: Node) -> Node:
    """The same filter with no negation below an ``Or`` (De Morgan; see the module docstring).

    Each leaf keeps the parity of the negations above it, so the polarity check of a
    case-insensitive index reads the rewritten tree as it would the original.
    """
    if isinstance(node, Not):
        return not_(_union_safe(node.child))
    if isinstance(node, And):
        return and_([_union_safe(c) for c in node.children])
    if isinstance(node, Or):
        kids = [_union_safe(c) for c in node.children]
        if all(_negation_free(k) for k in kids):
            return or_(kids)
        return not_(and_([not_(k) for k in kids]))
    return node


class _Compiler:
    def __init__(self, caps: Capabilities, exact_tags: bool) -> None:
        self.caps = caps
        self.exact_tags = exact_tags

    def node(self, node: Node, negated: bool) -> str:
        if isinstance(node, Const):
            return MATCH_ALL if node.value else f"-{MATCH_ALL}"
        if isinstance(node, Match):
            return self.match(node, negated)
        if isinstance(node, Range):
            return _numeric(
                node.field, [_range(node.low, node.low_inclusive, node.high, node.high_inclusive)]
            )
        if isinstance(node, Exists):
            if node.field.exists_by == "presence":
                return f"@{PRESENCE_FIELD}:{{{escape_tag(node.field.name)}}}"
            return _numeric(node.field, ["[-inf +inf]"])
        if isinstance(node, Not):
            inner = self.node(node.child, not negated)
            # A text starting with "-" is one negated atom or group (a fallback field's De Morgan
            # form; the tree holds no Not of a Not): its negation drops the "-" ("--x" is no
            # double negation to the engines' parsers).
            return inner[1:] if inner.startswith("-") else "-" + inner
        parts = [self.node(c, negated) for c in node.children]
        return "(" + ("|" if isinstance(node, Or) else " ").join(parts) + ")"

    def match(self, node: Match, negated: bool) -> str:
        spec = node.field
        if spec.type == "tag":
            if negated and not self.exact_tags and not spec.declared:
                raise _unsupported(
                    self.caps,
                    f"a negated condition on {spec.name!r} ($ne, $nin, $not)",
                    "this index's TAG fields are case-insensitive (made by another library), so its "
                    "answer would leave out values that differ only by case",
                )
            return f"@{spec.doc_field}:{{{'|'.join(escape_tag(str(v)) for v in node.values)}}}"
        return _numeric(spec, [_range(float(v), True, float(v), True) for v in node.values])


def compile_where(node: Node, caps: Capabilities, *, exact_tags: bool = True) -> str:
    """The query text of a parsed ``where`` (``filters.parse_where``).

    Args:
        node: the filter tree.
        caps: the engine's capabilities (named in errors; the text is the same on both
            engines today).
        exact_tags: the index's TAG fields are ``CASESENSITIVE`` (``IndexLayout.case_sensitive``).

    Returns:
        The expression; it may begin with ``-`` (a negation): ``standalone_query`` /
        ``hybrid_query`` make it safe to send alone.

    Raises:
        CommandNotSupportedError: ``server.filter_unsupported`` (see the module docstring).
        ValidationError: ``validation.filter_size`` when the text exceeds ``MAX_WHERE_QUERY_BYTES``.
    """
    text = _Compiler(caps, exact_tags).node(_union_safe(node), False)
    size = len(text.encode("utf-8"))
    if size > MAX_WHERE_QUERY_BYTES:
        raise ValidationError(
            f"the filter's query is {size} bytes; at most {MAX_WHERE_QUERY_BYTES} (valkey-search's "
            "limit on a whole query is 10,240)",
            code="validation.filter_size",
            details={"argument": "where", "bytes": size, "max": MAX_WHERE_QUERY_BYTES},
        )
    return text


def require_filter_queries(caps: Capabilities, operation: str = "a filter query without KNN") -> None:
    """Refuse, before any I/O, a query shape the engine lacks (valkey-search 1.0: every query needs KNN)."""
    if not caps.filter_queries:
        raise _unsupported(caps, operation, "every query needs KNN before valkey-search 1.1")


def _join(clauses: tuple[str, ...]) -> str:
    parts = [c for c in clauses if c]
    if not parts:
        return MATCH_ALL
    # A query of negations only gets the match-all range first: what "everything but" is
    # taken from (the store's build_filter does the same).
    if all(p.startswith("-") for p in parts):
        parts.insert(0, MATCH_ALL)
    return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"


def standalone_query(caps: Capabilities, *clauses: str) -> str:
    """A filter-only FT.SEARCH query of the given clauses (scope filter, compiled ``where``), ANDed.

    Raises:
        CommandNotSupportedError: the engine runs no query without KNN (valkey-search 1.0).
    """
    require_filter_queries(caps)
    return _join(clauses)


def hybrid_query(knn: str, *clauses: str) -> str:
    """A KNN query (``knn`` = ``"KNN k @vector $vec AS __dist"``) pre-filtered by the clauses, ANDed."""
    parts = [c for c in clauses if c]
    if not parts:
        return f"*=>[{knn}]"
    joined = _join(tuple(parts))
    return f"{joined if joined.startswith('(') else '(' + joined + ')'}=>[{knn}]"
