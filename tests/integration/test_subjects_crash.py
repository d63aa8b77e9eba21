"""A subject write's crash points, and the next read or write that repairs each (issue #26).

The cases are in tests/subject_crash_cases.py (shared with the cluster's file); this file
runs them on the embedded engine and on valkey-search standalone
(scripts/with-valkey-search.sh). A writer dies inside or between its round trips
(tests/crash_points.py); another store on the same name stands for the next process. The
journal's grace is 0 here: a real reader leaves a fresh entry to its writer for 5 s.
"""

from __future__ import annotations

import pytest

from betterdb_memory.core import subject_repair
from tests import subject_crash_cases as case
from tests.repair_order import ORDERS
from tests.subject_crash_cases import MakeStore

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subject_repair, "JOURNAL_GRACE_MS", 0)


@pytest.mark.parametrize("how", ["list", "count", "recall", "get", "as_of"])
async def test_a_reply_lost_after_round_trip_1_is_repaired_by_the_next_read(
    make_store: MakeStore, how: str
) -> None:
    await case.reply_lost_after_round_trip_1(make_store, how)


async def test_a_past_dated_write_that_crashed_gets_its_end_dates(make_store: MakeStore) -> None:
    await case.a_past_dated_write_crashed(make_store)


async def test_a_tie_that_crashed_leaves_the_earlier_write_valid_at_no_instant(make_store: MakeStore) -> None:
    await case.a_tie_crashed(make_store)


async def test_a_write_after_a_forgotten_current_that_crashed_ends_the_past_one(
    make_store: MakeStore,
) -> None:
    await case.a_write_after_a_forgotten_current_crashed(make_store)


async def test_a_pointer_naming_a_document_never_written_gives_the_old_version_back(
    make_store: MakeStore,
) -> None:
    await case.the_pointer_took_a_write_its_document_never_got(make_store)


async def test_a_document_whose_pointer_never_took_it_is_put_again(make_store: MakeStore) -> None:
    await case.the_document_landed_and_its_pointer_never_did(make_store)


async def test_a_lost_connection_is_repaired_by_the_same_stores_next_read(make_store: MakeStore) -> None:
    await case.a_lost_connection_before_round_trip_2(make_store)


async def test_two_repairers_and_a_writer_leave_one_current_and_every_end_right(
    make_store: MakeStore,
) -> None:
    await case.repairers_and_a_writer_at_once(make_store)


async def test_a_correction_that_crashed_before_its_end_dates_gets_them(make_store: MakeStore) -> None:
    await case.a_correction_crashed_before_its_end_dates(make_store)


async def test_a_retraction_that_died_before_leaving_its_subject_is_finished(make_store: MakeStore) -> None:
    await case.a_retraction_died_before_leaving_its_subject(make_store)


@pytest.mark.parametrize("how", ["get", "list", "count", "recall_by_vector"])
async def test_the_read_that_finds_a_crash_answers_as_repaired(make_store: MakeStore, how: str) -> None:
    await case.the_first_read_answers_repaired(make_store, how)


@pytest.mark.parametrize("how", ["get", "list", "count", "recall_by_vector", "remember"])
async def test_a_read_that_looks_at_the_journal_adds_no_round_trip_after_another(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    await case.a_look_adds_no_round_trip_after_another(make_store, monkeypatch, how)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("crash", ["reply lost", "no document", "no pointer"])
async def test_a_write_beside_the_repair_of_its_subject_is_sent_once_and_ends_it_right(
    make_store: MakeStore, crash: str, order: str
) -> None:
    await case.a_write_beside_the_repair_of_its_subject(make_store, crash, order)
