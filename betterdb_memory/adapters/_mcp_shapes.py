"""The MCP tools' wire shapes: the JSON objects they return, and a store call as a tool result.

Kept apart from the server (``mcp``) so the output schemas and the error mapping read as
one idea: a ``BetterDBMemoryError`` becomes a tool error (``isError: true``) whose text
is ``[code] message`` and whose ``structuredContent`` is ``{"error": {...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any, TypeVar, cast

from ..core.facts import FactRecord
from ..core.models import MemoryHit, MemoryItem
from ..core.turns import Turn
from ..errors import BetterDBMemoryError
from ._extras import missing_extra

try:
    from mcp.types import CallToolResult, TextContent
    from typing_extensions import TypedDict  # pydantic needs this one below Python 3.12
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra("The MCP server (betterdb_memory.adapters.mcp)", "mcp", _exc) from _exc

__all__ = [
    "ContextResult",
    "FactHistoryResult",
    "FactVersion",
    "ForgetResult",
    "Hit",
    "ListResult",
    "Memory",
    "RecallResult",
    "RememberResult",
    "StatsResult",
    "StoreTurnResult",
    "TokensUsed",
    "TurnOut",
    "call_tool",
    "error_result",
    "fact_out",
    "hit_out",
    "memory_out",
    "turn_out",
]

_T = TypeVar("_T")


# -- wire shapes (the tools' output schemas) ----------------------------------------------


class Memory(TypedDict):
    """A long-term memory as the tools return it (``MemoryItem``'s fields; times in epoch ms)."""

    id: str
    content: str
    importance: float
    created_at: int
    last_accessed_at: int
    access_count: int
    tags: list[str]
    source: str | None
    thread_id: str | None
    agent_id: str | None
    namespace: str | None
    sensitivity: str
    kind: str
    subject: str | None
    expires_at: int | None
    metadata: dict[str, Any]
    date: str | None
    valid_from: int
    valid_until: int | None


class Hit(TypedDict):
    memory: Memory
    score: float
    similarity: float
    distance: float
    #: The id of a newer statement of the same attribute this one ranks below (same-slot
    #: supersession: likely outdated); None otherwise.
    superseded_by: str | None


class RememberResult(TypedDict):
    id: str


class RecallResult(TypedDict):
    hits: list[Hit]


class ForgetResult(TypedDict):
    deleted: bool


class ListResult(TypedDict):
    items: list[Memory]
    total: int
    next_cursor: str | None


class StatsResult(TypedDict):
    name: str
    index: str
    items: int
    evictions: int
    counters: dict[str, int]
    engine: str
    embedder: str
    dimensions: int
    index_ready: bool | None
    config: dict[str, Any]


class FactVersion(TypedDict):
    """One version of a subject (``FactRecord``; times in epoch ms, ``valid_until`` None while current)."""

    id: str
    subject: str
    statement: str
    content: str
    date: str | None
    valid_from: int | None
    valid_until: int | None
    superseded_by: str | None
    current: bool
    retracted: bool
    recorded_at: int


class FactHistoryResult(TypedDict):
    versions: list[FactVersion]


class StoreTurnResult(TypedDict):
    turn_id: str


class TurnOut(TypedDict):
    seq: int
    user_message: str
    assistant_message: str
    timestamp: float


class TokensUsed(TypedDict):
    memories: int
    turns: int
    current_turn: int
    total: int


class ContextResult(TypedDict):
    text: str
    memories: list[Hit]
    turns: list[TurnOut]
    token_budget: int
    tokens_used: TokensUsed
    skipped_memories: int
    skipped_turns: int


# -- conversions ---------------------------------------------------------------------------


def memory_out(item: MemoryItem) -> Memory:
    """A ``MemoryItem`` as the JSON object the tools return."""
    return cast(Memory, asdict(item))


def fact_out(record: FactRecord) -> FactVersion:
    """A ``FactRecord`` as the JSON object ``fact_history`` returns (its times in epoch ms)."""
    return cast(FactVersion, record.as_json())


def hit_out(hit: MemoryHit) -> Hit:
    return Hit(
        memory=memory_out(hit.item),
        score=hit.score,
        similarity=hit.similarity,
        distance=hit.distance,
        superseded_by=hit.explain.superseded_by if hit.explain else None,
    )


def turn_out(turn: Turn) -> TurnOut:
    return TurnOut(
        seq=turn.seq,
        user_message=turn.user_message,
        assistant_message=turn.assistant_message,
        timestamp=turn.timestamp,
    )


def ok(payload: Mapping[str, Any]) -> CallToolResult:
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(payload))


def error_result(exc: BetterDBMemoryError) -> CallToolResult:
    """A tool error carrying the store's error code (text for the model, structure for programs)."""
    error = {
        "code": exc.code,
        "message": exc.message,
        "details": json.loads(json.dumps(exc.details, default=str)),
    }
    return CallToolResult(
        content=[TextContent(type="text", text=str(exc))], structured_content={"error": error}, is_error=True
    )


async def call_tool(
    run: Callable[[], Awaitable[_T]], shape: Callable[[_T], Mapping[str, Any]]
) -> CallToolResult:
    """Run one store call; its typed errors become tool errors, everything else propagates."""
    try:
        value = await run()
    except BetterDBMemoryError as exc:
        return error_result(exc)
    return ok(shape(value))
