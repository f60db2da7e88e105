#!/usr/bin/env bash
# Fuzzes every decoder of what a carrier hands a node (plain segments, baselines and progress records;
# sealed headers, segments, progress records and baselines) with libFuzzer, through the logsync-fuzz
# target (Sources/logsync-fuzz; docs/security.md, "Fuzzing the decoders").
# Bounded: DECODER_FUZZ_SECONDS of fuzzing in all (default 60, what CI runs; set 600 or more by hand),
# split evenly across the modes, DECODER_FUZZ_JOBS modes at a time (default 2). DECODER_FUZZ_MODES="segment
# baseline" fuzzes only those modes (the folder names of the seed corpus).
# Builds into .build-fuzz with -sanitize=fuzzer (the normal .build is left alone), optimized: in a debug
# build the baseline decoder is thousands of times slower (unspecialized generics), too slow to fuzz in a
# CI run. DECODER_FUZZ_CONFIGURATION=debug builds -Onone instead, which also checks what only debug
# builds check (the bounds of unsafe buffer pointers, assert); there a baseline read in 1-byte chunks
# takes seconds and trips the timeout, so leave the baseline modes out (DECODER_FUZZ_MODES).
# Fails, naming the file, on any crash, timeout (10 s for one input) or out-of-memory (2 GiB): the
# reproducer is copied to .build-fuzz/crashes/. An input libFuzzer kept as slow (10 s or more of wall time)
# fails only if it is slow again when replayed alone. Everything else lives in a temporary folder, removed at
# the end.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${DECODER_FUZZ_SECONDS:-60}"
jobs="${DECODER_FUZZ_JOBS:-2}"
build=.build-fuzz
configuration="${DECODER_FUZZ_CONFIGURATION:-release}"
flags=(-c "$configuration" --product logsync-fuzz --build-path "$build" -Xswiftc -sanitize=fuzzer -Xswiftc -DLOGSYNC_FUZZING)
work=$(mktemp -d /tmp/decoder-fuzz-XXXXXX)
cleanup() {
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

started=$SECONDS
swift build "${flags[@]}"
bin="$(swift build "${flags[@]}" --show-bin-path)/logsync-fuzz"
echo "decoder-fuzz: built $bin ($configuration) in $((SECONDS - started)) s"

# The seeds: one valid input per mode (and a few more), in a folder per mode.
"$bin" --write-seeds "$work/seeds" >/dev/null
modes="${DECODER_FUZZ_MODES:-$(ls "$work/seeds")}"
count=$(wc -w <<<"$modes")
per=$((seconds * jobs / count))
[ "$per" -ge 1 ] || per=1
mkdir -p "$work/corpus" "$work/artifacts" "$work/logs"

fuzz_one() {
    local mode=$1
    [ -d "$work/seeds/$mode" ] || { echo "decoder-fuzz: no mode $mode (modes: $(ls "$work/seeds" | xargs))" >"$work/logs/$mode.log"; return 2; }
    cp -r "$work/seeds/$mode" "$work/corpus/$mode"
    # timeout only stops a run that does not stop itself (max_total_time is checked between inputs).
    # Swift's backtracer is off: libFuzzer leaves a signal alone when a handler is already installed, and
    # writes no reproducer for it. The reproducer is replayed with the backtracer on, below, for the stack.
    SWIFT_BACKTRACE=enable=no LOGSYNC_FUZZ_MODE=$mode timeout --kill-after=10 $((per + 120)) "$bin" "$work/corpus/$mode" \
        -max_total_time="$per" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
        -artifact_prefix="$work/artifacts/$mode-" -print_final_stats=1 >"$work/logs/$mode.log" 2>&1
}

fuzz_started=$SECONDS
declare -A pids=()
for mode in $modes; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    fuzz_one "$mode" &
    pids[$mode]=$!
done
failed=()
for mode in $modes; do
    wait "${pids[$mode]}" || failed+=("$mode")
done
wall=$((SECONDS - fuzz_started))

total=0
for mode in $modes; do
    log="$work/logs/$mode.log"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    inputs=$(find "$work/corpus/$mode" -type f | wc -l)
    total=$((total + ${runs:-0}))
    echo "decoder-fuzz: $mode: ${runs:-?} executions in $per s (${rate:-?}/s), $inputs inputs in its corpus"
done

crashes=()
stalls=0
if [ -n "$(ls -A "$work/artifacts")" ]; then
    mkdir -p "$build/crashes"
    for file in "$work/artifacts"/*; do
        # libFuzzer keeps an input that took 10 s or more of wall time as a slow unit, a stall of the
        # machine included (a shared VM has paused both modes at once for that long). Replayed alone under
        # the same limits: one that is slow again, or crashes, fails the run; one that is not was the
        # machine, and is reported as such.
        case "$(basename "$file")" in
        *-slow-unit-*)
            started=$SECONDS
            name=$(basename "$file")
            if SWIFT_BACKTRACE=enable=no LOGSYNC_FUZZ_MODE="${name%%-slow-unit-*}" timeout 120 "$bin" -timeout=10 -rss_limit_mb=2048 "$file" >/dev/null 2>&1 \
                && [ $((SECONDS - started)) -lt 10 ]; then
                echo "decoder-fuzz: $(basename "$file") took 10 s or more once and $((SECONDS - started)) s replayed alone: a stall of the machine, not of the decoder" >&2
                stalls=$((stalls + 1))
                continue
            fi
            ;;
        esac
        cp "$file" "$build/crashes/"
        crashes+=("$build/crashes/$(basename "$file")")
    done
fi
if [ ${#failed[@]} -gt 0 ] || [ ${#crashes[@]} -gt 0 ]; then
    for mode in "${failed[@]}"; do
        echo "decoder-fuzz: $mode failed; the end of its log:" >&2
        grep -v '^#[0-9]' "$work/logs/$mode.log" | tail -40 >&2
    done
    for crash in "${crashes[@]}"; do
        echo "decoder-fuzz: reproducer $crash; replayed (a crash prints its stack):" >&2
        (SWIFT_BACKTRACE=enable=yes,interactive=no,color=no timeout 120 "$bin" "$crash" 2>&1 | sed '/^Registers:/,$d' | tail -60) >&2 2>/dev/null || true
        echo "decoder-fuzz: replay it with: swift build --product logsync-fuzz && .build/debug/logsync-fuzz $crash" >&2
    done
    echo "decoder-fuzz: FAILED: ${#crashes[@]} crash, timeout or out-of-memory file(s) in $build/crashes/; modes: ${failed[*]:-none}" >&2
    exit 1
fi
echo "decoder-fuzz: $total executions in $((per * count)) s ($count modes, $per s each, $jobs at a time, $wall s wall), no crash, $stalls stalls of the machine"
