"""LangChain's key-value ``BaseStore[str, bytes]`` in Valkey, beside the store's memories.

What LangChain uses it for: ``CacheBackedEmbeddings``, ``MultiVectorRetriever`` /
``ParentDocumentRetriever`` docstores, and its own ``create_kv_docstore``. Values are
bytes, kept as given. Each namespace is one hash slot (``KeySpace.kv``): its values
under ``<name>:kv:{<tag>}:v:<key>`` and a SET of its keys, which ``yield_keys`` reads
instead of a SCAN, so a listing is exact and cluster-correct. ``ttl`` (seconds) expires
values; the key SET keeps a name until the next ``mdelete`` or ``yield_keys`` finds its
value gone (then it is dropped).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.stores import BaseStore

from ...core.codec import as_text
from ...core.validation import check_number
from ...errors import ConfigurationError, ValidationError
from ...store import MemoryStore
from ._runner import AnyStore, StoreRunner

__all__ = ["MemoryStoreKV"]


class MemoryStoreKV(BaseStore[str, bytes]):
    """A LangChain key-value store of ``bytes`` under the store's name.

    Args:
        store: a ``SyncMemoryStore`` (sync and async methods) or a ``MemoryStore``.
        namespace: keeps several key-value stores apart on one store (default ``"default"``).
        ttl: seconds a value lives after it is set (None: forever).
    """

    def __init__(self, store: AnyStore, *, namespace: str = "default", ttl: float | None = None) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ConfigurationError(
                "namespace must be a non-empty string", details={"argument": "namespace"}
            )
        if ttl is not None:
            ttl = check_number(ttl, "ttl", positive=True, setting=True)
        self._runner = StoreRunner(store)
        self.namespace = namespace
        self.ttl_ms = None if ttl is None else max(1, int(ttl * 1000))
        self._prefix, self._keys = self._runner.store.keys.kv(namespace)

    def _key(self, key: str) -> str:
        if not isinstance(key, str):
            raise ValidationError(
                "keys must be strings", code="validation.type", details={"type": type(key).__name__}
            )
        return self._prefix + key

    # -- the operations (one coroutine each, run on either path by StoreRunner) ----------------

    async def _mget(self, store: MemoryStore, keys: Sequence[str]) -> list[bytes | None]:
        names = [self._key(k) for k in keys]

        def build(pipe: Any) -> None:
            for name in names:
                pipe.execute_command("GET", name)

        replies = await store.backend.pipeline("kv.get", build) if names else []
        return [None if r is None else r if isinstance(r, bytes) else str(r).encode() for r in replies]

    async def _mset(self, store: MemoryStore, pairs: Sequence[tuple[str, bytes]]) -> None:
        items = [(self._key(k), v) for k, v in pairs]
        for _, value in items:
            if not isinstance(value, bytes | bytearray):
                raise ValidationError("values must be bytes", code="validation.type")

        def build(pipe: Any) -> None:
            for name, value in items:
                if self.ttl_ms is None:
                    pipe.execute_command("SET", name, bytes(value))
                else:
                    pipe.execute_command("SET", name, bytes(value), "PX", self.ttl_ms)
            pipe.execute_command("SADD", self._keys, *[k for k, _ in pairs])

        if items:
            await store.backend.pipeline("kv.set", build)

    async def _mdelete(self, store: MemoryStore, keys: Sequence[str]) -> None:
        names = [self._key(k) for k in keys]

        def build(pipe: Any) -> None:
            pipe.execute_command("DEL", *names)
            pipe.execute_command("SREM", self._keys, *keys)

        if names:
            await store.backend.pipeline("kv.delete", build)

    async def _list(self, store: MemoryStore, prefix: str | None) -> list[str]:
        members = sorted(as_text(m) for m in await store.backend.command("kv.keys", "SMEMBERS", self._keys))
        wanted = [m for m in members if prefix is None or m.startswith(prefix)]
        if not wanted:
            return []

        def build(pipe: Any) -> None:
            for m in wanted:
                pipe.execute_command("EXISTS", self._prefix + m)

        alive = await store.backend.pipeline("kv.keys", build)
        gone = [m for m, e in zip(wanted, alive, strict=True) if not int(e)]
        if gone:  # expired values: drop their names
            await store.backend.command("kv.keys", "SREM", self._keys, *gone)
        return [m for m, e in zip(wanted, alive, strict=True) if int(e)]

    # -- BaseStore ---------------------------------------------------------------------------

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        return self._runner.call(self._mget, keys)

    async def amget(self, keys: Sequence[str]) -> list[bytes | None]:
        return await self._runner.acall(self._mget, keys)

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        self._runner.call(self._mset, key_value_pairs)

    async def amset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        await self._runner.acall(self._mset, key_value_pairs)

    def mdelete(self, keys: Sequence[str]) -> None:
        self._runner.call(self._mdelete, keys)

    async def amdelete(self, keys: Sequence[str]) -> None:
        await self._runner.acall(self._mdelete, keys)

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        yield from self._runner.call(self._list, prefix)

    async def ayield_keys(self, *, prefix: str | None = None) -> AsyncIterator[str]:
        for key in await self._runner.acall(self._list, prefix):
            yield key
