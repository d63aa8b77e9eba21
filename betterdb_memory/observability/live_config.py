"""Live configuration: recall tunables re-read from a Valkey hash without a restart.

``LiveConfig`` does the I/O: ``HGETALL`` + apply, a background refresher that
survives connection errors, and a validating ``set`` for the CLI. What the hash's
fields mean, the ranges a value must be in and how a hash is applied (the last good
value stays when a value is invalid) are the pure half, ``core.tunables``.
Rejections are logged (logger ``betterdb_memory.observability.live_config``) once
when they appear, not on every refresh, so a bad value left in the hash does not
flood the log every 5 seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..backend import Backend, ValkeyClient, as_backend
from ..core.arguments import check_number, is_number
from ..core.codec import as_text
from ..core.tunables import (
    CONFIG_FIELDS,
    FIELD_WEIGHT_IMPORTANCE,
    FIELD_WEIGHT_RECENCY,
    FIELD_WEIGHT_SIMILARITY,
    WEIGHT_FIELDS,
    ConfigSnapshot,
    Rejection,
    apply_config_hash,
    parse_field,
)
from ..errors import BetterDBMemoryError, ConfigurationError
from ..lifecycle import Spawn

__all__ = ["LiveConfig"]

log = logging.getLogger(__name__)


def _call_safely(name: str, callback: Callable[..., None] | None, *args: Any) -> None:
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:
        log.exception("live config %s callback raised", name)


class LiveConfig:
    """The store's live tunables, refreshed from ``key`` in the background.

    Args:
        client: an asyncio ``Valkey`` client (``decode_responses`` either way).
        key: the config hash (``config_key(name)`` by convention).
        defaults: the constructor values (fields absent from the hash use these).
        refresh_interval: seconds between background refreshes.
        on_change: called with the new snapshot whenever a refresh changes it.
        on_error: called with each failed background refresh (after logging).
        on_reject: called with the rejections that newly appeared in a refresh
            (a bad value left in the hash is reported once, not every refresh).

    Raises:
        ConfigurationError: a non-positive ``refresh_interval``.
    """

    def __init__(
        self,
        client: ValkeyClient | Backend,
        key: str,
        defaults: ConfigSnapshot,
        *,
        refresh_interval: float = 5.0,
        on_change: Callable[[ConfigSnapshot], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_reject: Callable[[Sequence[Rejection]], None] | None = None,
        spawn: Spawn | None = None,
    ) -> None:
        check_number(refresh_interval, "refresh_interval", positive=True, setting=True)
        # A store passes its Backend (retries, error translation, closed state); a raw
        # client gets a Backend of its own.
        self._backend = as_backend(client)
        self.key = key
        self.defaults = defaults
        self.refresh_interval = float(refresh_interval)
        self._on_change = on_change
        self._on_error = on_error
        self._on_reject = on_reject
        self._spawn = spawn
        self._current = defaults
        self._rejections: tuple[Rejection, ...] = ()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._failing = False
        self._watch: tuple[str, Callable[[str | None, str | None], None]] | None = None

    def watch_index(self, meta_key: str, callback: Callable[[str | None, str | None], None]) -> None:
        """Also read ``index`` / ``index_gen`` of the store's meta hash on every refresh.

        ``callback(index, index_gen)`` learns of an index switch (``backend.index_switch``)
        within one refresh interval.
        """
        self._watch = (meta_key, callback)

    def __repr__(self) -> str:
        return f"LiveConfig(key={self.key!r}, current={self._current!r})"

    def current(self) -> ConfigSnapshot:
        """The snapshot in force (immutable; read it once per operation)."""
        return self._current

    @property
    def rejections(self) -> tuple[Rejection, ...]:
        """The fields the last refresh rejected."""
        return self._rejections

    async def refresh(self) -> ConfigSnapshot:
        """``HGETALL`` the hash and apply it; returns the snapshot now in force.

        Raises:
            BetterDBMemoryError: the server could not be read (translated); the
                snapshot in force is unchanged.
        """
        raw = await self._backend.command("config.refresh", "HGETALL", self.key)
        if self._watch is not None:
            await self._read_index()
        snapshot, rejections = apply_config_hash(raw, defaults=self.defaults, last_good=self._current)
        new = [r for r in rejections if r not in self._rejections]
        self._rejections = tuple(rejections)
        for r in new:
            log.warning(
                "live config %s: rejected %s=%r (%s); keeping the last good value",
                self.key,
                r.field,
                r.value,
                r.reason,
            )
        if new:
            _call_safely("on_reject", self._on_reject, new)
        if snapshot != self._current:
            self._current = snapshot
            log.info("live config %s: now %s", self.key, snapshot)
            _call_safely("on_change", self._on_change, snapshot)
        return snapshot

    async def _read_index(self) -> None:
        """The meta hash's ``index`` / ``index_gen`` for ``watch_index``; a failure never fails the refresh."""
        assert self._watch is not None
        meta_key, seen = self._watch
        try:
            where = await self._backend.command("config.refresh", "HMGET", meta_key, "index", "index_gen")
        except BetterDBMemoryError as exc:  # the next refresh, or a missing index, tells us
            log.debug("live config %s: could not read %s: %s", self.key, meta_key, exc)
            return
        _call_safely("index", seen, *(as_text(v) if v is not None else None for v in where))

    async def set(self, field: str, value: str | float | int) -> ConfigSnapshot:
        """Validate one value, ``HSET`` it, and refresh (for a CLI ``config set``).

        Raises:
            ConfigurationError: unknown field or invalid value; nothing was written.
            BetterDBMemoryError: the server call failed (translated).
        """
        if not isinstance(value, str) and not is_number(value):
            raise ConfigurationError(
                f"{field}: value must be a string or a number, got {value!r}",
                code="configuration.type",
                details={"field": field, "value": repr(value), "reason": "wrong type"},
            )
        text = value.strip() if isinstance(value, str) else repr(value)
        parsed = parse_field(field, text)
        if field in WEIGHT_FIELDS:
            current = self._current
            weights = {
                FIELD_WEIGHT_SIMILARITY: current.weight_similarity,
                FIELD_WEIGHT_RECENCY: current.weight_recency,
                FIELD_WEIGHT_IMPORTANCE: current.weight_importance,
            }
            weights[field] = float(parsed)
            if all(w == 0.0 for w in weights.values()):
                raise ConfigurationError(
                    f"{field}={text}: recall weights must not all be zero",
                    code="configuration.invalid",
                    details={"field": field, "value": text, "reason": "all weights zero"},
                )
        await self._backend.command("config.set", "HSET", self.key, field, text)
        return await self.refresh()

    async def unset(self, field: str) -> ConfigSnapshot:
        """``HDEL`` one field (it returns to the default) and refresh.

        Raises:
            ConfigurationError: unknown field.
            BetterDBMemoryError: the server call failed (translated).
        """
        if field not in CONFIG_FIELDS:
            raise ConfigurationError(
                f"unknown config field {field!r}; known: {', '.join(CONFIG_FIELDS)}",
                code="configuration.unknown_field",
                details={"field": field},
            )
        await self._backend.command("config.unset", "HDEL", self.key, field)
        return await self.refresh()

    def start(self) -> None:
        """Start the background refresher (idempotent).

        Raises:
            ConfigurationError: no running event loop, or after ``close``.
        """
        if self._closed:
            raise ConfigurationError("LiveConfig.start() after close()", code="configuration.closed")
        if self._task is not None and not self._task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError as exc:
            raise ConfigurationError(
                "LiveConfig.start() needs a running event loop", code="configuration.no_loop"
            ) from exc
        if self._spawn is not None:  # under the owning store's supervisor
            self._task = self._spawn(self._run(), name=f"config:{self.key}", daemon=True)
            return
        self._task = loop.create_task(self._run(), name=f"betterdb-memory-config:{self.key}")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_interval)
            try:
                await self.refresh()
            except Exception as exc:
                # Warn once per outage (every 5 s would flood the log), count every failure.
                if not self._failing:
                    log.warning(
                        "live config %s: refresh failed, keeping %s: %s", self.key, self._current, exc
                    )
                else:
                    log.debug("live config %s: refresh still failing: %s", self.key, exc)
                self._failing = True
                _call_safely("on_error", self._on_error, exc)
            else:
                if self._failing:
                    log.info("live config %s: refresh recovered", self.key)
                self._failing = False

    async def close(self) -> None:
        """Stop the background refresher (idempotent). The hash is left as is."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
