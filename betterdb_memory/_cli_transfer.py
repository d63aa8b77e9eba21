"""``betterdb-memory export``, ``import`` and ``reembed``: moving a store's data (``transfer``).

The three commands that stream a whole store, with progress on standard error (a bar on
a terminal, lines otherwise) and their counts as the result (``--json``: the result
dataclass as JSON). The ``transfer`` package itself is imported when one of them runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from ._cli_common import EXIT_OK, scope_args
from .embedders.base import Embedder
from .progress import Progress
from .store import MemoryStore

__all__ = ["COMMANDS", "cmd_export", "cmd_import", "cmd_reembed"]


def _report(args: argparse.Namespace, data: dict[str, Any], text: str, *, stdout: bool = True) -> None:
    """A command's result: JSON with ``--json``, else one line; on stderr when stdout carries data."""
    stream = sys.stdout if stdout else sys.stderr
    print(json.dumps(data) if args.json else text, file=stream)


async def cmd_export(store: MemoryStore, args: argparse.Namespace) -> int:
    """Lossless JSONL (``betterdb_memory.transfer``): documents as stored, fact history, L1, state."""
    from .transfer import export_store

    to_stdout = args.file == "-"
    out = sys.stdout if to_stdout else open(args.file, "w", encoding="utf-8")  # noqa: SIM115, ASYNC230 - the CLI streams files itself
    progress = Progress()
    try:
        res = await export_store(
            store, out, vectors=args.vectors, tags=args.tag or None, progress=progress, **scope_args(args)
        )
    finally:
        progress.end()
        if not to_stdout:
            out.close()
    text = f"exported {res.memories} memories, {res.history} fact-history documents, {res.keys} state keys"
    _report(args, asdict(res), text + (" with vectors" if res.vectors else ""), stdout=not to_stdout)
    return EXIT_OK


def _count_lines(path: str) -> int | None:
    """Rows in an export file (for the progress total); None for standard input."""
    if path == "-":
        return None
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


async def cmd_import(store: MemoryStore, args: argparse.Namespace) -> int:
    """Import an export (any format version): the same ids, times, counts, TTLs; re-embedded if needed."""
    from .transfer import import_store

    total = _count_lines(args.file)
    src = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")  # noqa: SIM115, ASYNC230 - the CLI streams files itself
    progress = Progress()
    try:
        res = await import_store(store, src, batch=args.batch, total=total, progress=progress)
    finally:
        progress.end()
        if src is not sys.stdin:
            src.close()
    text = (
        f"imported {res.memories} memories, {res.history} fact-history documents, {res.keys} state keys"
        f" ({res.embedded} embedded again, {res.expired} expired since the export)"
    )
    _report(args, asdict(res), text)
    return EXIT_OK


async def cmd_reembed(store: MemoryStore, args: argparse.Namespace) -> int:
    """Move the store to ``--embedder`` in place (resumable: run it again after a failure)."""
    from .transfer import reembed

    embedder = store.embedder
    assert isinstance(embedder, Embedder)  # the CLI builds its stores with an Embedder
    progress = Progress()
    try:
        res = await reembed(store, embedder, batch=args.batch, progress=progress)
    finally:
        progress.end()
    if res.already:
        text = f"already on {res.model_id} ({res.dimensions}-d); nothing to do"
    else:
        text = (
            f"re-embedded with {res.model_id} ({res.dimensions}-d, was {res.previous_model_id}): "
            f"{res.embedded} vectors computed, {res.fixed} fixed after the switch; recall unavailable "
            f"{res.unavailable_seconds:.2f}s, index backfill {res.backfill_seconds:.2f}s"
        )
    _report(args, asdict(res), text)
    return EXIT_OK


COMMANDS = {"export": cmd_export, "import": cmd_import, "reembed": cmd_reembed}
