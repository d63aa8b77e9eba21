"""The one layer that holds the Valkey client: commands, searches, pipelines, scripts, locks.

Like httpx's transport, this is the strict point of cut-off between the library's
logic and the network. Every part of the store asks this object; none touches the
client. What it owns:

* **Execution with retry and error translation** (``retry.call``): idempotent
  operations are retried on connection faults, everything else fails once with
  what is known in ``details``; backend exceptions become the library's error tree.
* **Routing on a cluster.** valkey-search declares no key positions for FT.*, and
  valkey-py's async ``ValkeyCluster`` refuses to send a keyless command without a
  target; with the coordinator any node answers for the whole cluster, so searches
  go to the default node (``dialect.keyless_route``). FT.INFO asks for the cluster's
  counts (``PRIMARY``) there. A cluster pipeline carries keyed commands only, so a
  search is never queued in one (``pipeline(..., searches=...)`` sends them beside it).
* **One registry of Lua scripts**, sent as plain ``EVALSHA`` (valkey-py's ``Script``
  objects send ``SCRIPT EXISTS`` first, a second round trip, and ``pipe.evalsha`` is
  blocked on a cluster pipeline); on ``NOSCRIPT`` (a restart, ``SCRIPT FLUSH``, a new
  primary) every script is loaded again and the pipeline, safe to rerun because no
  script in it ran, is sent once more.
* **No half-rebuilt answers after a restart.** valkey-search rebuilds an index in the
  background once a restarted server has loaded its data, and answers queries from
  the part indexed so far meanwhile (a count of 873 for a scope of 4,000). So after
  a connection fault, and after the client opened a connection (valkey-py's pool
  silently reopens one the server closed: ``reconnects``), a query first asks
  ``FT.INFO`` whether its index is ready and waits, bounded by the retry budget,
  until it is; a query that itself went out on a newly opened connection is sent
  again once the index is ready. RediSearch indexes while loading, so on it none of
  this runs (``Capabilities.rebuilds_after_restart``).
* **One lock** (``Backend.lock``): a token lock that is safe to replay, released
  only by its owner (``locks.ScopedLock``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import valkey.asyncio
import valkey.asyncio.cluster
import valkey.exceptions as vexc

from ..core.ft_info import parse_ft_info
from ..errors import (
    IndexNotFoundError,
    StoreClosedError,
    StoreConnectionError,
    is_connection_error,
)
from . import scripts as _scripts
from .dialect import keyless_route
from .locks import ScopedLock
from .reconnects import watch_connections
from .retry import RetryPolicy, call

__all__ = ["Backend", "ScopedLock", "Script", "ValkeyClient"]

#: What a store accepts as its client: a standalone or a cluster asyncio client.
ValkeyClient: TypeAlias = "valkey.asyncio.Valkey | valkey.asyncio.cluster.ValkeyCluster"

log = logging.getLogger(__name__)

#: The FT.* commands whose answer depends on the index having indexed every document.
_QUERIES = frozenset({"FT.SEARCH", "FT.AGGREGATE"})


@dataclass(frozen=True, slots=True)
class Script:
    """A registered Lua script: its source and SHA1 (computed here, loaded on demand)."""

    name: str
    source: str
    sha: str


class Backend:
    """The client, and every way the library talks through it.

    Args:
        client: a ``valkey.asyncio.Valkey`` or ``ValkeyCluster`` (owned by the caller
            unless ``owned``).
        retry: connection-fault retry policy for idempotent operations.
    """

    def __init__(self, client: ValkeyClient, *, retry: RetryPolicy | None = None) -> None:
        self.client = client
        self.retry = retry or RetryPolicy()
        self._route = keyless_route(client)
        self.cluster = bool(self._route)
        self._scripts: dict[str, Script] = {}
        self.closed = False
        self._decodes: bool | None = None
        # Whether the engine may answer from a half-rebuilt index after a restart (until
        # the probe says otherwise: valkey-search does, RediSearch does not).
        self.rebuilds_after_restart = True
        # Set at every connection fault and every connection opened (the server may have
        # restarted and be rebuilding its indexes); cleared once the indexes were ready.
        self._unsure = False
        self._opened = 0
        self._settling = asyncio.Lock()
        watch_connections(client, self._note_open)
        self.lock_script = self.register("lock", _scripts.LOCK)
        self.unlock_script = self.register("unlock", _scripts.UNLOCK)

    @property
    def decodes(self) -> bool:
        """Whether the client decodes replies to ``str`` (``decode_responses=True``).

        Binary fields (vectors) cannot be read through such a client. Asked of the
        client on first use only.
        """
        if self._decodes is None:
            getter = getattr(self.client, "get_connection_kwargs", None)
            self._decodes = bool(getter().get("decode_responses")) if callable(getter) else False
        return self._decodes

    # -- scripts -----------------------------------------------------------------------------

    def register(self, name: str, source: str) -> Script:
        """Add a script to the registry (idempotent); it is loaded on first use."""
        sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
        script = self._scripts.setdefault(sha, Script(name, source, sha))
        return script

    @staticmethod
    def queue_script(pipe: Any, script: Script, keys: Sequence[str], args: Sequence[Any]) -> None:
        """Queue ``script`` in a pipeline as a plain ``EVALSHA``."""
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)

    async def load_scripts(self) -> None:
        """Load every registered script (on every primary of a cluster)."""
        for script in self._scripts.values():
            await self.client.script_load(script.source)

    # -- commands ------------------------------------------------------------------------------

    async def call(
        self,
        operation: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        idempotent: bool = True,
        details: Mapping[str, Any] | None = None,
    ) -> Any:
        """Run ``fn`` with retry (when idempotent) and error translation.

        Raises:
            StoreClosedError: after ``close()`` of the store that owns this backend.
        """
        if self.closed:
            raise StoreClosedError(
                f"the store was closed; {operation} cannot run", details={"operation": operation}
            )
        return await call(
            operation,
            fn,
            policy=self.retry,
            idempotent=idempotent,
            details=details,
            on_fault=self._note_fault,
        )

    def _note_fault(self) -> None:
        self._unsure = True

    def _note_open(self) -> None:
        self._opened += 1
        self._unsure = True

    async def _queries(
        self, queries: Sequence[Sequence[Any]], send: Callable[[], Awaitable[list[Any]]]
    ) -> list[Any]:
        """Send a round trip whose last replies answer ``queries``; never from a half-rebuilt index.

        Once the server may have restarted (``_unsure``) the indexes are checked first.
        If a connection was opened while the round trip was under way, the server may
        have restarted just before it: the indexes are checked and ``queries`` alone
        are sent again (any writes before them in the round trip ran once).
        """
        if not self.rebuilds_after_restart or not any(q and q[0] in _QUERIES for q in queries):
            return await send()
        if self._unsure:
            await self._settle(queries)
        opened = self._opened
        replies = await send()
        if self._opened != opened:  # one re-send: the index was found ready after that opening
            self._unsure = True
            await self._settle(queries)
            again = await asyncio.gather(
                *(self.client.execute_command(*self._search_args(q), **self._route) for q in queries)
            )
            replies[len(replies) - len(queries) :] = again
        return replies

    async def _settle(self, queries: Sequence[Sequence[Any]]) -> None:
        """Wait until the indexes ``queries`` read are ready (the server may have restarted).

        Runs inside the caller's retry loop (a fault here is retried like the query's
        own). Bounded by the retry budget; past it a ``StoreConnectionError``
        (``connection.index_rebuilding``) says so rather than a partial answer.
        """
        indexes = list(dict.fromkeys(str(q[1]) for q in queries if len(q) > 1 and q[0] in _QUERIES))
        if not indexes:
            return
        async with self._settling:
            if not self._unsure:
                return
            deadline = time.monotonic() + self.retry.budget
            for index in indexes:
                while not await self._index_ready(index):
                    if time.monotonic() > deadline:
                        raise StoreConnectionError(
                            f"index {index} is still being rebuilt after a server restart "
                            f"(waited {self.retry.budget:.0f}s); its answers would be partial",
                            code="connection.index_rebuilding",
                            details={"index": index, "waited_seconds": self.retry.budget},
                        )
                    await asyncio.sleep(0.05)
            self._unsure = False

    async def _index_ready(self, index: str) -> bool:
        """Whether ``index`` has indexed every document (an absent index counts as ready:
        the query then fails with ``IndexNotFoundError``, which the index manager handles).

        On a cluster ``FT.INFO <index> CLUSTER`` reports any shard's backfill; an engine
        without that form (valkey-search 1.0) is asked for the node's own state.
        """
        forms: list[list[Any]] = [["FT.INFO", index]]
        if self.cluster:
            forms.insert(0, ["FT.INFO", index, "CLUSTER"])
        for args in forms:
            try:
                reply = await self.client.execute_command(*args, **self._route)
            except vexc.ResponseError as exc:
                if is_connection_error(exc):
                    raise
                if len(args) == 3:  # the CLUSTER form is unknown here: ask the node
                    continue
                return True  # no such index
            return parse_ft_info(reply).ready
        return True  # pragma: no cover - the plain form always answers or raises

    async def command(self, operation: str, *args: Any, idempotent: bool = True) -> Any:
        """One keyed command."""
        return await self.call(operation, lambda: self.client.execute_command(*args), idempotent=idempotent)

    async def search(self, operation: str, args: Sequence[Any]) -> Any:
        """One FT.* command (routed to a node that answers for the whole cluster).

        On a cluster an FT.SEARCH asks for ``ALLSHARDS``: valkey-search otherwise answers
        with what the reachable shards hold (``search.enable-partial-results``), so a
        shard that is down or restarting would silently be missing from a recall, a
        count or a scope deletion. With it such a query fails (a typed error) instead.
        """
        full = self._search_args(args)

        async def send() -> list[Any]:
            return [await self.client.execute_command(*full, **self._route)]

        async def run() -> Any:
            return (await self._queries([args], send))[0]

        return await self.call(operation, run)

    def _search_args(self, args: Sequence[Any]) -> list[Any]:
        if self.cluster and args and args[0] == "FT.SEARCH":
            return [*args[:3], "ALLSHARDS", *args[3:]]
        return list(args)

    async def index_info(self, index: str, *, cluster_counts: bool = False) -> Any:
        """The raw FT.INFO reply of ``index``, or None when there is none.

        On a cluster a plain FT.INFO describes the schema but counts one shard's
        documents; ``cluster_counts=True`` asks for the primaries' totals instead
        (``FT.INFO <index> PRIMARY``, whose reply leaves out the field types).
        """
        args: list[Any] = ["FT.INFO", index]
        if cluster_counts and self.cluster:
            args.append("PRIMARY")
        try:
            return await self.search("index_info", args)
        except IndexNotFoundError:
            return None

    async def script(
        self,
        operation: str,
        script: Script,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        idempotent: bool = True,
    ) -> Any:
        """Run one script (loading the registry on ``NOSCRIPT``)."""
        out = await self.pipeline(
            operation, lambda pipe: self.queue_script(pipe, script, keys, args), idempotent=idempotent
        )
        return out[0]

    async def pipeline(
        self,
        operation: str,
        build: Callable[[Any], None],
        *,
        idempotent: bool = True,
        details: Mapping[str, Any] | None = None,
        searches: Sequence[Sequence[Any]] = (),
    ) -> list[Any]:
        """One non-transactional pipeline of keyed commands and scripts, then ``searches``.

        Returns the pipeline's replies followed by the searches' replies. On a single
        server the searches ride in the same round trip (after the writes, which both
        engines index before answering the next command); on a cluster they are sent
        beside it, to a node that answers for the whole cluster, once the pipeline
        returned. ``NOSCRIPT`` reloads the registry and sends the pipeline again.
        """

        async def send() -> list[Any]:
            for attempt in (1, 2):
                pipe = self.client.pipeline(transaction=False)
                build(pipe)
                if not self.cluster:
                    for args in searches:
                        pipe.execute_command(*args)
                try:
                    replies = list(await pipe.execute()) if len(pipe) else []
                except vexc.NoScriptError:
                    if attempt == 2:
                        raise
                    await self.load_scripts()
                    continue
                if self.cluster and searches:
                    replies += await asyncio.gather(
                        *(self.client.execute_command(*self._search_args(a), **self._route) for a in searches)
                    )
                return replies
            raise AssertionError("unreachable")  # pragma: no cover

        async def run() -> list[Any]:
            return await self._queries(searches, send) if searches else await send()

        replies: list[Any] = await self.call(operation, run, idempotent=idempotent, details=details)
        return replies

    def lock(self, key: str, *, ttl: float, wait: float, heartbeat: bool = True) -> ScopedLock:
        """A ``ScopedLock`` on ``key`` (use ``async with``)."""
        return ScopedLock(self, key, ttl=ttl, wait=wait, heartbeat=heartbeat)
