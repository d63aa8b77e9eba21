"""The scope an MCP server is confined to: fixed at start, out of reach of tool arguments.

A model (or whoever holds the server's token) chooses every tool argument, so a server
started for one tenant must not let ``namespace="other"`` in a ``recall`` or the id of
another tenant's memory in a ``forget`` reach that tenant's data. ``FixedScope`` is the
whole rule, as pure functions the tools call before the store; nothing here does I/O.

The rule, for each fixed field (``namespace``, ``agent_id``):

- an argument left out takes the fixed value (reads are filtered by it, writes land in it);
- an argument equal to it passes;
- any other value is refused with ``PermissionDeniedError`` (code ``server.scope_denied``),
  never rewritten: a client asking for another scope learns that it was refused instead
  of silently getting its own scope's answer, which it would take for the other's;
- a memory named by id (``forget``, ``remember`` with an ``id`` that exists) must lie in
  the fixed scope, or the call is refused (the caller reads it first with ``get``);
- conversation turns are keyed by (agent, thread), not by namespace (README, Known
  limitations), so under a fixed namespace the session tools (``store_turn``,
  ``retrieve_context``) are refused unless the agent id is fixed too.

No ``thread_id`` restriction is offered: ``retrieve_context`` recalls across the threads
of its agent and namespace (long-term memory outlives a session), so a server fixed to
one thread could not serve it without reaching other threads' memories.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.keys import Scope
from ..core.models import MemoryItem
from ..errors import PermissionDeniedError

__all__ = ["SCOPE_DENIED", "FixedScope"]

#: The error code of every refusal (a ``PermissionDeniedError``).
SCOPE_DENIED = "server.scope_denied"

_FIELDS = ("namespace", "agent_id")


@dataclass(frozen=True)
class FixedScope:
    """The namespace and / or agent id every tool call is confined to (None: not fixed).

    Args:
        namespace: the only namespace tools may read or write.
        agent_id: the only agent id tools may read or write (sessions included).

    Raises:
        ValidationError: a value the store would refuse as a scope (empty, a comma, ...).
    """

    namespace: str | None = None
    agent_id: str | None = None

    def __post_init__(self) -> None:
        Scope.of(namespace=self.namespace, agent_id=self.agent_id)  # validates; raises on a bad value

    @property
    def active(self) -> bool:
        """True when at least one field is fixed (an inactive scope lets everything pass)."""
        return self.namespace is not None or self.agent_id is not None

    def as_dict(self) -> dict[str, str]:
        """The fixed fields only (for logs and error details)."""
        return {f: v for f in _FIELDS if (v := getattr(self, f)) is not None}

    def args(self, tool: str, **given: str | None) -> dict[str, Any]:
        """``given`` scope arguments with the fixed values filled in.

        Args:
            tool: the tool's name (for the error).
            given: the call's ``namespace`` and / or ``agent_id`` arguments.

        Returns:
            The same keys; a fixed field's value is the fixed one.

        Raises:
            PermissionDeniedError: an argument names another value than the fixed one.
        """
        out: dict[str, Any] = dict(given)
        for field, value in given.items():
            fixed = getattr(self, field)
            if fixed is None:
                continue
            if value is not None and value != fixed:
                raise PermissionDeniedError(
                    f"{tool}: this server is confined to {field}={fixed!r}; {field}={value!r} is refused",
                    code=SCOPE_DENIED,
                    details={"tool": tool, "argument": field, "allowed": fixed},
                )
            out[field] = fixed
        return out

    def check_memory(self, tool: str, item: MemoryItem | None) -> None:
        """Refuse a memory outside the fixed scope (None, a missing memory, passes).

        Raises:
            PermissionDeniedError: ``item`` lies in another namespace or agent.
        """
        if item is None:
            return
        for field in _FIELDS:
            fixed = getattr(self, field)
            if fixed is not None and getattr(item, field) != fixed:
                raise PermissionDeniedError(
                    f"{tool}: memory {item.id} lies outside this server's scope",
                    code=SCOPE_DENIED,
                    details={"tool": tool, "id": item.id, "scope": self.as_dict()},
                )

    def check_sessions(self, tool: str) -> None:
        """Refuse the session tools when a namespace is fixed without an agent id.

        Raises:
            PermissionDeniedError: ``namespace`` is fixed and ``agent_id`` is not.
        """
        if self.namespace is not None and self.agent_id is None:
            raise PermissionDeniedError(
                f"{tool}: conversation turns are keyed by agent and thread, not namespace; "
                "start the server with an agent id as well to use them under a fixed namespace",
                code=SCOPE_DENIED,
                details={"tool": tool, "scope": self.as_dict(), "reason": "sessions_need_agent_id"},
            )
