"""The documentation's structure, read as files (no docs toolchain, no server).

* The API reference (docs/reference/*.md, rendered by mkdocstrings) covers every name in
  ``betterdb_memory.__all__``: a name added to the public surface without a reference
  entry fails here, and a reference entry for a name that no longer exists fails too
  (``make docs`` would also fail on it, but later and only where the toolchain is).
* Every page under docs/ is in the site's navigation, and every page named there exists.
* README.md stays a landing page: the two commands first, byte for byte, and about 200
  lines at most.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import betterdb_memory

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)\s*$", re.MULTILINE)
TWO_COMMANDS = (
    "```sh\n"
    "make demo   # sets up .venv, starts the embedded Valkey Search engine, runs the demo\n"
    "make test   # same set-up, then the whole test suite against a real engine\n"
    "```\n"
)


def reference_paths() -> list[str]:
    return [
        m["path"]
        for page in sorted((DOCS / "reference").glob("*.md"))
        for m in DIRECTIVE.finditer(page.read_text(encoding="utf-8"))
    ]


def test_reference_covers_every_public_name() -> None:
    documented = {p.removeprefix("betterdb_memory.") for p in reference_paths() if p.count(".") == 1}
    missing = sorted(set(betterdb_memory.__all__) - documented)
    assert not missing, f"add these to a page of docs/reference/: {missing}"


def test_reference_names_exist() -> None:
    for path in reference_paths():
        if path.count(".") == 1 and path.startswith("betterdb_memory."):
            name = path.split(".", 1)[1]
            is_module = importlib.util.find_spec(path) is not None
            assert name in betterdb_memory.__all__ or is_module, f"{path} is documented but not public"


def test_each_public_name_is_documented_once() -> None:
    paths = [p for p in reference_paths() if p.count(".") == 1]
    assert len(paths) == len(set(paths)), sorted({p for p in paths if paths.count(p) > 1})


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    listed = set(re.findall(r"([\w/.-]+\.md)\s*$", nav, re.MULTILINE))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages - listed == set(), "pages missing from mkdocs.yml's nav"
    generated = {p for p in listed if p.startswith("benchmarks/results/")}
    results = {f"benchmarks/results/{p.name}" for p in (ROOT / "bench" / "results").glob("*.md")}
    assert listed - pages - generated == set(), "nav names pages that do not exist"
    assert generated == results, "every bench/results/*.md is a page of the site, and only those"


def test_readme_is_a_landing_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.split("\n", 2)[2].startswith(TWO_COMMANDS), "the two commands come first, unchanged"
    assert len(text.splitlines()) <= 220
