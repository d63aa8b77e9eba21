"""FT.SEARCH reply parsing for both engines and both protocols.

Shapes (shared/data/search-replies.json holds real captures of each):

* RESP2, both engines, and RESP3 on valkey-search: ``[total, id, [k, v, ...], ...]``,
  or ``[total, id, id, ...]`` with NOCONTENT.
* RESP3 on RediSearch: a map with ``total_results`` and ``results``, each result a
  map with ``id`` and ``extra_attributes`` (a map of the returned fields).

Fields are read by name, never by position (RediSearch puts the score first even
with RETURN; valkey-search follows RETURN order).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from .codec import as_text

__all__ = ["SearchHit", "SearchResult", "field_map", "field_name", "parse_search_reply"]


@dataclass(frozen=True, slots=True)
class SearchHit:
    key: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SearchResult:
    total: int
    hits: list[SearchHit]


# Built per hit (ten to a hundred per recall): through the slots' descriptors, not the frozen
# ``__init__`` (see ``models._item``).
_NEW = object.__new__
_set_key, _set_fields = (SearchHit.__dict__[f.name].__set__ for f in dataclass_fields(SearchHit))


def _hit(key: str, fields: dict[str, Any]) -> SearchHit:
    hit: SearchHit = _NEW(SearchHit)
    _set_key(hit, key)
    _set_fields(hit, fields)
    return hit


# Field names come back as bytes on every hit of every reply; a memory schema has a few
# dozen. Decoded once each (bounded, in case a caller's hashes have many field names).
_NAMES: dict[bytes, str] = {}
_NAMES_MAX = 4096


def field_name(raw: Any) -> str:
    """A field name of a reply as text (bytes decoded once each, kept)."""
    if isinstance(raw, bytes):
        name = _NAMES.get(raw)
        if name is None:
            name = as_text(raw)
            if len(_NAMES) < _NAMES_MAX:
                _NAMES[raw] = name
        return name
    return as_text(raw)


# A reply's hits share their field names: ``(b"content", b"importance", ...)`` -> the names
# decoded, looked up once per hit instead of one call per field (bounded like ``_NAMES``).
_ROWS: dict[tuple[Any, ...], tuple[str, ...]] = {}


# Tuples of types, not ``list | tuple``: ``isinstance`` takes a union's slower path.
_SEQUENCES = (list, tuple)
_CONTAINERS = (list, tuple, dict)


def field_map(value: Any) -> dict[str, Any]:
    """One result's fields by name: a ``[name, value, ...]`` row or a RESP3 map (anything else: none)."""
    if isinstance(value, dict):
        return {field_name(k): v for k, v in value.items()}
    if isinstance(value, _SEQUENCES):
        raw = tuple(value[0 : len(value) - 1 : 2])
        try:
            names = _ROWS.get(raw)
        except TypeError:  # a name that is no string (not an FT.SEARCH reply's)
            return {field_name(k): v for k, v in zip(raw, value[1::2], strict=True)}
        if names is None:
            names = tuple(field_name(n) for n in raw)
            if len(_ROWS) < _NAMES_MAX:
                _ROWS[raw] = names
        return dict(zip(names, value[1::2], strict=True))
    return {}


def _get(mapping: dict[Any, Any], name: str) -> Any:
    if name in mapping:
        return mapping[name]
    raw = name.encode()
    return mapping.get(raw)


def parse_search_reply(reply: Any, *, nocontent: bool = False) -> SearchResult:
    """Parse an FT.SEARCH reply of any engine/protocol into keys and named fields."""
    if isinstance(reply, dict):
        total = int(_get(reply, "total_results") or 0)
        hits: list[SearchHit] = []
        for entry in _get(reply, "results") or []:
            entry_map = entry if isinstance(entry, dict) else field_map(entry)
            key = as_text(_get(entry_map, "id"))
            attrs = _get(entry_map, "extra_attributes")
            hits.append(SearchHit(key, field_map(attrs) if attrs is not None else {}))
        return SearchResult(total, hits)
    if not isinstance(reply, _SEQUENCES) or not reply:
        return SearchResult(0, [])
    total = int(reply[0])
    rest = reply[1:]
    hits = []
    if nocontent:
        return SearchResult(total, [SearchHit(as_text(k), {}) for k in rest])
    i, n = 0, len(rest)
    rows = _ROWS
    while i < n:
        raw = rest[i]
        key = raw.decode("utf-8", errors="replace") if type(raw) is bytes else as_text(raw)
        fields: dict[str, Any] = {}
        if i + 1 < n and isinstance(value := rest[i + 1], _CONTAINERS):
            # ``field_map`` inlined for the usual row: a list whose name tuple was seen before.
            names = None
            if type(value) is list:
                try:  # noqa: SIM105 (contextlib.suppress costs a context manager per row)
                    names = rows.get(tuple(value[0 : len(value) - 1 : 2]))
                except TypeError:  # a name that is no string: ``field_map`` says what to do
                    pass
            fields = field_map(value) if names is None else dict(zip(names, value[1::2], strict=True))
            i += 2
        else:
            i += 1
        hits.append(_hit(key, fields))
    return SearchResult(total, hits)
