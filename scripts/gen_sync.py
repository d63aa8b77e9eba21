"""Write ``betterdb_memory/sync.py`` from the async classes (what httpcore's ``unasync`` does, for one module).

    python scripts/gen_sync.py           # (re)write betterdb_memory/sync.py
    python scripts/gen_sync.py --check   # exit 1 if it is stale (make check, tests/unit/test_gen_sync.py)

The async classes (``MemoryStore``, ``AgentMemory``) are the source of truth. For each
public member of one, the sync class gets the explicit member that does the same thing
blocking, with the async member's parameters, annotations, defaults and docstring, read
from its source:

* a coroutine method -> a method whose body is ``return self._await(self._target.m, ...)``
  (run on the private loop thread, ``_sync_bridge.Bridge._await``);
* a plain method -> the same through ``self._apply`` (the async object is only ever
  touched on its own thread);
* a property (and its setter) -> a property reading (writing) the async one; one that
  returns an async class with a sync twin (``AgentMemory.memory``) returns the twin, a
  view on the same loop;
* a public attribute the async class declares in its body (``name: str`` plus its
  docstring) -> a read-only property;
* a coroutine classmethod (``connect``) -> a classmethod building the sync object.

Members the hand-written base class (``_sync_bridge.MemoryStoreBridge`` /
``AgentMemoryBridge``) defines, and its ``_not_forwarded`` ones, are left to it. The
output goes through ``ruff check --fix --select I`` and ``ruff format`` (the project's
settings), so the check compares against formatted text. The package is imported with
``betterdb_memory.sync`` stubbed out, so a stale or broken sync.py never stops its own
regeneration.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import difflib
import importlib
import importlib.util
import inspect
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "betterdb_memory"
TARGET = ROOT / PACKAGE / "sync.py"

HEADER = """\
# GENERATED FILE: written by scripts/gen_sync.py from MemoryStore and AgentMemory. Do not edit.
# Change the async class (or the generator, or betterdb_memory/_sync_bridge.py) and run
# `python scripts/gen_sync.py`; `make check` runs it with --check and fails while this file is stale.
# Generated, so exempt from the 450-line limit on modules.
"""

MODULE_DOC = '''\
"""Blocking ``SyncMemoryStore`` / ``SyncAgentMemory``: the async classes, run on a private loop thread.

For scripts, notebooks and the synchronous halves of LangChain and LangGraph. Nothing
here re-implements an operation: each sync object owns one event loop in a daemon
thread, the async object lives on that loop, and every method runs the async one there::

    caller thread(s)                          private loop thread ("betterdb-memory-...")
    store.recall(q, k=3) ── run_coroutine_threadsafe ──▶ await MemoryStore.recall(q, k=3)
         blocks on the concurrent future ◀── result / the same typed exception ──┘

This module is generated from ``MemoryStore`` / ``AgentMemory`` by ``scripts/gen_sync.py``
(``make check`` fails when it is stale), so each member below has the async member's
name, parameters, defaults, annotations and docstring:

* a coroutine method becomes a blocking method that runs the coroutine on the loop
  thread and returns its result or raises its exception (the same
  ``BetterDBMemoryError`` subclasses, ``code`` and ``details``);
* a plain method (``current_config``) runs on the loop thread too, so the async object
  is only ever touched from its own thread;
* a property is read (and, where the async one has a setter, written) through;
* a classmethod coroutine (``connect``) becomes a classmethod building the sync object.

What is not a translation (the loop, opening and closing, ``wrap``, ``async_store``, the
cache tiers' blocking views) is hand-written in ``betterdb_memory._sync_bridge``.

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
'''

STORE_DOC = '''\
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
    """'''

AGENT_DOC = '''\
"""``AgentMemory`` with blocking methods, on a private event-loop thread.

    ``connect(url, ...)`` takes ``AgentMemory.connect``'s arguments; ``wrap(factory)``
    runs a factory of your own on the private loop (``AgentMemory(client=...)`` with a
    client made there). ``with`` calls ``initialize()`` first, as ``async with`` does.
    ``memory`` is a ``SyncMemoryStore`` on the same loop; ``llm``, ``tool``, ``session``
    and ``cache`` are blocking views of the cache tiers (``agent.llm.check(params)``
    returns the ``LlmCacheResult``). What ``SyncMemoryStore`` says about threads,
    event loops and ``close`` holds here.
    """'''


@dataclass(frozen=True)
class Pair:
    """One sync class to write: its name, the async class (module, name), its hand-written base, its doc."""

    sync_name: str
    async_module: str
    async_name: str
    base: str
    doc: str


PAIRS = (
    Pair("SyncMemoryStore", f"{PACKAGE}.store", "MemoryStore", "MemoryStoreBridge", STORE_DOC),
    Pair("SyncAgentMemory", f"{PACKAGE}.facade", "AgentMemory", "AgentMemoryBridge", AGENT_DOC),
)


class GenerationError(Exception):
    """The async classes hold something the generator cannot translate faithfully."""


# -- importing the package without the module being generated -------------------------------------


def import_package() -> None:
    """Import the package with ``betterdb_memory.sync`` stubbed (what it imports from it: placeholders)."""
    sys.path.insert(0, str(ROOT))
    stub = types.ModuleType(f"{PACKAGE}.sync")

    def placeholder(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})

    stub.__dict__["__getattr__"] = placeholder  # PEP 562: what `from .sync import X` gets
    sys.modules[stub.__name__] = stub
    importlib.import_module(PACKAGE)
    loaded = importlib.import_module(f"{PACKAGE}.store")
    if not loaded.__file__ or not Path(loaded.__file__).is_relative_to(ROOT):
        raise GenerationError(f"imported {PACKAGE} from {loaded.__file__}, not from {ROOT}")


# -- where a name used in an annotation or default comes from ---------------------------------------


@dataclass
class Imports:
    """The imports the generated module needs: local name -> (module, name in it), or module imports."""

    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)  # local name -> module (``import numpy as np``)

    def need(self, local: str, module: str, name: str) -> None:
        have = self.names.get(local)
        if have is not None and have != (module, name):
            if _load(*have) is not _load(module, name):
                raise GenerationError(f"{local!r} means {have} in one place and {(module, name)} in another")
            if len(have[0]) <= len(module):
                return
        self.names[local] = (module, name)

    def need_module(self, local: str, module: str) -> None:
        if self.modules.setdefault(local, module) != module:
            raise GenerationError(f"{local!r} is module {self.modules[local]} and {module}")

    def render(self) -> str:
        lines = [
            f"import {m} as {local}" if m != local else f"import {m}" for local, m in self.modules.items()
        ]
        by_module: dict[str, list[str]] = {}
        for local, (module, name) in self.names.items():
            by_module.setdefault(module, []).append(name if name == local else f"{name} as {local}")
        for module, names in by_module.items():
            lines.append(f"from {_relative(module)} import {', '.join(sorted(set(names)))}")
        return "\n".join(lines)


def _relative(module: str) -> str:
    return "." + module[len(PACKAGE) + 1 :] if module.startswith(PACKAGE + ".") else module


def _load(module: str, name: str) -> object:
    return getattr(importlib.import_module(module), name)


def _load_class(module: str, name: str) -> type:
    loaded = _load(module, name)
    if not isinstance(loaded, type):
        raise GenerationError(f"{module}.{name} is not a class")
    return loaded


_MODULE_NAMES: dict[str, dict[str, tuple[str, str | None]]] = {}


def module_names(module: str) -> dict[str, tuple[str, str | None]]:
    """Each name a module binds at top level or imports anywhere (``TYPE_CHECKING`` blocks too):
    name -> (module it comes from, name there), or (module, None) for ``import m as name``."""
    if module in _MODULE_NAMES:
        return _MODULE_NAMES[module]
    mod = importlib.import_module(module)
    tree = ast.parse(inspect.getsource(mod))
    package = module if hasattr(mod, "__path__") else module.rpartition(".")[0]
    out: dict[str, tuple[str, str | None]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = (module, node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update((t.id, (module, t.id)) for t in targets if isinstance(t, ast.Name))
    for found in ast.walk(tree):
        if isinstance(found, ast.ImportFrom):
            source = importlib.util.resolve_name("." * found.level + (found.module or ""), package)
            out.update((a.asname or a.name, (source, a.name)) for a in found.names)
        elif isinstance(found, ast.Import):
            out.update((a.asname or a.name.partition(".")[0], (a.name, None)) for a in found.names)
    _MODULE_NAMES[module] = out
    return out


class _Resolver(ast.NodeTransformer):
    """Records the imports an expression needs; a builtin shadowed by a member becomes ``builtins.x``."""

    def __init__(self, module: str, imports: Imports, shadowed: set[str]) -> None:
        self.module, self.imports, self.shadowed = module, imports, shadowed

    def visit_Name(self, node: ast.Name) -> ast.AST:
        name = node.id
        found = module_names(self.module).get(name)
        if found is None:
            if not hasattr(builtins, name):
                raise GenerationError(f"{name!r} (in {self.module}) is neither imported nor a builtin")
            if name in self.shadowed:
                self.imports.need_module("builtins", "builtins")
                return ast.copy_location(
                    ast.Attribute(ast.Name("builtins", ast.Load()), name, ast.Load()), node
                )
            return node
        if name in self.shadowed:
            raise GenerationError(f"{name!r} (from {found[0]}) is also a member of the sync class")
        source, original = found
        if original is None:
            self.imports.need_module(name, source)
        else:
            self.imports.need(name, source, original)
        return node


# -- reading a member's definition ---------------------------------------------------------


@dataclass
class Source:
    """A function's definition as written: its AST (dedented), its module, its real ``__doc__``."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    module: str
    doc: str | None


def source_of(fn: Callable[..., Any]) -> Source:
    fn = inspect.unwrap(fn)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        raise GenerationError(f"{fn.__qualname__}: not a function definition")
    return Source(node, fn.__module__, fn.__doc__)


def docstring(doc: str | None) -> str:
    """The docstring line(s) of a generated member: a literal whose value is exactly ``doc``.

    Methods keep their indentation (a class body's, in both files), so the text is the same.
    """
    if doc is None:
        return ""
    if '"""' in doc or doc.endswith('"') or doc.endswith("\\"):
        raise GenerationError(f"cannot quote this docstring faithfully: {doc[:60]!r}")
    return "        " + ("r" if "\\" in doc else "") + f'"""{doc}"""\n'


@dataclass
class Emitter:
    """Writes one sync class's members."""

    pair: Pair
    imports: Imports
    shadowed: set[str]
    twins: dict[str, str]  # async class name -> sync class name
    out: list[str] = field(default_factory=list)

    def expr(self, node: ast.expr, module: str, *, annotation: bool = True) -> str:
        if annotation and isinstance(node, ast.Constant) and isinstance(node.value, str):  # quoted
            node = ast.parse(node.value, mode="eval").body
        return ast.unparse(_Resolver(module, self.imports, self.shadowed).visit(node))

    def params(self, src: Source) -> tuple[str, str]:
        """(the parameter list after ``self`` / ``cls``, the call's argument list)."""
        a = src.node.args
        positional = [*a.posonlyargs, *a.args][1:]  # without self / cls
        posonly = a.posonlyargs[1:]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        parts: list[str] = []
        call: list[str] = []

        def one(arg: ast.arg, default: ast.expr | None) -> str:
            text = arg.arg
            if arg.annotation is not None:
                text += f": {self.expr(arg.annotation, src.module)}"
            if default is not None:
                value = self.expr(default, src.module, annotation=False)
                text += f" = {value}" if arg.annotation else f"={value}"
            return text

        for i, arg in enumerate(positional):
            parts.append(one(arg, defaults[i]))
            call.append(arg.arg)
            if posonly and i == len(posonly) - 1:
                parts.append("/")
        if a.vararg is not None:
            parts.append("*" + one(a.vararg, None))
            call.append("*" + a.vararg.arg)
        elif a.kwonlyargs:
            parts.append("*")
        for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
            parts.append(one(arg, default))
            call.append(f"{arg.arg}={arg.arg}")
        if a.kwarg is not None:
            parts.append("**" + one(a.kwarg, None))
            call.append("**" + a.kwarg.arg)
        return ", ".join(parts), ", ".join(call)

    def returns(self, src: Source) -> str:
        node = src.node.returns
        return f" -> {self.expr(node, src.module)}" if node is not None else ""

    def method(self, name: str, fn: Callable[..., Any], *, coroutine: bool) -> None:
        src = source_of(fn)
        params, call = self.params(src)
        runner = "self._await" if coroutine else "self._apply"
        args = f"self._target.{name}" + (f", {call}" if call else "")
        self.out.append(
            f"    def {name}(self{', ' if params else ''}{params}){self.returns(src)}:\n"
            f"{docstring(src.doc)}"
            f"        return {runner}({args})\n"
        )

    def constructor(self, name: str, fn: Callable[..., Any]) -> None:
        src = source_of(fn)
        params, call = self.params(src)
        self.out.append(
            "    @classmethod\n"
            f'    def {name}(cls{", " if params else ""}{params}) -> "{self.pair.sync_name}":\n'
            f"{docstring(src.doc)}"
            f"        return cls._start(lambda: {self.pair.async_name}.{name}({call}))\n"
        )

    def prop(self, name: str, prop: property) -> None:
        if prop.fget is None:
            raise GenerationError(f"{self.pair.async_name}.{name}: a property without a getter")
        src = source_of(prop.fget)
        returns = src.node.returns
        twin = self.twins.get(returns.id) if isinstance(returns, ast.Name) else None
        if twin is not None:  # an async object with a sync twin: a view of it on our loop
            self.out.append(
                f"    @property\n    def {name}(self) -> {twin}:\n"
                f"{docstring(src.doc)}"
                f"        return self._view({twin}, self._target.{name})\n"
            )
            if prop.fset is not None:
                raise GenerationError(f"{self.pair.async_name}.{name}: a settable property of a twin class")
            return
        self.out.append(
            f"    @property\n    def {name}(self){self.returns(src)}:\n"
            f"{docstring(src.doc)}"
            f"        return self._target.{name}\n"
        )
        if prop.fset is not None:
            setter = source_of(prop.fset)
            params, _ = self.params(setter)
            value = setter.node.args.args[1].arg
            self.out.append(
                f"    @{name}.setter\n    def {name}(self, {params}) -> None:\n"
                f"        self._target.{name} = {value}\n"
            )

    def attribute(self, name: str, annotation: ast.expr, doc: str | None, module: str) -> None:
        self.out.append(
            f"    @property\n    def {name}(self) -> {self.expr(annotation, module)}:\n"
            f"{docstring(doc)}"
            f"        return self._target.{name}\n"
        )


def declared_attributes(cls: type) -> Iterator[tuple[str, ast.expr, str | None]]:
    """Public attributes annotated in the class body (``name: str``), with the string literal after each."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    (node,) = tree.body
    assert isinstance(node, ast.ClassDef)
    body = node.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is None:
            name = stmt.target.id
            if name.startswith("_") or _is_classvar(stmt.annotation):
                continue
            nxt = body[i + 1] if i + 1 < len(body) else None
            doc = None
            if (
                isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                doc = inspect.cleandoc(nxt.value.value)
            yield name, stmt.annotation, doc


def _is_classvar(annotation: ast.expr) -> bool:
    root = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (isinstance(root, ast.Name) and root.id == "ClassVar") or (
        isinstance(root, ast.Attribute) and root.attr == "ClassVar"
    )


def public_members(cls: type) -> Iterator[tuple[str, object]]:
    """Public members in definition order (bases first), each as the class holds it."""
    seen: dict[str, object] = {}
    for klass in reversed(cls.__mro__[:-1]):
        seen.update((k, v) for k, v in vars(klass).items() if not k.startswith("_"))
    yield from seen.items()


def write_class(pair: Pair, imports: Imports, twins: dict[str, str]) -> str:
    async_cls = _load_class(pair.async_module, pair.async_name)
    base = _load_class(f"{PACKAGE}._sync_bridge", pair.base)
    imports.need(pair.async_name, pair.async_module, pair.async_name)
    imports.need(pair.base, f"{PACKAGE}._sync_bridge", pair.base)
    skip = set(getattr(base, "_not_forwarded", ()))
    members = [(n, m) for n, m in public_members(async_cls) if n not in skip and not hasattr(base, n)]
    attributes = [a for a in declared_attributes(async_cls) if a[0] not in skip and not hasattr(base, a[0])]
    shadowed = (
        {n for n, _ in members} | {a[0] for a in attributes} | {n for n in dir(base) if not n.startswith("_")}
    )
    em = Emitter(pair, imports, shadowed, twins)
    for name, annotation, doc in attributes:
        em.attribute(name, annotation, doc, pair.async_module)
    for name, member in members:
        if isinstance(member, property):
            em.prop(name, member)
        elif isinstance(member, classmethod):
            if not inspect.iscoroutinefunction(inspect.unwrap(member.__func__)):
                raise GenerationError(f"{pair.async_name}.{name}: only coroutine classmethods are translated")
            em.constructor(name, getattr(async_cls, name))
        elif isinstance(member, staticmethod):
            raise GenerationError(f"{pair.async_name}.{name}: a public staticmethod (translate it by hand)")
        else:
            fn = getattr(async_cls, name)  # a descriptor (a part's method) gives its function
            if not callable(fn):
                continue  # a constant: not part of the blocking surface
            plain = inspect.unwrap(fn)
            if inspect.isasyncgenfunction(plain):
                raise GenerationError(f"{pair.async_name}.{name}: async generators are not translated")
            em.method(name, fn, coroutine=inspect.iscoroutinefunction(plain))
    body = "\n".join(em.out)
    return f"class {pair.sync_name}({pair.base}):\n    {pair.doc}\n\n{body}"


def generate() -> str:
    import_package()
    imports = Imports()
    imports.need("CLOSE_GRACE_SECONDS", f"{PACKAGE}._loop_thread", "CLOSE_GRACE_SECONDS")
    imports.need("SyncReentrancyError", f"{PACKAGE}._loop_thread", "SyncReentrancyError")
    twins = {p.async_name: p.sync_name for p in PAIRS}
    classes = [write_class(pair, imports, twins) for pair in PAIRS]
    names = sorted(["CLOSE_GRACE_SECONDS", "SyncReentrancyError", *(p.sync_name for p in PAIRS)])
    fixups = "\n".join(
        f'vars({p.sync_name})["connect"].__func__.__annotations__["return"] = {p.sync_name}'
        for p in PAIRS
        if isinstance(vars(_load(p.async_module, p.async_name)).get("connect"), classmethod)
    )
    text = (
        f"{HEADER}{MODULE_DOC}\n{imports.render()}\n\n__all__ = {names!r}\n\n\n"
        + "\n\n".join(classes)
        + "\n\n# `connect` returns the class it builds, a name its own body cannot use yet (the\n"
        "# annotation is written quoted, for type checkers, and resolved here for inspect).\n" + fixups + "\n"
    )
    text = _ruff(["check", "--fix-only", "--select", "I", "--quiet"], text)
    text = _ruff(["format", "--quiet"], text)
    _check_docstrings(text)
    return text


def _ruff(args: list[str], text: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(TARGET.relative_to(ROOT)), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise GenerationError(f"ruff {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def _check_docstrings(text: str) -> None:
    """Each generated docstring is exactly the async member's, after formatting."""
    tree = ast.parse(text)
    for pair in PAIRS:
        async_cls = _load(pair.async_module, pair.async_name)
        (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == pair.sync_name]
        for node in cls.body:
            if not isinstance(node, ast.FunctionDef) or any(
                isinstance(d, ast.Attribute) and d.attr == "setter" for d in node.decorator_list
            ):
                continue
            member = inspect.getattr_static(async_cls, node.name, None)
            if isinstance(member, property):
                want = member.__doc__
            elif isinstance(member, classmethod):
                want = inspect.unwrap(member.__func__).__doc__
            elif member is not None:
                want = inspect.unwrap(getattr(async_cls, node.name)).__doc__
            else:
                continue  # a declared attribute: its doc is cleaned
            if ast.get_docstring(node, clean=False) != want:
                raise GenerationError(f"{pair.sync_name}.{node.name}: the docstring changed in formatting")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if sync.py is not what would be written")
    parser.add_argument("--target", type=Path, default=TARGET, help=argparse.SUPPRESS)  # tests: another file
    args = parser.parse_args(argv)
    target: Path = args.target.resolve()
    try:
        text = generate()
    except GenerationError as exc:
        print(f"gen_sync: {exc}", file=sys.stderr)
        return 2
    current = target.read_text(encoding="utf-8") if target.exists() else ""
    rel = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
    if args.check:
        if current == text:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"{rel} (on disk)",
            f"{rel} (generated)",
        )
        sys.stderr.writelines(list(diff)[:80])
        print(f"\n{rel} is stale: run `python scripts/gen_sync.py`", file=sys.stderr)
        return 1
    if current != text:
        target.write_text(text, encoding="utf-8")
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
