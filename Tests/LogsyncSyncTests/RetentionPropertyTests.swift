import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Random schedules with baselines written and segments pruned at random points, a node joining late and
/// a node returning after the retention window with changes it never exported. Every node must end equal
/// to a witness that applied every transaction from segments: it syncs after every step and publishes
/// its progress, so nothing is deleted before it has applied it, and it writes no baseline. The absent
/// node's changes must be there.
///
/// `LOGSYNC_RETENTION_SEEDS=10000` runs ten thousand seeds; `@N` runs seed N alone.
@Suite("Retention properties")
struct RetentionPropertyTests {
    @Test("with pruning and baselines, every node converges to the state of a run without them, losing no unexported change", arguments: propertySeeds("LOGSYNC_RETENTION_SEEDS", default: 8, from: 1))
    func convergesLikeNoPruning(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let cluster = try SyncCluster("ret\(seed)")
        let clock = TestWallClock()
        let witness = try cluster.store("witness")
        let witnessEngine = try cluster.retainingEngine(witness, clock: clock, baselineEvery: UInt64.max / 2)
        _ = try witnessEngine.sync()
        var stores = try ["a", "b", "c"].map { try cluster.store($0) }
        var engines = try stores.map { try cluster.retainingEngine($0, clock: clock, baselineEvery: UInt64.random(in: 3...12, using: &rng)) }
        let away = 2
        var awayChanges: [DatabaseValue] = []
        var isAway = false
        var joined = false
        let steps = Int.random(in: 30...60, using: &rng)
        for step in 0..<steps {
            let index = Int.random(in: 0..<stores.count, using: &rng)
            let absent = isAway && index == away
            try SyncCluster.randomWrite(stores[index], using: &rng)
            if absent {
                // A change the absent node keeps to itself until it returns.
                let key = SyncCluster.id()
                try stores[away].write { tx in try tx.insert("Folder", ["id": key, "name": "away"]) }
                awayChanges.append(key)
            }
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let chosen = Int.random(in: 0..<engines.count, using: &rng)
                if !(isAway && chosen == away) { _ = try engines[chosen].sync() }
            case 5:
                let chosen = Int.random(in: 0..<engines.count, using: &rng)
                if !(isAway && chosen == away) { _ = try engines[chosen].writeBaseline() }
            case 6:
                let chosen = Int.random(in: 0..<engines.count, using: &rng)
                if !(isAway && chosen == away) { _ = try engines[chosen].prune(dryRun: false) }
            default:
                break
            }
            // Once, the third node leaves for longer than the retention; later it returns.
            if step == steps / 4 {
                _ = try engines[away].sync()
                isAway = true
            }
            if isAway, step == steps / 2 { clock.advance(days: 31) }
            if isAway, step == 3 * steps / 4 { isAway = false }
            // A fourth node joins late.
            if !joined, step == steps / 3 {
                joined = true
                let late = try cluster.store("d")
                stores.append(late)
                engines.append(try cluster.retainingEngine(late, clock: clock))
            }
            _ = try witnessEngine.sync()
        }
        isAway = false
        for _ in 0..<4 {
            for engine in engines { _ = try engine.sync() }
            _ = try witnessEngine.sync()
        }
        let expected = try witness.syncedTables()
        for store in stores {
            #expect(try store.syncedTables() == expected, "seed \(seed): \(store.nodeID) differs from the run without pruning")
            #expect(try store.sync.quarantined().isEmpty, "seed \(seed)")
        }
        // Another node may have deleted such a folder since; its state (a tombstone then) must be there.
        for key in awayChanges {
            let known = try witness.read("SELECT 1 FROM _ls_row WHERE pk = ?1 UNION ALL SELECT 1 FROM _ls_live WHERE pk = ?1", [key])
            #expect(!known.isEmpty, "seed \(seed): a change made while away is lost")
        }
    }
}
