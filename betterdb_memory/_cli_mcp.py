"""``betterdb-memory mcp``: the MCP server subcommand (its options, its token, its scope).

Everything a server others can reach needs is settled here before the store is opened,
so a refusal costs no connection and leaves nothing listening:

- the ``mcp`` extra is imported (a missing one is a ``ConfigurationError`` naming it);
- the bearer token of ``--http``: from ``--token-file PATH`` (the file's content, outer
  whitespace dropped), else from ``$BETTERDB_MEMORY_MCP_TOKEN``; never from the command
  line (``ps`` shows it to every user) and never printed. Bound to anything but loopback
  without one: ``configuration.mcp_token_required``, exit 2;
- the fixed scope (``--namespace``, ``--agent-id``) every tool call is confined to.

The adapter (and with it the ``mcp`` SDK) is imported only when ``mcp`` runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._cli_common import EXIT_OK
from .errors import ConfigurationError, ValidationError
from .store import MemoryStore

__all__ = ["TOKEN_ENV_VAR", "McpLaunch", "add_parser", "cmd_mcp", "prepare", "resolve_token"]

#: The environment variable holding the bearer token (``--token-file`` wins over it).
TOKEN_ENV_VAR = "BETTERDB_MEMORY_MCP_TOKEN"


@dataclass(frozen=True)
class McpLaunch:
    """What ``prepare`` settled: the token (None: an open loopback server) and the scope."""

    token: str | None
    scope: Any  # adapters.mcp.FixedScope; typed loosely so that importing this needs no extra

    def __repr__(self) -> str:  # the token must not reach a traceback or a log
        return f"McpLaunch(token={'<set>' if self.token else None}, scope={self.scope!r})"


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``mcp`` subcommand and its options on the CLI's subparsers."""
    s = sub.add_parser("mcp", help="serve the store's tools over MCP (stdio, or --http)", parents=[common])
    s.add_argument("--http", action="store_true", help="streamable HTTP at HOST:PORT/mcp, not stdio")
    s.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind with --http (default 127.0.0.1; a non-loopback one needs a token)",
    )
    s.add_argument("--port", type=int, default=8000, help="port with --http (default 8000)")
    s.add_argument(
        "--token-file",
        help=f"file holding the bearer token HTTP clients must send (default: ${TOKEN_ENV_VAR})",
    )
    s.add_argument("--namespace", help="confine every tool call to this namespace")
    s.add_argument("--agent-id", "--agent", dest="agent_id", help="confine every tool call to this agent id")


def resolve_token(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """The bearer token and where it came from (``(None, None)`` when none was given).

    Raises:
        ValidationError: ``--token-file`` without ``--http``.
        ConfigurationError: ``configuration.mcp_token_invalid``: an unreadable file, or a
            token too short or holding characters a header cannot carry.
    """
    from .adapters._mcp_auth import TOKEN_INVALID, check_token

    if args.token_file is not None:
        if not args.http:
            raise ValidationError("--token-file applies to --http only", code="validation.usage")
        source = f"--token-file {args.token_file}"
        try:
            with open(args.token_file, encoding="utf-8") as f:
                raw = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                f"cannot read the MCP token file {args.token_file!r}: {exc}",
                code=TOKEN_INVALID,
                details={"source": source},
            ) from exc
        return check_token(raw, source=source), source
    env = os.environ if environ is None else environ
    raw = env.get(TOKEN_ENV_VAR, "")
    if not args.http or not raw.strip():  # stdio has no requests to check; blank counts as unset
        return None, None
    source = f"${TOKEN_ENV_VAR}"
    return check_token(raw, source=source), source


def prepare(args: argparse.Namespace) -> McpLaunch:
    """Import the adapter, resolve the token and the scope; raise before anything connects.

    Raises:
        ConfigurationError: the ``mcp`` extra is missing; no token for a non-loopback
            ``--host`` (``configuration.mcp_token_required``); an unfit token.
        ValidationError: a scope value the store would refuse, or ``--token-file`` with stdio.
    """
    from .adapters import mcp
    from .adapters._mcp_auth import require_token

    token, source = resolve_token(args)
    scope = mcp.FixedScope(namespace=args.namespace, agent_id=args.agent_id)
    if args.http:
        require_token(args.host, token)
        guard = f"bearer token from {source}" if source else "no authentication (loopback)"
        where = ", ".join(f"{k}={v}" for k, v in scope.as_dict().items()) or "none"
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(
            f"betterdb-memory mcp: http://{host}:{args.port}/mcp, {guard}, fixed scope: {where}",
            file=sys.stderr,
            flush=True,
        )
    return McpLaunch(token=token, scope=scope)


async def cmd_mcp(store: MemoryStore, args: argparse.Namespace) -> int:
    """Serve the store's tools over MCP (``adapters.mcp``): stdio, or streamable HTTP with --http."""
    from .adapters.mcp import serve

    launch: McpLaunch = args.mcp_launch
    await serve(store, http=args.http, host=args.host, port=args.port, token=launch.token, scope=launch.scope)
    return EXIT_OK
