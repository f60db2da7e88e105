#!/usr/bin/env bash
# Two syncd nodes of a sealed account on one machine, through a shared folder (docs/security.md): a key
# made by `logsync seal new` given to node 1; node 2 holds no phrase and waits until node 1 approves it by
# the fingerprint it shows; then a note written on node 1 is read on node 2, and the folder holds nothing
# readable. Used for the README's tour. Needs `swift build` first.
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
    if [ "$n" = 1 ]; then key="key_file = \"$tour/account.key\""; else key="await_approval = true"; fi
    cat > "$tour/node$n/syncd.toml" <<TOML
[store]
path = "store.sqlite"
[sync]
account = "tour"
shared_folder = "$tour/shared"
[seal]
enabled = true
$key
[control]
socket = "syncd.sock"
TOML
done
for n in 1 2; do "$bin/syncd" --config "$tour/node$n/syncd.toml" 2>"$tour/node$n/syncd.log" & done
for n in 1 2; do
    until "$bin/syncctl" status --config "$tour/node$n/syncd.toml" >/dev/null 2>&1; do sleep 0.05; done
done
echo "\$ cat \$TOUR/node2/syncd.toml"; sed "s#$tour#\$TOUR#g" "$tour/node2/syncd.toml"; echo
run "$bin/syncctl" devices list --config "$tour/node2/syncd.toml"
fingerprint=$("$bin/syncctl" devices list --json --config "$tour/node2/syncd.toml" | python3 -c 'import json,sys; print(json.load(sys.stdin)["this"]["fingerprint"])')
until "$bin/syncctl" devices list --config "$tour/node1/syncd.toml" | grep -q "approve $fingerprint"; do
    "$bin/syncctl" trigger --config "$tour/node1/syncd.toml" >/dev/null 2>&1 || true; sleep 0.1
done
run "$bin/syncctl" devices list --config "$tour/node1/syncd.toml"
run "$bin/syncctl" devices approve "$fingerprint" --config "$tour/node1/syncd.toml"
until "$bin/syncctl" trigger --config "$tour/node2/syncd.toml" >/dev/null 2>&1; do sleep 0.1; done
run "$bin/notes" add "Lisbon" --body "written on node 1" --author alice --config "$tour/node1/syncd.toml"
until "$bin/notes" list --config "$tour/node2/syncd.toml" 2>/dev/null | grep -q Lisbon; do sleep 0.02; done
run "$bin/notes" list --config "$tour/node2/syncd.toml"
show find "$tour/shared" -type f
(cd "$tour" && find shared -type f | sort | sed 's#^#$TOUR/#'); echo
show head -c 8 "$tour/shared/tour/…/…0001.lseg"
head -c 8 "$(find "$tour/shared" -name '*1.lseg' | head -1)"; echo; echo
