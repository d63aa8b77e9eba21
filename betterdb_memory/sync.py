"""Blocking ``SyncMemoryStore`` / ``SyncAgentMemory``: the async classes, run on a private loop thread.

For scripts, notebooks and the synchronous halves of LangChain and LangGraph. Nothing
here re-implements an operation: each sync object owns one event loop in a daemon
thread, the async object lives on that loop, and every method is *generated* from
the async class when this module is imported::

    caller thread(s)                          private loop thread ("betterdb-memory-...")
    store.recall(q, k=3) ── run_coroutine_threadsafe ──▶ await MemoryStore.recall(q, k=3)
         blocks on the concurrent future ◀── result / the same typed exception ──┘

What is generated, from the public members of ``MemoryStore`` / ``AgentMemory``:

* a coroutine method becomes a blocking method with the same name, ``__doc__`` and
  ``__signature__`` (``inspect``), whose call runs the coroutine on the loop thread and
  returns its result or raises its exception (the same ``BetterDBMemoryError``
  subclasses, ``code`` and ``details``);
* a plain method (``current_config``) runs on the loop thread too, so the async object
  is only ever touched from its own thread;
* a property is read (and, where the async one has a setter, written) through;
* a classmethod coroutine (``connect``) becomes a classmethod building the sync object.

A method added to the async class appears here without a change to this module. Type
checkers cannot derive one class from another, so each sync class also spells its
members out in an ``if TYPE_CHECKING:`` block, one line per name, the types taken
from the async method by ``ParamSpec`` (``remember = _blocking(MemoryStore.remember)``:
mypy sees ``remember(content: str, *, importance: float | None = ..., ...) -> str``).
``tests/unit/test_sync_surface.py`` fails when a public member lacks its line.

Why no ``SyncMemoryStore(client=...)``: a ``valkey.asyncio`` client belongs to the
event loop it is used on (its connections are that loop's streams, its pool's
waiters that loop's futures). A client handed in may already have been used on the
caller's loop, or be used there later, and then fails on one of the two ("attached to
a different loop") or hangs. So the client is built on the private loop and used
nowhere else: ``connect(url, ...)`` does it as ``MemoryStore.connect`` does, and
``wrap(factory)`` calls your factory there (your own pool, a cluster client, an
``AgentMemory`` with a custom client).

Threads and loops: any number of threads may call one sync object at once (the async
store is safe for concurrent tasks on its loop). Calling from a thread that runs its
own event loop (a Jupyter cell, inside ``asyncio.run``) works: that thread blocks
while the private loop does the work, so do not do it from latency-sensitive async
code (use the async class there). Calling from the private loop's own thread (an
embedder, summariser or callback of this store calling the sync API) would wait for
itself forever and raises ``SyncReentrancyError`` instead. The seams you pass in
(``embed_fn``, summarisers, extractors) run on the private loop: give them clients
they create lazily, not ones bound to your loop.

``close()`` (or leaving ``with``) refuses new calls, gives the calls still running in
other threads up to ``CLOSE_GRACE_SECONDS`` to finish, closes the async object on its
loop, then stops the loop (cancelling what is left) and joins its thread. Calls made
afterwards raise ``StoreClosedError`` (``AgentMemoryClosedError`` for the facade). A
sync object dropped without ``close()`` is closed the same way when garbage-collected
or at interpreter exit (where an embedded server it started may outlive the process,
as after a crash; the next ``connect`` attaches to it).
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401 - its exit hook must be registered before ours (_open_objects)
import contextlib
import inspect
import itertools
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Concatenate,
    Generic,
    Never,
    ParamSpec,
    Protocol,
    Self,
    TypeVar,
    cast,
    overload,
)

from ._loop_thread import CLOSE_GRACE_SECONDS, Closer, LoopThread, SyncReentrancyError, invoke
from .errors import StoreClosedError
from .facade import AgentMemory, AgentMemoryClosedError
from .store import MemoryStore

__all__ = ["CLOSE_GRACE_SECONDS", "SyncAgentMemory", "SyncMemoryStore", "SyncReentrancyError"]

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
A = TypeVar("A")  # the async class a sync one runs
B = TypeVar("B")

_thread_numbers = itertools.count(1)


# -- what the generated members look like to a type checker --------------------------------


class _SyncMethod(Protocol[P, R_co]):
    """A generated method: the async method's parameters, the awaited result."""

    @overload
    def __get__(self, obj: None, owner: type[Any], /) -> Callable[Concatenate[Any, P], R_co]: ...
    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None, /) -> Callable[P, R_co]: ...


class _SyncConstructor(Protocol[P]):
    """A generated constructor (``connect``): the async one's parameters, the sync class built."""

    def __get__(self, obj: object, owner: type[B], /) -> Callable[P, B]: ...


class _ReadOnly(Protocol[T_co]):
    """A forwarded property without a setter."""

    @overload
    def __get__(self, obj: None, owner: type[Any], /) -> property: ...
    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None, /) -> T_co: ...
    def __set__(self, obj: object, value: Never, /) -> None: ...


class _ReadWrite(Protocol[T]):
    """A forwarded property with a setter."""

    @overload
    def __get__(self, obj: None, owner: type[Any], /) -> property: ...
    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None, /) -> T: ...
    def __set__(self, obj: object, value: T, /) -> None: ...


# -- the generators ---------------------------------------------------------------------------


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    """The async member's signature, annotations evaluated where they can be (for runtime tools)."""
    try:
        return inspect.signature(fn, eval_str=True)
    except Exception:  # an annotation only a type checker resolves: keep the strings
        return inspect.signature(fn)


def _describe(wrapper: Any, source: Callable[..., Any], signature: inspect.Signature) -> None:
    """Give ``wrapper`` the name, docstring and signature of ``source`` (no ``__wrapped__``:
    tools that unwrap would then take the blocking method for a coroutine function)."""
    wrapper.__name__ = source.__name__
    wrapper.__qualname__ = source.__qualname__
    wrapper.__doc__ = source.__doc__
    wrapper.__signature__ = signature
    annotations = {p.name: p.annotation for p in signature.parameters.values() if p.annotation is not p.empty}
    if signature.return_annotation is not signature.empty:
        annotations["return"] = signature.return_annotation
    wrapper.__annotations__ = annotations


def _blocking(fn: Callable[Concatenate[Any, P], Awaitable[R]]) -> _SyncMethod[P, R]:
    """A blocking method that runs the async method ``fn`` of the target on the loop thread."""
    name = fn.__name__

    def method(self: _Bridge[Any], /, *args: Any, **kwargs: Any) -> Any:
        return self._loop.call(getattr(self._target, name), *args, **kwargs)

    _describe(method, fn, _signature(fn))
    return cast("_SyncMethod[P, R]", method)


def _on_loop(fn: Callable[Concatenate[Any, P], R]) -> _SyncMethod[P, R]:
    """A plain method of the target, run on the loop thread (the target is only touched there)."""
    return _blocking(cast("Callable[Concatenate[Any, P], Awaitable[R]]", fn))


def _constructor(fn: Callable[P, Awaitable[Any]]) -> _SyncConstructor[P]:
    """A classmethod building the sync object from the async classmethod ``fn`` (bound to its class)."""

    def build(cls: type[_Bridge[Any]], /, *args: Any, **kwargs: Any) -> Any:
        return cls._start(lambda: fn(*args, **kwargs))

    signature = _signature(fn)
    _describe(build, fn, signature.replace(
        parameters=[inspect.Parameter("cls", inspect.Parameter.POSITIONAL_ONLY), *signature.parameters.values()],
        return_annotation=inspect.Signature.empty,  # set to the sync class by _install
    ))  # fmt: skip
    return cast("_SyncConstructor[P]", classmethod(build))


def _forward(prop: Callable[[Any], T]) -> _ReadOnly[T]:
    """The async class's property, read through (and written through if it has a setter)."""
    source = cast(property, prop)
    name = source.fget.__name__ if source.fget is not None else "?"

    def get(self: _Bridge[Any]) -> Any:
        return getattr(self._target, name)

    def set_(self: _Bridge[Any], value: Any) -> None:
        setattr(self._target, name, value)

    return cast("_ReadOnly[T]", property(get, set_ if source.fset is not None else None, doc=source.__doc__))


def _forward_settable(prop: Callable[[Any], T]) -> _ReadWrite[T]:
    return cast("_ReadWrite[T]", _forward(prop))


def _attribute(owner: type[A], read: Callable[[A], T], doc: str | None = None) -> _ReadOnly[T]:
    """A plain instance attribute of the async object, read through (typed by ``read``)."""

    def get(self: _Bridge[Any]) -> Any:
        return read(self._target)

    return cast("_ReadOnly[T]", property(get, doc=doc))


def _is_delegate(value: object) -> bool:
    """A method descriptor other than the kinds handled by name (``store._Delegate``)."""
    return (
        hasattr(value, "__get__")
        and not inspect.isfunction(value)
        and not isinstance(value, property | classmethod | staticmethod)
        and hasattr(value, "fn")
    )


def _public_members(cls: type) -> Iterator[tuple[str, object]]:
    seen: dict[str, object] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for k, v in vars(klass).items():
            if k.startswith("_"):
                continue
            if _is_delegate(v):  # a method the store takes from one of its parts: its function
                v = v.__get__(None, klass)
            seen[k] = v
    yield from seen.items()


def _install(sync_cls: type[_Bridge[Any]], async_cls: type) -> None:
    """Generate every public member of ``async_cls`` on ``sync_cls`` that it does not define itself."""
    for name, member in _public_members(async_cls):
        if name in sync_cls._not_forwarded or hasattr(sync_cls, name):
            continue
        value: Any
        if isinstance(member, property):
            value = _forward(cast("Callable[[Any], Any]", member))
        elif isinstance(member, classmethod) and inspect.iscoroutinefunction(member.__func__):
            value = _constructor(getattr(async_cls, name))
            value.__func__.__signature__ = value.__func__.__signature__.replace(return_annotation=sync_cls)
        elif inspect.iscoroutinefunction(member):
            value = _blocking(cast("Callable[..., Awaitable[Any]]", member))
        elif inspect.isfunction(member):
            value = _on_loop(member)
        else:
            continue
        func = value.__func__ if isinstance(value, classmethod) else value
        if inspect.isfunction(func):
            func.__qualname__ = f"{sync_cls.__name__}.{name}"
            func.__module__ = sync_cls.__module__
        setattr(sync_cls, name, value)


# -- opening and closing the async object on the loop ------------------------------------------


async def _open(factory: Callable[[], object], kind: type) -> tuple[Any, Closer]:
    """Call ``factory`` on the loop; return the async object and how to close it."""
    made = factory()
    if isinstance(made, kind):
        return made, cast("Any", made).close
    if isinstance(made, AbstractAsyncContextManager):
        cm = made
        target = await cm.__aenter__()
        if not isinstance(target, kind):
            await cm.__aexit__(None, None, None)
            raise TypeError(
                f"the factory's context manager yielded {type(target).__name__}, not {kind.__name__}"
            )
        return target, lambda: cm.__aexit__(None, None, None)
    if inspect.isawaitable(made):
        target = await made
        if not isinstance(target, kind):
            close = getattr(target, "close", None)
            if callable(close):  # the factory opened something: do not leak it
                with contextlib.suppress(Exception):
                    await invoke(close, (), {})
            raise TypeError(f"the factory's awaitable returned {type(target).__name__}, not {kind.__name__}")
        return target, cast("Any", target).close
    raise TypeError(
        f"the factory must return a {kind.__name__}, an awaitable of one or an async context manager"
        f" yielding one, not {type(made).__name__}"
    )


def _finalize(loop: LoopThread, closer: Closer) -> None:
    """Close an abandoned sync object (garbage-collected, or at interpreter exit); never raises."""
    try:
        loop.shutdown(closer)
    except Exception as exc:
        log.debug("closing an abandoned sync object failed: %r", exc)


# Sync objects still open when the interpreter exits are closed by a *threading* exit hook:
# it runs before concurrent.futures refuses new work ("cannot schedule new futures after
# interpreter shutdown"), which plain atexit handlers run after, and closing needs the
# default executor (MemoryStore.close stops an embedded server with asyncio.to_thread).
# The thread pool module is imported first so that its hook, registered earlier, runs
# later (they run in reverse). weakref.finalize's own atexit call remains the fallback.
_open_objects: weakref.WeakSet[_Bridge[Any]] = weakref.WeakSet()


def _close_open_objects_at_exit() -> None:
    for obj in list(_open_objects):
        if obj._finalizer is not None:
            obj._finalizer()


_register_threading_atexit = getattr(threading, "_register_atexit", None)  # CPython >= 3.9, private
if _register_threading_atexit is not None:
    _register_threading_atexit(_close_open_objects_at_exit)


class _Bridge(Generic[A]):
    """What the sync classes share: the loop thread, the async target, construction and close."""

    _async_class: ClassVar[type]
    _not_forwarded: ClassVar[frozenset[str]] = frozenset()
    _loop: LoopThread
    _target: A
    _closer: Closer
    _owns_loop: bool
    _closing: bool
    _close_lock: threading.Lock
    _finalizer: weakref.finalize[Any, Any] | None

    def __init__(self, *args: object, **kwargs: object) -> None:
        name = type(self).__name__
        raise TypeError(
            f"build a {name} with {name}.connect(url, ...) or {name}.wrap(factory): its async client"
            " must be created on the private event loop it runs on, not passed in"
        )

    @classmethod
    def _closed_error(cls) -> BaseException:
        return StoreClosedError("the store was closed; build a new one", code="state.closed")

    @classmethod
    def _start(cls, factory: Callable[[], object]) -> Self:
        loop = LoopThread(f"betterdb-memory-loop-{next(_thread_numbers)}", cls._closed_error)
        try:
            target, closer = loop.call(_open, factory, cls._async_class)
        except BaseException:
            loop.shutdown(None)
            raise
        return cls._attach(loop, target, closer, owns_loop=True)

    @classmethod
    def _attach(cls, loop: LoopThread, target: A, closer: Closer, *, owns_loop: bool) -> Self:
        self = object.__new__(cls)
        self._loop = loop
        self._target = target
        self._closer = closer
        self._owns_loop = owns_loop
        self._closing = False
        self._close_lock = threading.Lock()
        self._finalizer = None
        if owns_loop:
            self._finalizer = weakref.finalize(self, _finalize, loop, closer)
            _open_objects.add(self)
        return self

    @classmethod
    def wrap(cls, factory: Callable[[], A | Awaitable[A] | AbstractAsyncContextManager[A]]) -> Self:
        """Run ``factory`` on the private loop and wrap what it builds.

        ``factory`` (called with no arguments, on the loop thread) returns the async
        object, an awaitable of it, or an async context manager yielding it. Build the
        ``valkey.asyncio`` client inside it, never outside: a client belongs to the
        loop it runs on. ``close()`` then closes what the factory built: the object's
        ``close()``, or the context manager's exit (where you close a client you made)::

            @contextlib.asynccontextmanager
            async def open_store():
                async with valkey.asyncio.Valkey.from_url(url) as client:   # your client, your pool
                    async with MemoryStore(client=client, name="app") as store:
                        yield store

            store = SyncMemoryStore.wrap(open_store)

        Raises:
            TypeError: the factory built something other than this class's async object.
        """
        return cls._start(factory)

    def close(self) -> None:
        """Close the async object on its loop, then stop and join the loop thread.

        Idempotent and safe from any thread. Calls made from then on raise
        ``StoreClosedError`` (``AgentMemoryClosedError`` for ``SyncAgentMemory``); calls
        already running in other threads get ``CLOSE_GRACE_SECONDS`` (10 s) to finish
        before the store closes under them.

        Raises:
            SyncReentrancyError: called from the private loop's own thread.
        """
        self._loop.refuse_reentry(self.close)
        with self._close_lock:
            if self._closing:
                return
            self._closing = True
        if self._finalizer is not None:
            self._finalizer.detach()
            _open_objects.discard(self)
        if self._owns_loop:
            self._loop.shutdown(self._closer)
        elif not self._loop.closing:  # a view (SyncAgentMemory.memory): close the store, keep the loop
            self._loop.call(self._closer)

    def __enter__(self) -> Self:
        """What the async object's ``async with`` does on entry (``AgentMemory``: ``initialize()``)."""
        self._loop.call(cast("Any", self._target).__aenter__)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closing else "open"
        return f"<{type(self).__name__} {state} {self._target!r}>"


# -- the sync classes ---------------------------------------------------------------------------


class SyncMemoryStore(_Bridge[MemoryStore]):
    """``MemoryStore`` with blocking methods, run on a private event-loop thread.

    Every public method of ``MemoryStore`` is here with the same name, parameters,
    defaults, docstring and exceptions, returning what the coroutine returns::

        with SyncMemoryStore.connect(url, name="app") as store:
            store.remember("Ada lives in Lisbon.", thread_id="ada")
            hits = store.recall("Where does Ada live?", thread_id="ada")

    Build one with ``connect`` (the arguments of ``MemoryStore.connect``: a URL or the
    embedded server, and every constructor option) or ``wrap(factory)`` (your own
    client, made on the private loop); ``SyncMemoryStore(client=...)`` is refused,
    because an async client belongs to one event loop (see the module docstring).
    ``close()`` or ``with`` closes it. Safe to call from several threads at once and
    from a thread that runs its own event loop; see ``betterdb_memory.sync``.

    ``client`` is not forwarded (an async client bound to the private loop is of no
    use in the caller's thread); ``async_store`` is the ``MemoryStore`` itself, for
    code that runs on that loop.
    """

    _async_class = MemoryStore
    _not_forwarded = frozenset({"client"})

    name = _attribute(MemoryStore, lambda s: s.name, "The store name: key prefix and index name.")
    embedder = _attribute(MemoryStore, lambda s: s.embedder, "The store's embedder.")
    default_threshold = _attribute(
        MemoryStore, lambda s: s.default_threshold, "The constructor's cosine-distance ceiling of a hit."
    )
    weights = _attribute(MemoryStore, lambda s: s.weights, "The constructor's composite score weights.")
    half_life_seconds = _attribute(MemoryStore, lambda s: s.half_life_seconds, "The recency half-life.")
    max_items_per_scope = _attribute(
        MemoryStore, lambda s: s.max_items_per_scope, "The constructor's capacity per scope (None: no cap)."
    )

    @property
    def async_store(self) -> MemoryStore:
        """The ``MemoryStore`` behind this object; use it only in code running on its loop."""
        return self._target

    if TYPE_CHECKING:  # generated at import by _install; spelled out for type checkers
        connect = _constructor(MemoryStore.connect)
        state = _forward(MemoryStore.state)
        metrics = _forward_settable(MemoryStore.metrics)
        capabilities = _forward(MemoryStore.capabilities)
        layout = _forward(MemoryStore.layout)
        spec = _forward(MemoryStore.spec)
        near_misses = _forward(MemoryStore.near_misses)
        fact_source = _forward(MemoryStore.fact_source)
        fact_importance = _forward(MemoryStore.fact_importance)
        dedup = _forward(MemoryStore.dedup)
        reranker = _forward(MemoryStore.reranker)
        rerank_candidates = _forward(MemoryStore.rerank_candidates)
        candidate_factor = _forward(MemoryStore.candidate_factor)
        reinforce_mode = _forward(MemoryStore.reinforce_mode)
        session_config = _forward(MemoryStore.session_config)
        consolidation_lock_ttl = _forward_settable(MemoryStore.consolidation_lock_ttl)
        consolidation_lock_wait = _forward_settable(MemoryStore.consolidation_lock_wait)
        config_defaults = _on_loop(MemoryStore.config_defaults)
        current_config = _on_loop(MemoryStore.current_config)
        effective_threshold = _on_loop(MemoryStore.effective_threshold)
        refresh_config = _blocking(MemoryStore.refresh_config)
        ensure_discovery_ready = _blocking(MemoryStore.ensure_discovery_ready)
        ensure_config_refresh_started = _blocking(MemoryStore.ensure_config_refresh_started)
        ensure_index = _blocking(MemoryStore.ensure_index)
        index_info = _blocking(MemoryStore.index_info)
        stats = _blocking(MemoryStore.stats)
        remember = _blocking(MemoryStore.remember)
        update = _blocking(MemoryStore.update)
        history = _blocking(MemoryStore.history)
        remember_many = _blocking(MemoryStore.remember_many)
        get = _blocking(MemoryStore.get)
        get_many = _blocking(MemoryStore.get_many)
        forget = _blocking(MemoryStore.forget)
        recall = _blocking(MemoryStore.recall)
        recall_by_vector = _blocking(MemoryStore.recall_by_vector)
        search_candidates = _blocking(MemoryStore.search_candidates)
        count = _blocking(MemoryStore.count)
        list = _blocking(MemoryStore.list)
        forget_by_scope = _blocking(MemoryStore.forget_by_scope)
        erase = _blocking(MemoryStore.erase)
        store_turn = _blocking(MemoryStore.store_turn)
        get_recent_turns = _blocking(MemoryStore.get_recent_turns)
        get_session_metadata = _blocking(MemoryStore.get_session_metadata)
        clear_session = _blocking(MemoryStore.clear_session)
        retrieve_context = _blocking(MemoryStore.retrieve_context)
        extract_memories = _blocking(MemoryStore.extract_memories)
        summarize_session = _blocking(MemoryStore.summarize_session)
        consolidate = _blocking(MemoryStore.consolidate)
        consolidate_facts = _blocking(MemoryStore.consolidate_facts)
        fact_history = _blocking(MemoryStore.fact_history)
        purge_fact_history = _blocking(MemoryStore.purge_fact_history)


class _SyncView:
    """A blocking view of an async object that is not ours (the cache tiers of betterdb-agent-cache).

    Its coroutine methods block on the loop thread, its plain methods run there, an
    attribute holding another such object is viewed the same way, anything else is
    returned as it is. Untyped (``Any``), as the cache tiers are.
    """

    __slots__ = ("_loop", "_target")

    def __init__(self, loop: LoopThread, target: object) -> None:
        self._loop = loop
        self._target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_"):
            return value
        if inspect.iscoroutinefunction(value) or inspect.ismethod(value):
            loop = self._loop

            def call(*args: Any, **kwargs: Any) -> Any:
                return loop.call(value, *args, **kwargs)

            _describe(call, value, _signature(value))
            return call
        if _has_coroutine_methods(value):
            return _SyncView(self._loop, value)
        return value

    def __repr__(self) -> str:
        return f"<blocking view of {self._target!r}>"


def _has_coroutine_methods(value: object) -> bool:
    kind = type(value)
    if kind.__module__ == "builtins":
        return False
    return any(inspect.iscoroutinefunction(member) for _, member in _public_members(kind))


class SyncAgentMemory(_Bridge[AgentMemory]):
    """``AgentMemory`` with blocking methods, on a private event-loop thread.

    ``connect(url, ...)`` takes ``AgentMemory.connect``'s arguments; ``wrap(factory)``
    runs a factory of your own on the private loop (``AgentMemory(client=...)`` with a
    client made there). ``with`` calls ``initialize()`` first, as ``async with`` does.
    ``memory`` is a ``SyncMemoryStore`` on the same loop; ``llm``, ``tool``, ``session``
    and ``cache`` are blocking views of the cache tiers (``agent.llm.check(params)``
    returns the ``LlmCacheResult``). What ``SyncMemoryStore`` says about threads,
    event loops and ``close`` holds here.
    """

    _async_class = AgentMemory

    @classmethod
    def _closed_error(cls) -> BaseException:
        return AgentMemoryClosedError("this AgentMemory is closed; create a new one")

    @property
    def memory(self) -> SyncMemoryStore:
        """The long-term memory tier, blocking (closing it closes the async store, as ``agent.memory.close()`` does)."""
        store = self._target.memory  # raises AgentMemoryClosedError once closed
        view: SyncMemoryStore | None = self.__dict__.get("_memory_view")
        if view is None or view._target is not store:
            view = SyncMemoryStore._attach(self._loop, store, store.close, owns_loop=False)
            self.__dict__["_memory_view"] = view
        return view

    @property
    def cache(self) -> Any:
        """The ``AgentCache`` behind ``llm`` / ``tool`` / ``session``, as a blocking view."""
        return _SyncView(self._loop, self._target.cache)

    @property
    def llm(self) -> Any:
        """LLM response cache tier, blocking (``check`` / ``store`` / ``store_multipart`` ...)."""
        return _SyncView(self._loop, self._target.llm)

    @property
    def tool(self) -> Any:
        """Tool result cache tier, blocking (``check`` / ``store`` / ``set_policy`` ...)."""
        return _SyncView(self._loop, self._target.tool)

    @property
    def session(self) -> Any:
        """Session state tier, blocking (``get`` / ``set`` / ``get_all`` / ``destroy_thread`` ...)."""
        return _SyncView(self._loop, self._target.session)

    @property
    def async_agent(self) -> AgentMemory:
        """The ``AgentMemory`` behind this object; use it only in code running on its loop."""
        return self._target

    if TYPE_CHECKING:  # generated at import by _install; spelled out for type checkers
        connect = _constructor(AgentMemory.connect)
        name = _forward(AgentMemory.name)
        closed = _forward(AgentMemory.closed)
        initialize = _blocking(AgentMemory.initialize)
        erase = _blocking(AgentMemory.erase)


_install(SyncMemoryStore, MemoryStore)
_install(SyncAgentMemory, AgentMemory)
