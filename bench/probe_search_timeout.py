"""What does an FT.SEARCH that runs out of time answer? (valkey-search's partial results)

valkey-search 1.2.1 ships ``search.enable-partial-results yes``. This probe fills a
throw-away index (``probeto:``, 384-d HNSW COSINE vectors, a TAG, a TEXT field) and sends
three kinds of query with a tiny ``TIMEOUT`` (an expensive KNN, a full-text query matching
every document, a TAG query returning many): with no shard option, with ``ALLSHARDS`` and
with ``SOMESHARDS``, under ``search.enable-partial-results`` yes and no. Each row prints
what came back (an error's text, or the reply's total and hits against the same query
with no time limit), so a silent partial answer shows as a short reply with no error.

    PYTHON=.venv/bin/python bash scripts/with-valkey-search.sh standalone \\
        .venv/bin/python bench/probe_search_timeout.py
    PROBE_CLUSTER=1 VALKEY_URL=valkey://127.0.0.1:41000 .venv/bin/python bench/probe_search_timeout.py
    .venv/bin/python bench/probe_search_timeout.py        # the embedded RediSearch, for contrast

PROBE_N sets the number of documents (20,000).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import numpy as np
import valkey

PREFIX, INDEX, DIM = "probeto:", "probetoidx", 384
WORDS = ["note", "meeting", "project", "alpha", "budget", "review", "plan", "team"]


def fill(c: Any, n: int, cluster: bool) -> None:
    route = {"target_nodes": valkey.ValkeyCluster.DEFAULT_NODE} if cluster else {}
    try:
        info = c.execute_command("FT.INFO", INDEX, **route)
        fields = dict(zip(info[::2], info[1::2], strict=False))
        if int(fields.get(b"num_docs", 0) or 0) >= n:
            return
    except valkey.ResponseError:
        pass
    with contextlib.suppress(valkey.ResponseError):
        c.execute_command("FT.DROPINDEX", INDEX, **route)
    c.execute_command(
        "FT.CREATE", INDEX, "ON", "HASH", "PREFIX", "1", PREFIX, "SCHEMA",
        "v", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM", str(DIM), "DISTANCE_METRIC", "COSINE",
        "t", "TAG", "content", "TEXT", "n", "NUMERIC",
        **route,
    )  # fmt: skip
    rng = np.random.default_rng(7)
    for start in range(0, n, 1000):
        pipe = c.pipeline(transaction=False)
        for i in range(start, min(n, start + 1000)):
            v = rng.standard_normal(DIM).astype(np.float32)
            words = " ".join(WORDS[j % len(WORDS)] for j in range(i % 5, i % 5 + 4))
            pipe.hset(f"{PREFIX}{i}", mapping={"v": v.tobytes(), "t": f"t{i % 4}", "content": words, "n": i})
        pipe.execute()


def send(c: Any, args: list[Any], cluster: bool) -> tuple[str, int | None, int | None]:
    route = {"target_nodes": valkey.ValkeyCluster.DEFAULT_NODE} if cluster else {}
    try:
        reply = c.execute_command(*args, **route)
    except valkey.ResponseError as exc:
        return f"error: {exc}", None, None
    if isinstance(reply, dict):  # RediSearch RESP3 (not used here)
        return "map", None, None
    return "reply", int(reply[0]), len(reply) - 1  # NOCONTENT: one key per hit


def main() -> int:
    url = os.environ.get("VALKEY_URL")
    server: Any = None
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = EmbeddedServer().start()
        url = server.url
    cluster = bool(os.environ.get("PROBE_CLUSTER"))
    c: Any = (valkey.ValkeyCluster if cluster else valkey.Valkey).from_url(url)
    n = int(os.environ.get("PROBE_N", "20000"))
    fill(c, n, cluster)
    vec = np.random.default_rng(1).standard_normal(DIM).astype(np.float32).tobytes()
    queries: dict[str, list[Any]] = {
        "KNN 5000": ["*=>[KNN 5000 @v $vec AS s]", "PARAMS", "2", "vec", vec, "NOCONTENT", "LIMIT", "0", "5000"],
        "KNN 50 on a tag": ["(@t:{t1})=>[KNN 50 @v $vec AS s]", "PARAMS", "2", "vec", vec, "NOCONTENT", "LIMIT", "0", "50"],
        "text": ["@content:note", "NOCONTENT", "LIMIT", "0", "50"],
        "tag": ["@t:{t1|t2|t3}", "NOCONTENT", "LIMIT", "0", "10000"],
    }  # fmt: skip
    modules = str(c.execute_command("MODULE", "LIST"))
    valkey_search = "search" in modules and "66049" in modules
    settings = ["yes", "no"] if valkey_search else ["(RediSearch)"]
    shard_opts = ["", "ALLSHARDS", "SOMESHARDS"] if valkey_search else [""]
    print(
        f"engine: {'valkey-search 1.2.1' if valkey_search else 'RediSearch'}; cluster={cluster}; {n:,} documents"
    )
    print(
        "| enable-partial-results | query | shard option | TIMEOUT | answer | total | hits | full total / hits |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for setting in settings:
        if valkey_search:
            nodes = c.get_primaries() if cluster else [None]
            for node in nodes:
                conn = c.get_valkey_connection(node) if cluster else c
                conn.execute_command("CONFIG", "SET", "search.enable-partial-results", setting)
        for name, body in queries.items():
            full = send(
                c,
                [
                    "FT.SEARCH",
                    INDEX,
                    body[0],
                    *body[1:],
                    "TIMEOUT",
                    "0" if not valkey_search else "60000",
                    "DIALECT",
                    "2",
                ],
                cluster,
            )
            for opt in shard_opts:
                for timeout in ("1",):
                    for _ in range(3):
                        args = [
                            "FT.SEARCH",
                            INDEX,
                            body[0],
                            *([opt] if opt else []),
                            *body[1:],
                            "TIMEOUT",
                            timeout,
                            "DIALECT",
                            "2",
                        ]
                        kind, total, hits = send(c, args, cluster)
                        print(
                            f"| {setting} | {name} | {opt or '-'} | {timeout} | {kind[:70]} | {total} | {hits} | {full[1]} / {full[2]} |"
                        )
    if valkey_search:
        for node in c.get_primaries() if cluster else [None]:
            conn = c.get_valkey_connection(node) if cluster else c
            conn.execute_command("CONFIG", "SET", "search.enable-partial-results", "yes")
    if server is not None:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
