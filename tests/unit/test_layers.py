"""The package's layers, checked on its imports: a pure core, a thin I/O layer, no cycles.

Every ``.py`` file of ``betterdb_memory`` is parsed with ``ast`` (nothing is imported)
and every ``import`` / ``from ... import`` statement is collected: module level,
inside functions and methods (lazy imports), and under ``if TYPE_CHECKING:``.
**TYPE_CHECKING imports count like any other**: a type-only import of a higher layer
is still a dependency of the design, and an import cycle hidden from the interpreter
is one mypy and the reader still follow. A lower layer that must name something of a
higher one declares a ``Protocol`` of what it needs instead (``backend.locks.LockBackend``).
Imports spelled as strings (``importlib.import_module``) are not seen; the package uses
them only for optional third-party extras.

The layers, lowest first (a module may import its own layer and those below it;
the order is the one the code had when this test was written, not a wish):

0. ``foundation``: ``errors``, ``_version``, ``_env``. The standard library only.
1. ``core``: ``core/``. Pure: the standard library, numpy and ``errors``.
2. ``backend``: ``backend/``. The only code that holds the Valkey client; of ours,
   ``core`` and ``errors`` only.
3. ``services``: ``embedders/``, ``summarizers``, ``extraction``, ``lifecycle``
   (the supervisor), ``progress``, ``server`` (the embedded Valkey), ``_loop_thread``.
4. ``observability``: ``observability/`` (metrics, tracing, live config, discovery,
   telemetry; built on the backend and the supervisor).
5. ``tiers``: ``tiers/``, the store's parts (built from a ``Runtime`` holding the
   layers below).
6. ``store``: ``store``, ``store_options``.
7. ``facade``: ``facade`` (``AgentMemory``, its cache tiers' Monitor presence in
   ``_cache_monitor``), ``sync``.
8. ``edges``: ``adapters/``, ``cli`` (and its ``_cli_*`` modules), ``transfer/``,
   ``testing``, ``demo``: users of the store.
9. ``package``: ``betterdb_memory/__init__.py``, the curated public surface.

A new top-level module or folder fails ``test_every_module_has_a_layer`` until it is
placed here.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = "betterdb_memory"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({"errors", "_version", "_env", "_ports"})),
    ("core", frozenset({"core"})),
    ("backend", frozenset({"backend"})),
    (
        "services",
        frozenset(
            {"embedders", "summarizers", "extraction", "lifecycle", "progress", "server", "_loop_thread"}
        ),
    ),
    ("observability", frozenset({"observability"})),
    ("tiers", frozenset({"tiers"})),
    ("store", frozenset({"store", "store_options", "store_info", "store_connect", "_delegate"})),
    ("facade", frozenset({"facade", "sync", "_sync_bridge", "_cache_monitor"})),
    (
        "edges",
        frozenset(
            {
                "adapters",
                "cli",
                "_cli_acl",
                "_cli_common",
                "_cli_mcp",
                "_cli_memories",
                "_cli_time",
                "_cli_transfer",
                "transfer",
                "testing",
                "demo",
            }
        ),
    ),
    ("package", frozenset({""})),
)
RANK = {part: rank for rank, (_, parts) in enumerate(LAYERS) for part in parts}
LAYER_NAME = {part: name for name, parts in LAYERS for part in parts}

#: Third-party imports the foundation layer may still make, each with the reason and
#: when it goes. None since the translation of valkey's exceptions moved to
#: backend/translate.py: errors.py imports the standard library only.
KNOWN_FOUNDATION_IMPORTS: frozenset[tuple[str, str]] = frozenset()

#: What core/ may import besides the standard library and itself.
CORE_ALLOWED = frozenset({"numpy", f"{PACKAGE}.errors"})
#: What backend/ may import of ours besides itself.
BACKEND_ALLOWED_OURS = frozenset({"core", "errors"})


def module_name(path: Path, root: Path = ROOT) -> str:
    """``betterdb_memory/core/query.py`` -> ``betterdb_memory.core.query`` (a package: its folder)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imports_of(name: str, source: str, *, is_package: bool, known: Iterable[str]) -> set[str]:
    """The absolute names ``source`` (module ``name``) imports, anywhere in the file.

    ``from pkg import thing`` counts as an import of ``pkg.thing`` when that is a
    module of ours (``known``), else of ``pkg``.
    """
    modules = set(known)
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the package -> every module it imports (ours and others')."""
    modules = package_modules(root)
    return {
        name: imports_of(name, path.read_text("utf-8"), is_package=path.name == "__init__.py", known=modules)
        for name, path in modules.items()
    }


def part_of(module: str) -> str:
    """The top-level module or folder a module of ours belongs to (``""``: the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def is_ours(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import that breaks a layer rule (module docstring), as readable lines."""
    out: list[str] = []
    for module, targets in sorted(graph.items()):
        part = part_of(module)
        if part not in RANK:
            continue  # reported by test_every_module_has_a_layer
        for target in sorted(targets):
            if not is_ours(target):
                top = target.split(".")[0]
                if part == "core" and not is_stdlib(target) and top not in CORE_ALLOWED:
                    out.append(
                        f"{module} imports {target}: core/ imports the standard library and numpy only"
                    )
                elif (
                    LAYER_NAME[part] == "foundation"
                    and not is_stdlib(target)
                    and (module, top) not in KNOWN_FOUNDATION_IMPORTS
                ):
                    out.append(f"{module} imports {target}: the foundation imports the standard library only")
                continue
            target_part = part_of(target)
            if part == "core" and target_part not in ("core", "errors"):
                out.append(f"{module} imports {target}: core/ imports only core/ and errors of ours")
            elif part == "backend" and target_part not in ("backend", *BACKEND_ALLOWED_OURS):
                out.append(f"{module} imports {target}: backend/ imports only core/ and errors of ours")
            elif target_part in RANK and RANK[target_part] > RANK[part]:
                out.append(
                    f"{module} ({LAYER_NAME[part]}) imports {target} "
                    f"({LAYER_NAME[target_part]}), a layer above it"
                )
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def ours_only(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    return {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}


def part_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The same imports between top-level modules and folders (``core`` -> ``errors``, ...)."""
    out: dict[str, set[str]] = {}
    for module, targets in ours_only(graph).items():
        edges = out.setdefault(part_of(module), set())
        edges.update(part_of(t) for t in targets if part_of(t) != part_of(module))
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


# -- the package ------------------------------------------------------------------------------------


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    """A new top-level module or folder must be placed in LAYERS before the layer rules can hold it."""
    unplaced = sorted({part_of(m) or PACKAGE for m in graph if part_of(m) not in RANK})
    assert not unplaced, f"place these in LAYERS (tests/unit/test_layers.py): {unplaced}"


def test_layers_import_only_downwards(graph: dict[str, set[str]]) -> None:
    """core/ is pure, backend/ uses only core/ and errors, and no part imports a layer above it."""
    assert violations(graph) == []


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    """No module imports itself through others, and neither does a top-level module or folder."""
    assert cycles(ours_only(graph)) == []
    assert cycles(part_graph(graph)) == []


def test_the_walk_sees_the_package() -> None:
    """The walk finds the modules and the imports it should (else the tests above pass vacuously)."""
    graph = import_graph()
    assert f"{PACKAGE}.core.query" in graph
    assert f"{PACKAGE}.core.dialect" in graph[f"{PACKAGE}.core.query"]
    assert f"{PACKAGE}.backend.protocol" in graph[f"{PACKAGE}.backend.index"]  # from .protocol import
    assert "numpy" in graph[f"{PACKAGE}.core.codec"]
    assert f"{PACKAGE}.errors" in graph[f"{PACKAGE}.backend.dialect"]  # inside probe()
    assert f"{PACKAGE}.store" in graph[f"{PACKAGE}.transfer.export"]  # under TYPE_CHECKING


# -- the checks themselves, on made-up modules ------------------------------------------------------


def _graph_of(sources: dict[str, str]) -> dict[str, set[str]]:
    known = set(sources)
    return {name: imports_of(name, src, is_package=False, known=known) for name, src in sources.items()}


@pytest.mark.parametrize(
    ("module", "source", "broken"),
    [
        ("core.x", "from ..backend.client import Backend", "core/ imports only core/ and errors"),
        ("core.x", "def f():\n    from ..embedders.hashing import tokenize", "core/ imports only core/"),
        ("core.x", "import valkey", "core/ imports the standard library and numpy only"),
        (
            "core.x",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..store import MemoryStore",
            "core/ imports only core/",
        ),
        ("backend.x", "from ..tiers.runtime import Runtime", "backend/ imports only core/ and errors"),
        ("backend.x", "from ..lifecycle import Spawn", "backend/ imports only core/ and errors"),
        ("tiers.x", "from ..store import MemoryStore", "a layer above it"),
        ("observability.x", "from ..tiers.runtime import Runtime", "a layer above it"),
        ("store", "from .facade import AgentMemory", "a layer above it"),
        ("_env", "import valkey", "the foundation imports the standard library only"),
    ],
)
def test_a_broken_rule_is_reported(module: str, source: str, broken: str) -> None:
    name = f"{PACKAGE}.{module}"
    found = violations({name: imports_of(name, source, is_package=False, known=())})
    assert len(found) == 1 and broken in found[0], found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        (
            "core.x",
            "import math\nimport numpy as np\nfrom ..errors import ValidationError\nfrom .codec import as_text",
        ),
        (
            "backend.x",
            "import valkey.asyncio\nfrom ..core.keys import KeySpace\nfrom ..errors import ServerError",
        ),
        ("tiers.x", "from ..observability.hub import StoreObservability\nfrom ..backend import Backend"),
    ],
)
def test_an_allowed_import_is_not_reported(module: str, source: str) -> None:
    name = f"{PACKAGE}.{module}"
    assert violations({name: imports_of(name, source, is_package=False, known=())}) == []


def test_a_cycle_is_reported_with_every_module_in_it() -> None:
    graph = _graph_of(
        {
            f"{PACKAGE}.backend.client": "from .locks import ScopedLock",
            f"{PACKAGE}.backend.locks": "def f():\n    from .client import Backend",
            f"{PACKAGE}.backend.retry": "from ..errors import ServerError",
            f"{PACKAGE}.errors": "",
        }
    )
    assert cycles(ours_only(graph)) == [[f"{PACKAGE}.backend.client", f"{PACKAGE}.backend.locks"]]


def test_a_cycle_between_folders_is_reported_though_no_module_cycle_exists() -> None:
    """core.models -> backend.dialect -> core.codec: no module imports itself, but core and backend do."""
    graph = _graph_of(
        {
            f"{PACKAGE}.core.models": "from ..backend.dialect import Capabilities",
            f"{PACKAGE}.backend.dialect": "from ..core.codec import as_text",
            f"{PACKAGE}.core.codec": "",
        }
    )
    assert cycles(ours_only(graph)) == []
    assert cycles(part_graph(graph)) == [["backend", "core"]]


# -- one idea per module, and tests named after what they test -----------------------------

#: The most lines a hand-written module may hold (one idea; the house style's "a few hundred").
MAX_MODULE_LINES = 450

UNIT_TESTS = Path(__file__).resolve().parent

#: Unit test files that test the package as a whole (or a file outside it), not one module.
WHOLE_PACKAGE = {
    "test_backend_boundary.py": "no client library outside backend/ (walks every module)",
    "test_bench_issue29.py": "bench/_noio.py, bench_store.py and store_goals29.py, outside the package",
    "test_bench_temporal_data.py": "bench/temporal_data, outside the package",
    "test_ci_selection.py": "tests/conftest.py's selection for the valkey-search run, outside the package",
    "test_constants_once.py": "each constant defined once (walks every module)",
    "test_core_fixtures.py": "the real-reply fixtures' loader, shared by the reply tests",
    "test_core_filter_fixtures.py": "filter_query, replies and filter_eval against real replies",
    "test_default_name.py": "the default store name across the API, the CLI and the docs",
    "test_docker_compose.py": "docker/, outside the package",
    "test_docs_reference.py": "docs/ against the public names",
    "test_embedder_calibration.py": "every embedder's default threshold on the same pairs",
    "test_gen_sync.py": "scripts/gen_sync.py, outside the package",
    "test_layers.py": "the layers, module sizes and these names (walks every module)",
    "test_mcp_guards.py": "the MCP server's two guards together (_mcp_scope, _mcp_auth)",
    "test_openai_llm.py": "the OpenAI summariser and fact extractor over one HTTP double",
    "test_parts.py": "the store's parts built together over a recording backend",
    "test_public_api.py": "the package's public surface (__all__)",
    "test_valid_from.py": "valid_from through record, models, requests and ranking",
}


def test_modules_hold_one_idea() -> None:
    """No hand-written module over ``MAX_MODULE_LINES``; a generated one says so in its first lines."""
    over = {}
    for name, path in package_modules().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_MODULE_LINES and not any("GENERATED FILE" in line for line in lines[:3]):
            over[name] = len(lines)
    assert not over, f"split these along one idea each (or mark a generated file): {over}"


def test_unit_tests_are_named_after_the_module_they_test() -> None:
    """``tests/unit/test_<module path with underscores>.py`` (``core/ranking.py`` ->
    ``test_core_ranking.py``; a leading underscore dropped); whole-package tests are listed
    with a reason in ``WHOLE_PACKAGE``."""
    names = {"_".join(p.lstrip("_") for p in name.split(".")[1:]) for name in package_modules()}
    stray = [
        p.name
        for p in sorted(UNIT_TESTS.glob("test_*.py"))
        if p.stem.removeprefix("test_") not in names and p.name not in WHOLE_PACKAGE
    ]
    assert not stray, f"name these after their module, or list them in WHOLE_PACKAGE with a reason: {stray}"
    gone = sorted(set(WHOLE_PACKAGE) - {p.name for p in UNIT_TESTS.glob("test_*.py")})
    assert not gone, f"WHOLE_PACKAGE names files that no longer exist: {gone}"
