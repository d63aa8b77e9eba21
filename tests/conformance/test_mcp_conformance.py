"""The MCP server against the protocol's own conformance suite (``@modelcontextprotocol/conformance``).

``betterdb-memory mcp --http`` runs on 127.0.0.1 over the session's engine, and the npm
package's server scenarios (the ``active`` suite: ``server-initialize``, ``tools-list``,
``ping``, ``dns-rebinding-protection``, ...) run against it with ``mcp-baseline.yml``, the
scenarios expected to fail and why. The suite exits non-zero on a failure not in the
baseline and on a baseline entry that passes.

Needs ``npx`` (Node.js) and the npm registry; without ``npx`` the test is skipped with
that reason. Version 0.1.13 is pinned: the last that runs on Node 20 (0.1.14 and later
import ``fs.globSync``, Node 22).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_adapter_mcp import run_http_server

pytestmark = pytest.mark.integration

PACKAGE = "@modelcontextprotocol/conformance@0.1.13"
BASELINE = Path(__file__).with_name("mcp-baseline.yml")
# Scenarios that test this server for real (tools-call-simple-text and tools-call-error pass
# too, but only because the suite accepts the error its unknown test tools get).
MUST_PASS = (
    "server-initialize",
    "tools-list",
    "ping",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "resources-list",
    "prompts-list",
)


@pytest.fixture(scope="module")
def npx() -> str:
    """The ``npx`` path, with the pinned package fetched (a skip with the reason when impossible)."""
    path = shutil.which("npx")
    if path is None:
        pytest.skip("npx not found (Node.js is not installed): the MCP conformance scenarios did not run")
    fetched = subprocess.run(
        [path, "-y", PACKAGE, "--version"], capture_output=True, text=True, timeout=600, check=False
    )
    if fetched.returncode != 0:
        pytest.skip(
            f"could not fetch {PACKAGE} with npx (exit {fetched.returncode}): {fetched.stderr[-500:]}"
        )
    return path


@pytest.fixture
def http_server(valkey_url: str, unique_name: str) -> Iterator[str]:
    yield from run_http_server(valkey_url, unique_name)


def test_server_scenarios_pass_apart_from_the_baseline(npx: str, http_server: str, tmp_path: Path) -> None:
    out = tmp_path / "results"
    done = subprocess.run(
        [npx, "-y", PACKAGE, "server", "--url", http_server, "--suite", "active",
         "--expected-failures", str(BASELINE), "-o", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    print(done.stdout[-6000:])
    assert done.returncode == 0, f"conformance run failed:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    status: dict[str, list[str]] = {}
    for checks in out.glob("server-*/checks.json"):
        # server-<scenario>-<ISO timestamp with dashes>
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", checks.parent.name.removeprefix("server-"))
        status[scenario] = [c["status"] for c in json.loads(checks.read_text())]
    for scenario in MUST_PASS:
        assert status.get(scenario) and "FAILURE" not in status[scenario], (scenario, status.get(scenario))
