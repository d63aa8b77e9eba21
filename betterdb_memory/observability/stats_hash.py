"""``StatsHash``: the store's counters in the Valkey hash BetterDB Monitor polls.

Monitor reads ``HGETALL <name>:__mem_stats`` about every 15 s and shows its counters
(``evictions`` among them). The field names are a fixed set (``STATS_FIELDS``) so a
typo fails loudly instead of creating a field Monitor never reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from ..backend import Backend, Command, ValkeyClient, as_backend
from ..core.keys import stats_key
from ..core.validation import check_int
from ..errors import ValidationError

__all__ = ["STATS_FIELDS", "StatsHash", "stats_key"]

# Counters in the stats hash. A fixed set so a typo fails loudly instead of
# creating a field Monitor never reads.
STATS_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "background_failures",
        "config_rejected",
        "consolidations",
        "dedup_hits",
        "evictions",
        "forgets",
        "recall_empty",
        "recall_hits",
        "recall_near_miss",
        "recalls",
        "remembers",
        "tombstones_unmatched",
        "turns_stored",
    }
)


class _Queue(Protocol):
    """A pipeline of the caller's (valkey-py's ``Pipeline`` and ``ClusterPipeline`` both fit)."""

    def execute_command(self, *args: Any, **options: Any) -> Any: ...


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _check_field(field: str) -> str:
    if field not in STATS_FIELDS:
        raise ValidationError(
            f"unknown stats field {field!r}; known: {sorted(STATS_FIELDS)}", details={"argument": "field"}
        )
    return field


def _check_increment(n: int) -> int:
    return check_int(n, "n", minimum=0)


class StatsHash:
    """The store's counters in a Valkey hash (``<name>:__mem_stats``), read by Monitor.

    Server-side counters, unlike Prometheus ones, add up across every process
    using the store and survive restarts, which is what Monitor's per-store view
    needs.

    Args:
        client: an asyncio ``Valkey`` or cluster client (``decode_responses`` either way),
            or the owning store's ``Backend``.
        key: the hash key, ``stats_key(name)`` by convention.
    """

    def __init__(self, client: ValkeyClient | Backend, key: str) -> None:
        self._backend = as_backend(client)
        self.key = key

    def __repr__(self) -> str:
        return f"StatsHash(key={self.key!r})"

    async def incr(self, field: str, n: int = 1) -> int:
        """``HINCRBY key field n``; returns the new value.

        Raises:
            ValidationError: unknown field or negative ``n``.
            BetterDBMemoryError: the server call failed (translated).
        """
        field, n = _check_field(field), _check_increment(n)
        value = await self._backend.command("stats.incr", "HINCRBY", self.key, field, n, idempotent=False)
        return int(value)

    def command(self, field: str, n: int = 1) -> Command:
        """``HINCRBY key field n`` as a value, for the caller's own round trip (always
        exactly one command, even for ``n == 0``, so the caller's reply indexes stay fixed).

        Raises:
            ValidationError: unknown field or negative ``n``.
        """
        return ("HINCRBY", self.key, _check_field(field), _check_increment(n))

    def add_to_pipeline(self, pipe: _Queue, field: str, n: int = 1) -> None:
        """Queue ``command(field, n)`` on a valkey-py pipeline of the caller's, so a write
        and its counters travel in one round trip.

        Raises:
            ValidationError: unknown field or negative ``n``.
        """
        pipe.execute_command(*self.command(field, n))

    async def incr_many(self, counts: Mapping[str, int]) -> None:
        """Add several counters in one round trip; zero counts are skipped.

        Raises:
            ValidationError: unknown field or negative count (nothing is sent).
            BetterDBMemoryError: the server call failed (translated).
        """
        items = [(_check_field(f), _check_increment(n)) for f, n in counts.items()]
        items = [(f, n) for f, n in items if n]
        if not items:
            return

        increments: list[Command] = [("HINCRBY", self.key, field, n) for field, n in items]
        await self._backend.pipeline("stats.incr", increments, idempotent=False, details={"key": self.key})

    async def read(self) -> dict[str, int | str]:
        """``HGETALL`` decoded: integer-looking values as ``int``, others as ``str``.

        Raises:
            BetterDBMemoryError: the server call failed (translated).
        """
        raw = await self._backend.command("stats.read", "HGETALL", self.key)
        out: dict[str, int | str] = {}
        for k, v in raw.items():
            text = _text(v)
            try:
                out[_text(k)] = int(text)
            except ValueError:
                out[_text(k)] = text
        return out
