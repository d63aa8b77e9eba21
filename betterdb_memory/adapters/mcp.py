"""An MCP server over a ``MemoryStore``: ``betterdb-memory mcp`` (stdio or streamable HTTP).

Tools: ``remember``, ``recall``, ``forget``, ``list``, ``stats``, ``fact_history``,
``store_turn`` and ``retrieve_context``, each one call of the public API. The SDK checks argument types
against the schema it derives from the signatures below; the store validates values.
A ``BetterDBMemoryError`` becomes a tool error (``isError: true``) whose text is the
error's ``[code] message`` and whose ``structuredContent`` is
``{"error": {"code", "message", "details"}}``; anything else is the SDK's generic
"Error executing tool" (its text stays in the server's log).

Two protections for a server others reach (see ``serve``): over HTTP, a bearer token,
required when bound to anything but loopback (``_mcp_auth``); and a ``FixedScope``
(``namespace`` / ``agent_id``) that every tool call is confined to, whatever its
arguments say (``_mcp_scope``; refusals are tool errors with code ``server.scope_denied``).

Built on ``mcp`` 2.x (``mcp.server.mcpserver.MCPServer``; the 1.x ``FastMCP`` import is
gone in 2.x). Install with ``pip install 'betterdb-memory[mcp]'``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ..core.models import MemoryHit
from ..core.validation import check_sensitivities, check_sensitivity
from ..errors import ValidationError
from ..store import MemoryStore
from ._extras import missing_extra
from ._mcp_auth import BearerAuth, check_token, require_token
from ._mcp_scope import FixedScope
from ._mcp_shapes import (
    ContextResult,
    FactHistoryResult,
    ForgetResult,
    ListResult,
    Memory,
    RecallResult,
    RememberResult,
    StatsResult,
    StoreTurnResult,
    TokensUsed,
    call_tool,
    fact_out,
    hit_out,
    memory_out,
    turn_out,
)

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, ToolAnnotations
    from pydantic import Field
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra("The MCP server (betterdb_memory.adapters.mcp)", "mcp", _exc) from _exc

__all__ = ["TOOL_NAMES", "FixedScope", "Memory", "create_server", "serve"]

#: Every tool the server exposes, in the order ``tools/list`` returns them.
TOOL_NAMES = (
    "remember",
    "recall",
    "forget",
    "list",
    "stats",
    "fact_history",
    "store_turn",
    "retrieve_context",
)

INSTRUCTIONS = (
    "Long-term memory (remember, recall, list, forget) and short-term conversation turns "
    "(store_turn, retrieve_context) in Valkey. Scopes: namespace / agent_id / thread_id, each "
    "optional; in recall, list and forget a scope left out means any. recall ranks by meaning, "
    "recency and importance; retrieve_context assembles memories and recent turns within a "
    "token budget for the next prompt. Times: remember's valid_from says when a statement became "
    "true; a subject's newest version is current (fact_history lists them); recall and list take "
    "as_of (what was valid then) and since / until (valid_from in a window)."
)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


# -- argument annotations (the input schema the model sees) ---------------------------------

Scope = Annotated[str | None, Field(description="exact scope value; omit for none (writes) or any (reads)")]
Tags = Annotated[list[str] | None, Field(description="tags; in reads a memory must carry all of them")]
#: A time: ISO 8601 text ("2024", "2024-05-01", "2024-05-01T09:30:00Z") or epoch milliseconds.
_TIME = "ISO 8601 text ('2024-05-01', '2024-05-01T09:30:00Z') or epoch milliseconds"
AsOf = Annotated[
    str | int | None,
    Field(description=f"what was valid at that instant, past versions included; {_TIME}; omit for now"),
]
Since = Annotated[
    str | int | None, Field(description=f"only memories whose valid_from is at or after; {_TIME}")
]
Until = Annotated[str | int | None, Field(description=f"only memories whose valid_from is before; {_TIME}")]
Thread = Annotated[str, Field(description="the conversation (session) id")]
Agent = Annotated[str | None, Field(description="the agent the session belongs to (optional)")]
Where = Annotated[
    dict[str, Any] | None,
    Field(
        description=(
            'a filter object ANDed with the other arguments, e.g. {"priority": {"$gte": 2}, "project": '
            '{"$in": ["a", "b"]}}; operators $eq $ne $gt $gte $lt $lte $in $nin $exists, $and $or $not; '
            "fields: thread_id agent_id namespace tags source importance created_at valid_from and the "
            "store's declared metadata fields (listed in this tool's description)"
        )
    ),
]

#: What a tool taking ``where`` adds to its description: the filter language and the fields.
WHERE_HELP = (
    " where: MongoDB-style operators; $ne and $nin also match memories without the field, a "
    "comparison on a missing field is false. Declared metadata fields: {fields}."
)

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_DELETE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


def create_server(
    store: MemoryStore,
    *,
    name: str = "betterdb-memory",
    log_level: LogLevel = "WARNING",
    scope: FixedScope | None = None,
) -> MCPServer:
    """An ``MCPServer`` whose tools call ``store`` (which the caller opens and closes).

    Args:
        store: the store every tool uses.
        name: the server name reported at initialisation.
        log_level: the SDK's log level (it configures the root logger if none is set).
        scope: confine every tool call to this namespace and / or agent id: a scope
            argument left out takes it, another value is refused, and so is a memory id
            outside it (``FixedScope``). None: every scope is reachable.

    Returns:
        The server; run it with ``serve`` or the SDK's own ``run_*_async`` methods, or
        connect to it in-process with ``mcp.Client(server)``.

    Raises:
        ValidationError: a ``scope`` value the store would refuse.
    """
    from .._version import __version__

    guard = scope or FixedScope()
    instructions = INSTRUCTIONS
    if guard.active:  # tell the model up front, so it does not learn the scope from refusals
        fixed = ", ".join(f"{k}={v!r}" for k, v in guard.as_dict().items())
        instructions += (
            f" This server is confined to {fixed}: leave those arguments out; other values are refused."
        )
    server: MCPServer = MCPServer(name, version=__version__, instructions=instructions, log_level=log_level)
    declared = ", ".join(f"{n} ({t})" for n, t in store.metadata_fields) or "none"
    where_help = WHERE_HELP.format(fields=declared)

    async def in_scope(tool: str, id: str) -> None:
        """Refuse a memory id outside the fixed scope (one read; nothing when none is fixed)."""
        if guard.active:
            guard.check_memory(tool, await store.get(id))

    @server.tool(name="remember", annotations=_WRITE)
    async def remember(
        content: Annotated[str, Field(description="the text to remember")],
        importance: Annotated[float | None, Field(description="0..1; default 0.5")] = None,
        tags: Tags = None,
        thread_id: Scope = None,
        agent_id: Scope = None,
        namespace: Scope = None,
        ttl: Annotated[float | None, Field(description="seconds until it expires; omit or 0: never")] = None,
        sensitivity: Annotated[str | None, Field(description="none, low, pii or sensitive")] = None,
        metadata: dict[str, Any] | None = None,
        id: Annotated[str | None, Field(description="your own id: a later write with it replaces")] = None,
        source: str | None = None,
        subject: Annotated[
            str | None,
            Field(
                description="what it states (e.g. 'home city'): the newest version of a subject is current"
            ),
        ] = None,
        valid_from: Annotated[
            str | int | None,
            Field(description=f"when the statement became true or the event happened; {_TIME}; omit for now"),
        ] = None,
    ) -> Annotated[CallToolResult, RememberResult]:
        """Store a long-term memory; returns its id."""

        async def run() -> str:
            where = guard.args("remember", agent_id=agent_id, namespace=namespace)
            if id is not None:  # replacing: the memory it replaces must be ours as well
                await in_scope("remember", id)
            return await store.remember(
                content, importance=importance, tags=tags, thread_id=thread_id, ttl=ttl,
                sensitivity=None if sensitivity is None else check_sensitivity(sensitivity),
                metadata=metadata, id=id, source=source, subject=subject, valid_from=valid_from, **where,
            )  # fmt: skip

        return await call_tool(run, lambda mid: RememberResult(id=mid))

    @server.tool(
        name="recall",
        annotations=_READ,
        description="Recall memories by meaning, best first (score = similarity, recency and importance). "
        "A hit with superseded_by ranks below a newer statement of the same thing (likely outdated)."
        + where_help,
    )
    async def recall(
        query: Annotated[str, Field(description="what to look for, in words")],
        k: Annotated[int | None, Field(description="at most this many memories (default 10)")] = None,
        threshold: Annotated[
            float | None, Field(description="cosine-distance ceiling 0..2; omit for the store's")
        ] = None,
        tags: Tags = None,
        thread_id: Scope = None,
        agent_id: Scope = None,
        namespace: Scope = None,
        exclude_sensitivity: Annotated[
            list[str] | None, Field(description="leave out memories of these sensitivities")
        ] = None,
        where: Where = None,
        as_of: AsOf = None,
        since: Since = None,
        until: Until = None,
        tz: Annotated[
            str | None,
            Field(description="IANA time zone the query's days ('yesterday') count in; default UTC"),
        ] = None,
    ) -> Annotated[CallToolResult, RecallResult]:
        """Recall memories by meaning, best first (score = similarity, recency and importance)."""

        async def run() -> list[MemoryHit]:
            scoped = guard.args("recall", agent_id=agent_id, namespace=namespace)
            # ``where`` is ANDed with the (fixed) scope: it can only narrow it.
            return await store.recall(
                query, k=k, threshold=threshold, tags=tags, thread_id=thread_id,
                exclude_sensitivity=None if exclude_sensitivity is None else check_sensitivities(exclude_sensitivity),
                where=where, as_of=as_of, since=since, until=until, tz=tz, explain=True, **scoped,
            )  # fmt: skip

        return await call_tool(run, lambda hits: RecallResult(hits=[hit_out(h) for h in hits]))

    @server.tool(name="forget", annotations=_DELETE)
    async def forget(
        id: Annotated[str, Field(description="the memory's id")],
    ) -> Annotated[CallToolResult, ForgetResult]:
        """Delete one memory; ``deleted`` is false when there was none with that id."""

        async def run() -> bool:
            await in_scope("forget", id)
            return await store.forget(id)

        return await call_tool(run, lambda ok: ForgetResult(deleted=ok))

    @server.tool(
        name="list",
        annotations=_READ,
        description="List memories newest first, a page at a time." + where_help,
    )
    async def list_memories(
        thread_id: Scope = None,
        agent_id: Scope = None,
        namespace: Scope = None,
        tags: Tags = None,
        limit: Annotated[int, Field(description="page size (1..1000)")] = 20,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
        where: Where = None,
        as_of: AsOf = None,
        since: Since = None,
        until: Until = None,
    ) -> Annotated[CallToolResult, ListResult]:
        """List memories newest first, a page at a time."""

        async def run() -> Any:
            scoped = guard.args("list", agent_id=agent_id, namespace=namespace)
            return await store.list(
                thread_id=thread_id, tags=tags, limit=limit, cursor=cursor, where=where,
                as_of=as_of, since=since, until=until, **scoped,
            )  # fmt: skip

        return await call_tool(
            run,
            lambda page: ListResult(
                items=[memory_out(i) for i in page.items], total=page.total, next_cursor=page.next_cursor
            ),
        )

    @server.tool(name="stats", annotations=_READ)
    async def stats() -> Annotated[CallToolResult, StatsResult]:
        """Counts, index health, engine, embedder and live settings of the store (``items``: of the server's scope)."""

        async def run() -> tuple[Any, int]:
            st = await store.stats()
            # Under a fixed scope, the memories of that scope only: how many other tenants
            # hold is theirs. The rest (engine, settings, counters) describes the store.
            return st, (
                await store.count(agent_id=guard.agent_id, namespace=guard.namespace)
            ) if guard.active else st.items

        def shape(pair: tuple[Any, int]) -> StatsResult:
            st, items = pair
            return StatsResult(
                name=st.name,
                index=st.index_name,
                items=items,
                evictions=st.evictions,
                counters=dict(st.counters),
                engine=f"{st.capabilities.engine} {st.capabilities.version_string}",
                embedder=st.embedder_model,
                dimensions=st.dimensions,
                index_ready=st.index.ready if st.index else None,
                config=dict(st.config),
            )

        return await call_tool(run, shape)

    @server.tool(name="fact_history", annotations=_READ)
    async def fact_history(
        subject: Annotated[
            str, Field(description="the subject, as given to remember (case and spacing ignored)")
        ],
        thread_id: Scope = None,
        agent_id: Scope = None,
        namespace: Scope = None,
    ) -> Annotated[CallToolResult, FactHistoryResult]:
        """Every version of a subject in the exact scope named, newest first (current one flagged)."""

        async def run() -> Any:
            scoped = guard.args("fact_history", agent_id=agent_id, namespace=namespace)
            return await store.fact_history(subject, thread_id=thread_id, **scoped)

        return await call_tool(
            run, lambda versions: FactHistoryResult(versions=[fact_out(v) for v in versions])
        )

    @server.tool(name="store_turn", annotations=_WRITE)
    async def store_turn(
        thread_id: Thread,
        user_message: str,
        assistant_message: str,
        agent_id: Agent = None,
    ) -> Annotated[CallToolResult, StoreTurnResult]:
        """Append one exchange (the user's message and the reply) to a conversation's recent turns."""

        async def run() -> str:
            guard.check_sessions("store_turn")
            where = guard.args("store_turn", agent_id=agent_id)
            return await store.store_turn(thread_id, user_message, assistant_message, **where)

        return await call_tool(run, lambda turn_id: StoreTurnResult(turn_id=turn_id))

    @server.tool(name="retrieve_context", annotations=_READ)
    async def retrieve_context(
        thread_id: Thread,
        query: Annotated[str, Field(description="the current user message")],
        token_budget: Annotated[int, Field(description="tokens the context may use")] = 4096,
        agent_id: Agent = None,
        namespace: Scope = None,
    ) -> Annotated[CallToolResult, ContextResult]:
        """Relevant memories and recent turns of a conversation within a token budget; ``text`` is ready for a prompt."""

        async def run() -> Any:
            guard.check_sessions("retrieve_context")
            where = guard.args("retrieve_context", agent_id=agent_id, namespace=namespace)
            return await store.retrieve_context(thread_id, query, token_budget=token_budget, **where)

        def shape(ctx: Any) -> ContextResult:
            used = ctx.tokens_used
            return ContextResult(
                text=ctx.render(),
                memories=[hit_out(h) for h in ctx.memories],
                turns=[turn_out(t) for t in ctx.turns],
                token_budget=ctx.token_budget,
                tokens_used=TokensUsed(
                    memories=used.memories, turns=used.turns, current_turn=used.current_turn, total=used.total
                ),
                skipped_memories=ctx.skipped_memories,
                skipped_turns=ctx.skipped_turns,
            )

        return await call_tool(run, shape)

    return server


async def serve(
    store: MemoryStore,
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    log_level: LogLevel = "WARNING",
    token: str | None = None,
    scope: FixedScope | None = None,
) -> None:
    """Serve ``store``'s tools until the client disconnects (stdio) or the process is stopped (HTTP).

    Args:
        store: the store (opened by the caller, closed by the caller afterwards).
        http: streamable HTTP on ``host:port`` at ``path`` instead of stdio.
        host: the address to bind; the default accepts local clients only (and the SDK then
            turns on its DNS-rebinding protection). Any other address needs ``token``.
        port: the TCP port for HTTP.
        path: the endpoint path for HTTP.
        log_level: the SDK's log level (logs go to stderr, never to the stdio channel).
        token: with ``http``, every request must carry ``Authorization: Bearer <token>``
            (a 401 otherwise); required unless ``host`` is a loopback address. At least 16
            characters a bearer token may hold (``secrets.token_urlsafe(32)`` makes one).
        scope: confine every tool call to it (see ``create_server``).

    Raises:
        ConfigurationError: ``configuration.mcp_token_required``: ``host`` is not loopback
            and there is no ``token``; ``configuration.mcp_token_invalid``: a token too
            short or with characters a header cannot carry. Nothing listens.
        ValidationError: a ``token`` without ``http`` (stdio has no requests to check).
    """
    if not http:
        if token is not None:
            raise ValidationError("a token applies to the HTTP transport only", code="validation.usage")
        await create_server(store, log_level=log_level, scope=scope).run_stdio_async()
        return
    token = require_token(host, None if token is None else check_token(token, source="the token argument"))
    server = create_server(store, log_level=log_level, scope=scope)
    app: Any = server.streamable_http_app(streamable_http_path=path, host=host)
    if token is not None:
        app = BearerAuth(app, token)
    import uvicorn  # the SDK's own HTTP server (a dependency of mcp); run as the SDK runs it

    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level.lower())).serve()
