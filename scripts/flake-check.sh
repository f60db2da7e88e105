#!/usr/bin/env bash
# The flake check: runs the whole suite (scripts/test.sh) N times in a row (default 10) with two CPU hogs
# beside it, and reports every test that failed at least once, with how often. A test that fails one run
# in five under load is a defect (docs/operations.md, "Tests"); this is how to find one before CI does.
#
#   scripts/flake-check.sh [N] [-- ARGS FOR scripts/test.sh]
#
# Each run's output goes to $FLAKE_LOGS (default .build/flake-check/<time>/run-K.log); the summary, with
# each run's exit status and time, goes to stdout and to summary.txt there. Exits 0 only when every run
# passed. The hogs (`yes > /dev/null`, two of them) are bounded by the script: they stop when it ends,
# however it ends, and each is also killed by `timeout` after HOG_LIMIT_S seconds (default 6 hours).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-10}
shift || true
[ "${1:-}" = "--" ] && shift
case "$runs" in '' | *[!0-9]*) echo "usage: scripts/flake-check.sh [N] [-- ARGS FOR scripts/test.sh]" >&2; exit 64 ;; esac

logs=${FLAKE_LOGS:-.build/flake-check/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$logs"
summary="$logs/summary.txt"

hogs=()
stop_hogs() {
    for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
    hogs=()
}
trap stop_hogs EXIT INT TERM
for _ in 1 2; do
    timeout "${HOG_LIMIT_S:-21600}" yes >/dev/null &
    hogs+=($!)
done
echo "flake check: $runs runs of scripts/test.sh $*, beside 2 CPU hogs (pids ${hogs[*]}); logs in $logs" | tee "$summary"

failed_runs=0
for run in $(seq 1 "$runs"); do
    log="$logs/run-$run.log"
    started=$(date +%s)
    set +e
    scripts/test.sh "$@" >"$log" 2>&1
    status=$?
    set -e
    elapsed=$(($(date +%s) - started))
    [ $status -eq 0 ] || failed_runs=$((failed_runs + 1))
    # Swift Testing's closing lines, one per runner (main, relay), and the relay fuzzer's verdict.
    closing=$(grep -aE "Test run with [0-9]+ tests?.* (passed|failed)|^relay-fuzz: " "$log" | sed -E 's/^[^A-Za-z]*//' | tr '\n' ';' || true)
    printf 'run %d: exit %d after %d s — %s\n' "$run" "$status" "$elapsed" "${closing:-no summary line}" | tee -a "$summary"
done

stop_hogs
echo | tee -a "$summary"
# Every test Swift Testing reported as failed, and how many runs it failed in.
failures=$(for log in "$logs"/run-*.log; do
    grep -aoE 'Test "[^"]*" failed|Test [A-Za-z_][A-Za-z0-9_]*\([^)]*\) failed' "$log" | sort -u || true
done | sort | uniq -c | sort -rn)
if [ -n "$failures" ]; then
    echo "tests that failed at least once (runs failed in, test):" | tee -a "$summary"
    echo "$failures" | tee -a "$summary"
fi
others=$(for log in "$logs"/run-*.log; do grep -aE "^error:|Fatal error|^relay-fuzz: (PostgreSQL|sync-relay|the relay|no metrics)" "$log" | head -3 || true; done | sort | uniq -c)
[ -z "$others" ] || { echo "other failures:" | tee -a "$summary"; echo "$others" | tee -a "$summary"; }
echo "$((runs - failed_runs)) of $runs runs passed" | tee -a "$summary"
[ "$failed_runs" -eq 0 ]
