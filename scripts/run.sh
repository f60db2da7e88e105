#!/usr/bin/env bash
# The main job on embedded defaults: installs what is missing, builds, and runs the logsync tour,
# which creates a store under $XDG_DATA_HOME/logsync/tour, writes to it and prints its history.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --product logsync
exec .build/debug/logsync tour "$@"
