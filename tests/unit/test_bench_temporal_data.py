"""The generated sets of bench/temporal_data (issue 26): their promises, and the parser against them.

The dated-events set computes each question's window by its own calendar arithmetic, so
parsing every question and comparing is an independent check of core/timewindow.py.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from temporal_data import dated_events, knowledge_updates

from betterdb_memory.core.timewindow import parse_time_window


@pytest.fixture(scope="module")
def updates() -> knowledge_updates.Dataset:
    return knowledge_updates.build()


@pytest.fixture(scope="module")
def events() -> dated_events.Dataset:
    return dated_events.build()


def test_knowledge_updates_is_deterministic(updates: knowledge_updates.Dataset) -> None:
    assert knowledge_updates.build() == updates
    assert knowledge_updates.build(seed=27) != updates


def test_knowledge_updates_promises(updates: knowledge_updates.Dataset) -> None:
    assert len(updates.names) >= 200
    assert len(set(updates.names)) == len(updates.names)
    assert len({n.split()[1] for n in updates.names}) == len(updates.names)  # surnames are unique
    for chain in updates.chains:
        assert 2 <= len(chain.versions) <= 5  # one to four changes
        dates = [v.valid_from for v in chain.versions]
        assert dates == sorted(dates) and len(set(dates)) == len(dates)
        assert updates.names[chain.entity] in chain.question
    for pair in updates.pairs:
        assert pair.older.valid_from < pair.newer.valid_from
    kinds = Counter(c.attribute for c in updates.chains)
    assert len(kinds) == len(knowledge_updates.EXCLUSIVE)
    assert {p.attribute for p in updates.pairs} == set(knowledge_updates.MANY)
    ids = [s.id for s in updates.statements]
    assert len(set(ids)) == len(ids)


def test_dated_events_is_deterministic(events: dated_events.Dataset) -> None:
    assert dated_events.build() == events


def test_parser_agrees_with_every_expected_window(events: dated_events.Dataset) -> None:
    wrong = []
    for q in events.questions:
        w = parse_time_window(q.text, as_of=q.as_of)
        if q.expression is None:
            if w is not None:
                wrong.append((q.text, w.describe()))
        elif (
            w is None or (w.start_ms, w.end_ms) != (q.start, q.end) or w.text.lower() != q.expression.lower()
        ):
            wrong.append((q.text, w.describe() if w else None))
    assert wrong == []
