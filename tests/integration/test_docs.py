"""Every ```python block of README.md and docs/ runs, against real engines, as a reader would run it.

The pages are read as markdown (the docs toolchain is not needed). On each page:

* a block that calls ``asyncio.run(main())`` is a complete script: it runs alone in a
  fresh interpreter;
* the other blocks are fragments that build on each other (``store`` from one block is
  used by the next), so they run in order in one shared namespace, with top-level
  ``await`` allowed, as in ``python -m asyncio``. Before a page's first fragment, the
  namespace holds what "Getting started" builds with your own Valkey: ``client`` (a
  ``valkey.asyncio`` client) and ``store`` (a ``MemoryStore`` with the default embedder;
  its name is the page's, so pages never see each other's memories).

Each runs in a subprocess with ``VALKEY_URL`` set to the session server and
``XDG_DATA_HOME`` in a temporary dir, so ``MemoryStore.connect()`` without a URL starts
an embedded engine there, never in the user's data dir. The docs' placeholder server URL
is replaced by the session server's. ``text`` and ``sh`` blocks are not executed.

A block that cannot run says why in a marker on the line before its fence,
``<!-- docs-test: skip (the reason) -->``; such blocks are few (a test below counts them).
A block that imports an optional extra which is not installed (``mcp``, ``langchain``,
...) is skipped with the extra's name, and so is the rest of its page's fragments, which
may use what it defines; it never fails for that.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import valkey

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PLACEHOLDER_URL = "valkey://localhost:6379"  # "your own Valkey" in the docs
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL)
SKIP_MARKER = re.compile(r"<!-- docs-test: skip \((?P<reason>[^)]+)\) -->\s*$")
MAX_SKIPPED = 3  # blocks that cannot run must stay few

#: The module a block imports -> the extra that installs it.
EXTRA_OF = {
    "mcp": "mcp",
    "agents": "openai-agents",
    "langchain_core": "langchain",
    "langgraph": "langgraph",
    "openai": "openai",
    "onnxruntime": "onnx",
    "betterdb_memory.adapters.mcp": "mcp",
    "betterdb_memory.adapters.openai_agents": "openai-agents",
    "betterdb_memory.adapters.langchain": "langchain",
    "betterdb_memory.adapters.langgraph": "langgraph",
}
#: The module whose presence says an extra is installed.
PROBE_OF = {
    "mcp": "mcp",
    "openai-agents": "agents",
    "langchain": "langchain_core",
    "langgraph": "langgraph",
    "openai": "openai",
    "onnx": "onnxruntime",
}

# The namespace a page's fragments start from (see the module docstring).
PRELUDE = """
import valkey.asyncio as valkey
from betterdb_memory import MemoryStore
client = valkey.Valkey.from_url(URL)
store = MemoryStore(client=client, name=STORE_NAME)
"""

# Runs a page's fragments in order in one namespace; then closes what they left open and
# deletes every key of the stores they used, so a long-lived VALKEY_URL server is left
# as found.
FRAGMENT_RUNNER = """
import ast, asyncio, json, sys
from betterdb_memory import MemoryStore

async def main() -> None:
    spec = json.load(open(sys.argv[1]))
    ns = {"__name__": "__main__", "URL": spec["url"], "STORE_NAME": spec["store"]}
    exec(spec["prelude"], ns)
    names = {spec["store"]}
    try:
        for block in spec["blocks"]:
            print(f"--- {spec['page']} line {block['line']}", flush=True)
            where = f"{spec['page']}:{block['line']}"
            code = compile(block["code"], where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, ns)
            if asyncio.iscoroutine(result):
                await result
            names |= {v.name for v in ns.values() if isinstance(v, MemoryStore)}
    finally:
        for value in list(ns.values()):
            if isinstance(value, MemoryStore):
                await value.close()
        client = ns["client"]
        for name in sorted(names):
            for index in (f"{name}:mem:idx", f"{name}:hist:idx"):
                try:
                    await client.execute_command("FT.DROPINDEX", index)
                except Exception:
                    pass
            keys = [k async for k in client.scan_iter(match=f"{name}:*", count=1000)]
            if keys:
                await client.unlink(*keys)
        await client.aclose()

asyncio.run(main())
"""


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    lang: str
    code: str
    line: int  # of the opening fence
    skip: str | None  # the marker's reason

    @property
    def is_script(self) -> bool:
        return "asyncio.run(" in self.code

    @property
    def extras(self) -> frozenset[str]:
        """The extras its module-level imports need (imports inside functions run later)."""
        needed: set[str] = set()
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(self.code, f"{self.page}:{self.line}", "exec", flags=flags)
        assert isinstance(tree, ast.Module)
        for node in tree.body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                for module, extra in EXTRA_OF.items():
                    if name == module or name.startswith(module + "."):
                        needed.add(extra)
        return frozenset(needed)


def page_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = SKIP_MARKER.search(before)
        blocks.append(
            Block(
                page=path.relative_to(root).as_posix(),
                lang=m["lang"],
                code=m["code"],
                line=text.count("\n", 0, m.start()) + 1,
                skip=marker["reason"] if marker else None,
            )
        )
    return blocks


ALL = [b for page in PAGES for b in page_blocks(page)]
PYTHON = [b for b in ALL if b.lang == "python"]
SCRIPTS = [b for b in PYTHON if b.is_script]
FRAGMENT_PAGES = sorted({b.page for b in PYTHON if not b.is_script})


def missing_extras(blocks: list[Block]) -> list[str]:
    needed = sorted({extra for b in blocks for extra in b.extras})
    return [e for e in needed if importlib.util.find_spec(PROBE_OF[e]) is None]


@contextlib.contextmanager
def stores_removed_after(valkey_url: str) -> Iterator[None]:
    """Delete every store a script created (its index and keys), as a fragment page's runner does.

    A script names its stores itself (the quick start uses the default name), and a store
    left behind with the default embedder would refuse the next test that opens that name
    with another model (``configuration.model_mismatch``).
    """
    client = valkey.Valkey.from_url(valkey_url)
    try:
        before = {bytes(i).decode() for i in client.execute_command("FT._LIST")}
        yield
        for index in {bytes(i).decode() for i in client.execute_command("FT._LIST")} - before:
            name = index.removesuffix(":mem:idx")
            client.execute_command("FT.DROPINDEX", index)
            keys = list(client.scan_iter(match=f"{name}:*", count=1000))
            if keys:
                client.unlink(*keys)
    finally:
        client.close()


def run_python(args: list[str], valkey_url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, VALKEY_URL=valkey_url, XDG_DATA_HOME=str(tmp_path / "xdg"))
    proc = subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_every_block_is_python_or_not_code() -> None:
    """Blocks are python (executed here) or sh / text (shown only); none is missed by a typo'd tag."""
    langs = {b.lang for b in ALL}
    assert langs <= {"python", "sh", "text"}, sorted(langs)
    assert len(SCRIPTS) >= 2 and len(FRAGMENT_PAGES) >= 8


def test_blocks_that_cannot_run_are_few_and_say_why() -> None:
    skipped = [b for b in PYTHON if b.skip]
    assert len(skipped) <= MAX_SKIPPED, [(b.page, b.line) for b in skipped]
    assert all(len(b.skip or "") >= 10 for b in skipped)


def test_extra_detection() -> None:
    """The skip-by-extra rule reads module-level imports, not imports inside functions."""
    block = Block("x.md", "python", "from mcp import Client\ndef f():\n    import openai\n", 1, None)
    assert block.extras == {"mcp"}
    adapter = Block(
        "x.md", "python", "from betterdb_memory.adapters.langgraph import LangGraphStore\n", 1, None
    )
    assert adapter.extras == {"langgraph"}


def test_skip_marker_is_read(tmp_path: Path) -> None:
    """A block that cannot run is marked on the line before its fence, with its reason."""
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n<!-- docs-test: skip (needs a real OpenAI key) -->\n```python\nprint(1)\n```\n\n"
        "```python\nprint(2)\n```\n",
        encoding="utf-8",
    )
    first, second = page_blocks(page, tmp_path)
    assert first.skip == "needs a real OpenAI key" and second.skip is None


@pytest.mark.parametrize("block", SCRIPTS, ids=[f"{b.page}:{b.line}" for b in SCRIPTS])
def test_script_block_runs_and_prints(block: Block, valkey_url: str, tmp_path: Path) -> None:
    """A complete script exits 0, and one that prints shows output (the quick start: its hit)."""
    if block.skip:
        pytest.skip(f"{block.page}:{block.line}: {block.skip}")
    if missing := missing_extras([block]):
        pytest.skip(f"{block.page}:{block.line} needs the {', '.join(missing)} extra (not installed)")
    script = tmp_path / f"doc_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    with stores_removed_after(valkey_url):
        proc = run_python([str(script)], valkey_url, tmp_path)
    if "print(" in block.code:
        assert proc.stdout.strip(), (
            f"{block.page}:{block.line} printed nothing; a reader would expect output."
            f" stderr: {proc.stderr.strip()!r}"
        )


@pytest.mark.parametrize("page", FRAGMENT_PAGES)
def test_fragment_blocks_run_in_sequence(page: str, valkey_url: str, tmp_path: Path) -> None:
    """A page's fragments run in order, sharing names, against the session server."""
    fragments = [b for b in PYTHON if b.page == page and not b.is_script and not b.skip]
    if missing := missing_extras(fragments):
        pytest.skip(f"{page} needs the {', '.join(missing)} extra (not installed)")
    slug = re.sub(r"\W+", "_", page.removesuffix(".md")).lower()
    spec = {
        "page": page,
        "url": valkey_url,
        "store": f"docs_{slug}",
        "prelude": PRELUDE,
        "blocks": [{"line": b.line, "code": b.code.replace(PLACEHOLDER_URL, valkey_url)} for b in fragments],
    }
    (tmp_path / "blocks.json").write_text(json.dumps(spec), encoding="utf-8")
    runner = tmp_path / "run_fragments.py"
    runner.write_text(FRAGMENT_RUNNER, encoding="utf-8")
    proc = run_python([str(runner), str(tmp_path / "blocks.json")], valkey_url, tmp_path)
    for b in fragments:
        assert f"--- {page} line {b.line}" in proc.stdout
    if page == "docs/getting-started.md":
        assert "Recent conversation:\nUser: Where do I live?\nAssistant: In Lisbon." in proc.stdout
