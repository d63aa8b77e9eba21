"""The one layer that talks to Valkey: the client, retries, scripts, locks, the engine probe.

Of the package it imports only ``core`` and ``errors`` (tests/unit/test_layers.py).

``Backend`` (``protocol``) is what the store's parts depend on; ``ValkeyBackend``
(``client``) implements it over valkey-py; the parts hand it commands as values
(``commands``) and every Lua script of the package lives in ``scripts``.
"""

from .client import ValkeyBackend, ValkeyClient, as_backend, connect
from .commands import Command, Script, ScriptCall, Step
from .locks import ScopedLock
from .protocol import Backend

__all__ = [
    "Backend",
    "Command",
    "ScopedLock",
    "Script",
    "ScriptCall",
    "Step",
    "ValkeyBackend",
    "ValkeyClient",
    "as_backend",
    "connect",
]
