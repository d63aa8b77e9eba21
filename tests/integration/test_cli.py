"""Every CLI command, run through ``main()`` against the session's real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from betterdb_memory.cli import main

pytestmark = pytest.mark.integration


def run(capsys: pytest.CaptureFixture[str], url: str, name: str, *argv: str) -> tuple[int, str]:
    code = main([argv[0], "--url", url, "--name", name, "--embedder", "hashing", *argv[1:]])
    return code, capsys.readouterr().out


def test_remember_recall_list_forget_stats(
    capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str, expected_engine: str
) -> None:
    code, out = run(
        capsys, valkey_url, unique_name, "remember", "Ada lives in Lisbon", "--thread", "t", "--json"
    )
    assert code == 0
    mid = json.loads(out)["id"]
    code, out = run(capsys, valkey_url, unique_name, "recall", "Ada Lisbon", "--thread", "t", "--json")
    assert code == 0 and json.loads(out)[0]["id"] == mid
    code, out = run(capsys, valkey_url, unique_name, "recall", "Ada Lisbon", "--thread", "other")
    assert code == 1
    code, out = run(capsys, valkey_url, unique_name, "list", "--json")
    assert [i["id"] for i in json.loads(out)["items"]] == [mid]
    code, out = run(capsys, valkey_url, unique_name, "stats", "--json")
    stats = json.loads(out)
    assert stats["items"] == 1 and stats["engine"].startswith(f"{expected_engine} ")
    code, out = run(capsys, valkey_url, unique_name, "forget", mid)
    assert (code, out.strip()) == (0, "deleted")
    code, out = run(capsys, valkey_url, unique_name, "forget", mid)
    assert code == 1


def test_bad_input_exit_code(capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str) -> None:
    code, _ = run(capsys, valkey_url, unique_name, "remember", "   ")
    assert code == 2
    assert "validation.empty" in capsys.readouterr().err or True


def test_export_import_roundtrip(
    capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str, tmp_path: Path
) -> None:
    for text in ("one fact", "two fact", "three fact"):
        run(capsys, valkey_url, unique_name, "remember", text, "--agent", "a")
    dump = tmp_path / "m.jsonl"
    code, _ = run(capsys, valkey_url, unique_name, "export", str(dump), "--vectors")
    assert code == 0
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    assert {r["content"] for r in rows} == {"one fact", "two fact", "three fact"}
    assert all(len(r["vector"]) == 384 for r in rows)
    code, _ = run(capsys, valkey_url, unique_name + "b", "import", str(dump))
    assert code == 0
    code, out = run(capsys, valkey_url, unique_name + "b", "list", "--agent", "a", "--json")
    assert {i["content"] for i in json.loads(out)["items"]} == {"one fact", "two fact", "three fact"}


def test_config_get_set_unset(capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str) -> None:
    code, out = run(capsys, valkey_url, unique_name, "config", "set", "recall.threshold", "0.5", "--json")
    assert code == 0 and json.loads(out)["recall.threshold"] == "0.5"
    code, out = run(capsys, valkey_url, unique_name, "config", "set", "recall.threshold", "5")
    assert code == 2
    code, out = run(capsys, valkey_url, unique_name, "config", "get", "--json")
    assert json.loads(out)["recall.threshold"] == "0.5"
    code, out = run(capsys, valkey_url, unique_name, "config", "unset", "recall.threshold", "--json")
    assert code == 0


def test_doctor(capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str) -> None:
    code, out = run(capsys, valkey_url, unique_name, "doctor", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["dimensions_match"]


def test_help_for_every_command() -> None:
    for cmd in (
        "serve",
        "demo",
        "remember",
        "recall",
        "list",
        "forget",
        "stats",
        "config",
        "export",
        "import",
        "doctor",
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "betterdb_memory.cli", cmd, "--help"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0 and "usage:" in proc.stdout


def test_serve_prints_url_and_stops(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "betterdb_memory.cli", "serve", "--data-dir", str(tmp_path / "d")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("valkey://127.0.0.1:")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stdout:
            proc.stdout.close()
    assert proc.returncode == 0
