import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// A writer killed with SIGKILL in the middle of a transaction leaves neither partial data nor partial
/// history, and the store stays writable.
@Suite("Crash safety")
struct CrashTests {
    @Test("a logsync writer killed mid-transaction leaves nothing behind")
    func libraryWriterKilled() async throws {
        let directory = try TemporaryDirectory("crash")
        let (store, schemaFile) = try Fixtures.store(in: directory)
        try store.write(author: "before") { tx in try tx.insert("Note", ["id": Fixtures.id(), "title": "kept"]) }
        let token = try store.currentToken()

        var statements: [String] = []
        for i in 0..<200 { statements.append("INSERT INTO Note(id, title, rank) VALUES ('\(Fixtures.idText())', 'lost', \(i))") }
        let writer = try Subprocess(Products.path("logsync"), ["hold", "--store", store.path, "--schema", schemaFile] + statements)
        _ = try await writer.line(startingWith: "holding")
        try await writer.kill9()

        #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(1)]])
        #expect(try store.currentToken() == token)
        #expect(try store.history().map(\.author) == ["before"])
        try store.write(author: "after") { tx in try tx.insert("Note", ["id": Fixtures.id()]) }
        #expect(try store.history().map(\.author) == ["before", "after"])
    }

    @Test("a sqlite3 shell killed inside an open transaction leaves nothing behind")
    func shellWriterKilled() async throws {
        let directory = try TemporaryDirectory("crash")
        let (store, _) = try Fixtures.store(in: directory)
        let shell = try Subprocess(sqliteShell, [store.path])
        try shell.send("BEGIN;\n")
        for _ in 0..<50 { try shell.send("INSERT INTO Note(id, title) VALUES ('\(Fixtures.idText())', 'lost');\n") }
        try shell.send("SELECT 'inside';\n")
        _ = try await shell.line(startingWith: "inside")
        try await shell.kill9()

        #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(0)]])
        #expect(try store.history().isEmpty)
        #expect(try store.read("SELECT count(*) FROM _ls_log") == [[.integer(0)]])
        try store.write { tx in try tx.insert("Note", ["id": Fixtures.id()]) }
        #expect(try store.history().count == 1)
    }
}
