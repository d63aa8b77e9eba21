"""Every CLI command, run through ``main()`` against the session's real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from betterdb_memory._env import URL_ENV_VARS
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
    # --threshold is a cosine-distance ceiling: 2 admits everything, 0 only an exact match.
    far = ("recall", "quarterly tax forms", "--thread", "t", "--json")
    code, out = run(capsys, valkey_url, unique_name, *far, "--threshold", "2")
    (hit,) = json.loads(out)
    assert code == 0 and hit["id"] == mid and hit["distance"] > 0.05
    assert hit["similarity"] == pytest.approx(1 - hit["distance"] / 2)
    code, out = run(capsys, valkey_url, unique_name, *far, "--threshold", "0")
    assert (code, json.loads(out)) == (1, [])
    code, out = run(capsys, valkey_url, unique_name, "list", "--json")
    page = json.loads(out)
    assert [i["id"] for i in page["items"]] == [mid] and page["total"] == 1 and page["next_cursor"] is None
    assert page["items"][0]["created_at"] > 10**12  # epoch milliseconds
    code, out = run(capsys, valkey_url, unique_name, "stats", "--json")
    stats = json.loads(out)
    assert stats["items"] == 1 and stats["engine"].startswith(f"{expected_engine} ")
    code, out = run(capsys, valkey_url, unique_name, "forget", mid)
    assert (code, out.strip()) == (0, "deleted")
    code, out = run(capsys, valkey_url, unique_name, "forget", mid)
    assert code == 1


def test_bad_input_exit_code(capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str) -> None:
    code = main(["remember", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing", "   "])
    assert code == 2
    assert "validation.empty" in capsys.readouterr().err
    code = main(["remember", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing",
                 "x", "--tag", "a,b"])  # fmt: skip
    assert code == 2 and "validation.comma" in capsys.readouterr().err


def test_export_import_roundtrip(
    capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str, tmp_path: Path
) -> None:
    """``export`` then ``import`` under another name: the same memories, ids, times and TTLs."""
    for text in ("one fact", "two fact"):
        run(capsys, valkey_url, unique_name, "remember", text, "--agent", "a")
    run(
        capsys, valkey_url, unique_name, "remember", "three fact", "--agent", "a",
        "--tag", "x", "--tag", "y", "--importance", "0.8", "--ttl", "3600", "--sensitivity", "pii",
    )  # fmt: skip
    dump = tmp_path / "m.jsonl"
    code, _ = run(capsys, valkey_url, unique_name, "export", str(dump), "--vectors")
    assert code == 0
    header, *rows, end = [json.loads(line) for line in dump.read_text().splitlines()]
    assert (header["format"], header["version"], end["type"]) == ("betterdb-memory", 1, "end")
    assert {r["fields"]["content"] for r in rows} == {"one fact", "two fact", "three fact"}
    assert all(len(r["vector"]) == 384 for r in rows)
    code, _ = run(capsys, valkey_url, unique_name + "b", "import", str(dump))
    assert code == 0
    lists = [
        json.loads(run(capsys, valkey_url, name, "list", "--agent", "a", "--json")[1])["items"]
        for name in (unique_name, unique_name + "b")
    ]
    assert lists[0] == lists[1] and len(lists[0]) == 3  # ids, times, tags, TTL: all the same
    three = next(i for i in lists[1] if i["content"] == "three fact")
    assert (three["tags"], three["importance"], three["sensitivity"]) == (["x", "y"], 0.8, "pii")
    # Same model: the vectors are reused, byte for byte.
    again = tmp_path / "b.jsonl"
    code, _ = run(capsys, valkey_url, unique_name + "b", "export", str(again), "--vectors")
    imported = {r["id"]: r for r in map(json.loads, again.read_text().splitlines()[1:-1])}
    for r in rows:
        assert imported[r["id"]]["vector"] == r["vector"]
        assert imported[r["id"]]["fields"] == r["fields"]


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


def test_help_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """Every subcommand's ``--help`` exits 0 with its usage; the module runs as a script (``python -m``).

    The help is built by ``main()``'s parser, so it is asked in-process (a fresh interpreter
    per command cost seconds each and checked nothing more); one ``python -m`` run checks the
    script entry itself.
    """
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
        "reembed",
        "doctor",
        "reindex",
        "history",
    ):
        with pytest.raises(SystemExit) as exited:  # argparse exits once it has printed the help
            main([cmd, "--help"])
        assert exited.value.code == 0 and f" {cmd} [-h]" in capsys.readouterr().out, cmd
    proc = subprocess.run(
        [sys.executable, "-m", "betterdb_memory.cli", "recall", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "usage:" in proc.stdout and " recall [-h]" in proc.stdout


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


# -- the installed entry point ----------------------------------------------------------

ENTRY_POINT = Path(sys.executable).with_name("betterdb-memory")
DEAD_URL = "valkey://127.0.0.1:9"  # the discard port: nothing listens, a connection would fail


def entry_point(*argv: str, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``betterdb-memory`` as a user would, with no URL variable set unless ``env`` sets one."""
    assert ENTRY_POINT.exists(), f"{ENTRY_POINT} missing: install the package (make venv)"
    environ = {k: v for k, v in os.environ.items() if k not in URL_ENV_VARS}
    environ.update(env or {})
    done = subprocess.run(
        [str(ENTRY_POINT), *argv], capture_output=True, text=True, env=environ, timeout=120, check=False
    )
    return done.returncode, done.stdout, done.stderr


def test_common_options_before_the_subcommand(valkey_url: str, unique_name: str) -> None:
    """``betterdb-memory --url X --name N --embedder E --json remember ...`` works like the options after it."""
    front = ("--url", valkey_url, "--name", unique_name, "--embedder", "hashing", "--json")
    code, out, err = entry_point(*front, "remember", "Ada lives in Lisbon")
    assert code == 0, err
    mid = json.loads(out)["id"]
    code, out, err = entry_point(*front, "recall", "Ada Lisbon")
    assert code == 0, err
    assert [h["id"] for h in json.loads(out)] == [mid]
    # Mixed: some before, some after.
    code, out, err = entry_point("--url", valkey_url, "list", "--name", unique_name, "--embedder", "hashing",
                                 "--json")  # fmt: skip
    assert code == 0, err
    assert [i["id"] for i in json.loads(out)["items"]] == [mid]


def test_option_after_the_subcommand_wins(
    capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str
) -> None:
    """Given in both places, the value after the subcommand is used (the dead URL before it never is)."""
    assert run(capsys, valkey_url, unique_name, "remember", "one")[0] == 0  # set-up, in-process
    code, out, err = entry_point(
        "--url", DEAD_URL, "--name", "someone_else", "--embedder", "onnx",
        "list", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert [i["content"] for i in json.loads(out)["items"]] == ["one"]


@pytest.mark.parametrize(
    ("variable", "lower"),
    [("BETTERDB_MEMORY_URL", ("VALKEY_URL", "REDIS_URL")), ("VALKEY_URL", ("REDIS_URL",)), ("REDIS_URL", ())],
)
def test_url_from_the_environment(
    capsys: pytest.CaptureFixture[str],
    valkey_url: str,
    unique_name: str,
    variable: str,
    lower: tuple[str, ...],
) -> None:
    """With no --url the first URL variable set is used; the ones after it (dead here) are not.

    The memory is written in-process (set-up); the entry point run with only the environment
    must find it, so it reached the session server through ``variable``.
    """
    env = {variable: valkey_url} | {v: DEAD_URL for v in lower}
    assert run(capsys, valkey_url, unique_name, "remember", "from env")[0] == 0
    code, out, err = entry_point("--name", unique_name, "--embedder", "hashing", "--json", "list", env=env)
    assert code == 0, err
    assert [i["content"] for i in json.loads(out)["items"]] == ["from env"]


def test_explicit_url_wins_over_the_environment(valkey_url: str, unique_name: str) -> None:
    env = {v: DEAD_URL for v in URL_ENV_VARS}
    code, out, err = entry_point("--url", valkey_url, "--name", unique_name, "--embedder", "hashing",
                                 "stats", "--json", env=env)  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["name"] == unique_name


def test_forget_a_whole_scope_with_progress_on_stderr(
    capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str
) -> None:
    """``forget --thread T`` deletes the scope; progress goes to stderr, ``--json`` stdout stays one object.

    The memories are written and read back through ``main()`` in-process; the two forgets
    under test run through the installed entry point, as a user runs them.
    """
    front = ("--url", valkey_url, "--name", unique_name, "--embedder", "hashing", "--json")
    for i in range(3):
        assert run(capsys, valkey_url, unique_name, "remember", f"note {i}", "--thread", "gone")[0] == 0
    assert run(capsys, valkey_url, unique_name, "remember", "kept", "--thread", "kept")[0] == 0
    code, out, err = entry_point(*front, "forget", "--thread", "gone")
    assert code == 0, err
    assert json.loads(out) == {"deleted": 3}
    assert "forget_by_scope" in err  # the progress line
    code, out = run(capsys, valkey_url, unique_name, "list", "--thread", "kept", "--json")
    assert [i["content"] for i in json.loads(out)["items"]] == ["kept"]
    code, _, err = entry_point(*front, "forget")  # neither an id nor a scope
    assert (code == 2 and "validation.empty_scope" in err) or "needs a memory id" in err


def test_reindex_switches_an_outdated_index_once(
    capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str
) -> None:
    import asyncio

    import valkey.asyncio as avalkey

    from betterdb_memory.embedders import HashingEmbedder
    from betterdb_memory.store import MemoryStore
    from tests.integration.test_index_switch import ft, old_create_args

    async def make_old_index() -> None:
        client = avalkey.Valkey.from_url(valkey_url)
        store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder())
        try:
            store.index.capabilities = await store.backend.probe()
            await ft(store, *old_create_args(store))
        finally:
            await store.close()
            await client.aclose()

    asyncio.run(make_old_index())
    code, out = run(capsys, valkey_url, unique_name, "reindex", "--json")
    report = json.loads(out)
    assert code == 0 and report["switched"] and "valid_from" in report["missing"]
    code, out = run(capsys, valkey_url, unique_name, "reindex", "--json")
    assert code == 0 and json.loads(out)["switched"] is False


def test_subjects_valid_from_as_of_windows_and_history(
    capsys: pytest.CaptureFixture[str], valkey_url: str, unique_name: str
) -> None:
    """Issue 26's model from the shell: a subject's versions, a recall and a list as of a past
    instant, a window on ``valid_from``, ``history``; a bad time is exit code 2 before any write."""
    base = ("--thread", "ada", "--json")
    code, out = run(capsys, valkey_url, unique_name, "remember", "Ada lives in Lisbon", *base,
                    "--subject", "home city", "--valid-from", "2020-03-01")  # fmt: skip
    lisbon = json.loads(out)["id"]
    code, out = run(capsys, valkey_url, unique_name, "remember", "Ada moved to Berlin", *base,
                    "--subject", "Home  City", "--valid-from", "1714521600000")  # fmt: skip
    berlin = json.loads(out)["id"]  # 2024-05-01 in epoch ms; the subject normalised
    code, out = run(capsys, valkey_url, unique_name, "remember", "Ada took up rowing", *base,
                    "--valid-from", "2022-06")  # fmt: skip
    rowing = json.loads(out)["id"]
    where = ("recall", "Where does Ada live?", *base, "--threshold", "2")
    code, out = run(capsys, valkey_url, unique_name, *where)
    now = json.loads(out)
    assert code == 0 and lisbon not in [h["id"] for h in now]  # superseded: out of default recall
    assert {h["id"]: h["valid_from"] for h in now}[berlin] == 1714521600000
    code, out = run(capsys, valkey_url, unique_name, *where, "--as-of", "2023-01-01")
    then = {h["id"]: h for h in json.loads(out)}
    assert set(then) == {lisbon, rowing} and then[lisbon]["valid_until"] == 1714521600000
    code, out = run(capsys, valkey_url, unique_name, "list", *base, "--since", "2022", "--until", "2023")
    assert [i["id"] for i in json.loads(out)["items"]] == [rowing]
    code, out = run(capsys, valkey_url, unique_name, "list", *base, "--as-of", "2021-01-01")
    assert [i["id"] for i in json.loads(out)["items"]] == [lisbon]
    code, out = run(capsys, valkey_url, unique_name, "history", "home city", *base)
    versions = json.loads(out)
    assert code == 0 and [v["id"] for v in versions] == [berlin, lisbon]
    assert [v["current"] for v in versions] == [True, False] and versions[1]["valid_until"] == 1714521600000
    code, out = run(capsys, valkey_url, unique_name, "history", "home city", "--thread", "other")
    assert code == 1
    code, out = run(capsys, valkey_url, unique_name, "history", "home city", *base, "--kind", "memory")
    assert [v["id"] for v in json.loads(out)] == [berlin, lisbon]
    code, out = run(capsys, valkey_url, unique_name, "history", "home city", *base, "--kind", "fact")
    assert (code, json.loads(out)) == (1, [])  # the user's memories, not extracted facts
    code = main(["history", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing",
                 "home city", "--kind", "rumour"])  # fmt: skip
    assert code == 2 and "validation." in capsys.readouterr().err
    code = main(["recall", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing",
                 "what did Ada do yesterday", "--tz", "Mars/Olympus"])  # fmt: skip
    assert code == 2 and "validation.timezone" in capsys.readouterr().err
    code, out = run(capsys, valkey_url, unique_name, "recall", "rowing", *base, "--tz", "Europe/Berlin")
    assert code == 0 and rowing in [h["id"] for h in json.loads(out)]
    code, out = run(capsys, valkey_url, unique_name, "history", "home city", "--thread", "ada")
    assert code == 0 and "current" in out.splitlines()[0] and "2024-05-01 .. now" in out
    code = main(["remember", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing",
                 "Ada moved to Paris", "--thread", "ada", "--valid-from", "May 2024"])  # fmt: skip
    assert code == 2 and "validation.time_format" in capsys.readouterr().err
    code = main(["recall", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing",
                 "x", "--since", "2024", "--until", "2023"])  # fmt: skip
    assert code == 2 and "validation.time_window" in capsys.readouterr().err
    code, out = run(capsys, valkey_url, unique_name, "list", *base)
    assert {i["id"] for i in json.loads(out)["items"]} == {berlin, rowing}  # nothing half-written
    code, out = run(capsys, valkey_url, unique_name, "recall", "Ada", "--thread", "ada", "--as-of", "2021",
                    "--threshold", "2")  # fmt: skip
    assert out.splitlines()[1].endswith("Ada lives in Lisbon  (until 2024-05-01T00:00:00.000Z)")
    code, out = run(capsys, valkey_url, unique_name, "list", "--thread", "ada", "--as-of", "2021")
    assert "Ada lives in Lisbon  (until 2024-05-01T00:00:00.000Z)" in out
    code = main(["forget", "--url", valkey_url, "--name", unique_name, "--embedder", "hashing",
                 rowing, "--since", "2022"])  # fmt: skip
    assert code == 2 and "validation.usage" in capsys.readouterr().err
    code, out = run(capsys, valkey_url, unique_name, "forget", "--thread", "ada", "--since", "2022",
                    "--until", "2023", "--json")  # fmt: skip
    assert json.loads(out) == {"deleted": 1}
    code, out = run(capsys, valkey_url, unique_name, "list", *base)
    assert [i["id"] for i in json.loads(out)["items"]] == [berlin]  # the window's memory only
