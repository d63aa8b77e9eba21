"""A recall's KNN reply straight to its (item, distance) pairs, without parsed hits in between.

Issue 29 budgets the library's Python per recall of 10 hits at 90 µs, and turning the
reply into items was the largest part of it: ``parse_search_reply`` built a dict and a
``SearchHit`` per row, then ``item_from_fields`` read the dict back. Most rows are a
memory that stores none of the optional fields (``core.record`` writes a field only when
it differs from what a reader assumes), so a reply's rows share one of a few tuples of
field names. For each such tuple (``_layout``, learned once, bounded like
``replies._ROWS``) the positions of what an item reads are known, and ``PairReader.reply``
builds the item from the row's values by position with the same conversions
(``models._basics`` and ``models._opt``, the functions ``item_from_fields`` uses): the same
items, in the same order. Any other row (an optional field, a name seen twice, a RESP3
RediSearch map, a reply with an exact check to pass) goes the dict way
(``replies.field_map``, then ``PairReader.fields``: ``Recall._search``'s loop as it was),
in its place in the reply.

On a plain row ``ranking_item`` and ``item_from_fields`` build the same item (neither
reads an optional field that is absent), so one builder serves both (``slim``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any

from .codec import as_text, to_float
from .models import (  # models' own readers' pieces: this module is their reply-row half
    _BASICS,
    _FROM_CREATED,
    _PLAIN,
    MemoryItem,
    _basics,
    _item,
    _opt,
    _valid_from,
    item_from_fields,
    ranking_item,
)
from .query import SCORE_ALIAS
from .replies import SearchHit, field_map, field_name, parse_search_reply

__all__ = ["PairReader"]

Pair = tuple[MemoryItem, float]
Keep = Callable[[Mapping[str, Any]], bool]

# What a plain row's item is built from, in this order (``PairReader.reply``): ``_PLAIN``'s fields.
_READ = (SCORE_ALIAS, *_BASICS, "threadId", "agentId", "namespace", "valid_from")
# Raw field-name tuple -> the getter of ``_READ``'s values from the row's values with a None
# appended (an absent field reads it), or None: rows with these names go the dict way.
_LAYOUTS: dict[tuple[Any, ...], Callable[[list[Any]], tuple[Any, ...]] | None] = {}
_LAYOUTS_MAX = 4096
_CONTAINERS = (list, tuple, dict)


def _layout(raw: tuple[Any, ...]) -> Callable[[list[Any]], tuple[Any, ...]] | None:
    """The getter for rows named ``raw``; None unless it is a plain row's (``_PLAIN``) with a distance."""
    names = [field_name(n) for n in raw]
    if len(set(names)) != len(names) or not set(names) <= _PLAIN or SCORE_ALIAS not in names:
        return None  # a repeated name (the dict keeps the last), an optional field, no distance
    at = {name: i for i, name in enumerate(names)}
    return itemgetter(*(at.get(name, len(names)) for name in _READ))


class PairReader:
    """One recall's KNN hits as (item, cosine distance) pairs, in reply order (the caller sorts).

    ``prefix``: the documents' key prefix (``SessionKeys.doc_prefix``; an id is its key
    without it, as ``memory_id_of``). ``now_ms``: a hit whose ``expires_at`` is past is
    left out and its id kept in ``expired``. ``pending``: this store's accesses its
    documents do not show yet (``tiers.reinforce``). ``slim``: ranking items
    (``ranking_item``), else whole ones. ``keep``: an exact check each hit's fields must
    pass (None: none).
    """

    __slots__ = ("_fact_source", "_keep", "_now_ms", "_pending", "_prefix", "_slim", "expired")

    def __init__(
        self,
        *,
        prefix: str,
        now_ms: float,
        pending: Mapping[str, tuple[int, int]],
        slim: bool,
        fact_source: str,
        keep: Keep | None = None,
    ) -> None:
        self._prefix, self._now_ms, self._pending = prefix, now_ms, pending
        self._slim, self._fact_source, self._keep = slim, fact_source, keep
        self.expired: list[str] = []

    def _id(self, key: str) -> str:
        prefix = self._prefix
        return key[len(prefix) :] if key.startswith(prefix) else key

    def reply(self, reply: Any) -> list[Pair]:
        """The pairs of an FT.SEARCH reply (any engine or protocol), as ``hits(parse_search_reply(reply).hits)``."""
        if type(reply) is not list or self._keep is not None:
            return self.hits(parse_search_reply(reply).hits)
        out: list[Pair] = []
        layouts, prefix, pending = _LAYOUTS, self._prefix, self._pending
        cut = len(prefix)
        # ``parse_search_reply``'s walk: a key, then its fields when a container follows.
        i, n = 1, len(reply)
        while i < n:
            raw = reply[i]
            key = raw.decode("utf-8", errors="replace") if type(raw) is bytes else as_text(raw)
            if i + 1 >= n or not isinstance(value := reply[i + 1], _CONTAINERS):
                i += 1  # a key without fields: no distance, left out (as the dict way leaves it)
                continue
            i += 2
            get = None
            if type(value) is list:
                names = tuple(value[0 : len(value) - 1 : 2])
                try:
                    get = layouts[names]
                except KeyError:
                    get = _layout(names)
                    if len(layouts) < _LAYOUTS_MAX:
                        layouts[names] = get
                except TypeError:  # a name that is no string: the dict way says what to do
                    pass
            if get is None:
                pair = self.fields(key, field_map(value))
                if pair is not None:
                    out.append(pair)
                continue
            values = value[1::2]
            values.append(None)
            score, text, importance, created, accessed, count, thread, agent, space, valid_from = get(values)
            mid = key[cut:] if key.startswith(prefix) else key
            content, importance, created, accessed, count = _basics(
                text, importance, created, accessed, count, seen=pending.get(mid)
            )
            item = _item(
                mid, content, importance, created, accessed, count, [], None,
                None if thread is None else _opt(thread), None if agent is None else _opt(agent),
                None if space is None else _opt(space), "none", "memory", None, None, {}, None,
                _FROM_CREATED if valid_from is None else _valid_from(valid_from), None,
            )  # fmt: skip
            # min(2.0, max(0.0, d)): an exact match can come back a hair below 0 (float32 on valkey-search)
            distance = to_float(score)
            distance = distance if distance > 0.0 else 0.0
            out.append((item, distance if distance < 2.0 else 2.0))
        return out

    def hits(self, hits: Iterable[SearchHit]) -> list[Pair]:
        """The pairs of parsed hits (a scope's scan, a window's merge, a widened KNN)."""
        out: list[Pair] = []
        for hit in hits:
            pair = self.fields(hit.key, hit.fields)
            if pair is not None:
                out.append(pair)
        return out

    def fields(self, key: str, f: Mapping[str, Any]) -> Pair | None:
        """One hit's pair from its fields by name; None when it is left out (no distance, fails ``keep``, expired)."""
        score = f.get(SCORE_ALIAS)
        if score is None and SCORE_ALIAS not in f:
            return None  # expired between match and load
        if self._keep is not None and not self._keep(f):
            return None
        expires = f.get("expires_at")
        if expires is not None and (expires := as_text(expires)) and to_float(expires) <= self._now_ms:
            self.expired.append(self._id(key))
            return None
        mid = self._id(key)
        seen = self._pending.get(mid)
        item = (
            ranking_item(mid, f, seen=seen)
            if self._slim
            else item_from_fields(mid, f, fact_source=self._fact_source, seen=seen)
        )
        distance = to_float(score)
        distance = distance if distance > 0.0 else 0.0
        return item, distance if distance < 2.0 else 2.0
