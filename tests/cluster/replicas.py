"""A valkey-search cluster of 3 primaries with one replica each, for failover tests.

The engine's ``cluster.sh`` starts primaries only, so this starts the six nodes with the
engine's own ``start_node`` (``common.sh``: the bundled loader, libraries and module,
``--use-coordinator``) and the options ``cluster.sh`` gives a node, then joins them with
``valkey-cli --cluster create ... --cluster-replicas 1`` and waits until every replica's
link to its primary is up. ``--cluster-node-timeout 3000``: a killed primary is replaced
within seconds. Nothing is persisted (``--appendonly no``, ``--save ""``): what survives a
failover is what the replica received, which is what these tests are about.

Used by ``test_cluster_replicas.py`` when ``BETTERDB_TEST_REPLICAS=1`` (``scripts/
with-valkey-search.sh cluster-replicas`` exports it); each scenario starts its own
cluster on free ports and always stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import valkey.asyncio as avalkey

from .conftest import free_base as _free_base

NODES = 6
NODE_TIMEOUT_MS = 3000
# What cluster.sh passes every node (its module argument, then its server options).
MODULE_ARGS = "--use-coordinator"
NODE_OPTIONS = (
    "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
    "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
)  # fmt: skip

_START = """
. "$1/common.sh"; shift
base=$1; rundir=$2; shift 2
ports=$(seq "$base" $((base + 5)))
for p in $ports; do start_node "$p" "$rundir/$p" "$@" || exit 1; done
cli "$base" --cluster create $(for p in $ports; do echo "127.0.0.1:$p"; done) --cluster-replicas 1 \
  --cluster-yes >/dev/null
"""


def free_base() -> int:
    """A base port whose 6 client, bus and coordinator ports are all free (below the ephemeral range)."""
    return _free_base(NODES)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class ReplicaCluster:
    """Six nodes on ``base..base+5``: three primaries, a replica of each."""

    def __init__(self, engine: Path, base: int, rundir: str) -> None:
        self.engine = engine
        self.base = base
        self.rundir = Path(rundir)
        self.ports = list(range(base, base + NODES))

    def _bash(self, script: str, *args: str, timeout: float = 120) -> None:
        done = subprocess.run(
            ["bash", "-c", script, "replicas", str(self.engine), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[:2]}: {done.stderr.strip()[-2000:]}")

    def start(self) -> None:
        self._bash(_START, str(self.base), str(self.rundir), MODULE_ARGS, *NODE_OPTIONS)

    def restart(self, port: int) -> None:
        """Start a stopped node again on its port and dir (its ``nodes.conf`` rejoins it)."""
        script = '. "$1/common.sh"; shift; start_node "$@"'
        self._bash(script, str(port), str(self.node_dir(port)), MODULE_ARGS, *NODE_OPTIONS, timeout=60)

    def stop(self) -> None:
        """SHUTDOWN NOSAVE each node, then SIGKILL any still alive (only this cluster's)."""
        for port in self.ports:  # a frozen node would not answer SHUTDOWN
            pid = self.pid(port)
            if pid is not None and _alive(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
        script = '. "$1/common.sh"; shift; for p in "$@"; do stop_node "$p" "$DIR/$p" || true; done'
        with contextlib.suppress(Exception):
            subprocess.run(
                ["bash", "-c", script, "replicas", str(self.engine), *map(str, self.ports)],
                env=dict(os.environ, DIR=str(self.rundir)),
                capture_output=True,
                timeout=60,
            )
        for port in self.ports:
            pid = self.pid(port)
            if pid is None or not _alive(pid):
                continue
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"valkey-server" in title and f"127.0.0.1:{port}".encode() in title:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def node_dir(self, port: int) -> Path:
        return self.rundir / str(port)

    def pid(self, port: int) -> int | None:
        try:
            return int((self.node_dir(port) / "valkey.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` and wait until it is gone."""
        pid = self.pid(port)
        assert pid is not None, f"no pid file for node {port}"
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {port} (pid {pid}) still alive 10 s after SIGKILL")
            time.sleep(0.02)

    def freeze(self, port: int) -> None:
        """SIGSTOP the node: it takes nothing from its primary (nor answers anyone) until thawed."""
        pid = self.pid(port)
        assert pid is not None, f"no pid file for node {port}"
        os.kill(pid, signal.SIGSTOP)

    def thaw(self, port: int) -> None:
        pid = self.pid(port)
        assert pid is not None, f"no pid file for node {port}"
        os.kill(pid, signal.SIGCONT)

    def node(self, port: int, **options: Any) -> avalkey.Valkey:
        """A plain client to one node (the caller closes it)."""
        return avalkey.Valkey(host="127.0.0.1", port=port, **options)

    async def ask(self, port: int, *args: Any) -> Any:
        """One command to one node, on a connection of its own; the exception when it fails."""
        node = self.node(port, decode_responses=True, socket_timeout=5)
        try:
            return await node.execute_command(*args)
        except Exception as exc:
            return exc
        finally:
            await node.aclose()

    async def replica_of(self) -> dict[int, int]:
        """{primary port: its replica's port} for every primary with a connected replica."""
        out: dict[int, int] = {}
        for port in self.ports:
            info = await self.ask(port, "INFO", "replication")
            if (
                isinstance(info, dict)
                and info.get("role") == "slave"
                and info.get("master_link_status") == "up"
            ):
                out[int(info["master_port"])] = port
        return out

    async def wait_until(self, check: Any, what: str, limit_s: float = 60) -> None:
        """Poll the async ``check()`` until it is true; AssertionError naming ``what`` past ``limit_s``."""
        deadline = time.monotonic() + limit_s
        while not await check():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {limit_s:g} s")
            await asyncio.sleep(0.1)

    async def healthy(self, nodes: list[int] | None = None, primaries: int = 3) -> bool:
        """Every listed node sees ``cluster_state:ok`` and each primary has its replica linked."""
        for port in nodes or self.ports:
            info = await self.ask(port, "CLUSTER", "INFO")
            if not isinstance(info, str) or "cluster_state:ok" not in info:
                return False
        return len(await self.replica_of()) == primaries
