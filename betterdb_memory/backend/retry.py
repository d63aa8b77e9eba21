"""The thin I/O helpers every tier shares: retries with bounded backoff, error translation.

Backend exceptions are caught here and nowhere else; callers get the library's
error tree (``translate``). Idempotent operations (reads, searches, writes
whose id is fixed client-side) are retried on connection faults with exponential
backoff and full jitter, within an attempt count and a time budget; the others
raise ``StoreConnectionError`` at the first fault with what is known in ``details``.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import BetterDBMemoryError
from .translate import is_connection_error, translate

__all__ = ["RetryPolicy", "again", "call", "honour_cancel"]

T = TypeVar("T")

_LOSES_CANCELS = sys.version_info < (3, 12)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try again after a connection fault.

    Args:
        attempts: total tries for an idempotent operation (1 = no retry).
        base_delay: first backoff in seconds; doubles each try, with full jitter.
        max_delay: cap of one backoff.
        budget: seconds after which no new attempt starts.
    """

    attempts: int = 4
    base_delay: float = 0.05
    max_delay: float = 1.0
    budget: float = 10.0


async def call(
    operation: str,
    fn: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    idempotent: bool = True,
    details: Mapping[str, Any] | None = None,
    on_fault: Callable[[], None] | None = None,
) -> T:
    """Run ``fn``, retrying connection faults when ``idempotent``; translate every error.

    ``on_fault`` is called at every connection fault, retried or not (the backend notes
    that the server may have restarted).
    """
    start = time.monotonic()
    try:
        result = await fn()
    except BetterDBMemoryError:
        raise
    except Exception as exc:
        failed = exc  # retried outside this handler: a later attempt's error is not chained to this one
    else:
        honour_cancel()
        return result
    return await again(
        operation, fn, failed, start=start, policy=policy, idempotent=idempotent, details=details,
        on_fault=on_fault,
    )  # fmt: skip


async def again(
    operation: str,
    fn: Callable[[], Awaitable[T]],
    exc: Exception,
    *,
    start: float,
    policy: RetryPolicy,
    idempotent: bool = True,
    details: Mapping[str, Any] | None = None,
    on_fault: Callable[[], None] | None = None,
) -> T:
    """The rest of ``call`` once its first attempt, begun at ``start`` (``time.monotonic``), raised ``exc``.

    The backend's one-command paths make their first attempt inline (no closure, no
    frame per layer: issue 29's budget for the library's Python per call) and hand a
    failure here; what follows is ``call``'s: the same attempts, budget and errors.
    """
    attempt = 1
    while True:
        fault = is_connection_error(exc)
        if fault and on_fault is not None:
            on_fault()
        retry = (
            idempotent and fault and attempt < policy.attempts and time.monotonic() - start < policy.budget
        )
        if not retry:
            extra = dict(details or {})
            extra["attempts"] = attempt
            raise translate(exc, operation=operation, details=extra) from exc
        delay = min(policy.max_delay, policy.base_delay * (2 ** (attempt - 1)))
        await asyncio.sleep(random.uniform(0, delay))
        attempt += 1
        try:
            result = await fn()
        except BetterDBMemoryError:
            raise
        except Exception as failed:
            exc = failed
        else:
            honour_cancel()
            return result


def honour_cancel() -> None:
    """Raise ``CancelledError`` when the current task was cancelled while its reply came in.

    Python 3.11's asyncio.wait_for (which valkey-py wraps sends in when a socket
    timeout is set) can swallow a cancellation that lands as the send completes
    (CPython gh-86296). Honour it here, so a cancelled task stops at our boundary.
    """
    if _LOSES_CANCELS:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError
