import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Mixed-version fleets (`docs/schema-evolution.md`): a node applies what its schema declares of a segment
/// written under a newer one, keeps the rest, and merges it when its app registers that schema — with the
/// result it would have had by applying everything after upgrading.
@Suite("Schema evolution: mixed-version fleets")
struct SchemaEvolutionTests {
    static let version1 = Schema.convergence
    /// Version 2: a new column on Folder and on Note, a new entity, a relationship to it, and Note's title
    /// renamed `subject` (its changes keep travelling as `title`).
    static let version2: Schema = {
        var schema = version1
        schema.version = 2
        schema.entities[2].attributes[0] = Attribute("subject", .text, renamingIdentifier: "title")
        schema.entities[0].attributes.append(Attribute("color", .text))
        schema.entities[2].attributes.append(Attribute("pinned", .bool))
        schema.entities[2].relationships.append(Relationship("tag", to: "Tag", deleteRule: .nullify))
        schema.entities.append(Entity("Tag", attributes: [Attribute("name", .text)]))
        return schema
    }()

    static var seeds: [UInt64] { propertySeeds("LOGSYNC_SCHEMA_SEEDS", default: 6, from: 0x5C4E) }

    @Test("a v1 node applies what it declares of a v2 segment, keeps the rest, moves on, and merges the rest after its upgrade")
    func keptUntilUpgrade() throws {
        let cluster = try SyncCluster("evolve")
        let newer = try Store(path: cluster.storePath("new"), schema: Self.version2)
        let folder = SyncCluster.id(), tag = SyncCluster.id()
        try newer.write { tx in
            try tx.insert("Folder", ["id": folder, "name": "Work", "color": "blue"])
            try tx.insert("Tag", ["id": tag, "name": "urgent"])
        }
        let newerEngine = try cluster.engine(newer)
        _ = try newerEngine.sync()

        var older: Store? = try cluster.store("old")
        let first = try cluster.engine(older!).sync()
        #expect(first.applied.map(\.firstSequence) == [1] && first.keptForSchema.map(\.firstSequence) == [1], "\(first)")
        #expect(first.waiting.isEmpty, "nothing waits: \(first.waitingReasons)")
        #expect(try older!.sync.appliedSequence(from: NodeID(newer.nodeID)) == 1)
        #expect(try older!.read("SELECT name FROM Folder") == [[.text("Work")]])
        #expect(try older!.sync.keptTransactionCount() == 1)
        #expect(first.keptTransactions == 1)

        // The v2 node goes on writing: what v1 declares arrives at once, behind nothing.
        try newer.write { try $0.update("Folder", key: folder, ["name": "Office"]) }
        _ = try newerEngine.sync()
        let second = try cluster.engine(older!).sync()
        #expect(second.applied.map(\.firstSequence) == [2] && second.keptForSchema.isEmpty, "\(second)")
        #expect(try older!.read("SELECT name FROM Folder") == [[.text("Office")]])
        #expect(try older!.sync.peerCursors().first?.schemaVersion == 2)
        // A baseline of this store would claim both segments without the kept part: none is written.
        #expect(throws: BaselineRefusal.keptForNewerSchema(1)) { try older!.sync.writeBaseline(account: "default") { _ in } }

        // The app upgrades: the kept part merges, nothing is read from the folder again.
        older = nil
        let upgraded = try Store(path: cluster.storePath("old"), schema: Self.version2)
        let round = try cluster.engine(upgraded).sync()
        #expect(round.appliedKept == 1 && round.applied.isEmpty, "\(round)")
        #expect(try upgraded.sync.keptTransactionCount() == 0)
        #expect(try upgraded.read("SELECT name, color FROM Folder") == [[.text("Office"), .text("blue")]])
        #expect(try upgraded.read("SELECT name FROM Tag") == [[.text("urgent")]])
        // Contexts see the merged part as an imported transaction of the node that wrote it.
        let last = try #require(try upgraded.sync.recentHistory(limit: 1).last)
        #expect(last.origin == .remote(newer.nodeID))
        #expect(try upgraded.syncedTables() == newer.syncedTables())
        #expect(try upgraded.sync.writeBaseline(account: "default") { _ in }.rows == 2)
    }

    @Test("a renamed attribute: v1 writes 'title', v2 writes 'subject', both land in one column on both; baselines carry the log's name")
    func renameMeetsInOneColumn() throws {
        let cluster = try SyncCluster("rename")
        let old = try cluster.store("v1"), new = try Store(path: cluster.storePath("v2"), schema: Self.version2)
        let oldEngine = try cluster.engine(old), newEngine = try cluster.engine(new)
        let first = SyncCluster.id(), second = SyncCluster.id()
        try old.write { try $0.insert("Note", ["id": first, "title": "from v1"]) }
        try new.write { try $0.insert("Note", ["id": second, "subject": "from v2"]) }
        for _ in 0..<2 { _ = try oldEngine.sync(); _ = try newEngine.sync() }
        #expect(try old.read("SELECT id, title FROM Note ORDER BY title") == [[first, .text("from v1")], [second, .text("from v2")]])
        #expect(try new.read("SELECT id, subject FROM Note ORDER BY subject") == [[first, .text("from v1")], [second, .text("from v2")]])
        // One column under two names: an edit made after the other's, on either release, wins on both.
        try new.write { try $0.update("Note", key: first, ["subject": "v2 edit"]) }
        for _ in 0..<2 { _ = try newEngine.sync(); _ = try oldEngine.sync() }
        #expect(try old.read("SELECT title FROM Note WHERE id = ?", [first]) == [[.text("v2 edit")]])
        try old.write { try $0.update("Note", key: first, ["title": "v1 edit, later"]) }
        for _ in 0..<2 { _ = try oldEngine.sync(); _ = try newEngine.sync() }
        #expect(try new.read("SELECT subject FROM Note WHERE id = ?", [first]) == [[.text("v1 edit, later")]])
        #expect(try new.read("SELECT id, subject, rank FROM Note ORDER BY id") == old.read("SELECT id, title, rank FROM Note ORDER BY id"))
        // A baseline names the column as the log does.
        var bytes: [UInt8] = []
        _ = try new.sync.writeBaseline(account: "default") { bytes += $0 }
        var chunks = [bytes]
        let decoder = try BaselineDecoder { chunks.popLast() }
        var columns: Set<String> = []
        while let row = try decoder.next() {
            if row.key.entity == "Note" { columns.formUnion(row.state.columns.keys) }
        }
        #expect(columns.contains("title") && !columns.contains("subject"), "\(columns)")
    }

    @Test("a later release that gives a new column a renamed column's former name: old nodes keep it apart, and merge it after their upgrade")
    func formerNameReused() throws {
        // Version 3: Note's subject (first declared as title) is renamed topic, and a new column takes the name subject.
        var version3 = Self.version2
        version3.version = 3
        version3.entities[2].attributes[0] = Attribute("topic", .text, renamingIdentifier: "title")
        version3.entities[2].attributes.append(Attribute("subject", .text))
        #expect(SchemaCheck(from: Self.version2, to: version3).isSafe)
        let cluster = try SyncCluster("former")
        let newest = try Store(path: cluster.storePath("v3"), schema: version3)
        let note = SyncCluster.id()
        try newest.write { try $0.insert("Note", ["id": note, "topic": "the topic", "subject": "the new column"]) }
        _ = try cluster.engine(newest).sync()
        var store: Store? = try Store(path: cluster.storePath("v2"), schema: Self.version2)
        _ = try cluster.engine(store!).sync()
        #expect(try store!.read("SELECT subject FROM Note") == [[.text("the topic")]], "v2's subject is v3's topic")
        #expect(try store!.sync.keptTransactionCount() == 1)
        store = nil
        let upgraded = try Store(path: cluster.storePath("v2"), schema: version3)
        #expect(try upgraded.read("SELECT topic, subject FROM Note") == [[.text("the topic"), .null]])
        let round = try cluster.engine(upgraded).sync()
        #expect(round.appliedKept == 1, "\(round)")
        #expect(try upgraded.read("SELECT topic, subject FROM Note") == [[.text("the topic"), .text("the new column")]])
    }

    /// A node on `schema` writes with `write` and publishes; then the v1 node `old` syncs once and closes,
    /// keeping what v1 does not declare. Returns the writer.
    static func keptByOldNode(_ cluster: SyncCluster, from schema: Schema, _ write: (WriteTransaction) throws -> Void) throws -> Store {
        let writer = try Store(path: cluster.storePath("writer"), schema: schema)
        try writer.write(write)
        _ = try cluster.engine(writer).sync()
        _ = try cluster.engine(try cluster.store("old")).sync()
        return writer
    }

    @Test("local writes made before kept parts merge are exported, not skipped")
    func localWritesBeforeKeptMergeAreExported() throws {
        let cluster = try SyncCluster("kept-fold")
        let folder = SyncCluster.id()
        let newer = try Self.keptByOldNode(cluster, from: Self.version2) { try $0.insert("Folder", ["id": folder, "name": "Work", "color": "blue"]) }
        let upgraded = try Store(path: cluster.storePath("old"), schema: Self.version2)
        // A local write lands between a round's export and the merge of the kept parts.
        try upgraded.write { try $0.update("Folder", key: folder, ["name": "Local"]) }
        #expect(try upgraded.sync.applyKeptChanges(account: "default").applied == 1)
        let round = try cluster.engine(upgraded).sync()
        #expect(round.published.count == 1, "the local write is exported: \(round)")
        _ = try cluster.engine(newer).sync()
        #expect(try newer.read("SELECT name, color FROM Folder") == [[.text("Local"), .text("blue")]])
    }

    @Test("a kept part that does not fit the upgraded schema stays kept and reported; the round and other nodes go on")
    func keptPartThatDoesNotFit() throws {
        let cluster = try SyncCluster("kept-misfit")
        var other = Self.version2
        other.entities[3].attributes.append(Attribute("weight", .text))
        _ = try Self.keptByOldNode(cluster, from: other) { try $0.insert("Tag", ["id": SyncCluster.id(), "name": "t", "weight": "heavy"]) }
        // This app's version 3 declares weight as an integer: the kept text does not fit it.
        var version3 = Self.version2
        version3.version = 3
        version3.entities[3].attributes.append(Attribute("weight", .integer))
        let upgraded = try Store(path: cluster.storePath("old"), schema: version3)
        let third = try cluster.store("third")
        try third.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "still flowing"]) }
        _ = try cluster.engine(third).sync()
        let round = try cluster.engine(upgraded).sync()
        #expect(round.undeclaredKept.count == 1 && round.undeclaredKept[0].contains("does not fit"), "\(round)")
        #expect(try upgraded.read("SELECT subject FROM Note") == [[.text("still flowing")]])
        #expect(try upgraded.sync.keptTransactionCount() == 1, "kept, not lost")
    }

    @Test("a v3 part is merged in steps: what v2 declares when the store reaches v2, the rest at v3")
    func keptInSteps() throws {
        var version3 = Self.version2
        version3.version = 3
        version3.entities[3].attributes.append(Attribute("weight", .integer))
        let cluster = try SyncCluster("steps")
        let newest = try Store(path: cluster.storePath("v3"), schema: version3)
        let tag = SyncCluster.id()
        try newest.write { try $0.insert("Tag", ["id": tag, "name": "urgent", "weight": 3]) }
        _ = try cluster.engine(newest).sync()

        var store: Store? = try cluster.store("old")
        _ = try cluster.engine(store!).sync()
        #expect(try store!.sync.keptTransactionCount() == 1)
        store = nil
        store = try Store(path: cluster.storePath("old"), schema: Self.version2)
        let atTwo = try cluster.engine(store!).sync()
        #expect(atTwo.appliedKept == 0 && atTwo.undeclaredKept.isEmpty, "\(atTwo)")
        #expect(try store!.read("SELECT name FROM Tag") == [[.text("urgent")]])
        #expect(try store!.sync.keptTransactionCount() == 1, "the weight waits for v3")
        store = nil
        let atThree = try Store(path: cluster.storePath("old"), schema: version3)
        let round = try cluster.engine(atThree).sync()
        #expect(round.appliedKept == 1, "\(round)")
        #expect(try atThree.read("SELECT name, weight FROM Tag") == [[.text("urgent"), .integer(3)]])
        #expect(try atThree.syncedTables() == newest.syncedTables())
    }

    @Test("a kept part that the same version declared differently stays kept and is reported")
    func sameVersionOtherDefinition() throws {
        let cluster = try SyncCluster("other-v2")
        var other = Self.version2
        other.entities[3].attributes.append(Attribute("weight", .integer))
        let writer = try Self.keptByOldNode(cluster, from: other) { try $0.insert("Tag", ["id": SyncCluster.id(), "name": "t", "weight": 1]) }
        let upgraded = try Store(path: cluster.storePath("old"), schema: Self.version2)
        let round = try cluster.engine(upgraded).sync()
        #expect(round.undeclaredKept.count == 1 && round.undeclaredKept[0].contains("Tag"), "\(round)")
        #expect(try upgraded.read("SELECT name FROM Tag") == [[.text("t")]], "what v2 declares is merged")
        #expect(try upgraded.sync.keptTransactionCount() == 1, "the weight is kept, not lost")
        // Status reads it from the store, in every round after too.
        _ = try cluster.engine(upgraded).sync()
        #expect(try upgraded.sync.undeclaredKept() == ["transaction 1 of node \(writer.nodeID), written under version 2"])
    }

    @Test("v1, v2 and v3 through the shared folder, nodes upgraded one at a time in random order while all write: older nodes see all they declare, and all end identical")
    func mixedFleetConverges() async throws {
        try await onOwnThread { try self.mixedFleetConvergesOnOwnThread() }
    }

    func mixedFleetConvergesOnOwnThread() throws {
        var total = SchemaFleet.Outcome()
        for seed in Self.seeds {
            let cluster = try SyncCluster("fleet-\(seed)")
            var engines: [String: SyncEngine] = [:]
            let driver = SchemaFleet.Driver(
                open: { name, schema in
                    engines[name] = nil
                    let store = try Store(path: cluster.storePath(name), schema: schema)
                    engines[name] = try cluster.engine(store)
                    return store
                },
                sync: { name in
                    let report = try engines[name]!.sync()
                    return (report.keptForSchema.count, report.appliedKept)
                },
                reference: { try cluster.reference(schema: $0, reading: SchemaFleet.reading(for: $0)) })
            total.add(try SchemaFleet.run(seed: seed, driver))
            engines = [:]
        }
        #expect(total.failures.isEmpty, "\(total.failures)")
        // Across the seeds: parts kept and merged after upgrades, and nodes on releases 1 and 2 checked beside newer ones.
        #expect(total.keptSegments > 0 && total.mergedAfterUpgrade > 0, "kept \(total.keptSegments) segments in part, merged \(total.mergedAfterUpgrade)")
        #expect(total.checkedReleases == [1, 2], "\(total.checkedReleases)")
    }

    @Test("a peer's progress record says its new schema version before it writes anything")
    func versionFromProgressRecord() throws {
        let cluster = try SyncCluster("progress-version")
        var upgrading: Store? = try cluster.store("upgrading")
        try upgrading!.write { try $0.insert("Folder", ["id": SyncCluster.id(), "name": "v1"]) }
        _ = try cluster.engine(upgrading!).sync()
        let watcher = try cluster.store("watcher")
        _ = try cluster.engine(watcher).sync()
        #expect(try watcher.sync.peerCursors().first?.schemaVersion == 1)
        upgrading = nil
        let upgraded = try Store(path: cluster.storePath("upgrading"), schema: SchemaFleet.version2)
        let round = try cluster.engine(upgraded).sync()
        #expect(round.published.isEmpty, "nothing written: \(round)")
        // A new engine prunes in its first round, which reads every progress record.
        _ = try cluster.engine(watcher).sync()
        #expect(try watcher.sync.peerCursors().first?.schemaVersion == 2)
        #expect(try watcher.sync.newestPeerSchemaVersion() == 2)
        // A progress record is the peer's latest word: a bogus version a broken build published is corrected by the next.
        try watcher.sync.notePeerSchemaVersions([NodeID(upgraded.nodeID): 999])
        #expect(try watcher.sync.newestPeerSchemaVersion() == 999)
        try watcher.sync.notePeerSchemaVersions([NodeID(upgraded.nodeID): 2])
        #expect(try watcher.sync.newestPeerSchemaVersion() == 2)
    }

    @Test("a store that renamed an entity writes baselines in the log's names and in the log's order")
    func baselineAfterEntityRename() throws {
        // Label renamed Zlabel: in current names it sorts after Note, in the log's before it.
        var renamed = Self.version1
        renamed.version = 2
        renamed.entities[1].name = "Zlabel"
        renamed.entities[1].renamingIdentifier = "Label"
        renamed.entities[2].relationships[1].destination = "Zlabel"
        let cluster = try SyncCluster("baseline-rename")
        let store = try Store(path: cluster.storePath("renamed"), schema: renamed)
        try store.write { tx in
            try tx.insert("Zlabel", ["id": SyncCluster.id(), "name": "l"])
            try tx.insert("Note", ["id": SyncCluster.id(), "title": "n"])
        }
        _ = try cluster.engine(store).sync()
        var bytes: [UInt8] = []
        _ = try store.sync.writeBaseline(account: "default") { bytes += $0 }
        var chunks = [bytes]
        let decoder = try BaselineDecoder { chunks.popLast() }
        var entities: [String] = []
        while let row = try decoder.next() { entities.append(row.key.entity) }
        #expect(entities == ["Label", "Note"])
    }

    @Test("a type changed in place: rank (integer) becomes score (real); old nodes' writes convert on arrival, a store converts its own, unexported ones included, and all converge")
    func typeConvertedInPlace() throws {
        var converting = Self.version1
        converting.version = 2
        converting.entities[2].attributes[1] = Attribute("score", .real, convertedFrom: Conversion(from: "rank", .integer))
        let check = SchemaCheck(from: Self.version1, to: converting)
        #expect(check.isSafe && check.findings.contains { $0.location == "Note.rank" && $0.reason.contains("converted in place") }, "\(check.report)")

        let cluster = try SyncCluster("convert")
        var old: Store? = try cluster.store("old")
        var upgrading: Store? = try cluster.store("upgrading")
        let first = SyncCluster.id(), second = SyncCluster.id()
        try old!.write { try $0.insert("Note", ["id": first, "title": "a", "rank": 3]) }
        _ = try cluster.engine(old!).sync()
        _ = try cluster.engine(upgrading!).sync()
        // A write to rank not yet exported when the app upgrades, and a row inserted and not yet exported:
        // they go out as writes to score.
        let unexported = SyncCluster.id()
        try upgrading!.write { try $0.update("Note", key: first, ["rank": 4]) }
        try upgrading!.write { try $0.insert("Note", ["id": unexported, "title": "c", "rank": 7]) }
        upgrading = nil
        let converted = try Store(path: cluster.storePath("upgrading"), schema: converting)
        #expect(try converted.read("SELECT name FROM pragma_table_info('Note') WHERE name IN ('rank', 'score')") == [[.text("score")]])
        #expect(try converted.read("SELECT score FROM Note ORDER BY title") == [[.real(4)], [.real(7)]])
        let convertedEngine = try cluster.engine(converted)
        _ = try convertedEngine.sync()
        // A node still on release 1 writes rank: it arrives as score.
        try old!.write { try $0.insert("Note", ["id": second, "title": "b", "rank": 5]) }
        _ = try cluster.engine(old!).sync()
        let round = try convertedEngine.sync()
        #expect(round.rejected.isEmpty && round.refused.isEmpty, "\(round)")
        #expect(try converted.read("SELECT id, score FROM Note ORDER BY title") == [[first, .real(4)], [second, .real(5)], [unexported, .real(7)]])
        // A fresh node of release 2 that replays every segment ends the same.
        let fresh = try Store(path: cluster.storePath("fresh"), schema: converting)
        _ = try cluster.engine(fresh).sync()
        #expect(try fresh.syncedTables() == converted.syncedTables())
        // The old node keeps score, which it does not declare, and merges it after its own upgrade.
        _ = try cluster.engine(old!).sync()
        #expect(try old!.read("SELECT rank FROM Note WHERE id = ?", [first]) == [[.integer(3)]])
        old = nil
        let upgraded = try Store(path: cluster.storePath("old"), schema: converting)
        _ = try cluster.engine(upgraded).sync()
        #expect(try upgraded.syncedTables() == converted.syncedTables())
        #expect(try upgraded.read("SELECT score FROM Note WHERE id = ?", [first]) == [[.real(4)]])
    }

    @Test("an attribute deprecated in v2 and contracted in v3: kept and synced while deprecated, then its column, bits and registers go; older segments still apply")
    func deprecateThenContract() throws {
        let cluster = try SyncCluster("contract")
        var store: Store? = try cluster.store("node")
        let old = try cluster.store("old")
        let oldEngine = try cluster.engine(old)
        let note = SyncCluster.id(), other = SyncCluster.id()
        try store!.write { tx in
            try tx.insert("Note", ["id": note, "title": "before", "rank": 3])
            try tx.insert("Note", ["id": other, "title": "other", "rank": 1])
        }
        _ = try cluster.engine(store!).sync()
        _ = try oldEngine.sync()
        // Release 2 deprecates rank: the column stays and still syncs with release 1.
        store = nil
        store = try Store(path: cluster.storePath("node"), schema: SchemaFleet.version2)
        try old.write { try $0.update("Note", key: note, ["rank": 4, "title": "from v1"]) }
        _ = try oldEngine.sync()
        _ = try cluster.engine(store!).sync()
        #expect(try store!.read("SELECT subject, rank FROM Note WHERE id = ?", [note]) == [[.text("from v1"), .integer(4)]])
        // Release 3 contracts it: the column goes; the other columns keep their values and clocks.
        store = nil
        let contracted = try Store(path: cluster.storePath("node"), schema: SchemaFleet.version3)
        #expect(try contracted.read("SELECT name FROM pragma_table_info('Note') WHERE name = 'rank'").isEmpty)
        #expect(try contracted.read("SELECT subject FROM Note ORDER BY subject") == [[.text("from v1")], [.text("other")]])
        // History written before the contraction reads without it: masks moved down a bit.
        let history = try contracted.sync.recentHistory(limit: 10)
        let columns = Set(history.flatMap { $0.changes.flatMap(\.changedColumns) })
        #expect(!columns.contains("rank") && columns.contains("subject"), "\(columns)")
        // The one update so far set rank and title: it now lists the title alone, not the column after rank.
        let updates = history.flatMap(\.changes).filter { $0.kind == .update }
        #expect(updates.count == 1 && updates.allSatisfy { $0.changedColumns == ["subject"] }, "\(updates)")
        // A release-1 segment with rank applies: rank is ignored, the rest lands.
        try old.write { try $0.update("Note", key: note, ["rank": 5, "title": "later v1"]) }
        try old.write { try $0.update("Note", key: other, ["rank": 2]) }
        _ = try oldEngine.sync()
        let engine = try cluster.engine(contracted)
        let round = try engine.sync()
        #expect(!round.applied.isEmpty && round.rejected.isEmpty && round.refused.isEmpty, "\(round)")
        #expect(try contracted.read("SELECT subject FROM Note WHERE id = ?", [note]) == [[.text("later v1")]])
        // Its own writes go out without rank, and release 1 reads them.
        try contracted.write { try $0.update("Note", key: other, ["subject": "from v3", "priority": 1]) }
        _ = try engine.sync()
        _ = try oldEngine.sync()
        #expect(try old.read("SELECT title, rank FROM Note WHERE id = ?", [other]) == [[.text("from v3"), .integer(2)]])
        // A fresh release-3 node that reads every segment, release 1's with rank included, ends the same.
        let fresh = try Store(path: cluster.storePath("fresh"), schema: SchemaFleet.version3)
        let freshRound = try cluster.engine(fresh).sync()
        #expect(!freshRound.applied.isEmpty && freshRound.rejected.isEmpty && freshRound.refused.isEmpty, "\(freshRound)")
        #expect(try fresh.syncedTables() == contracted.syncedTables())
        #expect(
            try contracted.syncedTables(logNames: true)
                == cluster.reference(schema: SchemaFleet.inLogNames(SchemaFleet.version3), reading: SchemaFleet.asReleaseThreeReads))
        // Baselines of the contracted store carry no rank.
        var bytes: [UInt8] = []
        _ = try contracted.sync.writeBaseline(account: "default") { bytes += $0 }
        var chunks = [bytes]
        let decoder = try BaselineDecoder { chunks.popLast() }
        var noteRows = 0
        while let row = try decoder.next() {
            guard row.key.entity == "Note" else { continue }
            noteRows += 1
            #expect(row.state.columns["rank"] == nil, "\(row.state.columns.keys)")
        }
        #expect(noteRows == 2)
    }
}
