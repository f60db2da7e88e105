#!/usr/bin/env bash
# Two syncd nodes on one machine that share no folder: both sync through a sync-relay on 127.0.0.1.
# Used for the README's tour. Needs `swift build` first. Everything lives in a temporary folder, removed
# at the end.
set -euo pipefail
bin="$(cd "$(dirname "$0")/.." && pwd)/.build/debug"
tour=$(mktemp -d /tmp/logsync-relay-tour-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tour"' EXIT
source "$(dirname "$0")/tour-show.sh"
run() { show "$@"; "$@" 2>&1 | sed "s#$tour#\$TOUR#g; s#lsr1_[0-9a-f]*_[A-Za-z0-9_-]*#lsr1_…#g"; echo; }
mkdir -p "$tour/relay" "$tour/node1" "$tour/node2"
run "$bin/sync-relay" account create tour --database "$tour/relay/relay.sqlite"
"$bin/sync-relay" serve --database "$tour/relay/relay.sqlite" --port 0 >"$tour/relay/out" 2>"$tour/relay/log" &
until grep -q listening "$tour/relay/out" 2>/dev/null; do sleep 0.05; done
url=$(sed 's/.* on //' "$tour/relay/out")
for n in 1 2; do
    show "$bin/sync-relay" token issue tour --database "$tour/relay/relay.sqlite" "> $tour/node$n/relay-token"
    "$bin/sync-relay" token issue tour --database "$tour/relay/relay.sqlite" >"$tour/node$n/relay-token" 2>/dev/null
    chmod 600 "$tour/node$n/relay-token"
    cat > "$tour/node$n/syncd.toml" <<TOML
[store]
path = "store.sqlite"
[sync]
account = "tour"
[relay]
url = "$url"
token_file = "relay-token"
[control]
socket = "syncd.sock"
TOML
done
two_nodes_share_a_note "s#127.0.0.1:[0-9]*#127.0.0.1:PORT#"
"$bin/syncctl" status --config "$tour/node2/syncd.toml" | sed "s#$tour#\$TOUR#g; s#127.0.0.1:[0-9]*#127.0.0.1:PORT#" | { show "$bin/syncctl" status --config "$tour/node2/syncd.toml"; cat; }
echo
run "$bin/sync-relay" account list --database "$tour/relay/relay.sqlite"
