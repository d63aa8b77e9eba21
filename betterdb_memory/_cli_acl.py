"""``betterdb-memory acl``: print the ``ACL SETUSER`` line of a user limited to one store.

No server is needed: the rules come from ``core.acl`` (the set the ACL tests prove
enough and least). ``--tenant`` leaves out FT.CREATE, for a user sharing the server
with other tenants (an administrator then creates the store's index once; see
docs/operations/acl.md, Tenants).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._cli_common import EXIT_OK
from .core.acl import acl_rules, acl_setuser_line

__all__ = ["add_parser", "cmd_acl"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``acl`` subcommand and its options on the CLI's subparsers."""
    s = sub.add_parser(
        "acl", help="print the ACL SETUSER line of a user limited to this store (--name)", parents=[common]
    )
    s.add_argument("--user", default="app-memory", help="the ACL user name (default app-memory)")
    s.add_argument(
        "--tenant",
        action="store_true",
        help="no FT.CREATE: the user shares the server with other tenants (create the index as admin)",
    )
    s.add_argument("--no-discovery", action="store_true", help="no BetterDB Monitor discovery keys")
    s.add_argument(
        "--cluster",
        action="store_true",
        help="add what a cluster client needs to start (CLUSTER SLOTS, COMMAND); run it on every node",
    )
    s.add_argument(
        "--agent-cache", action="store_true", help="add AgentMemory's llm / tool / session cache tiers"
    )


def cmd_acl(args: argparse.Namespace) -> int:
    """Print the line (a password placeholder in it), or with ``--json`` the rules as a list."""
    options = {
        "discovery": not args.no_discovery,
        "agent_cache": args.agent_cache,
        "create_index": not args.tenant,
        "cluster": args.cluster,
    }
    if args.json:
        print(json.dumps({"user": args.user, "rules": list(acl_rules(args.name, **options))}))
    else:
        print(acl_setuser_line(args.name, user=args.user, **options))
    return EXIT_OK
