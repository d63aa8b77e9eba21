"""The CLI's long-term memory commands: ``remember``, ``recall``, ``list``, ``forget``.

Each is one call of the public API with the scope options (``_cli_common``) and the time
and subject ones (``_cli_time``); ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from typing import Any

from . import _cli_time
from ._cli_common import EXIT_NOT_FOUND, EXIT_OK, scope_args
from .core.models import MemoryHit, MemoryItem
from .core.times import iso_of
from .errors import ValidationError
from .progress import Progress
from .store import MemoryStore

__all__ = ["COMMANDS"]


def _item_dict(item: MemoryItem) -> dict[str, Any]:
    return asdict(item)


def _print_items(items: Sequence[MemoryItem], as_json: bool) -> None:
    if as_json:
        print(json.dumps([_item_dict(i) for i in items], ensure_ascii=False))
        return
    for i in items:
        scope = "/".join(x or "-" for x in (i.namespace, i.agent_id, i.thread_id))
        # A past version (listed ``as_of`` an instant it was current) says until when.
        until = "" if i.valid_until is None else f"  (until {iso_of(i.valid_until)})"
        print(f"{i.id}  imp={i.importance:.2f}  [{scope}]  {i.content}{until}")


async def cmd_remember(store: MemoryStore, args: argparse.Namespace) -> int:
    mid = await store.remember(
        args.content,
        importance=args.importance,
        tags=args.tag or None,
        ttl=args.ttl,
        sensitivity=args.sensitivity,
        source=args.source,
        subject=args.subject,
        valid_from=_cli_time.time_value(args.valid_from),
        **scope_args(args),
    )
    print(json.dumps({"id": mid}) if args.json else mid)
    return EXIT_OK


async def cmd_recall(store: MemoryStore, args: argparse.Namespace) -> int:
    hits = await store.recall(
        args.query,
        k=args.k,
        threshold=args.threshold,
        tags=args.tag or None,
        explain=True,
        reinforce=False,
        tz=args.tz,
        **_cli_time.window_args(args),
        **scope_args(args),
    )
    if args.json:
        out = []
        for h in hits:
            parts = h.explain
            out.append(
                {
                    "id": h.item.id,
                    "content": h.item.content,
                    "score": h.score,
                    "similarity": h.similarity,
                    "distance": h.distance,
                    "recency": parts.recency if parts else None,
                    "importance": h.item.importance,
                    "valid_from": h.item.valid_from,
                    "valid_until": h.item.valid_until,
                    "superseded_by": parts.superseded_by if parts else None,
                    "time_window": parts.time_window if parts else None,
                }
            )
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(f"{'score':>6} {'sim':>6} {'rec':>6} {'imp':>5}  content")
        for h in hits:
            rec = h.explain.recency if h.explain else 0.0
            print(
                f"{h.score:6.3f} {h.similarity:6.3f} {rec:6.3f} {h.item.importance:5.2f}  {h.item.content}{_note(h)}"
            )
    return EXIT_OK if hits else EXIT_NOT_FOUND


def _note(hit: MemoryHit) -> str:
    """What a recalled line adds: a past version's end (``--as-of``), or the newer statement that
    ranks above it (same-slot supersession, ``explain.superseded_by``)."""
    if hit.item.valid_until is not None:
        return f"  (until {iso_of(hit.item.valid_until)})"
    newer = hit.explain.superseded_by if hit.explain else None
    return "" if newer is None else f"  (superseded by {newer})"


async def cmd_list(store: MemoryStore, args: argparse.Namespace) -> int:
    page = await store.list(
        limit=args.limit,
        cursor=args.cursor,
        tags=args.tag or None,
        **_cli_time.window_args(args),
        **scope_args(args),
    )
    if args.json:
        print(
            json.dumps(
                {
                    "items": [_item_dict(i) for i in page.items],
                    "next_cursor": page.next_cursor,
                    "total": page.total,
                },
                ensure_ascii=False,
            )
        )
    else:
        _print_items(page.items, False)
        if page.next_cursor:
            print(f"-- more: --cursor '{page.next_cursor}'")
    return EXIT_OK


async def cmd_forget(store: MemoryStore, args: argparse.Namespace) -> int:
    window = _cli_time.window_args(args)
    if args.id is None:  # a whole scope, with progress on standard error
        scope = scope_args(args)
        if not any(scope.values()) and not args.tag:
            raise ValidationError(
                "forget needs a memory id, or --thread / --agent / --namespace / --tag",
                code="validation.empty_scope",
            )
        n = await store.forget_by_scope(tags=args.tag or None, progress=Progress(), **window, **scope)
        print(json.dumps({"deleted": n}) if args.json else f"deleted {n}")
        return EXIT_OK
    if any(v is not None for v in window.values()):
        raise ValidationError(
            "--since / --until narrow a scope's forget, not one id's", code="validation.usage"
        )
    ok = await store.forget(args.id)
    print(json.dumps({"deleted": ok}) if args.json else ("deleted" if ok else "not found"))
    return EXIT_OK if ok else EXIT_NOT_FOUND


COMMANDS: dict[str, Callable[[MemoryStore, argparse.Namespace], Awaitable[int]]] = {
    "remember": cmd_remember,
    "recall": cmd_recall,
    "list": cmd_list,
    "forget": cmd_forget,
}
