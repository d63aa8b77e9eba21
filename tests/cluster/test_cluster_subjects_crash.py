"""A subject write's crash points on the 3-primary valkey-search cluster (issue #26).

The pointer, the versions' documents and the journal sit in different slots here, so a
round trip can be torn between nodes: tests/crash_points.py applies part of one and the
writer dies. The cases are tests/subject_crash_cases.py's (also run on a single server by
tests/integration/test_subjects_crash.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from betterdb_memory import MemoryStore
from betterdb_memory.core import subject_repair
from tests import subject_crash_cases as case
from tests.repair_order import ORDERS
from tests.subject_crash_cases import MakeStore

pytestmark = pytest.mark.integration


@pytest.fixture
def make_store(cluster_store_factory: Callable[..., MemoryStore]) -> Callable[..., MemoryStore]:
    return cluster_store_factory  # tests/cluster/conftest.py: stores on the cluster client


@pytest.fixture(autouse=True)
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subject_repair, "JOURNAL_GRACE_MS", 0)
    # The shards miss some index updates of RETIRE's RENAME, crash or not (subject_crash_cases)
    monkeypatch.setattr(case, "INDEX_AS_OF", False)


async def test_a_reply_lost_after_round_trip_1_is_repaired_by_the_next_read(make_store: MakeStore) -> None:
    await case.reply_lost_after_round_trip_1(make_store, "list")


async def test_a_past_dated_write_that_crashed_gets_its_end_dates(make_store: MakeStore) -> None:
    await case.a_past_dated_write_crashed(make_store)


async def test_the_pointers_slot_took_a_write_the_documents_slot_did_not(make_store: MakeStore) -> None:
    await case.the_pointer_took_a_write_its_document_never_got(make_store)


async def test_the_documents_slot_took_a_write_the_pointers_slot_did_not(make_store: MakeStore) -> None:
    await case.the_document_landed_and_its_pointer_never_did(make_store)


async def test_a_lost_connection_is_repaired_by_the_same_stores_next_read(make_store: MakeStore) -> None:
    await case.a_lost_connection_before_round_trip_2(make_store)


async def test_two_repairers_and_a_writer_leave_one_current(make_store: MakeStore) -> None:
    await case.repairers_and_a_writer_at_once(make_store)


async def test_a_correction_torn_across_slots_gets_its_end_dates(make_store: MakeStore) -> None:
    await case.a_correction_crashed_before_its_end_dates(make_store)


async def test_a_retraction_that_died_before_leaving_its_subject_is_finished(make_store: MakeStore) -> None:
    await case.a_retraction_died_before_leaving_its_subject(make_store)


async def test_the_read_that_finds_a_crash_answers_as_repaired(make_store: MakeStore) -> None:
    await case.the_first_read_answers_repaired(make_store, "get")  # by key: the shards index RENAME late


@pytest.mark.parametrize("how", ["get", "list", "count", "recall_by_vector", "remember"])
async def test_a_read_that_looks_at_the_journal_adds_no_round_trip_after_another(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The journal and the read's keys sit on different nodes: the look goes beside the read all the same."""
    await case.a_look_adds_no_round_trip_after_another(make_store, monkeypatch, how)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("crash", ["reply lost", "no document", "no pointer"])
async def test_a_write_beside_the_repair_of_its_subject_is_sent_once_and_ends_it_right(
    make_store: MakeStore, crash: str, order: str
) -> None:
    """The write's documents, the pointer and the journal on different nodes: any order, one current."""
    await case.a_write_beside_the_repair_of_its_subject(make_store, crash, order)
