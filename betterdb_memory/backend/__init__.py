"""The one layer that talks to Valkey: the client, retries, scripts, locks, the engine's dialect."""

from .client import Backend, Script, ValkeyClient
from .locks import ScopedLock

__all__ = ["Backend", "ScopedLock", "Script", "ValkeyClient"]
