#!/usr/bin/env bash
# Builds the API documentation of the library products with DocC, the guides from docs/ as articles:
#   scripts/docs.sh [OUTPUT]      (default .build/docs; open OUTPUT/<Module>.doccarchive with a DocC viewer,
#                                  or serve it: each archive is a static site)
# Reads the modules `swift build` produces; warnings about unresolved links are printed, errors stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.build/docs}
swift build >/dev/null
triple=$(swift -print-target-info | python3 -c 'import json,sys; print(json.load(sys.stdin)["target"]["unversionedTriple"])')
extract=$(command -v swift-symbolgraph-extract || echo "swift symbolgraph-extract")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Which guides belong to which module's documentation.
declare -A guides=(
    [LogsyncCore]=""
    [LogsyncStore]="history"
    [LogsyncSync]="transport merge log-format"
    [LogsyncContexts]="contexts"
)
mkdir -p "$out"
for module in LogsyncCore LogsyncStore LogsyncSync LogsyncContexts; do
    mkdir -p "$work/$module/graphs"
    $extract -module-name "$module" -I .build/debug/Modules -target "$triple" -minimum-access-level public \
        -Xcc -fmodule-map-file=Sources/CSpawn/module.modulemap -Xcc -fmodule-map-file=Sources/CSQLite/module.modulemap \
        -Xcc -fmodule-map-file=Sources/CZlib/module.modulemap \
        -output-dir "$work/$module/graphs"
    catalog="$work/$module/$module.docc"
    cp -r "Sources/$module/$module.docc" "$catalog"
    for guide in ${guides[$module]}; do cp "docs/$guide.md" "$catalog/$guide.md"; done
    docc convert "$catalog" --additional-symbol-graph-dir "$work/$module/graphs" \
        --fallback-display-name "$module" --fallback-bundle-identifier "org.logsync.$module" \
        --output-path "$out/$module.doccarchive" 2>&1 | grep -E "error|warning" | sed "s|$work/||" || true
    test -d "$out/$module.doccarchive/data/documentation" || { echo "docs.sh: DocC produced no documentation for $module" >&2; exit 1; }
    echo "$module: $out/$module.doccarchive ($(find "$out/$module.doccarchive/data/documentation" -name '*.json' | wc -l) pages)"
done
