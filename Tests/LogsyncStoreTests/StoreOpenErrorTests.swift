import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncPlatform
import LogsyncTestKit
import Testing

/// Bad input at open: each gives an error that says what and where, and nothing is half-created.
@Suite("Opening a store with bad input")
struct StoreOpenErrorTests {
    private func filesIn(_ directory: TemporaryDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    @Test("a schema without a usable primary key is refused before any file exists")
    func unusablePrimaryKey() throws {
        let directory = try TemporaryDirectory("bad")
        let integerKey = Schema(version: 1, entities: [Entity("Item", primaryKey: PrimaryKey("id", .integer))])
        let error = try #require(throws: StoreError.self) { try Store(path: directory.file("s.sqlite"), schema: integerKey) }
        #expect(error.code == .schema)
        #expect(error.description.contains("Item.id"))
        #expect(error.description.contains("collide"))

        let noKey = Schema(version: 1, entities: [Entity("Item", primaryKey: nil)])
        let missing = try #require(throws: StoreError.self) { try Store(path: directory.file("s.sqlite"), schema: noKey) }
        #expect(missing.description.contains("has no primary key"))
        #expect(try filesIn(directory).isEmpty)
    }

    @Test("an unknown column type in a JSON schema names the entity and attribute")
    func unknownColumnType() throws {
        let json = #"{"version": 1, "entities": [{"name": "Item", "primaryKey": {"name": "id", "type": "uuid"}, "attributes": [{"name": "price", "type": "money"}]}]}"#
        let error = try #require(throws: SchemaError.self) { try Schema(json: Data(json.utf8)) }
        #expect(error.code == .unknownType)
        #expect(error.location == "Item.price")
        #expect(error.description.contains("unknown column type 'money'"))
    }

    @Test("the logsync tool reports a bad schema file with a distinct exit code and creates nothing")
    func toolReportsBadSchema() async throws {
        let directory = try TemporaryDirectory("bad")
        let schema = try directory.write("schema.json", #"{"version": 1, "entities": [{"name": "Item", "primaryKey": {"name": "id", "type": "integer"}}]}"#)
        let result = try await Subprocess.run(Products.path("logsync"), ["history", "--store", directory.file("s.sqlite"), "--schema", schema])
        #expect(result.status == ExitStatus.dataError)
        #expect(result.stderr.contains("Item.id"))
        #expect(try filesIn(directory) == ["schema.json"])
    }

    @Test("a store path in a missing directory says which directory")
    func missingDirectory() throws {
        let directory = try TemporaryDirectory("bad")
        let path = directory.file("nowhere/deeper/s.sqlite")
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: Fixtures.schema) }
        #expect(error.code == .directoryMissing)
        #expect(error.description.contains(directory.file("nowhere/deeper")))
        #expect(try filesIn(directory).isEmpty)
    }

    /// Root ignores directory permissions, so the open runs as `nobody` through setpriv(1).
    @Test("a store path in a read-only directory says the directory is not writable")
    func readOnlyDirectory() async throws {
        let directory = try TemporaryDirectory("bad")
        let readOnly = directory.file("ro")
        try FileManager.default.createDirectory(atPath: readOnly, withIntermediateDirectories: false)
        let schema = try directory.write("schema.json", Fixtures.schemaJSON)
        try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: readOnly)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: schema)
        let arguments = ["history", "--store", readOnly + "/s.sqlite", "--schema", schema]
        let result: (status: Int32, stdout: String, stderr: String)
        if geteuid() == 0 {
            result = try await Subprocess.run(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", Products.path("logsync")] + arguments)
        } else {
            result = try await Subprocess.run(Products.path("logsync"), arguments)
        }
        #expect(result.status == ExitStatus.cannotCreate, "\(result.stderr)")
        #expect(result.stderr.contains("\(readOnly) is not writable"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: readOnly).isEmpty)
    }

    @Test("a file that is not a database is reported and left untouched")
    func notADatabase() throws {
        let directory = try TemporaryDirectory("bad")
        let path = directory.file("s.sqlite")
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try garbage.write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: Fixtures.schema) }
        #expect(error.code == .notADatabase)
        #expect(error.description.contains(path))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage)
        #expect(try filesIn(directory) == ["s.sqlite"])
    }

    @Test("a file with a SQLite header but corrupt contents is reported and left untouched")
    func corruptDatabase() throws {
        let directory = try TemporaryDirectory("bad")
        let path = directory.file("s.sqlite")
        var bytes = Data("SQLite format 3\0".utf8)
        bytes.append(Data((0..<8176).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }))
        try bytes.write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: StoreError.self) { try Store(path: path, schema: Fixtures.schema) }
        #expect(error.code == .notADatabase)
        #expect(error.description.contains("corrupt"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }
}
