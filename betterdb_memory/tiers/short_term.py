"""L1 short-term memory: session turns, rolling summaries into L2, context assembly, erasure.

``ShortTermMixin`` is mixed into ``MemoryStore``; it only sends commands and maps
replies. Key names come from ``keys``, turn encoding and the Lua scripts from
``turns``, the budget policy from ``context``. Every backend call goes through
``_io.call``.

Write path: ``store_turn`` is one round trip, a non-transactional pipeline of the
append script (one session slot: number the turn, push, trim, refresh TTLs) and
the agent's session-set ``SADD`` (another slot, idempotent).

Cluster clients (``valkey.asyncio.cluster.ValkeyCluster``) work unchanged: every
script touches the keys of one session (one hash slot), pipelines are
non-transactional (the cluster client has no MULTI/EXEC; consistent reads are
scripts), and scripts in pipelines go as plain ``EVALSHA`` (the cluster pipeline
refuses valkey-py's ``Script`` objects), loaded again on ``NOSCRIPT``.

Rolling summaries, nothing lost: the list holds the window (``max_session_turns``)
plus the turns older than it that no summary covers yet. When ``summarize_batch``
such turns have piled up, a background task takes the session's summary lock
(``SET NX PX``), folds each full batch into one L2 memory (``kind="summary"``,
``source="l1-summary"``, metadata ``turn_range`` and ``turn_ids``), and advances the
cursor, which is what lets the append script trim them. A failing summariser delays
trimming instead of losing turns: failures are counted (``summary_failures``) and
logged, retried with backoff on later turns, and only past the hard cap
(window + ``max_unsummarized``) are the oldest turns dropped, counted in
``dropped``. So at any time every turn ever stored is in L1 (``get_recent_turns()``),
in a summary's ``turn_ids``, or counted as dropped.

Backpressure, not loss: a healthy summariser that is only *behind* (a burst of
turns while the first summary creates the index, a slow LLM call, an engine that
indexes each write before answering) must not lose turns to the hard cap. When a
``store_turn`` finds the backlog one batch short of the cap while a summary of that
session runs in this process and has not failed, it waits (after its own turn is
stored) until the summary frees room. The cap then only trims turns whose
summariser is failing, stuck past ``summary_lock_ttl``, or running in another
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import valkey.exceptions as vexc

from ._io import RetryPolicy, call
from .codec import as_text, to_int
from .context import ContextBudget, ContextUsage, RetrievedContext, allocate
from .errors import BetterDBMemoryError, ConfigurationError, TokenBudgetError, ValidationError
from .escaping import validate_tag_value
from .extraction import FactExtractor
from .keys import KeySpace, SessionKeys
from .models import MemoryHit
from .summarizers import ExtractiveSummarizer, Summarizer
from .tokens import HeuristicTokenCounter, TokenCounter, count_tokens
from .turns import (
    APPEND_TURN,
    ERASE_SESSION,
    LOCK_EXTEND,
    LOCK_RELEASE,
    PENDING_TURNS,
    SESSION_SNAPSHOT,
    SUMMARY_ADVANCE,
    SUMMARY_FAILED,
    SessionMetadata,
    Turn,
    decode_turn,
    encode_turn,
    parse_tool_results,
    render_turn,
    session_metadata_from,
)
from .validation import check_content, check_importance, check_sensitivities, check_sensitivity, check_tags

__all__ = ["ShortTermMixin"]

log = logging.getLogger(__name__)

_MAX_BACKOFF = 30.0
_MAX_CONTEXT_MEMORIES = 50


class _Host(Protocol):
    """What the mixin uses of ``MemoryStore`` (checked against it by mypy below)."""

    def _spawn(self, coro: Any) -> None: ...

    async def recall(
        self,
        query: str,
        *,
        k: int = ...,
        reinforce: bool = ...,
        thread_id: str | None = ...,
        agent_id: str | None = ...,
        namespace: str | None = ...,
        exclude_sensitivity: Sequence[str] | None = ...,
    ) -> list[MemoryHit]: ...

    async def remember_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[str]: ...

    async def forget_by_scope(
        self,
        *,
        thread_id: str | None = ...,
        agent_id: str | None = ...,
        namespace: str | None = ...,
        tags: Sequence[str] | None = ...,
    ) -> int: ...


if TYPE_CHECKING:
    from .store import MemoryStore

    def _conforms(store: MemoryStore) -> _Host:  # mypy proves MemoryStore provides what the mixin uses
        return store


def _positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"{name} must be an integer >= {minimum}, not {value!r}", details={"argument": name}
        )
    return value


def _positive_number(name: str, value: object, *, allow_zero: bool = False) -> float:
    out = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    if not math.isfinite(out) or out < 0 or (out == 0 and not allow_zero):
        raise ConfigurationError(
            f"{name} must be a positive number, not {value!r}", details={"argument": name}
        )
    return out


class _ShortTermState:
    """Configuration and in-process bookkeeping of the L1 tier (one per store)."""

    def __init__(self, client: Any, **cfg: Any) -> None:
        self.ttl_ms: int = cfg["ttl_ms"]
        self.window: int = cfg["window"]
        self.batch: int = cfg["batch"]
        self.cap: int = cfg["cap"]
        self.summarizer: Summarizer = cfg["summarizer"]
        self.fact_extractor: FactExtractor | None = cfg["fact_extractor"]
        self.counter: TokenCounter = cfg["counter"]
        self.budget: ContextBudget = cfg["budget"]
        self.redact: tuple[str, ...] = cfg["redact"]
        self.grace: float = cfg["grace"]
        self.lock_ttl_ms: int = cfg["lock_ttl_ms"]
        self.append = client.register_script(APPEND_TURN)
        self.advance = client.register_script(SUMMARY_ADVANCE)
        self.failed = client.register_script(SUMMARY_FAILED)
        self.release = client.register_script(LOCK_RELEASE)
        self.extend = client.register_script(LOCK_EXTEND)
        self.erase = client.register_script(ERASE_SESSION)
        self.snapshot = client.register_script(SESSION_SNAPSHOT)
        self.pending = client.register_script(PENDING_TURNS)
        self.scripts: tuple[Any, ...] = (self.append, self.advance, self.failed, self.release, self.extend)
        self.scripts += (self.erase, self.snapshot, self.pending)
        # Keyed by the session's turns key: jobs started here, running tasks, re-run
        # requests that arrived while a job ran, and consecutive-failure backoff.
        self.active: set[str] = set()
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.rerun: set[str] = set()
        self.failures: dict[str, int] = {}
        self.not_before: dict[str, float] = {}
        self.cursors: dict[str, int] = {}  # summary cursor reached by the job running here
        self.stuck: set[str] = set()  # jobs that made no progress for a lock TTL: writers stop waiting
        self.closing = False
        self.idle = asyncio.Event()  # set whenever no job is active (close waits on it)
        self.idle.set()
        self.changed = asyncio.Condition()  # notified when a job ends (summarize_session waits on it)

    def begin(self, key: str) -> None:
        self.active.add(key)
        self.idle.clear()

    async def end(self, key: str) -> None:
        self.active.discard(key)
        self.tasks.pop(key, None)
        self.cursors.pop(key, None)
        self.stuck.discard(key)
        if not self.active:
            self.idle.set()
        async with self.changed:
            self.changed.notify_all()

    async def advanced(self, key: str, cursor: int) -> None:
        """A running job moved the cursor: wake writers held back by ``store_turn``."""
        self.cursors[key] = max(cursor, self.cursors.get(key, 0))
        self.stuck.discard(key)
        async with self.changed:
            self.changed.notify_all()

    @property
    def high_water(self) -> int:
        """Backlog (turns past the window not yet summarised) at which writers wait.

        One batch below the hard cap (``cap - window``), so turns in flight while a
        writer waits still fit; never below one batch, when a summary is due anyway.
        """
        return max(self.batch, self.cap - self.window - self.batch)


def _ids(thread_id: object, agent_id: object) -> tuple[str, str | None]:
    """Validate a session's ids at the boundary (a thread is required, an agent is optional)."""
    thread = validate_tag_value(thread_id, name="thread_id")
    agent = None if agent_id is None else validate_tag_value(agent_id, name="agent_id")
    return thread, agent


def _check_n(n: object) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValidationError(
            "n must be a positive integer or None", code="validation.range", details={"argument": "n"}
        )
    return n


def _evalsha(pipe: Any, script: Any, keys: Sequence[str], args: Sequence[Any]) -> None:
    """Queue a script as a plain ``EVALSHA`` (``pipe.evalsha`` is a blocked method on a cluster pipeline)."""
    pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)


class ShortTermMixin:
    """Session turns (L1) on top of ``MemoryStore`` (L2). See the module docstring."""

    if TYPE_CHECKING:  # provided by MemoryStore
        _client: Any
        keys: KeySpace
        name: str
        retry: RetryPolicy

    _st: _ShortTermState

    def _init_short_term(
        self,
        *,
        session_ttl: float = 86400,
        max_session_turns: int = 50,
        summarizer: Summarizer | None = None,
        fact_extractor: FactExtractor | None = None,
        token_counter: TokenCounter | None = None,
        summarize_batch: int = 20,
        max_unsummarized: int | None = None,
        budget: ContextBudget | None = None,
        redact: Sequence[str] = (),
        shutdown_grace: float = 30.0,
        summary_lock_ttl: float = 120.0,
    ) -> None:
        """Configure L1 (called from ``MemoryStore.__init__``).

        Args:
            session_ttl: seconds a session lives after its last turn.
            max_session_turns: the window of turns always kept verbatim.
            summarizer: folds turns leaving the window into L2 (``ExtractiveSummarizer`` by default).
            fact_extractor: needed by ``extract_memories``.
            token_counter: ``HeuristicTokenCounter`` by default.
            summarize_batch: turns per summary; 0 turns rolling summaries off (turns
                leaving the window are then simply trimmed).
            max_unsummarized: turns kept beyond the window while the summariser lags
                (default ``10 * summarize_batch``); older ones are dropped and counted.
            budget: fractions of ``retrieve_context``'s budget.
            redact: sensitivity classes ``retrieve_context`` leaves out by default.
            shutdown_grace: seconds ``close`` waits for running summaries.
            summary_lock_ttl: seconds a summariser may hold a session's lock per batch.

        Raises:
            ConfigurationError: a value is out of range or of the wrong type.
        """
        ttl = _positive_number("session_ttl", session_ttl)
        window = _positive_int("max_session_turns", max_session_turns)
        batch = _positive_int("summarize_batch", summarize_batch, minimum=0)
        if max_unsummarized is None:
            backlog = 10 * batch
        else:
            backlog = _positive_int("max_unsummarized", max_unsummarized, minimum=batch)
        for name, obj, proto in (
            ("summarizer", summarizer, Summarizer),
            ("fact_extractor", fact_extractor, FactExtractor),
            ("token_counter", token_counter, TokenCounter),
        ):
            # str has a ``count`` method, so it would pass a runtime Protocol check as a TokenCounter.
            if obj is not None and (isinstance(obj, str | bytes) or not isinstance(obj, proto)):
                raise ConfigurationError(
                    f"{name} {obj!r} does not implement {proto.__name__}", details={"argument": name}
                )
        if budget is not None and not isinstance(budget, ContextBudget):
            raise ConfigurationError("budget must be a ContextBudget", details={"argument": "budget"})
        try:
            redact_classes = check_sensitivities(redact)
        except ValidationError as exc:
            raise ConfigurationError(exc.message, code="configuration.redact", details=exc.details) from exc
        self._st = _ShortTermState(
            self._client,
            ttl_ms=max(1, int(ttl * 1000)),
            window=window,
            batch=batch,
            cap=window + backlog,
            summarizer=summarizer if summarizer is not None else ExtractiveSummarizer(),
            fact_extractor=fact_extractor,
            counter=token_counter if token_counter is not None else HeuristicTokenCounter(),
            budget=budget if budget is not None else ContextBudget(),
            redact=redact_classes,
            grace=_positive_number("shutdown_grace", shutdown_grace, allow_zero=True),
            lock_ttl_ms=max(1, int(_positive_number("summary_lock_ttl", summary_lock_ttl) * 1000)),
        )

    @property
    def _host(self) -> _Host:
        return cast(_Host, self)

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
        hard cap drop turns (module docstring).

        Raises:
            ValidationError: empty ids or messages, bad ``tool_results``; nothing is written.
            StoreConnectionError: the server could not be reached (not retried: the
                append is not idempotent).
        """
        thread, agent = _ids(thread_id, agent_id)
        user = check_content(user_message, name="user_message")
        assistant = check_content(assistant_message, name="assistant_message")
        tools = parse_tool_results(tool_results)
        st = self._st
        turn_id = uuid.uuid4().hex
        now = time.time()
        tokens = count_tokens(st.counter, render_turn(user, assistant, tools))
        payload = encode_turn(turn_id, user, assistant, tools, now, tokens)
        sk = self.keys.session(agent, thread)
        sessions = self.keys.agent_sessions(agent)

        def build(pipe: Any) -> None:
            _evalsha(
                pipe,
                st.append,
                [sk.turns, sk.meta, sk.summary_cursor],
                [payload, repr(now), st.ttl_ms, st.window, st.batch, st.cap],
            )
            pipe.sadd(sessions, thread)
            pipe.pexpire(sessions, st.ttl_ms)

        async def run() -> list[Any]:
            return await self._scripted(build)

        reply = await call(
            "store_turn", run, policy=self.retry, idempotent=False, details={"turn_id": turn_id}
        )
        seq, pending = int(reply[0][0]), int(reply[0][1])
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            metrics.observe_turns(1)
        if st.batch and pending >= st.batch:
            self._maybe_summarize(agent, thread, sk)
            if pending >= st.high_water:
                await self._hold_back(sk.turns, thread, seq, cursor=seq - st.window - pending)
        return turn_id

    async def _hold_back(self, key: str, thread: str, seq: int, *, cursor: int) -> None:
        """Wait while this session's summary (running here, not failing) catches up.

        ``seq`` is the caller's turn (already stored) and ``cursor`` the summary cursor
        its append saw. Returns once the backlog behind ``seq`` is under the high-water
        mark, or the job ends (done, failed, cancelled), or the store closes, or the job
        makes no progress for ``summary_lock_ttl`` (then it is treated as stuck and the
        hard cap applies, as for a failing summariser).
        """
        st = self._st

        def behind() -> bool:
            if st.closing or key not in st.active or key in st.failures or key in st.stuck:
                return False
            return seq - st.window - max(cursor, st.cursors.get(key, 0)) >= st.high_water

        def moved(reached: int) -> Callable[[], bool]:
            return lambda: not behind() or st.cursors.get(key, 0) > reached

        while behind():
            try:
                async with st.changed:
                    await asyncio.wait_for(
                        st.changed.wait_for(moved(st.cursors.get(key, 0))), timeout=st.lock_ttl_ms / 1000.0
                    )
            except TimeoutError:
                st.stuck.add(key)  # later writers do not wait either, until it moves again
                log.warning(
                    "store_turn: the rolling summary of thread %r made no progress in %.0fs; "
                    "not waiting for it (turns past the cap will be dropped and counted)",
                    thread, st.lock_ttl_ms / 1000.0,
                )  # fmt: skip
                return

    async def _scripted(self, build: Callable[[Any], None]) -> list[Any]:
        """Run a non-transactional pipeline holding plain EVALSHA calls; on NOSCRIPT load the scripts, run again.

        Plain ``EVALSHA`` (``_evalsha``) rather than valkey-py's ``Script`` objects:
        those send ``SCRIPT EXISTS`` before each pipeline (a second round trip), and a
        cluster pipeline refuses them. ``NOSCRIPT`` (a restart, a failover, SCRIPT
        FLUSH) means that script did not run, and every other command in these
        pipelines is idempotent, so running the pipeline again is safe. On a cluster
        client ``SCRIPT LOAD`` goes to every primary.
        """
        for attempt in (1, 2):
            pipe = self._client.pipeline(transaction=False)
            build(pipe)
            try:
                return list(await pipe.execute())
            except vexc.NoScriptError:
                if attempt == 2:
                    raise
                for script in self._st.scripts:
                    await self._client.script_load(script.script)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _read_turns(self, sk: SessionKeys, thread: str, n: int | None) -> list[Turn]:
        start = 0 if n is None else -n
        raw = await call(
            "get_recent_turns", lambda: self._client.lrange(sk.turns, start, -1), policy=self.retry
        )
        return [t for t in (decode_turn(r, thread) for r in raw) if t is not None]

    async def get_recent_turns(
        self, thread_id: str, *, agent_id: str | None = None, n: int | None = None
    ) -> list[Turn]:
        """The session's turns, oldest first: the last ``n``, or all L1 holds when ``n`` is None.

        L1 holds the window plus turns older than it that no summary covers yet, so
        with ``n=None`` every stored turn is either here or in a summary.
        """
        thread, agent = _ids(thread_id, agent_id)
        return await self._read_turns(self.keys.session(agent, thread), thread, _check_n(n))

    async def get_session_metadata(
        self, thread_id: str, *, agent_id: str | None = None
    ) -> SessionMetadata | None:
        """Counters of the session, or None if it does not exist (never stored, cleared or expired)."""
        thread, agent = _ids(thread_id, agent_id)
        sk = self.keys.session(agent, thread)

        st = self._st
        keys = [sk.meta, sk.turns, sk.summary_cursor]
        flat, retained, cursor = await call(
            "get_session_metadata", lambda: st.snapshot(keys=keys), policy=self.retry
        )  # one script on one slot: a consistent snapshot
        meta = {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}
        return session_metadata_from(agent, thread, meta, retained, cursor)

    async def clear_session(self, thread_id: str, *, agent_id: str | None = None) -> None:
        """Delete the session's L1 keys. Its L2 summaries and facts stay (use ``erase`` for those)."""
        thread, agent = _ids(thread_id, agent_id)
        sk = self.keys.session(agent, thread)
        st = self._st

        def build(pipe: Any) -> None:
            _evalsha(pipe, st.erase, [sk.turns, sk.meta, sk.summary_lock, sk.summary_cursor], [])
            pipe.srem(self.keys.agent_sessions(agent), thread)

        async def run() -> list[Any]:
            return await self._scripted(build)

        await call("clear_session", run, policy=self.retry)

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

        Raises:
            ValidationError: bad ids, empty query, a budget that is not a positive int,
                an unknown sensitivity class; nothing is sent.
        """
        thread, agent = _ids(thread_id, agent_id)
        ns = None if namespace is None else validate_tag_value(namespace, name="namespace")
        text = check_content(query, name="query")
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise TokenBudgetError(
                f"token_budget must be a positive integer, not {token_budget!r}",
                code="validation.budget",
                details={"argument": "token_budget"},
            )
        st = self._st
        hidden = st.redact if redact is None else check_sensitivities(redact)
        started = time.perf_counter()
        sk = self.keys.session(agent, thread)
        usable = token_budget - math.floor(token_budget * st.budget.system)
        host = self._host

        async def memories() -> list[MemoryHit]:
            if st.budget.memories <= 0:
                return []
            k = max(4, min(_MAX_CONTEXT_MEMORIES, math.ceil(usable / 40)))
            return await host.recall(
                text, k=k, agent_id=agent, namespace=ns, exclude_sensitivity=hidden or None, reinforce=False
            )

        got = await asyncio.gather(self._read_turns(sk, thread, None), memories(), return_exceptions=True)
        for result in got:
            if isinstance(result, BaseException):
                raise result
        turns = cast(list[Turn], got[0])
        hits = cast(list[MemoryHit], got[1])
        newest_first = turns[::-1]
        alloc = allocate(
            token_budget,
            st.budget,
            current_tokens=count_tokens(st.counter, text),
            memory_costs=[count_tokens(st.counter, h.item.content) for h in hits],
            turn_costs=[
                t.token_count
                or count_tokens(st.counter, render_turn(t.user_message, t.assistant_message, t.tool_results))
                for t in newest_first
            ],
        )
        chosen_turns = sorted((newest_first[i] for i in alloc.turn_indices), key=lambda t: t.seq)
        chosen_hits = [hits[i] for i in alloc.memory_indices]
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            metrics.observe_context(
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
        st = self._st
        if st.fact_extractor is None:
            raise ConfigurationError(
                "extract_memories needs a fact_extractor (for example OpenAIFactExtractor)",
                code="configuration.no_fact_extractor",
            )
        thread, agent = _ids(thread_id, agent_id)
        count = _check_n(n) or st.window
        turns = await self._read_turns(self.keys.session(agent, thread), thread, count)
        if not turns:
            return []
        facts = await st.fact_extractor.extract(turns)
        meta = {"source_turn_ids": [t.id for t in turns], "turn_range": [turns[0].seq, turns[-1].seq]}
        items: list[dict[str, Any]] = []
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
                log.warning("extract_memories: skipping fact %d from %r: %s", i, st.fact_extractor, exc)
        return await self._host.remember_many(items) if items else []

    # -- erasure ----------------------------------------------------------------------

    async def erase(self, *, agent_id: str, thread_id: str | None = None) -> int:
        """Right to erasure: delete an agent's L2 memories and L1 turns (one thread, or all).

        Order matters: summaries running in this process for those sessions are
        cancelled first (so none writes after the erase), then L1 keys go, then L2
        memories (``forget_by_scope``, which also wipes their consolidation state and
        fact history).
        A summariser running in *another* process at that moment may still write one
        summary afterwards; erase again after ``summary_lock_ttl`` to be certain.

        Returns:
            L2 memories plus L1 turns deleted.
        """
        agent = validate_tag_value(agent_id, name="agent_id")
        thread = None if thread_id is None else validate_tag_value(thread_id, name="thread_id")
        st = self._st
        sessions_key = self.keys.agent_sessions(agent)
        if thread is not None:
            threads = [thread]
        else:
            members = await call("erase", lambda: self._client.smembers(sessions_key), policy=self.retry)
            threads = sorted(as_text(m) for m in members)
        session_keys = [self.keys.session(agent, t) for t in threads]
        await self._stop_jobs([sk.turns for sk in session_keys])

        def build(pipe: Any) -> None:
            for sk in session_keys:
                _evalsha(pipe, st.erase, [sk.turns, sk.meta, sk.summary_lock, sk.summary_cursor], [])
            if thread is None:
                pipe.delete(sessions_key)
            else:
                pipe.srem(sessions_key, thread)

        async def run() -> list[Any]:
            return await self._scripted(build)

        replies = await call("erase", run, policy=self.retry)  # deleting twice is harmless
        l1 = sum(to_int(r) for r in replies[: len(session_keys)])
        l2 = await self._host.forget_by_scope(agent_id=agent, thread_id=thread)
        return l1 + l2

    # -- rolling summaries --------------------------------------------------------------

    def _maybe_summarize(self, agent: str | None, thread: str, sk: SessionKeys) -> None:
        st = self._st
        key = sk.turns
        if st.closing:
            return
        if key in st.active:
            st.rerun.add(key)  # the running job re-checks before it lets go
            return
        if st.not_before.get(key, 0.0) > time.monotonic():
            return
        st.begin(key)
        self._host._spawn(self._summary_job(agent, thread, sk, min_batch=st.batch))

    async def summarize_session(self, thread_id: str, *, agent_id: str | None = None) -> int:
        """Fold every turn older than the window into summaries now, even a partial batch.

        For the end of a conversation, or tests. Waits for a summary of this session
        already running here. Returns the number of turns summarised.

        Raises:
            BetterDBMemoryError: the summariser or the write failed (also counted).
        """
        thread, agent = _ids(thread_id, agent_id)
        sk = self.keys.session(agent, thread)
        st = self._st
        async with st.changed:
            await st.changed.wait_for(lambda: sk.turns not in st.active)
        st.begin(sk.turns)
        return await self._summary_job(agent, thread, sk, min_batch=1, wait=True)

    async def _pending(self, sk: SessionKeys, thread: str) -> list[Turn]:
        """Turns older than the window that no summary covers yet, oldest first."""

        st = self._st
        cursor_raw, raw = await call(
            "summarize",
            lambda: st.pending(keys=[sk.turns, sk.summary_cursor], args=[st.window]),
            policy=self.retry,
        )
        cursor = to_int(cursor_raw)
        return [t for t in (decode_turn(r, thread) for r in raw) if t is not None and t.seq > cursor]

    async def _lock(self, sk: SessionKeys, token: str, *, wait: bool) -> bool:
        st = self._st
        deadline = time.monotonic() + st.lock_ttl_ms / 1000.0
        while True:
            got = await call(
                "summarize",
                lambda: self._client.set(sk.summary_lock, token, nx=True, px=st.lock_ttl_ms),
                policy=self.retry,
            )
            if got or not wait or time.monotonic() > deadline:
                return bool(got)
            await asyncio.sleep(0.05)

    async def _summary_job(
        self, agent: str | None, thread: str, sk: SessionKeys, *, min_batch: int, wait: bool = False
    ) -> int:
        """Summarise full batches while there are ``min_batch`` pending turns (holds the lock)."""
        st = self._st
        key = sk.turns
        task = None if wait else asyncio.current_task()  # inline runs (wait=True) are the caller's task
        if task is not None:
            st.tasks[key] = task
        done = 0
        token = uuid.uuid4().hex
        try:
            if not await self._lock(sk, token, wait=wait):
                return 0
            try:
                while True:
                    pending = await self._pending(sk, thread)
                    if not pending or len(pending) < min_batch:
                        if key in st.rerun:
                            st.rerun.discard(key)
                            continue
                        break
                    batch = pending[: st.batch or len(pending)]
                    await self._write_summary(agent, thread, batch)
                    advanced = await self._advance(sk, batch[-1].seq)
                    done += len(batch)
                    if advanced < 0:  # the session was cleared meanwhile
                        break
                    await st.advanced(key, advanced)
                    held = await call(
                        "summarize",
                        lambda: st.extend(keys=[sk.summary_lock], args=[token, st.lock_ttl_ms]),
                        policy=self.retry,
                    )
                    if not int(held):  # lock expired and another summariser took over
                        break
            finally:
                with contextlib.suppress(BetterDBMemoryError):
                    await call(
                        "summarize",
                        lambda: st.release(keys=[sk.summary_lock], args=[token]),
                        policy=self.retry,
                    )
            st.failures.pop(key, None)
            st.not_before.pop(key, None)
        except asyncio.CancelledError:
            st.rerun.discard(key)  # cancelled by erase or close: nothing may start again for it
            raise
        except Exception as exc:
            await self._note_failure(sk, thread, exc)
            if wait:
                raise
        finally:
            await st.end(key)
            if key in st.rerun and not st.closing:
                st.rerun.discard(key)
                self._maybe_summarize(agent, thread, sk)
        return done

    async def _advance(self, sk: SessionKeys, through: int) -> int:
        """Move the cursor to ``through`` and trim what that frees; -1 if the session is gone."""
        st = self._st
        keys = [sk.turns, sk.meta, sk.summary_cursor]
        return int(
            await call(
                "summarize", lambda: st.advance(keys=keys, args=[through, st.window]), policy=self.retry
            )
        )

    async def _write_summary(self, agent: str | None, thread: str, batch: Sequence[Turn]) -> None:
        st = self._st
        text = await st.summarizer.summarize(batch)
        if not isinstance(text, str) or not text.strip():
            raise BetterDBMemoryError(
                f"summarizer {st.summarizer!r} returned no text",
                code="summary.empty",
                details={"turns": len(batch)},
            )
        first, last = batch[0].seq, batch[-1].seq
        # The range in the content makes each batch's summary distinct, so the store's
        # dedup never merges two batches (and their turn ids) into one memory.
        await self._host.remember_many(
            [
                {
                    "content": f"Conversation summary, turns {first}-{last}:\n{text.strip()}",
                    "kind": "summary",
                    "source": "l1-summary",
                    "thread_id": thread,
                    "agent_id": agent,
                    "importance": 0.6,
                    "metadata": {
                        "turn_range": [first, last],
                        "turn_ids": [t.id for t in batch],
                        "started_at": batch[0].timestamp,
                        "ended_at": batch[-1].timestamp,
                        "summarizer": type(st.summarizer).__name__,
                    },
                }
            ]
        )

    async def _note_failure(self, sk: SessionKeys, thread: str, exc: BaseException) -> None:
        st = self._st
        n = st.failures.get(sk.turns, 0) + 1
        st.failures[sk.turns] = n
        delay = min(_MAX_BACKOFF, 0.5 * 2 ** (n - 1))
        st.not_before[sk.turns] = time.monotonic() + delay
        log.warning(
            "rolling summary of thread %r failed (%s: %s); turns stay in L1, retry in >= %.1fs",
            thread, type(exc).__name__, exc, delay,
        )  # fmt: skip
        try:
            await call("summarize", lambda: st.failed(keys=[sk.meta]), policy=self.retry)
        except BetterDBMemoryError as again:
            log.warning("could not count the summary failure of thread %r: %s", thread, again)

    async def _stop_jobs(self, keys: Sequence[str]) -> None:
        tasks = [t for k, t in list(self._st.tasks.items()) if k in set(keys) and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _close_short_term(self) -> None:
        """Let running summaries finish within ``shutdown_grace``, then cancel the rest."""
        st = self._st
        st.closing = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(st.idle.wait(), timeout=st.grace)
        left = [t for t in st.tasks.values() if not t.done()]
        if left:
            log.warning(
                "close: cancelling %d rolling summaries still running after %.1fs", len(left), st.grace
            )
            for t in left:
                t.cancel()
            await asyncio.gather(*left, return_exceptions=True)
