import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

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
        let result = try await Subprocess.run(sqliteShell, [path, "CREATE TABLE Item(id INTEGER PRIMARY KEY, name TEXT)"])
        #expect(result.status == 0)
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: Self.v1) }
        #expect(error.description.contains("not managed by logsync"))
    }
}
