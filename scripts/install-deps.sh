#!/usr/bin/env bash
# Installs the Debian packages logsync builds and tests against, when they are missing.
# Safe to run repeatedly: it does nothing when everything is present.
#
#   scripts/install-deps.sh           # everything the test suite uses
#   scripts/install-deps.sh --build   # only what building needs (scripts/run.sh)
set -euo pipefail

# The C libraries the package links (and pkg-config, which finds them).
packages=(libsqlite3-dev libcurl4-openssl-dev libsystemd-dev zlib1g-dev pkg-config)
if [ "${1:-}" != "--build" ]; then
    # What the tests run besides: the sqlite3 shell and Python as foreign writers, Python's venv for PyPI
    # tools, systemd-analyze for the units, openssl for TLS, Syncthing as a carrier, and Debian's own
    # packaging tools for the .deb; PostgreSQL 15 (server, initdb, pgbench) for the relay's scale-out backend.
    packages+=(sqlite3 python3 python3-venv systemd openssl syncthing dpkg-dev lintian patchelf postgresql)
fi

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing Debian packages: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
    apt_get=(apt-get)
elif command -v sudo >/dev/null 2>&1; then
    apt_get=(sudo apt-get)
else
    echo "error: missing packages ${missing[*]} and not root (no sudo); install them and run again" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${apt_get[@]}" update -qq
"${apt_get[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
