"""betterdb-memory: two-tier agent memory on Valkey Search.

Start with ``MemoryStore.connect()`` (embedded engine) or
``MemoryStore(client=..., name=...)`` (your Valkey), or the ``AgentMemory`` facade.
"""

from ._io import RetryPolicy
from ._version import __version__
from .consolidation import ConsolidateFactsResult, ConsolidateResult, ConsolidationBusyError, Fact, FactRecord
from .context import ContextBudget, RetrievedContext
from .dialect import Capabilities, IndexInfo
from .embedders import (
    Embedder,
    FunctionEmbedder,
    HashingEmbedder,
    OnnxEmbedder,
    OpenAIEmbedder,
    default_embedder,
)
from .errors import (
    BetterDBMemoryError,
    CommandNotSupportedError,
    ConfigurationError,
    EmbeddingError,
    IndexExistsError,
    IndexNotFoundError,
    MemoryNotFoundError,
    PermissionDeniedError,
    QuerySyntaxError,
    ServerError,
    StoreConnectionError,
    StoreTimeoutError,
    TokenBudgetError,
    ValidationError,
    VectorSizeError,
)
from .extraction import ExtractedFact, FactExtractor, OpenAIFactExtractor
from .facade import AgentMemory
from .keys import Scope
from .models import MemoryHit, MemoryItem, MemoryPage, StoreStats
from .observability.live_config import ConfigSnapshot, MemoryConfigSnapshot
from .ranking import HybridRanker, Reranker
from .scoring import ScoreParts, Weights
from .store import MemoryStore
from .summarizers import ExtractiveSummarizer, OpenAISummarizer, Summarizer
from .tokens import HeuristicTokenCounter, TokenCounter
from .turns import SessionMetadata, ToolResult, Turn

__all__ = [
    "AgentMemory",
    "BetterDBMemoryError",
    "Capabilities",
    "CommandNotSupportedError",
    "ConfigSnapshot",
    "ConfigurationError",
    "ConsolidateFactsResult",
    "ConsolidateResult",
    "ConsolidationBusyError",
    "ContextBudget",
    "Embedder",
    "EmbeddingError",
    "ExtractedFact",
    "ExtractiveSummarizer",
    "Fact",
    "FactExtractor",
    "FactRecord",
    "FunctionEmbedder",
    "HashingEmbedder",
    "HeuristicTokenCounter",
    "HybridRanker",
    "IndexExistsError",
    "IndexInfo",
    "IndexNotFoundError",
    "MemoryConfigSnapshot",
    "MemoryHit",
    "MemoryItem",
    "MemoryNotFoundError",
    "MemoryPage",
    "MemoryStore",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "OpenAIFactExtractor",
    "OpenAISummarizer",
    "PermissionDeniedError",
    "QuerySyntaxError",
    "Reranker",
    "RetrievedContext",
    "RetryPolicy",
    "Scope",
    "ScoreParts",
    "ServerError",
    "SessionMetadata",
    "StoreConnectionError",
    "StoreStats",
    "StoreTimeoutError",
    "Summarizer",
    "TokenBudgetError",
    "TokenCounter",
    "ToolResult",
    "Turn",
    "ValidationError",
    "VectorSizeError",
    "Weights",
    "__version__",
    "default_embedder",
]
