"""The cost of ``wait_replicas=1``: ``remember`` with and without ``WAIT`` on a cluster with replicas.

Starts the optional valkey-search test engine (``../shared/engines/valkey-search``, or
``VALKEY_SEARCH_ENGINE``) as a cluster of 3 primaries with one replica each (six nodes on
free ports of 127.0.0.1, nothing persisted, the options ``cluster.sh`` gives a node), the
way ``tests/cluster/replicas.py`` does. Two stores on it, same data (seeded 384-d unit
vectors passed as ``vector=``, so no model runs): one with ``wait_replicas=0`` (Valkey's
asynchronous replication), one with ``wait_replicas=1``. Their calls alternate round by
round (``_harness.interleave``, the order flipping every round). Rows: ``remember`` one
at a time, and ``remember_many`` of 50 (one ``WAIT`` per primary the batch touched).
The cluster is always stopped.

    .venv/bin/python bench/bench_wait.py                  # ~1 min on 2 cores
    .venv/bin/python bench/bench_wait.py --quick          # smoke run
    .venv/bin/python bench/bench_wait.py --out /tmp/w.md  # also write the table there

Without the engine it prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import valkey.asyncio as avalkey
from _harness import Row, cpu_count, cpu_model, interleave, render_rows
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore

DIM = 384
BUS, COORDINATOR = 10000, 20294
_START = """
. "$1/common.sh"; shift
base=$1; rundir=$2; shift 2
ports=$(seq "$base" $((base + 5)))
for p in $ports; do
  start_node "$p" "$rundir/$p" --use-coordinator --save "" --appendonly no --cluster-enabled yes \\
    --cluster-config-file nodes.conf --cluster-node-timeout 5000 || exit 1
done
cli "$base" --cluster create $(for p in $ports; do echo "127.0.0.1:$p"; done) --cluster-replicas 1 \\
  --cluster-yes >/dev/null
"""
_STOP = '. "$1/common.sh"; shift; rundir=$1; shift; for p in "$@"; do stop_node "$p" "$rundir/$p"; done'


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _base() -> int:
    for base in range(31000 + os.getpid() % 900 * 10, 45230, 10):
        if all(_free(base + i + off) for i in range(6) for off in (0, BUS, COORDINATOR)):
            return base
    raise RuntimeError("no free port range for six nodes")


def _vectors(n: int, seed: int) -> list[list[float]]:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return [[float(x) for x in row] for row in v]


async def _replicas_linked(base: int, limit_s: float = 60) -> None:
    """Until three nodes are replicas with their link to the primary up."""
    deadline = time.monotonic() + limit_s
    while True:
        links = []
        for port in range(base, base + 6):
            node = avalkey.Valkey(host="127.0.0.1", port=port, decode_responses=True)
            try:
                info = await node.info("replication")
            finally:
                await node.aclose()
            if info.get("role") == "slave":
                links.append(info.get("master_link_status"))
        if len(links) == 3 and all(x == "up" for x in links):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"replicas not linked after {limit_s:g} s: {links}")
        await asyncio.sleep(0.2)


async def _waits(base: int) -> int:
    """WAIT commands the nodes ran (``INFO commandstats``): proof the waited side sent them."""
    total = 0
    for port in range(base, base + 6):
        node = avalkey.Valkey(host="127.0.0.1", port=port, decode_responses=True)
        try:
            stats = await node.info("commandstats")
        finally:
            await node.aclose()
        total += int(stats.get("cmdstat_wait", {}).get("calls", 0))
    return total


async def _measure(base: int, rounds: int, per_round: int, batch: int) -> list[Row]:
    client = ValkeyCluster(host="127.0.0.1", port=base, decode_responses=False)
    common = {"client": client, "embedder": HashingEmbedder(), "discovery": False, "summarize_batch": 0}
    plain = MemoryStore(name="wait0", **common)  # type: ignore[arg-type]
    waited = MemoryStore(name="wait1", wait_replicas=1, wait_timeout=5.0, **common)  # type: ignore[arg-type]
    vectors = _vectors(rounds * per_round * 2 + rounds * batch * 2, seed=30)
    it = iter(vectors)
    try:
        await client.initialize()
        for store in (plain, waited):
            await store.ensure_index()

        def one(store: MemoryStore):  # type: ignore[no-untyped-def]
            async def op(i: int) -> list[float]:
                out = []
                for j in range(per_round):
                    t0 = time.perf_counter()
                    await store.remember(f"round {i} item {j}", vector=next(it), thread_id=f"t{j % 10}")
                    out.append(time.perf_counter() - t0)
                return out

            return op

        def many(store: MemoryStore):  # type: ignore[no-untyped-def]
            async def op(i: int) -> None:
                items = [{"content": f"batch {i} {j}", "vector": next(it)} for j in range(batch)]
                await store.remember_many(items)

            return op

        single = await interleave(one(waited), one(plain), rounds=rounds, budget_s=600)
        batched = await interleave(many(waited), many(plain), rounds=rounds, budget_s=600, ops_per_call=batch)
        return [
            Row("remember (one at a time)", single),
            Row(f"remember_many ({batch} per call; latency per call)", batched),
        ]
    finally:
        for store in (plain, waited):
            await store.close()
        await client.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    engine = Path(os.environ.get("VALKEY_SEARCH_ENGINE", "../shared/engines/valkey-search"))
    if not (engine / "start.sh").is_file():
        print(f"valkey-search test engine not found at {engine}: nothing to measure")
        return 0
    engine = engine.resolve()
    rounds, per_round, batch = (4, 20, 20) if args.quick else (20, 50, 50)
    rundir, base = tempfile.mkdtemp(prefix="betterdb-bench-wait-"), _base()
    ports = [str(base + i) for i in range(6)]
    try:
        subprocess.run(
            ["bash", "-c", _START, "bench", str(engine), str(base), rundir], check=True, timeout=120
        )
        asyncio.run(_replicas_linked(base))
        rows = asyncio.run(_measure(base, rounds, per_round, batch))
        waits = asyncio.run(_waits(base))
    finally:
        subprocess.run(["bash", "-c", _STOP, "bench", str(engine), rundir, *ports], timeout=120, check=False)
        shutil.rmtree(rundir, ignore_errors=True)
    table = render_rows(rows, ours="wait_replicas=1", raw="wait_replicas=0")
    header = (
        "# The cost of wait_replicas=1 (bench/bench_wait.py)\n\n"
        f"{dt.date.today()}, {cpu_model()} ({cpu_count()} cores), Python {platform.python_version()}, "
        f"valkey-search test engine, 3 primaries + 3 replicas on 127.0.0.1; {rounds} rounds of "
        f"{per_round} remember calls and of one remember_many({batch}) per side, interleaved. "
        f"WAIT commands the primaries ran: {waits}.\n\n"
    )
    text = header + table + "\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
