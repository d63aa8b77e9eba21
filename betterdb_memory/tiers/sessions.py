"""L1 short-term memory: session turns and token-budgeted context assembly.

Sends commands and maps replies only: key names come from ``core.keys``, turn
encoding and the Lua scripts from ``core.turns``, the budget policy from
``core.context``; every call goes through the backend.

Write path: ``store_turn`` is one round trip, a non-transactional pipeline of the
append script (one session slot: number the turn, push, trim, refresh TTLs) and the
agent's session-set ``SADD`` (another slot, idempotent). Cluster clients work
unchanged: every script touches the keys of one session (one hash slot), and
pipelines are non-transactional (consistent reads are scripts).

Rolling summaries of the turns leaving the window are ``summaries.RollingSummaries``;
this part tells it when a batch is due and, when that summary is a full backlog
behind, waits for it (backpressure, not loss; see ``summaries``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from ..backend import scripts
from ..backend.commands import Step
from ..core.codec import as_text
from ..core.context import ContextUsage, RetrievedContext, allocate
from ..core.escaping import validate_tag_value
from ..core.keys import SessionKeys
from ..core.models import MemoryHit
from ..core.requests import MemoryInput
from ..core.tokens import count_tokens
from ..core.turns import (
    SessionMetadata,
    Turn,
    decode_turn,
    encode_turn,
    parse_tool_results,
    render_turn,
    session_metadata_from,
)
from ..core.validation import (
    check_content,
    check_importance,
    check_int,
    check_sensitivities,
    check_sensitivity,
    check_tags,
    is_int,
)
from ..errors import ConfigurationError, TokenBudgetError, ValidationError
from .long_term import LongTermMemory
from .recall import Recall
from .runtime import Runtime
from .session_config import SessionConfig
from .summaries import RollingSummaries

__all__ = ["Sessions", "session_ids"]

log = logging.getLogger(__name__)

_MAX_CONTEXT_MEMORIES = 50


def session_ids(thread_id: object, agent_id: object) -> tuple[str, str | None]:
    """Validate a session's ids at the boundary (a thread is required, an agent is optional)."""
    thread = validate_tag_value(thread_id, name="thread_id")
    agent = None if agent_id is None else validate_tag_value(agent_id, name="agent_id")
    return thread, agent


def _check_n(n: object) -> int | None:
    return None if n is None else check_int(n, "n", minimum=1)


class Sessions:
    """Session turns (L1): store, read, clear, and assemble the next prompt's context."""

    def __init__(
        self,
        rt: Runtime,
        config: SessionConfig,
        *,
        summaries: RollingSummaries,
        recall: Recall,
        long_term: LongTermMemory,
    ) -> None:
        self._rt = rt
        self.config = config
        self._summaries = summaries
        self._recall = recall
        self._long_term = long_term

    # -- turns ------------------------------------------------------------------------

    async def store_turn(
        self,
        thread_id: str,
        user_message: str,
        assistant_message: str,
        *,
        agent_id: str | None = None,
        tool_results: Sequence[Any] | None = None,
    ) -> str:
        """Append one turn to a session in one round trip; returns the turn id (uuid4 hex).

        May start a background summary of turns that left the window; when that summary
        is a full backlog behind, waits for it to free room instead of letting the
        hard cap drop turns (see ``summaries``).

        Raises:
            ValidationError: empty ids or messages, bad ``tool_results``; nothing is written.
            StoreConnectionError: the server could not be reached (not retried: the
                append is not idempotent).
        """
        thread, agent = session_ids(thread_id, agent_id)
        user = check_content(user_message, name="user_message")
        assistant = check_content(assistant_message, name="assistant_message")
        tools = parse_tool_results(tool_results)
        cfg = self.config
        rt = self._rt
        turn_id = uuid.uuid4().hex
        now = time.time()
        tokens = count_tokens(cfg.counter, render_turn(user, assistant, tools))
        # ``ts`` is left to the append script: ``now``, or the session's last turn's time when
        # that is later (the order is decided there, so the timestamps must be too).
        payload = encode_turn(turn_id, user, assistant, tools, None, tokens)
        sk = rt.keys.session(agent, thread)
        sessions = rt.keys.agent_sessions(agent)

        append = scripts.APPEND_TURN.call(
            [sk.turns, sk.meta, sk.summary_cursor],
            [payload, repr(now), cfg.ttl_ms, cfg.window, cfg.batch, cfg.cap],
        )
        commands: list[Step] = [append, ("SADD", sessions, thread), ("PEXPIRE", sessions, cfg.ttl_ms)]
        reply = await rt.backend.pipeline(
            "store_turn", commands, idempotent=False, details={"turn_id": turn_id}
        )
        seq, pending = int(reply[0][0]), int(reply[0][1])
        rt.metrics.observe_turns(1)
        if cfg.batch and pending >= cfg.batch:
            self._summaries.maybe_summarize(agent, thread, sk)
            if pending >= cfg.high_water:
                await self._summaries.hold_back(sk.turns, thread, seq, cursor=seq - cfg.window - pending)
        return turn_id

    async def read_turns(self, sk: SessionKeys, thread: str, n: int | None) -> list[Turn]:
        """The last ``n`` turns of a session (all with None), oldest first."""
        start = 0 if n is None else -n
        raw = await self._rt.backend.command("get_recent_turns", "LRANGE", sk.turns, start, -1)
        return [t for t in (decode_turn(r, thread) for r in raw) if t is not None]

    async def get_recent_turns(
        self, thread_id: str, *, agent_id: str | None = None, n: int | None = None
    ) -> list[Turn]:
        """The session's turns, oldest first: the last ``n``, or all L1 holds when ``n`` is None.

        L1 holds the window plus turns older than it that no summary covers yet, so
        with ``n=None`` every stored turn is either here or in a summary.
        """
        thread, agent = session_ids(thread_id, agent_id)
        return await self.read_turns(self._rt.keys.session(agent, thread), thread, _check_n(n))

    async def get_session_metadata(
        self, thread_id: str, *, agent_id: str | None = None
    ) -> SessionMetadata | None:
        """Counters of the session, or None if it does not exist (never stored, cleared or expired)."""
        thread, agent = session_ids(thread_id, agent_id)
        sk = self._rt.keys.session(agent, thread)
        keys = [sk.meta, sk.turns, sk.summary_cursor]
        # One script on one slot: a consistent snapshot.
        flat, retained, cursor = await self._rt.backend.script(
            "get_session_metadata", scripts.SESSION_SNAPSHOT.call(keys)
        )
        meta = {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}
        return session_metadata_from(agent, thread, meta, retained, cursor)

    async def clear_session(self, thread_id: str, *, agent_id: str | None = None) -> None:
        """Delete the session's L1 keys. Its L2 summaries and facts stay (use ``erase`` for those)."""
        thread, agent = session_ids(thread_id, agent_id)
        await self.delete_sessions(agent, [thread], operation="clear_session")

    async def delete_sessions(
        self, agent: str | None, threads: Sequence[str], *, all_of_agent: bool = False, operation: str
    ) -> int:
        """Delete the L1 keys of ``threads`` of ``agent`` in one round trip; the turns deleted.

        ``all_of_agent``: also drop the agent's session set (erasing all its sessions).
        Deleting twice is harmless, so this is retried on connection faults.
        """
        rt = self._rt
        sessions_key = rt.keys.agent_sessions(agent)
        session_keys = [rt.keys.session(agent, t) for t in threads]

        commands: list[Step] = [scripts.ERASE_SESSION.call(sk.all()) for sk in session_keys]
        if all_of_agent:
            commands.append(("DEL", sessions_key))
        elif threads:
            commands.append(("SREM", sessions_key, *threads))
        replies = await rt.backend.pipeline(operation, commands)
        return sum(int(r or 0) for r in replies[: len(session_keys)])

    async def threads_of(self, agent: str | None) -> list[str]:
        """Every thread in the agent's session set, sorted."""
        key = self._rt.keys.agent_sessions(agent)
        members = await self._rt.backend.command("erase", "SMEMBERS", key)
        return sorted(as_text(m) for m in members)

    # -- context ----------------------------------------------------------------------

    async def retrieve_context(
        self,
        thread_id: str,
        query: str,
        *,
        token_budget: int,
        agent_id: str | None = None,
        namespace: str | None = None,
        redact: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> RetrievedContext:
        """Recent turns and relevant long-term memories that fit ``token_budget``.

        Turns of this session and L2 recall run concurrently. Recall is scoped like
        ``recall``: ``agent_id`` / ``namespace`` filter, None meaning any, across
        threads (long-term memory outlives a session); pass them to isolate tenants.
        Read-only: recalled memories are not reinforced (assembling a prompt should
        not reorder future recalls; ``recall`` reinforces when asked).

        Args:
            thread_id / agent_id: the session.
            query: the current user message; drives recall and costs the current-turn part.
            token_budget: total tokens of the prompt being built (an int > 0).
            namespace: recall filter.
            redact: sensitivity classes to leave out (default: the store's ``redact``).
            where: a filter on the recalled memories (``recall``'s ``where``); the turns
                are not filtered.

        Raises:
            ValidationError: bad ids, empty query, a budget that is not a positive int,
                an unknown sensitivity class; nothing is sent.
        """
        thread, agent = session_ids(thread_id, agent_id)
        ns = None if namespace is None else validate_tag_value(namespace, name="namespace")
        text = check_content(query, name="query")
        if not is_int(token_budget) or token_budget < 1:
            raise TokenBudgetError(
                f"token_budget must be a positive integer, not {token_budget!r}",
                details={"argument": "token_budget"},
            )
        cfg = self.config
        hidden = cfg.redact if redact is None else check_sensitivities(redact)
        self._rt.parse_where(where)  # checked before any I/O (recall parses it again)
        started = time.perf_counter()
        sk = self._rt.keys.session(agent, thread)
        usable = token_budget - math.floor(token_budget * cfg.budget.system)

        async def memories() -> list[MemoryHit]:
            if cfg.budget.memories <= 0:
                return []
            k = max(4, min(_MAX_CONTEXT_MEMORIES, math.ceil(usable / 40)))
            return await self._recall.recall(
                text, k=k, agent_id=agent, namespace=ns, exclude_sensitivity=hidden or None, reinforce=False,
                where=where,
            )  # fmt: skip

        turns, hits = await _both(self.read_turns(sk, thread, None), memories())
        newest_first = turns[::-1]
        alloc = allocate(
            token_budget,
            cfg.budget,
            current_tokens=count_tokens(cfg.counter, text),
            memory_costs=[count_tokens(cfg.counter, h.item.content) for h in hits],
            turn_costs=[
                t.token_count
                or count_tokens(cfg.counter, render_turn(t.user_message, t.assistant_message, t.tool_results))
                for t in newest_first
            ],
        )
        chosen_turns = sorted((newest_first[i] for i in alloc.turn_indices), key=lambda t: t.seq)
        chosen_hits = [hits[i] for i in alloc.memory_indices]
        self._rt.metrics.observe_context(
            {
                "memories": alloc.memory_tokens,
                "turns": alloc.turn_tokens,
                "current": alloc.current_turn_tokens,
            }
        )
        return RetrievedContext(
            thread_id=thread,
            agent_id=agent,
            turns=tuple(chosen_turns),
            memories=tuple(chosen_hits),
            token_budget=token_budget,
            system_reserve=alloc.system_reserve,
            usable_budget=alloc.usable,
            tokens_used=ContextUsage(
                memories=alloc.memory_tokens, turns=alloc.turn_tokens, current_turn=alloc.current_turn_tokens
            ),
            skipped_turns=len(turns) - len(chosen_turns),
            skipped_memories=len(hits) - len(chosen_hits),
            retrieval_ms=(time.perf_counter() - started) * 1000.0,
            redacted=hidden,
        )

    # -- facts ------------------------------------------------------------------------

    async def extract_memories(
        self, thread_id: str, *, agent_id: str | None = None, n: int | None = None
    ) -> list[str]:
        """Mine the session's last ``n`` turns (default: the window) for facts and store them in L2.

        Each fact becomes a memory with ``kind="extracted"``, ``source="extracted"``,
        its classified sensitivity, its topic tags, and the source turn ids in
        ``metadata["source_turn_ids"]``. A fact that fails validation is skipped with a
        warning; the others are stored.

        Raises:
            ConfigurationError: the store has no ``fact_extractor``.
        """
        extractor = self.config.fact_extractor
        if extractor is None:
            raise ConfigurationError(
                "extract_memories needs a fact_extractor (for example OpenAIFactExtractor)",
                code="configuration.no_fact_extractor",
            )
        thread, agent = session_ids(thread_id, agent_id)
        count = _check_n(n) or self.config.window
        turns = await self.read_turns(self._rt.keys.session(agent, thread), thread, count)
        if not turns:
            return []
        facts = await extractor.extract(turns)
        meta = {"source_turn_ids": [t.id for t in turns], "turn_range": [turns[0].seq, turns[-1].seq]}
        items: list[MemoryInput] = []
        for i, fact in enumerate(facts):
            try:
                items.append(
                    {
                        "content": check_content(fact.content, name="fact content"),
                        "importance": check_importance(fact.importance),
                        "tags": list(check_tags(fact.topic_tags, name="topic_tags")),
                        "sensitivity": check_sensitivity(fact.sensitivity),
                        "source": "extracted",
                        "kind": "extracted",
                        "thread_id": thread,
                        "agent_id": agent,
                        "metadata": meta,
                    }
                )
            except (ValidationError, AttributeError) as exc:
                log.warning("extract_memories: skipping fact %d from %r: %s", i, extractor, exc)
        return await self._long_term.remember_many(items) if items else []


async def _both(
    turns: Awaitable[list[Turn]], hits: Awaitable[list[MemoryHit]]
) -> tuple[list[Turn], list[MemoryHit]]:
    """Run both reads concurrently; the first error wins, and the other read is awaited."""
    got_turns, got_hits = await asyncio.gather(turns, hits, return_exceptions=True)
    if isinstance(got_turns, BaseException):
        raise got_turns
    if isinstance(got_hits, BaseException):
        raise got_hits
    return got_turns, got_hits
