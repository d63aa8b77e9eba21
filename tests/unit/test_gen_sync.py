"""scripts/gen_sync.py: sync.py is the generator's output, and its --check notices when it is not."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import betterdb_memory.sync as sync_module

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_sync.py"


def run_check(target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--target", str(target)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_sync_py_is_what_the_generator_writes() -> None:
    """The committed sync.py is current (else: run `python scripts/gen_sync.py`)."""
    done = run_check(Path(sync_module.__file__))
    assert done.returncode == 0, done.stderr


def test_the_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    """A sync.py edited by hand (or left behind by a change to MemoryStore) fails --check, with a diff."""
    text = Path(sync_module.__file__).read_text(encoding="utf-8")
    stale = tmp_path / "sync.py"
    stale.write_text(text.replace("self._target.remember_many, items)", "self._target.remember, items)", 1))
    done = run_check(stale)
    assert done.returncode == 1
    assert "is stale" in done.stderr and "self._target.remember_many, items)" in done.stderr


def test_the_generated_file_says_so_and_spells_out_each_method() -> None:
    """Its first lines say it is generated; each blocking method is a plain def (greppable), no installer."""
    text = Path(sync_module.__file__).read_text(encoding="utf-8")
    assert text.startswith("# GENERATED FILE: written by scripts/gen_sync.py")
    tree = ast.parse(text)
    (store,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SyncMemoryStore"]
    defs = {n.name: n for n in store.body if isinstance(n, ast.FunctionDef)}
    assert {"remember", "remember_many", "recall", "recall_by_vector", "connect", "list"} <= set(defs)
    remember = defs["remember"]
    assert [a.arg for a in remember.args.kwonlyargs][:2] == ["importance", "tags"]
    assert "_install" not in text and "setattr" not in text
