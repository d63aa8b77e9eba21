"""``StoreInfo``: what a store is made of and how it is configured, read without changing it.

``MemoryStore`` inherits it. Here are the members that describe the store rather than
act on its memories: the engine's capabilities and the index in place (``capabilities``,
``layout``, ``spec``, ``ensure_index``, ``index_info``), the settings the constructor
fixed (``dedup``, ``reranker``, ``reinforce_mode``, ...), the live configuration
(``config_defaults``, ``current_config``, ``refresh_config``), Monitor discovery, and
``stats``. Each reads a part ``MemoryStore.__init__`` builds (declared below); the
operations on memories are the parts' own methods (``store.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .backend.client import ValkeyBackend
from .backend.index import IndexManager
from .backend.index_switch import SwitchReport
from .core.codec import as_text, to_int
from .core.dialect import Capabilities
from .core.ft_info import IndexInfo
from .core.keys import KeySpace
from .core.models import StoreStats
from .core.options import ReinforceMode
from .core.query import IndexLayout, IndexSpec
from .core.ranking import Reranker
from .core.tunables import ConfigSnapshot
from .embedders.base import Embedder
from .embedders.lazy import LazyFunctionEmbedder
from .observability.hub import StoreObservability
from .observability.metrics import MemoryMetrics
from .tiers.runtime import Runtime
from .tiers.session_config import SessionConfig

if TYPE_CHECKING:
    from .tiers.consolidation import Consolidation
    from .tiers.sessions import Sessions

__all__ = ["StoreInfo"]


class StoreInfo:
    """The descriptive half of ``MemoryStore``: its engine, index, settings, live config and stats."""

    # Built by MemoryStore.__init__.
    name: str
    embedder: Embedder | LazyFunctionEmbedder
    keys: KeySpace
    backend: ValkeyBackend  # the store's own transport (its client, closed with it)
    index: IndexManager
    _rt: Runtime
    _obs: StoreObservability
    _defaults: ConfigSnapshot
    _sessions: Sessions
    _consolidation: Consolidation

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...  # MemoryStore's: raises StoreClosedError once closed

    # -- what the store is made of -----------------------------------------------------------

    @property
    def metrics(self) -> MemoryMetrics:
        return self._obs.metrics

    @metrics.setter
    def metrics(self, value: MemoryMetrics) -> None:
        self._obs.metrics = value

    @property
    def capabilities(self) -> Capabilities | None:
        """What the engine supports (probed on first use; None before)."""
        return self.index.capabilities

    @property
    def layout(self) -> IndexLayout:
        """Which optional fields the index in place has (this library's, or another's)."""
        return self.index.layout

    @property
    def spec(self) -> IndexSpec:
        return self.index.spec

    @property
    def near_misses(self) -> int:
        """Recalls that came back empty with the nearest memory just past the threshold."""
        return self._obs.near_misses

    @property
    def fact_source(self) -> str:
        return self._rt.settings.fact_source

    @property
    def fact_importance(self) -> float:
        return self._rt.settings.fact_importance

    @property
    def dedup(self) -> bool:
        return self._rt.settings.dedup

    @property
    def reranker(self) -> Reranker | None:
        return self._rt.settings.reranker

    @property
    def rerank_candidates(self) -> int:
        return self._rt.settings.rerank_candidates

    @property
    def candidate_factor(self) -> int:
        return self._rt.settings.candidate_factor

    @property
    def reinforce_mode(self) -> ReinforceMode:
        return self._rt.settings.reinforce_mode

    @property
    def session_config(self) -> SessionConfig:
        """The L1 tier's validated settings."""
        return self._sessions.config

    @property
    def consolidation_lock_ttl(self) -> float:
        """Seconds a consolidation run's lock survives a crashed holder (30)."""
        return self._consolidation.lock_ttl

    @consolidation_lock_ttl.setter
    def consolidation_lock_ttl(self, value: float) -> None:
        self._consolidation.lock_ttl = value

    @property
    def consolidation_lock_wait(self) -> float:
        """Seconds a second consolidation of the same scope waits before ``ConsolidationBusyError`` (60)."""
        return self._consolidation.lock_wait

    @consolidation_lock_wait.setter
    def consolidation_lock_wait(self, value: float) -> None:
        self._consolidation.lock_wait = value

    # -- live config, discovery, index --------------------------------------------------------

    def config_defaults(self) -> ConfigSnapshot:
        """The constructor's tunables (what a field removed from the config hash returns to)."""
        return self._defaults

    def current_config(self) -> ConfigSnapshot:
        """The tunables in force now: constructor values overlaid by the live config hash."""
        return self._obs.config()

    async def refresh_config(self) -> ConfigSnapshot:
        """Re-read ``<name>:__mem_config`` now (it is also re-read every few seconds)."""
        return await self._obs.live.refresh()

    async def ensure_discovery_ready(self) -> None:
        """Make sure the store is registered with BetterDB Monitor (and its index exists)."""
        await self.index.ensure_ready()

    async def ensure_config_refresh_started(self) -> None:
        """Start the live-config refresher now (it starts with the store otherwise)."""
        await self.index.ensure_ready()

    async def ensure_index(self) -> None:
        """Create ``<name>:mem:idx`` if absent, or adopt the one there; idempotent, safe to race.

        An index another library created with the same name (betterdb-agent-memory)
        is used as it is: queries then avoid the fields it lacks and results are
        checked exactly in the client.

        Raises:
            ConfigurationError: the index (or its recorded metadata) was made for a
                different embedding dimension or model; vectors of two models must
                never share an index.
        """
        await self.index.ensure_index()

    async def migrate_index(self, *, keep_reference: bool = False) -> SwitchReport:
        """Rebuild an outdated index with this version's full schema and switch to it; recall keeps working.

        An index created by an older betterdb-memory or by betterdb-agent-memory lacks the
        fields newer features need (time-aware ``valid_from`` / ``state_from`` /
        ``subject_key``, declared metadata fields); those features raise
        ``configuration.index_outdated`` until this runs. The new index is built beside the
        one in use (declared fields backfilled from each memory's metadata first), then
        every process switches to it at once; finally ``<name>:mem:idx``, the name
        betterdb-agent-memory and BetterDB Monitor know, is rebuilt with the new schema
        and the store switches back to it (``keep_reference=True`` keeps the old one as
        it is instead, both maintained). A no-op on a current index. CLI: ``reindex``.

        Raises:
            ConsolidationBusyError: another migration of this store held its lock for an hour.
        """
        return await self.index.migrate(keep_reference=keep_reference)

    async def index_info(self) -> IndexInfo | None:
        """FT.INFO of this store's index, normalised across engines; None when absent.

        On a cluster ``num_docs`` is the whole cluster's (the primaries' sum).
        """
        return await self.index.info()

    async def stats(self) -> StoreStats:
        """Counts, index health and settings (what ``stats`` in the CLI prints)."""
        await self.index.ensure_ready()
        caps = self.index.caps
        await self._obs.flush()
        info = await self.index.info()
        if info is not None:
            self.metrics.set_items(info.num_docs)
        counters_raw = await self.backend.command("stats", "HGETALL", self.keys.stats)
        counters = {as_text(k): to_int(v) for k, v in counters_raw.items()}
        return StoreStats(
            name=self.name,
            index_name=self.index.name,
            items=info.num_docs if info else 0,
            evictions=counters.get("evictions", 0),
            counters=counters,
            index=info,
            capabilities=caps,
            embedder_model=self.embedder.model_id,
            dimensions=self.embedder.dimensions,
            config=self.current_config().as_hash(),
        )
