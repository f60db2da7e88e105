import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing
import LogsyncSQLite

/// Row states of imported rows kept by the row's rowid (`_ls_live`), and their moves to `_ls_row`.
@Suite("Row states stored by rowid")
struct LiveStateTests {
    static let schema = MigrationTests.v1

    static func insert(_ key: DatabaseValue, _ name: String) -> LogChange {
        LogChange(entity: "Item", primaryKey: key, kind: .insert, causalLength: 1, values: ["name": .text(name)])
    }

    static func count(_ store: Store, _ table: String) throws -> Int64? {
        guard case .integer(let count)? = try store.read("SELECT count(*) FROM \(table)").first?.first else { return nil }
        return count
    }

    static func causalLength(_ store: Store, _ key: DatabaseValue) throws -> [[DatabaseValue]] {
        try store.read("SELECT cl FROM _ls_row WHERE pk = ? UNION ALL SELECT cl FROM _ls_live WHERE pk = ?", [key, key])
    }

    @Test("an imported row's state is found by its rowid, is replaced there when the row changes, and moves to _ls_row when the row leaves the table")
    func statesMove() throws {
        let directory = try TemporaryDirectory("live")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let origin = NodeID(UUID().uuidString.lowercased())
        let keys = (0..<4).map { _ in Fixtures.id() }
        try MigrationTests.importTransaction(store, from: origin, sequence: 1, at: 10, keys.map { Self.insert($0, "v1") })
        #expect(try Self.count(store, "_ls_live") == 4)
        #expect(try Self.count(store, "_ls_row") == 0)
        #expect(try store.read("SELECT count(*) FROM _ls_live l JOIN Item i ON l.id = (1 << 40) + i.rowid AND i.id = l.pk") == [[.integer(4)]])

        // A remote update: the state changes where it is, found by the row's rowid.
        let before = try store.read("SELECT state FROM _ls_live WHERE pk = ?", [keys[0]])
        try MigrationTests.importTransaction(
            store, from: origin, sequence: 2, at: 20,
            [LogChange(entity: "Item", primaryKey: keys[0], kind: .update, causalLength: 1, values: ["name": .text("newer")])])
        #expect(try store.read("SELECT name FROM Item WHERE id = ?", [keys[0]]) == [[.text("newer")]])
        #expect(try Self.count(store, "_ls_row") == 0)
        #expect(try Self.count(store, "_ls_live") == 4)
        #expect(try store.read("SELECT state FROM _ls_live WHERE pk = ?", [keys[0]]) != before)
        // A local update of it: the fold replaces it there too, and ships the row's causal length.
        _ = try store.write { tx in try tx.update("Item", key: keys[0], ["name": .text("local")]) }
        #expect(try store.sync.exportToOutbox(account: "default") == 1)
        #expect(try Self.count(store, "_ls_row") == 0)
        #expect(try Self.causalLength(store, keys[0]) == [[.integer(1)]])

        // A local delete, through the store and from another program: the delete trigger moves the state,
        // so the fold finds it and ships causal length 2.
        _ = try store.write { tx in try tx.delete("Item", key: keys[1]) }
        try Connection(path: store.path).execute("DELETE FROM Item WHERE id = ?", [keys[2]])
        #expect(try Self.count(store, "_ls_live") == 2)
        #expect(try store.sync.exportToOutbox(account: "default") == 1)  // one segment, two transactions
        #expect(try Self.causalLength(store, keys[1]) == [[.integer(2)]])
        #expect(try Self.causalLength(store, keys[2]) == [[.integer(2)]])

        // A remote delete of the last one.
        try MigrationTests.importTransaction(
            store, from: origin, sequence: 3, at: 30,
            [LogChange(entity: "Item", primaryKey: keys[3], kind: .delete, causalLength: 2, values: [:])])
        #expect(try Self.count(store, "_ls_live") == 1)
        #expect(try Self.count(store, "_ls_row") == 3)
        #expect(try store.read("SELECT id FROM Item") == [[keys[0]]])
        #expect(try store.read("SELECT pk FROM _ls_live") == [[keys[0]]])
    }

    @Test("the same key inserted by two nodes merges with the state stored by rowid, in either order")
    func sameKeyTwice() throws {
        let directory = try TemporaryDirectory("live")
        let (a, b) = (NodeID(UUID().uuidString.lowercased()), NodeID(UUID().uuidString.lowercased()))
        let key = Fixtures.id()
        var results: [[[DatabaseValue]]] = []
        for (index, order) in [[(a, UInt64(10), "a"), (b, 20, "b")], [(b, 20, "b"), (a, 10, "a")]].enumerated() {
            let store = try Store(path: directory.file("s\(index).sqlite"), schema: Self.schema)
            for (origin, time, name) in order {
                try MigrationTests.importTransaction(store, from: origin, sequence: 1, at: time, [Self.insert(key, name)])
            }
            // The later insert, arriving second, changes the state, the earlier one changes nothing: either
            // way the state stays in `_ls_live`, where the first insert put it.
            #expect(try Self.count(store, "_ls_live") == 1)
            #expect(try Self.count(store, "_ls_row") == 0)
            #expect(try Self.causalLength(store, key) == [[.integer(1)]])
            results.append(try store.read("SELECT id, name FROM Item"))
        }
        #expect(results[0] == [[key, .text("b")]])
        #expect(results[1] == results[0])
    }

    @Test("a remote transaction that inserts a key another node inserted before, then deletes it, deletes the row")
    func sameKeyInsertedThenDeleted() throws {
        let directory = try TemporaryDirectory("live")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let (a, b) = (NodeID(UUID().uuidString.lowercased()), NodeID(UUID().uuidString.lowercased()))
        let key = Fixtures.id()
        try MigrationTests.importTransaction(store, from: a, sequence: 1, at: 10, [Self.insert(key, "a")])
        #expect(try Self.count(store, "_ls_live") == 1)
        try MigrationTests.importTransaction(
            store, from: b, sequence: 1, at: 20,
            [Self.insert(key, "b"), LogChange(entity: "Item", primaryKey: key, kind: .delete, causalLength: 2, values: [:])])
        #expect(try store.read("SELECT id FROM Item") == [])
        #expect(try Self.count(store, "_ls_live") == 0)
        #expect(try Self.causalLength(store, key) == [[.integer(2)]])
    }

    @Test("a state in both _ls_live and _ls_row is merged by the next remote change, and a delete leaves the merged state in _ls_row")
    func stateInBothPlaces() throws {
        let directory = try TemporaryDirectory("live")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let origin = NodeID(UUID().uuidString.lowercased())
        let key = Fixtures.id()
        try MigrationTests.importTransaction(store, from: origin, sequence: 1, at: 10, [Self.insert(key, "v1")])
        // A copy of the state, older than what follows, planted in `_ls_row` as well.
        try Connection(path: store.path).execute("INSERT INTO _ls_row(entity, pk, cl, state) SELECT id >> 40, pk, cl, state FROM _ls_live WHERE pk = ?", [key])
        #expect(try Self.causalLength(store, key) == [[.integer(1)], [.integer(1)]])

        try MigrationTests.importTransaction(
            store, from: origin, sequence: 2, at: 20,
            [LogChange(entity: "Item", primaryKey: key, kind: .update, causalLength: 1, values: ["name": .text("newer")])])
        #expect(try store.read("SELECT name FROM Item WHERE id = ?", [key]) == [[.text("newer")]])

        // The delete's state replaces the stale copy: the row stays deleted, and an update older than the
        // delete does not bring it back.
        try MigrationTests.importTransaction(
            store, from: origin, sequence: 3, at: 30, [LogChange(entity: "Item", primaryKey: key, kind: .delete, causalLength: 2, values: [:])])
        #expect(try store.read("SELECT id FROM Item") == [])
        #expect(try Self.causalLength(store, key) == [[.integer(2)]])
        try MigrationTests.importTransaction(
            store, from: NodeID(UUID().uuidString.lowercased()), sequence: 1, at: 25,
            [LogChange(entity: "Item", primaryKey: key, kind: .update, causalLength: 1, values: ["name": .text("late")])])
        #expect(try store.read("SELECT id FROM Item") == [])
    }

    @Test("a row of an entity with no attributes is found, deleted and inserted again by remote changes")
    func entityWithoutAttributes() throws {
        let directory = try TemporaryDirectory("live")
        let store = try Store(path: directory.file("s.sqlite"), schema: Schema(version: 1, entities: [Entity("Tag", attributes: [])]))
        let origin = NodeID(UUID().uuidString.lowercased())
        let key = Fixtures.id()
        func change(_ kind: ChangeKind, _ causalLength: UInt64) -> LogChange {
            LogChange(entity: "Tag", primaryKey: key, kind: kind, causalLength: causalLength, values: [:])
        }
        try MigrationTests.importTransaction(store, from: origin, sequence: 1, at: 10, [change(.insert, 1)])
        #expect(try store.read("SELECT id FROM Tag") == [[key]])
        try MigrationTests.importTransaction(store, from: origin, sequence: 2, at: 20, [change(.delete, 2)])
        #expect(try store.read("SELECT id FROM Tag") == [])
        try MigrationTests.importTransaction(store, from: origin, sequence: 3, at: 30, [change(.insert, 3)])
        #expect(try store.read("SELECT id FROM Tag") == [[key]])
        #expect(try Self.causalLength(store, key) == [[.integer(3)]])
    }

    @Test("states whose rowid changed behind logsync's back move to _ls_row, with their clocks")
    func orphansRehomed() throws {
        let directory = try TemporaryDirectory("live")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let origin = NodeID(UUID().uuidString.lowercased())
        let (moved, replaced, kept) = (Fixtures.id(), Fixtures.id(), Fixtures.id())
        try MigrationTests.importTransaction(
            store, from: origin, sequence: 1, at: 10, [Self.insert(moved, "v1"), Self.insert(replaced, "v1"), Self.insert(kept, "v1")])

        // Another program replaces a row (without recursive triggers: the displacement triggers move its
        // state as its delete would). A row is renumbered with no trigger running, as `VACUUM` may do, which
        // leaves its state an orphan; the program then vacuums, which changes the schema cookie.
        let foreign = try Connection(path: store.path)
        try foreign.execute("INSERT OR REPLACE INTO Item(id, name) VALUES (?, 'replaced')", [replaced])
        try foreign.setTriggersEnabled(false)
        try foreign.execute("UPDATE Item SET rowid = rowid + 100 WHERE id = ?", [moved])
        try foreign.setTriggersEnabled(true)
        try foreign.execute("VACUUM")
        #expect(try Self.count(store, "_ls_live") == 2)

        // The next sync transaction moves the orphan; both states are in _ls_row before the fold.
        #expect(try store.sync.exportToOutbox(account: "default") == 1)
        #expect(try store.read("SELECT pk FROM _ls_live") == [[kept]])
        #expect(try store.read("SELECT count(*) FROM _ls_row WHERE pk IN (?, ?)", [moved, replaced]) == [[.integer(2)]])

        // The moved state kept its clocks: an older remote write still loses to it.
        try MigrationTests.importTransaction(
            store, from: origin, sequence: 2, at: 5,
            [LogChange(entity: "Item", primaryKey: moved, kind: .update, causalLength: 1, values: ["name": .text("older")])])
        #expect(try store.read("SELECT name FROM Item WHERE id = ?", [moved]) == [[.text("v1")]])
        #expect(try store.read("SELECT name FROM Item WHERE id = ?", [replaced]) == [[.text("replaced")]])
        // The replacement is a delete and an insert, as with recursive triggers on: a new life of the row.
        #expect(try Self.causalLength(store, replaced) == [[.integer(3)]])
    }
}
