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
        var rng = SeededRandom(seed: 7)
        let stores = try ["a", "b"].map { try cluster.store($0) }
        let engines = try stores.map { try cluster.engine($0, maximumChanges: 3) }
        for _ in 0..<60 { try SyncCluster.randomWrite(stores.randomElement(using: &rng)!, using: &rng) }
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        #expect(try stores[0].frontier() == stores[1].frontier())
        var bytes: [[UInt8]] = [[], []]
        for (index, store) in stores.enumerated() {
            _ = try store.writeBaseline(account: "default") { bytes[index].append(contentsOf: $0) }
        }
        #expect(!bytes[0].isEmpty)
        #expect(bytes[0] == bytes[1], "the same frontier must give the same bytes")
        var served = false
        let (header, rows) = try BaselineDecoder.verify { [bytes] in
            defer { served = true }
            return served ? nil : bytes[0]
        }
        #expect(header.frontier == (try stores[0].frontier()))
        #expect(rows > 0)
    }

    @Test("a damaged baseline is refused before any row is used")
    func damagedBaselineIsRefused() throws {
        let cluster = try SyncCluster("damaged")
        let store = try cluster.store("a")
        for _ in 0..<20 { try store.write { tx in try tx.insert("Folder", ["id": SyncCluster.id(), "name": "f"]) } }
        _ = try cluster.engine(store).sync()
        var bytes: [UInt8] = []
        _ = try store.writeBaseline(account: "default") { bytes.append(contentsOf: $0) }
        for position in [20, bytes.count / 2, bytes.count - 3] {
            var damaged = bytes
            damaged[position] ^= 0x40
            var served = false
            #expect(throws: SegmentError.self, "a flipped bit at \(position) of \(bytes.count)") {
                _ = try BaselineDecoder.verify {
                    defer { served = true }
                    return served ? nil : damaged
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
        let deleted = try stores[0].prunedSequence()
        let appliedByC = try stores[2].appliedSequence(from: NodeID(stores[0].nodeID))
        #expect(deleted > appliedByC, "a has deleted segments c never applied")
        // c returns: it bootstraps from a baseline and keeps its change.
        var report = try engines[2].sync()
        for _ in 0..<3 where report.loadedBaseline == nil { report = try engines[2].sync() }
        for _ in 0..<3 { for engine in engines { _ = try engine.sync() } }
        let expected = try stores[0].syncedTables()
        #expect(try stores[1].syncedTables() == expected)
        #expect(try stores[2].syncedTables() == expected)
        #expect(expected.tables["Folder"]?[keep] != nil, "the change c made while away reached everyone")
    }
}
