"""betterdb-memory: two-tier agent memory on Valkey Search.

Start with ``MemoryStore.connect()`` (embedded engine) or
``MemoryStore(client=..., name=...)`` (your Valkey), or the ``AgentMemory`` facade.
"""

from ._io import RetryPolicy
from ._version import __version__
from .dialect import Capabilities, IndexInfo
from .embedders.base import Embedder
from .embedders.hashing import HashingEmbedder
from .errors import (
    BetterDBMemoryError,
    CommandNotSupportedError,
    ConfigurationError,
    IndexExistsError,
    IndexNotFoundError,
    QuerySyntaxError,
    ServerError,
    StoreConnectionError,
    StoreTimeoutError,
    ValidationError,
    VectorSizeError,
)
from .keys import Scope
from .models import MemoryHit, MemoryItem, MemoryPage, StoreStats
from .scoring import ScoreParts, Weights
from .store import MemoryStore

__all__ = [
    "BetterDBMemoryError",
    "Capabilities",
    "CommandNotSupportedError",
    "ConfigurationError",
    "Embedder",
    "HashingEmbedder",
    "IndexExistsError",
    "IndexInfo",
    "IndexNotFoundError",
    "MemoryHit",
    "MemoryItem",
    "MemoryPage",
    "MemoryStore",
    "QuerySyntaxError",
    "RetryPolicy",
    "Scope",
    "ScoreParts",
    "ServerError",
    "StoreConnectionError",
    "StoreStats",
    "StoreTimeoutError",
    "ValidationError",
    "VectorSizeError",
    "Weights",
    "__version__",
]
