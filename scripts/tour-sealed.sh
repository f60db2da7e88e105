#!/usr/bin/env bash
# Two syncd nodes of a sealed account on one machine, through a shared folder (docs/security.md): a key
# made by `logsync seal new`, both daemons given it, a note written on one and read on the other, and
# what the folder holds. Used for the README's tour. Needs `swift build` first.
# Everything lives in a temporary folder, removed at the end.
set -euo pipefail
bin="$(cd "$(dirname "$0")/.." && pwd)/.build/debug"
tour=$(mktemp -d /tmp/logsync-sealed-tour-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tour"' EXIT
source "$(dirname "$0")/tour-show.sh"
run() { show "$@"; "$@" 2>&1 | sed "s#$tour#\$TOUR#g"; echo; }
mkdir -p "$tour/shared" "$tour/node1" "$tour/node2"
run "$bin/logsync" seal new "$tour/account.key"
for n in 1 2; do
    cat > "$tour/node$n/syncd.toml" <<TOML
[store]
path = "store.sqlite"
[sync]
account = "tour"
shared_folder = "$tour/shared"
[seal]
enabled = true
key_file = "$tour/account.key"
[control]
socket = "syncd.sock"
TOML
done
two_nodes_share_a_note
show find "$tour/shared" -type f
(cd "$tour" && find shared -type f | sort | sed 's#^#$TOUR/#'); echo
show head -c 8 "$tour/shared/tour/…/…0001.lseg"
head -c 8 "$(find "$tour/shared" -name '*1.lseg' | head -1)"; echo; echo
