"""The history index ``<name>:hist:idx``: superseded versions, where ``as_of`` finds them.

A superseded version of a memory leaves the reference's prefix for its history
document ``<name>:hist:{<name>:mem:<id>}`` (``scripts.RETIRE``: same slot, every field
of the memory plus ``valid_until`` in ms, ``superseded_by``, ``retracted``). The
reference library and BetterDB Monitor never name this index, so their counts and
``count``, caps and ``stats().items`` (all on ``<name>:mem:idx``) see current memories
only, while ``as_of`` (``core.validity.history_valid_at``) reads past versions here.

The index is new: created with ``FT.CREATE`` when absent (no migration of the main
index). Before it is created, fact history written before time support is rewritten:
its ``valid_until`` was ISO 8601 text, and a history document with a non-numeric
``valid_until`` would be dropped whole from a RediSearch index (dialect point 12; on
valkey-search it would be indexed without the field, so ``as_of`` would never reach it).
Those documents are found through the fact ledger's keys (``<name>:cons:targets`` ->
each target's subjects -> each subject's history set), never by a SCAN.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from ..core.codec import as_text
from ..core.dialect import Capabilities
from ..core.ft_info import IndexInfo, parse_ft_info
from ..core.history_mark import FIELD_HISTORY, settle
from ..core.keys import ConsolidationKeys, KeySpace, Scope
from ..core.query import VECTOR_FIELD, IndexLayout, IndexSpec
from ..core.times import to_ms
from ..errors import ConfigurationError, IndexExistsError, ValidationError
from .commands import Step
from .protocol import Backend
from .scripts import HISTORY_MARK

__all__ = ["HISTORY_LAYOUT", "HistoryIndex", "history_index_args", "history_index_name"]

log = logging.getLogger(__name__)

#: What the history index holds, for ``build_filter`` (no keep-score, dedup or text fields).
HISTORY_FIELDS: frozenset[str] = frozenset(
    {
        VECTOR_FIELD, "threadId", "agentId", "namespace", "tags", "source", "sensitivity", "kind",
        "importance", "created_at", "expires_at", "valid_from", "valid_until", "subject_key",
    }
)  # fmt: skip
HISTORY_LAYOUT = IndexLayout(keep=False, dedup=False, text=False, state_from=False, fields=HISTORY_FIELDS)


def history_index_name(keys: KeySpace) -> str:
    """``<name>:hist:idx`` (a name, not a key: no document is ever stored under it)."""
    return f"{keys.history_prefix()}idx"


def history_index_args(spec: IndexSpec, keys: KeySpace) -> list[str]:
    """FT.CREATE of the history index: the main index's vector parameters, the fields reads filter on."""
    vector_params = [
        "TYPE", "FLOAT32",
        "DIM", str(spec.dimensions),
        "DISTANCE_METRIC", "COSINE",
        "M", str(spec.m),
        "EF_CONSTRUCTION", str(spec.ef_construction),
        "EF_RUNTIME", str(spec.ef_runtime),
    ]  # fmt: skip
    exact = "CASESENSITIVE"
    schema = [
        VECTOR_FIELD, "VECTOR", "HNSW", str(len(vector_params)), *vector_params,
        "threadId", "TAG", exact,
        "agentId", "TAG", exact,
        "namespace", "TAG", exact,
        "tags", "TAG", "SEPARATOR", ",", exact,
        "source", "TAG", exact,
        "sensitivity", "TAG", exact,
        "kind", "TAG", exact,
        "subject_key", "TAG", exact,
        "importance", "NUMERIC",
        "created_at", "NUMERIC", "SORTABLE",
        "expires_at", "NUMERIC",
        "valid_from", "NUMERIC",
        "valid_until", "NUMERIC",
    ]  # fmt: skip
    name = history_index_name(keys)
    return ["FT.CREATE", name, "ON", "HASH", "PREFIX", "1", keys.history_prefix(), "SCHEMA", *schema]


def numeric_ms(value: Any) -> str | None:
    """A stored ``valid_until`` as ms text: itself if numeric, ISO text converted, None if neither."""
    text = as_text(value).strip()
    if not text:
        return None
    try:
        return str(int(float(text)))
    except ValueError:
        pass
    try:
        return str(to_ms(text, name="valid_until"))
    except ValidationError:
        return None


class HistoryIndex:
    """Create ``<name>:hist:idx`` when absent (the main index's ensure path calls ``ensure``)."""

    def __init__(self, backend: Backend, keys: KeySpace) -> None:
        self.backend = backend
        self.keys = keys
        self.name = history_index_name(keys)
        self.layout = HISTORY_LAYOUT

    async def ensure(self, spec: IndexSpec, caps: Capabilities) -> None:
        """Create the index if absent, after rewriting legacy fact history; idempotent, safe to race."""
        del caps  # same schema on both engines (no TEXT field here)
        reply = await self.backend.index_info(self.name)
        if reply is not None:
            info = parse_ft_info(reply)
            if info.dimensions is None or info.dimensions == spec.dimensions:
                await self._settle(info)
                return
            # Left by an earlier store of this name with another model (its main index and
            # meta hash deleted, this one not): empty, it is rebuilt; holding versions, refused.
            if info.num_docs:
                raise ConfigurationError(
                    f"history index {self.name} holds {info.dimensions}-d vectors but this store's "
                    f"embedder makes {spec.dimensions}-d vectors; use another store name, or drop "
                    "the old versions (FT.DROPINDEX and their keys)",
                    code="configuration.dimension_mismatch",
                    details={"index": self.name, "index_dimensions": info.dimensions,
                             "embedder_dimensions": spec.dimensions},
                )  # fmt: skip
            await self.backend.search("ensure_index", ["FT.DROPINDEX", self.name])
        await self.rewrite_legacy()
        with contextlib.suppress(IndexExistsError):
            await self.backend.search("ensure_index", history_index_args(spec, self.keys))
        if self.backend.cluster:
            return  # FT.INFO counts one shard; recalls there always ask the history index
        for _ in range(40):  # a new index over no document is built at once; bounded (2 s)
            reply = await self.backend.index_info(self.name)
            if reply is None or parse_ft_info(reply).ready:
                break
            await asyncio.sleep(0.05)
        if reply is not None:
            await self._settle(parse_ft_info(reply))

    async def _settle(self, info: IndexInfo) -> None:
        """Record whether the store may hold past versions (``core.history_mark``), single server only.

        On a cluster FT.INFO counts one shard and recalls always ask the history index.
        """
        if self.backend.cluster:
            return
        what = settle(num_docs=info.num_docs, ready=info.ready)
        steps: list[Step] = []
        if what == "mark":  # documents there, maybe unmarked: "1", unless a writer's bound stands
            steps = [HISTORY_MARK.call([self.keys.meta], ["?"])]
        elif what == "none":
            steps = [("HSETNX", self.keys.meta, FIELD_HISTORY, "0")]
        if steps:
            await self.backend.pipeline("ensure_index", steps)

    async def rewrite_legacy(self) -> int:
        """``valid_until`` of the fact history to ms (ISO text before time support); how many rewritten."""
        backend = self.backend
        targets = await backend.command("ensure_index", "HGETALL", self.keys.consolidation_targets)
        cks: list[ConsolidationKeys] = []
        for value in targets.values():
            try:
                ns, agent, thread = json.loads(as_text(value))
            except (ValueError, TypeError):
                continue
            cks.append(ConsolidationKeys(self.keys, Scope(namespace=ns, agent_id=agent, thread_id=thread)))
        if not cks:
            return 0
        digests = await backend.pipeline("ensure_index", [("HKEYS", ck.subjects) for ck in cks])
        sets = [ck.history(as_text(d)) for ck, ds in zip(cks, digests, strict=True) for d in ds]
        owners = [ck for ck, ds in zip(cks, digests, strict=True) for _ in ds]
        members = await backend.pipeline("ensure_index", [("ZRANGE", s, 0, -1) for s in sets]) if sets else []
        docs = sorted({ck.hist_doc(as_text(m)) for ck, ms in zip(owners, members, strict=True) for m in ms})
        return await self._rewrite(docs)

    async def _rewrite(self, docs: Sequence[str]) -> int:
        if not docs:
            return 0
        values = await self.backend.pipeline("ensure_index", [("HGET", d, "valid_until") for d in docs])
        fixes: list[tuple[str, ...]] = []
        for doc, value in zip(docs, values, strict=True):
            if value is None:
                continue
            ms = numeric_ms(value)
            if ms is not None and ms != as_text(value):
                fixes.append(("HSET", doc, "valid_until", ms))
        if fixes:
            await self.backend.pipeline("ensure_index", fixes)
            log.info("history index: %d fact history documents' valid_until rewritten to ms", len(fixes))
        return len(fixes)
