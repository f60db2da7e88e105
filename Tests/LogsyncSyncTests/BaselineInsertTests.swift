import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import Testing
import LogsyncSQLite

/// A baseline's first inserts prepared on the decoding thread (`BaselineInserts`) leave a store exactly as
/// merging the same rows does: the same tables, states, nodes, cursors and history, into an empty store,
/// into one holding part of the history (its rows are in the table already), and into one with a local
/// row of the same entity (its states are then in `_ls_row`, so nothing is prepared).
@Suite("baseline first inserts")
struct BaselineInsertTests {
    /// `Memo` is isolated and nothing refers to it: its rows are prepared. `Note` refers to `Folder`:
    /// neither is.
    static let schema = Schema(version: 1, entities: [
        Entity(
            "Memo",
            attributes: [
                Attribute("title", .text), Attribute("count", .integer, optional: false, default: 7), Attribute("weight", .real),
                Attribute("data", .blob),
            ]),
        Entity("Folder", attributes: [Attribute("name", .text)]),
        Entity("Note", attributes: [Attribute("title", .text)], relationships: [Relationship("folder", to: "Folder", deleteRule: .cascade)]),
    ])

    /// Memos of every kind of value, some without a count (its default shows), folders and notes.
    static func writeRows(_ store: Store, count: Int, notes: Bool = true, using random: inout SeededRandom) throws {
        try store.write { tx in
            for index in 0..<count {
                var values: [String: DatabaseValue] = ["id": SyncCluster.id()]
                switch index % 6 {
                case 0: values["title"] = .text("memo \(index)")
                case 1: values["title"] = .text(String(repeating: "é", count: 30))
                case 2: values["title"] = .nonUTF8Text([0xff, 0xfe, UInt8(index % 256)])
                case 3: values["title"] = .null
                case 4: values["data"] = .blob((0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
                default: values["weight"] = .real(index % 12 == 5 ? .nan : Double(index) / 3)
                }
                if index % 4 != 0 { values["count"] = .integer(Int64(index)) }
                try tx.insert("Memo", values)
            }
            for _ in 0..<(notes ? count / 20 : 0) {
                let folder = SyncCluster.id()
                try tx.insert("Folder", ["id": folder, "name": .text("folder")])
                try tx.insert("Note", ["id": SyncCluster.id(), "title": .text("note"), "folder": folder])
            }
        }
    }

    /// Updates, deletes, and deletes followed by an insert of the same key, of some memos.
    static func changeRows(_ store: Store, using random: inout SeededRandom) throws {
        let memos = try store.read("SELECT id FROM Memo ORDER BY id").map { $0[0] }
        try store.write { tx in
            for memo in memos where Int.random(in: 0..<10, using: &random) == 0 {
                try tx.execute("UPDATE Memo SET count = count + 1, title = 'changed' WHERE id = ?", [memo])
            }
            for memo in memos where Int.random(in: 0..<15, using: &random) == 0 {
                try tx.execute("DELETE FROM Memo WHERE id = ?", [memo])
                if Bool.random(using: &random) { try tx.insert("Memo", ["id": memo, "title": .text("again")]) }
            }
        }
    }

    @Test("prepared first inserts leave the store as merging the rows does")
    func preparedAsMerged() throws {
        let cluster = try SyncCluster("prepared", schema: Self.schema)
        var random = SeededRandom(seed: 0xBA5E)
        let a = try cluster.store("a")
        let b = try cluster.store("b")
        let (engineA, engineB) = (try cluster.engine(a), try cluster.engine(b))
        try Self.writeRows(a, count: 240, using: &random)
        try Self.writeRows(b, count: 60, using: &random)
        for _ in 0..<2 { _ = try engineA.sync(); _ = try engineB.sync() }
        // A store that applied the inserts only: the rows are in its tables, their states in `_ls_live`.
        let partial = try cluster.store("partial")
        _ = try cluster.engine(partial).sync()
        #expect(try partial.read("SELECT count(*) FROM _ls_row r JOIN _ls_entity e ON e.id = r.entity WHERE e.name = 'Memo'") == [[.integer(0)]])
        // And one that also wrote a memo of its own, never exported.
        try partial.copy(to: cluster.storePath("local"))
        let local = try cluster.store("local")
        try local.write { tx in try tx.insert("Memo", ["id": SyncCluster.id(), "title": .text("own")]) }
        // Memos the partial stores have not seen: prepared, and inserted.
        try Self.writeRows(a, count: 40, using: &random)
        try Self.changeRows(a, using: &random)
        try Self.changeRows(b, using: &random)
        for _ in 0..<2 { _ = try engineA.sync(); _ = try engineB.sync() }
        var bytes: [UInt8] = []
        let baseline = try a.sync.writeBaseline(account: "default") { bytes.append(contentsOf: $0) }

        /// Another program renumbers the memo with the largest rowid with no trigger running and vacuums,
        /// as `VACUUM` itself may renumber rows: that memo's state in `_ls_live` is an orphan, which the
        /// load's first transaction moves to `_ls_row` (the schema cookie changed). Returns its key.
        func orphan(in store: Store) throws -> DatabaseValue {
            _ = try store.sync.exportToOutbox(account: "default")
            let foreign = try Connection(path: store.path)
            try foreign.setTriggersEnabled(false)
            try foreign.execute("UPDATE Memo SET rowid = -rowid WHERE rowid = (SELECT max(rowid) FROM Memo)")
            try foreign.setTriggersEnabled(true)
            try foreign.execute("VACUUM")
            return try store.read("SELECT id FROM Memo WHERE rowid < 0")[0][0]
        }

        /// States in `_ls_live` at the ids memos of rowid 1 to 150 will take, whose rows are gone, as a
        /// program deleting rows with no trigger running leaves them, and which no sync transaction has
        /// moved yet: storing a new memo's state there moves the orphan to `_ls_row` first, in a run of
        /// prepared rows as one by one. Returns their keys.
        func plantOrphans(in store: Store) throws -> [DatabaseValue] {
            _ = try store.sync.exportToOutbox(account: "default")
            let memo = try #require(try store.read("SELECT id FROM _ls_entity WHERE name = 'Memo'").first?.first)
            guard case .integer(let entity) = memo else { throw CancellationError() }
            let foreign = try Connection(path: store.path)
            return try (1...150).map { rowID in
                let key = DatabaseValue.text("orphan \(rowID)")
                // A state of causal length 1 with no registers: flags 0, no registers.
                try foreign.execute(
                    "INSERT INTO _ls_live(id, pk, cl, state) VALUES (?, ?, 1, x'0000')", [.integer(SchemaSQL.liveID(entity: entity, rowID: Int64(rowID))!), key])
                return key
            }
        }

        func loaded(
            into name: String, copyOf source: Store?, prepares: Bool, orphans: Bool, planted: Bool = false
        ) throws -> (StoreContent, [[String]], BaselineLoad) {
            let path = cluster.storePath(name)
            try source?.copy(to: path)
            let store = try Store(path: path, schema: Self.schema)
            let renumbered = orphans ? try orphan(in: store) : Optional<DatabaseValue>.none
            let plantedKeys = planted ? try plantOrphans(in: store) : []
            if let renumbered { #expect(try store.read("SELECT count(*) FROM _ls_row WHERE pk = ?", [renumbered]) == [[.integer(0)]]) }
            let before = try store.currentToken()
            var served = false
            let decoder = try BaselineDecoder { [bytes] in
                defer { served = true }
                return served ? nil : bytes
            }
            // Small chunks and batches: the first chunk is decoded before any node index is published (so
            // none of it is prepared), and prepared rows meet merged ones in a batch and across batches.
            // Runs of 4 prepared rows: many of them fill up inside a chunk of 16 rows.
            let load = try store.sync.loadBaseline(
                decoder, account: "default",
                options: BaselineLoadOptions(batchRows: 70, chunkRows: 25, aheadRows: 16, preparesInserts: prepares, runRows: 4))
            #expect(load.rows == Int(baseline.rows))
            if !plantedKeys.isEmpty {
                // Each orphan whose id a memo's live state took moved to `_ls_row`; the others (their rowid
                // went to a row whose state is in `_ls_row`) stay.
                let moved = try store.read("SELECT pk FROM _ls_row WHERE pk LIKE 'orphan %'").count
                let stayed = try store.read("SELECT pk FROM _ls_live WHERE pk LIKE 'orphan %'").count
                #expect(moved + stayed == plantedKeys.count && moved >= 100, "\(moved) orphans moved, \(stayed) stayed")
            }
            if let renumbered {
                #expect(try store.read("SELECT count(*) FROM _ls_row WHERE pk = ?", [renumbered]) == [[.integer(1)]], "the orphan moved to _ls_row")
            }
            // Each batch's history, its changes in any order: the rows of one batch are written in
            // another order when some are prepared, as projecting reorders merged rows anyway.
            let history = try store.history(after: before, limit: 100_000).map { transaction in
                transaction.changes.map { "\($0.entity) \($0.primaryKey) \($0.kind) \($0.changedColumns)" }.sorted()
            }
            return (try StoreContent(store), history, load)
        }
        for (label, source) in [("empty", nil), ("planted", nil), ("partial", partial), ("local", local), ("orphaned", partial)] as [(String, Store?)] {
            let (orphans, planted) = (label == "orphaned", label == "planted")
            let (merged, mergedHistory, mergedLoad) = try loaded(into: "merged-\(label)", copyOf: source, prepares: false, orphans: orphans, planted: planted)
            let (prepared, preparedHistory, preparedLoad) = try loaded(
                into: "prepared-\(label)", copyOf: source, prepares: true, orphans: orphans, planted: planted)
            #expect(mergedLoad.prepared == 0)
            #expect(prepared == merged, "\(label) store")
            #expect(preparedHistory == mergedHistory, "\(label) store")
            #expect(preparedHistory.count == preparedLoad.batches, "\(label) store: a history transaction per batch")
            switch label {
            case "empty", "planted":
                // Memos in their first life, after the first chunk: most of the baseline.
                #expect(preparedLoad.prepared > Int(baseline.rows) / 2, "\(preparedLoad.prepared) of \(baseline.rows) rows prepared")
                #expect(prepared.tables == (try a.syncedTables()))
            default:
                // The memos these stores hold are prepared, but in the table already: each is merged
                // instead. The 40 new ones are inserted (in the local store, each after looking for a
                // state in `_ls_row`, where the local memo's is).
                #expect(preparedLoad.prepared > 0 && preparedLoad.prepared <= 40, "\(label): \(preparedLoad.prepared) rows inserted")
            }
        }
    }

    @Test("a load that failed in a batch and is loaded again ends as one that did not fail, each insert in history once")
    func failedBatchLoadedAgain() throws {
        let cluster = try SyncCluster("prepared-retry", schema: Self.schema)
        var random = SeededRandom(seed: 0xFA11)
        let a = try cluster.store("a")
        // Memos only: the load starts with prepared rows, which the stale packed inserts of a failed
        // batch would have joined.
        try Self.writeRows(a, count: 300, notes: false, using: &random)
        _ = try cluster.engine(a).sync()
        var bytes: [UInt8] = []
        _ = try a.sync.writeBaseline(account: "default") { bytes.append(contentsOf: $0) }

        func load(_ baseline: [UInt8], into store: Store, batchRows: Int = 70) throws {
            var served = false
            let decoder = try BaselineDecoder {
                defer { served = true }
                return served ? nil : baseline
            }
            _ = try store.sync.loadBaseline(
                decoder, account: "default", options: BaselineLoadOptions(batchRows: batchRows, chunkRows: 25, aheadRows: 16, runRows: 4))
        }
        let clean = try cluster.store("clean")
        try load(bytes, into: clean)
        // The baseline cut short, in one batch: it fails when its rows run out, after writing prepared rows
        // whose inserts it had packed for history, and its transaction rolls back. Loaded again, the
        // first rows are new again (and prepared at once: the store published its node indexes).
        let retried = try cluster.store("retried")
        let before = try retried.currentToken()
        #expect(throws: (any Error).self) { try load(Array(bytes[..<(bytes.count * 3 / 5)]), into: retried, batchRows: 100_000) }
        #expect(try retried.read("SELECT count(*) FROM Memo") == [[.integer(0)]])
        try load(bytes, into: retried)
        #expect(try StoreContent(retried) == StoreContent(clean))
        var inserted: [DatabaseValue: Int] = [:]
        for transaction in try retried.history(after: before, limit: 100_000) {
            for change in transaction.changes where change.kind == .insert { inserted[change.primaryKey, default: 0] += 1 }
        }
        #expect(inserted.count == 300, "rows inserted: \(inserted.count)")
        #expect(inserted.values.allSatisfy { $0 == 1 }, "inserts in history more than once: \(inserted.filter { $0.value > 1 }.count)")

        // The same baseline loaded once more (as when a load is resumed after its batches committed):
        // every row is in the table already, with the same state, and nothing changes, not even where the
        // states are kept.
        let token = try retried.currentToken()
        try load(bytes, into: retried)
        #expect(try StoreContent(retried) == StoreContent(clean))
        #expect(try retried.history(after: token).isEmpty)
    }

    @Test("an index published for two nodes is not used to prepare rows")
    func ambiguousIndexesDropped() {
        let (x, y, z) = (NodeID("x"), NodeID("y"), NodeID("z"))
        #expect(BaselineInsertPreparer.unambiguous([x: 5, z: 5, y: 6]) == [y: 6])
        #expect(BaselineInsertPreparer.unambiguous([x: 1, y: 2]) == [x: 1, y: 2])
    }
}
