"""The soak (``make soak``, not in CI): the chaos workload round after round, audited every round.

Runs only with ``BETTERDB_SOAK_SECONDS`` set (``make soak`` sets it from
``SOAK_MINUTES``, default 30). Each round is ``chaos_workload.run_round`` (random wire
faults, heal, recovery, audit; the goals asserted every round), then the round's
memories and turns are forgotten, so what stays should not grow. After each round
it samples this process's resident memory, the server's connected clients, the
event loop's tasks and the store's keys on the server, prints the curves (at most
``ROWS`` rows), and asserts that none grew past a bound over its level after the
warm-up rounds.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import valkey.asyncio as avalkey

from .chaos_workload import THREAD, Stores, check, describe, run_round
from .conftest import FaultProxy, scan_keys

SECONDS = float(os.environ.get("BETTERDB_SOAK_SECONDS", "0"))
ROWS = 40
WARMUP = 3

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reliability,
    pytest.mark.slow,
    pytest.mark.skipif(not SECONDS, reason="the soak runs with BETTERDB_SOAK_SECONDS (make soak)"),
]


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _tasks() -> int:
    """The event loop's tasks but the proxy's own (a silent fault holds its connection a while)."""
    return sum(
        1 for t in asyncio.all_tasks() if "FaultProxy" not in getattr(t.get_coro(), "__qualname__", "")
    )


async def test_soak(fault_proxy: FaultProxy, unique_name: str, text_client: avalkey.Valkey) -> None:
    """Round after round of faults: every audit clean, memory, connections, tasks and keys bounded."""
    stores = await Stores.open(fault_proxy.url, unique_name)
    samples: list[tuple[int, float, float, int, int, int]] = []
    totals = {"operations": 0, "faults injected": 0, "acknowledged writes": 0, "writes raised": 0}
    started = time.monotonic()
    k = 0
    try:
        while time.monotonic() - started < SECONDS:
            k += 1
            report, ledger, audit = await run_round(fault_proxy, stores, text_client, seed=k, run=f"r{k}-")
            check(report, ledger, audit)
            for key in totals:
                totals[key] += int(report[key])
            # the round's memories and turns go; what remains must not grow
            for ns in ("n1", "n2"):
                await stores.store.forget_by_scope(namespace=ns)
            await stores.store.clear_session(THREAD)
            await asyncio.sleep(0)
            clients = int((await text_client.info("clients"))["connected_clients"])
            keys = len(await scan_keys(text_client, f"{unique_name}*"))
            samples.append((k, time.monotonic() - started, _rss_mb(), clients, _tasks(), keys))
            if k % 10 == 0:
                print(f"soak round {k}: {describe(report)}", flush=True)
    finally:
        await stores.close()
    step = max(1, len(samples) // ROWS)
    print(f"\nsoak: {k} rounds in {time.monotonic() - started:.0f} s; totals {totals}")
    print(f"{'round':>6} {'s':>7} {'rss MB':>8} {'clients':>8} {'tasks':>6} {'keys':>6}")
    for row in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        print(f"{row[0]:>6} {row[1]:>7.0f} {row[2]:>8.1f} {row[3]:>8} {row[4]:>6} {row[5]:>6}")
    if len(samples) > WARMUP:
        # bounds over the warm-up rounds' highest values: faults make every curve noisy,
        # a leak over a soak's hundreds of rounds leaves them far behind
        warm, late = samples[:WARMUP], samples[WARMUP:]

        def peak(rows: list[tuple[int, float, float, int, int, int]], col: int) -> float:
            return max(r[col] for r in rows)

        assert peak(late, 2) <= peak(warm, 2) * 1.5 + 64, "resident memory keeps growing"
        assert peak(late, 3) <= peak(warm, 3) + 24, "server connections keep growing"
        assert peak(late, 4) <= peak(warm, 4) + 24, "tasks keep growing"
        assert peak(late, 5) <= peak(warm, 5) + 64, "the store's keys keep growing"
