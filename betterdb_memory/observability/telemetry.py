"""Opt-in, anonymous product telemetry (the ``telemetry`` extra, PostHog).

The reference library sent events by default with a key baked into the package.
This one does the opposite, and each rule has a reason:

* **Off unless turned on**: ``Telemetry(enabled=True)``, ``MemoryStore(analytics=True)``
  (the reference's option, which defaulted to on there; ``Telemetry.opt_in()``), or
  ``BETTERDB_TELEMETRY`` set to ``1``/``true``/``yes`` read by ``Telemetry.from_env()``.
* **``DO_NOT_TRACK`` always wins** (any non-empty value except ``0``/``false``/
  ``no``/``off``), even over ``enabled=True``, and it is checked at every capture
  so it also stops a running process's telemetry. It is the cross-tool convention
  users set once for all their tools. ``BETTERDB_TELEMETRY=false`` (``0``/``no``/
  ``off``), the reference's documented opt-out, wins the same way.
* **No baked key or host.** ``api_key`` / ``host`` are configuration
  (``BETTERDB_TELEMETRY_KEY`` / ``BETTERDB_TELEMETRY_HOST``). Without a key
  nothing is sent, so a fork or a test run can never report to anyone by accident.
* **Nothing identifying.** An event carries its name, the library version, the
  Python ``major.minor``, the engine kind, and counts bucketed to powers of ten.
  No content, memory/thread/agent ids, host names, paths or OS details: PostHog's
  own enrichment (``$os``, ``$python_runtime``, ``$lib``...) is stripped by a
  ``before_send`` allowlist, GeoIP is disabled and no person profile is created.
  The distinct id is a random ``uuid4`` per ``Telemetry`` object, not derived
  from the host; it is not persisted, so no file is written.
* **No network on import, never in the caller's way.** ``posthog`` is imported
  only when telemetry is active; events are queued and sent by PostHog's
  background thread; ``capture`` never raises.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import uuid
from collections.abc import Mapping
from typing import Any, Final

from .._version import __version__
from ..core.validation import is_int

__all__ = [
    "ENGINE_KINDS",
    "ENV_DO_NOT_TRACK",
    "ENV_ENABLED",
    "ENV_HOST",
    "ENV_KEY",
    "Telemetry",
    "bucket_count",
    "do_not_track",
    "opted_out",
]

log = logging.getLogger(__name__)

ENV_ENABLED: Final = "BETTERDB_TELEMETRY"
ENV_KEY: Final = "BETTERDB_TELEMETRY_KEY"
ENV_HOST: Final = "BETTERDB_TELEMETRY_HOST"
ENV_DO_NOT_TRACK: Final = "DO_NOT_TRACK"

ENGINE_KINDS: Final[frozenset[str]] = frozenset({"valkey-search", "redisearch", "unknown"})

_TRUE: Final = frozenset({"1", "true", "yes"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})
_EVENT_RE: Final = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")
_KEY_RE: Final = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

# Properties that may leave the process. PostHog's processing flags are kept so
# that GeoIP stays off and no person profile is made; everything else it adds is not.
_BASE_KEYS: Final = frozenset({"library_version", "python_version", "engine"})
_POSTHOG_CONTROL_KEYS: Final = frozenset({"$geoip_disable", "$process_person_profile"})


def do_not_track(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``DO_NOT_TRACK`` asks tools not to report (https://consoledonottrack.com)."""
    env = os.environ if environ is None else environ
    return env.get(ENV_DO_NOT_TRACK, "").strip().lower() not in _FALSE


def opted_out(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``DO_NOT_TRACK`` is set, or ``BETTERDB_TELEMETRY`` is explicitly false-ish."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_ENABLED, "").strip().lower()
    return do_not_track(env) or (explicit != "" and explicit in _FALSE)


def bucket_count(n: int) -> str:
    """A count as a coarse bucket (``"0"``, ``"1-9"``, ``"10-99"``, ... ``"1000000+"``).

    Exact counts can fingerprint a deployment; the order of magnitude is all a
    product decision needs.
    """
    if n <= 0:
        return "0"
    low = 1
    while low < 1_000_000:
        if n < low * 10:
            return f"{low}-{low * 10 - 1}"
        low *= 10
    return "1000000+"


class Telemetry:
    """Anonymous usage events, sent only when explicitly enabled and configured.

    Args:
        enabled: send events (``DO_NOT_TRACK`` still wins).
        api_key: the PostHog project key; without one nothing is sent.
        host: the PostHog ingestion host (PostHog's own default when ``None``).
        engine: the engine kind, one of ``ENGINE_KINDS`` (else ``"unknown"``).
    """

    def __init__(
        self,
        *,
        enabled: bool = False,
        api_key: str | None = None,
        host: str | None = None,
        engine: str = "unknown",
    ) -> None:
        self.enabled = bool(enabled)
        self._api_key = api_key or None
        self.host = host or None
        self.engine = engine if engine in ENGINE_KINDS else "unknown"
        self.install_id = str(uuid.uuid4())
        self._client: Any = None
        self._unavailable = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        # The key is configuration, not a secret in PostHog's model, but keep it out of logs.
        return (
            f"Telemetry(enabled={self.enabled}, configured={self._api_key is not None}, active={self.active})"
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, engine: str = "unknown") -> Telemetry:
        """Build from ``BETTERDB_TELEMETRY``, ``BETTERDB_TELEMETRY_KEY``, ``BETTERDB_TELEMETRY_HOST``.

        Args:
            environ: the environment to read (``os.environ`` by default).
            engine: the engine kind.
        """
        env = os.environ if environ is None else environ
        enabled = env.get(ENV_ENABLED, "").strip().lower() in _TRUE
        return cls(
            enabled=enabled and not do_not_track(env),
            api_key=env.get(ENV_KEY, "").strip() or None,
            host=env.get(ENV_HOST, "").strip() or None,
            engine=engine,
        )

    @classmethod
    def opt_in(cls, environ: Mapping[str, str] | None = None, *, engine: str = "unknown") -> Telemetry:
        """Enabled by the caller (``analytics=True``); key and host still come from
        ``BETTERDB_TELEMETRY_KEY`` / ``BETTERDB_TELEMETRY_HOST`` (no key: nothing is sent).

        ``DO_NOT_TRACK`` and ``BETTERDB_TELEMETRY=false`` still win, at every event.
        """
        env = os.environ if environ is None else environ
        return cls(
            enabled=True,
            api_key=env.get(ENV_KEY, "").strip() or None,
            host=env.get(ENV_HOST, "").strip() or None,
            engine=engine,
        )

    @property
    def active(self) -> bool:
        """Whether ``capture`` would send: enabled, configured, and not opted out
        (``DO_NOT_TRACK``, ``BETTERDB_TELEMETRY=false``)."""
        return self.enabled and self._api_key is not None and not self._unavailable and not opted_out()

    def capture(self, event: str, properties: Mapping[str, Any] | None = None) -> None:
        """Queue one event; a no-op unless ``active``. Never raises.

        Args:
            event: a short lower-case name such as ``"store.opened"`` (others are dropped).
            properties: counts only (ints, bucketed) under short lower-case keys, plus
                optionally ``engine``; anything else is dropped before it is queued.
        """
        if not self.active:
            return
        try:
            if not isinstance(event, str) or not _EVENT_RE.match(event):
                log.debug("telemetry: dropped event with a non-conforming name")
                return
            client = self._get_client()
            if client is None:
                return
            client.capture(event, distinct_id=self.install_id, properties=self._properties(properties))
        except Exception as exc:  # telemetry must never break the caller
            log.debug("telemetry: capture failed: %s", exc)

    def _properties(self, properties: Mapping[str, Any] | None) -> dict[str, Any]:
        engine = self.engine
        out: dict[str, Any] = {}
        for key, value in (properties or {}).items():
            if key == "engine":
                if isinstance(value, str) and value in ENGINE_KINDS:
                    engine = value
            elif isinstance(key, str) and _KEY_RE.match(key) and key not in _BASE_KEYS and is_int(value):
                out[key] = bucket_count(value)
        out.update(
            {
                "library_version": __version__,
                "python_version": f"{sys.version_info.major}.{sys.version_info.minor}",
                "engine": engine,
                "$process_person_profile": False,
            }
        )
        return out

    @staticmethod
    def _scrub(message: dict[str, Any]) -> dict[str, Any]:
        """PostHog ``before_send``: keep only our properties and its privacy flags."""
        props = message.get("properties") or {}
        message["properties"] = {
            k: v
            for k, v in props.items()
            if k in _BASE_KEYS or k in _POSTHOG_CONTROL_KEYS or (not k.startswith("$") and _KEY_RE.match(k))
        }
        return message

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is not None or self._unavailable:
                return self._client
            try:
                from posthog import Posthog
            except ImportError:
                log.info(
                    "telemetry: enabled but the 'telemetry' extra (posthog) is not installed; not sending"
                )
                self._unavailable = True
                return None
            self._client = Posthog(
                self._api_key or "",
                host=self.host,
                disable_geoip=True,
                before_send=self._scrub,
                enable_exception_autocapture=False,
                timeout=5,
                max_retries=1,
            )
            return self._client

    def flush(self) -> None:
        """Send queued events now (blocks up to PostHog's timeout). Never raises."""
        client = self._client
        if client is None:
            return
        try:
            client.flush()
        except Exception as exc:
            log.debug("telemetry: flush failed: %s", exc)

    def close(self) -> None:
        """Flush and stop PostHog's background thread (idempotent). Never raises."""
        with self._lock:
            client, self._client = self._client, None
            self._unavailable = True  # a closed Telemetry stays silent
        if client is None:
            return
        try:
            client.shutdown()
        except Exception as exc:
            log.debug("telemetry: shutdown failed: %s", exc)
