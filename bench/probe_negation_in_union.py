"""Does a negation inside a union survive an AND? (issue 27, ``core/filter_query.py``; issue 26's clauses)

Three documents: ``a`` {created_at 2000, valid_from 1000}, ``b`` {created_at 2000, no
valid_from: a memory the reference library wrote}, ``c`` {created_at 1000, valid_from
2000}. "valid_from in [2000, 3000), or no valid_from and created_at in it" is ``b`` and
``c``. Written as a union with a negation inside, RediSearch 2.10.5 answers ``b, c``
alone but only ``c`` once the union is ANDed with anything (a scope filter, even the
match-all range); the De Morgan form (no negation below the union) answers ``b, c``
everywhere. valkey-search 1.2.1 answers ``b, c`` to all four. Measured 2026-12-01.

    .venv/bin/python bench/probe_negation_in_union.py            # embedded RediSearch
    PYTHON=.venv/bin/python bash scripts/with-valkey-search.sh standalone \\
        .venv/bin/python bench/probe_negation_in_union.py        # valkey-search 1.2
"""

from __future__ import annotations

import os
import sys
from typing import Any

import valkey

PREFIX = "probe27neg:"
INDEX = "probe27negidx"
RANGE = "[2000 (3000]"
UNION = f"(@valid_from:{RANGE}|(@created_at:{RANGE} -@valid_from:[-inf +inf]))"
DE_MORGAN = f"-(-@valid_from:{RANGE} -(@created_at:{RANGE} -@valid_from:[-inf +inf]))"
QUERIES = {
    "union alone": UNION,
    "union AND scope": f"(@threadId:{{t}} {UNION})",
    "de morgan alone": DE_MORGAN,
    "de morgan AND scope": f"(@threadId:{{t}} {DE_MORGAN})",
}


def main() -> int:
    url = os.environ.get("VALKEY_URL")
    server: Any = None
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = EmbeddedServer().start()
        url = server.url
    c: Any = valkey.Valkey.from_url(url, decode_responses=True)
    try:
        c.execute_command(
            "FT.CREATE", INDEX, "ON", "HASH", "PREFIX", "1", PREFIX, "SCHEMA",
            "created_at", "NUMERIC", "valid_from", "NUMERIC", "threadId", "TAG", "CASESENSITIVE",
        )  # fmt: skip
        c.hset(PREFIX + "a", mapping={"created_at": 2000, "valid_from": 1000, "threadId": "t"})
        c.hset(PREFIX + "b", mapping={"created_at": 2000, "threadId": "t"})
        c.hset(PREFIX + "c", mapping={"created_at": 1000, "valid_from": 2000, "threadId": "t"})
        wrong = 0
        for name, query in QUERIES.items():
            reply = c.execute_command("FT.SEARCH", INDEX, query, "NOCONTENT", "DIALECT", "2")
            got = sorted(k[len(PREFIX) :] for k in reply[1:])
            wrong += got != ["b", "c"]
            print(f"{name:22} {got}   {query}")
        return 1 if wrong else 0
    finally:
        c.execute_command("FT.DROPINDEX", INDEX)
        c.delete(*(PREFIX + k for k in "abc"))
        c.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
