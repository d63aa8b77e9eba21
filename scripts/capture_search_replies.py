"""Capture real replies of a search engine for ``tests/fixtures/search_replies.json``.

Usage: python scripts/capture_search_replies.py URL CAPTURE_NAME [--protocol 2|3] [--cluster | --filters] [--write]

Speaks RESP over a raw socket (no client library in between), so simple strings,
bulk strings, RESP3 maps, doubles and verbatim strings keep the distinctions the
fixture encoding records (tests/fixtures/README.md). Runs the memory-schema sequence
below on the server at URL (it creates and drops ``cap:mem:idx`` / ``nc:mem:idx`` and
their ``cap:mem:*`` / ``nc:mem:*`` documents, nothing else) and prints the capture as
JSON, or with ``--write`` merges it into the fixture file as
``captures[CAPTURE_NAME]["replies"]`` (other replies of that capture are kept).
With ``--cluster`` URL is one node of a valkey-search cluster with the coordinator:
the documents are written through a cluster client (spread over the shards) and the
captured replies are the cluster forms (``mem_cluster_*``: FT.INFO LOCAL / PRIMARY /
CLUSTER, a fanned-out count and hybrid KNN query).
With ``--filters`` it runs the filter sequence instead (``flt_*``: this library's schema
with declared metadata fields, filter-only, hybrid KNN and history ``as_of`` queries as
``core/filter_query`` and ``core/validity`` write them; ``cap:flt:*`` / ``cap:flth:*`` only).
Maintenance tool: the test suite never runs it.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "search_replies.json"
DIM = 8

# The schema of the issue (the reference library's field names); CASESENSITIVE dropped for nc:mem:idx.
SCHEMA_TEXT = (
    "vector VECTOR HNSW 6 TYPE FLOAT32 DIM 8 DISTANCE_METRIC COSINE "
    "threadId TAG CASESENSITIVE agentId TAG CASESENSITIVE namespace TAG CASESENSITIVE "
    "tags TAG SEPARATOR , CASESENSITIVE source TAG CASESENSITIVE importance NUMERIC "
    "created_at NUMERIC SORTABLE last_accessed_at NUMERIC access_count NUMERIC content TEXT"
)
SCHEMA = SCHEMA_TEXT.split()
CONTENTS = (
    "Ada lives in Lisbon",
    "Ada works as an engineer",
    "Grace likes sailing",
    "Grace moved to Porto",
    "The meeting is on Friday",
    "Lisbon is sunny in May",
)


class Resp:
    """A minimal RESP2/RESP3 connection that keeps every reply type."""

    def __init__(self, host: str, port: int, password: str | None) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.buf = b""
        if password:
            self.call("AUTH", password)

    def call(self, *args: Any) -> Any:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def _read(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return {"simple": rest.decode()}
        if kind == b"-":
            return {"error": rest.decode()}
        if kind == b":":
            return int(rest)
        if kind == b",":
            return {"double": rest.decode()}
        if kind == b"_":
            return None
        if kind == b"#":
            return {"bool": rest == b"t"}
        if kind in (b"$", b"="):
            n = int(rest)
            if n < 0:
                return None
            data = self._exact(n)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return {"bytes_b64": base64.b64encode(data).decode()}
            if any(ord(c) < 32 and c not in "\r\n\t" for c in text):
                return {"bytes_b64": base64.b64encode(data).decode()}
            return text  # a verbatim string keeps its "txt:" prefix, as in the original capture
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        if kind == b"%":
            return {"map": [[self._read(), self._read()] for _ in range(int(rest))]}
        raise ValueError(f"unknown RESP type {line!r}")


def vec(i: int) -> bytes:
    values = [((i * 7 + j * 3) % 11) / 10.0 + (0.5 if j == i % DIM else 0.0) for j in range(DIM)]
    return struct.pack(f"<{DIM}f", *values)


def _scrub(node: Any) -> Any:
    """Replace the module's file path (machine-specific) with ``<module-path>``, as the original capture did."""
    if isinstance(node, str) and node.startswith("/") and node.endswith(".so"):
        return "<module-path>"
    if isinstance(node, list):
        return [_scrub(v) for v in node]
    if isinstance(node, dict) and "map" in node:
        return {"map": [[_scrub(k), _scrub(v)] for k, v in node["map"]]}
    return node


def capture(conn: Resp, protocol: int) -> dict[str, dict[str, Any]]:
    """The memory-schema sequence; every reply is named ``mem_*`` (no clash with the original capture)."""
    replies: dict[str, dict[str, Any]] = {}

    def run(name: str, *cmd: Any) -> Any:
        reply = _scrub(conn.call(*cmd))
        shown = [f"<{len(c)} bytes>" if isinstance(c, bytes) else str(c) for c in cmd]
        replies[name if name.startswith("mem_") else f"mem_{name}"] = {"command": shown, "reply": reply}
        return reply

    for idx in ("cap:mem:idx", "nc:mem:idx"):
        conn.call("FT.DROPINDEX", idx)
    for prefix in ("cap:mem:", "nc:mem:"):
        conn.call("DEL", *[f"{prefix}{i}" for i in range(1, 7)])
    run("mem_hello", "HELLO", protocol)
    run("module_list", "MODULE", "LIST")
    run("info_modules", "INFO", "modules")
    run("info_search", "INFO", "search")
    run("mem_create", "FT.CREATE", "cap:mem:idx", "ON", "HASH", "PREFIX", 1, "cap:mem:", "SCHEMA", *SCHEMA)
    run(
        "mem_create_again",
        "FT.CREATE",
        "cap:mem:idx",
        "ON",
        "HASH",
        "PREFIX",
        1,
        "cap:mem:",
        "SCHEMA",
        *SCHEMA,
    )
    nocase = [w for w in SCHEMA if w != "CASESENSITIVE"]
    run(
        "mem_create_nocase",
        "FT.CREATE",
        "nc:mem:idx",
        "ON",
        "HASH",
        "PREFIX",
        1,
        "nc:mem:",
        "SCHEMA",
        *nocase,
    )
    for prefix in ("cap:mem:", "nc:mem:"):
        for i in range(1, 7):
            conn.call(
                "HSET", f"{prefix}{i}",
                "vector", vec(i),
                "threadId", "t1" if i % 2 else "t2",
                "agentId", "Agent-A",
                "namespace", "ns",
                "tags", "Alpha,beta" if i <= 2 else "gamma",
                "source", "user",
                "importance", f"{i / 10:.1f}",
                "created_at", 1_700_000_000 + 100 * i,
                "last_accessed_at", 1_700_000_000 + 100 * i,
                "access_count", i,
                "content", CONTENTS[i - 1],
            )  # fmt: skip
    time.sleep(1.0)  # let both engines finish indexing before FT.INFO
    run("list", "FT._LIST")
    run("mem_info", "FT.INFO", "cap:mem:idx")
    run("mem_info_nocase", "FT.INFO", "nc:mem:idx")
    run(
        "mem_filter_sorted", "FT.SEARCH", "cap:mem:idx", "@threadId:{t1}",
        "RETURN", 3, "content", "importance", "created_at",
        "SORTBY", "created_at", "DESC", "LIMIT", 0, 2, "DIALECT", 2,
    )  # fmt: skip
    run(
        "mem_filter_count",
        "FT.SEARCH",
        "cap:mem:idx",
        "@namespace:{ns}",
        "NOCONTENT",
        "LIMIT",
        0,
        0,
        "DIALECT",
        2,
    )
    run(
        "mem_knn_hybrid", "FT.SEARCH", "cap:mem:idx",
        "(@threadId:{t1} @importance:[0.2 +inf])=>[KNN 3 @vector $v AS score]",
        "PARAMS", 2, "v", vec(1), "RETURN", 3, "score", "content", "importance", "DIALECT", 2,
    )  # fmt: skip
    run(
        "mem_knn_sortby_score", "FT.SEARCH", "cap:mem:idx", "*=>[KNN 3 @vector $v AS score]",
        "PARAMS", 2, "v", vec(1), "SORTBY", "score", "RETURN", 1, "score", "DIALECT", 2,
    )  # fmt: skip
    run(
        "mem_tag_case_sensitive",
        "FT.SEARCH",
        "cap:mem:idx",
        "@agentId:{agent\\-a}",
        "NOCONTENT",
        "DIALECT",
        2,
    )
    run("mem_tag_exact_case", "FT.SEARCH", "cap:mem:idx", "@agentId:{Agent\\-A}", "NOCONTENT", "DIALECT", 2)
    run(
        "mem_tag_case_insensitive",
        "FT.SEARCH",
        "nc:mem:idx",
        "@agentId:{agent\\-a}",
        "NOCONTENT",
        "DIALECT",
        2,
    )
    run("mem_tag_separator", "FT.SEARCH", "cap:mem:idx", "@tags:{beta}", "NOCONTENT", "DIALECT", 2)
    run("mem_text", "FT.SEARCH", "cap:mem:idx", "@content:lisbon", "NOCONTENT", "DIALECT", 2)
    # An escaped trailing '*' in a TAG value: literal on RediSearch, still a prefix wildcard on valkey-search.
    run(
        "mem_tag_escaped_trailing_star",
        "FT.SEARCH",
        "cap:mem:idx",
        "@source:{use\\*}",
        "NOCONTENT",
        "DIALECT",
        2,
    )
    run("mem_tag_escaped_star_alone", "FT.SEARCH", "cap:mem:idx", "@source:{\\*}", "NOCONTENT", "DIALECT", 2)
    run("mem_info_unknown", "FT.INFO", "nope:mem:idx")
    run("mem_search_unknown", "FT.SEARCH", "nope:mem:idx", "*", "DIALECT", 2)
    run("mem_unknown_field", "FT.SEARCH", "cap:mem:idx", "@nope:{x}", "NOCONTENT", "DIALECT", 2)
    run("mem_syntax_error", "FT.SEARCH", "cap:mem:idx", "(@threadId:{t1)", "NOCONTENT", "DIALECT", 2)
    run(
        "mem_wrong_blob", "FT.SEARCH", "cap:mem:idx", "*=>[KNN 3 @vector $v]",
        "PARAMS", 2, "v", b"\x00" * 12, "DIALECT", 2,
    )  # fmt: skip
    run("mem_dropindex", "FT.DROPINDEX", "nc:mem:idx")
    conn.call("FT.DROPINDEX", "cap:mem:idx")
    for prefix in ("cap:mem:", "nc:mem:"):
        conn.call("DEL", *[f"{prefix}{i}" for i in range(1, 7)])
    return replies


def capture_cluster(conn: Resp, url: str, protocol: int) -> dict[str, dict[str, Any]]:
    """The cluster forms, asked of one node; documents written through a cluster client."""
    import asyncio

    from valkey.asyncio.cluster import ValkeyCluster

    replies: dict[str, dict[str, Any]] = {}

    def run(name: str, *cmd: Any) -> Any:
        reply = _scrub(conn.call(*cmd))
        shown = [f"<{len(c)} bytes>" if isinstance(c, bytes) else str(c) for c in cmd]
        replies[name] = {"command": shown, "reply": reply}
        return reply

    async def write_docs() -> None:
        client = ValkeyCluster.from_url(url)
        try:
            for i in range(1, 13):
                await client.hset(
                    f"cap:mem:{i}",
                    mapping={
                        "vector": vec(i),
                        "threadId": "t1" if i % 2 else "t2",
                        "namespace": "ns",
                        "importance": f"{i / 20:.2f}",
                        "created_at": 1_700_000_000 + 100 * i,
                        "content": CONTENTS[(i - 1) % len(CONTENTS)],
                    },
                )
            await asyncio.sleep(1.0)
        finally:
            await client.aclose()

    conn.call("FT.DROPINDEX", "cap:mem:idx")
    run("mem_hello", "HELLO", protocol)
    run(
        "mem_cluster_create",
        "FT.CREATE",
        "cap:mem:idx",
        "ON",
        "HASH",
        "PREFIX",
        1,
        "cap:mem:",
        "SCHEMA",
        *SCHEMA,
    )
    asyncio.run(write_docs())
    run("mem_cluster_info_local", "FT.INFO", "cap:mem:idx")
    run("mem_cluster_info_primary", "FT.INFO", "cap:mem:idx", "PRIMARY")
    run("mem_cluster_info_cluster", "FT.INFO", "cap:mem:idx", "CLUSTER")
    run("mem_cluster_list", "FT._LIST")
    run(
        "mem_cluster_filter_count",
        "FT.SEARCH",
        "cap:mem:idx",
        "@namespace:{ns}",
        "NOCONTENT",
        "LIMIT",
        0,
        0,
        "DIALECT",
        2,
    )
    run(
        "mem_cluster_knn_hybrid", "FT.SEARCH", "cap:mem:idx",
        "(@threadId:{t1})=>[KNN 4 @vector $v AS score]",
        "PARAMS", 2, "v", vec(1), "RETURN", 2, "score", "importance", "DIALECT", 2,
    )  # fmt: skip
    run("mem_cluster_dropindex", "FT.DROPINDEX", "cap:mem:idx")

    async def delete_docs() -> None:
        client = ValkeyCluster.from_url(url)
        try:
            await client.delete(*[f"cap:mem:{i}" for i in range(1, 13)])
        finally:
            await client.aclose()

    asyncio.run(delete_docs())
    return replies


# -- the filter language's query shapes (issue 27): ``flt_*`` replies ----------------------

FLT_INDEX, FLT_PREFIX = "cap:flt:idx", "cap:flt:"
FLT_HIST_INDEX, FLT_HIST_PREFIX = "cap:flth:idx", "cap:flth:"
FLT_DECLARED = {"priority": "numeric", "project": "tag"}
FLT_SCOPE = "ns"
# (namespace, metadata, valid_from or None); created_at is 1000 * i. Missing fields matter:
# 5 and 8 have no declared field (no ``present``), 3 no project, 4 no priority, and only
# 1, 6, 7, 8 a valid_from (the others fall back to created_at). 8 is outside the scope.
FLT_DOCS: tuple[tuple[str, dict[str, Any], int | None], ...] = (
    ("ns", {"priority": 1, "project": "alpha"}, 6500),
    ("ns", {"priority": 5, "project": "beta"}, None),
    ("ns", {"priority": 3}, None),
    ("ns", {"project": ["alpha", "gamma"]}, None),
    ("ns", {}, None),
    ("ns", {"priority": 8, "project": "Alpha"}, 500),
    ("ns", {"priority": 2.5, "project": "beta"}, 3500),
    ("other", {}, 2500),
)
# name -> where: the representative filters (compiled by filter_query.compile_where).
FLT_WHERES: dict[str, dict[str, Any]] = {
    "gte": {"priority": {"$gte": 3}},
    "in": {"project": {"$in": ["alpha", "beta"]}},
    "ne": {"project": {"$ne": "alpha"}},
    "exists_false": {"priority": {"$exists": False}},
    "or_negation": {"$or": [{"priority": {"$lt": 2}}, {"project": {"$nin": ["beta"]}}]},
    "valid_from_range": {"valid_from": {"$gte": 2000, "$lt": 4000}},
}
FLT_KNN_WHERE = "in"
# History documents: (valid_from or None, created_at, valid_until); asked as of FLT_AS_OF.
FLT_HIST_DOCS = ((1000, 1000, 3000), (None, 2000, 5000), (3500, 3000, 6000), (None, 500, 2500))
FLT_AS_OF = 2600


def flt_documents() -> list[tuple[str, dict[str, str | bytes]]]:
    """The HASH fields of each filter document, as the write path writes them (``index_fields``)."""
    from betterdb_memory.core.filter_fields import MetadataFields, index_fields

    declared = MetadataFields.of(FLT_DECLARED)
    docs = []
    for i, (ns, metadata, valid_from) in enumerate(FLT_DOCS, start=1):
        fields: dict[str, str | bytes] = {
            "vector": vec(i), "threadId": "t1", "agentId": "Agent-A", "namespace": ns,
            "tags": "", "source": "user", "importance": "0.5", "created_at": str(1000 * i),
            "last_accessed_at": str(1000 * i), "access_count": "0", "content": CONTENTS[(i - 1) % 6],
            "metadata": json.dumps(metadata),
            **index_fields(metadata, declared),
        }  # fmt: skip
        if valid_from is not None:
            fields["valid_from"] = str(valid_from)
        docs.append((f"{FLT_PREFIX}{i}", fields))
    return docs


def capture_filters(conn: Resp, protocol: int, *, valkey_search: bool) -> dict[str, dict[str, Any]]:
    """The filter sequence; every reply named ``flt_*``, a query's entry also holding its ``where`` and scope."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from betterdb_memory.core.dialect import capabilities_for
    from betterdb_memory.core.filter_fields import FilterSchema, MetadataFields, schema_args
    from betterdb_memory.core.filter_query import compile_where, hybrid_query, standalone_query
    from betterdb_memory.core.filters import parse_where
    from betterdb_memory.core.query import IndexSpec, create_index_args
    from betterdb_memory.core.validity import history_valid_at

    replies: dict[str, dict[str, Any]] = {}

    def run(name: str, *cmd: Any, **extra: Any) -> Any:
        reply = _scrub(conn.call(*cmd))
        shown = [f"<{len(c)} bytes>" if isinstance(c, bytes) else str(c) for c in cmd]
        replies[name] = {"command": shown, "reply": reply, **extra}
        return reply

    # The compiled text is the same on both engines (filter_query); caps only name the engine in errors.
    caps = (
        capabilities_for("valkey-search", (1, 2, 1))
        if valkey_search
        else capabilities_for("redisearch", (2, 10, 5))
    )
    declared = MetadataFields.of(FLT_DECLARED)
    schema = FilterSchema(metadata=declared, valid_from=True)
    docs = flt_documents()
    for idx in (FLT_INDEX, FLT_HIST_INDEX):
        conn.call("FT.DROPINDEX", idx)
    conn.call("DEL", *[k for k, _ in docs], *[f"{FLT_HIST_PREFIX}{i}" for i in range(1, 5)])
    run("flt_hello", "HELLO", protocol)
    spec = IndexSpec(FLT_INDEX, FLT_PREFIX, DIM, extra_schema=tuple(schema_args(declared)))
    run("flt_create", *create_index_args(spec, caps))
    for key, fields in docs:
        conn.call("HSET", key, *[x for kv in fields.items() for x in kv])
    run(
        "flt_hist_create", "FT.CREATE", FLT_HIST_INDEX, "ON", "HASH", "PREFIX", 1, FLT_HIST_PREFIX, "SCHEMA",
        "namespace", "TAG", "CASESENSITIVE", "created_at", "NUMERIC", "valid_from", "NUMERIC", "valid_until", "NUMERIC",
    )  # fmt: skip
    for i, (valid_from, created_at, valid_until) in enumerate(FLT_HIST_DOCS, start=1):
        hist = ["namespace", FLT_SCOPE, "created_at", created_at, "valid_until", valid_until]
        conn.call("HSET", f"{FLT_HIST_PREFIX}{i}", *hist, *(["valid_from", valid_from] if valid_from else []))
    time.sleep(1.0)  # let the engine finish indexing
    scope = f"@namespace:{{{FLT_SCOPE}}}"
    for name, where in FLT_WHERES.items():
        query = standalone_query(caps, scope, compile_where(parse_where(where, schema), caps))
        extra = {"where": where, "scope": FLT_SCOPE}
        count = ("NOCONTENT", "LIMIT", 0, 0, "DIALECT", 2)
        run(f"flt_{name}_count", "FT.SEARCH", FLT_INDEX, query, *count, **extra)
        page = ("NOCONTENT", "LIMIT", 0, 20, "DIALECT", 2)
        run(f"flt_{name}_page", "FT.SEARCH", FLT_INDEX, query, *page, **extra)
    where = FLT_WHERES[FLT_KNN_WHERE]
    knn = hybrid_query("KNN 3 @vector $vec AS __dist", scope, compile_where(parse_where(where, schema), caps))
    run(
        "flt_knn_where", "FT.SEARCH", FLT_INDEX, knn, "PARAMS", 2, "vec", vec(1),
        "RETURN", 1, "__dist", "LIMIT", 0, 3, "DIALECT", 2, where=where, scope=FLT_SCOPE, k=3,
    )  # fmt: skip
    as_of = standalone_query(caps, scope, history_valid_at(FLT_AS_OF))
    run(
        "flt_hist_as_of", "FT.SEARCH", FLT_HIST_INDEX, as_of, "NOCONTENT", "LIMIT", 0, 20, "DIALECT", 2,
        as_of=FLT_AS_OF, documents=[list(d) for d in FLT_HIST_DOCS],
    )  # fmt: skip
    # The documents as the engine holds them (a real HGETALL reply each): what the tests evaluate.
    for key, _ in docs:
        run(f"flt_doc_{key.rsplit(':', 1)[1]}", "HGETALL", key)
    for idx in (FLT_INDEX, FLT_HIST_INDEX):
        conn.call("FT.DROPINDEX", idx)
    conn.call("DEL", *[k for k, _ in docs], *[f"{FLT_HIST_PREFIX}{i}" for i in range(1, 5)])
    return replies


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("capture_name", help="e.g. valkey-search-1.2.1/resp2")
    ap.add_argument("--protocol", type=int, choices=(2, 3), default=2)
    ap.add_argument("--engine", default=None, help="engine recorded for a new capture")
    ap.add_argument("--version", default=None, help="version recorded for a new capture")
    ap.add_argument("--cluster", action="store_true", help="URL is a node of a valkey-search cluster")
    ap.add_argument("--filters", action="store_true", help="the filter sequence (flt_* replies)")
    ap.add_argument("--write", action="store_true", help="merge into tests/fixtures/search_replies.json")
    args = ap.parse_args(argv)
    url = urlparse(args.url)
    conn = Resp(url.hostname or "127.0.0.1", url.port or 6379, url.password)
    if args.filters:
        replies = capture_filters(
            conn, args.protocol, valkey_search=args.capture_name.startswith("valkey-search")
        )
    elif args.cluster:
        replies = capture_cluster(conn, args.url, args.protocol)
    else:
        replies = capture(conn, args.protocol)
    if not args.write:
        json.dump(replies, sys.stdout, indent=1)
        return 0
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    cap = data["captures"].setdefault(args.capture_name, {"replies": {}})
    for key, value in (("engine", args.engine), ("version", args.version), ("protocol", args.protocol)):
        if value is not None:
            cap.setdefault(key, value)
    cap["replies"].update(replies)
    FIXTURE.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{args.capture_name}: {len(replies)} replies merged into {FIXTURE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
