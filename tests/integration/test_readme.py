"""Every ```python block of README.md runs, against real engines, the way a reader would run it.

A block that calls ``asyncio.run(main())`` is a complete script: it runs alone in a
fresh interpreter. The other blocks are fragments that build on each other (``store``
from one block is used by the next), so they run in order in one shared namespace,
with top-level ``await`` allowed, as in ``python -m asyncio``. Each runs in a
subprocess with ``VALKEY_URL`` set to the session server and ``XDG_DATA_HOME`` in a
temporary dir, so ``MemoryStore.connect()`` without a URL starts an embedded engine
there, never in the user's data dir. The README's placeholder server URL is replaced by
the session server's. ``text`` and ``sh`` blocks are not executed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
PLACEHOLDER_URL = "valkey://localhost:6379"  # "your own Valkey" in the README
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL)

# Runs fragments in order in one namespace; then closes what they left open and
# deletes what they wrote, so a long-lived VALKEY_URL server is left as found.
FRAGMENT_RUNNER = """
import ast, asyncio, json, sys

async def main() -> None:
    ns = {"__name__": "__main__"}
    for block in json.load(open(sys.argv[1])):
        print(f"--- README.md line {block['line']}", flush=True)
        code = compile(block["code"], f"README.md:{block['line']}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, ns)
        if asyncio.iscoroutine(result):
            await result
    store, client = ns.get("store"), ns.get("client")
    if store is not None:
        await store.erase(agent_id="assistant")
        await store.forget_by_scope(thread_id="ada")
        await store.purge_fact_history(thread_id="ada")
        await store.close()
    if client is not None:
        await client.aclose()

asyncio.run(main())
"""


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # of the opening fence

    @property
    def is_script(self) -> bool:
        return "asyncio.run(" in self.code


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [Block(m["lang"], m["code"], text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


PYTHON = [b for b in readme_blocks() if b.lang == "python"]
SCRIPTS = [b for b in PYTHON if b.is_script]
FRAGMENTS = [b for b in PYTHON if not b.is_script]


def run_python(
    args: list[str], valkey_url: str, tmp_path: Path, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, VALKEY_URL=valkey_url, XDG_DATA_HOME=str(tmp_path / "xdg"))
    proc = subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check:
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_every_block_is_python_or_not_code() -> None:
    """Blocks are python (executed here) or sh / text (shown only); none is missed by a typo'd tag."""
    langs = {b.lang for b in readme_blocks()}
    assert langs <= {"python", "sh", "text"}, langs
    assert len(SCRIPTS) >= 1 and len(FRAGMENTS) >= 3


@pytest.mark.parametrize("block", SCRIPTS, ids=[f"line{b.line}" for b in SCRIPTS])
def test_script_block_runs_and_prints(block: Block, valkey_url: str, tmp_path: Path) -> None:
    """A complete README script exits 0, and one that prints shows output (the quick start: its hit)."""
    script = tmp_path / f"readme_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    proc = run_python([str(script)], valkey_url, tmp_path)
    if "print(" in block.code:
        assert proc.stdout.strip(), (
            f"README.md:{block.line} printed nothing; a reader would expect output."
            f" stderr: {proc.stderr.strip()!r}"
        )


def test_fragment_blocks_run_in_sequence(valkey_url: str, tmp_path: Path) -> None:
    """The README fragments run in order, sharing names, against the session server."""
    assert any(PLACEHOLDER_URL in b.code for b in FRAGMENTS), "placeholder URL not found in README"
    blocks = [{"line": b.line, "code": b.code.replace(PLACEHOLDER_URL, valkey_url)} for b in FRAGMENTS]
    (tmp_path / "blocks.json").write_text(json.dumps(blocks), encoding="utf-8")
    runner = tmp_path / "run_fragments.py"
    runner.write_text(FRAGMENT_RUNNER, encoding="utf-8")
    proc = run_python([str(runner), str(tmp_path / "blocks.json")], valkey_url, tmp_path)
    for b in FRAGMENTS:
        assert f"--- README.md line {b.line}" in proc.stdout
    assert "Recent conversation:\nUser: Where do I live?\nAssistant: In Lisbon." in proc.stdout
