"""Each shared constant and reserved key name is defined in one module (issue 25: they lived twice).

Read with ``ast``: docstrings may mention a key name, code may not spell it outside
``core/keys.py``; a constant is assigned at module level in exactly one module.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "betterdb_memory"
RESERVED = ("__mem_config", "__mem_stats", "__mem_reembed", "__mem_meta")
CONSTANTS = {
    "DEFAULT_NAME": "core/keys.py",
    "NEAR_MISS_FACTOR": "observability/hub.py",
    "DEFAULT_HALF_LIFE_SECONDS": "core/scoring.py",
}


def _modules() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(PACKAGE)): ast.parse(p.read_text(encoding="utf-8"))
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (or bare string statements)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def test_reserved_key_names_are_built_only_by_core_keys() -> None:
    spelled: dict[str, set[str]] = defaultdict(set)
    for path, tree in _modules().items():
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                for name in RESERVED:
                    if name in node.value:
                        spelled[name].add(path)
    assert all(paths == {"core/keys.py"} for paths in spelled.values()), dict(spelled)
    assert set(spelled) == set(RESERVED)


def test_shared_constants_are_assigned_once() -> None:
    assigned: dict[str, set[str]] = defaultdict(set)
    for path, tree in _modules().items():
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Name) and target.id in CONSTANTS:
                    assigned[target.id].add(path)
    assert {name: {path} for name, path in CONSTANTS.items()} == dict(assigned)


def test_the_half_life_default_is_spelled_once() -> None:
    """A week in seconds, as an expression, appears once (``7 * 24 * 3600``)."""
    found = [
        path
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp) and ast.unparse(node).startswith("7 * 24 * 3600")
    ]
    assert found == ["core/scoring.py"], found
