"""Does ``-@f:[-inf +inf]`` match documents without the field ``f``? (issue 26, ``core/validity.py``)

The time clauses fall back to ``created_at`` for documents that have no ``valid_from``
(the reference library's), written as "no valid_from" = ``-@valid_from:[-inf +inf]``.
This probe creates a throw-away index ``probe26idx`` over ``probe26:`` and prints what
each clause matches, alone and ANDed with a tag (as a scope filter is), with and without
KNN; the expected answer is printed beside it and the exit code is 1 on any mismatch.
``core.validity`` writes the fallback by De Morgan (no negation below a union): the union
form loses documents on RediSearch 2.10.5 once ANDed, depending on the documents' order
(``bench/probe_negation_in_union.py`` reproduces it; these four documents do not). Measured
2026-12-01: every case right on RediSearch 2.10.5, valkey-search 1.2.1 standalone and its
3-primary cluster.

    .venv/bin/python bench/probe_missing_field.py                 # embedded RediSearch
    PYTHON=.venv/bin/python bash scripts/with-valkey-search.sh standalone \\
        .venv/bin/python bench/probe_missing_field.py             # valkey-search 1.2
    # a 3-primary cluster (../shared/engines/valkey-search/cluster.sh start 41000):
    PROBE_CLUSTER=1 VALKEY_URL=valkey://127.0.0.1:41000 .venv/bin/python bench/probe_missing_field.py
"""

from __future__ import annotations

import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

import valkey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from betterdb_memory.core.validity import valid_at, window

PREFIX = "probe26:"
INDEX = "probe26idx"


def main() -> int:
    url = os.environ.get("VALKEY_URL")
    server: Any = None
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = EmbeddedServer().start()
        url = server.url
    # PROBE_CLUSTER=1: VALKEY_URL names one node of a cluster (documents spread over its slots;
    # valkey-search's coordinator fans the search out).
    c: Any = (valkey.ValkeyCluster if os.environ.get("PROBE_CLUSTER") else valkey.Valkey).from_url(url)
    for k in c.scan_iter(PREFIX + "*"):
        c.delete(k)
    c.execute_command(
        "FT.CREATE", INDEX, "ON", "HASH", "PREFIX", "1", PREFIX, "SCHEMA",
        "vector", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM", "2", "DISTANCE_METRIC", "COSINE",
        "created_at", "NUMERIC", "valid_from", "NUMERIC", "t", "TAG",
    )  # fmt: skip
    v = struct.pack("2f", 1.0, 0.0)
    c.hset(PREFIX + "ours_old", mapping={"vector": v, "created_at": 100, "valid_from": 50, "t": "x"})
    c.hset(PREFIX + "ours_future", mapping={"vector": v, "created_at": 100, "valid_from": 900, "t": "x"})
    c.hset(PREFIX + "ref_old", mapping={"vector": v, "created_at": 100, "t": "x"})
    c.hset(PREFIX + "ref_new", mapping={"vector": v, "created_at": 700, "t": "x"})
    time.sleep(0.3)
    cases = [
        ("-@valid_from:[-inf +inf]", ["ref_new", "ref_old"]),
        ("@t:{x} -@valid_from:[-inf +inf]", ["ref_new", "ref_old"]),
        (valid_at(200), ["ours_old", "ref_old"]),
        (f"@t:{{x}} {valid_at(200)}", ["ours_old", "ref_old"]),
        (window(60, 800), ["ref_new", "ref_old"]),
        (f"@t:{{x}} {window(60, 800)}", ["ref_new", "ref_old"]),
    ]
    wrong = 0
    try:
        for expr, want in cases:
            for knn in (False, True):
                query = f"({expr})=>[KNN 10 @vector $v]" if knn else expr
                params = ["PARAMS", "2", "v", v] if knn else []
                reply = c.execute_command("FT.SEARCH", INDEX, query, *params, "NOCONTENT", "DIALECT", "2")
                ids = sorted(x.decode().removeprefix(PREFIX) for x in reply[1:] if isinstance(x, bytes))
                ok = ids == want
                wrong += not ok
                print(f"{'ok ' if ok else 'BAD'} knn={knn!s:5} {expr} -> {ids} (want {want})")
    finally:
        c.execute_command("FT.DROPINDEX", INDEX)
        for k in c.scan_iter(PREFIX + "*"):
            c.delete(k)
        if server is not None:
            server.stop()
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
