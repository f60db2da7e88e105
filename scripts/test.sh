#!/usr/bin/env bash
# The test suite: installs what is missing, builds every product (the tests start the real executables
# as separate processes), then runs all tests. Prints the Swift Testing and XCTest summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Python tools from PyPI, in a virtual environment of their own under .build (Debian's python3 refuses
# packages installed beside its own): prometheus_client, whose parser reads syncd's /metrics in the tests,
# and schemathesis, the relay's OpenAPI fuzzer.
venv=.build/test-venv
if ! "$venv/bin/python3" -c "import prometheus_client, schemathesis" 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/python3" -m pip install -q prometheus_client schemathesis >/dev/null
fi
export PATH="$PWD/$venv/bin:$PATH"
swift build --build-tests
if [ $# -gt 0 ]; then
    swift test --skip-build --disable-xctest "$@"
else
    # The relay's tests start many processes (relays, syncd clusters, 2,200 connections): they run after
    # the rest, so that two cores are not shared by both runners' processes at once. Each runner prints
    # its own closing line.
    swift test --skip-build --disable-xctest --skip LogsyncRelayTests
    swift test --skip-build --disable-xctest --filter LogsyncRelayTests
    # The relay against its OpenAPI document (bounded; RELAY_FUZZ_EXAMPLES=500 for a longer run by hand).
    scripts/relay-fuzz.sh
    # The decoders of what a carrier hands a node, under libFuzzer (bounded; DECODER_FUZZ_SECONDS=600 by hand).
    scripts/decoder-fuzz.sh
fi
