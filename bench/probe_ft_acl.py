"""How does the engine apply ACL key permissions to FT.* commands? (issue 30, tenants)

Two stores' worth of documents and indexes (``probeacl_a``, ``probeacl_b``, created as
the default user), then a user whose key patterns cover only ``probeacl_a:*`` and who
may run every command (``+@all``: the probe asks what the *key* check does, not the
command list). That user tries each FT.* command on B's index and the two ways round the
key check: an index of its own name over B's prefix (then searched), and an index of
B's name over its own prefix. Each line prints the command, what happened, and the
expected answer for this engine; exit code 1 on any mismatch.

Measured 2026-12-01 (both on Valkey 9.1.2):

* RediSearch 2.10.5: the *index name* is checked against the key patterns, for
  FT.SEARCH, FT.INFO, FT.AGGREGATE, FT.TAGVALS, FT.EXPLAIN, FT.PROFILE, FT.ALTER,
  FT.DROPINDEX and FT.CREATE ("No permissions to access a key"); the index's key
  prefixes are not: FT.CREATE ``probeacl_a:evil`` over ``probeacl_b:`` succeeds and its
  FT.SEARCH returns B's documents. FT._LIST lists every index.
* valkey-search 1.2.1: the index's *key prefixes* are checked, for FT.SEARCH, FT.INFO,
  FT.AGGREGATE, FT.DROPINDEX and FT.CREATE ("The user does not have permission to
  access the key prefix", a plain error, not NOPERM); the name is not: FT.CREATE
  ``probeacl_b:idx2`` over ``probeacl_a:`` succeeds (and FT.DROPINDEX of it).
  FT._LIST lists every index. FT.TAGVALS / EXPLAIN / PROFILE / ALTER do not exist.

So a tenant's user must not have FT.CREATE (RediSearch: reads any prefix; valkey-search:
takes names), nor FT._LIST (names of every index): ``acl_rules(name, create_index=False)``.

    .venv/bin/python bench/probe_ft_acl.py                 # embedded RediSearch
    PYTHON=.venv/bin/python bash scripts/with-valkey-search.sh standalone \\
        .venv/bin/python bench/probe_ft_acl.py             # valkey-search 1.2
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import valkey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from betterdb_memory.core.dialect import parse_module_list

A, B = "probeacl_a", "probeacl_b"
USER, PASSWORD = "probeacl_user", "probeacl-pw"
VECTOR = struct.pack("<4f", 1.0, 0.0, 0.0, 0.0)
QUERY = ["*=>[KNN 2 @v $q]", "PARAMS", "2", "q", VECTOR, "DIALECT", "2"]

# (label, command, {engine: expected}); "refused" = a permission error, "ok" = answered,
# "absent" = no such command on the engine, "leak" = answered with B's document.
PROBES: list[tuple[str, list[Any], dict[str, str]]] = [
    ("own index: FT.SEARCH", ["FT.SEARCH", f"{A}:idx", *QUERY], {"redisearch": "ok", "valkey-search": "ok"}),
    (
        "B's index: FT.SEARCH",
        ["FT.SEARCH", f"{B}:idx", *QUERY],
        {"redisearch": "refused", "valkey-search": "refused"},
    ),
    ("B's index: FT.INFO", ["FT.INFO", f"{B}:idx"], {"redisearch": "refused", "valkey-search": "refused"}),
    (
        "B's index: FT.AGGREGATE",
        ["FT.AGGREGATE", f"{B}:idx", "@tag:{x}", "LOAD", "1", "@content"],
        {"redisearch": "refused", "valkey-search": "refused"},
    ),
    (
        "B's index: FT.TAGVALS",
        ["FT.TAGVALS", f"{B}:idx", "tag"],
        {"redisearch": "refused", "valkey-search": "absent"},
    ),
    (
        "B's index: FT.EXPLAIN",
        ["FT.EXPLAIN", f"{B}:idx", "*"],
        {"redisearch": "refused", "valkey-search": "absent"},
    ),
    (
        "B's index: FT.PROFILE",
        ["FT.PROFILE", f"{B}:idx", "SEARCH", "QUERY", "*"],
        {"redisearch": "refused", "valkey-search": "absent"},
    ),
    (
        "B's index: FT.ALTER",
        ["FT.ALTER", f"{B}:idx", "SCHEMA", "ADD", "f2", "TAG"],
        {"redisearch": "refused", "valkey-search": "absent"},
    ),
    ("every index: FT._LIST", ["FT._LIST"], {"redisearch": "ok", "valkey-search": "ok"}),
    (
        "own name over B's prefix: FT.CREATE",
        [
            "FT.CREATE",
            f"{A}:evil",
            "ON",
            "HASH",
            "PREFIX",
            "1",
            f"{B}:",
            "SCHEMA",
            "content",
            "TEXT",
            "tag",
            "TAG",
            "v",
            "VECTOR",
            "FLAT",
            "6",
            "TYPE",
            "FLOAT32",
            "DIM",
            "4",
            "DISTANCE_METRIC",
            "COSINE",
        ],
        {"redisearch": "ok", "valkey-search": "refused"},
    ),
    (
        "... and FT.SEARCH it",
        ["FT.SEARCH", f"{A}:evil", *QUERY],
        {"redisearch": "leak", "valkey-search": "absent"},
    ),
    (
        "B's name over own prefix: FT.CREATE",
        [
            "FT.CREATE",
            f"{B}:idx2",
            "ON",
            "HASH",
            "PREFIX",
            "1",
            f"{A}:",
            "SCHEMA",
            "tag",
            "TAG",
            "v",
            "VECTOR",
            "FLAT",
            "6",
            "TYPE",
            "FLOAT32",
            "DIM",
            "4",
            "DISTANCE_METRIC",
            "COSINE",
        ],
        {"redisearch": "refused", "valkey-search": "ok"},
    ),
    (
        "B's index: FT.DROPINDEX",
        ["FT.DROPINDEX", f"{B}:idx"],
        {"redisearch": "refused", "valkey-search": "refused"},
    ),
]


def _user_url(url: str) -> str:
    parts = urlparse(url)
    return urlunparse(parts._replace(netloc=f"{USER}:{PASSWORD}@{parts.hostname}:{parts.port}"))


def _outcome(c: Any, command: list[Any]) -> tuple[str, str]:
    try:
        reply = c.execute_command(*command)
    except valkey.exceptions.NoPermissionError as exc:
        return "refused", str(exc)
    except valkey.exceptions.ResponseError as exc:
        text = str(exc)
        if "permission" in text.lower():
            return "refused", text
        if (
            "unknown command" in text.lower()
            or "not found" in text.lower()
            or "no such index" in text.lower()
        ):
            return "absent", text
        return "error", text
    shown = repr(reply)
    return ("leak" if b"secret of b" in shown.encode() or "secret of b" in shown else "ok"), shown[:100]


def _cleanup(admin: Any) -> None:
    for index in (f"{A}:idx", f"{B}:idx", f"{A}:evil", f"{B}:idx2"):
        with contextlib.suppress(valkey.exceptions.ResponseError):
            admin.execute_command("FT.DROPINDEX", index)
    admin.delete(f"{A}:1", f"{B}:1")
    admin.execute_command("ACL", "DELUSER", USER)


def main() -> int:
    url = os.environ.get("VALKEY_URL")
    server: Any = None
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = EmbeddedServer(Path(tempfile.mkdtemp(prefix="probe-acl-"))).start()
        url = server.url
    admin: Any = valkey.Valkey.from_url(url)
    failures = 0
    try:
        engine = (parse_module_list(admin.execute_command("MODULE", "LIST")) or ["unknown"])[0]
        print(f"engine: {engine} ({url})")
        _cleanup(admin)
        for name in (A, B):
            admin.execute_command(
                "FT.CREATE", f"{name}:idx", "ON", "HASH", "PREFIX", "1", f"{name}:", "SCHEMA",
                "content", "TEXT", "tag", "TAG",
                "v", "VECTOR", "FLAT", "6", "TYPE", "FLOAT32", "DIM", "4", "DISTANCE_METRIC", "COSINE",
            )  # fmt: skip
            admin.hset(f"{name}:1", mapping={"content": f"secret of {name[-1]}", "tag": "x", "v": VECTOR})
        admin.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{PASSWORD}", f"~{A}:*", "+@all")
        time.sleep(0.5)  # both indexes have indexed their document
        user: Any = valkey.Valkey.from_url(_user_url(url))
        for label, command, expected in PROBES:
            got, text = _outcome(user, command)
            want = expected.get(engine, "?")
            ok = got == want
            failures += not ok
            print(f"{'ok ' if ok else 'BAD'} {label:38} {got:8} (expected {want:8}) {text[:90]}")
        user.close()
    finally:
        _cleanup(admin)
        admin.close()
        if server is not None:
            server.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
