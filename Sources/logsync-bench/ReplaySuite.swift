import ArgumentParser
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncStore

/// `replay`: how fast a node applies another node's history, and how many bytes that history takes,
/// against SQLite's session extension doing the same in the same run.
///
/// Each round, in fresh temporary directories:
/// - logsync: N Note inserts are written into a source store in transactions of 1,000 rows and exported
///   (`exportToOutbox`, at most 2,000 changes per segment). Timed: every segment is decoded with
///   `SegmentDecoder` and its first inserts prepared (on another thread while the one before it is applied,
///   as `syncd` does: `SyncEngine.load` prepares them there too) and imported
///   into a fresh target store with `importSegments`, which asks for them one after another and groups them
///   into as few SQLite transactions as no writer waits for.
/// - baseline: the same rows are inserted into a plain database with the store's DDL and pragmas, with a
///   session attached to `Note` before the first insert, in the same transactions of 1,000 rows; the
///   session's changeset is then applied with `sqlite3changeset_apply` to a fresh plain database (timed).
///
/// Which side runs first alternates between rounds. A ratio is the median of the per-round ratios.
///
/// A third measurement, after both, bounds what the import can reach while it stores what it stores: the
/// same rows written by a raw connection with only the import's SQL (triggers off as in the merge; row state,
/// `Note` row, its history row, a marker per transaction; ``SegmentFixture/importSQLAlone(_:stateBytes:at:)``).
///
/// Then a mixed workload, made once (``mixedWorkload(changes:seed:)``): three nodes, each a store with its own
/// node identity, start from N/2 common rows and concurrently make N changes between them, about 60 % updates
/// of common rows (one column, or two), 10 % deletes of common rows, 30 % inserts, so that the same rows are
/// updated on several nodes, or deleted on one and updated on another, and the merge resolves conflicts. Each
/// round, alternating which side goes first:
/// - logsync: a fresh target store that has imported the common rows (untimed); timed, every node's segments
///   decoded and imported as above, node after node. It must end with exactly the rows the three nodes
///   converged to once each had applied the others' history.
/// - baseline: `sqlite3changeset_apply` of the net changes, to a fresh plain database holding the common rows
///   (untimed). The changeset is a session's on a plain database holding the common rows while the rows that
///   are gone are deleted, those that differ updated and the new ones inserted
///   (``writeNetChanges(from:to:into:)``): one change per row that differs, where logsync replays every
///   change of every node, superseded ones included. It is made from the merged result, not by running the
///   nodes' SQL on one database, so that it leads to exactly the rows the nodes converged to whatever order
///   the merge's clocks picked; a session records one net change per row either way. Both sides start from
///   the same rows, must end with the same rows, and time only the apply.
struct ReplaySuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Replay throughput (insert-only and mixed) and segment size, against the session extension's changeset_apply.")

    @OptionGroup var options: SuiteOptions

    /// Which of the two workloads run: a change to one path is measured without waiting for the other.
    enum Workload: String, ExpressibleByArgument, CaseIterable {
        case all, inserts, mixed
    }

    @Option(help: "The workloads to run: all, inserts (insert-only) or mixed.")
    var workload: Workload = .all

    @Option(help: "Rounds of each workload (default: 3, or 2 with --quick).")
    var rounds: Int?

    typealias Sizes = ImportSizes

    static let suite = "replay"

    func validate() throws {
        if let rounds, rounds < 1 { throw ValidationError("--rounds must be at least 1") }
    }

    func run() throws {
        var sizes = options.quick ? Sizes.quick : Sizes.full
        if let rounds { sizes.rounds = rounds }
        guard workload != .mixed else {
            try runMixed(sizes)
            return
        }
        if options.quick {
            Report.progress(
                "--quick: sizes scaled down to \(grouped(sizes.changes)) changes, \(sizes.rounds) rounds "
                    + "(full run: \(grouped(Sizes.full.changes)) changes, \(Sizes.full.rounds) rounds)")
        }
        Report.progress(
            "replay: \(grouped(sizes.changes)) Note inserts in transactions of \(grouped(SegmentFixture.transactionRows)) rows, "
                + "segments of at most \(grouped(SegmentFixture.maximumChanges)) changes, \(sizes.rounds) rounds; "
                + "SQLite \(PlainDatabase.libraryVersion), \(ProcessInfo.processInfo.activeProcessorCount) cores")

        let rows = NoteFixture.rows(count: sizes.changes)
        try CaptureSuite.checkSameTableShape()

        // Untimed: pages in code and warms the file system before the first measured round.
        _ = try Self.round(rows[..<Sizes.warmUp.changes], oursFirst: false, describe: false)

        var results: [RoundResult] = []
        for index in 0..<sizes.rounds {
            let result = try Self.round(rows[...], oursFirst: index % 2 == 1, describe: index == 0)
            results.append(result)
            Report.progress(
                "  round \(index + 1)/\(sizes.rounds): changeset_apply \(formatted(result.applySeconds)) s, "
                    + "ours \(formatted(result.oursSeconds)) s (waiting for decode \(formatted(result.decodeSeconds)) s, "
                    + "import \(formatted(result.importSeconds)) s), ratio \(formatted(result.throughputRatio, decimals: 4)); "
                    + "its SQL alone \(formatted(result.sqlAloneSeconds)) s; "
                    + "\(result.segments) segments, \(grouped(result.segmentBytes)) B (body \(grouped(result.bodyBytes)) B before zlib) vs changeset \(grouped(result.changesetBytes)) B")
        }

        let changes = Double(sizes.changes)
        let ratio = Stats.median(results.map(\.throughputRatio))
        let bytesRatio = Stats.median(results.map { Double($0.segmentBytes) / Double($0.changesetBytes) })
        let ours = Stats.median(results.map(\.oursSeconds))
        let apply = Stats.median(results.map(\.applySeconds))
        let decode = Stats.median(results.map(\.decodeSeconds))
        let importing = Stats.median(results.map(\.importSeconds))
        let sqlAlone = Stats.median(results.map(\.sqlAloneSeconds))
        let sqlAloneRatio = Stats.median(results.map { $0.applySeconds / $0.sqlAloneSeconds })
        let segmentBytes = Stats.median(results.map { Double($0.segmentBytes) })
        let bodyBytes = Stats.median(results.map { Double($0.bodyBytes) })
        let changesetBytes = Stats.median(results.map { Double($0.changesetBytes) })
        Report.progress(
            "  median: changeset_apply \(formatted(apply)) s (\(grouped(Int(changes / apply))) rows/s), "
                + "ours \(formatted(ours)) s (\(grouped(Int(changes / ours))) changes/s): "
                + "waiting for decode \(formatted(decode)) s (\(formatted(100 * decode / ours, decimals: 1)) %), "
                + "import \(formatted(importing)) s (\(grouped(Int(changes / importing))) changes/s, "
                + "\(formatted(100 * importing / ours, decimals: 1)) %); the import's SQL alone \(formatted(sqlAlone)) s "
                + "(\(formatted(1e6 * sqlAlone / changes, decimals: 2)) µs per change, ours \(formatted(1e6 * ours / changes, decimals: 2)), "
                + "changeset_apply \(formatted(1e6 * apply / changes, decimals: 2))")

        Report.emit(metric("replay_vs_changeset_apply", ratio, unit: "x", goal: 0.8, .higher, decimals: 3))
        Report.emit(metric("bytes_vs_changeset", bytesRatio, unit: "x", goal: 1.0, .lower, decimals: 3))
        Report.emit(metric("sql_alone_vs_changeset_apply", sqlAloneRatio, unit: "x", goal: nil, .higher, decimals: 3))
        Report.emit(metric("replay_changes_per_s", changes / ours, unit: "changes/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("changeset_apply_rows_per_s", changes / apply, unit: "rows/s", goal: nil, .higher, decimals: 0))
        Report.emit(metric("segment_bytes_per_change", segmentBytes / changes, unit: "B", goal: nil, .lower, decimals: 1))
        Report.emit(metric("segment_uncompressed_bytes_per_change", bodyBytes / changes, unit: "B", goal: nil, .lower, decimals: 1))
        Report.emit(metric("changeset_bytes_per_change", changesetBytes / changes, unit: "B", goal: nil, .lower, decimals: 1))

        if workload == .all { try runMixed(sizes) }
    }

    /// The mixed workload's rounds and metrics.
    func runMixed(_ sizes: Sizes) throws {
        Report.progress(
            "replay/mixed: \(Self.mixedNodes) nodes, \(grouped(sizes.changes)) changes (updates, deletes, inserts of the same rows) "
                + "from \(grouped(sizes.changes / 2)) common starting rows, \(sizes.rounds) rounds")
        // Untimed: pages in the merge's update and delete paths before the first measured round.
        _ = try Self.mixedRound(try Self.mixedWorkload(changes: Sizes.warmUp.changes, seed: 1), oursFirst: false)

        let workload = try Self.mixedWorkload(changes: sizes.changes, seed: 39)
        Report.progress("  \(workload.summary)")
        var results: [MixedResult] = []
        for index in 0..<sizes.rounds {
            let result = try Self.mixedRound(workload, oursFirst: index % 2 == 1)
            results.append(result)
            Report.progress(
                "  mixed round \(index + 1)/\(sizes.rounds): changeset_apply \(formatted(result.applySeconds)) s, "
                    + "ours \(formatted(result.oursSeconds)) s (waiting for decode \(formatted(result.decodeSeconds)) s), "
                    + "ratio \(formatted(result.throughputRatio, decimals: 4))")
        }
        let ours = Stats.median(results.map(\.oursSeconds))
        let changes = Double(workload.changes)
        Report.emit(metric(
            "replay_mixed_vs_changeset_apply", Stats.median(results.map(\.throughputRatio)), unit: "x", goal: 0.6, .higher, decimals: 3))
        Report.emit(metric("replay_mixed_changes_per_s", changes / ours, unit: "changes/s", goal: nil, .higher, decimals: 0))
    }

    // MARK: - One round

    struct RoundResult {
        var applySeconds: Double
        /// The import's SQL alone, with no merge logic.
        var sqlAloneSeconds: Double
        /// Decode and import, timed as one loop.
        var oursSeconds: Double
        /// The parts of `oursSeconds`, each summed over segments: waiting for a segment to be decoded (on
        /// another thread), and the rest.
        var decodeSeconds: Double
        var importSeconds: Double { oursSeconds - decodeSeconds }
        var segments: Int
        var segmentBytes: Int
        /// The segments' bodies before compression.
        var bodyBytes: Int
        var changesetBytes: Int

        /// Our throughput over changeset_apply's, for the same rows.
        var throughputRatio: Double { applySeconds / oursSeconds }
    }

    static func round(_ rows: ArraySlice<NoteRow>, oursFirst: Bool, describe: Bool) throws -> RoundResult {
        var ours: (seconds: Double, decode: Double, segments: Int, bytes: Int, bodyBytes: Int, stateBytes: Int)?
        var baseline: (seconds: Double, bytes: Int)?
        for side in oursFirst ? [true, false] : [false, true] {
            if side {
                ours = try replay(rows, describe: describe)
            } else {
                baseline = try changesetApply(rows, describe: describe)
            }
        }
        guard let ours, let baseline else { throw BenchError("a side of the round did not run") }
        let sqlAlone = try withTemporaryDirectory { directory in
            try SegmentFixture.importSQLAlone(rows, stateBytes: ours.stateBytes, at: directory.file("sql-alone.sqlite"))
        }
        return RoundResult(
            applySeconds: baseline.seconds, sqlAloneSeconds: sqlAlone, oursSeconds: ours.seconds, decodeSeconds: ours.decode,
            segments: ours.segments, segmentBytes: ours.bytes, bodyBytes: ours.bodyBytes,
            changesetBytes: baseline.bytes)
    }

    /// The baseline: capture with a session, then time `sqlite3changeset_apply` on a fresh database.
    static func changesetApply(_ rows: ArraySlice<NoteRow>, describe: Bool) throws -> (seconds: Double, bytes: Int) {
        try withTemporaryDirectory { directory in
            let changeset = try SegmentFixture.sessionChangeset(rows, at: directory.file("session-source.sqlite"))
            let seconds = try SegmentFixture.applyChangeset(
                changeset, rows: rows.count, at: directory.file("session-target.sqlite"), describe: describe)
            return (seconds, changeset.count)
        }
    }

    /// logsync: export from a source store, then time `importSegments` of every segment (decoding included) into a
    /// fresh target store, and check that the target ends with exactly the source's rows.
    static func replay(_ rows: ArraySlice<NoteRow>, describe: Bool) throws -> (
        seconds: Double, decode: Double, segments: Int, bytes: Int, bodyBytes: Int, stateBytes: Int
    ) {
        try withTemporaryDirectory { directory in
            let source = try SegmentFixture.sourceStore(rows, at: directory.file("source.sqlite"))
            let segments = try SegmentFixture.export(source)
            let bytes = segments.reduce(0) { $0 + $1.bytes.count }
            let target = try Store(path: directory.file("target.sqlite"), schema: NoteFixture.schema)

            var imported = SegmentFixture.Imported()
            let seconds = try timed {
                imported = try SegmentFixture.importAll(segments, into: target)
            }
            let transactions = imported.transactions
            let expectedTransactions = (rows.count + SegmentFixture.transactionRows - 1) / SegmentFixture.transactionRows
            guard transactions == expectedTransactions else {
                throw BenchError("imported \(transactions) transactions, expected \(expectedTransactions)")
            }
            try SegmentFixture.expectRows(target, rows.count, "the target store")
            if describe { Self.describeSpace(target) }
            guard case .integer(let stateBytes)? = try target.read(
                "SELECT CAST(avg(length(state)) AS INTEGER) FROM (SELECT state FROM _ls_row UNION ALL SELECT state FROM _ls_live)").first?.first else {
                throw BenchError("the target store has no row states")
            }
            guard try target.read(SegmentFixture.selectRows) == source.read(SegmentFixture.selectRows) else {
                throw BenchError("the target store's Note rows differ from the source store's")
            }
            return (
                seconds, imported.decodeSeconds, segments.count, bytes,
                imported.uncompressedBytes, Int(stateBytes))
        }
    }

    /// Untimed: what the imported store holds on disk, per table and index (through SQLite's `dbstat`
    /// table, when the library has it), to show where replay's writes go.
    static func describeSpace(_ store: Store) {
        guard (try? store.checkpoint()) != nil,
            let rows = try? store.read("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        else { return }
        let parts = rows.prefix(8).compactMap { row -> String? in
            guard case .text(let name) = row[0], case .integer(let bytes) = row[1] else { return nil }
            return "\(name) \(grouped(Int(bytes) / 1024)) KiB"
        }
        Report.progress("    target store on disk after import (dbstat): " + parts.joined(separator: ", "))
    }
}
