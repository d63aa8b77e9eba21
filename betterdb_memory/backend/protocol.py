"""``Backend``: the one seam between the store's parts and Valkey, as a ``typing.Protocol``.

The parts depend on this protocol, never on a client: they hand it commands as values
(``backend.commands``) and get replies back. ``ValkeyBackend`` (``backend.client``) is
the real one (retries, error translation, cluster routing, the script registry, the
closed check); ``testing.RecordingBackend`` records what the parts send and answers
from a script of replies, so a part's commands are unit-tested without a server.

Every round trip names its ``operation`` (the public call it serves: errors carry it
in ``details``) and says whether it is ``idempotent`` (retried on a connection fault
when it is: a read, or a write whose ids were fixed before the first attempt).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .commands import Attempts, ScriptCall, Step
from .retry import RetryPolicy

if TYPE_CHECKING:
    from ..core.dialect import Capabilities
    from .locks import ScopedLock

__all__ = ["Backend"]


class Backend(Protocol):
    """What the store's parts ask of the transport."""

    #: The connection-fault retry policy (its ``budget`` also bounds waits for an index).
    retry: RetryPolicy
    #: Whether the server is a cluster (searches then go beside a pipeline, not in it).
    cluster: bool
    #: Set by the owning store's ``close()``: every round trip then raises ``StoreClosedError``.
    closed: bool
    #: Whether the engine may answer from a half-rebuilt index after a restart.
    rebuilds_after_restart: bool

    @property
    def decodes(self) -> bool:
        """Whether replies come back as ``str`` (binary fields cannot be read then)."""
        ...

    async def command(self, operation: str, *args: Any, idempotent: bool = True) -> Any:
        """One keyed command (``args`` is the command: name first)."""
        ...

    async def search(self, operation: str, args: Sequence[Any]) -> Any:
        """One FT.* command (keyless: routed to a node that answers for the whole cluster)."""
        ...

    async def script(self, operation: str, call: ScriptCall, *, idempotent: bool = True) -> Any:
        """One script call; its reply."""
        ...

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
        """``commands`` in one pipeline, then ``searches``; their replies, in that order.

        ``attempts``, when given, counts how many times the round trip went out.
        """
        ...

    async def index_info(self, index: str, *, cluster_counts: bool = False) -> Any:
        """The raw FT.INFO reply of ``index``, or None when there is none."""
        ...

    def scan(self, operation: str, pattern: str, *, count: int = 1000) -> AsyncIterator[list[str]]:
        """Batches of key names matching ``pattern`` (every primary of a cluster)."""
        ...

    async def probe(self) -> Capabilities:
        """Which search engine the server runs, and what its dialect can do."""
        ...

    def lock(self, key: str, *, ttl: float, wait: float, heartbeat: bool = True) -> ScopedLock:
        """A replay-safe token lock on ``key`` (``async with``)."""
        ...
