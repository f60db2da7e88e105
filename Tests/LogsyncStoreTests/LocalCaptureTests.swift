import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncSQLite
import LogsyncTestKit
import Testing

/// The write helpers (`insert`, `update`, `delete`) record their history themselves with the writer
/// connection's triggers off (`LocalCapture.swift`); raw SQL and foreign writers stay captured by the
/// triggers. Both ways must record the same history.
@Suite("History of the write helpers, with and without triggers")
struct LocalCaptureTests {
    /// A pair of stores given the same writes: `direct` records the helpers' history itself, `triggered`
    /// has an app's own trigger on a synced table (``MergeCaptureTests/auditTrigger``), which keeps every
    /// write of the store going through the capture triggers: the reference.
    struct Pair {
        let direct: Store
        let triggered: Store

        init(_ directory: TemporaryDirectory, schema: Schema = Fixtures.schema) throws {
            direct = try Store(path: directory.file("direct.sqlite"), schema: schema)
            triggered = try Store(path: directory.file("triggered.sqlite"), schema: schema)
            if schema == Fixtures.schema { try Connection(path: triggered.path).execute(MergeCaptureTests.auditTrigger) }
        }

        /// Runs `body` as one write on each store; both must succeed or both fail.
        func write(_ body: (WriteTransaction) throws -> Void) throws {
            let outcomes = [direct, triggered].map { store in Result { try store.write(author: "a", context: "c", body) } }
            switch (outcomes[0], outcomes[1]) {
            case (.success, .success), (.failure, .failure): break
            default: Issue.record("one store's write failed and the other's did not: \(outcomes)")
            }
        }
    }

    /// A key in the schema's uuid shape, drawn from `rng`, so that both stores get the same keys.
    static func id(_ rng: inout SeededRandom) -> DatabaseValue {
        let hex = (0..<32).map { _ in String(Int.random(in: 0..<16, using: &rng), radix: 16) }.joined()
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return .text(parts.joined(separator: "-"))
    }

    /// History as contexts read it, without what differs between two stores by nature: tokens (packed
    /// inserts take fewer log rows) and clocks.
    static func history(_ store: Store) throws -> [HistoryTransaction] {
        try store.history(limit: 100_000).map { transaction in
            var transaction = transaction
            transaction.token = .zero
            transaction.timestamp = HLCTimestamp(rawValue: 0)
            return transaction
        }
    }

    /// What the store ships: its new history exported into segments, decoded, clocks left out.
    static func exported(_ store: Store) throws -> [LogTransaction] {
        _ = try store.sync.exportToOutbox(account: "default", maximumChanges: 50)
        var result: [LogTransaction] = []
        for segment in try store.sync.unpublishedSegments() {
            var decoder = try SegmentDecoder(bytes: segment.bytes)
            while var transaction = try decoder.next() {
                transaction.timestamp = HLCTimestamp(rawValue: 0)
                result.append(transaction)
            }
        }
        return result
    }

    static func tables(_ store: Store) throws -> [[[DatabaseValue]]] {
        try ["Owner", "Folder", "Label", "Note"].map { try store.read("SELECT * FROM \($0) ORDER BY id") }
    }

    /// Random writes of one to four operations each: helper inserts, updates (some that change nothing)
    /// and deletes (direct for notes; through the triggers for rows other entities refer to, with their
    /// cascade, nullify and deny rules), reads, and raw SQL in between.
    static func randomWrites(_ pair: Pair, count: Int, using rng: inout SeededRandom) throws {
        var labels = 0
        for _ in 0..<count {
            let ids = try ["Owner", "Folder", "Label", "Note"].map { entity in try pair.direct.read("SELECT id FROM \(entity)").map { $0[0] } }
            let (owners, folders, labelIDs, notes) = (ids[0], ids[1], ids[2], ids[3])
            var operations: [(WriteTransaction) throws -> Void] = []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let key = id(&rng)
                let rank = DatabaseValue.integer(Int64.random(in: 0..<3, using: &rng))
                let note = notes.randomElement(using: &rng)
                switch Int.random(in: 0..<14, using: &rng) {
                case 0: operations.append { try $0.insert("Owner", ["id": key, "name": .text("o")]) }
                case 1:
                    let owner = owners.randomElement(using: &rng) ?? .null
                    operations.append { try $0.insert("Folder", ["id": key, "name": .text("f"), "owner": owner]) }
                case 2:
                    labels += 1
                    let name = DatabaseValue.text("l\(labels)")
                    operations.append { try $0.insert("Label", ["id": key, "name": name]) }
                case 3, 4, 5:
                    let folder = folders.randomElement(using: &rng) ?? .null
                    let label = labelIDs.randomElement(using: &rng) ?? .null
                    let data = DatabaseValue.blob([0, UInt8.random(in: 0...255, using: &rng)])
                    operations.append {
                        try $0.insert("Note", ["id": key, "title": .text("t"), "rank": rank, "data": data, "folder": folder, "label": label])
                    }
                case 6, 7:
                    guard let note else { continue }
                    let body: DatabaseValue = Bool.random(using: &rng) ? .text("b") : .null
                    operations.append { _ = try $0.update("Note", key: note, ["rank": rank, "body": body]) }
                case 8:
                    guard let note else { continue }
                    let label = labelIDs.randomElement(using: &rng) ?? .null
                    operations.append { _ = try $0.update("Note", key: note, ["label": label]) }
                case 9:
                    guard let note else { continue }
                    operations.append { _ = try $0.delete("Note", key: note) }
                case 10:
                    let (entity, row) = [("Owner", owners), ("Folder", folders), ("Label", labelIDs)].randomElement(using: &rng)!
                    guard let target = row.randomElement(using: &rng) else { continue }
                    operations.append { _ = try $0.delete(entity, key: target) }
                case 11:
                    guard let note else { continue }
                    operations.append { try $0.execute("UPDATE Note SET rank = ifnull(rank, 0) + 1 WHERE id = ?", [note]) }
                case 12:
                    operations.append { _ = try $0.rows("SELECT count(*) FROM Note WHERE rank = ?", [rank]) }
                default:
                    // An update of a row that does not exist, and a delete of one: no change.
                    operations.append { _ = try $0.update("Note", key: key, ["rank": rank]) }
                    operations.append { _ = try $0.delete("Note", key: key) }
                }
            }
            try pair.write { tx in for operation in operations { try operation(tx) } }
        }
    }

    /// `LOGSYNC_LOCAL_CAPTURE_SEEDS=N` runs N seeds for long runs.
    @Test(
        "the helpers record the same history, rows and shipped changes as the capture triggers",
        arguments: propertySeeds("LOGSYNC_LOCAL_CAPTURE_SEEDS", default: 4, from: 1))
    func sameHistory(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let directory = try TemporaryDirectory("local-capture")
        let pair = try Pair(directory)
        try Self.randomWrites(pair, count: 150, using: &rng)

        // The helpers did record history themselves (packed inserts), and the reference did not.
        #expect(try pair.direct.read("SELECT count(*) FROM _ls_log WHERE kind = 4") != [[.integer(0)]])
        #expect(try pair.triggered.read("SELECT count(*) FROM _ls_log WHERE kind = 4") == [[.integer(0)]])
        #expect(try Self.tables(pair.direct) == Self.tables(pair.triggered))
        let history = try Self.history(pair.direct)
        #expect(history.count > 100)
        #expect(history == (try Self.history(pair.triggered)))
        #expect(try Self.exported(pair.direct) == Self.exported(pair.triggered))
    }

    @Test("an update records only the columns whose stored value changed, as SQLite compares them")
    func updateMasks() throws {
        let schema = Schema(version: 1, entities: [
            Entity("Item", attributes: [Attribute("score", .real), Attribute("count", .integer), Attribute("label", .text), Attribute("raw", .blob)])
        ])
        let directory = try TemporaryDirectory("local-capture")
        let pair = try Pair(directory, schema: schema)
        // The reference: raw SQL, which the triggers capture.
        let key = DatabaseValue.text(Fixtures.idText())
        try pair.direct.write { try $0.insert("Item", ["id": key, "score": .real(2), "count": .integer(3), "label": .text("x"), "raw": .blob([1])]) }
        try pair.triggered.write { try $0.execute("INSERT INTO Item(id, score, count, label, raw) VALUES (?, 2.0, 3, 'x', x'01')", [key]) }
        let updates: [[String: DatabaseValue]] = [
            ["score": .integer(2)],  // stored as 2.0: unchanged
            ["score": .real(2.5), "count": .integer(3)],  // only score
            ["label": .text("x"), "raw": .blob([1])],  // unchanged
            ["label": .null, "raw": .blob([2])],
            ["label": .null, "count": .real(4)],  // count stored as 4
            ["score": .null, "count": .integer(4), "label": .text("y")],
        ]
        for values in updates {
            #expect(try pair.direct.write { try $0.update("Item", key: key, values) })
            let names = values.keys.sorted()
            try pair.triggered.write { tx in
                try tx.execute(
                    "UPDATE Item SET " + names.map { "\($0) = ?" }.joined(separator: ", ") + " WHERE id = ?", names.map { values[$0]! } + [key])
            }
        }
        #expect(try pair.direct.read("SELECT * FROM Item") == pair.triggered.read("SELECT * FROM Item"))
        let history = try Self.history(pair.direct)
        #expect(history.map(\.changes.count) == [1, 1, 1, 1, 1])
        #expect(history.dropFirst().map { $0.changes[0].changedColumns } == [["score"], ["label", "raw"], ["count"], ["score", "label"]])
        #expect(history.map(\.changes) == (try Self.history(pair.triggered)).map(\.changes))
    }

    @Test("a foreign write between two helper writes is a history transaction of its own, in order")
    func foreignWriteBetween() throws {
        let directory = try TemporaryDirectory("local-capture")
        let store = try Store(path: directory.file("store.sqlite"), schema: Fixtures.schema)
        let keys = (0..<4).map { _ in Fixtures.id() }
        try store.write(author: "app") { tx in
            try tx.insert("Owner", ["id": keys[0], "name": .text("a")])
            try tx.insert("Owner", ["id": keys[1], "name": .text("b")])
        }
        // The store's connection has its triggers off now; another connection's are on.
        #expect(store.writerTriggersAreOff)
        let foreign = try Connection(path: store.path)
        try foreign.execute("INSERT INTO Owner(id, name) VALUES (?, 'foreign')", [keys[2]])
        try foreign.execute("UPDATE Owner SET name = 'renamed' WHERE id = ?", [keys[0]])
        try store.write(author: "app") { tx in try tx.insert("Owner", ["id": keys[3], "name": .text("d")]) }

        let history = try store.history()
        #expect(history.map(\.author) == ["app", nil, "app"])
        #expect(history.map { $0.changes.map(\.primaryKey) } == [[keys[0], keys[1]], [keys[2], keys[0]], [keys[3]]])
        #expect(history.map { $0.changes.map(\.kind) } == [[.insert, .insert], [.insert, .update], [.insert]])
        #expect(history[1].changes[1].changedColumns == ["name"])
    }

    @Test("raw SQL in a write body is captured by the triggers, after the helpers' inserts before it")
    func rawSQLBetweenHelpers() throws {
        let directory = try TemporaryDirectory("local-capture")
        let store = try Store(path: directory.file("store.sqlite"), schema: Fixtures.schema)
        let keys = (0..<5).map { _ in Fixtures.id() }
        try store.write { tx in
            try tx.insert("Owner", ["id": keys[0], "name": .text("a")])
            try tx.execute("INSERT INTO Owner(id, name) VALUES (?, 'raw')", [keys[1]])
            try tx.insert("Owner", ["id": keys[2], "name": .text("c")])
            _ = try tx.update("Owner", key: keys[1], ["name": .text("raw, renamed")])
            _ = try tx.rows("INSERT INTO Owner(id, name) VALUES (?, 'returning') RETURNING id", [keys[3]])
        }
        // The next write uses only helpers again: they record it themselves.
        try store.write { tx in try tx.insert("Owner", ["id": keys[4], "name": .text("e")]) }
        #expect(store.writerTriggersAreOff)

        let history = try store.history()
        #expect(history.count == 2)
        #expect(history[0].changes.map(\.primaryKey) == [keys[0], keys[1], keys[2], keys[1], keys[3]])
        #expect(history[0].changes.map(\.kind) == [.insert, .insert, .insert, .update, .insert])
        #expect(history[1].changes.map(\.primaryKey) == [keys[4]])
        #expect(try store.read("SELECT count(*) FROM _ls_log WHERE kind = 4") == [[.integer(2)]])
    }

    @Test("a savepoint rolled back in a write body takes the helpers' inserts after it out of history, as the triggers' rows")
    func savepointRollback() throws {
        let directory = try TemporaryDirectory("local-capture")
        let pair = try Pair(directory)
        let keys = (0..<4).map { _ in Fixtures.id() }
        try pair.write { tx in
            try tx.insert("Owner", ["id": keys[0], "name": .text("a")])
            try tx.execute("SAVEPOINT inner")
            try tx.insert("Owner", ["id": keys[1], "name": .text("undone")])
            _ = try tx.update("Owner", key: keys[0], ["name": .text("undone too")])
            try tx.execute("ROLLBACK TO inner")
            try tx.execute("RELEASE inner")
            try tx.insert("Owner", ["id": keys[2], "name": .text("c")])
            try tx.execute("  savepoint second")
            try tx.insert("Owner", ["id": keys[3], "name": .text("d")])
            try tx.execute("release second")
        }
        let history = try Self.history(pair.direct)
        #expect(history.map { $0.changes.map(\.primaryKey) } == [[keys[0], keys[2], keys[3]]])
        #expect(history == (try Self.history(pair.triggered)))
        #expect(try Self.tables(pair.direct) == Self.tables(pair.triggered))
    }

    @Test("a write that fails leaves no packed insert behind for the next one")
    func failedWrite() throws {
        struct Stop: Error {}
        let directory = try TemporaryDirectory("local-capture")
        let store = try Store(path: directory.file("store.sqlite"), schema: Fixtures.schema)
        let (dropped, kept) = (Fixtures.id(), Fixtures.id())
        #expect(throws: Stop.self) {
            try store.write { tx in
                try tx.insert("Owner", ["id": dropped, "name": .text("a")])
                throw Stop()
            }
        }
        try store.write { tx in try tx.insert("Owner", ["id": kept, "name": .text("b")]) }
        #expect(try store.history().map { $0.changes.map(\.primaryKey) } == [[kept]])
        #expect(try store.read("SELECT id FROM Owner") == [[kept]])
    }

    @Test("a run of inserts longer than one packed row is recorded in several, in order")
    func longRun() throws {
        let directory = try TemporaryDirectory("local-capture")
        let store = try Store(path: directory.file("store.sqlite"), schema: Fixtures.schema)
        let keys = (0..<(LocalCapture.largestRun * 2 + 10)).map { _ in Fixtures.id() }
        try store.write { tx in for key in keys { try tx.insert("Owner", ["id": key]) } }
        #expect(try store.read("SELECT count(*) FROM _ls_log WHERE kind = 4") == [[.integer(3)]])
        #expect(try store.history().first?.changes.map(\.primaryKey) == keys)
    }
}
