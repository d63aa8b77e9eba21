"""The full-text half of a hybrid recall as values: its FT.SEARCH arguments and how its replies failed.

The text queries are an extra: they add candidates the KNN missed, and a recall without
them is the KNN recall every engine answers. So they run under a time budget of their
own (``TIMEOUT <ms>`` on each, both engines accept it: RediSearch 2.10 and valkey-search
>= 1.0), and when they time out or fail the recall goes on with the KNN candidates alone
(``tiers.hybrid``). What "timed out" looks like differs per engine (dialect point 14):

* valkey-search answers an error, "Search operation cancelled due to timeout": its default
  ``search.enable-partial-results yes`` would answer a silent partial result instead, so
  every query carries ``ALLSHARDS`` (``Capabilities.shard_options``); on a 1.2.1 cluster the
  fanning-out node's own part can still come back partial (docs/operations/production.md);
* RediSearch, with its default ``ON_TIMEOUT RETURN`` policy, answers the results found
  so far: under RESP3 the reply map carries a ``warning`` ("Timeout limit was
  reached"), under RESP2 nothing marks it (undetectable, so used as complete); with
  ``ON_TIMEOUT FAIL`` it answers an error with that text.

A partial answer is used (its hits are real matches and are re-ranked with the KNN's)
and the recall counts as degraded (``partial``): fail-soft, not discarded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from .query import IndexLayout, MemoryFilter, build_filter

__all__ = [
    "DEGRADED_REASONS",
    "TEXT_CANDIDATES",
    "TEXT_TIMEOUT_MS",
    "DegradedReason",
    "ScopesReadWhole",
    "client_bound_seconds",
    "escape_text_term",
    "is_timeout_message",
    "reply_warning",
    "text_search_args",
]

#: Full-text hits a hybrid recall adds to its KNN candidates (per query, or per word).
TEXT_CANDIDATES = 50

#: The text queries' budget (``TIMEOUT`` in ms), RediSearch's own default: a recall waits at most
#: about this long for them (valkey-search's default is 50 s, which a stuck text query used up).
TEXT_TIMEOUT_MS = 500

#: Why a recall went on with its KNN candidates alone (``agent_memory_recall_degraded_total{reason}``):
#: ``timeout`` the budget ran out (server TIMEOUT or the client's bound), ``error`` the server
#: answered another error, ``partial`` RediSearch answered what it found before its timeout.
DegradedReason = Literal["timeout", "error", "partial"]
DEGRADED_REASONS: Final[frozenset[str]] = frozenset({"timeout", "error", "partial"})

# Both engines' words for a query that ran out of time (lower case): valkey-search's error,
# RediSearch's error (ON_TIMEOUT FAIL) and its RESP3 warning (ON_TIMEOUT RETURN).
_TIMEOUT_WORDS = ("cancelled due to timeout", "timeout limit was reached", "timed out")

_ALL_FIELDS = IndexLayout()  # an index this library created: every field


def escape_text_term(word: str) -> str:
    """A word as a full-text query term: a backslash before every character not a letter or digit."""
    return "".join(ch if ch.isalnum() else "\\" + ch for ch in word)


def text_search_args(
    index: str,
    words: Sequence[str],
    flt: MemoryFilter,
    *,
    layout: IndexLayout = _ALL_FIELDS,
    per_word: bool,
    return_fields: Sequence[str],
    limit: int = TEXT_CANDIDATES,
    timeout_ms: int | None = None,
) -> list[list[str]]:
    """FT.SEARCH argument lists for the full-text candidates of a hybrid recall.

    RediSearch (``per_word=False``): one query, ``(@content:w1 F)|(@content:w2 F)|...``
    scored by BM25STD, the scope filter ``F`` repeated inside every branch: with
    ``F @content:(w1|w2)`` RediSearch 2.10 scores only one word of many documents.
    valkey-search (``per_word=True``): one query per word (an OR of words drops its
    stemmed matches, and it has no scorer); the caller ranks the union. Never a KNN
    with a text pre-filter: valkey-search 1.2.1 returned a document that does not match.
    ``timeout_ms``: sent as ``TIMEOUT`` (None: the server's default).
    """
    clauses = build_filter(flt, layout)

    def branch(word: str) -> str:
        term = f"@content:{escape_text_term(word)}"
        return f"({term} {clauses})" if clauses else f"({term})"

    tail = ["RETURN", str(len(return_fields)), *return_fields, "LIMIT", "0", str(limit)]
    if timeout_ms is not None:
        tail += ["TIMEOUT", str(int(timeout_ms))]
    tail += ["DIALECT", "2"]
    if per_word:
        return [["FT.SEARCH", index, branch(w), *tail] for w in words]
    if not words:
        return []
    return [["FT.SEARCH", index, "|".join(branch(w) for w in words), "SCORER", "BM25STD", *tail]]


def client_bound_seconds(timeout_ms: int) -> float:
    """How long the client waits for the text queries: the server's budget and half again (at least
    0.1 s more), for the round trip and a server that does not honour its TIMEOUT in time."""
    return (timeout_ms + max(100.0, timeout_ms / 2.0)) / 1000.0


def is_timeout_message(text: str) -> bool:
    """Whether a server's error (or warning) text says the query ran out of time (either engine)."""
    lowered = text.lower()
    return any(words in lowered for words in _TIMEOUT_WORDS)


def reply_warning(reply: Any) -> str | None:
    """The warning an FT.SEARCH reply carries (RediSearch's RESP3 map: ``warning``), else None.

    RESP2 replies (both engines) and valkey-search's replies carry none.
    """
    if not isinstance(reply, dict):
        return None
    warning = reply.get("warning", reply.get(b"warning"))
    if not warning:
        return None
    items = warning if isinstance(warning, list | tuple) else [warning]
    texts = [w.decode("utf-8", "replace") if isinstance(w, bytes) else str(w) for w in items]
    return "; ".join(t for t in texts if t) or None


class ScopesReadWhole:
    """Filters whose last KNN came back short of its ``k``, with how many memories it found.

    A filtered KNN that returns fewer than ``k`` found every memory the filter matches
    (RediSearch: its filtered KNN returns every match up to ``k``), so a recall whose KNN
    asks at least that many reads them all, and a text query under the same filter can
    add no candidate: ``tiers.hybrid`` does not send it. The text query costs a round of
    the engine's work even when it matches nothing (about a raw KNN's time on a scope of
    a few memories: ``bench/bench_text_budget.py``). A KNN under the filter that comes back
    full forgets it. Memories written into the scope in between are missed by one recall's
    text side at most: that recall's KNN comes back full. So are memories a full KNN
    returned and the client dropped (expired: deleted by that recall). Bounded: past
    ``capacity`` filters the oldest noted is forgotten first. Pure: the caller gives the key
    (the filter's engine text, ``""`` for none: never noted, the index's count decides).
    """

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._found: dict[str, int] = {}

    def note(self, key: str, found: int, k: int) -> None:
        """A KNN for ``k`` under the filter ``key`` returned ``found`` memories."""
        self._found.pop(key, None)
        if not key or found >= k:
            return
        self._found[key] = found
        if len(self._found) > self.capacity:
            self._found.pop(next(iter(self._found)))

    def read_whole(self, key: str, pool: int) -> bool:
        """Whether a KNN for ``pool`` under the filter ``key`` returns every memory it matches."""
        found = self._found.get(key)
        return found is not None and found <= pool
