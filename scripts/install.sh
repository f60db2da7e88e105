#!/usr/bin/env bash
# Installs logsync: syncd, syncctl, logsync, notes and sync-relay into $PREFIX/bin (default /usr/local); their man
# pages into $PREFIX/share/man/man1 and their bash, zsh and fish completions under $PREFIX/share, both
# generated from the commands' own parsers; the system, template and user units into
# /etc/systemd/{system,user} with ExecStart pointing at $PREFIX/bin; an example /etc/logsync/syncd.toml
# (never overwriting an existing one); and the docs into $PREFIX/share/doc/logsync. DESTDIR=/some/root
# installs into a staging tree (for packages).
# LOGSYNC_BIN_DIR=DIR installs binaries already built there instead of building a release (the test
# suite uses this: it cannot run swift build while swift test holds the build folder).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${PREFIX:-/usr/local}"
root="${DESTDIR:-}"

if [ -n "${LOGSYNC_BIN_DIR:-}" ]; then
    bin="$LOGSYNC_BIN_DIR"
else
    scripts/install-deps.sh
    for product in syncd syncctl logsync notes sync-relay; do
        swift build -c release --product "$product" >/dev/null
    done
    bin=".build/release"
fi

share="$root$prefix/share"
install -d "$root$prefix/bin" "$root/etc/systemd/system" "$root/etc/systemd/user" "$root/etc/logsync" "$share/doc/logsync" \
    "$share/man/man1" "$share/bash-completion/completions" "$share/zsh/site-functions" "$share/fish/vendor_completions.d"
for product in syncd syncctl logsync notes sync-relay; do
    install -m 0755 "$bin/$product" "$root$prefix/bin/$product"
    python3 scripts/manpage.py "$bin/$product" > "$share/man/man1/$product.1"
    "$bin/$product" --generate-completion-script bash > "$share/bash-completion/completions/$product"
    "$bin/$product" --generate-completion-script zsh > "$share/zsh/site-functions/_$product"
    "$bin/$product" --generate-completion-script fish > "$share/fish/vendor_completions.d/$product.fish"
    chmod 0644 "$share/man/man1/$product.1" "$share/bash-completion/completions/$product" \
        "$share/zsh/site-functions/_$product" "$share/fish/vendor_completions.d/$product.fish"
done
for unit in syncd.service syncd@.service sync-relay.service; do
    sed "s#/usr/local/bin/#$prefix/bin/#g" "systemd/$unit" > "$root/etc/systemd/system/$unit"
    chmod 0644 "$root/etc/systemd/system/$unit"
done
sed "s#/usr/local/bin/#$prefix/bin/#g" systemd/user/syncd.service > "$root/etc/systemd/user/syncd.service"
chmod 0644 "$root/etc/systemd/user/syncd.service"
if [ ! -e "$root/etc/logsync/syncd.toml" ]; then
    install -m 0644 config/syncd.toml "$root/etc/logsync/syncd.toml"
fi
if [ ! -e "$root/etc/logsync/sync-relay.toml" ]; then
    install -m 0644 config/sync-relay.toml "$root/etc/logsync/sync-relay.toml"
fi
install -m 0644 README.md docs/*.md docs/*.yaml "$root$prefix/share/doc/logsync/"

cat <<NEXT
installed logsync into ${root:-/}: $prefix/bin/{syncd,syncctl,logsync,notes,sync-relay} with man pages and shell completions, units in /etc/systemd, config in /etc/logsync
next:
  systemctl daemon-reload && systemctl enable --now syncd      # a system instance
  systemctl --user daemon-reload && systemctl --user enable --now syncd   # or one for your session
  syncctl status
NEXT
