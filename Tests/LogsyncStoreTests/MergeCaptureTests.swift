import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing
import LogsyncSQLite

/// The merge writes synced tables with the writer connection's triggers off and records their history
/// itself (`MergeCapture.swift`), unless an app's own trigger on a synced table must see those writes.
@Suite("History of the merge's writes, with and without triggers")
struct MergeCaptureTests {
    /// An app's own trigger on a synced table: it keeps the merge's writes going through triggers.
    static let auditTrigger = """
        CREATE TABLE audit(id INTEGER PRIMARY KEY, note TEXT);
        CREATE TRIGGER audit_note AFTER INSERT ON Note BEGIN INSERT INTO audit(note) VALUES (NEW.id); END;
        """

    /// Everything the merge leaves behind that the two ways of recording must agree on: history as
    /// contexts read it (each transaction's changes, changed columns and tombstones; not its token, since
    /// packed inserts take fewer log rows), the synced rows, and the row states wherever they are kept.
    static func footprint(_ store: Store) throws -> (history: [HistoryTransaction], tables: [String: [[DatabaseValue]]]) {
        let history = try store.history(limit: 100_000).map { transaction in
            var transaction = transaction
            transaction.token = .zero
            return transaction
        }
        return (history, [
            "Owner": try store.read("SELECT * FROM Owner ORDER BY id"),
            "Folder": try store.read("SELECT * FROM Folder ORDER BY id"),
            "Label": try store.read("SELECT * FROM Label ORDER BY id"),
            "Note": try store.read("SELECT * FROM Note ORDER BY id"),
            "states": try store.read("SELECT entity, pk, cl, state FROM _ls_row ORDER BY entity, pk"),
            "live": try store.read("SELECT id, pk, cl, state FROM _ls_live ORDER BY id"),
            "references": try store.read("SELECT * FROM _ls_ref ORDER BY 1, 2, 3, 4"),
            "aliases": try store.read("SELECT * FROM _ls_alias ORDER BY 1, 2"),
        ])
    }

    /// Random local writes of every kind on the fixture schema: inserts (with blobs), updates, and deletes
    /// that cascade, nullify or hit unique keys.
    static func randomWrites(_ store: Store, count: Int, using rng: inout SeededRandom) throws {
        for _ in 0..<count {
            let folders = try store.read("SELECT id FROM Folder").map { $0[0] }
            let labels = try store.read("SELECT id FROM Label").map { $0[0] }
            let notes = try store.read("SELECT id FROM Note").map { $0[0] }
            let owners = try store.read("SELECT id FROM Owner").map { $0[0] }
            let choice = Int.random(in: 0..<10, using: &rng)
            let rank = DatabaseValue.integer(Int64.random(in: 0..<5, using: &rng))
            let name = DatabaseValue.text("n\(Int.random(in: 0..<3, using: &rng))")
            try store.write(author: "test") { tx in
                switch choice {
                case 0: try tx.insert("Folder", ["id": Fixtures.id(), "name": name])
                case 1:
                    if try tx.rows("SELECT 1 FROM Label WHERE name = ?", [name]).isEmpty { try tx.insert("Label", ["id": Fixtures.id(), "name": name]) }
                case 2:
                    // An insert followed by a delete and an update in one transaction: history keeps their order.
                    try tx.insert("Owner", ["id": Fixtures.id(), "name": name])
                    if let owner = owners.randomElement(using: &rng) { _ = try tx.delete("Owner", key: owner) }
                    if let note = notes.randomElement(using: &rng) { _ = try tx.update("Note", key: note, ["rank": rank]) }
                case 3, 4:
                    try tx.insert(
                        "Note",
                        ["id": Fixtures.id(), "title": name, "rank": rank, "data": .blob([0, 1, UInt8.random(in: 0...255, using: &rng)]),
                         "folder": folders.randomElement(using: &rng) ?? .null, "label": labels.randomElement(using: &rng) ?? .null])
                case 5, 6:
                    if let note = notes.randomElement(using: &rng) { _ = try tx.update("Note", key: note, ["rank": rank, "body": name]) }
                case 7:
                    if let note = notes.randomElement(using: &rng) { _ = try tx.delete("Note", key: note) }
                case 8:
                    if let folder = folders.randomElement(using: &rng) { _ = try tx.delete("Folder", key: folder) }
                default:
                    if let label = labels.randomElement(using: &rng) { _ = try tx.delete("Label", key: label) }
                }
            }
        }
    }

    /// Exports `source`'s new history and applies it to each of `targets`.
    static func importAll(from source: Store, into targets: [Store]) throws {
        _ = try source.sync.exportToOutbox(account: "default", maximumChanges: 5)
        for segment in try source.sync.unpublishedSegments() {
            var decoder = try SegmentDecoder(bytes: segment.bytes)
            var transactions: [LogTransaction] = []
            while let transaction = try decoder.next() { transactions.append(transaction) }
            for target in targets {
                let outcome = try target.sync.importSegment(
                    header: decoder.header, transactions: transactions, checksum: segment.firstSequence, account: "default")
                #expect(outcome == .applied(transactions: transactions.count))
            }
            try source.sync.markPublished(firstSequence: segment.firstSequence)
        }
    }

    @Test("an import records the same history, rows and states with triggers off as through the capture triggers", arguments: [UInt64(1), 2, 3])
    func sameFootprint(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let directory = try TemporaryDirectory("capture")
        let sources = try ["a", "b"].map { try Store(path: directory.file("\($0).sqlite"), schema: Fixtures.schema) }
        let direct = try Store(path: directory.file("direct.sqlite"), schema: Fixtures.schema)
        let triggered = try Store(path: directory.file("triggered.sqlite"), schema: Fixtures.schema)
        try Connection(path: triggered.path).execute(Self.auditTrigger)
        // In rounds, so that later rounds update and delete rows the targets already hold.
        for _ in 0..<8 {
            for source in sources {
                try Self.randomWrites(source, count: 6, using: &rng)
                try Self.importAll(from: source, into: [direct, triggered])
            }
        }

        let expected = try Self.footprint(triggered)
        let found = try Self.footprint(direct)
        #expect(found.history == expected.history, "seed \(seed): history differs")
        for (part, rows) in expected.tables {
            #expect(found.tables[part] == rows, "seed \(seed): \(part) differs")
        }
        let changes = try triggered.history(limit: 100_000).flatMap(\.changes)
        #expect(Set(changes.map(\.kind)) == [.insert, .update, .delete], "seed \(seed): the import inserted, updated and deleted rows")
        #expect(changes.contains { $0.kind == .delete && $0.tombstone?.isEmpty == false }, "seed \(seed): a delete carried a tombstone")
        // Both ways were taken: the capture triggers wrote one row per insert, the merge packed them.
        #expect(try triggered.read("SELECT count(*) FROM _ls_log WHERE kind = 4") == [[.integer(0)]])
        #expect(try direct.read("SELECT count(*) FROM _ls_log WHERE kind = 1") == [[.integer(0)]])
        #expect(try direct.read("SELECT count(*) FROM _ls_log WHERE kind = 4") != [[.integer(0)]])
    }

    @Test("an app's own trigger on a synced table sees every row an import inserts")
    func foreignTriggerSeesImports() throws {
        var rng = SeededRandom(seed: 7)
        let directory = try TemporaryDirectory("capture")
        let source = try Store(path: directory.file("source.sqlite"), schema: Fixtures.schema)
        try Self.randomWrites(source, count: 30, using: &rng)
        let target = try Store(path: directory.file("target.sqlite"), schema: Fixtures.schema)
        try Connection(path: target.path).execute(Self.auditTrigger)
        try Self.importAll(from: source, into: [target])

        let inserted = try target.read(
            "SELECT count(*) FROM _ls_log WHERE kind = 1 AND entity = (SELECT id FROM _ls_entity WHERE name = 'Note')")
        #expect(inserted != [[.integer(0)]])
        #expect(try target.read("SELECT count(*) FROM audit") == inserted)
    }

    /// Raw SQL: the helpers record their history without triggers (`LocalCaptureTests`), what they would
    /// not show here.
    @Test("raw SQL after an import, and after an import that failed, is captured by the triggers again")
    func triggersComeBack() throws {
        let directory = try TemporaryDirectory("capture")
        let source = try Store(path: directory.file("source.sqlite"), schema: Fixtures.schema)
        _ = try source.write { tx in
            for index in 0..<3 { try tx.insert("Owner", ["id": Fixtures.id(), "name": .text("o\(index)")]) }
        }
        let target = try Store(path: directory.file("target.sqlite"), schema: Fixtures.schema)
        try Self.importAll(from: source, into: [target])
        let ownerEntity = try target.read("SELECT id FROM _ls_entity WHERE name = 'Owner'")[0][0]

        func expectCaptured(_ key: DatabaseValue, _ when: String) throws {
            #expect(try target.read("SELECT kind FROM _ls_log WHERE pk = ? AND entity = ?", [key, ownerEntity]) == [[.integer(1)]], "\(when)")
        }
        let first = Fixtures.id()
        _ = try target.write { tx in try tx.execute("INSERT INTO Owner(id, name) VALUES (?, 'local')", [first]) }
        try expectCaptured(first, "after an import")

        // An import that fails after it has merged a transaction: the batch rolls back.
        struct Interrupted: Error {}
        let origin = NodeID(UUID().uuidString.lowercased())
        let transaction = LogTransaction(
            sequence: 1, timestamp: HLCTimestamp(rawValue: 10 << 20), author: "remote", contextName: nil,
            changes: [LogChange(entity: "Owner", primaryKey: Fixtures.id(), kind: .insert, causalLength: 1, values: ["name": .text("r")])])
        var handed = 0
        #expect(throws: Interrupted.self) {
            try target.sync.importSegments(
                from: origin, account: "default",
                next: { _ in
                    handed += 1
                    if handed > 1 { throw Interrupted() }
                    return SegmentImport(header: .covering([transaction], from: origin), transactions: [transaction], checksum: 1)
                },
                outcome: { _, _ in })
        }
        #expect(try target.sync.appliedSequence(from: origin) == 0)
        let second = Fixtures.id()
        _ = try target.write { tx in try tx.execute("INSERT INTO Owner(id, name) VALUES (?, 'local')", [second]) }
        try expectCaptured(second, "after a failed import")
        // A foreign writer's insert, sealed by the next write: also captured.
        let third = Fixtures.id()
        try Connection(path: target.path).execute("INSERT INTO Owner(id, name) VALUES (?, 'foreign')", [third])
        try expectCaptured(third, "from another connection")
    }
}
