"""The one layer that holds the Valkey client: commands, searches, pipelines, scripts, locks.

Like httpx's transport, this is the strict point of cut-off between the library's
logic and the network. Every part of the store asks this object (through the
``protocol.Backend`` it implements) and hands it commands as values
(``commands``); none touches the client. What it owns:

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
* **One lock** (``Backend.lock``): a replay-safe token lock released only by its owner (``locks.ScopedLock``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

import valkey.asyncio
import valkey.asyncio.cluster
import valkey.exceptions as vexc

from ..core.codec import as_text
from ..core.dialect import Capabilities
from ..core.index_gen import redirect
from ..errors import BetterDBMemoryError, IndexNotFoundError, StoreClosedError, StoreConnectionError
from . import scripts as _scripts
from .cluster_nodes import load_scripts_on, restore_startup_nodes
from .commands import Attempts, ScriptCall, Step, wire
from .dialect import index_ready, keyless_route, probe, search_command
from .index_nudge import ScriptWriteNudge
from .locks import ScopedLock
from .reconnects import watch_connections
from .replication import ReplicaWait, check_waits, queue_waits, run_waited, wait_fault, waits_for
from .retry import RetryPolicy, again, call, honour_cancel

__all__ = ["ScopedLock", "ValkeyBackend", "ValkeyClient", "as_backend", "connect"]

if TYPE_CHECKING:
    from .protocol import Backend

T = TypeVar("T")

#: What a store accepts as its client: a standalone or a cluster asyncio client.
ValkeyClient: TypeAlias = "valkey.asyncio.Valkey | valkey.asyncio.cluster.ValkeyCluster"

log = logging.getLogger(__name__)

#: The FT.* commands whose answer depends on the index having indexed every document.
_QUERIES = frozenset({"FT.SEARCH", "FT.AGGREGATE"})


class ValkeyBackend:
    """The ``Backend`` over a valkey-py asyncio client: every way the library talks to Valkey.

    Args:
        client: a ``valkey.asyncio.Valkey`` or ``ValkeyCluster`` (owned by the caller
            unless ``owned``).
        retry: connection-fault retry policy for idempotent operations.
        wait: replicas each write must reach before it returns (``replication``); None: none.
    """

    def __init__(
        self, client: ValkeyClient, *, retry: RetryPolicy | None = None, wait: ReplicaWait | None = None
    ) -> None:
        self.client = client
        self.retry = retry or RetryPolicy()
        self.wait = wait
        self._route = keyless_route(client)
        self.cluster = bool(self._route)
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
        #: Index names queried before an index switch -> the one in use (``core.index_gen.redirect``).
        self.redirects: dict[str, str] = {}
        # Set by ``probe``: a cluster's valkey-search indexes scripts' writes late (``index_nudge``);
        # RediSearch's searches carry TIMEOUT 0, valkey-search's ALLSHARDS (``dialect.search_command``).
        self.defers_script_writes, self.nudge, self.unbounded_searches = True, ScriptWriteNudge(client), False
        self.all_shards_searches = self.cluster

    @property
    def decodes(self) -> bool:
        """Whether the client decodes replies to ``str`` (then binary fields, vectors, cannot be read); asked once."""
        if self._decodes is None:
            getter = getattr(self.client, "get_connection_kwargs", None)
            self._decodes = bool(getter().get("decode_responses")) if callable(getter) else False
        return self._decodes

    # -- scripts -----------------------------------------------------------------------------

    async def load_scripts(self, commands: Sequence[Step] = ()) -> None:
        """Load every script of the registry (``scripts.ALL``): on every primary of a cluster, and
        on each node ``commands`` go to (``cluster_nodes.load_scripts_on``)."""
        for script in _scripts.ALL:
            await self.client.script_load(script.source)
        if self.cluster and commands:
            await load_scripts_on(self.client, commands, _scripts.ALL)

    # -- commands ------------------------------------------------------------------------------

    async def _call(
        self,
        operation: str,
        fn: Callable[[], Awaitable[T]],
        *,
        idempotent: bool = True,
        details: Mapping[str, Any] | None = None,
    ) -> T:
        """Run ``fn`` with retry (when idempotent) and error translation; ``StoreClosedError`` once closed."""
        self._open(operation)

        async def attempt() -> T:
            if self.cluster:  # valkey-py may have emptied its startup nodes (``cluster_nodes``)
                restore_startup_nodes(self.client)
            return await fn()

        return await call(
            operation,
            attempt,
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
                while not await index_ready(self.client, index, cluster=self.cluster, route=self._route):
                    if time.monotonic() > deadline:
                        raise StoreConnectionError(
                            f"index {index} is still being rebuilt after a server restart "
                            f"(waited {self.retry.budget:.0f}s); its answers would be partial",
                            code="connection.index_rebuilding",
                            details={"index": index, "waited_seconds": self.retry.budget},
                        )
                    await asyncio.sleep(0.05)
            self._unsure = False

    async def command(self, operation: str, *args: Any, idempotent: bool = True) -> Any:
        """One keyed command (a write with ``wait`` set goes in a pipeline, beside its ``WAIT``)."""
        if self.wait is not None and waits_for(operation, [args]):
            return (await self.pipeline(operation, [args], idempotent=idempotent))[0]
        # ``_call``'s first attempt written out (issue 29: a single write's Python), a failure retried by ``again``.
        client, start = self._open(operation), time.monotonic()
        try:
            if self.cluster:
                restore_startup_nodes(client)
            reply = await client.execute_command(*args)
        except BetterDBMemoryError:
            raise
        except Exception as exc:
            failed = exc  # retried outside the handler, as ``retry.call`` does
        else:
            honour_cancel()
            return reply
        send = functools.partial(self._attempt, args)
        return await again(operation, send, failed, start=start, policy=self.retry, idempotent=idempotent,
                           on_fault=self._note_fault)  # fmt: skip

    def _open(self, operation: str) -> ValkeyClient:
        """The client, unless the store was closed (``StoreClosedError``)."""
        if self.closed:
            raise StoreClosedError(
                f"the store was closed; {operation} cannot run", details={"operation": operation}
            )
        return self.client

    async def _attempt(self, args: Sequence[Any]) -> Any:
        """One more attempt of ``command`` (its retries: the startup nodes restored first on a cluster)."""
        if self.cluster:
            restore_startup_nodes(self.client)
        return await self.client.execute_command(*args)

    async def search(self, operation: str, args: Sequence[Any]) -> Any:
        """One FT.* command (routed to a node that answers for the whole cluster).

        On valkey-search >= 1.1 an FT.SEARCH asks for ``ALLSHARDS`` (``dialect.search_command``): a
        shard down or a ``TIMEOUT`` then fails the query (a typed error) instead of answering short.
        """
        args = self.nudge.seen(redirect(args, self.redirects))
        full = self._search_args(args)
        self._open(operation)
        start = time.monotonic()  # ``_call`` with its layers written out (issue 29), as ``command``
        try:
            reply = await self._search_once(args, full)
        except BetterDBMemoryError:
            raise
        except Exception as exc:
            failed = exc
        else:
            honour_cancel()
            return reply
        send = functools.partial(self._search_once, args, full)
        return await again(operation, send, failed, start=start, policy=self.retry, on_fault=self._note_fault)

    async def _search_once(self, args: Sequence[Any], full: Sequence[Any]) -> Any:
        """One attempt of ``search``: ``_queries`` for one query, without its closures."""
        client, route = self.client, self._route
        if self.cluster:
            restore_startup_nodes(client)
        if not self.rebuilds_after_restart or not args or args[0] not in _QUERIES:
            return await client.execute_command(*full, **route)
        if self._unsure:
            await self._settle([args])
        opened = self._opened
        reply = await client.execute_command(*full, **route)
        if self._opened != opened:  # as ``_queries``: sent again once the index is found ready
            self._unsure = True
            await self._settle([args])
            reply = await client.execute_command(*full, **route)
        return reply

    def _search_args(self, args: Sequence[Any]) -> list[Any]:
        return search_command(args, all_shards=self.all_shards_searches, unbounded=self.unbounded_searches)

    async def index_info(self, index: str, *, cluster_counts: bool = False) -> Any:
        """The raw FT.INFO reply of ``index``, or None when there is none.

        On a cluster a plain FT.INFO describes the schema but counts one shard's documents;
        ``cluster_counts=True`` asks for the primaries' totals (``FT.INFO <index> PRIMARY``, no field types).
        """
        args: list[Any] = ["FT.INFO", index]
        if cluster_counts and self.cluster:
            args.append("PRIMARY")
        try:
            return await self.search("index_info", args)
        except IndexNotFoundError:
            return None

    async def script(self, operation: str, call: ScriptCall, *, idempotent: bool = True) -> Any:
        """Run one script (loading the registry on ``NOSCRIPT``)."""
        return (await self.pipeline(operation, [call], idempotent=idempotent))[0]

    async def pipeline(
        self,
        operation: str,
        commands: Sequence[Step],
        *,
        idempotent: bool = True,
        details: Mapping[str, Any] | None = None,
        searches: Sequence[Sequence[Any]] = (),
        attempts: Attempts | None = None,
    ) -> list[Any]:
        """One non-transactional pipeline of ``commands`` (keyed commands, script calls), then ``searches``.

        Returns the pipeline's replies followed by the searches' replies. On a single
        server the searches ride in the same round trip (after the writes, which both
        engines index before answering the next command); on a cluster they are sent
        beside it, to a node that answers for the whole cluster, once the pipeline
        returned. ``NOSCRIPT`` reloads the registry and sends the pipeline again.
        With ``wait`` set and a write among ``commands``, a ``WAIT`` follows the writes on
        each connection that took one (``replication``); its replies are not returned.
        """
        searches = [self.nudge.seen(redirect(s, self.redirects, probes=True)) for s in searches]
        wait = self.wait if self.wait is not None and waits_for(operation, commands) else None

        async def send() -> list[Any]:
            for attempt in (1, 2):
                if attempts is not None:
                    attempts.count += 1
                pipe = self.client.pipeline(transaction=False)
                for step in commands:
                    pipe.execute_command(*wire(step))
                nodes = await queue_waits(self.client, pipe, commands, wait) if wait is not None else []
                if not self.cluster:  # with ALLSHARDS / TIMEOUT 0 where needed, as ``search`` sends them
                    for args in searches:
                        pipe.execute_command(*self._search_args(args))
                try:
                    replies, asked = await run_waited(self.client, pipe, wait if self.cluster else None)
                except vexc.NoScriptError:
                    if attempt == 2:
                        raise
                    await self.load_scripts(commands)
                    continue
                except (vexc.ResponseError, vexc.ValkeyClusterException) as exc:
                    fault = wait_fault(exc, len(commands)) if wait is not None else None
                    if fault is None:
                        raise
                    raise fault from exc
                if wait is not None:
                    await check_waits(self.client, operation, commands, wait, nodes, replies, asked)
                if self.cluster and self.defers_script_writes:  # before the searches: they see the writes
                    await self.nudge.after(commands)
                if self.cluster and searches:
                    replies += await asyncio.gather(
                        *(self.client.execute_command(*self._search_args(a), **self._route) for a in searches)
                    )
                return replies
            raise AssertionError("unreachable")  # pragma: no cover

        async def run() -> list[Any]:
            return await self._queries(searches, send) if searches else await send()

        replies: list[Any] = await self._call(operation, run, idempotent=idempotent, details=details)
        return replies

    async def scan(self, operation: str, pattern: str, *, count: int = 1000) -> AsyncIterator[list[str]]:
        """Batches of key names matching ``pattern`` (glob), each name once per SCAN pass.

        ``SCAN`` on the server, or on every primary of a cluster in turn; each call is
        retried on its own (SCAN is stateless on the server, so a retried call is safe).
        SCAN may return a name twice: callers are idempotent per key.
        """
        client: Any = self.client
        nodes: list[Any] = list(client.get_primaries()) if self.cluster else [None]
        for node in nodes:
            cursor = 0
            route = {"target_nodes": node} if node is not None else {}
            while True:

                async def step(cursor: int = cursor, route: dict[str, Any] = route) -> Any:
                    return await client.scan(cursor=cursor, match=pattern, count=count, **route)

                reply, names = await self._call(operation, step)
                # A cluster client answers {node name: cursor}; a single server, the cursor.
                cursor = int(next(iter(reply.values())) if isinstance(reply, dict) else reply)
                if names:
                    yield [as_text(n) for n in names]
                if cursor == 0:
                    break

    async def probe(self) -> Capabilities:
        """Which search engine the server runs (``dialect.probe``), retried and translated."""
        caps = await self._call("probe", lambda: probe(self.client))
        self.defers_script_writes = caps.defers_script_writes
        self.unbounded_searches = caps.partial_on_timeout
        self.all_shards_searches = caps.shard_options or (self.cluster and caps.engine == "unknown")
        return caps

    def lock(self, key: str, *, ttl: float, wait: float, heartbeat: bool = True) -> ScopedLock:
        """A ``ScopedLock`` on ``key`` (use ``async with``)."""
        return ScopedLock(self, key, ttl=ttl, wait=wait, heartbeat=heartbeat)

    async def aclose(self) -> None:
        """Close the client (only for a client this library opened: ``connect``)."""
        await self.client.aclose()


def connect(
    url: str, *, max_connections: int | None = None, timeout: float | None = None
) -> valkey.asyncio.Valkey:
    """A client for ``url``: the one place outside the transport that needs one asks here.

    With ``max_connections`` the pool blocks (up to ``timeout`` seconds) when every
    connection is busy instead of failing; ``timeout`` is also the socket timeout.
    The caller owns the client (``await client.aclose()``).
    """
    if max_connections is None:
        client: valkey.asyncio.Valkey = valkey.asyncio.Valkey.from_url(url)
        return client
    pool = valkey.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout, socket_timeout=timeout
    )
    return valkey.asyncio.Valkey.from_pool(pool)  # the client owns (and closes) the pool


def as_backend(client: ValkeyClient | Backend | None) -> Backend:
    """``client`` itself when it is already a backend (a store's, a ``RecordingBackend``),
    else a ``ValkeyBackend`` of its own over the valkey client (None: one that is never
    used, as unit tests build observability without a server)."""
    if isinstance(client, ValkeyBackend) or (hasattr(client, "probe") and hasattr(client, "index_info")):
        return cast("Backend", client)
    return ValkeyBackend(cast("ValkeyClient", client))
