import ArgumentParser
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTransport

/// `bootstrap`: how long a new node takes to join from a baseline of 1M rows, and how much memory it
/// needs, against replaying the whole history into a fresh store in the same run (issue 17).
///
/// Untimed: N Note inserts are written into a source store in transactions of 1,000 rows and published
/// as segments of at most 2,000 changes by an engine with retention on; that engine writes a baseline
/// (`SyncEngine.writeBaseline`); then a tail of updates of existing rows is written and published, the folder
/// is copied for the replay (without the baseline), and the engine prunes (`SyncEngine.prune`): every
/// segment the baseline covers goes. The shared folder then holds what retention leaves a joining node:
/// the baseline and the segments after it.
///
/// Timed, each in a child process (its peak RSS is its own `VmHWM`, as in `rebuild`), each with a fresh
/// store and `SyncEngine.rebuild` (sync rounds until one applies nothing):
/// - bootstrap: the store opened as syncd opens every store (`StoreOptions.syncing`: no memory map),
///   retention on, over the shared folder: the first round finds the pruned history missing, loads the
///   baseline (copied next to the store, its bytes checked, decoded once as it is merged in batches) and
///   applies the tail's segments;
/// - replay: the same store options, retention off, over the copy holding every segment;
/// - bootstrap with the memory map: as the first, with the store opened with default options (SQLite's
///   256 MiB map, as apps open it): how much the map adds to the peak.
/// The stores are then compared with the source (row count and sums of the columns). Also untimed in the
/// parent: checking the baseline's bytes alone (`BaselineDecoder.checkBytes`, as the load does before
/// merging), and decoding it whole (`BaselineDecoder.verify`, what the load did before).
struct BootstrapSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "bootstrap",
        abstract: "A new node joins from a baseline of 1M rows: time, peak RSS, and against replaying the whole history.")

    @OptionGroup var options: SuiteOptions
    @OptionGroup var child: BuildChildOptions
    @Flag(help: .hidden) var childReplay = false
    @Flag(help: .hidden) var childMapped = false

    static let suite = "bootstrap"
    static let account = "bench"

    struct Sizes {
        var rows: Int
        /// Updates of existing rows written after the baseline: the segments a joining node applies after it.
        var tailUpdates: Int
        static let full = Sizes(rows: 1_000_000, tailUpdates: 4_000)
        static let quick = Sizes(rows: 100_000, tailUpdates: 400)
    }

    func run() throws {
        if let request = child.request {
            let seconds = try Self.join(
                from: request.folder, into: request.store, rows: request.rows, replay: childReplay,
                options: childMapped ? StoreOptions() : .syncing)
            try MeasuredChild.finish(seconds: seconds)
            return
        }
        let sizes = options.quick ? Sizes.quick : Sizes.full
        if options.quick {
            Report.progress(
                "--quick: a baseline of \(grouped(sizes.rows)) rows instead of \(grouped(Sizes.full.rows)); bootstrap_1m_s is then the time for \(grouped(sizes.rows)) rows scaled by \(Sizes.full.rows / sizes.rows)")
        }
        Report.progress(
            "bootstrap: \(grouped(sizes.rows)) Note inserts in transactions of \(grouped(SegmentFixture.transactionRows)) rows, segments of at most "
                + "\(grouped(SegmentFixture.maximumChanges)) changes, a baseline, then \(grouped(sizes.tailUpdates)) updates after it; "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores")
        try withTemporaryDirectory { directory in
            let shared = directory.file("shared")
            let history = directory.file("history")
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
            let expected: Checksum
            var baselineBytes = 0
            var verifySeconds = 0.0
            var checkSeconds = 0.0
            let plainSeconds: Double
            do {
                let rows = NoteFixture.rows(count: sizes.rows)
                var source: Store?
                let setup = try timed {
                    let store = try SegmentFixture.sourceStore(rows[...], at: directory.file("source.sqlite"))
                    source = store
                    let engine = try SyncEngine(store: store, sharedFolder: shared, configuration: Self.settings(retention: true))
                    var report = SyncReport()
                    try engine.export(into: &report)
                    guard let baseline = try engine.writeBaseline() else { throw BenchError("the source engine wrote no baseline") }
                    let baselinePath = shared + "/" + Self.account + "/" + baseline.node.rawValue + "/" + baseline.fileName
                    baselineBytes = try Self.fileSize(baselinePath)
                    verifySeconds = try Self.verify(baselinePath)
                    checkSeconds = try Self.checkBytes(baselinePath)
                    try Self.updateTail(store, rows[..<sizes.tailUpdates])
                    try engine.export(into: &report)
                    // The replay's folder: every segment, no baseline.
                    try FileManager.default.copyItem(atPath: shared, toPath: history)
                    try FileManager.default.removeItem(atPath: history + "/" + Self.account + "/" + baseline.node.rawValue + "/" + baseline.fileName)
                    let pruned = try engine.prune(dryRun: false)
                    Report.progress(
                        "  \(report.published.count) segments published; baseline \(baseline.fileName) \(formatted(Double(baselineBytes) / 1_048_576, decimals: 1)) MiB "
                            + "(\(formatted(Double(baselineBytes) / Double(sizes.rows), decimals: 1)) B per row); pruned through sequence \(pruned.prunedThrough), "
                            + "\(pruned.retainedSegments) segments left in the folder; checking its bytes took \(formatted(checkSeconds, decimals: 3)) s, decoding it whole \(formatted(verifySeconds)) s")
                    guard pruned.prunedThrough > 0, pruned.retainedSegments > 0 else {
                        throw BenchError("pruning left \(pruned.retainedSegments) segments, through \(pruned.prunedThrough): \(pruned.explanation)")
                    }
                }
                Report.progress("  setup (untimed): source store written, published, baseline written, tail published, pruned in \(formatted(setup)) s")
                expected = try Checksum(source!)
                // The floor: the same rows into plain SQLite, in key order as a baseline holds them (appends
                // to the primary-key index), one transaction, no row states, no history.
                plainSeconds = try CaptureSuite.plainBulk(rows.sorted { $0.id < $1.id }[...])
                Report.progress("  plain SQLite: the same rows bulk-inserted in key order in \(formatted(plainSeconds)) s")
            }
            let replay = try MeasuredChild.run(Self.childArguments(history, directory.file("replayed.sqlite"), sizes.rows, replay: true), what: "replay")
            Report.progress(
                "  replay of the whole history: \(formatted(replay.seconds)) s (\(grouped(Int(Double(sizes.rows + sizes.tailUpdates) / replay.seconds))) changes/s), "
                    + "peak RSS \(formatted(Double(replay.peakKiB) / 1024, decimals: 1)) MiB")
            let join = try MeasuredChild.run(Self.childArguments(shared, directory.file("joined.sqlite"), sizes.rows, replay: false), what: "bootstrap")
            let peakMiB = Double(join.peakKiB) / 1024
            Report.progress(
                "  bootstrap from the baseline: \(formatted(join.seconds)) s (\(grouped(Int(Double(sizes.rows) / join.seconds))) rows/s), "
                    + "peak RSS \(formatted(peakMiB, decimals: 1)) MiB; \(formatted(join.seconds / replay.seconds, decimals: 3)) x the replay")
            let mapped = try MeasuredChild.run(
                Self.childArguments(shared, directory.file("mapped.sqlite"), sizes.rows, replay: false) + ["--child-mapped"], what: "bootstrap with a memory map")
            Report.progress(
                "  the same with SQLite's memory map (default StoreOptions, as apps open a store): \(formatted(mapped.seconds)) s, peak RSS \(formatted(Double(mapped.peakKiB) / 1024, decimals: 1)) MiB")
            for (name, path) in [("replayed", "replayed.sqlite"), ("joined", "joined.sqlite"), ("mapped", "mapped.sqlite")] {
                let found = try Checksum(try Store(path: directory.file(path), schema: NoteFixture.schema))
                guard found == expected else { throw BenchError("the \(name) store differs from the source: \(found) against \(expected)") }
            }
            Report.progress("  both stores hold what the source holds (\(expected))")
            let scale = Double(Sizes.full.rows) / Double(sizes.rows)
            Report.emit(metric("bootstrap_1m_s", join.seconds * scale, unit: "s", goal: 3, .lower))
            Report.emit(metric("bootstrap_peak_rss_mb", peakMiB, unit: "MB", goal: 256, .lower, decimals: 1))
            Report.emit(metric("bootstrap_vs_replay", join.seconds / replay.seconds, unit: "x", goal: nil, .lower, decimals: 3))
            Report.emit(metric("bootstrap_vs_plain", join.seconds / plainSeconds, unit: "x", goal: 1.15, .lower))
            Report.emit(metric("plain_key_order_1m_s", plainSeconds * scale, unit: "s", goal: nil, .lower))
            Report.emit(metric("bootstrap_rows_per_s", Double(sizes.rows) / join.seconds, unit: "rows/s", goal: nil, .higher, decimals: 0))
            Report.emit(metric("replay_1m_s", replay.seconds * scale, unit: "s", goal: nil, .lower))
            Report.emit(metric("replay_peak_rss_mb", Double(replay.peakKiB) / 1024, unit: "MB", goal: nil, .lower, decimals: 1))
            Report.emit(metric("bootstrap_mapped_1m_s", mapped.seconds * scale, unit: "s", goal: nil, .lower))
            Report.emit(metric("bootstrap_mapped_peak_rss_mb", Double(mapped.peakKiB) / 1024, unit: "MB", goal: nil, .lower, decimals: 1))
            Report.emit(metric("baseline_verify_1m_s", verifySeconds * scale, unit: "s", goal: nil, .lower))
            Report.emit(metric("baseline_check_1m_s", checkSeconds * scale, unit: "s", goal: nil, .lower, decimals: 3))
            Report.emit(metric("baseline_bytes_per_row", Double(baselineBytes) / Double(sizes.rows), unit: "B", goal: nil, .lower, decimals: 1))
        }
    }

    static func settings(retention: Bool) -> SyncConfiguration {
        SyncConfiguration(
            account: account, maximumChangesPerSegment: SegmentFixture.maximumChanges, retention: RetentionConfiguration(enabled: retention))
    }

    static func childArguments(_ folder: String, _ store: String, _ rows: Int, replay: Bool) -> [String] {
        ["bootstrap"] + BuildChildOptions.arguments(folder: folder, store: store, rows: rows) + (replay ? ["--child-replay"] : [])
    }

    /// In the child: a new node's store, opened with `options`, built from `folder` by the engine with
    /// retention on (it bootstraps from the baseline) or off (`replay`: every segment is applied); the
    /// seconds it took.
    static func join(from folder: String, into path: String, rows: Int, replay: Bool, options: StoreOptions) throws -> Double {
        try RebuildSuite.rebuild(
            from: folder, into: path, rows: rows, options: options, configuration: settings(retention: !replay),
            check: { store in
                let covered = try store.sync.frontier().sequences.keys.map { try store.sync.coveredByBaseline($0) }.max() ?? 0
                if replay, covered > 0 { throw BenchError("the replay loaded a baseline") }
                if !replay {
                    guard covered > 0 else { throw BenchError("the new node did not load the baseline") }
                    Report.progress("    the baseline covered the source up to sequence \(covered)")
                }
            })
    }

    /// Updates the `rank` and `score` of `rows` (already in `store`), in transactions of
    /// ``SegmentFixture/transactionRows``.
    static func updateTail(_ store: Store, _ rows: ArraySlice<NoteRow>) throws {
        var start = rows.startIndex
        while start < rows.endIndex {
            let end = min(start + SegmentFixture.transactionRows, rows.endIndex)
            try store.write(author: SegmentFixture.author, context: SegmentFixture.context) { tx in
                for row in rows[start..<end] {
                    try tx.execute(#"UPDATE "Note" SET "rank" = "rank" + 1, "score" = "score" * 2 WHERE "id" = ?"#, [.text(row.id)])
                }
            }
            start = end
        }
    }

    /// Seconds to check the bytes of the baseline at `path` (header and CRC-32, no row decoded).
    static func checkBytes(_ path: String) throws -> Double {
        try timedRead(path) { source in _ = try BaselineDecoder.checkBytes(source: source) }
    }

    /// Seconds to verify the baseline at `path` whole.
    static func verify(_ path: String) throws -> Double {
        try timedRead(path) { source in _ = try BaselineDecoder.verify(source: source) }
    }

    /// Seconds `body` takes to read the file at `path`, handed to it as a source of 1 MiB chunks (nil at
    /// the end), as the engine reads its local copy of a baseline.
    static func timedRead(_ path: String, _ body: (@escaping () throws -> [UInt8]?) throws -> Void) throws -> Double {
        guard let file = FileHandle(forReadingAtPath: path) else { throw BenchError("cannot open \(path)") }
        defer { try? file.close() }
        return try timed {
            try body {
                let chunk = file.readData(ofLength: 1 << 20)
                return chunk.isEmpty ? nil : [UInt8](chunk)
            }
        }
    }

    static func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }

    /// What a store's Note table holds, in three numbers: enough to tell two stores of the same rows apart
    /// from one that missed a row or an update.
    struct Checksum: Equatable, CustomStringConvertible {
        var rows: Int64
        var rankSum: Int64
        var scoreSum: Double

        init(_ store: Store) throws {
            let row = try store.read(#"SELECT count(*), sum("rank"), total("score") FROM "Note""#).first ?? []
            guard row.count == 3, case .integer(let rows) = row[0], case .integer(let rankSum) = row[1], case .real(let scoreSum) = row[2] else {
                throw BenchError("cannot sum the Note rows of \(store.path): \(row)")
            }
            (self.rows, self.rankSum, self.scoreSum) = (rows, rankSum, scoreSum)
        }

        var description: String { "\(grouped(Int(rows))) rows, ranks summing to \(rankSum), scores to \(scoreSum)" }
    }
}
