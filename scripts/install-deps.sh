#!/usr/bin/env bash
# Installs the Debian packages logsync builds and tests against, when they are missing.
# Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail

packages=(libsqlite3-dev libcurl4-openssl-dev libsystemd-dev zlib1g-dev pkg-config sqlite3 python3 python3-venv systemd openssl syncthing)

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
