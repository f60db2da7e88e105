#!/usr/bin/env bash
# Runs logsync-bench suites on a release build and appends their JSON lines to docs/bench/results.jsonl,
# each with the commit, the date and a run id, for scripts/bench-charts.py (docs/BENCHMARKS.md):
#
#   scripts/bench-record.sh SUITE [SUITE …] [-- OPTIONS FOR logsync-bench]
#   scripts/bench-record.sh capture replay latency stall -- --quick
#
# Progress goes to stderr as the benchmark prints it; a suite that fails stops the script, and what it
# printed before is kept. A working tree with uncommitted changes is recorded as COMMIT+dirty.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do suites+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#suites[@]} -gt 0 ] || { echo "usage: scripts/bench-record.sh SUITE [SUITE …] [-- OPTIONS]" >&2; exit 64; }

scripts/install-deps.sh
for product in logsync-bench syncd sync-relay; do swift build -c release --product "$product" >/dev/null; done
commit=$(git rev-parse --short=7 HEAD)
git diff --quiet HEAD -- Sources Package.swift || commit="$commit+dirty"
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
mkdir -p docs/bench
for suite in "${suites[@]}"; do
    run="$date-$suite"
    command="logsync-bench $suite${*:+ $*}"
    echo "== $command at $commit" >&2
    .build/release/logsync-bench "$suite" "$@" | while IFS= read -r line; do
        printf '%s\n' "$line"
        printf '%s\n' "${line%\}},\"commit\":\"$commit\",\"date\":\"$date\",\"run\":\"$run\",\"command\":\"$command\"}" >> docs/bench/results.jsonl
    done
done
