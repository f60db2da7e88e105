import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Synchronization
import Testing

/// A wall clock the test moves forward, shared by every engine of a cluster.
final class TestWallClock: Sendable {
    let milliseconds = Atomic<UInt64>(1_800_000_000_000)
    func advance(days: UInt64) { milliseconds.add(days * 86_400_000, ordering: .relaxed) }
}

extension SyncCluster {
    /// An engine with retention on: a baseline every `baselineEvery` transactions, progress published
    /// every round, pruning every round, the retention `retentionDays` on `clock`.
    func retainingEngine(_ store: Store, clock: TestWallClock, baselineEvery: UInt64 = 8, retentionDays: UInt64 = 30) throws -> SyncEngine {
        var retention = RetentionConfiguration(
            silentNodeAfterMilliseconds: retentionDays * 86_400_000, baselineAfterTransactions: baselineEvery,
            progressIntervalMilliseconds: 0, pruneIntervalMilliseconds: 0)
        retention.clock = { clock.milliseconds.load(ordering: .relaxed) }
        return try engine(store, maximumChanges: 3, retention: retention)
    }

    /// Stores named `names`, their engines (segments of at most `maximumChanges` changes), and `writes`
    /// random writes spread over the stores, one random engine syncing after each write with probability
    /// 1/`syncEvery` (never when 0); the generator is handed back to go on with.
    func randomlyWritten(
        _ names: [String], seed: UInt64, writes: Int, maximumChanges: Int, syncEvery: Int = 0
    ) throws -> (stores: [Store], engines: [SyncEngine], rng: SeededRandom) {
        var rng = SeededRandom(seed: seed)
        let stores = try names.map { try store($0) }
        let engines = try stores.map { try engine($0, maximumChanges: maximumChanges) }
        for _ in 0..<writes {
            try SyncCluster.randomWrite(stores.randomElement(using: &rng)!, using: &rng)
            if syncEvery > 0, Int.random(in: 0..<syncEvery, using: &rng) == 0 { _ = try engines.randomElement(using: &rng)!.sync() }
        }
        return (stores, engines, rng)
    }

    /// Segment files of `store`'s node in the shared folder.
    func segmentFiles(of store: Store) throws -> [String] {
        let folder = shared + "/default/" + store.nodeID
        return try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".lseg") }.sorted()
    }
}

@Suite("Baselines, pruning and bootstrap")
struct RetentionTests {
    @Test("two stores at the same frontier write the same baseline bytes, under the same name")
    func baselinesAreCanonical() throws {
        let cluster = try SyncCluster("canon")
        let (stores, engines, _) = try cluster.randomlyWritten(["a", "b"], seed: 7, writes: 60, maximumChanges: 3)
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        #expect(try stores[0].sync.frontier() == stores[1].sync.frontier())
        var bytes: [[UInt8]] = [[], []]
        for (index, store) in stores.enumerated() {
            _ = try store.sync.writeBaseline(account: "default") { bytes[index].append(contentsOf: $0) }
        }
        #expect(!bytes[0].isEmpty)
        #expect(bytes[0] == bytes[1], "the same frontier must give the same bytes")
        var served = false
        let (header, rows) = try BaselineDecoder.verify { [bytes] in
            defer { served = true }
            return served ? nil : bytes[0]
        }
        #expect(header.frontier == (try stores[0].sync.frontier()))
        #expect(rows > 0)
    }

    @Test("no baseline is written from an empty store, nor while a baseline load is unfinished")
    func baselineRefusals() throws {
        let cluster = try SyncCluster("refusals")
        let store = try cluster.store("a")
        #expect(throws: BaselineRefusal.empty) { _ = try store.sync.writeBaseline(account: "default") { _ in } }
        try store.write { tx in try tx.insert("Folder", ["id": SyncCluster.id(), "name": "f"]) }
        _ = try cluster.engine(store).sync()
        // What an interrupted load leaves (`SyncLedger.loadBaseline`), as another process's connection sees the file.
        let foreign = try ForeignConnection(path: store.path)
        _ = try foreign.execute("INSERT INTO _ls_meta(key, value) VALUES ('baseline_loading', 'x')")
        #expect(throws: BaselineRefusal.loadInProgress) { _ = try store.sync.writeBaseline(account: "default") { _ in } }
        _ = try foreign.execute("DELETE FROM _ls_meta WHERE key = 'baseline_loading'")
        var bytes: [UInt8] = []
        let written = try store.sync.writeBaseline(account: "default") { bytes.append(contentsOf: $0) }
        #expect(written.rows == 1)
        #expect(UInt64(bytes.count) == written.bytes)
    }

    @Test("a row its writer got wrong under an intact checksum stops the load there: earlier batches stay, the cursors do not move, a good baseline finishes the load")
    func malformedRowStopsTheLoad() throws {
        let cluster = try SyncCluster("malformed")
        let store = try cluster.store("a")
        let writer = NodeID(try cluster.store("b").nodeID)
        let header = BaselineHeader(schemaVersion: store.schema.version, account: "default", frontier: Frontier([writer: 5]))
        let keys = (0..<4).map { _ in SyncCluster.id() }.sorted { $0.sqliteOrder(comparedTo: $1) < 0 }
        func baseline(endingWithUnknownEntity: Bool) throws -> [UInt8] {
            let encoder = try BaselineEncoder(header: header)
            let clock = Clock(HLCTimestamp(physicalMilliseconds: 1_800_000_000_000, logical: 0), writer)
            for key in keys {
                try encoder.append(BaselineRow(key: RowKey("Folder", key), state: RowState(causalLength: 1, columns: ["name": Register(.text("f"), clock)])))
            }
            // An entity this store's schema does not declare: what a writer's bug looks like to the reader.
            if endingWithUnknownEntity {
                try encoder.append(BaselineRow(key: RowKey("Zebra", SyncCluster.id()), state: RowState(causalLength: 1)))
            }
            var bytes = encoder.takeOutput()
            bytes += try encoder.finish()
            return bytes
        }
        func load(_ bytes: [UInt8]) throws {
            var served = false
            _ = try BaselineDecoder.checkBytes { defer { served = true }; return served ? nil : bytes }
            served = false
            let decoder = try BaselineDecoder { defer { served = true }; return served ? nil : bytes }
            _ = try store.sync.loadBaseline(decoder, account: "default", options: BaselineLoadOptions(batchRows: 2))
        }
        #expect(throws: StoreError.self) { try load(try baseline(endingWithUnknownEntity: true)) }
        #expect(try store.read("SELECT count(*) FROM Folder").first?.first == .integer(4), "the two batches before the bad row stay")
        #expect(try store.sync.baselineLoadInProgress())
        #expect(try store.sync.appliedSequence(from: writer) == 0)
        #expect(try store.sync.coveredByBaseline(writer) == 0)
        #expect(throws: BaselineRefusal.loadInProgress) { _ = try store.sync.writeBaseline(account: "default") { _ in } }

        try load(try baseline(endingWithUnknownEntity: false))
        #expect(try !store.sync.baselineLoadInProgress())
        #expect(try store.sync.appliedSequence(from: writer) == 5)
        #expect(try store.sync.coveredByBaseline(writer) == 5)
        #expect(try store.read("SELECT count(*) FROM Folder").first?.first == .integer(4))
    }

    @Test("a damaged baseline is refused before any row is used")
    func damagedBaselineIsRefused() throws {
        let cluster = try SyncCluster("damaged")
        let store = try cluster.store("a")
        for _ in 0..<20 { try store.write { tx in try tx.insert("Folder", ["id": SyncCluster.id(), "name": "f"]) } }
        _ = try cluster.engine(store).sync()
        var bytes: [UInt8] = []
        _ = try store.sync.writeBaseline(account: "default") { bytes.append(contentsOf: $0) }
        // What a loader checks before it uses a row: the bytes alone, undecoded.
        var served = false
        let checked = try BaselineDecoder.checkBytes {
            defer { served = true }
            return served ? nil : bytes
        }
        #expect(checked.bytes == UInt64(bytes.count))
        for position in [20, bytes.count / 2, bytes.count - 3] {
            var damaged = bytes
            damaged[position] ^= 0x40
            served = false
            #expect(throws: SegmentError.self, "a flipped bit at \(position) of \(bytes.count), checked as bytes") {
                _ = try BaselineDecoder.checkBytes {
                    defer { served = true }
                    return served ? nil : damaged
                }
            }
            served = false
            #expect(throws: SegmentError.self, "a flipped bit at \(position) of \(bytes.count), decoded") {
                _ = try BaselineDecoder.verify {
                    defer { served = true }
                    return served ? nil : damaged
                }
            }
        }
        for cut in [bytes.count - 1, bytes.count - 4, bytes.count / 2] {
            served = false
            #expect(throws: SegmentError.self, "cut to \(cut) of \(bytes.count) bytes") {
                _ = try BaselineDecoder.checkBytes {
                    defer { served = true }
                    return served ? nil : Array(bytes[..<cut])
                }
            }
        }
    }

    @Test("a new node joins from a baseline and ends equal to the others")
    func newNodeBootstrapsFromBaseline() throws {
        let cluster = try SyncCluster("join")
        let clock = TestWallClock()
        var rng = SeededRandom(seed: 11)
        let stores = try ["a", "b"].map { try cluster.store($0) }
        let engines = try stores.map { try cluster.retainingEngine($0, clock: clock) }
        for _ in 0..<80 {
            try SyncCluster.randomWrite(stores.randomElement(using: &rng)!, using: &rng)
            if Int.random(in: 0..<4, using: &rng) == 0 { _ = try engines.randomElement(using: &rng)!.sync() }
        }
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        let joiner = try cluster.store("c")
        let report = try cluster.retainingEngine(joiner, clock: clock).sync()
        #expect(report.loadedBaseline != nil, "a new node loads the newest baseline")
        for name in report.applied {
            #expect(try name.firstSequence > joiner.sync.coveredByBaseline(name.node), "\(name) is covered by the baseline: loaded first, it is not replayed")
        }
        #expect(try joiner.syncedTables() == stores[0].syncedTables())
        #expect(try stores[0].syncedTables() == stores[1].syncedTables())
    }

    @Test("a node whose baselines fall due as often as it prunes still purges its local history")
    func historyIsPurgedWhileBaselinesKeepComing() throws {
        let cluster = try SyncCluster("purge")
        let clock = TestWallClock()
        let stores = try ["a", "b"].map { try cluster.store($0) }
        let engines = try stores.map { try cluster.retainingEngine($0, clock: clock) }
        // a writes more than a baseline's worth between syncs: a baseline falls due in every round, as
        // pruning does, and no peer can have applied the one written in this very round.
        for _ in 0..<12 {
            for _ in 0..<10 { try stores[0].write { tx in try tx.insert("Folder", ["id": SyncCluster.id(), "name": "f"]) } }
            for engine in engines { _ = try engine.sync() }
        }
        let kept = try stores[0].read("SELECT count(*) FROM _ls_log WHERE kind = 0").first?.first
        guard case .integer(let count)? = kept else { Issue.record("no history count: \(String(describing: kept))"); return }
        #expect(count <= 30, "a keeps \(count) of its 120 history transactions")
    }

    @Test("segments go once every active node applied them and a baseline covers them; a node away past the retention comes back from a baseline with its unexported changes")
    func pruneAndReturn() throws {
        let cluster = try SyncCluster("prune")
        let clock = TestWallClock()
        let stores = try ["a", "b", "c"].map { try cluster.store($0) }
        let engines = try stores.map { try cluster.retainingEngine($0, clock: clock) }
        var rng = SeededRandom(seed: 3)
        for _ in 0..<30 { try SyncCluster.randomWrite(stores[Int.random(in: 0..<3, using: &rng)], using: &rng) }
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        // c goes away with a change it never exports while away.
        let keep = SyncCluster.id()
        try stores[2].write { tx in try tx.insert("Folder", ["id": keep, "name": "offline"]) }
        for _ in 0..<40 {
            try SyncCluster.randomWrite(stores[Int.random(in: 0..<2, using: &rng)], using: &rng)
            if Bool.random(using: &rng) { _ = try engines[Int.random(in: 0..<2, using: &rng)].sync() }
        }
        for _ in 0..<2 { for engine in engines.prefix(2) { _ = try engine.sync() } }
        // c holds pruning back while it is within the retention.
        let held = try engines[0].prune(dryRun: true)
        #expect(held.holdingBack.contains { $0.node == stores[2].nodeID }, "\(held.explanation)")
        clock.advance(days: 31)
        for _ in 0..<3 {
            try SyncCluster.randomWrite(stores[0], using: &rng)
            for engine in engines.prefix(2) { _ = try engine.sync() }
        }
        let pruned = try engines[0].prune(dryRun: false)
        #expect(pruned.silent.contains { $0.node == stores[2].nodeID })
        #expect(pruned.prunedThrough > 0, "\(pruned.explanation)")
        let deleted = try stores[0].sync.prunedSequence()
        let appliedByC = try stores[2].sync.appliedSequence(from: NodeID(stores[0].nodeID))
        #expect(deleted > appliedByC, "a has deleted segments c never applied")
        // c returns: it bootstraps from a baseline and keeps its change.
        var report = try engines[2].sync()
        for _ in 0..<3 where report.loadedBaseline == nil { report = try engines[2].sync() }
        #expect(report.loadedBaseline != nil)
        #expect(report.waiting.isEmpty, "after the baseline nothing waits: \(report.waitingReasons)")
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        let expected = try stores[0].syncedTables()
        #expect(try stores[1].syncedTables() == expected)
        #expect(try stores[2].syncedTables() == expected)
        #expect(expected.tables["Folder"]?[keep] != nil, "the change c made while away reached everyone")
    }

    @Test(
        "a baseline loads into the same store whatever its batches and chunks, into an empty store or one that holds part of the history",
        .timeLimit(.minutes(2)))
    func baselineLoadsAlikeInAnyBatches() throws {
        let cluster = try SyncCluster("chunks")
        let (stores, engines, written) = try cluster.randomlyWritten(["a", "b"], seed: 23, writes: 150, maximumChanges: 5, syncEvery: 10)
        var rng = written
        // A store that applied part of the history and wrote a row of its own, never exported.
        let partial = try cluster.store("partial")
        _ = try cluster.engine(partial).sync()
        try partial.write { tx in try tx.insert("Folder", ["id": SyncCluster.id(), "name": "own"]) }
        for _ in 0..<60 { try SyncCluster.randomWrite(stores.randomElement(using: &rng)!, using: &rng) }
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        var bytes: [UInt8] = []
        let baseline = try stores[0].sync.writeBaseline(account: "default") { bytes.append(contentsOf: $0) }
        #expect(baseline.rows > 40, "enough rows for many chunks: \(baseline.rows)")

        /// The store's content once the baseline is loaded in `batchRows`, `chunkRows` and `aheadRows` (or
        /// `aheadBytes`).
        func loaded(
            into name: String, copyOf source: Store?, batchRows: Int, batchBytes: UInt64? = nil, chunkRows: Int, aheadRows: Int = 8_192,
            aheadBytes: UInt64 = 8 << 20
        ) throws -> StoreContent {
            let path = cluster.storePath(name)
            try source?.copy(to: path)
            let store = try Store(path: path, schema: cluster.storeSchema)
            var served = false
            let decoder = try BaselineDecoder { [bytes] in
                defer { served = true }
                return served ? nil : bytes
            }
            let options = BaselineLoadOptions(
                batchRows: batchRows, batchBytes: batchBytes, chunkRows: chunkRows, aheadRows: aheadRows, aheadBytes: aheadBytes)
            let load = try store.sync.loadBaseline(decoder, account: "default", options: options)
            #expect(load.rows == Int(baseline.rows))
            if let batchBytes, batchBytes < 200 {
                // Rows of about 60–100 bytes: 2 or 3 to a batch, where the row bound alone makes one batch.
                #expect(load.batches >= Int(baseline.rows) / 4, "batches cut by their bytes: \(load.batches) for \(baseline.rows) rows")
            }
            return try StoreContent(store)
        }
        for source in [nil, partial] {
            let whole = try loaded(into: "whole-\(source == nil)", copyOf: source, batchRows: 100_000, chunkRows: 100_000)
            // Decoded ahead a row at a time, in chunks of 4 (the rows are rarely a multiple), all at once, or
            // in chunks cut by their bytes (here 1 or 2 rows of about 100 bytes).
            for (batchRows, chunkRows, aheadRows, aheadBytes) in [
                (7, 3, 4, 8 << 20), (1_000, 1, 1, 8 << 20), (50, 50, 8_192, 8 << 20), (Int(baseline.rows), 5, Int(baseline.rows), 8 << 20),
                (9, 4, 8_192, 150),
            ] as [(Int, Int, Int, UInt64)] {
                let parts = try loaded(
                    into: "parts-\(source == nil)-\(batchRows)-\(chunkRows)-\(aheadRows)-\(aheadBytes)", copyOf: source, batchRows: batchRows,
                    chunkRows: chunkRows, aheadRows: aheadRows, aheadBytes: aheadBytes)
                #expect(
                    parts == whole,
                    "batches of \(batchRows), chunks of \(chunkRows), decoded \(aheadRows) rows or \(aheadBytes) bytes ahead, \(source == nil ? "empty store" : "store with part of the history")")
            }
            // Batches cut by their bytes (2 or 3 rows each), chunks that end inside a batch.
            let byBytes = try loaded(into: "bytes-\(source == nil)", copyOf: source, batchRows: 100_000, batchBytes: 150, chunkRows: 3, aheadRows: 5)
            #expect(byBytes == whole, "batches of at most 150 bytes, \(source == nil ? "empty store" : "store with part of the history")")
            // Bounds that no row fits: still a row per batch (an empty batch would never end the load).
            let oneEach = try loaded(into: "zero-\(source == nil)", copyOf: source, batchRows: 0, batchBytes: 0, chunkRows: 3)
            #expect(oneEach == whole, "batches bounded by 0 rows and 0 bytes")
            if source == nil { #expect(whole.tables == (try stores[0].syncedTables())) }
        }
    }

    @Test("a baseline's batches stay inside the page cache in a store with a write-ahead log, and keep the caller's size with a rollback journal")
    func baselineBatchesBoundedByBytesInWAL() throws {
        let cluster = try SyncCluster("batch-bytes")
        let writer = NodeID(try cluster.store("writer").nodeID)
        // 40 rows of 100 KB each: 4 MB of rows, twice the default bound.
        let keys = (0..<40).map { _ in SyncCluster.id() }.sorted { $0.sqliteOrder(comparedTo: $1) < 0 }
        let encoder = try BaselineEncoder(header: BaselineHeader(schemaVersion: cluster.storeSchema.version, account: "default", frontier: Frontier([writer: 1])))
        let clock = Clock(HLCTimestamp(physicalMilliseconds: 1_800_000_000_000, logical: 0), writer)
        let name = String(repeating: "n", count: 100_000)
        for key in keys {
            try encoder.append(BaselineRow(key: RowKey("Folder", key), state: RowState(causalLength: 1, columns: ["name": Register(.text(name), clock)])))
        }
        var bytes = encoder.takeOutput()
        bytes += try encoder.finish()
        /// The rows each batch merged. Decoded 3 rows ahead: chunks end inside batches.
        func batches(loadingInto store: Store) throws -> [Int] {
            var served = false
            let decoder = try BaselineDecoder { defer { served = true }; return served ? nil : bytes }
            var rowsAfterEachBatch: [Int] = []
            let load = try store.sync.loadBaseline(
                decoder, account: "default", options: BaselineLoadOptions(batchRows: 100_000, aheadRows: 3),
                progress: { rowsAfterEachBatch.append($0.rows) })
            #expect(load.rows == 40)
            return zip(rowsAfterEachBatch, [0] + rowsAfterEachBatch).map { $0 - $1 }
        }
        // The batch ends with the row that takes it to 2 MiB: 21 rows of just over 100 KB, then 19.
        #expect(BaselineLoadOptions.walBatchBytes == 2 << 20)
        #expect(try batches(loadingInto: try cluster.store("wal")) == [21, 19])
        let building = try Store(path: cluster.storePath("building"), schema: cluster.storeSchema, options: .rebuilding)
        #expect(try batches(loadingInto: building) == [40], "a store being built takes the caller's batches")
        #expect(try building.read("SELECT count(*) FROM Folder") == [[.integer(40)]])
    }
}

/// What a store holds that loading a baseline decides: the synced tables, every row state (as the store's
/// baseline writes them) and where it is kept, the nodes, the cursors and what the baselines covered.
struct StoreContent: Equatable {
    var tables: Projection
    var states: [BaselineRow] = []
    var stored: [[DatabaseValue]]
    var live: [[DatabaseValue]]
    var nodes: [[DatabaseValue]]
    var cursors: [[DatabaseValue]]
    var meta: [[DatabaseValue]]

    init(_ store: Store) throws {
        tables = try store.syncedTables()
        var bytes: [UInt8] = []
        _ = try store.sync.writeBaseline(account: "default") { bytes.append(contentsOf: $0) }
        // The header names the store's own node with its export sequence: only the rows are compared.
        var served = false
        let decoder = try BaselineDecoder { [bytes] in
            defer { served = true }
            return served ? nil : bytes
        }
        while let row = try decoder.next() { states.append(row) }
        // Where each state is kept; the bytes may differ where they decode alike (node ids are numbered
        // as the store first meets them), so the states themselves are compared as the baseline reads them.
        stored = try store.read("SELECT entity, pk, cl FROM _ls_row ORDER BY entity, pk")
        live = try store.read("SELECT pk, cl FROM _ls_live ORDER BY pk")
        nodes = try store.read("SELECT node FROM _ls_node ORDER BY node")
        cursors = try store.read("SELECT node, last_seq FROM _ls_cursor ORDER BY node")
        meta = try store.read("SELECT key, value FROM _ls_meta WHERE key LIKE 'covered:%' OR key = 'baseline_loading' ORDER BY key")
    }
}

