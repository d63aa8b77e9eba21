"""``_Delegate``: how ``MemoryStore`` exposes a part's method as its own, written once where it is.

``store.recall`` is ``store._recall.recall``: the signature, the docstring (``help``,
IDEs) and the types (mypy reads them through ``__get__``) are the part's, and on the
class ``MemoryStore.recall`` is the part's function itself (``inspect.signature``,
``scripts/gen_sync.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["_Delegate"]

P = ParamSpec("P")
R = TypeVar("R")


class _Delegate(Generic[P, R]):
    """A store method that is a part's method: ``store.recall`` is ``store._recall.recall``.

    Written once, where the behaviour is: the signature, the docstring (``help``, IDEs)
    and the types (mypy reads them through ``__get__``) are the part's. On the class,
    ``MemoryStore.recall`` is the part's function itself (``inspect.signature``, the
    generated ``SyncMemoryStore``); a non-data descriptor, so an instance attribute of
    the same name (a test double) still wins.
    """

    def __init__(self, part: str, fn: Callable[Concatenate[Any, P], R]) -> None:
        self.part = part
        self.fn = fn
        self.__doc__ = fn.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self.fn
        return getattr(getattr(obj, self.part), self.fn.__name__)
