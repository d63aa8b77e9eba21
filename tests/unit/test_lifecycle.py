"""The supervisor: one owner of background tasks, drained (then cancelled) by close."""

from __future__ import annotations

import asyncio

import pytest

from betterdb_memory.errors import StoreClosedError
from betterdb_memory.lifecycle import Supervisor


async def test_close_lets_running_work_finish_within_the_grace() -> None:
    sup = Supervisor()
    done: list[str] = []

    async def work() -> None:
        await asyncio.sleep(0.05)
        done.append("finished")

    sup.spawn(work(), name="work")
    assert len(sup) == 1
    await sup.close(grace=2.0)
    assert done == ["finished"] and len(sup) == 0


async def test_close_cancels_what_outlives_the_grace() -> None:
    sup = Supervisor()
    started = asyncio.Event()

    async def stuck() -> None:
        started.set()
        await asyncio.sleep(3600)

    task = sup.spawn(stuck(), name="stuck")
    await started.wait()
    await sup.close(grace=0.05)
    assert task.cancelled() and len(sup) == 0


async def test_a_failure_is_reported_by_name_and_never_raised() -> None:
    failed: list[str] = []
    sup = Supervisor(on_failure=failed.append)

    async def boom() -> None:
        raise RuntimeError("boom")

    task = sup.spawn(boom(), name="reinforce")
    await asyncio.wait({task})
    await asyncio.sleep(0)
    assert failed == ["reinforce"]
    await sup.close()


async def test_nothing_starts_after_close() -> None:
    sup = Supervisor()
    await sup.close()

    async def late() -> None:
        raise AssertionError("must not run")

    with pytest.raises(StoreClosedError):
        sup.spawn(late())
