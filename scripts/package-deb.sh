#!/usr/bin/env bash
# Builds the Debian package logsync_VERSION_amd64.deb with Debian's own tools (dpkg-shlibdeps, dpkg-deb),
# and checks it with lintian:
#
#   scripts/package-deb.sh [OUTPUT_DIR]        # default: .build/deb
#
# It holds release binaries built with the Swift runtime linked in (--static-swift-stdlib), so the
# package needs nothing of Swift on the machine it is installed on; their man pages and bash, zsh and fish
# completions, generated from the commands' own parsers; the system, template and user units; the
# example configuration in /etc/logsync, kept across upgrades as conffiles; the docs. Needs dpkg-dev,
# lintian and patchelf (scripts/install-deps.sh). Its maintainer
# scripts only tell systemd that units changed: nothing is started or enabled unasked, and removing the
# package never removes the data in /var/lib.
#
# LOGSYNC_BIN_DIR=DIR packages binaries already built there instead of building a release (the test suite
# packages its debug build this way: it cannot run swift build while swift test holds the build folder).
# LINTIAN=0 skips the lintian run.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.build/deb}"
products=(syncd syncctl logsync notes sync-relay)
version=$(sed -n 's/.*current = "\(.*\)".*/\1/p' Sources/LogsyncCore/Version.swift)
arch=$(dpkg --print-architecture)
[ -n "$version" ] || { echo "package-deb: no version in Sources/LogsyncCore/Version.swift" >&2; exit 1; }

if [ -n "${LOGSYNC_BIN_DIR:-}" ]; then
    bin="$LOGSYNC_BIN_DIR"
else
    scripts/install-deps.sh
    for product in "${products[@]}"; do
        echo "building $product (release, Swift runtime linked in)" >&2
        swift build -c release --static-swift-stdlib --product "$product" >/dev/null
    done
    bin=.build/release
fi

work=$(mktemp -d /tmp/logsync-deb-XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/logsync_${version}_$arch"
doc="$root/usr/share/doc/logsync"
install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/usr/lib/systemd/user" "$root/etc/logsync" "$doc" \
    "$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d"

for product in "${products[@]}"; do
    install -m 0755 "$bin/$product" "$root/usr/bin/$product"
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$product"
    # A path into the Swift toolchain that built it means nothing where the package is installed: a
    # release build links the Swift runtime in, and needs none.
    patchelf --remove-rpath "$root/usr/bin/$product"
    python3 scripts/manpage.py "$bin/$product" | gzip -9n > "$root/usr/share/man/man1/$product.1.gz"
    "$bin/$product" --generate-completion-script bash | sed '1{/^#!/d}' > "$root/usr/share/bash-completion/completions/$product"
    "$bin/$product" --generate-completion-script zsh > "$root/usr/share/zsh/vendor-completions/_$product"
    "$bin/$product" --generate-completion-script fish > "$root/usr/share/fish/vendor_completions.d/$product.fish"
done
for unit in syncd.service syncd@.service sync-relay.service; do
    sed -e "s#/usr/local/bin/#/usr/bin/#g" -e "s#/usr/local/share/doc/#/usr/share/doc/#g" "systemd/$unit" > "$root/lib/systemd/system/$unit"
done
sed -e "s#/usr/local/bin/#/usr/bin/#g" -e "s#/usr/local/share/doc/#/usr/share/doc/#g" systemd/user/syncd.service > "$root/usr/lib/systemd/user/syncd.service"
install -m 0644 config/syncd.toml config/sync-relay.toml "$root/etc/logsync/"
install -m 0644 README.md docs/*.md docs/*.yaml "$doc/"
cat > "$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: logsync
Source: the logsync repository

Files: *
Copyright: 2026 the logsync authors
License: unspecified
 The logsync repository states no license yet; until it does, all rights are
 reserved by its authors.
COPYRIGHT
printf 'logsync (%s) unstable; urgency=medium\n\n  * Release %s; see /usr/share/doc/logsync/README.md.\n\n -- logsync maintainers <maintainers@logsync.invalid>  %s\n' \
    "$version" "$version" "$(date -R -u -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" | gzip -9n > "$doc/changelog.gz"
find "$root" -type d -exec chmod 0755 {} +
find "$root/usr/share" "$root/etc" "$root/lib" "$root/usr/lib" -type f -exec chmod 0644 {} +

# Shared libraries the binaries use, as Debian package dependencies (dpkg-shlibdeps reads debian/control).
mkdir -p "$work/debian"
printf 'Source: logsync\n\nPackage: logsync\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O "${products[@]/#/$root/usr/bin/}" 2>"$work/shlibdeps.log" | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies:" >&2; cat "$work/shlibdeps.log" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: logsync
Version: $version
Architecture: $arch
Maintainer: logsync maintainers <maintainers@logsync.invalid>
Installed-Size: $size
Depends: $depends
Recommends: systemd
Suggests: sqlite3, syncthing
Section: net
Priority: optional
Homepage: https://logsync.invalid/
Description: multi-device sync for SQLite stores by shipping transaction logs
 Each node records every committed write to its synced tables as persistent
 history; syncd ships that history as immutable log segments through a shared
 folder (local, NFS, Syncthing) or an HTTP relay (sync-relay), and replays
 other nodes' segments exactly once, so every node converges. syncctl drives
 the daemon; notes is an example app of the live contexts API.
CONTROL
printf '/etc/logsync/syncd.toml\n/etc/logsync/sync-relay.toml\n' > "$root/DEBIAN/conffiles"
# Units changed: systemd reads them again. Nothing is enabled or started unasked.
for script in postinst postrm; do
    cat > "$root/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi
exit 0
SCRIPT
    chmod 0755 "$root/DEBIAN/$script"
done

mkdir -p "$out"
deb="$out/logsync_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
if [ "${LINTIAN:-1}" != "0" ]; then
    lintian --fail-on error "$deb" >&2
fi
