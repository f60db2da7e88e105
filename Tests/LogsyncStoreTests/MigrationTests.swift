import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing
import LogsyncSQLite

@Suite("Schema registration and additive migration")
struct MigrationTests {
    static let v1 = Schema(version: 1, entities: [Entity("Item", attributes: [Attribute("name", .text)])])

    @Test("a new attribute is added, existing rows keep their data, and history captures the new column")
    func additiveMigration() throws {
        let directory = try TemporaryDirectory("mig")
        let path = directory.file("s.sqlite")
        let item = Fixtures.id()
        do {
            let store = try Store(path: path, schema: Self.v1)
            try store.write { tx in try tx.insert("Item", ["id": item, "name": "old"]) }
        }
        let v2 = Schema(version: 2, entities: [
            Entity("Item", attributes: [Attribute("name", .text), Attribute("price", .real, optional: false, default: 0.0)]),
            Entity("Tag", attributes: [Attribute("label", .text)]),
        ])
        let store = try Store(path: path, schema: v2)
        #expect(try store.read("SELECT name, price FROM Item") == [[.text("old"), .real(0)]])
        #expect(try store.read("SELECT value FROM _ls_meta WHERE key = 'schema_version'") == [[.integer(2)]])
        let before = try store.currentToken()
        try store.write { tx in
            try tx.update("Item", key: item, ["price": 9.5])
            try tx.insert("Tag", ["id": Fixtures.id(), "label": "new"])
        }
        let changes = try #require(try store.history(after: before).first).changes
        #expect(changes.map(\.changedColumns) == [["price"], ["label"]])
    }

    @Test("removing an attribute is refused and the store is unchanged")
    func removalRefused() throws {
        let directory = try TemporaryDirectory("mig")
        let path = directory.file("s.sqlite")
        _ = try Store(path: path, schema: Self.v1)
        let v2 = Schema(version: 2, entities: [Entity("Item", attributes: [])])
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: v2) }
        #expect(error.code == .schema)
        #expect(error.description.contains("'name' of 'Item' was removed"))
        let reopened = try Store(path: path, schema: Self.v1)
        #expect(try reopened.read("SELECT value FROM _ls_meta WHERE key = 'schema_version'") == [[.integer(1)]])
    }

    @Test("the same version with a different definition, or an older version, is refused")
    func versionConflicts() throws {
        let directory = try TemporaryDirectory("mig")
        let path = directory.file("s.sqlite")
        _ = try Store(path: path, schema: Self.v1)
        let changed = Schema(version: 1, entities: [Entity("Item", attributes: [Attribute("name", .text), Attribute("x", .integer)])])
        let same = try #require(throws: StoreError.self) { try Store(path: path, schema: changed) }
        #expect(same.description.contains("bump the version"))

        let v3 = Schema(version: 3, entities: Self.v1.entities)
        _ = try Store(path: path, schema: v3)
        let older = try #require(throws: StoreError.self) { try Store(path: path, schema: Self.v1) }
        #expect(older.description.contains("newer than the declared version 1"))
    }

    @Test("a required attribute without a default cannot be added to existing rows")
    func requiredWithoutDefault() throws {
        let directory = try TemporaryDirectory("mig")
        let path = directory.file("s.sqlite")
        _ = try Store(path: path, schema: Self.v1)
        let v2 = Schema(version: 2, entities: [Entity("Item", attributes: [Attribute("name", .text), Attribute("n", .integer, optional: false)])])
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: v2) }
        #expect(error.description.contains("needs a default value"))
    }

    @Test("an existing table that logsync does not manage is not taken over")
    func foreignTableRefused() async throws {
        let directory = try TemporaryDirectory("mig")
        let path = directory.file("s.sqlite")
        let result = try await runSQLiteShell(on: path, "CREATE TABLE Item(id INTEGER PRIMARY KEY, name TEXT)")
        #expect(result.status == 0)
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: Self.v1) }
        #expect(error.description.contains("not managed by logsync"))
    }

    /// One remote transaction of `changes`, from `origin`, as segment `sequence` (a segment of its own).
    static func importTransaction(_ store: Store, from origin: NodeID, sequence: UInt64, at time: UInt64, _ changes: [LogChange]) throws {
        let transaction = LogTransaction(
            sequence: sequence, timestamp: HLCTimestamp(rawValue: time << 20), author: "remote", contextName: nil, changes: changes)
        let header = SegmentHeader.covering([transaction], from: origin)
        #expect(try store.sync.importSegment(header: header, transactions: [transaction], checksum: sequence, account: "default") == .applied(transactions: 1))
    }

    @Test("a format-1 store, row states keyed by (entity, pk), is migrated on open with every state kept")
    func rowStatesMigrateToRowidTable() throws {
        let directory = try TemporaryDirectory("mig")
        let path = directory.file("s.sqlite")
        let origin = NodeID(UUID().uuidString.lowercased())
        let keys = (0..<3).map { _ in Fixtures.id() }
        do {
            let store = try Store(path: path, schema: Self.v1)
            try Self.importTransaction(
                store, from: origin, sequence: 1, at: 10,
                keys.map { LogChange(entity: "Item", primaryKey: $0, kind: .insert, causalLength: 1, values: ["name": .text("v1")]) })
        }
        // Put the store back in format 1: the same states in a table clustered on (entity, pk), no
        // `_ls_live`, a delete trigger that does not know it, and no displacement triggers (format 4).
        let states: [[DatabaseValue]]
        do {
            let connection = try Connection(path: path)
            let all = "SELECT entity, pk, cl, state FROM _ls_row UNION ALL SELECT id >> 40, pk, cl, state FROM _ls_live"
            states = try connection.rows("\(all) ORDER BY entity, pk")
            try connection.execute(
                """
                DROP TRIGGER _ls_t1_delete;
                DROP TRIGGER _ls_t1_rowid;
                DROP TRIGGER _ls_t1_displace_insert;
                DROP TRIGGER _ls_t1_displace_update;
                DROP TRIGGER _ls_t1_displaced_insert;
                DROP TRIGGER _ls_t1_displaced_update;
                DROP TRIGGER _ls_t1_job;
                CREATE TABLE _ls_row_old(
                    entity INTEGER NOT NULL, pk NOT NULL, cl INTEGER NOT NULL, state BLOB NOT NULL, PRIMARY KEY (entity, pk)
                ) WITHOUT ROWID;
                INSERT INTO _ls_row_old \(all);
                DROP TABLE _ls_row;
                DROP TABLE _ls_live;
                ALTER TABLE _ls_row_old RENAME TO _ls_row;
                UPDATE _ls_meta SET value = 1 WHERE key = 'format';
                """)
        }
        #expect(states.count == 3)

        let store = try Store(path: path, schema: Self.v1)
        #expect(try store.read("SELECT value FROM _ls_meta WHERE key = 'format'") == [[.integer(SchemaSQL.formatVersion)]])
        #expect(try store.read("SELECT count(*) FROM sqlite_master WHERE name = '_ls_t1_delete' AND sql LIKE '%_ls_live%'") == [[.integer(1)]])
        #expect(try store.read("SELECT name FROM pragma_table_info('_ls_row') ORDER BY cid").first == [.text("id")])
        #expect(try store.read("SELECT count(*) FROM sqlite_master WHERE name = '_ls_row_key'") == [[.integer(1)]])
        #expect(try store.read("SELECT entity, pk, cl, state FROM _ls_row ORDER BY entity, pk") == states)

        // The merge finds the migrated states: an older write loses to them, a newer one wins.
        try Self.importTransaction(
            store, from: origin, sequence: 2, at: 5,
            [LogChange(entity: "Item", primaryKey: keys[0], kind: .update, causalLength: 1, values: ["name": .text("older")])])
        try Self.importTransaction(
            store, from: origin, sequence: 3, at: 20,
            [LogChange(entity: "Item", primaryKey: keys[1], kind: .update, causalLength: 1, values: ["name": .text("newer")])])
        #expect(try store.read("SELECT name FROM Item WHERE id = ?", [keys[0]]) == [[.text("v1")]])
        #expect(try store.read("SELECT name FROM Item WHERE id = ?", [keys[1]]) == [[.text("newer")]])
        #expect(try store.read("SELECT count(*) FROM _ls_row") == [[.integer(3)]])
    }

    @Test("a store of a newer format is refused and left as it is")
    func newerFormatRefused() throws {
        let directory = try TemporaryDirectory("mig")
        let path = directory.file("s.sqlite")
        _ = try Store(path: path, schema: Self.v1)
        try Connection(path: path).execute("UPDATE _ls_meta SET value = \(SchemaSQL.formatVersion + 1) WHERE key = 'format'")
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: Self.v1) }
        #expect(error.code == .incompatibleFormat)
        #expect(try Connection(path: path).int64("SELECT value FROM _ls_meta WHERE key = 'format'") == SchemaSQL.formatVersion + 1)
    }
}
