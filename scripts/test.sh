#!/usr/bin/env bash
# The test suite: installs what is missing, builds every product (the tests start the real executables
# as separate processes), then runs all tests. Prints the Swift Testing and XCTest summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
if [ $# -gt 0 ]; then
    swift test --skip-build --disable-xctest "$@"
else
    # The relay's tests start many processes (relays, syncd clusters, 2,200 connections): run beside the
    # rest on two cores they starve its timing-sensitive tests (the commit monitor's 250 ms bound), so
    # they run after it.
    swift test --skip-build --disable-xctest --skip LogsyncRelayTests
    swift test --skip-build --disable-xctest --filter LogsyncRelayTests
    # The relay against its OpenAPI document (bounded; RELAY_FUZZ_EXAMPLES=500 for a longer run by hand).
    # schemathesis from PyPI, in a virtual environment of its own under .build (Debian's python3 refuses
    # packages installed beside its own).
    if ! command -v schemathesis >/dev/null 2>&1; then
        venv=.build/fuzz-venv
        [ -x "$venv/bin/schemathesis" ] || { python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q schemathesis >/dev/null; }
        export PATH="$PWD/$venv/bin:$PATH"
    fi
    scripts/relay-fuzz.sh
fi
