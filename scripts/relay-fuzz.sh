#!/usr/bin/env bash
# Fuzzes a live sync-relay against its OpenAPI document (docs/relay-openapi.yaml) with schemathesis:
# no 5xx, every answer's status, content type and body as documented, 405 for undeclared methods.
# Bounded: RELAY_FUZZ_EXAMPLES examples per operation (default 25; CI uses the default, set more by hand).
# Both backends, one after the other: the embedded SQLite and a throwaway PostgreSQL cluster
# (RELAY_FUZZ_BACKENDS="sqlite" or "postgres" for one).
# Needs the debug build (swift build) and schemathesis (pip install schemathesis; scripts/test.sh does it).
# Everything lives in a temporary folder, removed at the end; the relay listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${LOGSYNC_BIN_DIR:-$PWD/.build/debug}"
examples="${RELAY_FUZZ_EXAMPLES:-25}"
backends="${RELAY_FUZZ_BACKENDS:-sqlite postgres}"
work=$(mktemp -d /tmp/relay-fuzz-XXXXXX)
# PostgreSQL (when started) first, with a fast shutdown, then the relay; the folder last.
stop_all() {
    [ -n "${pgstop:-}" ] && "${pgstop[@]}" >/dev/null 2>&1
    kill $(jobs -p) 2>/dev/null
    wait 2>/dev/null
    rm -rf "$work"
}
trap stop_all EXIT

# A throwaway PostgreSQL cluster in $work/pg, on a Unix socket only; as root (CI) it runs as the postgres
# user. It stops when this script ends, however it ends: its shell waits on a pipe this script holds.
start_postgres() {
    local pgbin
    pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -x "$pgbin/initdb" ] || { echo "relay-fuzz: PostgreSQL is not installed (scripts/install-deps.sh)" >&2; exit 1; }
    mkdir -p "$work/pg"
    local as=()
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$work" "$work/pg"; as=(runuser -u postgres --); fi
    "${as[@]}" "$pgbin/initdb" -D "$work/pg/data" -A trust -U postgres --no-sync >/dev/null
    pgport=$((20000 + RANDOM % 20000))
    "${as[@]}" sh -c "$pgbin/postgres -D $work/pg/data -k $work/pg -p $pgport -c listen_addresses='' >$work/pg/log 2>&1 & pid=\$!; cat >/dev/null; kill -INT \$pid; wait \$pid" \
        < <(while kill -0 $$ 2>/dev/null; do sleep 1; done) &
    pgstop=("${as[@]}" "$pgbin/pg_ctl" -D "$work/pg/data" -m fast -w stop)
    for _ in $(seq 1 300); do "$pgbin/pg_isready" -q -h "$work/pg" -p "$pgport" && return 0; sleep 0.1; done
    echo "relay-fuzz: PostgreSQL did not start:" >&2; cat "$work/pg/log" >&2; exit 1
}

fuzz() {
    local backend=$1 store=()
    if [ "$backend" = postgres ]; then
        start_postgres
        printf '[storage]\nbackend = "postgres"\n[postgres]\nsocket_directory = "%s"\nport = %s\nuser = "postgres"\ndatabase = "postgres"\n' \
            "$work/pg" "$pgport" >"$work/relay.toml"
        store=(--config "$work/relay.toml")
    else
        store=(--database "$work/relay.sqlite")
    fi
    "$bin/sync-relay" account create acct "${store[@]}" >/dev/null
    token=$("$bin/sync-relay" token issue acct "${store[@]}" 2>/dev/null)
    "$bin/sync-relay" serve "${store[@]}" --host 127.0.0.1 --port 0 >"$work/out" 2>"$work/log" &
    for _ in $(seq 1 300); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
    port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out")
    [ -n "$port" ] || { echo "relay-fuzz: sync-relay ($backend) did not start:" >&2; cat "$work/log" >&2; exit 1; }
    # positive_data_acceptance is left out: the document cannot say that FIRST <= LAST in a segment range, so
    # a range like 36-21 is schema-valid and rightly refused with 400.
    (cd "$work" && timeout 600 schemathesis run "$OLDPWD/docs/relay-openapi.yaml" --url "http://127.0.0.1:$port" \
        -H "Authorization: Bearer $token" --max-examples "$examples" --seed 1 \
        --checks all --exclude-checks positive_data_acceptance --no-color)
    local metrics
    metrics=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=10).read().decode())") \
        || { echo "relay-fuzz: the relay ($backend) stopped answering" >&2; exit 1; }
    grep -q relay_requests_total <<<"$metrics" || { echo "relay-fuzz: no metrics from the relay ($backend)" >&2; exit 1; }
    if grep -q "relay_requests_total{[^}]*status=\"5" <<<"$metrics"; then
        grep "relay_requests_total" <<<"$metrics" >&2
        echo "relay-fuzz: the relay ($backend) answered 5xx" >&2; exit 1
    fi
    kill %?serve 2>/dev/null || true
    echo "relay-fuzz: $backend passed ($examples examples per operation)"
}

for backend in $backends; do fuzz "$backend"; done
