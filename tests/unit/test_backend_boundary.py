"""The transport is the only way to Valkey: checked on the package's source, not by convention.

``backend/`` holds the client and sends every command; the parts hand it commands
as values. So outside ``backend/`` (and the embedded server, and the OpenAI
embedder's own cache client) nothing imports ``valkey`` at run time, nothing
registers a script with the client, and no module but ``backend/scripts.py`` (and its parts,
``backend/scripts_*.py``) holds Lua.
"""

from __future__ import annotations

import ast
from pathlib import Path

import betterdb_memory

PACKAGE = Path(betterdb_memory.__file__).parent
# The embedded server manages a valkey-server process; the OpenAI embedder keeps an
# optional cache on a client the caller gives it (not the store's data).
MAY_IMPORT_VALKEY = {"server.py", "embedders/openai.py"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of the statements under ``if TYPE_CHECKING:`` (annotations only)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _runtime_imports(tree: ast.Module) -> list[str]:
    skip = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and node.lineno not in skip:
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.lineno not in skip and node.level == 0 and node.module:
            found.append(node.module)
    return found


def test_only_the_backend_imports_valkey() -> None:
    offenders = [
        name
        for name, tree in _modules()
        if not name.startswith("backend/")
        and name not in MAY_IMPORT_VALKEY
        and any(m == "valkey" or m.startswith("valkey.") for m in _runtime_imports(tree))
    ]
    assert offenders == []


def test_no_script_is_registered_with_a_client() -> None:
    assert [name for name, _ in _modules() if "register_script(" in (PACKAGE / name).read_text()] == []


def test_all_lua_lives_in_backend_scripts() -> None:
    """The registry, and the blocks it registers (split off to hold the registry to its size)."""
    holders = [name for name, _ in _modules() if "redis.call(" in (PACKAGE / name).read_text()]
    assert sorted(holders) == [
        "backend/scripts.py",
        "backend/scripts_reinforce.py",
        "backend/scripts_subjects.py",
    ]
    from betterdb_memory.backend import scripts, scripts_reinforce, scripts_subjects

    assert {
        scripts_subjects.SUBJECT_PUT,
        scripts_subjects.SUBJECT_DROP,
        scripts_subjects.SUBJECT_TRIM,
        *scripts_reinforce.SCRIPTS,
    } <= set(scripts.ALL)


def test_the_checks_see_what_they_look_for() -> None:
    """The walker finds a run-time import and skips a TYPE_CHECKING one (so the tests above can fail)."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nimport valkey.asyncio\nif TYPE_CHECKING:\n    import valkey\n"
    )
    assert _runtime_imports(tree) == ["typing", "valkey.asyncio"]
