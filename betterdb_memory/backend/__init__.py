"""The one layer that talks to Valkey: the client, retries, scripts, locks, the engine probe.

Of the package it imports only ``core`` and ``errors`` (tests/unit/test_layers.py).
"""

from .client import Backend, Script, ValkeyClient
from .locks import ScopedLock

__all__ = ["Backend", "ScopedLock", "Script", "ValkeyClient"]
