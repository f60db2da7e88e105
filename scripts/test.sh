#!/usr/bin/env bash
# The test suite: installs what is missing, builds every product (the tests start the real executables
# as separate processes), then runs all tests. Prints the Swift Testing and XCTest summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
swift test --skip-build --disable-xctest "$@"
# The relay against its OpenAPI document (bounded; RELAY_FUZZ_EXAMPLES=500 for a longer run by hand).
if [ $# -eq 0 ]; then
    command -v schemathesis >/dev/null 2>&1 || python3 -m pip install -q schemathesis >/dev/null
    scripts/relay-fuzz.sh
fi
