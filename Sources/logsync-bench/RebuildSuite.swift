import ArgumentParser
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import LogsyncTransport

/// `rebuild`: how long building an account's store from that account's logs takes, and how much memory
/// it needs — what an account switch does for the new account (`docs/accounts.md`) — against bulk-inserting
/// the same rows into plain SQLite in the same run.
///
/// Untimed: N Note inserts are written into a source store in transactions of 1,000 rows, exported as
/// segments of at most 2,000 changes and published into a shared folder (the account's logs).
/// The store is opened as syncd opens a store it builds (`StoreOptions.rebuilding`: no memory map, a
/// rollback journal) and switched to WAL at the end (`Store.finishBuilding()`).
/// Timed, in a child process (so that its peak RSS is the rebuild's alone: the child's own `VmHWM`, read
/// by the child at the end; `getrusage` of the children would count the parent's peak, since the child
/// was spawned from the parent's address space before it exec'd): a fresh store is created and `SyncEngine.rebuild` imports every segment from the folder,
/// as syncd's `building` step does; then the rows are counted. Baseline: the same rows inserted into a
/// fresh plain database with the store's table in one transaction (`capture`'s bulk baseline).
struct RebuildSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "rebuild",
        abstract: "Rebuild an account's store from its logs (1M changes): time, peak RSS, and against plain bulk inserts.")

    @OptionGroup var options: SuiteOptions
    @OptionGroup var child: BuildChildOptions

    static let suite = "rebuild"
    static let account = "bench"

    struct Sizes {
        var changes: Int
        static let full = Sizes(changes: 1_000_000)
        static let quick = Sizes(changes: 100_000)
    }

    func run() throws {
        if let request = child.request {
            try MeasuredChild.finish(seconds: try Self.rebuild(from: request.folder, into: request.store, rows: request.rows))
            return
        }
        let sizes = options.quick ? Sizes.quick : Sizes.full
        if options.quick {
            Report.progress("--quick: \(grouped(sizes.changes)) changes instead of \(grouped(Sizes.full.changes)); rebuild_1m_s is then the time for 100,000 changes scaled by 10")
        }
        Report.progress(
            "rebuild: \(grouped(sizes.changes)) Note inserts in transactions of \(grouped(SegmentFixture.transactionRows)) rows, "
                + "segments of at most \(grouped(SegmentFixture.maximumChanges)) changes; \(ProcessInfo.processInfo.activeProcessorCount) cores")
        try withTemporaryDirectory { directory in
            let shared = directory.file("shared")
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
            let plainSeconds: Double
            do {
                let rows = NoteFixture.rows(count: sizes.changes)
                let setup = try timed {
                    let source = try SegmentFixture.sourceStore(rows[...], at: directory.file("source.sqlite"))
                    let transport = try DirectoryTransport(root: shared, account: Self.account, node: NodeID(source.nodeID))
                    var report = SyncReport()
                    try SyncEngine(store: source, transport: transport, configuration: Self.settings).export(into: &report)
                    Report.progress("  logs: \(report.published.count) segments published")
                }
                Report.progress("  setup (untimed): source store written and exported in \(formatted(setup)) s")
                plainSeconds = try CaptureSuite.plainBulk(rows[...])
                Report.progress("  plain SQLite: the same rows bulk-inserted in \(formatted(plainSeconds)) s")
            }
            let (seconds, peakKiB) = try Self.rebuildInChild(from: shared, into: directory.file("rebuilt.sqlite"), rows: sizes.changes)
            let peakMiB = Double(peakKiB) / 1024
            Report.progress(
                "  rebuild: \(formatted(seconds)) s (\(grouped(Int(Double(sizes.changes) / seconds))) changes/s), peak RSS \(formatted(peakMiB, decimals: 1)) MiB")
            let scale = Double(Sizes.full.changes) / Double(sizes.changes)
            Report.emit(metric("rebuild_1m_s", seconds * scale, unit: "s", goal: 10, .lower))
            Report.emit(metric("rebuild_peak_rss_mb", peakMiB, unit: "MB", goal: 256, .lower, decimals: 1))
            Report.emit(metric("rebuild_vs_plain", seconds / plainSeconds, unit: "x", goal: 1.4, .lower))
            Report.emit(metric("rebuild_changes_per_s", Double(sizes.changes) / seconds, unit: "changes/s", goal: nil, .higher, decimals: 0))
        }
    }

    static var settings: SyncConfiguration {
        SyncConfiguration(account: account, maximumChangesPerSegment: SegmentFixture.maximumChanges)
    }

    /// Runs this executable as a child that rebuilds; returns its seconds and its peak RSS (KiB).
    static func rebuildInChild(from folder: String, into store: String, rows: Int) throws -> (Double, Int) {
        try MeasuredChild.run(["rebuild"] + BuildChildOptions.arguments(folder: folder, store: store, rows: rows), what: "rebuild")
    }

    /// In the child: a fresh store at `path`, opened with `options` (as syncd opens a store it builds, by
    /// default), built by `SyncEngine.rebuild` from what `folder` holds, with `configuration`: sync rounds
    /// until one applies nothing. Returns the seconds it took; `check` then looks at the built store.
    static func rebuild(
        from folder: String, into path: String, rows: Int, options: StoreOptions = .rebuilding, configuration: SyncConfiguration = RebuildSuite.settings,
        check: (Store) throws -> Void = { _ in }
    ) throws -> Double {
        var built: Store?
        let seconds = try timed {
            let store = try Store(path: path, schema: NoteFixture.schema, options: options)
            let transport = try DirectoryTransport(root: folder, account: configuration.account, node: NodeID(store.nodeID))
            try SyncEngine(store: store, transport: transport, configuration: configuration).rebuild { progress in
                Report.progress("    \(grouped(progress.transactions)) transactions from \(grouped(progress.segments)) segments applied")
            }
            try store.finishBuilding()
            built = store
        }
        if let built {
            try SegmentFixture.expectRows(built, rows, "the built store")
            try check(built)
        }
        return seconds
    }
}
