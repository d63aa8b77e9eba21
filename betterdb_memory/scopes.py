"""Scope-wide reads and deletions: list, count and forget_by_scope.

Every exact scope (namespace, agent, thread) keeps its own bookkeeping: a sorted
set of ids by creation time, in the scope's hash slot. A filter scope (None = any)
maps to the exact scopes inside it through the registry sets written beside each
write. So these operations cost O(matching scopes + results), never a scan of all
memories, and need no non-KNN query, which valkey-search 1.0 does not have.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._io import call
from .codec import as_text
from .errors import BetterDBMemoryError, ValidationError
from .escaping import tag_token
from .keys import Scope
from .models import MemoryItem, MemoryPage
from .validation import check_tags

if TYPE_CHECKING:
    from ._io import RetryPolicy
    from ._observe import StoreObservability
    from .keys import KeySpace

__all__ = ["ScopeOpsMixin"]

_FORGET_PAGE = 500


class ScopeOpsMixin:
    """Operations over whole scopes; mixed into ``MemoryStore``."""

    if TYPE_CHECKING:  # provided by MemoryStore
        keys: KeySpace
        retry: RetryPolicy
        _client: Any
        _forget_page_script: Any
        _obs: StoreObservability

        async def get_many(self, memory_ids: Sequence[str]) -> builtins.list[MemoryItem | None]: ...

        async def _wipe_consolidation_state(self, tag: str) -> int: ...

    async def matching_scopes(self, scope: Scope) -> builtins.list[Scope]:
        """The exact scopes written so far that fall inside filter ``scope``."""
        sets = self.keys.registry_filter_sets(scope)

        async def run() -> builtins.list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for s in sets:
                pipe.smembers(s)
            return list(await pipe.execute())

        members = await call("scopes", run, policy=self.retry)
        tags: set[str] = {as_text(m) for m in members[0]}
        for other in members[1:]:
            tags &= {as_text(m) for m in other}
        if not tags:
            return []
        ordered = sorted(tags)
        raw = await call(
            "scopes", lambda: self._client.hmget(self.keys.scope_info, ordered), policy=self.retry
        )
        out: builtins.list[Scope] = []
        for value in raw:
            if value is None:
                continue
            ns, agent, thread = json.loads(as_text(value))
            exact = Scope(namespace=ns, agent_id=agent, thread_id=thread)
            if scope.contains(exact):
                out.append(exact)
        return out

    async def _created_page(
        self, scopes: Sequence[Scope], after_score: float | None, after_id: str | None, count: int
    ) -> builtins.list[tuple[float, str]]:
        """Merge the newest ``count`` entries strictly after the cursor across scopes."""
        hi = "+inf" if after_score is None else repr(after_score)

        async def run() -> builtins.list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for s in scopes:
                # Inclusive bound, then skip ties already seen (same score, id >= cursor id
                # in reverse-lexicographic order); ties are rare and bounded.
                pipe.zrange(
                    self.keys.scope_created(s.tag), hi, "-inf", desc=True, byscore=True,
                    offset=0, num=count + 16, withscores=True,
                )  # fmt: skip
            return list(await pipe.execute())

        rows = await call("list", run, policy=self.retry) if scopes else []
        merged: builtins.list[tuple[float, str]] = []
        for row in rows:
            for member, score in row:
                mid = as_text(member)
                if (
                    after_score is not None
                    and score == after_score
                    and after_id is not None
                    and mid >= after_id
                ):
                    continue
                merged.append((float(score), mid))
        merged.sort(key=lambda e: (e[0], e[1]), reverse=True)
        return merged[:count]

    async def count(
        self, *, thread_id: str | None = None, agent_id: str | None = None, namespace: str | None = None
    ) -> int:
        """Number of memories in a scope, from the bookkeeping (O(scopes), not O(memories)).

        Memories whose TTL has passed are not counted, even before a later write in
        their scope sweeps their bookkeeping.
        """
        scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        scopes = await self.matching_scopes(scope)
        now = repr(time.time())

        async def run() -> builtins.list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for s in scopes:
                pipe.zcard(self.keys.scope_created(s.tag))
                pipe.zcount(self.keys.scope_expiry(s.tag), "-inf", now)
            return list(await pipe.execute())

        if not scopes:
            return 0
        rows = await call("count", run, policy=self.retry)
        return sum(max(0, int(rows[i]) - int(rows[i + 1])) for i in range(0, len(rows), 2))

    async def forget_by_scope(
        self,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
    ) -> int:
        """Delete every memory in a scope (and with any of ``tags``, when given).

        Refuses an empty scope (no ids and no tags): deleting everything is not a
        default. Pages through each exact scope's bookkeeping with a script that
        drops up to 500 memories per call, never fetching documents. Returns the
        exact number deleted; on a connection fault the error's ``details`` carry
        ``deleted`` (the count so far).
        """
        scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        tag_filter = check_tags(tags)
        if scope.is_empty and not tag_filter:
            raise ValidationError(
                "forget_by_scope needs a thread_id, agent_id, namespace or tags; refusing to delete everything",
                code="validation.empty_scope",
            )
        progress = [0]
        with self._obs.span("forget_by_scope"):
            try:
                return await self._forget_scopes(scope, [tag_token(t) for t in tag_filter], progress)
            except BetterDBMemoryError as exc:
                # Whatever step failed (scope lookup, a page, the history wipe), say how
                # many memories are gone already: the caller may simply call again.
                exc.details["operation"] = "forget_by_scope"
                exc.details["deleted"] = progress[0]
                raise

    async def _forget_scopes(
        self, scope: Scope, tokens: builtins.list[str], progress: builtins.list[int]
    ) -> int:
        deleted = 0
        for exact in await self.matching_scopes(scope):
            keys = [self.keys.doc(f"{exact.tag}-{'0' * 32}"), *self.keys.scope_keys(exact.tag)]
            start = 0
            while True:
                args = [self.keys.doc_prefix, str(start), str(_FORGET_PAGE), repr(time.time()), *tokens]

                async def run(args: builtins.list[str] = args, keys: builtins.list[str] = keys) -> Any:
                    return await self._forget_page_script(keys=keys, args=args)

                # Not retried blindly: report progress instead (the caller may call again).
                n_deleted, n_removed, n_scanned = (
                    int(x)
                    for x in await call(
                        "forget_by_scope",
                        run,
                        policy=self.retry,
                        idempotent=False,
                        details={"deleted": deleted},
                    )
                )
                deleted += n_deleted
                progress[0] = deleted
                if n_scanned < _FORGET_PAGE:
                    break
                start += n_scanned - n_removed
            if not tokens:
                # The whole exact scope is gone: fact history (kept out of the index)
                # goes too, so erasure leaves no superseded text behind.
                await self._wipe_consolidation_state(exact.tag)
        return deleted

    async def list(
        self,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> MemoryPage:
        """Memories of a scope, newest first, ``limit`` at a time.

        Paged by a cursor (the last item's creation time and id), not an offset, so
        page N costs the same as page 1. Reads each matching exact scope's
        ``created`` sorted set; runs on every engine version (no non-KNN query).
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ValidationError(
                "limit must be within 1..1000", code="validation.range", details={"argument": "limit"}
            )
        scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        tag_filter = check_tags(tags)
        after_score, after_id = _parse_cursor(cursor)
        scopes = await self.matching_scopes(scope)
        items: builtins.list[MemoryItem] = []
        bound_score, bound_id = after_score, after_id
        fetch = limit + 1
        while len(items) < limit + 1:
            entries = await self._created_page(scopes, bound_score, bound_id, fetch)
            if not entries:
                break
            fetched = await self.get_many([mid for _, mid in entries])
            for (score, mid), item in zip(entries, fetched, strict=True):
                bound_score, bound_id = score, mid
                if item is None:
                    continue
                if tag_filter and not set(tag_filter) & set(item.tags):
                    continue
                items.append(item)
            if len(entries) < fetch:
                break
        page = items[:limit]
        next_cursor = None
        if len(items) > limit and page:
            last = page[-1]
            next_cursor = f"{last.created_at!r}|{last.id}"
        return MemoryPage(page, next_cursor)


def _parse_cursor(cursor: object) -> tuple[float | None, str | None]:
    if cursor is None:
        return None, None
    if isinstance(cursor, str) and "|" in cursor:
        score_text, mid = cursor.split("|", 1)
        try:
            return float(score_text), mid
        except ValueError:
            pass
    raise ValidationError("cursor is not one this store returned", code="validation.cursor")
