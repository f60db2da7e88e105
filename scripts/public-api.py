#!/usr/bin/env python3
"""The public API of logsync's library products, one declaration per line, and a check against the
committed baseline (docs/api/public-api.txt), so that the API changes only on purpose.

    scripts/public-api.py            # compare with the baseline; exit 1 and show the difference if it moved
    scripts/public-api.py --update   # write the baseline after an intended change
    scripts/public-api.py --print    # print the listing

It reads the modules `swift build` left in .build/debug/Modules (or --modules DIR) with
swift-symbolgraph-extract, which takes a second and needs no build lock.
"""
import argparse, difflib, json, os, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "docs", "api", "public-api.txt")
# The library products of Package.swift: what an app can import.
MODULES = ["LogsyncCore", "LogsyncStore", "LogsyncSync", "LogsyncContexts"]
C_MODULES = ["CSpawn", "CSQLite", "CZlib"]


def target_triple():
    info = json.loads(subprocess.run(["swift", "-print-target-info"], check=True, capture_output=True, text=True).stdout)
    return info["target"]["unversionedTriple"]


def listing(modules_dir):
    extract = shutil.which("swift-symbolgraph-extract")
    command = [extract] if extract else ["swift", "symbolgraph-extract"]
    lines = []
    with tempfile.TemporaryDirectory() as out:
        for module in MODULES:
            arguments = command + ["-module-name", module, "-I", modules_dir, "-target", target_triple(),
                                   "-minimum-access-level", "public", "-output-dir", out]
            for c in C_MODULES:
                arguments += ["-Xcc", "-fmodule-map-file=" + os.path.join(ROOT, "Sources", c, "module.modulemap")]
            result = subprocess.run(arguments, capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"swift-symbolgraph-extract failed for {module} (build first: swift build):\n{result.stderr}")
            with open(os.path.join(out, module + ".symbols.json")) as f:
                graph = json.load(f)
            for symbol in graph["symbols"]:
                declaration = "".join(f["spelling"] for f in symbol.get("declarationFragments", []))
                path = ".".join(symbol["pathComponents"])
                lines.append(f"{module} {symbol['kind']['identifier'].removeprefix('swift.')} {path}: {' '.join(declaration.split())}")
    return sorted(set(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="write the baseline")
    parser.add_argument("--print", action="store_true", help="print the listing")
    parser.add_argument("--modules", default=os.path.join(ROOT, ".build", "debug", "Modules"), help="where the built .swiftmodule files are")
    options = parser.parse_args()
    current = listing(options.modules)
    if options.print:
        print("\n".join(current))
        return
    if options.update:
        os.makedirs(os.path.dirname(BASELINE), exist_ok=True)
        with open(BASELINE, "w") as f:
            f.write("\n".join(current) + "\n")
        print(f"wrote {len(current)} public declarations to {os.path.relpath(BASELINE, ROOT)}")
        return
    with open(BASELINE) as f:
        baseline = f.read().splitlines()
    if baseline == current:
        print(f"public API unchanged: {len(current)} declarations in {', '.join(MODULES)}")
        return
    diff = difflib.unified_diff(baseline, current, "docs/api/public-api.txt (baseline)", "built modules", lineterm="", n=0)
    print("\n".join(diff))
    print(f"\nthe public API changed ({len(baseline)} → {len(current)} declarations). If that was intended, run"
          " scripts/public-api.py --update and commit docs/api/public-api.txt with the change.", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
