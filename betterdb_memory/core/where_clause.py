"""What ``query.MemoryFilter.where`` holds, named by what it offers (``core.where.Where`` is one).

A module of its own because ``query`` sits below the filter modules (they import it),
so it cannot import ``core.where``; this Protocol is all it needs of a compiled filter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["WhereClause"]


class WhereClause(Protocol):
    """A compiled ``where=`` filter: one AND clause of a query, and its client-side re-check."""

    @property
    def text(self) -> str:
        """The query text: one AND clause (it may begin with ``-``)."""
        ...

    @property
    def fields(self) -> tuple[str, ...]:
        """The HASH fields ``matches`` reads."""
        ...

    def matches(self, fields: Mapping[str, Any]) -> bool:
        """The client-side re-check of one result's raw fields."""
        ...
