"""What ``ScopeScan.plan`` costs per recall, no I/O: this tree's against another commit's, interleaved.

The plan runs on every recall, on RediSearch too (where nothing is scanned) and for
unfiltered recalls (where nothing can be). Both versions of ``tiers/scope_scan.py`` (the
other read with ``git show <commit>:...``) plan the same recalls against one stub
runtime, alternating in blocks, and the median µs per plan of each is printed with the
ratio. Cases: RediSearch unfiltered / scoped; valkey-search unfiltered / scoped (a scope
known small) / a scope under a window whose bounds change every call.

    .venv/bin/python bench/bench_scan_plan.py --base HEAD~1
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from betterdb_memory.core.dialect import Capabilities  # noqa: E402
from betterdb_memory.core.keys import Scope  # noqa: E402
from betterdb_memory.core.query import IndexLayout, MemoryFilter  # noqa: E402
from betterdb_memory.core.requests import _NO_FILTER  # noqa: E402
from betterdb_memory.tiers import scope_scan as new  # noqa: E402

FIELDS = (
    "content", "importance", "created_at", "last_accessed_at", "expires_at", "threadId", "agentId", "namespace",
    "valid_from", "access_count",
)  # fmt: skip


def _old(commit: str) -> ModuleType:
    text = subprocess.run(
        ["git", "show", f"{commit}:betterdb_memory/tiers/scope_scan.py"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "scope_scan_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("betterdb_memory.tiers._scope_scan_old", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "betterdb_memory.tiers"
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _caps(engine: str) -> Capabilities:
    valkey = engine == "valkey-search"
    return Capabilities(
        engine=engine,  # type: ignore[arg-type]
        version=(1, 2, 1) if valkey else (2, 10, 5),
        text_fields=True, aggregate=True, filter_queries=True, sortby=True, sortby_knn_score=not valkey,
        nocontent=True, aliases=not valkey, resp3_map_replies=not valkey,
    )  # fmt: skip


def _rt(engine: str) -> Any:
    index = SimpleNamespace(
        caps=_caps(engine), name="bench:mem:idx", layout=IndexLayout(), num_docs=100_000,
        history=SimpleNamespace(name="bench:hist:idx", layout=IndexLayout()),
    )  # fmt: skip
    return SimpleNamespace(index=index, backend=SimpleNamespace(cluster=False))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="HEAD~1", help="the commit whose scope_scan.py is compared")
    ap.add_argument("--n", type=int, default=20_000, help="plans per block")
    ap.add_argument("--blocks", type=int, default=10)
    args = ap.parse_args()
    old = _old(args.base)
    vector = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    scoped = MemoryFilter(scope=Scope(thread_id="t-1"))
    cases: list[tuple[str, str, Any]] = [
        ("RediSearch, unfiltered", "redisearch", lambda i: _NO_FILTER),
        ("RediSearch, a thread", "redisearch", lambda i: scoped),
        ("valkey-search, unfiltered", "valkey-search", lambda i: _NO_FILTER),
        ("valkey-search, a thread known small", "valkey-search", lambda i: scoped),
        (
            "valkey-search, a thread, since = now - 7 days",
            "valkey-search",
            lambda i: dataclasses.replace(scoped, valid_since=1_700_000_000_000 + i),
        ),
    ]
    load = os.getloadavg()[0]
    print(f"{args.blocks} blocks of {args.n} plans each, interleaved; load {load:.1f}")
    print("| case | before µs | after µs | after / before |")
    print("|---|---|---|---|")
    for label, engine, flt_of in cases:
        planners = []
        for mod in (old, new):
            scan = mod.ScopeScan(_rt(engine))
            scan.sizes.learn_index(100_000, time.monotonic() + 1e9)
            key = new.filter_key(scoped, IndexLayout())
            scan.sizes.learn(key, 150, time.monotonic() + 1e9)
            planners.append(scan)
        times: list[list[float]] = [[], []]
        for b in range(args.blocks):
            for which in (b % 2, 1 - b % 2):
                plan = planners[which].plan
                flts = [flt_of(i) for i in range(args.n)]
                t0 = time.perf_counter()
                for flt in flts:
                    plan(vector, flt, 50, FIELDS)
                times[which].append((time.perf_counter() - t0) / args.n * 1e6)
        before, after = statistics.median(times[0]), statistics.median(times[1])
        print(f"| {label} | {before:.2f} | {after:.2f} | {after / before:.2f} |")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
