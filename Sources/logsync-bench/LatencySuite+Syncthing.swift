import Foundation
import LogsyncCore
import LogsyncTestKit

/// The latency suite through two real Syncthing instances (`SyncthingPair` from the test kit: loopback,
/// discovery and relays off), each syncd with a shared folder of its own inside its instance's folder.
/// Two runs, one after the other on the same pair:
///
/// - `syncthing_p50_ms`/`syncthing_p99_ms`: each syncd has `[syncthing]` and asks its Syncthing to scan
///   its node folder after every publish (docs/carriers.md);
/// - `syncthing_watcher_p50_ms` (and `_p99_ms`): no `[syncthing]`; the segment travels when Syncthing's
///   file watcher notices it, `fsWatcherDelayS` = 1 (Syncthing's default is 10 s: these runs show the
///   watcher at its quickest).
///
/// Both runs use folder rescans every hour (`rescanIntervalS` = 3600) so that only the watcher or the
/// request moves files, and samples 200–600 ms apart, at random so that they do not fall into step with
/// the watcher's timer (each a fresh pickup, as a person's edits are, rather than a queue Syncthing is
/// still working through). A sample is the same as the local folder's: commit on A → the row in B's
/// store and in B's view context. The watcher run has one warm-up sample, the other five.
extension LatencySuite {
    struct SyncthingSizes {
        var nudged: Int
        var watcher: Int
        static let full = SyncthingSizes(nudged: 200, watcher: 40)
        static let quick = SyncthingSizes(nudged: 40, watcher: 8)
    }

    static let syncthingSpacing: Duration = .milliseconds(200)
    static let syncthingJitter: Duration = .milliseconds(400)
    static let watcherDelaySeconds = 1

    func measureSyncthing(syncd: String, schema: Schema, quick: Bool) throws {
        guard Tools.installed("syncthing") else {
            Report.progress(
                "syncthing is not installed: the syncthing_* metrics are skipped (apt-get install syncthing, or scripts/install-deps.sh)")
            return
        }
        let sizes = quick ? SyncthingSizes.quick : SyncthingSizes.full
        if quick {
            Report.progress(
                "--quick: \(sizes.nudged) samples through Syncthing with scan requests instead of \(SyncthingSizes.full.nudged), "
                    + "\(sizes.watcher) with its watcher alone instead of \(SyncthingSizes.full.watcher)")
        }
        try withTemporaryDirectory { directory in
            let setUp = ContinuousClock.now
            let pair = try SyncthingPair(directory: directory, watcherDelaySeconds: Self.watcherDelaySeconds)
            defer { pair.stopAll() }
            try pair.start()
            Report.progress(
                "syncthing: two Syncthing instances (\(pair.instance(0).url), \(pair.instance(1).url)) connected after "
                    + "\(formatted((ContinuousClock.now - setUp).inMilliseconds, decimals: 0)) ms; fsWatcherDelayS \(Self.watcherDelaySeconds), "
                    + "rescanIntervalS \(pair.rescanIntervalSeconds), "
                    + "\(formatted(Self.syncthingSpacing.inMilliseconds, decimals: 0))–\(formatted((Self.syncthingSpacing + Self.syncthingJitter).inMilliseconds, decimals: 0)) ms idle between samples")
            let keys = try [pair.apiKeyFile(0), pair.apiKeyFile(1)]
            func folder(_ run: String) -> (String) -> String {
                { name in pair.instance(name == "a" ? 0 : 1).folder + "/" + run }
            }

            Report.progress("syncthing: commit on A → visible on B, each syncd asking its Syncthing to scan after each publish")
            let nudged = try withTemporaryDirectory { nodes in
                try Self.measure(
                    directory: nodes, syncd: syncd, schema: schema, samples: sizes.nudged, spacing: Self.syncthingSpacing,
                    jitter: Self.syncthingJitter, sharedFolder: folder("nudged")
                ) { name in
                    let index = name == "a" ? 0 : 1
                    return "[syncthing]\nurl = \"\(pair.instance(index).url)\"\napi_key_file = \"\(keys[index])\"\n"
                }
            }
            Report.progress("  with scan requests: " + Self.summary(nudged.map(\.latency), timeouts: nudged.filter(\.timedOut).count))
            Report.progress("  view context: " + Self.summary(nudged.map(\.context), timeouts: nudged.filter(\.contextTimedOut).count))
            Self.reportBreakdown(nudged)

            Report.progress("syncthing watcher: the same without [syncthing], Syncthing's file watcher alone")
            let watched = try withTemporaryDirectory { nodes in
                try Self.measure(
                    directory: nodes, syncd: syncd, schema: schema, samples: sizes.watcher, warmUp: 1,
                    spacing: Self.syncthingSpacing, jitter: Self.syncthingJitter, sharedFolder: folder("watcher"))
            }
            Report.progress("  watcher alone: " + Self.summary(watched.map(\.latency), timeouts: watched.filter(\.timedOut).count))

            // The design brief's goals through Syncthing: p50 ≤ 100 ms, p99 ≤ 250 ms, measured in a live
            // context on B (what an app waits for).
            let context = nudged.map(\.context)
            Report.emit(metric("syncthing_p50_ms", Stats.percentile(context, 50), unit: "ms", goal: 100, .lower))
            Report.emit(metric("syncthing_p99_ms", Stats.percentile(context, 99), unit: "ms", goal: 250, .lower))
            let watcher = watched.map(\.context)
            Report.emit(metric("syncthing_watcher_p50_ms", Stats.percentile(watcher, 50), unit: "ms", goal: nil, .lower))
            Report.emit(metric("syncthing_watcher_p99_ms", Stats.percentile(watcher, 99), unit: "ms", goal: nil, .lower))
            emitDistribution("syncthing", context)
            emitDistribution("syncthing_watcher", watcher)
        }
    }
}
