"""The MCP server against the protocol's own conformance suite (``@modelcontextprotocol/conformance``).

``betterdb-memory mcp --http`` runs on 127.0.0.1 over the session's engine, open (as a
loopback server may run) and with a bearer token, and the npm package's server scenarios (the ``active`` suite: ``server-initialize``, ``tools-list``,
``ping``, ``dns-rebinding-protection``, ...) run against it with ``mcp-baseline.yml``, the
scenarios expected to fail and why. The suite exits non-zero on a failure not in the
baseline and on a baseline entry that passes.

Needs ``npx`` (Node.js) and the npm registry; without ``npx`` the test is skipped with
that reason. The suite has no option to send a token: ``bearer_token.cjs``, preloaded into
Node, adds the header to every request it makes (and a run without it is refused, which
shows the token is both needed and sent). Version 0.1.13 is pinned: the last that runs on Node 20 (0.1.14 and later
import ``fs.globSync``, Node 22).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_adapter_mcp import run_http_server
from tests.integration.test_adapter_mcp_auth import TOKEN, TOKEN_ENV, _env

pytestmark = pytest.mark.integration

PACKAGE = "@modelcontextprotocol/conformance@0.1.13"
BASELINE = Path(__file__).with_name("mcp-baseline.yml")
PRELOAD = Path(__file__).with_name("bearer_token.cjs")
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


@pytest.fixture(scope="module", params=[None, TOKEN], ids=["open", "token"])
def token(request: pytest.FixtureRequest) -> str | None:
    value: str | None = request.param
    return value


@pytest.fixture(scope="module")
def http_server(valkey_url: str, token: str | None) -> Iterator[str]:
    """The CLI's HTTP server, open or with the token: one per token for the module (a start costs
    seconds, much more on a loaded machine; the suite's runs only read through it)."""
    env = _env(**{TOKEN_ENV: token}) if token else _env()
    yield from run_http_server(valkey_url, f"t{uuid.uuid4().hex[:12]}", env=env)


def _suite(npx: str, url: str, token: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if token:
        env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} --require {PRELOAD}".strip()
        env["MCP_BEARER_TOKEN"] = token
    return subprocess.run(
        [npx, "-y", PACKAGE, "server", "--url", url, *args],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip


def test_server_scenarios_pass_apart_from_the_baseline(
    npx: str, http_server: str, token: str | None, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    done = _suite(
        npx, http_server, token, "--suite", "active", "--expected-failures", str(BASELINE), "-o", str(out)
    )
    print(done.stdout[-6000:])
    assert done.returncode == 0, f"conformance run failed:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    status: dict[str, list[str]] = {}
    for checks in out.glob("server-*/checks.json"):
        # server-<scenario>-<ISO timestamp with dashes>
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", checks.parent.name.removeprefix("server-"))
        status[scenario] = [c["status"] for c in json.loads(checks.read_text())]
    for scenario in MUST_PASS:
        assert status.get(scenario) and "FAILURE" not in status[scenario], (scenario, status.get(scenario))


@pytest.mark.parametrize("token", [TOKEN], ids=["token"], indirect=True)
def test_without_the_token_the_suite_is_refused(npx: str, http_server: str) -> None:
    """The token server against the suite without the preload: initialisation fails (401)."""
    done = _suite(npx, http_server, None, "--scenario", "server-initialize")
    assert done.returncode != 0 and "a bearer token is required" in done.stdout, done.stdout[-3000:]
