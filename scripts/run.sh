#!/usr/bin/env bash
# The main job: build what it runs, then start syncd in the background on its embedded defaults — state under
# $XDG_STATE_HOME/logsync (else ~/.local/state/logsync, /var/lib/logsync for root), with a local shared
# folder there — wait until it answers, write a note, sync, and show its status and history.
# syncd keeps running; `scripts/run.sh stop` stops it. Running this again shows the running daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.build/debug
# Where this script notes the syncd it started, so that `stop` needs neither a build nor a package.
pidfile="${XDG_RUNTIME_DIR:-${TMPDIR:-/tmp}}/logsync-run-$(id -u).pid"

running() { [ -x "$bin/syncctl" ] && "$bin/syncctl" status >/dev/null 2>&1; }

if [ "${1:-}" = "stop" ]; then
    # Stops without installing or building anything: the pid this script noted (if that process is still
    # a syncd), else the one the control socket names through its store's lock file.
    pid=""
    if [ -f "$pidfile" ]; then
        noted=$(cat "$pidfile")
        if [ -n "$noted" ] && tr '\0' ' ' <"/proc/$noted/cmdline" 2>/dev/null | grep -q syncd; then pid=$noted; fi
    fi
    if [ -z "$pid" ] && running; then
        store=$("$bin/syncctl" status --json | sed -n 's/.*"store":"\([^"]*\)".*/\1/p' | sed 's#\\/#/#g')
        pid=$(cat "$store.syncd.lock")
    fi
    if [ -z "$pid" ]; then rm -f "$pidfile"; echo "syncd is not running"; exit 0; fi
    kill -TERM "$pid"
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; echo "syncd (pid $pid) stopped"; exit 0; }
        sleep 0.1
    done
    echo "syncd (pid $pid) did not stop within 10 s" >&2
    exit 1
fi

scripts/install-deps.sh --build
# Only what the main job runs. sync-relay (an HTTP server with its TLS stack) and the benchmarks are most
# of a full build and are not needed here; scripts/test.sh builds everything.
for product in syncd syncctl logsync notes; do
    echo "building $product (debug; the first build also compiles the packages it uses)"
    swift build --product "$product" 2>&1 | awk '
        /error:|warning: unre/ { print; next }
        /^\[[0-9]+\/[0-9]+\]/ { if (++steps % 100 == 0) { print "  " $1 " steps done"; fflush() } }
        /complete!/ { print "  " $0 }'
done

if running; then
    echo "syncd is already running:"
    exec "$bin/syncctl" status
fi

log=$(mktemp -t syncd-XXXXXX.log)
nohup "$bin/syncd" >"$log" 2>&1 &
pid=$!
echo "$pid" >"$pidfile"
for _ in $(seq 1 200); do
    running && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.05
done
running || { echo "syncd did not answer within 10 s:" >&2; cat "$log" >&2; exit 1; }
head -1 "$log"

store=$("$bin/syncctl" status --json | sed -n 's/.*"store":"\([^"]*\)".*/\1/p' | sed 's#\\/#/#g')
"$bin/logsync" exec --store "$store" --author "$(id -un)" --context run.sh \
    "INSERT INTO Note(id, title) VALUES (lower('$(cat /proc/sys/kernel/random/uuid)'), 'written by scripts/run.sh at $(date +%T)')" >/dev/null
echo
echo "\$ syncctl trigger"
"$bin/syncctl" trigger
echo
echo "\$ syncctl status"
"$bin/syncctl" status
echo
echo "\$ syncctl history --limit 5"
"$bin/syncctl" history --limit 5
echo
echo "syncd keeps running (pid $pid, log $log); stop it with: scripts/run.sh stop"
