"""The L1 tier's settings: one frozen, validated object (``SessionConfig.of``).

``MemoryStore`` keeps its documented L1 keyword arguments (``session_ttl``,
``max_session_turns``, ...) and builds this from them; the sessions and the rolling
summaries read the same object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.context import ContextBudget
from ..core.models import Sensitivity
from ..core.tokens import HeuristicTokenCounter, TokenCounter
from ..core.validation import check_int, check_number, check_sensitivities
from ..errors import ConfigurationError, ValidationError
from ..extraction import FactExtractor
from ..summarizers import ExtractiveSummarizer, Summarizer

__all__ = ["SessionConfig"]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """The L1 tier's settings, validated once (``SessionConfig.of``)."""

    ttl_ms: int
    window: int
    batch: int
    cap: int
    summarizer: Summarizer
    fact_extractor: FactExtractor | None
    counter: TokenCounter
    budget: ContextBudget
    redact: tuple[Sensitivity, ...]
    grace: float
    lock_ttl_ms: int

    @classmethod
    def of(
        cls,
        *,
        session_ttl: float = 86400,
        max_session_turns: int = 50,
        summarizer: Summarizer | None = None,
        fact_extractor: FactExtractor | None = None,
        token_counter: TokenCounter | None = None,
        summarize_batch: int = 20,
        max_unsummarized: int | None = None,
        budget: ContextBudget | None = None,
        redact: Sequence[str] = (),
        shutdown_grace: float = 30.0,
        summary_lock_ttl: float = 120.0,
    ) -> SessionConfig:
        """Validate the store's L1 keyword arguments.

        Args:
            session_ttl: seconds a session lives after its last turn.
            max_session_turns: the window of turns always kept verbatim.
            summarizer: folds turns leaving the window into L2 (``ExtractiveSummarizer`` by default).
            fact_extractor: needed by ``extract_memories``.
            token_counter: ``HeuristicTokenCounter`` by default.
            summarize_batch: turns per summary; 0 turns rolling summaries off (turns
                leaving the window are then simply trimmed).
            max_unsummarized: turns kept beyond the window while the summariser lags
                (default ``10 * summarize_batch``); older ones are dropped and counted.
            budget: fractions of ``retrieve_context``'s budget.
            redact: sensitivity classes ``retrieve_context`` leaves out by default.
            shutdown_grace: seconds ``close`` waits for running summaries.
            summary_lock_ttl: seconds a summariser may hold a session's lock per batch.

        Raises:
            ConfigurationError: a value is out of range or of the wrong type.
        """
        ttl = check_number(session_ttl, "session_ttl", positive=True, setting=True)
        window = check_int(max_session_turns, "max_session_turns", minimum=1, setting=True)
        batch = check_int(summarize_batch, "summarize_batch", minimum=0, setting=True)
        if max_unsummarized is None:
            backlog = 10 * batch
        else:
            backlog = check_int(max_unsummarized, "max_unsummarized", minimum=batch, setting=True)
        for name, obj, proto in (
            ("summarizer", summarizer, Summarizer),
            ("fact_extractor", fact_extractor, FactExtractor),
            ("token_counter", token_counter, TokenCounter),
        ):
            # str has a ``count`` method, so it would pass a runtime Protocol check as a TokenCounter.
            if obj is not None and (isinstance(obj, str | bytes) or not isinstance(obj, proto)):
                raise ConfigurationError(
                    f"{name} {obj!r} does not implement {proto.__name__}",
                    code="configuration.type",
                    details={"argument": name},
                )
        if budget is not None and not isinstance(budget, ContextBudget):
            raise ConfigurationError(
                "budget must be a ContextBudget", code="configuration.type", details={"argument": "budget"}
            )
        try:
            redact_classes = check_sensitivities(redact)
        except ValidationError as exc:
            raise ConfigurationError(exc.message, code="configuration.redact", details=exc.details) from exc
        return cls(
            ttl_ms=max(1, int(ttl * 1000)),
            window=window,
            batch=batch,
            cap=window + backlog,
            summarizer=summarizer if summarizer is not None else ExtractiveSummarizer(),
            fact_extractor=fact_extractor,
            counter=token_counter if token_counter is not None else HeuristicTokenCounter(),
            budget=budget if budget is not None else ContextBudget(),
            redact=redact_classes,
            grace=check_number(shutdown_grace, "shutdown_grace", minimum=0.0, setting=True),
            lock_ttl_ms=max(
                1, int(check_number(summary_lock_ttl, "summary_lock_ttl", positive=True, setting=True) * 1000)
            ),
        )

    @property
    def high_water(self) -> int:
        """Backlog (turns past the window not yet summarised) at which writers wait.

        One batch below the hard cap (``cap - window``), so turns in flight while a
        writer waits still fit; never below one batch, when a summary is due anyway.
        """
        return max(self.batch, self.cap - self.window - self.batch)
