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

    /// `schema` with each renamed attribute under its name in the log: what a reference merge of the
    /// segments projects.
    static func inLogNames(_ schema: Schema) -> Schema {
        var renamed = schema
        for entity in renamed.entities.indices {
            for attribute in renamed.entities[entity].attributes.indices {
                renamed.entities[entity].attributes[attribute].name = renamed.entities[entity].attributes[attribute].logName
                renamed.entities[entity].attributes[attribute].renamingIdentifier = nil
            }
        }
        return renamed
    }

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

    /// One random write of version 2: the convergence schema's, and its new column, entity and relationship.
    static func randomWriteV2(_ store: Store, using rng: inout SeededRandom) throws {
        guard Int.random(in: 0..<2, using: &rng) == 0 else { return try SyncCluster.randomWrite(store, title: "subject", using: &rng) }
        let folders = try store.read("SELECT id FROM Folder").map { $0[0] }
        let notes = try store.read("SELECT id FROM Note").map { $0[0] }
        let tags = try store.read("SELECT id FROM Tag").map { $0[0] }
        try store.write(author: "v2") { tx in
            switch Int.random(in: 0..<7, using: &rng) {
            case 0: try tx.insert("Tag", ["id": SyncCluster.id(), "name": .text("g\(Int.random(in: 0..<3, using: &rng))")])
            case 1: if let tag = tags.randomElement(using: &rng) { try tx.delete("Tag", key: tag) }
            case 2:
                if let folder = folders.randomElement(using: &rng) {
                    try tx.update("Folder", key: folder, ["color": .text("c\(Int.random(in: 0..<3, using: &rng))")])
                }
            case 3:
                if let note = notes.randomElement(using: &rng) {
                    try tx.update(
                        "Note", key: note,
                        ["pinned": .integer(Int64.random(in: 0...1, using: &rng)), "tag": tags.randomElement(using: &rng) ?? .null,
                         "subject": .text("s\(Int.random(in: 0..<3, using: &rng))")])
                }
            case 4:
                try tx.insert("Note", ["id": SyncCluster.id(), "subject": "v2", "rank": 1, "pinned": 1, "folder": folders.randomElement(using: &rng) ?? .null,
                                       "tag": tags.randomElement(using: &rng) ?? .null])
            case 5:
                try tx.insert("Folder", ["id": SyncCluster.id(), "name": "v2", "color": "red"])
            default:
                if let note = notes.randomElement(using: &rng) { try tx.update("Note", key: note, ["rank": .integer(Int64.random(in: 0..<5, using: &rng)), "pinned": 0]) }
            }
        }
    }

    @Test("nodes upgraded one at a time in random order while all write: v1 nodes see all they declare, and all end identical")
    func mixedFleetConverges() async throws {
        try await onOwnThread { try self.mixedFleetConvergesOnOwnThread() }
    }

    func mixedFleetConvergesOnOwnThread() throws {
        // Across the seeds: segments applied in part by v1 nodes, and kept transactions merged after upgrades.
        var keptSegments = 0, mergedAfterUpgrade = 0
        for seed in Self.seeds {
            var rng = SeededRandom(seed: seed)
            let cluster = try SyncCluster("fleet-\(seed)")
            let names = ["a", "b", "c", "d"]
            // a starts on v2; the others upgrade at random steps, in random order.
            var schemas = ["a": Self.version2, "b": Self.version1, "c": Self.version1, "d": Self.version1]
            var stores: [String: Store] = [:]
            var engines: [String: SyncEngine] = [:]
            func sync(_ name: String) throws {
                let report = try engines[name]!.sync()
                keptSegments += report.keptForSchema.count
                mergedAfterUpgrade += report.appliedKept
            }
            func open(_ name: String) throws {
                engines[name] = nil
                stores[name] = nil
                let store = try Store(path: cluster.storePath(name), schema: schemas[name]!)
                stores[name] = store
                engines[name] = try cluster.engine(store)
            }
            for name in names { try open(name) }
            let steps = Int.random(in: 40...70, using: &rng)
            var upgradeAt: [Int: String] = [:]
            for (index, name) in ["b", "c", "d"].shuffled(using: &rng).enumerated() {
                upgradeAt[Int.random(in: (index * steps / 4)...((index + 1) * steps / 4), using: &rng)] = name
            }
            var checkedV1 = false
            for step in 0..<steps {
                if let name = upgradeAt[step] {
                    schemas[name] = Self.version2
                    try open(name)
                }
                let writer = names.randomElement(using: &rng)!
                if schemas[writer]!.version == 2 {
                    try Self.randomWriteV2(stores[writer]!, using: &rng)
                } else {
                    try SyncCluster.randomWrite(stores[writer]!, using: &rng)
                }
                if Int.random(in: 0..<2, using: &rng) == 0 { try sync(names.randomElement(using: &rng)!) }
                // Once, while some nodes still run v1: after everyone has synced, a v1 node holds everything
                // it can represent of what every node wrote.
                if !checkedV1, step >= steps / 2, let old = names.first(where: { schemas[$0]!.version == 1 }) {
                    checkedV1 = true
                    for _ in 0..<2 { for name in names { try sync(name) } }
                    let reference = try cluster.reference(schema: Self.version1)
                    #expect(try stores[old]!.syncedTables() == reference, "seed \(seed): v1 node \(old) at step \(step) misses what it can represent")
                }
            }
            for name in names where schemas[name]!.version == 1 {
                schemas[name] = Self.version2
                try open(name)
            }
            for _ in 0..<2 { for name in names.shuffled(using: &rng) { try sync(name) } }
            // The reference merges the segments, which name Note's subject `title`, as the log does.
            let expected = try cluster.reference(schema: Self.inLogNames(Self.version2))
            for name in names {
                #expect(try stores[name]!.sync.keptTransactionCount() == 0, "seed \(seed): \(name) still keeps parts")
                #expect(try stores[name]!.syncedTables(logNames: true) == expected, "seed \(seed): \(name) differs from the reference")
                #expect(try stores[name]!.syncedTables() == stores["a"]!.syncedTables(), "seed \(seed): \(name) differs from a")
            }
        }
        #expect(keptSegments > 0 && mergedAfterUpgrade > 0, "the runs kept parts (\(keptSegments) segments) and merged them (\(mergedAfterUpgrade))")
    }
}
