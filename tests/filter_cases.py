"""Random memories and ``where`` filters for the filter tests, and MongoDB's rules read plainly.

Shared by the unit property test (``tests/unit/test_core_filters.py``: the evaluator
against ``mongo_matches``) and the server-backed differential test
(``tests/integration/test_filters_differential.py``: the engine against the evaluator).
Everything is drawn from a ``random.Random`` so that a seed reproduces a case.

Values are hostile on purpose (query syntax characters, quotes, backslashes, unicode,
spaces, ``*`` and ``-``, values that differ only by case), yet valid scope values: a
value the write path refuses never reaches a document.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from betterdb_memory.core.codec import join_tags
from betterdb_memory.core.dialect import capabilities_for
from betterdb_memory.core.escaping import validate_tag_value
from betterdb_memory.core.filter_fields import FilterSchema, MetadataFields, index_fields
from betterdb_memory.core.filter_query import compile_where
from betterdb_memory.core.filters import parse_where
from betterdb_memory.errors import ValidationError

REDISEARCH = capabilities_for("redisearch", (2, 10, 5))
VALKEY_1_2 = capabilities_for("valkey-search", (1, 2, 1))
VALKEY_1_0 = capabilities_for("valkey-search", (1, 0, 3))

#: The unit tests' small declaration, and the differential test's larger one.
MD = MetadataFields.of({"priority": "numeric", "project": "tag"})
SCHEMA = FilterSchema(MD, valid_from=True)

DECLARED = MetadataFields.of({"priority": "numeric", "rank": "numeric", "project": "tag", "labels": "tag"})

TAG_VALUES: tuple[str, ...] = (
    "apollo", "Apollo", "gemini", "a b", "x|y", "{z}", 'q"u', "a'b", "back\\slash", "é", "e\u0301",
    "日本", "a_b", "😀x", "x😀", "-x", "*a", "a*b", "$p", "@f", "1.5", "%fuzzy%", "(p)", "[n]",
    "k:v", "~t", "a\u00a0b", "ｆｕｌｌ", "İ", "ß", "SS", "-", "_", "a-b",
)  # fmt: skip
for _v in TAG_VALUES:
    validate_tag_value(_v, name="fixture")

NUMBERS: tuple[float, ...] = (-1, 0, -0.0, 1, 2, 2.5, 3, 1e300, -1e-300, 0.1)
TIMES: tuple[int, ...] = (1_000, 2_000, 3_000, 1_700_000_000_000)

TAG_FIELDS = ("thread_id", "agent_id", "namespace", "tags", "source", "project", "labels")
NUMERIC_FIELDS = ("importance", "created_at", "valid_from", "priority", "rank")
#: Fields whose presence ``$exists`` can test (built-in tags cannot: ``filter_fields``).
EXISTS_FIELDS = ("importance", "created_at", "valid_from", "priority", "rank", "project", "labels")
SCOPE_DOC_FIELDS = {
    "thread_id": "threadId",
    "agent_id": "agentId",
    "namespace": "namespace",
    "source": "source",
}


def random_memory(rng: random.Random) -> dict[str, Any]:
    """One memory as plain values (absent fields left out), metadata included."""
    m: dict[str, Any] = {
        "importance": rng.choice((0.0, 0.25, 0.5, 1.0)),
        "created_at": rng.choice(TIMES),
    }
    for name in ("thread_id", "agent_id", "namespace", "source"):
        if rng.random() < 0.7:
            m[name] = rng.choice(TAG_VALUES[:12] if rng.random() < 0.7 else TAG_VALUES)
    if rng.random() < 0.7:
        m["tags"] = list(dict.fromkeys(rng.choice(TAG_VALUES) for _ in range(rng.randint(1, 3))))
    if rng.random() < 0.6:
        m["valid_from"] = rng.choice(TIMES)
    meta: dict[str, Any] = {}
    for name in ("priority", "rank"):
        r = rng.random()
        if r < 0.6:
            meta[name] = rng.choice(NUMBERS)
        elif r < 0.7:
            meta[name] = None
        elif r < 0.75:
            meta[name] = rng.choice(("high", True, [1]))  # does not fit: not indexed (backfill)
    for name in ("project", "labels"):
        r = rng.random()
        if r < 0.4:
            meta[name] = rng.choice(TAG_VALUES)
        elif r < 0.65:
            meta[name] = list(dict.fromkeys(rng.choice(TAG_VALUES) for _ in range(rng.randint(0, 3))))
        elif r < 0.7:
            meta[name] = rng.choice((7, "", "bad,comma", ["ok", 3]))  # does not fit: not indexed
    if rng.random() < 0.3:
        meta["undeclared"] = rng.choice(TAG_VALUES)
    m["metadata"] = meta
    return m


def document_fields(m: dict[str, Any]) -> dict[str, str]:
    """The HASH fields a filter reads, as the write path stores them (``record.encode_record`` + ``index_fields``)."""
    out = {"importance": repr(float(m["importance"])), "created_at": str(m["created_at"])}
    for name, doc in SCOPE_DOC_FIELDS.items():
        if name in m:
            out[doc] = m[name]
    if m.get("tags"):
        out["tags"] = join_tags(m["tags"])
    if "valid_from" in m:
        out["valid_from"] = str(m["valid_from"])
    out.update(index_fields(m["metadata"], DECLARED, strict=False))
    return out


def where_error(where: Any, schema: FilterSchema = SCHEMA) -> ValidationError:
    """The error ``parse_where`` raises for ``where`` (exactly a ``ValidationError``)."""
    with pytest.raises(ValidationError) as info:
        parse_where(where, schema)
    assert type(info.value) is ValidationError
    return info.value


def q(where: Any, caps: Any = VALKEY_1_2, **kw: Any) -> str:
    """The query text of ``where`` on ``SCHEMA``."""
    return compile_where(parse_where(where, SCHEMA), caps, **kw)


# -- MongoDB's rules, read plainly (independent of betterdb_memory.core.filters) -----------


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def mongo_view(m: dict[str, Any]) -> dict[str, Any]:
    """The memory as MongoDB would see the indexed document: field -> value or list of values.

    Declared values that do not fit their type are not indexed (absent); an empty list
    is absent; a memory without ``valid_from`` is valid from its ``created_at``.
    """
    view: dict[str, Any] = {k: m[k] for k in ("thread_id", "agent_id", "namespace", "source") if k in m}
    if m.get("tags"):
        view["tags"] = list(m["tags"])
    view["importance"] = m["importance"]
    view["created_at"] = m["created_at"]
    view["valid_from"] = m.get("valid_from", m["created_at"])
    meta = m["metadata"]
    for name in ("priority", "rank"):
        if _is_number(meta.get(name)):
            view[name] = meta[name]
    for name in ("project", "labels"):
        v = meta.get(name)
        single = isinstance(v, str) and _valid_tag(v)
        if single or (isinstance(v, list) and v and all(isinstance(x, str) and _valid_tag(x) for x in v)):
            view[name] = v
    return view


def _valid_tag(v: str) -> bool:
    try:
        validate_tag_value(v, name="v")
    except ValueError:
        return False
    return True


def _op(doc: dict[str, Any], field: str, op: str, arg: Any) -> bool:
    present = field in doc
    values = doc[field] if present and isinstance(doc[field], list) else [doc.get(field)]
    if op == "$exists":
        return present == arg
    if op == "$eq":
        return present and any(v == arg for v in values)
    if op == "$ne":
        return not (present and any(v == arg for v in values))
    if op == "$in":
        return present and any(v == a for v in values for a in arg)
    if op == "$nin":
        return not (present and any(v == a for v in values for a in arg))
    compare = {
        "$gt": lambda v: v > arg,
        "$gte": lambda v: v >= arg,
        "$lt": lambda v: v < arg,
        "$lte": lambda v: v <= arg,
    }[op]
    return present and any(_is_number(v) and compare(v) for v in values)


def mongo_matches(where: dict[str, Any], doc: dict[str, Any]) -> bool:
    """MongoDB's answer for one document (``mongo_view``), from the raw ``where`` mapping."""
    for key, cond in where.items():
        if key == "$and":
            ok = all(mongo_matches(w, doc) for w in cond)
        elif key == "$or":
            ok = any(mongo_matches(w, doc) for w in cond)
        elif key == "$not":
            ok = not mongo_matches(cond, doc)
        elif isinstance(cond, dict):
            ok = all(_op(doc, key, op, arg) for op, arg in cond.items())
        else:
            ok = _op(doc, key, "$eq", cond)
        if not ok:
            return False
    return True


# -- random filters -------------------------------------------------------------------------


def _value(rng: random.Random, field: str) -> Any:
    if field in NUMERIC_FIELDS:
        return rng.choice(TIMES) if field in ("created_at", "valid_from") else rng.choice(NUMBERS)
    return rng.choice(TAG_VALUES[:12] if rng.random() < 0.7 else TAG_VALUES)


def _condition(rng: random.Random, field: str) -> Any:
    numeric = field in NUMERIC_FIELDS
    ops = ["$eq", "$ne", "$in", "$nin"]
    if numeric:
        ops += ["$gt", "$gte", "$lt", "$lte"]
    if field in EXISTS_FIELDS:
        ops.append("$exists")
    cond: dict[str, Any] = {}
    for _ in range(rng.choice((1, 1, 1, 2))):
        op = rng.choice(ops)
        if op == "$exists":
            cond[op] = rng.random() < 0.5
        elif op in ("$in", "$nin"):
            cond[op] = [_value(rng, field) for _ in range(rng.randint(1, 3))]
        else:
            cond[op] = _value(rng, field)
    if len(cond) == 1 and "$eq" in cond and rng.random() < 0.5:
        return cond["$eq"]  # a bare value
    return cond


def random_where(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    """A valid random filter: one to three keys, ``$and`` / ``$or`` / ``$not`` to depth 3."""
    where: dict[str, Any] = {}
    for _ in range(rng.randint(1, 3 if depth == 0 else 2)):
        r = rng.random()
        if depth < 3 and r < 0.12:
            where["$or"] = [random_where(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        elif depth < 3 and r < 0.2:
            where["$and"] = [random_where(rng, depth + 1) for _ in range(rng.randint(1, 2))]
        elif depth < 3 and r < 0.3:
            where["$not"] = random_where(rng, depth + 1)
        else:
            field = rng.choice((*TAG_FIELDS, *NUMERIC_FIELDS))
            where[field] = _condition(rng, field)
    return where
