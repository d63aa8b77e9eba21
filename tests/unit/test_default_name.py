"""One default store name, ``betterdb_ac`` (the reference's), everywhere a user meets it.

A second default somewhere (``app`` in the compose stack once) means two tools pointed at
"the default store" look at different keys, and an ACL written for one denies the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from betterdb_memory import store
from betterdb_memory.cli import build_parser
from betterdb_memory.core import keys

ROOT = Path(__file__).resolve().parents[2]
NAME = "betterdb_ac"


def test_code_and_cli_share_one_default() -> None:
    assert store.DEFAULT_NAME == keys.DEFAULT_NAME == NAME  # defined once, in core.keys
    assert store.MemoryStore.__init__.__kwdefaults__["name"] == NAME
    parser = build_parser()
    assert parser.parse_args(["list"]).name == NAME
    assert parser.parse_args(["--url", "valkey://x:1", "stats"]).name == NAME


def test_docs_document_that_default() -> None:
    """The API signatures (docs/guide/api.md) and the CLI page show the same default."""
    api = (ROOT / "docs" / "guide" / "api.md").read_text(encoding="utf-8")
    assert f'name="{NAME}"' in api
    cli = (ROOT / "docs" / "operations" / "cli.md").read_text(encoding="utf-8")
    assert f"default `{NAME}`" in cli


def test_compose_app_uses_it_and_its_acl_matches() -> None:
    yaml = pytest.importorskip(
        "yaml", reason="PyYAML (installed with the onnx extra) parses the compose file"
    )
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text(encoding="utf-8"))
    name = compose["services"]["app"]["environment"]["BETTERDB_MEMORY_NAME"]
    assert name == NAME
    command = [str(a) for a in compose["services"]["valkey"]["command"]]
    patterns = [a[1:] for a in command if a.startswith("~")]
    assert f"{NAME}:*" in patterns and all(p.startswith((f"{NAME}:", "__betterdb:")) for p in patterns)


def test_the_compose_example_app_falls_back_to_it() -> None:
    """examples/metrics_app.py, run by the compose stack, defaults to the same name."""
    tree = ast.parse((ROOT / "examples" / "metrics_app.py").read_text(encoding="utf-8"))
    fallbacks = [
        node.args[1].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and len(node.args) == 2
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "BETTERDB_MEMORY_NAME"
        and isinstance(node.args[1], ast.Constant)
    ]
    assert fallbacks == [NAME]
