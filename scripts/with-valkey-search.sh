#!/usr/bin/env bash
# Usage: scripts/with-valkey-search.sh standalone|cluster COMMAND [ARGS...]
# Runs COMMAND against the optional valkey-search test engine (../shared/engines/valkey-search,
# override with VALKEY_SEARCH_ENGINE): "standalone" starts one server on a free port with AOF
# (appendfsync everysec) and exports VALKEY_URL and BETTERDB_TEST_ENGINE=valkey-search; "cluster"
# exports VALKEY_SEARCH_ENGINE and BETTERDB_TEST_CLUSTER=1 (tests/cluster/conftest.py starts and
# stops the cluster itself); "cluster-replicas" exports the same and BETTERDB_TEST_REPLICAS=1
# (tests/cluster/test_cluster_replicas.py starts clusters with a replica per primary). The server is stopped whatever happens (trap). When the engine is
# absent: one line saying so, exit 0 (it is a test engine of this project, not on users' machines).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: with-valkey-search.sh standalone|cluster|cluster-replicas COMMAND [ARGS...]}; shift
engine=${VALKEY_SEARCH_ENGINE:-../shared/engines/valkey-search}
if [ ! -x "$engine/start.sh" ]; then
  echo "valkey-search test engine not found at $engine: skipping the $mode run (set VALKEY_SEARCH_ENGINE to use another)"
  exit 0
fi
engine=$(cd "$engine" && pwd)
export VALKEY_SEARCH_ENGINE=$engine
case $mode in
  cluster) export BETTERDB_TEST_CLUSTER=1; exec "$@" ;;
  cluster-replicas) export BETTERDB_TEST_CLUSTER=1 BETTERDB_TEST_REPLICAS=1; exec "$@" ;;
  standalone) ;;
  *) echo "usage: with-valkey-search.sh standalone|cluster|cluster-replicas COMMAND [ARGS...]" >&2; exit 2 ;;
esac
# A free port: bind port 0, read the kernel's choice. Retry if someone takes it before the server does.
free_port() { "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export VALKEY_SEARCH_RUNDIR=${VALKEY_SEARCH_RUNDIR:-$(mktemp -d "${TMPDIR:-/tmp}/betterdb-vs.XXXXXX")}
port=""
stop() { [ -n "$port" ] && "$engine/stop.sh" "$port" >/dev/null 2>&1 || true; rm -rf "$VALKEY_SEARCH_RUNDIR"; }
trap stop EXIT
trap 'exit 130' INT TERM
for _ in 1 2 3; do
  candidate=$(free_port)
  if "$engine/start.sh" "$candidate" --appendonly yes --appendfsync everysec >/dev/null; then port=$candidate; break; fi
done
[ -n "$port" ] || { echo "could not start the valkey-search test engine" >&2; exit 1; }
export VALKEY_URL="valkey://127.0.0.1:$port" BETTERDB_TEST_ENGINE=valkey-search
echo "valkey-search test engine (standalone, AOF everysec) at $VALKEY_URL"
"$@"
