#!/usr/bin/env bash
# The test suite: installs what is missing, builds every product (the tests start the real executables
# as separate processes), then runs all tests. Prints the Swift Testing and XCTest summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
swift test --skip-build --disable-xctest "$@"
