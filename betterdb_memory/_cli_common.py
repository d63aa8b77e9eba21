"""What the CLI's command modules share: the exit codes and the scope options' meaning.

Its own module so that ``cli`` (the parser and the dispatch) and the command modules
(``_cli_transfer``, ``_cli_mcp``) all import it and none imports another's.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["EXIT_NOT_FOUND", "EXIT_OK", "EXIT_SERVER", "EXIT_USAGE", "scope_args"]

#: 0 ok, 1 not found / nothing to do, 2 bad usage or input, 3 server or connection error.
EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_SERVER = 0, 1, 2, 3


def scope_args(args: argparse.Namespace) -> dict[str, Any]:
    """``--thread`` / ``--agent`` / ``--namespace`` as the store's scope keywords."""
    return {"thread_id": args.thread, "agent_id": args.agent, "namespace": args.namespace}
