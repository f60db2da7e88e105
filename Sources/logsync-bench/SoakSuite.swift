import ArgumentParser
import Foundation
import LogsyncTestKit
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTransport
import Synchronization

/// `soak`: whether retention bounds what a cluster keeps, and whether a new node's join stays cheap as
/// history grows (issue 17). Two runs of the same workload, with pruning on and with it off:
///
/// Three nodes (stores with `SyncEngine`s in this process, as the sync tests build clusters) share one
/// folder. Node A inserts 10,000 Note rows and every node imports them; then the nodes take turns, each
/// writing a few transactions of 10 updates of random rows (rank and score; one seeded generator, so both
/// runs write the same updates) and syncing, until 1M updates are written in about 2,000 syncs (100k in
/// 150 with `--quick`).
///
/// - Pruning on: retention with a baseline every 1/20 of the run's transactions, progress records as
///   syncd publishes them (at most once a second while they change) and about 16 prunes per node, on a
///   retention clock that moves 250 ms per round, about what a round takes here (the engines' clock for
///   retention only; HLCs keep real time).
/// - Pruning off: retention off, as before issue 17: every segment stays, no baselines.
///
/// At each quarter of the updates: the shared folder's size and file count, each store's size with its
/// `-wal`, and a brand-new node's join: a fresh store and engine (with the run's retention) on a copy of
/// the folder, synced until a round applies nothing, timed, and checked against the node that synced last.
/// At the end every node must hold the same rows.
struct SoakSuite: ParsableCommand, BenchmarkSuite {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Three nodes, 1M updates of 10k rows with pruning on and off: folder and store sizes, and a new node's join as history grows.",
        discussion: "Engines in this process, no syncd. The full run takes about 13 minutes on 2 cores, --quick about 1.")

    @OptionGroup var options: SuiteOptions

    @Option(help: "Updates in all, spread over the three nodes (default 1,000,000; 100,000 with --quick).")
    var updates: Int?

    enum Run: String, ExpressibleByArgument, CaseIterable {
        case pruned, unpruned
    }

    @Option(help: "Only one of the two runs: pruned or unpruned.")
    var only: Run?

    static let suite = "soak"
    static let account = "bench"
    static let nodeNames = ["A", "B", "C"]

    struct Sizes {
        var updates: Int
        var rows = 10_000
        var updatesPerTransaction = 10
        var checkpoints = 4
        /// Syncs in all, over the three nodes; a round is one sync of each.
        var syncs: Int
        var transactions: Int { updates / updatesPerTransaction }
        /// Transactions each node writes between two of its syncs.
        var transactionsPerSync: Int { max(1, transactions / syncs) }
        var rounds: Int { (transactions + 3 * transactionsPerSync - 1) / (3 * transactionsPerSync) }
        /// A baseline once a node's frontier has grown by 1/20 of the run's transactions.
        var baselineAfterTransactions: UInt64 { UInt64(max(100, transactions / 20)) }
        /// About 16 prunes per node in a run.
        var pruneEveryRounds: Int { max(1, rounds / 16) }
        static let full = Sizes(updates: 1_000_000, syncs: 2_000)
        static let quick = Sizes(updates: 100_000, syncs: 150)
    }

    /// How far the retention clock moves per round: about what a round takes here.
    static let roundMilliseconds: UInt64 = 250

    func run() throws {
        var sizes = options.quick ? Sizes.quick : Sizes.full
        if let updates { sizes.updates = updates }
        if options.quick {
            Report.progress("--quick: \(grouped(sizes.updates)) updates instead of \(grouped(Sizes.full.updates)); every figure is of the smaller run")
        }
        Report.progress(
            "soak: 3 nodes, \(grouped(sizes.rows)) rows, \(grouped(sizes.updates)) updates in transactions of \(sizes.updatesPerTransaction), "
                + "\(sizes.transactionsPerSync) transactions per node between syncs; pruning on: a baseline every \(grouped(Int(sizes.baselineAfterTransactions))) "
                + "transactions, pruning every \(sizes.pruneEveryRounds) rounds; a new node joins at every \(100 / sizes.checkpoints) %; "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores")
        let pruned = only == .unpruned ? nil : try soak(sizes, pruning: true)
        let unpruned = only == .pruned ? nil : try soak(sizes, pruning: false)
        guard let pruned, let unpruned else { return }
        Report.emit(metric("soak_folder_pruned_vs_unpruned", pruned.last!.folderBytes / unpruned.last!.folderBytes, unit: "x", goal: nil, .lower, decimals: 3))
        Report.emit(metric("soak_store_pruned_vs_unpruned", pruned.last!.largestStoreBytes / unpruned.last!.largestStoreBytes, unit: "x", goal: nil, .lower, decimals: 3))
    }

    /// What a checkpoint measured.
    struct Checkpoint {
        var updates: Int
        var percent: Int
        var folderBytes: Double
        var files: Int
        var storeBytes: [Double]
        var largestStoreBytes: Double { storeBytes.max() ?? 0 }
        /// History transactions each store keeps (`_ls_log`): what pruning purges from a store.
        var history: [Int]
        var joinSeconds: Double
    }

    /// The retention clock: ``roundMilliseconds`` per round.
    final class RoundClock: Sendable {
        let milliseconds = Atomic<UInt64>(1_800_000_000_000)
        func advance() { milliseconds.add(SoakSuite.roundMilliseconds, ordering: .relaxed) }
    }

    func settings(_ sizes: Sizes, pruning: Bool, clock: RoundClock, joiner: Bool = false) -> SyncConfiguration {
        var retention = RetentionConfiguration(enabled: false)
        if pruning {
            retention = RetentionConfiguration(
                // A joining node is measured, and then gone: it writes no baseline of its own.
                baselineAfterTransactions: joiner ? UInt64.max / 2 : sizes.baselineAfterTransactions,
                pruneIntervalMilliseconds: UInt64(sizes.pruneEveryRounds) * Self.roundMilliseconds)
            retention.clock = { clock.milliseconds.load(ordering: .relaxed) }
        }
        return SyncConfiguration(account: Self.account, maximumChangesPerSegment: SegmentFixture.maximumChanges, retention: retention)
    }

    func soak(_ sizes: Sizes, pruning: Bool) throws -> [Checkpoint] {
        let variant = pruning ? "pruned" : "unpruned"
        Report.progress("  \(variant): pruning \(pruning ? "on" : "off (retention off: no progress records, no baselines)")")
        return try withTemporaryDirectory { directory in
            let shared = directory.file("shared")
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
            let clock = RoundClock()
            let stores = try Self.nodeNames.map { try Store(path: directory.file("\($0).sqlite"), schema: NoteFixture.schema) }
            let engines = try stores.map { try SyncEngine(store: $0, sharedFolder: shared, configuration: settings(sizes, pruning: pruning, clock: clock)) }
            let keys = NoteFixture.rows(count: sizes.rows).map(\.id)
            try Self.seed(stores[0], keys: keys)
            for engine in engines + engines { _ = try engine.sync() }

            var rng = SeededRandom(seed: 17)
            var checkpoints: [Checkpoint] = []
            var written = 0
            var rounds = 0
            var writing = 0.0
            var syncing = 0.0
            let started = ContinuousClock.now
            var nextProgress = sizes.updates / 10
            while written < sizes.updates {
                for (store, engine) in zip(stores, engines) {
                    writing += try timed {
                        for _ in 0..<sizes.transactionsPerSync where written < sizes.updates {
                            try Self.writeUpdates(store, keys: keys, count: sizes.updatesPerTransaction, using: &rng)
                            written += sizes.updatesPerTransaction
                        }
                    }
                    syncing += try timed { _ = try engine.sync() }
                }
                rounds += 1
                clock.advance()
                let due = sizes.updates * (checkpoints.count + 1) / sizes.checkpoints
                if written >= due {
                    let checkpoint = try measure(
                        sizes, pruning: pruning, clock: clock, written: written, percent: 100 * (checkpoints.count + 1) / sizes.checkpoints,
                        shared: shared, stores: stores, directory: directory, reference: stores.last!)
                    checkpoints.append(checkpoint)
                    let suffix = checkpoint.percent == 100 ? "" : "_at_\(checkpoint.percent)pct"
                    Report.emit(metric("soak_folder_mb_\(variant)\(suffix)", checkpoint.folderBytes / 1_048_576, unit: "MB", goal: nil, .lower, decimals: 1))
                    Report.emit(metric("soak_files_\(variant)\(suffix)", Double(checkpoint.files), unit: "files", goal: nil, .lower, decimals: 0))
                    Report.emit(metric("soak_store_mb_\(variant)\(suffix)", checkpoint.largestStoreBytes / 1_048_576, unit: "MB", goal: nil, .lower, decimals: 1))
                    Report.emit(metric("soak_history_tx_\(variant)\(suffix)", Double(checkpoint.history.max() ?? 0), unit: "transactions", goal: nil, .lower, decimals: 0))
                    Report.emit(metric("soak_bootstrap_s_\(variant)\(suffix)", checkpoint.joinSeconds, unit: "s", goal: nil, .lower, decimals: 3))
                } else if written >= nextProgress {
                    Report.progress(
                        "    \(grouped(written)) updates (\(100 * written / sizes.updates) %), \(grouped(rounds)) rounds, "
                            + "\(formatted((ContinuousClock.now - started).seconds, decimals: 0)) s; folder \(Self.describe(try Self.folderSize(shared)))")
                }
                while nextProgress <= written { nextProgress += sizes.updates / 10 }
            }
            // Everyone catches up, and every node holds the same rows.
            for _ in 0..<2 { for engine in engines { _ = try engine.sync() } }
            let expected = try BootstrapSuite.Checksum(stores[0])
            for (name, store) in zip(Self.nodeNames, stores) {
                let found = try BootstrapSuite.Checksum(store)
                guard found == expected else { throw BenchError("\(variant): node \(name) holds \(found), node A \(expected)") }
            }
            let total = (ContinuousClock.now - started).seconds
            Report.progress(
                "  \(variant): \(grouped(written)) updates in \(grouped(rounds)) rounds, \(formatted(writing + syncing, decimals: 1)) s "
                    + "(\(grouped(Int(Double(written) / (writing + syncing)))) updates/s): \(formatted(writing, decimals: 1)) s writing, "
                    + "\(formatted(syncing, decimals: 1)) s syncing (\(formatted(1000 * syncing / Double(3 * rounds), decimals: 1)) ms per sync), \(formatted(total, decimals: 1)) s with the checkpoints; every node holds \(expected)")
            let first = checkpoints.first!.joinSeconds
            let last = checkpoints.last!.joinSeconds
            let tag = pruning ? "" : "_unpruned"
            Report.emit(metric("soak_bootstrap_first_s\(tag)", first, unit: "s", goal: nil, .lower, decimals: 3))
            Report.emit(metric("soak_bootstrap_last_s\(tag)", last, unit: "s", goal: nil, .lower, decimals: 3))
            Report.emit(metric("soak_bootstrap_growth\(tag)", last / first, unit: "x", goal: nil, .lower, decimals: 3))
            Report.emit(metric("soak_run_s\(tag)", writing + syncing, unit: "s", goal: nil, .lower, decimals: 1))
            return checkpoints
        }
    }

    /// Sizes now, and a brand-new node's join on a copy of the folder.
    func measure(
        _ sizes: Sizes, pruning: Bool, clock: RoundClock, written: Int, percent: Int, shared: String, stores: [Store], directory: TemporaryDirectory,
        reference: Store
    ) throws -> Checkpoint {
        let folder = try Self.folderSize(shared)
        let storeBytes = try stores.map { try Self.storeSize($0.path) }
        let history = try stores.map { store in
            guard case .integer(let count)? = try store.read("SELECT count(*) FROM _ls_log WHERE kind = 0").first?.first else {
                throw BenchError("cannot count the history of \(store.path)")
            }
            return Int(count)
        }
        var storeDetails: [String] = []
        for (index, store) in stores.enumerated() {
            let wal = storeBytes[index] - Double(try BootstrapSuite.fileSize(store.path))
            storeDetails.append(
                "\(Self.nodeNames[index]) \(formatted(storeBytes[index] / 1_048_576, decimals: 1)) MiB "
                    + "(-wal \(formatted(wal / 1_048_576, decimals: 1)), history \(grouped(history[index])) transactions)")
        }
        let copy = directory.file("join-\(percent)")
        try FileManager.default.copyItem(atPath: shared, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        let path = directory.file("join-\(percent).sqlite")
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        var rounds = 0
        var loaded: BaselineName?
        var applied = 0
        var waiting: [String] = []
        let seconds = try timed {
            let store = try Store(path: path, schema: NoteFixture.schema)
            let engine = try SyncEngine(store: store, sharedFolder: copy, configuration: settings(sizes, pruning: pruning, clock: clock, joiner: true))
            while true {
                let report = try engine.sync()
                rounds += 1
                loaded = loaded ?? report.loadedBaseline
                applied += report.appliedTransactions
                waiting = report.waitingReasons.values.sorted()
                if report.applied.isEmpty && report.loadedBaseline == nil { break }
            }
        }
        guard waiting.isEmpty else { throw BenchError("the new node at \(percent) % waits: \(waiting.joined(separator: "; "))") }
        let joined = try BootstrapSuite.Checksum(try Store(path: path, schema: NoteFixture.schema))
        let expected = try BootstrapSuite.Checksum(reference)
        guard joined == expected else { throw BenchError("the new node at \(percent) % holds \(joined), the last node to sync \(expected)") }
        Report.progress(
            "    \(percent) %: \(grouped(written)) updates; folder \(Self.describe(folder)); stores with their -wal: "
                + storeDetails.joined(separator: ", ") + "; "
                + "a new node joined in \(formatted(seconds)) s (\(rounds) rounds, "
                + (loaded.map { "baseline of \(grouped(Int($0.transactionCount))) transactions, then " } ?? "no baseline, ")
                + "\(grouped(applied)) transactions from segments)")
        return Checkpoint(
            updates: written, percent: percent, folderBytes: Double(folder.bytes), files: folder.files, storeBytes: storeBytes, history: history,
            joinSeconds: seconds)
    }

    // MARK: - Workload

    /// Node A's rows, in transactions of ``SegmentFixture/transactionRows``.
    static func seed(_ store: Store, keys: [String]) throws {
        var start = 0
        while start < keys.count {
            let end = min(start + SegmentFixture.transactionRows, keys.count)
            try store.write(author: SegmentFixture.author, context: SegmentFixture.context) { tx in
                for (offset, key) in keys[start..<end].enumerated() {
                    let i = start + offset
                    try tx.execute(NoteFixture.plainInsertSQL, [.text(key), .text("title \(i)"), .text("body of note \(i)"), .integer(Int64(i)), .real(0)])
                }
            }
            start = end
        }
    }

    /// One transaction of `count` updates of random rows.
    static func writeUpdates(_ store: Store, keys: [String], count: Int, using rng: inout SeededRandom) throws {
        let picks = (0..<count).map { _ in (keys[Int.random(in: 0..<keys.count, using: &rng)], Int64.random(in: 0..<1_000_000, using: &rng)) }
        try store.write(author: SegmentFixture.author, context: SegmentFixture.context) { tx in
            for (key, value) in picks {
                try tx.execute(#"UPDATE "Note" SET "rank" = ?, "score" = ? WHERE "id" = ?"#, [.integer(value), .real(Double(value) / 4), .text(key)])
            }
        }
    }

    // MARK: - Sizes

    struct FolderSize {
        var bytes = 0
        var files = 0
        var segments = 0
        var baselines = 0
    }

    /// Every regular file under `path`: segments, baselines, progress records.
    static func folderSize(_ path: String) throws -> FolderSize {
        var size = FolderSize()
        guard let walk = FileManager.default.enumerator(atPath: path) else { throw BenchError("cannot list \(path)") }
        for case let relative as String in walk {
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + relative)
            guard attributes[.type] as? FileAttributeType == .typeRegular else { continue }
            size.files += 1
            size.bytes += (attributes[.size] as? NSNumber)?.intValue ?? 0
            if relative.hasSuffix("." + SegmentName.fileExtension) { size.segments += 1 }
            if relative.hasSuffix("." + BaselineName.fileExtension) { size.baselines += 1 }
        }
        return size
    }

    static func describe(_ size: FolderSize) -> String {
        "\(formatted(Double(size.bytes) / 1_048_576, decimals: 1)) MiB in \(grouped(size.files)) files (\(grouped(size.segments)) segments, \(size.baselines) baselines)"
    }

    /// The store's file and its `-wal`.
    static func storeSize(_ path: String) throws -> Double {
        try [path, path + "-wal"].reduce(0.0) { total, file in
            guard FileManager.default.fileExists(atPath: file) else { return total }
            return total + Double(try BootstrapSuite.fileSize(file))
        }
    }
}
