#!/usr/bin/env bash
# Two syncd nodes on one machine sharing a folder: write on one, see it on the other — first with the
# `logsync` tool and SQL, then with the `notes` app, which finds each node's store through its syncd.toml.
# Used for the README's tour. Needs `swift build` first. Everything lives in a temporary folder, removed
# at the end.
set -euo pipefail
bin="$(cd "$(dirname "$0")/.." && pwd)/.build/debug"
tour=$(mktemp -d /tmp/logsync-tour-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tour"' EXIT
mkdir -p "$tour/shared" "$tour/node1" "$tour/node2"
for n in 1 2; do
    cat > "$tour/node$n/syncd.toml" <<TOML
[store]
path = "store.sqlite"
[sync]
shared_folder = "$tour/shared"
[control]
socket = "syncd.sock"
TOML
    "$bin/syncd" --config "$tour/node$n/syncd.toml" 2>"$tour/node$n/syncd.log" &
done
for n in 1 2; do
    until "$bin/syncctl" status --config "$tour/node$n/syncd.toml" >/dev/null 2>&1; do sleep 0.05; done
done
source "$(dirname "$0")/tour-show.sh"
run() { show "$@"; "$@" 2>&1 | sed "s#$tour#\$TOUR#g"; echo; }
run "$bin/logsync" exec --store "$tour/node1/store.sqlite" --author alice --context laptop \
    "INSERT INTO Folder(id, name) VALUES ('0f5c3b7e-7c1f-4a8e-9d2a-3b7f0c9e1a11', 'Trips')" \
    "INSERT INTO Note(id, title, folder) VALUES ('6b1e2f80-2c4d-4e5f-8a9b-0c1d2e3f4a5b', 'Lisbon', '0f5c3b7e-7c1f-4a8e-9d2a-3b7f0c9e1a11')"
run "$bin/syncctl" trigger --config "$tour/node1/syncd.toml"
run "$bin/syncctl" trigger --config "$tour/node2/syncd.toml"
run "$bin/syncctl" status --config "$tour/node2/syncd.toml"
run "$bin/logsync" history --store "$tour/node2/store.sqlite"
run sqlite3 "$tour/node2/store.sqlite" "SELECT f.name, n.title FROM Note n JOIN Folder f ON f.id = n.folder"

# The notes app: node 2 watches while node 1 adds a note; syncd carries it across on its own.
"$bin/notes" watch --seconds 3 --config "$tour/node2/syncd.toml" >"$tour/watch.out" 2>&1 &
until [ -s "$tour/watch.out" ]; do sleep 0.05; done
run "$bin/notes" add "Porto" --body "tiles, tram 28" --folder Trips --author alice --config "$tour/node1/syncd.toml"
until grep -q "^+ " "$tour/watch.out"; do sleep 0.05; done
run "$bin/notes" list --config "$tour/node2/syncd.toml"
wait %%
echo "$(show "$bin/notes" watch --seconds 3 --config "$tour/node2/syncd.toml")   # on node 2, started before the add"
sed "s#$tour#\$TOUR#g" "$tour/watch.out"

# Accounts: node 1 switches to another account (an empty one here) and back; each time its store is the
# account's own, the way back rebuilt from the account's logs in the shared folder.
echo
run "$bin/syncctl" account switch work --config "$tour/node1/syncd.toml"
run "$bin/notes" list --config "$tour/node1/syncd.toml"
run "$bin/syncctl" account switch default --config "$tour/node1/syncd.toml"
run "$bin/notes" list --config "$tour/node1/syncd.toml"
run "$bin/syncctl" account list --config "$tour/node1/syncd.toml"
