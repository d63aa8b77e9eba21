"""The ``betterdb-memory`` command: a thin layer over the public API.

Server: ``--url``, else ``BETTERDB_MEMORY_URL``, ``VALKEY_URL``, ``REDIS_URL`` (in that
order, see ``_env.resolve_url``), else the embedded engine on the default data dir.
Embedder: ``--embedder onnx`` (default) or ``hashing`` (``--dimensions``, default 384).
Exit codes: 0 ok, 1 not found / nothing to do, 2 bad usage or input, 3 server or
connection error. ``--json`` prints machine-readable output; progress of ``export``,
``import`` and ``reembed`` goes to standard error (a bar on a terminal, lines otherwise).

The common options (``--url``, ``--name``, ``--embedder``, ``--json``) are accepted before
the subcommand as well as after it, so a shell alias such as
``alias mem='betterdb-memory --url valkey://prod:6379 --name support'`` works with every
subcommand; when both places give one, the one after the subcommand wins, so a single
command can override what an alias or wrapper script put in front of it.

Subcommands with a module of their own: ``remember`` / ``recall`` / ``list`` / ``forget``
(``_cli_memories``), ``export`` / ``import`` / ``reembed``
(``_cli_transfer``), ``mcp`` (``_cli_mcp``: its token and scope), ``acl``
(``_cli_acl``: the ACL line of a store's user) and ``history`` (``_cli_time``, with the
time and subject options of ``remember``, ``recall`` and ``list``); exit codes and scope
options in ``_cli_common``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from typing import Any

from . import _cli_acl, _cli_mcp, _cli_memories, _cli_time, _cli_transfer
from ._cli_common import EXIT_NOT_FOUND, EXIT_OK, EXIT_SERVER, EXIT_USAGE
from ._env import resolve_url
from ._version import __version__
from .embedders.base import Embedder
from .errors import BetterDBMemoryError, ValidationError
from .store import DEFAULT_NAME, MemoryStore

__all__ = ["main"]


def _url(args: argparse.Namespace) -> str | None:
    return resolve_url(args.url)


def _embedder(name: str, dimensions: int | None = None) -> Embedder:
    if name == "hashing":
        from .embedders.hashing import HashingEmbedder

        return HashingEmbedder(dimensions or 384)
    if dimensions is not None:
        raise ValidationError("--dimensions applies to --embedder hashing only", code="validation.usage")
    from .embedders.onnx import default_embedder

    return default_embedder()


async def _open(args: argparse.Namespace) -> MemoryStore:
    embedder = _embedder(args.embedder, args.dimensions)
    return await MemoryStore.connect(_url(args), name=args.name, embedder=embedder)


async def cmd_stats(store: MemoryStore, args: argparse.Namespace) -> int:
    st = await store.stats()
    data = {
        "name": st.name,
        "index": st.index_name,
        "items": st.items,
        "evictions": st.evictions,
        "counters": st.counters,
        "engine": f"{st.capabilities.engine} {st.capabilities.version_string}",
        "embedder": st.embedder_model,
        "dimensions": st.dimensions,
        "index_ready": st.index.ready if st.index else None,
        "config": st.config,
    }
    if args.json:
        print(json.dumps(data))
    else:
        for k, v in data.items():
            print(f"{k:>12}: {v}")
    return EXIT_OK


async def cmd_config(store: MemoryStore, args: argparse.Namespace) -> int:
    from .observability.live_config import LiveConfig

    live = LiveConfig(store.client, store.keys.config, store.config_defaults())
    try:
        if args.action == "set":
            if args.field is None or args.value is None:
                raise ValidationError("config set FIELD VALUE", code="validation.usage")
            snap = await live.set(args.field, args.value)
        elif args.action == "unset":
            if args.field is None:
                raise ValidationError("config unset FIELD", code="validation.usage")
            snap = await live.unset(args.field)
        else:
            snap = await live.refresh()
    finally:
        await live.close()
    data = snap.as_hash()
    print(json.dumps(data) if args.json else "\n".join(f"{k} = {v}" for k, v in data.items()))
    return EXIT_OK


async def cmd_doctor(store: MemoryStore, args: argparse.Namespace) -> int:
    checks: dict[str, Any] = {}
    await store.ensure_index()
    caps = store.capabilities
    assert caps is not None
    checks["engine"] = f"{caps.engine} {caps.version_string}"
    checks["capabilities"] = caps.as_list()
    info = await store.index_info()
    checks["index"] = store.index.name
    checks["index_ready"] = bool(info and info.ready)
    checks["index_outdated"] = list(store.index.outdated)  # fields missing: `reindex` adds them
    checks["index_docs"] = info.num_docs if info else 0
    checks["indexing_failures"] = info.indexing_failures if info else None
    checks["dimensions_match"] = bool(info and info.dimensions == store.embedder.dimensions)
    checks["embedder"] = store.embedder.model_id
    ok = checks["index_ready"] and checks["dimensions_match"] and not checks["indexing_failures"]
    checks["ok"] = ok
    if args.json:
        print(json.dumps(checks))
    else:
        for k, v in checks.items():
            print(f"{k:>18}: {v}")
    return EXIT_OK if ok else EXIT_NOT_FOUND


async def cmd_reindex(store: MemoryStore, args: argparse.Namespace) -> int:
    """Rebuild an outdated index beside the one in use and switch the store to it."""
    store.index.auto_migrate = False  # this command reports the migration it runs
    report = await store.migrate_index(keep_reference=args.keep_reference)
    data = asdict(report)
    if args.json:
        print(json.dumps(data))
    elif not report.switched:
        print(f"index {report.index} is current (generation {report.generation}); nothing to do")
    else:
        print("\n".join(f"{k:>18}: {v}" for k, v in data.items()))
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    import signal
    import threading

    from .server import EmbeddedServer, default_data_dir

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = EmbeddedServer(data_dir=args.data_dir or default_data_dir(), port=args.port).start()
    print(server.url, flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return EXIT_OK


def _add_common(parser: argparse.ArgumentParser, *, after_command: bool) -> None:
    """The options every store subcommand takes, on the top-level parser or a subcommand's.

    argparse copies *every* attribute of a subcommand's namespace over the top-level one,
    defaults included, so a subcommand default would silently undo ``--url X`` given before
    the subcommand. After the subcommand the defaults are therefore ``SUPPRESS`` (an option
    not given there sets nothing) and the real defaults live on the top-level parser only.
    """

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if after_command else value

    parser.add_argument(
        "--url",
        default=default(None),
        help="Valkey URL (default: $BETTERDB_MEMORY_URL, $VALKEY_URL, $REDIS_URL, else embedded)",
    )
    parser.add_argument(
        "--name", default=default(DEFAULT_NAME), help=f"store name (key prefix; default {DEFAULT_NAME!r})"
    )
    parser.add_argument("--embedder", choices=("onnx", "hashing"), default=default("onnx"))
    parser.add_argument(
        "--dimensions",
        type=int,
        default=default(None),
        help="vector length of --embedder hashing (default 384)",
    )
    parser.add_argument("--json", action="store_true", default=default(False), help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="betterdb-memory",
        description="Agent memory on Valkey Search.",
        epilog="--url, --name, --embedder and --json go before or after the subcommand (after wins).",
    )
    p.add_argument("--version", action="version", version=f"betterdb-memory {__version__}")
    _add_common(p, after_command=False)
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, after_command=True)
    scope = argparse.ArgumentParser(add_help=False)
    scope.add_argument("--thread")
    scope.add_argument("--agent")
    scope.add_argument("--namespace")
    scope.add_argument("--tag", action="append", help="repeatable; filters need ALL of them")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the embedded server in the foreground and print its URL")
    s.add_argument("--data-dir")
    s.add_argument("--port", type=int)
    sub.add_parser("demo", help="run the scripted demo", parents=[common])
    s = sub.add_parser("remember", help="store a memory", parents=[common, scope])
    s.add_argument("content")
    s.add_argument("--importance", type=float, default=0.5)
    s.add_argument("--ttl", type=float, help="seconds until it expires (0 or absent: never)")
    s.add_argument("--source")
    s.add_argument("--sensitivity", default="none")
    s.add_argument("--subject", help="what it states ('home city'): its newest version is current")
    s.add_argument("--valid-from", dest="valid_from", help="when it became true (default now; see --as-of)")
    s = sub.add_parser("recall", help="recall memories by meaning", parents=[common, scope])
    s.add_argument("query")
    s.add_argument("-k", type=int, default=8)
    s.add_argument(
        "--threshold",
        type=float,
        help="cosine-distance ceiling 0..2: a hit needs distance <= it (2 admits everything)",
    )
    _cli_time.add_as_of(s)
    _cli_time.add_window(s)
    s.add_argument("--tz", help="the IANA time zone the query's days are counted in (default UTC)")
    s = sub.add_parser("list", help="list memories newest first", parents=[common, scope])
    s.add_argument("--limit", type=int, default=20)
    s.add_argument("--cursor")
    _cli_time.add_as_of(s)
    _cli_time.add_window(s)
    _cli_time.add_history_parser(sub, common, scope)
    s = sub.add_parser(
        "forget", help="delete one memory, or every memory of a scope (--thread ...)", parents=[common, scope]
    )
    s.add_argument("id", nargs="?")
    _cli_time.add_window(s)
    sub.add_parser("stats", help="counts, index and settings", parents=[common])
    s = sub.add_parser("config", help="read or change the live config hash", parents=[common])
    s.add_argument("action", choices=("get", "set", "unset"))
    s.add_argument("field", nargs="?")
    s.add_argument("value", nargs="?")
    s = sub.add_parser(
        "export",
        help="write the store as JSONL: memories, fact history, sessions, state (a scope: its memories only)",
        parents=[common, scope],
    )
    s.add_argument("file", help="path or -")
    s.add_argument(
        "--vectors", action="store_true", help="include vectors (reused by an import of the same model)"
    )
    s = sub.add_parser(
        "import", help="read an export back (same ids and times; idempotent)", parents=[common]
    )
    s.add_argument("file", help="path or -")
    s.add_argument("--batch", type=int, default=256, help="rows per write and per embedding call")
    s = sub.add_parser(
        "reembed",
        help="move the store to --embedder in place (resumable; recall pauses briefly, see README)",
        parents=[common],
    )
    s.add_argument("--batch", type=int, default=256, help="texts per embedding call")
    sub.add_parser("doctor", help="check engine, index health and model match", parents=[common])
    s = sub.add_parser(
        "reindex",
        help="build the index with this version's fields beside the old one and switch (recall keeps working)",
        parents=[common],
    )
    s.add_argument(
        "--keep-reference",
        action="store_true",
        help="keep <name>:mem:idx as it is for betterdb-agent-memory / Monitor (two indexes maintained)",
    )
    _cli_mcp.add_parser(sub, common)
    _cli_acl.add_parser(sub, common)
    return p


_COMMANDS: dict[str, Callable[[MemoryStore, argparse.Namespace], Awaitable[int]]] = {
    **_cli_memories.COMMANDS,
    "stats": cmd_stats,
    "config": cmd_config,
    "doctor": cmd_doctor,
    "reindex": cmd_reindex,
    "history": _cli_time.cmd_history,
    **_cli_transfer.COMMANDS,
    "mcp": _cli_mcp.cmd_mcp,
}


async def _run(args: argparse.Namespace) -> int:
    command = _COMMANDS[args.command]
    store = await _open(args)
    try:
        return await command(store, args)
    finally:
        await store.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "acl":  # no server: the rules are the store name's
            return _cli_acl.cmd_acl(args)
        if args.command == "demo":
            from .demo import run

            asyncio.run(run(_url(args)))
            return EXIT_OK
        if args.command == "mcp":  # the extra, the token and the scope, before any connection
            args.mcp_launch = _cli_mcp.prepare(args)
        return asyncio.run(_run(args))
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BetterDBMemoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SERVER


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
