"""Prometheus metrics for one memory store, named ``agent_memory_*``.

The families of betterdb-agent-memory keep its exact names, types, label and
meaning, so its dashboards and alerts work unchanged (label ``store_name``):

=============================================  =========  ==========================================
``agent_memory_items``                         gauge      memories in the store (last count seen)
``agent_memory_recall_total``                  counter    recall calls
``agent_memory_recall_hits_total``             counter    recalls that returned at least one memory
``agent_memory_recall_empty_total``            counter    recalls that returned none
``agent_memory_recall_near_miss_total``        counter    empty recalls whose nearest candidate sat
                                                          just past the threshold
``agent_memory_recall_latency_seconds``        histogram  recall wall time (the reference's buckets)
``agent_memory_embedding_calls_total``         counter    texts embedded (the reference calls its
                                                          ``embed_fn`` once per text)
``agent_memory_evictions_total``               counter    memories evicted by the capacity cap
``agent_memory_consolidations_total``          counter    consolidation runs, either mode
``agent_memory_fact_tombstone_unmatched_total`` counter   fact tombstones that matched no live fact
=============================================  =========  ==========================================

This library adds (names that never collide with those): ``recall_memories_total``
(memories returned, summed), ``recall_embed_seconds`` / ``recall_search_seconds``
(the latency split), ``remember_total``, ``dedup_hits_total``,
``consolidation_runs_total{mode}``, ``consolidation_items_total{mode,outcome}``,
``background_failures_total{task}``, ``turns_stored_total``, ``context_tokens{part}``,
``config_rejected_total``, ``supersessions_total`` (versions of a subject moved to
history on write) and ``time_window_recalls_total{mode}`` (recalls whose query held a
time expression: ``filter`` for an exact window, ``boost`` for a vague one) and
``recall_degraded_total{reason}`` (re-ranked recalls answered from the KNN candidates
alone because the full-text side ran out of time, failed or came back partial:
``timeout``, ``error``, ``partial``).

``agent_memory`` is the default prefix; ``prefix=`` changes it, as the reference's
``MemoryTelemetryOptions(metrics_prefix=...)`` does.

Why the shape is what it is:

* **Low cardinality.** The only free-form label is ``store_name`` (one value per
  store). The other labels are small fixed enums (``mode``, ``part``, ``outcome``) or
  a short task identifier chosen by the library (``task``). Content, memory ids,
  thread/agent ids and queries never become labels: a label value per id would
  grow the scrape without bound and leak data into the monitoring system.
* **Shared registries.** Several stores (or several ``MemoryMetrics`` for the same
  store) may share one ``CollectorRegistry``: each metric family is created once per
  registry and prefix (``metric_families``), and each store binds its own children
  with ``.labels(store_name)``.
* **Cheap on the hot path.** Children are bound once in ``__init__``; an
  ``observe_*`` call is a few lock-protected float additions, no dict lookups. A recall
  and a write add to the children's values directly (``_adds``, ``_observes``: the
  additions ``inc`` / ``observe`` make, without the checks they repeat on every call),
  so every value is the same, at once, for any reader (issue 29's budget).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from prometheus_client import REGISTRY, CollectorRegistry

from ..core.arguments import check_int, check_number
from ..core.text_query import DEGRADED_REASONS
from ..errors import ConfigurationError, ValidationError
from .metric_families import families_for

__all__ = [
    "CONSOLIDATION_MODES",
    "CONTEXT_PARTS",
    "METRIC_PREFIX",
    "TIME_WINDOW_MODES",
    "ConsolidationMode",
    "ContextPart",
    "MemoryMetrics",
]

METRIC_PREFIX: Final = "agent_memory"

ConsolidationMode = Literal["summary", "facts"]
ContextPart = Literal["system", "memories", "turns", "current"]

CONSOLIDATION_MODES: Final[frozenset[str]] = frozenset({"summary", "facts"})
CONTEXT_PARTS: Final[frozenset[str]] = frozenset({"system", "memories", "turns", "current"})
# How a recall used the time window of its query (core.time_recall.TimePlan.mode).
TIME_WINDOW_MODES: Final[frozenset[str]] = frozenset({"filter", "boost"})

# A task label is chosen by the library ("heartbeat", "config_refresh", "summarise"),
# never by a user value; the pattern keeps a bug from turning it into an id.
_TASK_RE: Final = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_PREFIX_RE: Final = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]{0,63}$")


# Every recall and write records a few values: the common case (a plain int, a finite
# float) is accepted before the full check, which builds its error only for a bad value.


def _count(name: str, n: int) -> int:
    if type(n) is int and n >= 0:
        return n
    return check_int(n, name, minimum=0)


def _seconds(name: str, value: float) -> float:
    if type(value) is float and 0.0 <= value < math.inf:
        return value
    return check_number(value, name, minimum=0.0)


def _adds(child: Any) -> Callable[[float], None]:
    """``child.inc`` (a bound counter or gauge) without the checks it makes on every call.

    ``inc`` checks that the child is bound and the amount not negative (the callers here
    checked it), then adds to its value under the value's lock (a shared file in
    multiprocess mode): the value's own ``inc`` makes that addition. A client that keeps
    the value elsewhere gets ``child.inc`` itself.
    """
    inc = getattr(getattr(child, "_value", None), "inc", None)
    if not callable(inc) or getattr(child, "_is_most_recent", False):  # a "mostrecent" gauge refuses inc
        return child.inc  # type: ignore[no-any-return]
    return inc  # type: ignore[no-any-return]


def _observes(child: Any) -> Callable[[float], None]:
    """``child.observe`` (a bound histogram) without the checks it makes on every call.

    ``observe`` adds the amount to the sum and one to the first bucket whose upper bound
    is not below it (its loop over the bounds; ``bisect_left`` finds the same bucket,
    the last bound being +Inf). A client whose histogram is laid out otherwise gets
    ``child.observe`` itself.
    """
    bounds, buckets = getattr(child, "_upper_bounds", None), getattr(child, "_buckets", None)
    add_sum = getattr(getattr(child, "_sum", None), "inc", None)
    if not (
        isinstance(bounds, list) and isinstance(buckets, list) and bounds and len(bounds) == len(buckets)
        and bounds[-1] == math.inf and callable(add_sum) and all(callable(getattr(b, "inc", None)) for b in buckets)
    ):  # fmt: skip
        return child.observe  # type: ignore[no-any-return]
    adds = [b.inc for b in buckets]

    def observe(amount: float) -> None:
        add_sum(amount)
        adds[bisect_left(bounds, amount)](1)

    return observe


class MemoryMetrics:
    """The Prometheus metrics of one store, bound to its ``store_name`` label.

    Args:
        store_name: the store's name; the only free-form label value.
        registry: where to register; ``prometheus_client.REGISTRY`` by default (what
            ``start_http_server`` and most exporters scrape).
        prefix: metric-name prefix (``agent_memory`` by default; the reference's
            ``metrics_prefix``).

    Raises:
        ValidationError: ``store_name`` is empty.
        ConfigurationError: ``prefix`` is not a valid metric-name prefix, or
            ``registry`` already holds a metric with one of our names but another
            type or labels.
    """

    def __init__(
        self, store_name: str, registry: CollectorRegistry | None = None, *, prefix: str | None = None
    ) -> None:
        if not isinstance(store_name, str) or not store_name:
            raise ConfigurationError(
                "store_name must be a non-empty string", details={"argument": "store_name"}
            )
        prefix = METRIC_PREFIX if prefix is None else prefix
        if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
            raise ConfigurationError(
                f"metrics prefix must be a Prometheus name like 'agent_memory', got {prefix!r}",
                code="configuration.metrics_prefix",
                details={"argument": "prefix"},
            )
        self.store_name = store_name
        self.prefix = prefix
        self.registry = REGISTRY if registry is None else registry
        f = families_for(self.registry, prefix)
        self._f = f
        n = store_name
        self._items = f.items.labels(n)
        self._recall = f.recall.labels(n)
        self._recall_hits = f.recall_hits.labels(n)
        self._recall_empty = f.recall_empty.labels(n)
        self._recall_near_miss = f.recall_near_miss.labels(n)
        self._recall_latency = f.recall_latency.labels(n)
        self._embedding_calls = f.embedding_calls.labels(n)
        self._evictions = f.evictions.labels(n)
        self._consolidations = f.consolidations.labels(n)
        self._tombstones = f.tombstones_unmatched.labels(n)
        self._recall_memories = f.recall_memories.labels(n)
        self._recall_embed = f.recall_embed_seconds.labels(n)
        self._recall_search = f.recall_search_seconds.labels(n)
        self._remember = f.remember.labels(n)
        self._dedup = f.dedup_hits.labels(n)
        self._turns = f.turns_stored.labels(n)
        self._config_rejected = f.config_rejected.labels(n)
        self._supersessions = f.supersessions.labels(n)
        self._context = {part: f.context_tokens.labels(n, part) for part in sorted(CONTEXT_PARTS)}
        self._time_window = {
            mode: f.time_window_recalls.labels(n, mode) for mode in sorted(TIME_WINDOW_MODES)
        }
        self._degraded = {reason: f.recall_degraded.labels(n, reason) for reason in sorted(DEGRADED_REASONS)}
        # The hot path's additions (``_adds`` / ``_observes``): one recall, one write.
        self._add_recall, self._add_recall_hits = _adds(self._recall), _adds(self._recall_hits)
        self._add_recall_empty, self._add_recall_memories = (
            _adds(self._recall_empty),
            _adds(self._recall_memories),
        )
        self._add_items, self._add_remember = _adds(self._items), _adds(self._remember)
        self._observe_embed, self._observe_search = (
            _observes(self._recall_embed),
            _observes(self._recall_search),
        )
        self._observe_latency = _observes(self._recall_latency)

    def __repr__(self) -> str:
        return f"MemoryMetrics(store_name={self.store_name!r}, prefix={self.prefix!r})"

    def set_items(self, n: int) -> None:
        """Record the store's current number of long-term memories."""
        self._items.set(_count("n", n))

    def add_items(self, delta: int) -> None:
        """Move the item gauge by ``delta`` (written: positive; deleted: negative) between counts."""
        if delta if type(delta) is int else check_int(delta, "delta"):
            self._add_items(delta)

    def observe_supersessions(self, n: int) -> None:
        """Count ``n`` versions of subjects moved to history by writes (``supersessions_total``)."""
        n = _count("n", n)
        if n:
            self._supersessions.inc(n)

    def observe_recall(
        self,
        *,
        hits: int,
        near_miss: bool,
        embed_seconds: float,
        search_seconds: float,
        total_seconds: float | None = None,
    ) -> None:
        """Record one recall call.

        ``agent_memory_recall_hits_total`` counts this call once if it returned any
        memory (the reference's meaning); ``agent_memory_recall_memories_total`` adds
        ``hits``.

        Args:
            hits: memories returned (0 counts as an empty recall).
            near_miss: the recall was empty but the nearest candidate sat just past
                the threshold.
            embed_seconds: time embedding the query (0 when the vector was given).
            search_seconds: time in the vector search.
            total_seconds: end-to-end time (``agent_memory_recall_latency_seconds``);
                ``embed_seconds + search_seconds`` when omitted.
        """
        hits = _count("hits", hits)
        embed = _seconds("embed_seconds", embed_seconds)
        search = _seconds("search_seconds", search_seconds)
        total = embed + search if total_seconds is None else _seconds("total_seconds", total_seconds)
        self._add_recall(1)
        if hits:
            self._add_recall_hits(1)
            self._add_recall_memories(hits)
        else:
            self._add_recall_empty(1)
        if near_miss:
            self._recall_near_miss.inc()
        self._observe_embed(embed)
        self._observe_search(search)
        self._observe_latency(total)

    def observe_time_window_recall(self, mode: str) -> None:
        """Record one recall whose query held a time expression (``time_window_recalls_total``).

        Args:
            mode: ``"filter"`` (an exact window, applied in the engine) or ``"boost"``
                (a vague one, ranking inside first).

        Raises:
            ValidationError: another mode.
        """
        child = self._time_window.get(mode)
        if child is None:
            raise ValidationError(
                f"mode must be one of {sorted(TIME_WINDOW_MODES)}, got {mode!r}",
                details={"argument": "mode"},
            )
        child.inc()

    def observe_recall_degraded(self, reason: str) -> None:
        """Record one re-ranked recall answered from its KNN candidates alone (``recall_degraded_total``).

        Args:
            reason: ``"timeout"``, ``"error"`` or ``"partial"`` (``core.text_query``).

        Raises:
            ValidationError: another reason.
        """
        child = self._degraded.get(reason)
        if child is None:
            raise ValidationError(
                f"reason must be one of {sorted(DEGRADED_REASONS)}, got {reason!r}",
                details={"argument": "reason"},
            )
        child.inc()

    def observe_embedding_calls(self, n: int = 1) -> None:
        """Record ``n`` texts embedded (``agent_memory_embedding_calls_total``).

        The reference calls its ``embed_fn`` once per text; counting texts, not
        batches, keeps the number the same for the same work.
        """
        n = _count("n", n)
        if n:
            self._embedding_calls.inc(n)

    def observe_tombstones_unmatched(self, n: int) -> None:
        """Record ``n`` fact tombstones that matched no live fact.

        ``observe_consolidation(..., unmatched=n)`` records the same; call one of them.
        """
        n = _count("n", n)
        if n:
            self._tombstones.inc(n)

    def observe_remember(self, n: int = 1, *, dedup_hits: int = 0) -> None:
        """Record ``n`` memories written and ``dedup_hits`` absorbed as duplicates."""
        n = _count("n", n)
        dedup_hits = _count("dedup_hits", dedup_hits)
        if n:
            self._add_remember(n)
        if dedup_hits:
            self._dedup.inc(dedup_hits)

    def observe_evictions(self, n: int) -> None:
        """Record ``n`` memories evicted by the capacity cap."""
        n = _count("n", n)
        if n:
            self._evictions.inc(n)

    def observe_consolidation(
        self,
        mode: ConsolidationMode,
        *,
        created: int = 0,
        deleted: int = 0,
        superseded: int = 0,
        unmatched: int = 0,
    ) -> None:
        """Record one consolidation run and what it changed.

        ``agent_memory_consolidations_total`` counts the run (either mode, as the
        reference does); ``agent_memory_consolidation_runs_total{mode}`` splits it.

        Args:
            mode: ``"summary"`` or ``"facts"``.
            created: memories written (digests or facts).
            deleted: source or retracted memories deleted.
            superseded: prior facts replaced by newer statements.
            unmatched: tombstones that matched no live fact.

        Raises:
            ValidationError: unknown ``mode`` or a negative count.
        """
        if mode not in CONSOLIDATION_MODES:
            raise ValidationError(
                f"mode must be one of {sorted(CONSOLIDATION_MODES)}, got {mode!r}",
                details={"argument": "mode"},
            )
        counts = {
            "created": _count("created", created),
            "deleted": _count("deleted", deleted),
            "superseded": _count("superseded", superseded),
        }
        unmatched = _count("unmatched", unmatched)
        self._consolidations.inc()
        self._f.consolidation_runs.labels(self.store_name, mode).inc()
        for outcome, value in counts.items():
            if value:
                self._f.consolidation_items.labels(self.store_name, mode, outcome).inc(value)
        if unmatched:
            self._tombstones.inc(unmatched)

    def observe_background_failure(self, task: str) -> None:
        """Record one failure of a background task (heartbeat, config refresh, ...).

        Raises:
            ValidationError: ``task`` is not a short lower-case identifier (it is a
                label value, so it must come from a small fixed set).
        """
        if not isinstance(task, str) or not _TASK_RE.match(task):
            raise ValidationError(
                f"task must be a short identifier like 'heartbeat', got {task!r}",
                details={"argument": "task"},
            )
        self._f.background_failures.labels(self.store_name, task).inc()

    def observe_turns(self, n: int = 1) -> None:
        """Record ``n`` short-term conversation turns stored."""
        n = _count("n", n)
        if n:
            self._turns.inc(n)

    def observe_context(self, tokens_by_part: Mapping[str, int]) -> None:
        """Record the tokens one assembled context spent on each part.

        Args:
            tokens_by_part: tokens per part, keys among ``system``, ``memories``,
                ``turns``, ``current``; parts left out are not observed.

        Raises:
            ValidationError: an unknown part or a negative count.
        """
        checked: list[tuple[str, int]] = []
        for part, tokens in tokens_by_part.items():
            if part not in CONTEXT_PARTS:
                raise ValidationError(
                    f"context part must be one of {sorted(CONTEXT_PARTS)}, got {part!r}",
                    details={"argument": "tokens_by_part"},
                )
            checked.append((part, _count(f"tokens_by_part[{part!r}]", tokens)))
        for part, tokens in checked:
            self._context[part].observe(tokens)

    def observe_config_rejections(self, n: int = 1) -> None:
        """Record ``n`` live-config values rejected (the last good value was kept)."""
        n = _count("n", n)
        if n:
            self._config_rejected.inc(n)
