"""Three small caches an agent wants next to its memory, on the same Valkey and name.

* ``LLMCache``: exact-match LLM responses, keyed by model + the canonical JSON of
  the request (sorted keys, no insignificant whitespace), so two requests that
  differ only in key order or spacing share an entry and any other difference
  (temperature, a system prompt) does not. ``<name>:cache:llm:<sha256>``.
* ``ToolCache``: tool results keyed by tool name + canonical arguments, with a TTL
  per tool (``ttl_policy``; 0 = never cache that tool, e.g. a clock or a payment).
  ``<name>:cache:tool:<sha256(tool)[:16]>:<sha256(args)>``, so one tool's entries
  share a prefix and ``invalidate(tool)`` can find them.
* ``SessionState``: per-thread key/value state (a HASH) whose TTL slides: every
  read or write pushes expiry back, so an active conversation keeps its state and
  an abandoned one cleans itself up. ``<name>:cache:session:<agent>:<thread>``,
  each id hashed separately, so ids containing ``:`` cannot collide.

Values are JSON. Every call goes through ``_io.call``; reads and writes here are
idempotent and retried on connection faults. ``get_or_call`` is fail-open: if the
cache cannot be read or written, the function's result is still returned (and a
warning logged), since a cache outage must not take the agent down.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .backend.retry import RetryPolicy, call
from .core.codec import as_text
from .core.escaping import tag_token, validate_tag_value
from .core.keys import validate_store_name
from .errors import BetterDBMemoryError, ConfigurationError, ValidationError

__all__ = ["LLMCache", "SessionState", "ToolCache", "canonical_json"]

log = logging.getLogger(__name__)

_SCAN_COUNT = 500


def canonical_json(value: object, *, name: str = "value") -> str:
    """The one JSON spelling of ``value`` (sorted keys, compact, UTF-8); raises ``ValidationError``."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"{name} must be JSON-serialisable: {exc}", code="validation.json", details={"argument": name}
        ) from exc


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ttl_ms(name: str, ttl: object, *, allow_none: bool = True, allow_zero: bool = False) -> int | None:
    if ttl is None and allow_none:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl >= 0 or ttl == float("inf"):
        raise ConfigurationError(
            f"{name} must be seconds >= 0 or None, not {ttl!r}", details={"argument": name}
        )
    if ttl == 0 and not allow_zero:
        raise ConfigurationError(f"{name} must be positive", details={"argument": name})
    return max(1, int(ttl * 1000)) if ttl else 0


async def _unlink_matching(client: Any, pattern: str) -> int:
    """SCAN + UNLINK every key matching ``pattern`` (rare, bulk operations only: O(keyspace))."""
    deleted, cursor = 0, 0
    while True:
        cursor, keys = await client.scan(cursor=cursor, match=pattern, count=_SCAN_COUNT)
        if keys:
            deleted += int(await client.unlink(*keys))
        if int(cursor) == 0:
            return deleted


def _decode(raw: Any) -> Any:
    return None if raw is None else json.loads(as_text(raw))


class _Cache:
    def __init__(self, client: Any, name: str, kind: str, retry: RetryPolicy | None) -> None:
        self._client = client
        self.prefix = f"{validate_store_name(name)}:cache:{kind}:"
        self.retry = retry or RetryPolicy()
        self.hits = 0
        self.misses = 0

    async def _get(self, operation: str, key: str) -> Any:
        raw = await call(operation, lambda: self._client.get(key), policy=self.retry)
        if raw is None:
            self.misses += 1
            return None
        self.hits += 1
        return _decode(raw)

    async def _set(self, operation: str, key: str, value: Any, px: int | None) -> None:
        text = canonical_json(value, name="value")
        await call(operation, lambda: self._client.set(key, text, px=px), policy=self.retry)

    async def _delete(self, operation: str, key: str) -> bool:
        return bool(await call(operation, lambda: self._client.delete(key), policy=self.retry))

    async def _delete_matching(self, operation: str, pattern: str) -> int:
        return await call(operation, lambda: _unlink_matching(self._client, pattern), policy=self.retry)

    async def _get_or_call(
        self, operation: str, key: str, fn: Callable[[], Awaitable[Any]], px: int | None, store: bool
    ) -> Any:
        try:
            found = await self._get(operation, key)
        except BetterDBMemoryError as exc:
            log.warning("%s: cache read failed, calling through: %s", operation, exc)
            found = None
        if found is not None:
            return found
        value = await fn()
        if store and value is not None:
            try:
                await self._set(operation, key, value, px)
            except BetterDBMemoryError as exc:
                log.warning("%s: cache write failed (result still returned): %s", operation, exc)
        return value


def _name(value: object, argument: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(
            f"{argument} must be a non-empty string", code="validation.empty", details={"argument": argument}
        )
    return value


class LLMCache(_Cache):
    """Exact-match LLM response cache (see the module docstring).

    Args:
        client: a ``valkey.asyncio.Valkey`` (bytes or decoded replies).
        name: the store name (key prefix).
        ttl: seconds an entry lives; None keeps it until evicted.
        retry: connection-fault retry policy.
    """

    def __init__(
        self, client: Any, name: str, *, ttl: float | None = 3600, retry: RetryPolicy | None = None
    ) -> None:
        super().__init__(client, name, "llm", retry)
        self.ttl_ms = _ttl_ms("llm ttl", ttl)

    def key(self, model: str, request: Mapping[str, Any]) -> str:
        """The cache key of a request (the model is part of it: two models never share an answer)."""
        body = canonical_json({"model": _name(model, "model"), "request": request}, name="request")
        return self.prefix + _sha256(body)

    async def get(self, model: str, request: Mapping[str, Any]) -> Any:
        """The cached response, or None on a miss."""
        return await self._get("llm_cache.get", self.key(model, request))

    async def set(
        self, model: str, request: Mapping[str, Any], response: Any, *, ttl: float | None = None
    ) -> None:
        """Store a response (any JSON value but null) for ``ttl`` or the cache's TTL."""
        if response is None:
            raise ValidationError(
                "a None response cannot be cached (None means a miss)", code="validation.value"
            )
        px = self.ttl_ms if ttl is None else _ttl_ms("ttl", ttl)
        await self._set("llm_cache.set", self.key(model, request), response, px)

    async def delete(self, model: str, request: Mapping[str, Any]) -> bool:
        return await self._delete("llm_cache.delete", self.key(model, request))

    async def get_or_call(
        self, model: str, request: Mapping[str, Any], fn: Callable[[], Awaitable[Any]]
    ) -> Any:
        """The cached response, else ``await fn()`` stored and returned (fail-open)."""
        return await self._get_or_call("llm_cache", self.key(model, request), fn, self.ttl_ms, True)

    async def clear(self) -> int:
        """Delete every LLM cache entry of this name; returns how many."""
        return await self._delete_matching("llm_cache.clear", self.prefix + "*")


class ToolCache(_Cache):
    """Tool-result cache with a per-tool TTL policy.

    Args:
        client / name / retry: as ``LLMCache``.
        default_ttl: seconds for tools not in ``ttl_policy`` (None = until evicted).
        ttl_policy: ``{tool_name: seconds | None}``; 0 means never cache that tool.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        default_ttl: float | None = 300,
        ttl_policy: Mapping[str, float | None] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(client, name, "tool", retry)
        self.default_ttl_ms = _ttl_ms("tool default_ttl", default_ttl, allow_zero=True)
        self.policy_ms = {
            _name(tool, "ttl_policy key"): _ttl_ms(f"ttl_policy[{tool!r}]", ttl, allow_zero=True)
            for tool, ttl in (ttl_policy or {}).items()
        }

    def ttl_ms_for(self, tool: str) -> int | None:
        """Milliseconds an entry of ``tool`` lives (None: until evicted; 0: not cached)."""
        return self.policy_ms.get(tool, self.default_ttl_ms)

    def _tool_prefix(self, tool: str) -> str:
        return f"{self.prefix}{_sha256(_name(tool, 'tool'))[:16]}:"

    def key(self, tool: str, args: Mapping[str, Any]) -> str:
        return self._tool_prefix(tool) + _sha256(canonical_json(args, name="args"))

    async def get(self, tool: str, args: Mapping[str, Any]) -> Any:
        """The cached result, or None on a miss (or when the tool is never cached)."""
        if self.ttl_ms_for(tool) == 0:
            self.misses += 1
            return None
        return await self._get("tool_cache.get", self.key(tool, args))

    async def set(self, tool: str, args: Mapping[str, Any], result: Any, *, ttl: float | None = None) -> bool:
        """Store a result; False (nothing stored) when the policy says never cache ``tool``."""
        if result is None:
            raise ValidationError(
                "a None result cannot be cached (None means a miss)", code="validation.value"
            )
        px = self.ttl_ms_for(tool) if ttl is None else _ttl_ms("ttl", ttl)
        if px == 0:
            return False
        await self._set("tool_cache.set", self.key(tool, args), result, px)
        return True

    async def delete(self, tool: str, args: Mapping[str, Any]) -> bool:
        return await self._delete("tool_cache.delete", self.key(tool, args))

    async def invalidate(self, tool: str) -> int:
        """Delete every cached result of ``tool``; returns how many."""
        return await self._delete_matching("tool_cache.invalidate", self._tool_prefix(tool) + "*")

    async def get_or_call(self, tool: str, args: Mapping[str, Any], fn: Callable[[], Awaitable[Any]]) -> Any:
        """The cached result, else ``await fn()`` stored per the policy and returned (fail-open)."""
        px = self.ttl_ms_for(tool)
        if px == 0:
            return await fn()
        return await self._get_or_call("tool_cache", self.key(tool, args), fn, px, True)


class SessionState:
    """Per-thread key/value state with a sliding TTL (see the module docstring).

    Args:
        client / name / retry: as ``LLMCache``.
        ttl: seconds of inactivity after which a thread's state expires.
    """

    def __init__(
        self, client: Any, name: str, *, ttl: float = 86400, retry: RetryPolicy | None = None
    ) -> None:
        self._client = client
        self.prefix = f"{validate_store_name(name)}:cache:session:"
        self.ttl_ms = _ttl_ms("session state ttl", ttl, allow_none=False)
        self.retry = retry or RetryPolicy()

    def _agent_part(self, agent_id: str | None) -> str:
        return "_" if agent_id is None else tag_token(validate_tag_value(agent_id, name="agent_id"))

    def key(self, thread_id: str, agent_id: str | None = None) -> str:
        thread = validate_tag_value(thread_id, name="thread_id")
        return f"{self.prefix}{self._agent_part(agent_id)}:{tag_token(thread)}"

    async def _run(self, operation: str, key: str, command: Callable[[Any], Any]) -> Any:
        async def run() -> Any:
            pipe = self._client.pipeline(transaction=False)
            command(pipe)
            pipe.pexpire(key, self.ttl_ms)  # slide the TTL on every access
            return (await pipe.execute())[0]

        return await call(operation, run, policy=self.retry)

    async def get(
        self, thread_id: str, field: str, *, agent_id: str | None = None, default: Any = None
    ) -> Any:
        key = self.key(thread_id, agent_id)
        raw = await self._run("session_state.get", key, lambda p: p.hget(key, _name(field, "field")))
        return default if raw is None else _decode(raw)

    async def set(self, thread_id: str, field: str, value: Any, *, agent_id: str | None = None) -> None:
        await self.update(thread_id, {field: value}, agent_id=agent_id)

    async def update(self, thread_id: str, values: Mapping[str, Any], *, agent_id: str | None = None) -> None:
        """Set several fields at once."""
        key = self.key(thread_id, agent_id)
        mapping = {_name(f, "field"): canonical_json(v, name=f"value of {f!r}") for f, v in values.items()}
        if mapping:
            await self._run("session_state.set", key, lambda p: p.hset(key, mapping=mapping))

    async def get_all(self, thread_id: str, *, agent_id: str | None = None) -> dict[str, Any]:
        key = self.key(thread_id, agent_id)
        raw = await self._run("session_state.get_all", key, lambda p: p.hgetall(key))
        return {as_text(k): _decode(v) for k, v in raw.items()}

    async def delete(self, thread_id: str, field: str, *, agent_id: str | None = None) -> bool:
        key = self.key(thread_id, agent_id)
        return bool(
            await self._run("session_state.delete", key, lambda p: p.hdel(key, _name(field, "field")))
        )

    async def clear(self, thread_id: str, *, agent_id: str | None = None) -> bool:
        key = self.key(thread_id, agent_id)
        return bool(await call("session_state.clear", lambda: self._client.delete(key), policy=self.retry))

    async def clear_agent(self, agent_id: str) -> int:
        """Delete the state of every thread of ``agent_id`` (for erasure); returns how many threads."""
        pattern = f"{self.prefix}{self._agent_part(agent_id)}:*"
        return await call(
            "session_state.clear_agent", lambda: _unlink_matching(self._client, pattern), policy=self.retry
        )
