"""The valkey-search run's selection (``tests/conftest.py``): it never leaves out a test that reaches a server.

``make test-valkey-search`` deselects the tests ``engine_independent`` marks: tests of
``tests/unit`` with no server fixture in their closure. These tests check the rule on
every test of the running session (all of them under ``make test``) and on the fixtures
a unit test can use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import SERVER_FIXTURES, UNIT_DIR, _module_source, engine_independent

TESTS = UNIT_DIR.parent
#: Words in a fixture's body that say it reaches a server.
REACHES_SERVER = (
    "EmbeddedServer",
    "from_url",
    ".connect(",
    "VALKEY_URL",
    "tests.engines",
    "own_server_binaries",
)


def _independent(item: pytest.Item, sources: dict[str, str]) -> bool:
    names = getattr(item, "fixturenames", None)
    return names is not None and engine_independent(
        item.path, names, _module_source(getattr(item, "module", None), sources)
    )


def test_every_test_using_a_server_fixture_is_kept(request: pytest.FixtureRequest) -> None:
    """No collected test with ``valkey_url`` (or ``own_server``) in its closure, or outside tests/unit, is deselected."""
    sources: dict[str, str] = {}
    items = request.session.items
    server_tests = [i for i in items if not SERVER_FIXTURES.isdisjoint(getattr(i, "fixturenames", ()))]
    outside = [i for i in items if not i.path.resolve().is_relative_to(UNIT_DIR)]
    assert [i.nodeid for i in server_tests + outside if _independent(i, sources)] == []


def test_the_rule_on_each_condition() -> None:
    """Each of the three conditions alone keeps a test."""
    unit_test = UNIT_DIR / "test_x.py"
    assert engine_independent(unit_test, ["request", "tmp_path"], "def test_x(): ...")
    for fixture in sorted(SERVER_FIXTURES):
        assert not engine_independent(unit_test, ["request", fixture], "")
    assert not engine_independent(TESTS / "integration" / "test_x.py", ["tmp_path"], "")
    assert not engine_independent(TESTS / "reliability" / "test_x.py", [], "")
    assert not engine_independent(unit_test, [], "from tests.engines import own_server_binaries")
    assert not engine_independent(unit_test, [], 'os.environ["VALKEY_URL"]')
    assert not engine_independent(unit_test, [], "EmbeddedServer(tmp_path).start()")


def _fixtures(path: Path) -> dict[str, tuple[set[str], str]]:
    """The fixtures defined in ``path``: name -> (argument names, source text)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, tuple[set[str], str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if any("fixture" in ast.unparse(d) for d in node.decorator_list):
            args = {a.arg for a in node.args.args + node.args.kwonlyargs}
            found[node.name] = (args, ast.unparse(node))
    return found


def test_every_fixture_a_unit_test_sees_that_reaches_a_server_is_a_server_fixture() -> None:
    """A fixture of tests/conftest.py (or a unit conftest) that reaches a server has a server fixture in its closure.

    Otherwise a unit test could reach the server through it and still be deselected.
    """
    conftests = [TESTS / "conftest.py", *sorted(UNIT_DIR.rglob("conftest.py"))]
    fixtures: dict[str, tuple[set[str], str]] = {}
    for path in conftests:
        fixtures.update(_fixtures(path))
    assert "valkey_url" in fixtures and "client" in fixtures
    serving = set(SERVER_FIXTURES)
    grew = True
    while grew:
        more = {name for name, (args, _) in fixtures.items() if args & serving} - serving
        serving |= more
        grew = bool(more)
    reaching = {name for name, (_, body) in fixtures.items() if any(w in body for w in REACHES_SERVER)}
    assert {"valkey_url", "client", "make_store"} <= serving
    assert reaching - serving == set()
