"""The fields a ``where=`` filter may name: the built-in table, declared metadata, and what a write adds.

A filter names fields by the names users know (``thread_id``, ``priority``), never by
HASH field names (``threadId``, ``meta_priority``). This module is the one place that
maps the two and says, per field, how its absence is told apart from a value:

* **Built-in fields** (``BUILTIN_FIELDS``): the scope fields, ``tags`` and ``source``
  (TAG; written by betterdb-agent-memory too, when set), ``importance`` and
  ``created_at`` (NUMERIC; on every memory), ``valid_from`` (NUMERIC; once time-aware
  memory lands; a memory without one is valid from its ``created_at``, issue 26).
* **Declared fields** (``MetadataFields``, the store's ``metadata_fields=``): top-level
  metadata keys written as their own document fields ``meta_<name>`` and indexed with
  their type (TAG ``CASESENSITIVE`` like the scope fields, or NUMERIC).

MongoDB's rules need "is the field there?" (``$exists``). valkey-search has no
``ismissing()`` (shared/VALKEY_SEARCH_DIALECT.md) and RediSearch answers it only for
fields declared ``INDEXMISSING``, which valkey-search rejects. So presence is written:

* NUMERIC fields need nothing: ``@f:[-inf +inf]`` matches exactly the documents holding
  a number there (both engines; values are validated before a write, dialect point 12).
* a declared TAG field is listed in the TAG field ``present`` of each memory that has
  it (``index_fields``), so ``$exists`` is ``@present:{name}`` and its negation
  ``-@present:{name}``, which also matches a document with no ``present`` at all
  (probed on RediSearch 2.10.5 and valkey-search 1.2.1: negation is the complement over
  the whole index on both). Only this library writes ``meta_*`` and ``present``, and
  always together, so they cannot disagree.
* the built-in TAG fields have no presence marker: betterdb-agent-memory writes them
  without one, so ``$exists`` on them cannot be answered the same way everywhere and is
  refused (``filters.parse_where``); ``$ne`` / ``$nin`` need no marker (negation).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ..errors import ConfigurationError, ValidationError
from .arguments import is_number
from .escaping import validate_tag_value
from .query import ITEM_FIELDS
from .validation import MAX_TAGS

__all__ = [
    "BUILTIN_FIELDS",
    "DECLARED_PREFIX",
    "MAX_METADATA_FIELDS",
    "PRESENCE_FIELD",
    "RESERVED_NAMES",
    "ExistsBy",
    "FieldSpec",
    "FieldType",
    "FilterSchema",
    "MetadataFields",
    "index_fields",
    "numeric_value",
    "schema_args",
    "tag_values",
]

FieldType = Literal["numeric", "tag"]
#: How ``$exists`` is answered for a field: "always" (every memory has it: a constant),
#: "range" (a NUMERIC field's full range), "presence" (the ``present`` TAG), or None
#: (it cannot be answered the same way on every document: refused).
ExistsBy = Literal["always", "range", "presence"] | None

#: HASH and index field of the declared fields of each memory (``tag`` or ``numeric``).
PRESENCE_FIELD = "present"
#: Declared metadata field ``x`` is the document field ``meta_x``: never a built-in's name.
DECLARED_PREFIX = "meta_"
#: A bound on declared fields: each is an index field on every document.
MAX_METADATA_FIELDS = 32
# A declared name becomes part of a query (``@meta_<name>:``): letters, digits and ``_`` only,
# which both engines read in a field name without escaping.
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field a filter may name.

    Attributes:
        name: the name in ``where=`` (``thread_id``, ``priority``).
        doc_field: the HASH and index field (``threadId``, ``meta_priority``).
        type: ``tag`` (exact strings) or ``numeric`` (finite floats).
        multi: a TAG holding a comma-joined list (``tags``, a declared tag field).
        exists_by: how ``$exists`` is answered (``ExistsBy``).
        fallback: a NUMERIC field read when this one is absent (``valid_from`` ->
            ``created_at``): the field then counts as present on every memory.
        time: values may be given as ``datetime`` (epoch milliseconds are stored).
        declared: a declared metadata field (not a built-in).
    """

    name: str
    doc_field: str
    type: FieldType
    multi: bool = False
    exists_by: ExistsBy = None
    fallback: str | None = None
    time: bool = False
    declared: bool = False


def _builtin() -> dict[str, FieldSpec]:
    specs = (
        FieldSpec("thread_id", "threadId", "tag"),
        FieldSpec("agent_id", "agentId", "tag"),
        FieldSpec("namespace", "namespace", "tag"),
        FieldSpec("tags", "tags", "tag", multi=True),
        FieldSpec("source", "source", "tag"),
        FieldSpec("importance", "importance", "numeric", exists_by="always"),
        FieldSpec("created_at", "created_at", "numeric", exists_by="always", time=True),
        FieldSpec(
            "valid_from", "valid_from", "numeric", exists_by="always", fallback="created_at", time=True
        ),
    )
    return {s.name: s for s in specs}


#: Every built-in field a filter may name, by its filter name (the one table).
BUILTIN_FIELDS: Mapping[str, FieldSpec] = _builtin()

#: Names a declared field may not take (compared case-insensitively): the built-in filter
#: names, every HASH field a memory is written with (the reference's and this library's),
#: the fields the time-aware issue adds, and the presence field.
RESERVED_NAMES: frozenset[str] = frozenset(
    name.lower()
    for name in (
        *BUILTIN_FIELDS,
        *ITEM_FIELDS,
        "id", "vector", "keep", "dedup", "metadata", "kind", "date", "subject",
        "valid_until", "subject_key", "state_from", "superseded_by", "retracted",
        "scope", "score", "embedding", PRESENCE_FIELD,
    )
)  # fmt: skip


def _config_error(message: str, code: str, **details: Any) -> ConfigurationError:
    return ConfigurationError(message, code=code, details={"argument": "metadata_fields", **details})


@dataclass(frozen=True, slots=True)
class MetadataFields:
    """A store's declared metadata fields (``metadata_fields=``), validated; iterates ``(name, type)``.

    Build with ``MetadataFields.of``; ``digest`` names the declaration (what an index
    switch compares to know whether the index in use has these fields).
    """

    fields: tuple[tuple[str, FieldType], ...] = ()
    specs: Mapping[str, FieldSpec] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, declared: object) -> MetadataFields:
        """Validate ``metadata_fields`` (None or a mapping of name -> ``"numeric"`` | ``"tag"``).

        Raises:
            ConfigurationError: not a mapping (``configuration.type``), a type other than
                numeric/tag (``configuration.choice``), a name that is not a plain identifier
                (``configuration.field_name``), one that collides with a built-in field or
                another declared name, case aside (``configuration.reserved_field``), or more
                than ``MAX_METADATA_FIELDS`` names (``configuration.too_many``).
        """
        if declared is None:
            return cls()
        if isinstance(declared, MetadataFields):
            return declared
        if not isinstance(declared, Mapping):
            raise _config_error(
                f"metadata_fields must be a mapping of name -> 'numeric' | 'tag', not {type(declared).__name__}",
                "configuration.type",
            )
        if len(declared) > MAX_METADATA_FIELDS:
            raise _config_error(
                f"at most {MAX_METADATA_FIELDS} metadata_fields (each is indexed on every memory)",
                "configuration.too_many",
                max=MAX_METADATA_FIELDS,
            )
        out: list[tuple[str, FieldType]] = []
        seen: set[str] = set()
        for name, ftype in declared.items():
            if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
                raise _config_error(
                    f"metadata field name {name!r} must be a letter then letters, digits or '_' (at most 64)",
                    "configuration.field_name",
                    field=repr(name),
                )
            if name.lower() in RESERVED_NAMES:
                raise _config_error(
                    f"metadata field {name!r} collides with the built-in field of that name; "
                    "built-ins are filtered as they are (no declaration)",
                    "configuration.reserved_field",
                    field=name,
                )
            if name.lower() in seen:
                raise _config_error(
                    f"metadata field {name!r} is declared twice (names are compared case-insensitively)",
                    "configuration.reserved_field",
                    field=name,
                )
            if ftype not in ("numeric", "tag"):
                raise _config_error(
                    f"metadata field {name!r} has type {ftype!r}; one of 'numeric', 'tag'",
                    "configuration.choice",
                    field=name,
                    allowed=["numeric", "tag"],
                )
            seen.add(name.lower())
            out.append((name, "numeric" if ftype == "numeric" else "tag"))
        fields = tuple(out)
        specs = {
            name: FieldSpec(
                name,
                DECLARED_PREFIX + name,
                ftype,
                multi=ftype == "tag",
                exists_by="range" if ftype == "numeric" else "presence",
                declared=True,
            )
            for name, ftype in fields
        }
        return cls(fields, specs)

    def __iter__(self) -> Iterator[tuple[str, FieldType]]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def to_json(self) -> str:
        """The declaration as JSON (``{"name": "numeric" | "tag"}``, keys sorted): what ``N:__mem_meta``
        records as ``metadata_fields``."""
        return json.dumps(dict(self.fields), sort_keys=True)

    @property
    def digest(self) -> str:
        """16 hex digits naming this declaration (order-independent)."""
        text = "\x00".join(f"{n}\x01{t}" for n, t in sorted(self.fields))
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class FilterSchema:
    """What a ``where`` may name on one store: the built-ins its index has, and its declared fields.

    ``valid_from``: the index has the time-aware field (issue 26). The store builds this
    from its declaration *and* its index: during an index switch, only the fields the
    index in use already has (``filters.parse_where`` refuses the others).
    """

    metadata: MetadataFields = field(default_factory=MetadataFields)
    valid_from: bool = False

    def get(self, name: str) -> FieldSpec | None:
        spec = BUILTIN_FIELDS.get(name)
        if spec is not None:
            return spec if (name != "valid_from" or self.valid_from) else None
        return self.metadata.specs.get(name)

    @property
    def names(self) -> list[str]:
        """Every name a filter may use here, sorted (for error messages)."""
        builtin = [n for n in BUILTIN_FIELDS if n != "valid_from" or self.valid_from]
        return sorted([*builtin, *self.metadata.specs])


def schema_args(declared: MetadataFields) -> list[str]:
    """The FT.CREATE SCHEMA arguments of the declared fields and the presence field (none if none)."""
    if not declared:
        return []
    out: list[str] = []
    for name, ftype in declared:
        if ftype == "numeric":
            out += [DECLARED_PREFIX + name, "NUMERIC"]
        else:
            out += [DECLARED_PREFIX + name, "TAG", "SEPARATOR", ",", "CASESENSITIVE"]
    return [*out, PRESENCE_FIELD, "TAG", "SEPARATOR", ",", "CASESENSITIVE"]


def numeric_value(value: object, *, time: bool = False) -> float | None:
    """A finite float of ``value`` (an int or float, not a bool; a ``datetime`` for a time field), or None."""
    if time and isinstance(value, datetime):
        # Naive means UTC (issue 26's rule for valid_from); stored times are epoch ms.
        stamp = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).timestamp()
        return float(round(stamp * 1000))
    if not is_number(value):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def tag_values(value: object, *, name: str) -> tuple[str, ...]:
    """The values of a declared TAG field: a string or a list of strings, each by the scope-value rules.

    Raises:
        ValidationError: a value that is not a string (or list of them), breaks the
            scope-value rules (``escaping.validate_tag_value``), or more than ``MAX_TAGS``.
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValidationError(
            f"metadata[{name!r}] is a declared tag field: a string or a list of strings, "
            f"not {type(value).__name__}",
            code="validation.metadata_field",
            details={"argument": "metadata", "field": name, "reason": "type"},
        )
    out = tuple(dict.fromkeys(validate_tag_value(v, name=f"metadata[{name!r}]") for v in items))
    if len(out) > MAX_TAGS:
        raise ValidationError(
            f"metadata[{name!r}] holds {len(out)} values; at most {MAX_TAGS}",
            code="validation.metadata_field",
            details={"argument": "metadata", "field": name, "reason": "too_many", "max": MAX_TAGS},
        )
    return out


def index_fields(
    metadata: Mapping[str, Any] | None, declared: MetadataFields, *, strict: bool = True
) -> dict[str, str]:
    """The extra HASH fields a memory is written with, from its metadata: what the write path adds.

    ``meta_<name>`` for each declared key the metadata holds (a number as ``repr(float)``,
    tag values comma-joined), and ``present`` listing those names. A key that is absent,
    ``None`` or an empty list is missing (nothing written, not listed). ``metadata``
    itself is still written whole, as today (it is what reads return).

    Args:
        metadata: the memory's metadata (validated JSON-able mapping).
        declared: the store's declared fields.
        strict: a write (``True``) refuses a value that does not fit its declared type;
            a backfill of memories written before the declaration (``False``) leaves such
            a value out (not indexed: the field counts as missing for that memory, in the
            engine and in ``filter_eval.evaluate`` alike).

    Raises:
        ValidationError: ``strict`` and a declared value of the wrong type
            (``validation.metadata_field``) or a tag value breaking the scope-value rules.
    """
    out: dict[str, str] = {}
    present: list[str] = []
    if not metadata or not declared:
        return out
    for name, ftype in declared:
        value = metadata.get(name)
        if value is None:
            continue
        if ftype == "numeric":
            number = numeric_value(value)
            if number is None:
                if strict:
                    raise ValidationError(
                        f"metadata[{name!r}] is a declared numeric field: a finite int or float "
                        f"(not a bool), got {value!r}",
                        code="validation.metadata_field",
                        details={"argument": "metadata", "field": name, "reason": "type"},
                    )
                continue
            out[DECLARED_PREFIX + name] = repr(number)
        else:
            try:
                values = tag_values(value, name=name)
            except ValidationError:
                if strict:
                    raise
                continue
            if not values:
                continue
            out[DECLARED_PREFIX + name] = ",".join(values)
        present.append(name)
    if present:
        out[PRESENCE_FIELD] = ",".join(present)
    return out
