"""core.requests: a write's arguments and a recall's become one checked, frozen value before any I/O."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, get_args, get_type_hints

import numpy as np
import pytest

from betterdb_memory import MemoryInput, MemoryStore, ValidationError
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.models import SENSITIVITY_LEVELS, MemoryKind, Sensitivity
from betterdb_memory.core.record import KINDS, NewMemory
from betterdb_memory.core.requests import DEFAULT_K, RecallRequest, new_memories, new_memory, recall_request
from betterdb_memory.core.scoring import Weights


def test_new_memory_is_the_checked_frozen_record() -> None:
    """Keyword arguments become one NewMemory: defaults filled, tags a tuple, vector float32, frozen."""
    m = new_memory(
        "Ada lives in Lisbon.", dimensions=3, importance=1, tags=["a", "b"], thread_id="t", ttl=0,
        sensitivity="pii", vector=[0.1, 0.2, 0.3], id="ada-1",
    )  # fmt: skip
    assert isinstance(m, NewMemory)
    assert (m.importance, m.tags, m.scope, m.ttl, m.sensitivity, m.kind, m.id) == (
        1.0, ("a", "b"), Scope(thread_id="t"), None, "pii", "memory", "ada-1",
    )  # fmt: skip
    assert m.vector is not None and m.vector.dtype == np.float32 and m.vector.shape == (3,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.content = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"sensitivity": "secret"}, "sensitivity"),
        ({"kind": "note"}, "kind"),
        ({"source": "a,b"}, "source"),
        ({"importance": 2}, "importance"),
        ({"subject": 3}, "subject"),
    ],
)
def test_new_memory_names_the_bad_argument(options: dict[str, object], argument: str) -> None:
    with pytest.raises(ValidationError) as err:
        new_memory("text", dimensions=0, **options)  # type: ignore[arg-type]
    assert err.value.details["argument"] == argument


def test_a_vector_is_checked_against_the_dimensions_or_its_own_length() -> None:
    """Known dimensions: the length must match; unknown (0): any length of finite values."""
    assert new_memory("x", dimensions=0, vector=[1.0, 2.0]).vector is not None
    with pytest.raises(ValidationError) as err:
        new_memory("x", dimensions=3, vector=[1.0, 2.0])
    assert err.value.code == "validation.vector_dimensions"
    with pytest.raises(ValidationError):
        new_memory("x", dimensions=0, vector=5)


def test_new_memories_checks_every_item_and_names_the_bad_one() -> None:
    """Strings and MemoryInput mappings become the same record; an unknown key fails its item."""
    a, b = new_memories(["one", {"content": "two", "thread_id": "t", "kind": "fact"}], dimensions=0)
    assert a == NewMemory("one") and b == NewMemory("two", scope=Scope(thread_id="t"), kind="fact")
    with pytest.raises(ValidationError) as err:
        new_memories(["ok", {"content": "x", "thred_id": "t"}], dimensions=0)
    assert err.value.code == "validation.argument" and err.value.details["item"] == 1
    with pytest.raises(ValidationError) as err:
        new_memories("not a list", dimensions=0)
    assert err.value.details["argument"] == "items"


def test_memory_input_holds_remembers_arguments_and_what_consolidation_writes() -> None:
    """MemoryInput's keys are remember()'s parameters plus kind / date, so the two cannot drift."""
    remember = inspect.signature(MemoryStore.remember).parameters
    keys = set(MemoryInput.__annotations__)
    assert keys - {"kind", "date"} == set(remember) - {"self"}
    assert MemoryInput.__annotations__.keys() <= set(inspect.signature(new_memory).parameters)


def test_the_closed_sets_are_defined_once() -> None:
    assert SENSITIVITY_LEVELS == get_args(Sensitivity) == ("none", "low", "pii", "sensitive")
    assert get_args(MemoryKind) == KINDS


def test_recall_request_holds_the_checked_options_and_the_filter() -> None:
    req = recall_request(
        query="q", k=None, threshold=None, tags=["x"], weights={"similarity": 1, "recency": 0, "importance": 0},
        reinforce=None, thread_id="t", agent_id=None, namespace=None, exclude_sensitivity=["pii"], explain=False,
    )  # fmt: skip
    assert isinstance(req, RecallRequest)
    assert (req.k, req.threshold, req.reinforce, req.query) == (DEFAULT_K, None, True, "q")
    assert req.weights == Weights(1.0, 0.0, 0.0)
    assert req.flt.scope == Scope(thread_id="t") and req.flt.tags == ("x",)
    assert req.flt.exclude_sensitivity == ("pii",)


def test_recall_request_reports_the_first_bad_argument_in_documented_order() -> None:
    """k before threshold before the filter: the first bad one is the one named."""
    with pytest.raises(ValidationError) as err:
        recall_request(
            query=None, k=0, threshold=5.0, tags=None, weights=None, reinforce=False, thread_id="a,b",
            agent_id=None, namespace=None, exclude_sensitivity=None, explain=False,
        )  # fmt: skip
    assert err.value.details["argument"] == "k"


@pytest.mark.parametrize("method", ["recall", "recall_by_vector"])
def test_both_recalls_take_the_requests_arguments(method: str) -> None:
    """recall and recall_by_vector have the same options, and recall_request takes every one of them."""
    params = set(inspect.signature(getattr(MemoryStore, method)).parameters) - {"self", "vector"}
    assert params | {"query"} == set(inspect.signature(recall_request).parameters)
    hints = get_type_hints(getattr(MemoryStore, method))
    assert hints["exclude_sensitivity"] == (get_type_hints(recall_request)["exclude_sensitivity"])


def test_the_unfiltered_recall_shares_values_equal_to_fresh_ones() -> None:
    """The shortcut for a recall with no filter and no time builds what the long way builds."""
    from betterdb_memory.core.keys import Scope
    from betterdb_memory.core.query import MemoryFilter, with_times
    from betterdb_memory.core.time_recall import time_plan
    from betterdb_memory.core.validation import check_sensitivities, check_tags

    args: dict[str, Any] = dict(
        query=None, k=None, threshold=None, tags=None, weights=None, reinforce=None, thread_id=None,
        agent_id=None, namespace=None, exclude_sensitivity=None, explain=False,
    )  # fmt: skip
    request = recall_request(**args)
    fresh = with_times(
        MemoryFilter(scope=Scope.of(), tags=check_tags(None), exclude_sensitivity=check_sensitivities(None)),
        as_of=None,
        since=None,
        until=None,
    )
    assert request.flt == fresh and request.plan == time_plan(None)
    assert recall_request(**{**args, "query": "what now"}).plan == time_plan("what now")
    assert recall_request(**{**args, "thread_id": "t"}).flt.scope == Scope(thread_id="t")
    assert recall_request(**{**args, "since": 5}).plan == time_plan(None, timed=True)
