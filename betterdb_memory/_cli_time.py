"""The CLI's time and subject options, and the ``history`` command (issue 26's model from a shell).

``remember --subject "home city" --valid-from 2024-05-01``, ``recall --as-of 2023-01-01``,
``recall --since 2024-05-01 --until 2024-06-01``, ``list --as-of ...`` and
``history "home city"`` call the public API's ``subject=``, ``valid_from=``, ``as_of=``,
``since=`` / ``until=``, ``tz=`` and ``fact_history``. A time is ISO 8601 text (``2024``,
``2024-05``, ``2024-05-01``, ``2024-05-01T09:30:00+02:00``) or epoch milliseconds (digits,
other than four: ``2024`` is the year); the store checks it (``core.times``), so a bad one
is a ``ValidationError`` (exit code 2) before anything is sent.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._cli_common import EXIT_NOT_FOUND, EXIT_OK, scope_args
from .store import MemoryStore

__all__ = ["add_as_of", "add_history_parser", "add_window", "cmd_history", "time_value", "window_args"]

_TIME_HELP = "ISO 8601 (2024, 2024-05, 2024-05-01, 2024-05-01T09:30Z) or epoch milliseconds"


def time_value(text: str | None) -> str | int | None:
    """``text`` as the API takes it: digits are epoch milliseconds, except four (a year, ISO 8601's
    ``YYYY``); anything else is ISO 8601 text."""
    if text is None:
        return None
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() and len(stripped) != 4 else text


def add_as_of(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as-of", dest="as_of", help=f"what was valid at that instant, past versions included ({_TIME_HELP})"
    )


def add_window(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help=f"only memories whose valid_from is at or after this ({_TIME_HELP})")
    parser.add_argument("--until", help=f"only memories whose valid_from is before this ({_TIME_HELP})")


def window_args(args: argparse.Namespace) -> dict[str, Any]:
    """``--as-of`` / ``--since`` / ``--until`` as the store's keywords (those the command has)."""
    out: dict[str, Any] = {}
    for name in ("as_of", "since", "until"):
        if hasattr(args, name):
            out[name] = time_value(getattr(args, name))
    return out


def add_history_parser(sub: Any, common: argparse.ArgumentParser, scope: argparse.ArgumentParser) -> None:
    s = sub.add_parser(
        "history",
        help="every version of a subject in the exact scope named, newest first",
        parents=[common, scope],
    )
    s.add_argument("subject", help="as given to remember --subject (case and spacing do not matter)")
    s.add_argument("--kind", help="only this kind's versions (memory, fact, ...); default every kind")


async def cmd_history(store: MemoryStore, args: argparse.Namespace) -> int:
    versions = await store.fact_history(args.subject, kind=args.kind, **scope_args(args))
    if args.json:
        print(json.dumps([v.as_json() for v in versions], ensure_ascii=False))
    else:
        for v in versions:
            since = v.valid_from.date().isoformat() if v.valid_from else "?"
            until = v.valid_until.date().isoformat() if v.valid_until else "now"
            state = "current" if v.current else "retracted" if v.retracted else "past"
            print(f"{v.id}  {since} .. {until}  {state:>9}  {v.content}")
    return EXIT_OK if versions else EXIT_NOT_FOUND
