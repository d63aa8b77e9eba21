"""Context assembly for the next LLM call: the budget split (pure) and what it returns.

``allocate`` is the whole policy and does no I/O, so it is unit-tested exhaustively.
The reference library (actrone-memory) used about 60% of a budget even when it had
material to spare: two of its four fractions were never applied, and its turn loop
stopped at the first turn too large to fit, so one 2,000-token turn hid every older
turn. Here:

* the system reserve is reported, never consumed (the caller's prompt goes there);
* the current user message costs what it costs; whatever it leaves of its share
  flows on to memories and turns;
* memories and turns split the rest by their fractions, each filled greedily (memories
  best score first, turns newest first) *skipping* an item that does not fit rather
  than stopping;
* what one part leaves unused is offered to the other (turns first, then memories),
  so a rich context fills >= 90% of the usable budget and never exceeds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ConfigurationError
from .arguments import check_number
from .models import MemoryHit, MemoryItem
from .turns import Turn

__all__ = ["Allocation", "ContextBudget", "ContextUsage", "RetrievedContext", "allocate"]


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """Fractions of ``token_budget`` per part (defaults as in the reference library).

    Args:
        system: reserved for the caller's system prompt; reported, not consumed.
        memories: long-term memories recalled for ``query``.
        turns: recent turns of the session.
        current_turn: the current user message (``query``); its unused share flows on.

    A part with fraction 0 is switched off (it gets no spill-over either). The
    fractions must be finite, >= 0 and sum to at most 1; ``memories + turns`` must
    be positive, or there would be nothing to retrieve.
    """

    system: float = 0.30
    memories: float = 0.25
    turns: float = 0.35
    current_turn: float = 0.10

    def __post_init__(self) -> None:
        values = {"system": self.system, "memories": self.memories, "turns": self.turns}
        values["current_turn"] = self.current_turn
        for name, value in values.items():
            check_number(value, f"ContextBudget.{name}", minimum=0.0, setting=True)
        if sum(values.values()) > 1.0 + 1e-9:
            raise ConfigurationError(
                f"ContextBudget fractions sum to {sum(values.values()):.3f}; at most 1",
                code="configuration.budget",
            )
        if self.memories + self.turns <= 0:
            raise ConfigurationError("ContextBudget needs memories or turns > 0", code="configuration.budget")


@dataclass(frozen=True, slots=True)
class Allocation:
    """Which candidates fit: indices into the inputs of ``allocate``, in input order."""

    token_budget: int
    system_reserve: int
    usable: int
    current_turn_tokens: int
    memory_indices: tuple[int, ...]
    turn_indices: tuple[int, ...]
    memory_tokens: int
    turn_tokens: int

    @property
    def total(self) -> int:
        return self.current_turn_tokens + self.memory_tokens + self.turn_tokens


def _fill(costs: Sequence[int], room: int, taken: set[int]) -> int:
    """Take items in order that fit in ``room`` (skipping those that do not); return tokens used."""
    used = 0
    for i, cost in enumerate(costs):
        if i in taken:
            continue
        if cost <= room - used:
            taken.add(i)
            used += cost
    return used


def allocate(
    token_budget: int,
    budget: ContextBudget,
    *,
    current_tokens: int,
    memory_costs: Sequence[int],
    turn_costs: Sequence[int],
) -> Allocation:
    """Choose the memories and turns that fit (see the module docstring for the policy).

    Args:
        token_budget: total tokens of the prompt being assembled (> 0).
        budget: the fractions.
        current_tokens: tokens of the current user message.
        memory_costs: token cost of each candidate memory, best first.
        turn_costs: token cost of each candidate turn, newest first.

    Returns:
        An ``Allocation`` whose ``total`` never exceeds ``usable`` unless the current
        message alone does (then nothing else is chosen).
    """
    system_reserve = math.floor(token_budget * budget.system)
    usable = token_budget - system_reserve
    avail = max(0, usable - current_tokens)
    share = budget.memories + budget.turns
    mem_room = math.floor(avail * budget.memories / share) if budget.memories > 0 else 0
    turn_room = avail - mem_room if budget.turns > 0 else 0
    mems: set[int] = set()
    turns: set[int] = set()
    mem_used = _fill(memory_costs, mem_room, mems) if budget.memories > 0 else 0
    turn_used = _fill(turn_costs, turn_room, turns) if budget.turns > 0 else 0
    # Hand what one part left over to the other: turns first (conversation continuity),
    # then memories; each pass still skips what does not fit.
    if budget.turns > 0:
        turn_used += _fill(turn_costs, avail - mem_used - turn_used, turns)
    if budget.memories > 0:
        mem_used += _fill(memory_costs, avail - mem_used - turn_used, mems)
    return Allocation(
        token_budget=token_budget,
        system_reserve=system_reserve,
        usable=usable,
        current_turn_tokens=current_tokens,
        memory_indices=tuple(sorted(mems)),
        turn_indices=tuple(sorted(turns)),
        memory_tokens=mem_used,
        turn_tokens=turn_used,
    )


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """Tokens used per part of the budget."""

    memories: int
    turns: int
    current_turn: int

    @property
    def total(self) -> int:
        return self.memories + self.turns + self.current_turn


@dataclass(frozen=True, slots=True)
class RetrievedContext:
    """What ``retrieve_context`` assembled, with its accounting.

    Attributes:
        turns: recent turns chosen, oldest first (ready to replay as messages).
        memories: long-term memories chosen, best score first, as hits (with scores).
        token_budget: the budget asked for.
        system_reserve: tokens left for the caller's system prompt (not used here).
        usable_budget: ``token_budget - system_reserve``; ``tokens_used.total`` stays within it.
        tokens_used: tokens per part (the current turn is the query's count).
        skipped_turns / skipped_memories: candidates that did not fit.
        retrieval_ms: wall time of the call.
        redacted: sensitivity classes excluded from ``memories``.

    actrone-memory's field names answer too, with its meanings: ``recent_turns``,
    ``episodic_memories`` (the chosen memories themselves, ``MemoryItem``),
    ``retrieval_duration_ms``, ``total_tokens_used`` (tokens of the turns and
    memories returned) and ``budget_utilisation`` (that, over ``token_budget``).
    """

    thread_id: str
    agent_id: str | None
    turns: tuple[Turn, ...]
    memories: tuple[MemoryHit, ...]
    token_budget: int
    system_reserve: int
    usable_budget: int
    tokens_used: ContextUsage
    skipped_turns: int
    skipped_memories: int
    retrieval_ms: float
    redacted: tuple[str, ...] = ()

    @property
    def recent_turns(self) -> list[Turn]:
        """The chosen turns, oldest first (actrone-memory's name for ``turns``)."""
        return list(self.turns)

    @property
    def episodic_memories(self) -> list[MemoryItem]:
        """The chosen memories, best first, as items (actrone-memory's name; ``memories`` has the scores)."""
        return [hit.item for hit in self.memories]

    @property
    def retrieval_duration_ms(self) -> float:
        """Wall time of the call in milliseconds (actrone-memory's name for ``retrieval_ms``)."""
        return self.retrieval_ms

    @property
    def total_tokens_used(self) -> int:
        """Tokens of the turns and memories returned (the current message is not returned,
        so not counted; ``tokens_used.total`` includes it)."""
        return self.tokens_used.memories + self.tokens_used.turns

    @property
    def budget_utilisation(self) -> float:
        """``total_tokens_used / token_budget`` (0..1), as actrone-memory computes it."""
        return self.total_tokens_used / self.token_budget if self.token_budget else 0.0

    @property
    def usable_utilisation(self) -> float:
        """Share of the usable budget taken, current message included:
        ``tokens_used.total / usable_budget`` (0..1; above 1 only for an oversize query)."""
        return self.tokens_used.total / self.usable_budget if self.usable_budget else 0.0

    def render(self) -> str:
        """A plain-text block of the memories then the turns, for a simple prompt."""
        lines: list[str] = []
        if self.memories:
            lines.append("Relevant memories:")
            lines.extend(f"- {hit.item.content}" for hit in self.memories)
        if self.turns:
            if lines:
                lines.append("")
            lines.append("Recent conversation:")
            for turn in self.turns:
                lines.append(f"User: {turn.user_message}")
                lines.append(f"Assistant: {turn.assistant_message}")
        return "\n".join(lines)
