"""The one layer that talks to Valkey: the client, retries, scripts, locks, the engine's dialect."""

from .client import Backend, ScopedLock, Script, ValkeyClient

__all__ = ["Backend", "ScopedLock", "Script", "ValkeyClient"]
