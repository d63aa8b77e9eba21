"""Writes under a caller's id: what the memory being replaced keeps, and what it leaves behind.

``remember(..., id=)`` and ``update`` replace the memory stored under that id, if
any: its creation time, last access, access count and ``valid_from`` (unless the
write gives one) carry over, an unchanged text
is not embedded again, and the replaced version goes to the front of the memory's
update history (``backend.scripts.REPLACE``, kept to ``HISTORY_MAX`` versions). An id
whose memory another client deleted (betterdb-agent-memory's ``forget`` deletes the
document only) may still have an access counter or a history: a new memory under it
starts without them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend.commands import Command
from ..core.codec import as_text, decode_vector, split_tags, to_float, to_int
from ..core.record import Previous, history_entry
from .runtime import Runtime

__all__ = ["HISTORY_MAX", "Existing", "read_existing"]

#: Versions kept in a memory's update history (``history``).
HISTORY_MAX = 20

# What an upsert reads of the memory it replaces.
_UPSERT_FIELDS = (
    "content", "vector", "created_at", "last_accessed_at", "access_count", "importance", "tags", "metadata",
    "valid_from",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Existing:
    """A stored memory an upsert replaces: its text and vector, its life so far, its history line."""

    content: str
    vector: np.ndarray[Any, np.dtype[np.float32]] | None
    previous: Previous
    entry: str


async def read_existing(rt: Runtime, ids: Sequence[str], now_ms: int) -> tuple[dict[str, Existing], set[str]]:
    """The memories already stored under caller ids (one pipelined read): what an upsert keeps.

    Also the ids with no memory but an access counter or an update history left
    behind: the memory was deleted by another client (betterdb-agent-memory's
    ``forget``, an expiry), and a new one under its id must not inherit them.
    """
    keys = rt.keys

    reads: list[Command] = []
    for mid in ids:
        reads += [
            ("HMGET", keys.doc(mid), *_UPSERT_FIELDS),
            ("GET", keys.access(mid)),
            ("EXISTS", keys.updates(mid)),
        ]
    rows = await rt.backend.pipeline("remember", reads)
    out: dict[str, Existing] = {}
    leftovers: set[str] = set()
    for n, mid in enumerate(ids):
        f = dict(zip(_UPSERT_FIELDS, rows[3 * n], strict=True))
        if f["content"] is None:
            if rows[3 * n + 1] is not None or rows[3 * n + 2]:
                leftovers.add(mid)
            continue
        content = as_text(f["content"])
        raw_meta = as_text(f["metadata"])
        try:
            meta = json.loads(raw_meta) if raw_meta else {}
        except ValueError:
            meta = {}
        out[mid] = Existing(
            content=content,
            vector=decode_vector(f["vector"]) if f["vector"] else None,
            previous=Previous(
                created_at=to_int(f["created_at"]) or now_ms,
                last_accessed_at=to_int(f["last_accessed_at"]) or now_ms,
                access_count=max(to_int(f["access_count"]), to_int(rows[3 * n + 1])),
                valid_from=to_int(f["valid_from"]) if f["valid_from"] else None,
            ),
            entry=history_entry(
                content,
                to_float(f["importance"], 0.5),
                split_tags(f["tags"]),
                meta if isinstance(meta, dict) else {},
                replaced_at_ms=now_ms,
            ),
        )
    return out, leftovers
