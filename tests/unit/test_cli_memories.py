"""What a recalled line of the CLI adds after its content (``_cli_memories._note``); no server."""

from __future__ import annotations

import dataclasses

from betterdb_memory._cli_memories import _note
from betterdb_memory.core.models import MemoryHit, MemoryItem
from betterdb_memory.core.scoring import ScoreParts, Weights


def _hit(*, valid_until: int | None = None, superseded_by: str | None = None) -> MemoryHit:
    item = MemoryItem(
        id="m1",
        content="Ada lives in Lisbon",
        importance=0.5,
        created_at=1,
        last_accessed_at=1,
        access_count=0,
    )
    item = dataclasses.replace(item, valid_until=valid_until)
    parts = ScoreParts(0.8, 0.1, 0.5, Weights(), 0.6, superseded_by=superseded_by)
    return MemoryHit(item=item, score=0.6, similarity=0.8, distance=0.4, explain=parts)


def test_a_current_hit_adds_nothing() -> None:
    assert _note(_hit()) == ""


def test_a_past_version_says_until_when() -> None:
    assert _note(_hit(valid_until=1714521600000)) == "  (until 2024-05-01T00:00:00.000Z)"


def test_a_hit_ranked_below_a_newer_statement_names_it() -> None:
    assert _note(_hit(superseded_by="m2")) == "  (superseded by m2)"
