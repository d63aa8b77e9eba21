"""Move a store to another embedding model or dimension in place, resumably, with a short recall gap.

The seed contract fixes the index name (``<name>:mem:idx``), its prefix and the vector
field (``vector``), and neither engine has index aliases, so the new vectors cannot be
indexed beside the old ones and switched over: the index must be dropped and created
again. What this module does is keep that gap to the part that cannot be avoided:

1. **Embed** (recall keeps working on the old index). Every document's new vector is
   computed in batches and parked in a side key beside it,
   ``<name>:__mem_reembed:{<name>:mem:<id>}`` (the document's hash slot), with the SHA-1
   of the content it was made from; fact-history documents likewise
   (``<name>:__mem_reembed:hist:{...}``). A second, read-only pass catches documents
   written or changed meanwhile. This is the long part, and it is resumable: the run
   state is ``<name>:__mem_reembed`` (target model, dimension, phase), and a document
   whose side key matches its content is never embedded twice. A crash, a failing
   model or Ctrl-C loses at most the batch in flight; run the same command again.
2. **Switch** (recall unavailable). The meta hash ``<name>:__mem_meta`` is set to the
   new model first (so a process with the old model refuses the store from then on,
   and one with the new model that re-creates a missing index creates the right one),
   the index is dropped (``FT.DROPINDEX`` without ``DD``: documents stay), each side
   vector is moved into its document's ``vector`` field by a one-slot script that
   checks the content is unchanged (plain ``HSET`` s with no index to update: the
   fastest write there is), and the index is created again.
3. **Backfill** (recall partial). The engine indexes the documents in the background;
   this waits until FT.INFO says it is done, then sweeps the store once more and
   re-embeds any document whose vector still has the old length (written by an old
   process during the switch), so none is left out of the index.

The state key is deleted at the end. Writers using the old model must be stopped
before the switch (they would write vectors of the old length; the final sweep fixes
what they wrote before it ran, not after). A second concurrent run waits on
``<name>:__mem_reembed:lock`` and fails with ``ConsolidationBusyError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..backend import Backend, scripts
from ..backend.commands import Command
from ..core.codec import as_text, to_int
from ..core.keys import ConsolidationKeys, Scope
from ..core.query import VECTOR_FIELD, IndexSpec, create_index_args
from ..core.validation import check_int
from ..embedders.base import Embedder
from ..errors import ConfigurationError, IndexExistsError, IndexNotFoundError
from ..progress import ProgressSink, check_progress
from ._scan import embed_encoded, ids_under

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["ReembedResult", "reembed"]

_OPERATION = "reembed"


@dataclass(frozen=True, slots=True)
class ReembedResult:
    """What a re-embedding did.

    Attributes:
        model_id / dimensions: the model the store is on now.
        previous_model_id: what the meta hash named before (None when it named nothing).
        embedded: vectors computed by this run (a resumed run skips what an earlier one did).
        fixed: of those, documents found with an old-length vector after the switch.
        history: fact-history documents moved to the new model.
        unavailable_seconds: from FT.DROPINDEX until the new index existed (recall failed).
        backfill_seconds: from FT.CREATE until the engine finished indexing (recall partial).
        resumed: an earlier run of the same move was continued.
        already: the store was on this model already; nothing was done.
    """

    model_id: str
    dimensions: int
    previous_model_id: str | None
    embedded: int = 0
    fixed: int = 0
    history: int = 0
    unavailable_seconds: float = 0.0
    backfill_seconds: float = 0.0
    resumed: bool = False
    already: bool = False


def _sha1(content: Any) -> str:
    raw = content if isinstance(content, bytes) else str(content).encode("utf-8")
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest()


class _Run:
    """One re-embedding of one store (the phases of the module docstring)."""

    def __init__(self, store: MemoryStore, embedder: Embedder, batch: int, sink: ProgressSink) -> None:
        self.store, self.embedder, self.batch, self.sink = store, embedder, batch, sink
        self.backend, self.keys = store.backend, store.keys
        self.state_key = store.keys.reembed
        self.lock_key = f"{self.state_key}:lock"
        self.hist = ConsolidationKeys(store.keys, Scope())
        self.target = {"model_id": embedder.model_id, "dimensions": str(embedder.dimensions)}
        self.embedded = 0
        self.fixed = 0
        self.history = 0

    # -- key names: documents, history documents and their side keys ---------------------------------

    def doc(self, memory_id: str, kind: str) -> str:
        return self.keys.doc(memory_id) if kind == "memory" else self.hist.hist_doc(memory_id)

    def doc_prefix(self, kind: str) -> str:
        """``<name>:mem:`` or ``<name>:hist:{<name>:mem:`` (a history key ends in ``}``)."""
        return (
            self.keys.doc_prefix
            if kind == "memory"
            else self.keys.history_prefix() + "{" + self.keys.doc_prefix
        )

    def side_prefix(self, kind: str) -> str:
        return f"{self.state_key}:{'hist:' if kind == 'history' else ''}{{{self.keys.doc_prefix}"

    def side(self, memory_id: str, kind: str) -> str:
        """Where a document's new vector waits: the document's hash slot, outside the index prefix."""
        return f"{self.side_prefix(kind)}{memory_id}}}"

    async def docs(self, kind: str) -> AsyncIterator[list[str]]:
        """Batches of the ids of every document of ``kind``."""
        prefix = self.doc_prefix(kind)
        suffix = "" if kind == "memory" else "}"
        async for names in self.backend.scan(_OPERATION, prefix + "*"):
            yield ids_under(names, prefix, suffix)

    # -- phase 1: embed into side keys -------------------------------------------------------------

    async def embed_pass(self, kind: str, label: str, total: int | None) -> None:
        """Give every document of ``kind`` a side vector of its current content (those without one)."""
        self.sink.begin(label, total)
        async for ids in self.docs(kind):
            read: list[Command] = []
            for mid in ids:
                doc = self.doc(mid, kind)
                read += [("HGET", doc, "content"), ("HGET", self.side(mid, kind), "h"), ("PTTL", doc)]
            replies = await self.backend.pipeline(_OPERATION, read) if ids else []
            todo = []
            for n, mid in enumerate(ids):
                content, digest, pttl = replies[3 * n : 3 * n + 3]
                if content is None:
                    continue  # deleted since the scan saw it
                sha = _sha1(content)
                if as_text(digest) != sha:
                    todo.append((mid, as_text(content), sha, to_int(pttl, -1)))
            self.sink.advance(len(ids) - len(todo))
            for start in range(0, len(todo), self.batch):
                chunk = todo[start : start + self.batch]
                vectors = await self.vectors([c[1] for c in chunk])

                write: list[Command] = []
                for (mid, _, sha, pttl), vec in zip(chunk, vectors, strict=True):
                    side = self.side(mid, kind)
                    write.append(("HSET", side, "v", vec, "h", sha))
                    if pttl > 0:  # a side key never outlives its document
                        write.append(("PEXPIRE", side, pttl))
                await self.backend.pipeline(_OPERATION, write)
                self.embedded += len(chunk)
                self.sink.advance(len(chunk))
        self.sink.end()

    async def vectors(self, texts: list[str]) -> list[bytes]:
        """Encoded vectors of ``texts``, checked and normalised as the store's own writes are."""
        return await embed_encoded(self.embedder, texts)

    # -- phase 2: switch ------------------------------------------------------------------------------

    async def move_side_vectors(self, kind: str, label: str, total: int | None) -> int:
        """Move every side vector of ``kind`` into its document's ``vector``; the number moved."""
        prefix = self.side_prefix(kind)
        moved = 0
        self.sink.begin(label, total)
        async for names in self.backend.scan(_OPERATION, prefix + "*"):
            ids = ids_under(names, prefix, "}")

            pairs = [[self.doc(mid, kind), self.side(mid, kind)] for mid in ids]
            groups = [pairs] if not self.backend.cluster else [[p] for p in pairs]

            swaps = [scripts.REEMBED_SWAP.call([k for pair in group for k in pair]) for group in groups]
            outs = await self.backend.pipeline(_OPERATION, swaps) if ids else []
            replies = [int(r) for out in outs for r in out]
            moved += sum(1 for r in replies if int(r) == 1)
            changed = [mid for mid, r in zip(ids, replies, strict=True) if int(r) == -1]
            if changed:  # the content changed after its side vector was made
                await self.rewrite(kind, changed)
            self.sink.advance(len(ids))
        self.sink.end()
        return moved

    async def rewrite(self, kind: str, ids: list[str]) -> int:
        """Embed the current content of ``ids`` into their ``vector`` now (plain HSETs); the number written."""
        keys = [self.doc(mid, kind) for mid in ids]

        contents = await self.backend.pipeline(_OPERATION, [("HGET", key, "content") for key in keys])
        live = [(k, mid, as_text(c)) for k, mid, c in zip(keys, ids, contents, strict=True) if c is not None]
        for start in range(0, len(live), self.batch):
            chunk = live[start : start + self.batch]
            vectors = await self.vectors([c[2] for c in chunk])

            # Plain HSET (not a script: the index may exist, valkey-search #1260). A document
            # deleted in the moment since its content was read would come back as a stub;
            # writers are stopped during the switch (README), so that moment is empty.
            write: list[Command] = []
            for (key, mid, _), vec in zip(chunk, vectors, strict=True):
                write += [("HSET", key, VECTOR_FIELD, vec), ("DEL", self.side(mid, kind))]
            await self.backend.pipeline(_OPERATION, write)
        self.embedded += len(live)
        return len(live)

    async def sweep(self, kind: str, label: str, total: int | None) -> int:
        """Embed again every document whose vector does not have the new length; the number fixed."""
        size = self.embedder.dimensions * 4
        fixed = 0
        self.sink.begin(label, total)
        async for ids in self.docs(kind):
            read = [("HSTRLEN", self.doc(mid, kind), VECTOR_FIELD) for mid in ids]
            lengths = await self.backend.pipeline(_OPERATION, read) if ids else []
            wrong = [mid for mid, n in zip(ids, lengths, strict=True) if int(n) != size]
            if wrong:
                fixed += await self.rewrite(kind, wrong)
            self.sink.advance(len(ids))
        self.sink.end()
        return fixed

    async def switch(self, total: int | None) -> tuple[float, float]:
        """Phases 2 and 3; returns (seconds without an index, seconds of backfill)."""
        backend, keys, index = self.backend, self.keys, self.store.index
        dims = self.embedder.dimensions
        # The meta first: from here a process with the old model refuses the store, and one
        # with the new model that finds the index missing creates the new one.
        await backend.command(
            _OPERATION, "HSET", keys.meta,
            "model_id", self.target["model_id"], "dimensions", self.target["dimensions"],
        )  # fmt: skip
        caps = index.capabilities or await backend.probe()
        current = await index.info()
        dropped_at = None
        if current is not None and current.dimensions != dims:
            dropped_at = time.monotonic()
            with contextlib.suppress(IndexNotFoundError):
                await backend.search(_OPERATION, ["FT.DROPINDEX", index.name])  # no DD: documents stay
            # The history index holds vectors of the old length too: the next ensure makes it anew.
            with contextlib.suppress(IndexNotFoundError):
                await backend.search(_OPERATION, ["FT.DROPINDEX", index.history.name])
        index.ready = False  # the store's own view of the index is stale from here on
        await self.move_side_vectors("memory", "reembed: switch vectors", total)
        m, efc, efr = index.hnsw
        spec = IndexSpec(
            index=index.name,
            prefix=keys.doc_prefix,
            dimensions=dims,
            m=m,
            ef_construction=efc,
            ef_runtime=efr,
        )
        created_at = time.monotonic()
        try:
            await backend.search(_OPERATION, create_index_args(spec, caps))
        except IndexExistsError:
            made = await index.info()  # another process with the new model created it meanwhile
            if made is not None and made.dimensions not in (None, dims):
                raise
        unavailable = created_at - dropped_at if dropped_at is not None else 0.0
        await self.wait_ready(total)
        backfill = time.monotonic() - created_at
        self.fixed += await self.sweep("memory", "reembed: check", total)
        self.history += await self.move_side_vectors("history", "reembed: switch fact history", None)
        self.fixed += await self.sweep("history", "reembed: check fact history", None)
        if self.fixed:
            await self.wait_ready(total)
        return unavailable, backfill

    async def wait_ready(self, total: int | None) -> None:
        """Until the engine has indexed every document (FT.INFO), showing the indexed count."""
        self.sink.begin("reembed: build index", total)
        shown = 0
        while True:
            info = await self.store.index.info()
            if info is None:
                break
            if info.num_docs > shown:
                self.sink.advance(info.num_docs - shown)
                shown = info.num_docs
            if info.ready:
                break
            await asyncio.sleep(0.05)
        self.sink.end()


async def reembed(
    store: MemoryStore,
    embedder: Embedder,
    *,
    batch: int = 256,
    progress: ProgressSink | None = None,
    lock_wait: float = 5.0,
) -> ReembedResult:
    """Re-embed every memory of ``store`` with ``embedder`` and move the store to it, in place.

    Ends with the same index name, prefix and vector field, the meta hash naming the
    new model, so ``MemoryStore(name=..., embedder=embedder)`` opens the store. Run it
    again after a crash or an error: it continues where it stopped. Recall keeps
    working while vectors are computed; it is unavailable from the index drop until
    the index is created again, and partial until the engine has indexed every
    document (see the module docstring and README, "Re-embedding"). ``store`` may be
    built with the old or the new embedder; afterwards use a store built with the new
    one (with the old one, its next call raises ``ConfigurationError``).

    Args:
        embedder: the new model (any ``Embedder``; its ``dimensions`` may differ).
        batch: texts per embedding call.
        progress: a ``ProgressSink``.
        lock_wait: seconds to wait for another run of this store to finish.

    Raises:
        ConfigurationError: a half-finished move to another model is switching (finish
            it with that model first), or ``batch`` is not positive.
        ConsolidationBusyError: another run holds the store's re-embedding lock.
        EmbeddingError / any error of the embedder: nothing is lost; run again.
    """
    check_int(batch, "batch", minimum=1)
    sink = check_progress(progress)
    run = _Run(store, embedder, batch, sink)
    backend = store.backend
    async with backend.lock(run.lock_key, ttl=30.0, wait=lock_wait) as lock:
        state = await _hash(backend, run.state_key)
        meta = await _hash(backend, store.keys.meta)
        target = run.target
        resumed = bool(state)
        if state and {k: state.get(k) for k in target} != target:
            if state.get("phase") == "switching":
                raise ConfigurationError(
                    f"store {store.name!r} is half-way through a move to {state.get('model_id')!r} "
                    f"({state.get('dimensions')}-d); finish it with that model first",
                    code="configuration.reembed_in_progress",
                    details={"model_id": state.get("model_id"), "dimensions": state.get("dimensions")},
                )
            await _discard(run)  # an abandoned move to another model: start over
            state, resumed = {}, False
        previous = state.get("from_model") or meta.get("model_id") or None
        info = await store.index.info()
        on_target = {k: meta.get(k) for k in target} == target
        if not state and on_target and (info is None or info.dimensions in (None, embedder.dimensions)):
            return ReembedResult(embedder.model_id, embedder.dimensions, previous, already=True)
        total = info.num_docs if info else None
        if not state:
            fields = {**target, "phase": "embedding", "from_model": meta.get("model_id", ""),
                      "started_at": str(int(time.time() * 1000))}  # fmt: skip
            await backend.command(
                _OPERATION, "HSET", run.state_key, *[x for kv in fields.items() for x in kv]
            )
            state = fields
        if state.get("phase") == "embedding":
            await run.embed_pass("memory", "reembed: embed", total)
            await run.embed_pass("history", "reembed: embed fact history", None)
            await run.embed_pass("memory", "reembed: catch up", total)  # written meanwhile
            lock.check()  # never switch after another run may have taken over
            await backend.command(_OPERATION, "HSET", run.state_key, "phase", "switching")
        lock.check()
        unavailable, backfill = await run.switch(total)
        await backend.command(_OPERATION, "DEL", run.state_key)
    return ReembedResult(
        model_id=embedder.model_id,
        dimensions=embedder.dimensions,
        previous_model_id=previous,
        embedded=run.embedded,
        fixed=run.fixed,
        history=run.history,
        unavailable_seconds=unavailable,
        backfill_seconds=backfill,
        resumed=resumed,
    )


async def _hash(backend: Backend, key: str) -> dict[str, str]:
    raw = await backend.command(_OPERATION, "HGETALL", key)
    return {as_text(k): as_text(v) for k, v in raw.items()}


async def _discard(run: _Run) -> None:
    """Delete the side keys of an abandoned move to another model, and its state."""
    for kind in ("memory", "history"):
        prefix = run.side_prefix(kind)
        async for names in run.backend.scan(_OPERATION, prefix + "*"):
            await run.backend.pipeline(_OPERATION, [("UNLINK", name) for name in names])
    await run.backend.command(_OPERATION, "DEL", run.state_key)
