"""What a store call past the server's query timeout may answer: an error saying so, or the whole answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from betterdb_memory import ServerError

__all__ = ["exact_or_timeout"]


async def exact_or_timeout(call: Callable[[], Awaitable[Any]], exact: Any) -> str:
    """``"timeout"`` when ``call`` raised ``server.search_timeout``, ``"whole"`` when it answered ``exact``; else fails."""
    try:
        got = await call()
    except ServerError as exc:
        error: ServerError | None = exc
    else:
        error = None
    if error is not None:
        assert error.code == "server.search_timeout", error
        return "timeout"
    assert got == exact, f"a short answer came back without an error: {got!r}, not {exact!r}"
    return "whole"
