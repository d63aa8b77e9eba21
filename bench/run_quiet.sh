#!/usr/bin/env bash
# Everything issue 29 measures, in order, on a quiet machine: ~26 minutes on 2 cores.
#
#   bash bench/run_quiet.sh            # from the repository root
#   PY=/path/to/python VS_PORT=6391 bash bench/run_quiet.sh
#   QUICK=1 R=/tmp/smoke bash bench/run_quiet.sh   # the same steps as smoke runs (--quick, 2k for 100k)
#   STEPS="1 3 5 6" bash bench/run_quiet.sh         # only these steps (issue29.md then says which)
#
# Writes bench/results/ (the files below) and, last, bench/results/issue29.md: every
# "Issue 29" table of this run in one place. A step that fails is reported and the
# others still run; the exit status says whether any failed. Minutes are estimates for
# a quiet 2-core machine (the runs of 2026-11-30 plus the rows issue 29 added):
#
#   1. embedded, 1k + 10k + LoCoMo text        latest.md                      ~2 min
#   2. embedded, 100k                          latest-100k.md                 ~8.5 min
#   3. valkey-search, 1k + 10k + LoCoMo text   latest-valkey-search.md        ~2.5 min
#   4. valkey-search, 100k                     latest-valkey-search-100k.md   ~6 min
#   5. bench_compare.py, 1k + 10k (embedded)   compare.md/.json/.png          ~2 min
#   6. profile_store.py, embedded, 10k         profile.md                     ~2.5 min
#   7. profile_store.py, valkey-search, 10k    profile-valkey-search.md       ~2.5 min
#   then bench/readme_chart.py (headline.svg from this compare.json; seconds) and issue29.md
#
# The LoCoMo rows read ../shared/data/locomo10.json in place and embed its turns and
# questions with the packaged ONNX embedder once (1.5-3.5 min, before any timing),
# cached under $TMPDIR/quality-cache (shared with bench/quality.py; later runs reuse it).
# valkey-search runs need ../shared/engines/valkey-search (skipped, and said, without it).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
VS=${VS:-../shared/engines/valkey-search}
VS_PORT=${VS_PORT:-6391}
R=${R:-bench/results}
QUICK=${QUICK:-}
Q=(); BIG=100000
if [ -n "$QUICK" ]; then Q=(--quick); BIG=2000; fi
mkdir -p "$R"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # measure this tree's library
failed=()
t_all=$(date +%s)

STEPS=${STEPS:-1 2 3 4 5 6 7}
n_step=0
step() {  # step NAME COMMAND...: run, time it, carry on after a failure
  local name=$1; shift
  n_step=$((n_step + 1))
  if [ "$name" != "headline chart" ] && [[ " $STEPS " != *" $n_step "* ]]; then
    echo "== $name: skipped (STEPS=$STEPS)" >&2
    return 0
  fi
  local t0=$(date +%s)
  echo "== $(date -u +%H:%M:%S) $name: $*" >&2
  if "$@"; then
    echo "== $name: done in $(( ($(date +%s) - t0 + 30) / 60 )) min" >&2
  else
    echo "== $name: FAILED (exit $?) after $(( ($(date +%s) - t0 + 30) / 60 )) min" >&2
    failed+=("$name")
  fi
}

vs_run() {  # vs_run COMMAND...: a fresh valkey-search server around one command
  if [ ! -x "$VS/start.sh" ]; then
    echo "valkey-search engine not found at $VS: skipped" >&2
    return 1
  fi
  "$VS/start.sh" "$VS_PORT" >/dev/null || return 1
  "$@"; local rc=$?
  "$VS/stop.sh" "$VS_PORT" >/dev/null
  return $rc
}

# The bench extra (matplotlib for compare's charts, the reference libraries): `make venv` leaves it out.
if ! "$PY" -c 'import matplotlib, betterdb_agent_memory, actrone_memory' 2>/dev/null; then
  echo "== installing the bench extra" >&2
  "$PY" -m pip install -q -e ".[bench]" || { echo "== could not install the bench extra" >&2; exit 1; }
fi

URL=valkey://127.0.0.1:$VS_PORT
step "embedded 1k/10k + LoCoMo" "$PY" bench/bench_store.py "${Q[@]}" --locomo --out "$R/latest.md"
step "embedded 100k" "$PY" bench/bench_store.py "${Q[@]}" --sizes $BIG --caps "" --out "$R/latest-100k.md"
step "valkey-search 1k/10k + LoCoMo" vs_run "$PY" bench/bench_store.py "${Q[@]}" --locomo --url "$URL" \
  --out "$R/latest-valkey-search.md"
step "valkey-search 100k" vs_run "$PY" bench/bench_store.py "${Q[@]}" --sizes $BIG --caps "" --url "$URL" \
  --out "$R/latest-valkey-search-100k.md"
step "compare 1k/10k" "$PY" bench/bench_compare.py "${Q[@]}" --out "$R/compare.md"
step "profile embedded" "$PY" bench/profile_store.py "${Q[@]}" --out "$R/profile.md"
# (--no-experiments: the forget experiments take minutes on valkey-search; issue 29 reads the no-I/O pass.)
step "profile valkey-search" vs_run "$PY" bench/profile_store.py "${Q[@]}" --url "$URL" --no-experiments \
  --out "$R/profile-valkey-search.md"
# The README's headline chart from this run's compare.json (and the recorded quality.md).
if [ -z "$QUICK" ] && [ "$R" = bench/results ]; then
  step "headline chart" "$PY" bench/readme_chart.py
fi

# Every issue 29 table of this run, in one file.
{
  echo "# Issue 29 in one run ($(date -u '+%Y-%m-%d %H:%M UTC'), $(git describe --always --dirty))"
  echo
  echo "Sections copied from the files named; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  if [ "$STEPS" != "1 2 3 4 5 6 7" ]; then
    echo "Only steps $STEPS of bench/run_quiet.sh ran this time; the other files are from an earlier run (each section's first line gives its date)."
  fi
  for f in latest.md latest-100k.md latest-valkey-search.md latest-valkey-search-100k.md compare.md \
           profile.md profile-valkey-search.md; do
    [ -f "$R/$f" ] || continue
    echo
    echo "# From $f"
    echo
    grep -m1 '^`bench/' "$R/$f"
    grep -m1 'search module' "$R/$f"
    awk '/^## (Issue 29 goals|Python on the hot path, no I\/O)/ {on=1; print; next}
         on && /^## / {on=0}
         on {print}' "$R/$f"
  done
} > "$R/issue29.md"
echo "== wrote $R/issue29.md; all steps took $(( ($(date +%s) - t_all + 30) / 60 )) min" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "== FAILED: ${failed[*]}" >&2
  exit 1
fi
