"""The context budget allocator (pure): split, skip, spill, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.context import ContextBudget, ContextUsage, RetrievedContext, allocate
from betterdb_memory.core.models import MemoryHit, MemoryItem
from betterdb_memory.core.turns import Turn
from betterdb_memory.errors import ConfigurationError


def test_system_reserve_is_reported_not_consumed() -> None:
    """30% of the budget is the caller's; the rest is what memories, turns and the query share."""
    a = allocate(1000, ContextBudget(), current_tokens=0, memory_costs=[], turn_costs=[])
    assert (a.system_reserve, a.usable, a.total) == (300, 700, 0)


def test_parts_split_by_their_fractions_when_both_are_rich() -> None:
    """With plenty of both, memories and turns get 25:35 of what the query leaves."""
    a = allocate(1000, ContextBudget(), current_tokens=100, memory_costs=[10] * 100, turn_costs=[10] * 100)
    assert a.current_turn_tokens == 100
    assert a.memory_tokens == 250 and a.turn_tokens == 350
    assert a.total == a.usable == 700


def test_unused_memory_share_flows_to_turns() -> None:
    """Few memories: the turns take the rest instead of leaving it unused (the reference's 60% ceiling)."""
    a = allocate(1000, ContextBudget(), current_tokens=20, memory_costs=[30], turn_costs=[10] * 200)
    assert a.memory_tokens == 30
    assert a.total == 700


def test_unused_turn_share_flows_to_memories() -> None:
    """A short session: memories fill what the turns leave."""
    a = allocate(1000, ContextBudget(), current_tokens=0, memory_costs=[10] * 200, turn_costs=[50])
    assert a.turn_tokens == 50 and a.memory_tokens == 650


def test_oversize_turn_is_skipped_not_a_stop() -> None:
    """One 2,000-token turn does not hide the older turns behind it."""
    turns = [40, 2000, 40, 40, 40]  # newest first
    a = allocate(1000, ContextBudget(), current_tokens=0, memory_costs=[], turn_costs=turns)
    assert a.turn_indices == (0, 2, 3, 4)
    assert a.turn_tokens == 160


def test_oversize_memory_is_skipped() -> None:
    """A memory too large for the budget is passed over; lower-ranked ones still fit."""
    a = allocate(1000, ContextBudget(), current_tokens=0, memory_costs=[5000, 100, 100], turn_costs=[])
    assert a.memory_indices == (1, 2)


def test_query_larger_than_budget_leaves_nothing_else() -> None:
    """If the current message alone exceeds the usable budget, nothing is added to it."""
    a = allocate(100, ContextBudget(), current_tokens=500, memory_costs=[1], turn_costs=[1])
    assert a.memory_indices == () and a.turn_indices == ()
    assert a.total == 500


def test_zero_fraction_switches_a_part_off() -> None:
    """memories=0 means no memories, even with budget to spare."""
    budget = ContextBudget(system=0.0, memories=0.0, turns=0.9, current_turn=0.1)
    a = allocate(1000, budget, current_tokens=0, memory_costs=[10], turn_costs=[10])
    assert a.memory_indices == () and a.turn_indices == (0,)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"system": -0.1},
        {"memories": float("nan")},
        {"turns": True},
        {"system": 0.5, "memories": 0.5, "turns": 0.5},
        {"memories": 0.0, "turns": 0.0},
        {"current_turn": "0.1"},
    ],
)
def test_budget_fractions_are_validated(kwargs: dict[str, object]) -> None:
    """Negative, NaN, bool, non-numeric, over-1 sums and no retrievable part are configuration errors."""
    with pytest.raises(ConfigurationError):
        ContextBudget(**kwargs)  # type: ignore[arg-type]


costs = st.lists(st.integers(min_value=1, max_value=400), max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    budget=st.integers(min_value=1, max_value=20_000),
    current=st.integers(min_value=0, max_value=500),
    mems=costs,
    turns=costs,
)
def test_never_exceeds_usable_budget(budget: int, current: int, mems: list[int], turns: list[int]) -> None:
    """Whatever the inputs, the chosen items plus the query fit the usable budget (unless the query alone does not)."""
    a = allocate(budget, ContextBudget(), current_tokens=current, memory_costs=mems, turn_costs=turns)
    assert a.memory_tokens == sum(mems[i] for i in a.memory_indices)
    assert a.turn_tokens == sum(turns[i] for i in a.turn_indices)
    if current <= a.usable:
        assert a.total <= a.usable
    else:
        assert a.memory_tokens == a.turn_tokens == 0


@settings(max_examples=300, deadline=None)
@given(
    budget=st.integers(min_value=2_000, max_value=20_000),
    mems=st.lists(st.integers(min_value=1, max_value=60), max_size=200),
    turns=st.lists(st.integers(min_value=1, max_value=60), max_size=200),
)
def test_rich_material_fills_at_least_90_percent(budget: int, mems: list[int], turns: list[int]) -> None:
    """When there is more material than room and items are small, >= 90% of the usable budget is used."""
    a = allocate(budget, ContextBudget(), current_tokens=10, memory_costs=mems, turn_costs=turns)
    if 10 + sum(mems) + sum(turns) >= a.usable:
        assert a.total >= 0.9 * a.usable
    else:
        assert a.total == 10 + sum(mems) + sum(turns)  # everything fits: everything is taken


# -- RetrievedContext answers to actrone-memory's field names ----------------------------


def _context(*, token_budget: int, memories: int, turns: int, current: int) -> RetrievedContext:
    item = MemoryItem(
        id="m1", content="likes tea", importance=0.5, created_at=1.0, last_accessed_at=1.0, access_count=0
    )
    hit = MemoryHit(item=item, score=0.9, similarity=0.8, distance=0.4)
    turn = Turn(id="t1", thread_id="s", user_message="hi", assistant_message="hello", seq=1)
    reserve = int(token_budget * 0.3)
    return RetrievedContext(
        thread_id="s",
        agent_id=None,
        turns=(turn,),
        memories=(hit,),
        token_budget=token_budget,
        system_reserve=reserve,
        usable_budget=token_budget - reserve,
        tokens_used=ContextUsage(memories=memories, turns=turns, current_turn=current),
        skipped_turns=0,
        skipped_memories=0,
        retrieval_ms=12.5,
    )


def test_retrieved_context_answers_to_actrone_names() -> None:
    ctx = _context(token_budget=1000, memories=200, turns=300, current=50)
    assert ctx.recent_turns == list(ctx.turns) and isinstance(ctx.recent_turns, list)
    assert ctx.episodic_memories == [ctx.memories[0].item]
    assert ctx.episodic_memories[0].content == "likes tea"
    assert ctx.retrieval_duration_ms == 12.5


def test_budget_utilisation_is_relative_to_token_budget_as_in_actrone() -> None:
    """actrone-memory: (tokens of the returned turns + memories) / token_budget."""
    ctx = _context(token_budget=1000, memories=200, turns=300, current=50)
    assert ctx.total_tokens_used == 500
    assert ctx.budget_utilisation == 0.5
    # This library's fill ratio stays available: everything sent, over the usable part.
    assert ctx.usable_utilisation == 550 / 700
    assert _context(token_budget=0, memories=0, turns=0, current=0).budget_utilisation == 0.0
