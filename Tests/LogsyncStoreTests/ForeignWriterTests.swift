import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// Writes by processes that do not use logsync: the `sqlite3` shell and Python's sqlite3 module.
@Suite("History capture of foreign writers")
struct ForeignWriterTests {
    @Test("a multi-statement sqlite3 shell transaction appears as one whole history transaction without author")
    func shellTransactionIsWhole() async throws {
        let directory = try TemporaryDirectory("fw")
        let (store, _) = try Fixtures.store(in: directory)
        let (a, b) = (Fixtures.idText(), Fixtures.idText())
        let script = """
            BEGIN;
            INSERT INTO Note(id, title) VALUES ('\(a)', 'from shell');
            INSERT INTO Note(id, title) VALUES ('\(b)', 'second');
            UPDATE Note SET body = 'edited' WHERE id = '\(a)';
            DELETE FROM Note WHERE id = '\(b)';
            COMMIT;
            """
        let result = try await runSQLiteShell(on: store.path, script)
        #expect(result.status == 0, "\(result.stderr)")

        let history = try store.history()
        #expect(history.count == 1)
        let transaction = try #require(history.first)
        #expect(transaction.author == nil)
        #expect(transaction.contextName == nil)
        #expect(transaction.origin == .local)
        #expect(transaction.changes.map(\.kind) == [.insert, .insert, .update, .delete])
        #expect(transaction.changes.map(\.primaryKey) == [.text(a), .text(b), .text(a), .text(b)])
        #expect(transaction.changes[2].changedColumns == ["body"])
        #expect(transaction.changes[3].tombstone == ["title": "second", "data": .null])
    }

    @Test("foreign and library transactions keep their commit order and boundaries")
    func foreignAndLibraryInterleave() async throws {
        let directory = try TemporaryDirectory("fw")
        let (store, _) = try Fixtures.store(in: directory)
        try store.write(author: "lib") { tx in try tx.insert("Note", ["id": Fixtures.id(), "title": "1"]) }
        let first = try await runSQLiteShell(on: store.path, "INSERT INTO Note(id, title) VALUES ('\(Fixtures.idText())', '2')")
        #expect(first.status == 0)
        try store.write(author: "lib") { tx in try tx.insert("Note", ["id": Fixtures.id(), "title": "3"]) }
        let second = try await runSQLiteShell(on: store.path, "INSERT INTO Note(id, title) VALUES ('\(Fixtures.idText())', '4')")
        #expect(second.status == 0)

        let history = try store.history()
        #expect(history.map(\.author) == ["lib", nil, "lib", nil])
        #expect(history.map { $0.changes.count } == [1, 1, 1, 1])
        #expect(history.map(\.token) == history.map(\.token).sorted())
        #expect(history.map(\.timestamp) == history.map(\.timestamp).sorted())
    }

    @Test("a rolled-back foreign transaction leaves no history")
    func rolledBackForeignWrite() async throws {
        let directory = try TemporaryDirectory("fw")
        let (store, _) = try Fixtures.store(in: directory)
        let script = "BEGIN; INSERT INTO Note(id, title) VALUES ('\(Fixtures.idText())', 'x'); ROLLBACK;"
        let result = try await runSQLiteShell(on: store.path, script)
        #expect(result.status == 0)
        #expect(try store.history().isEmpty)
        #expect(try store.currentToken() == .zero)
    }

    @Test("delete rules hold for a foreign writer that never enabled foreign keys")
    func deleteRulesForForeignWriter() async throws {
        let directory = try TemporaryDirectory("fw")
        let (store, _) = try Fixtures.store(in: directory)
        let folder = Fixtures.id()
        try store.write { tx in
            try tx.insert("Folder", ["id": folder, "name": "f"])
            try tx.insert("Note", ["id": Fixtures.id(), "title": "n", "folder": folder])
        }
        guard case .text(let folderID) = folder else { return }
        let result = try await runSQLiteShell(on: store.path, "DELETE FROM Folder WHERE id = '\(folderID)'")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(0)]])
        let last = try #require(try store.history().last)
        #expect(last.author == nil)
        #expect(Set(last.changes.map(\.entity)) == ["Note", "Folder"])
    }

    @Test("Python's sqlite3 module writes are captured as whole transactions")
    func pythonWriterCaptured() async throws {
        // Debian's python3, installed by scripts/install-deps.sh.
        let python = "/usr/bin/python3"
        let directory = try TemporaryDirectory("fw")
        let (store, _) = try Fixtures.store(in: directory)
        let script = """
            import sqlite3, sys, uuid
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("BEGIN")
            for i in range(3):
                db.execute("INSERT INTO Note(id, title, rank) VALUES (?, ?, ?)", (str(uuid.uuid4()), "py", i))
            db.execute("COMMIT")
            """
        let result = try await Subprocess.run(python, ["-c", script, store.path])
        #expect(result.status == 0, "\(result.stderr)")
        let history = try store.history()
        #expect(history.count == 1)
        #expect(history.first?.changes.count == 3)
    }

    @Test("logsync prints text holding a NUL, or bytes that are not UTF-8, as an SQL literal of exactly those bytes")
    func exactOutput() async throws {
        let directory = try TemporaryDirectory("fw")
        let (store, schemaFile) = try Fixtures.store(in: directory)
        // Note.title is preserved on delete, so history shows it in the tombstones.
        let (a, b) = (Fixtures.idText(), Fixtures.idText())
        let script = """
            INSERT INTO Note(id, title) VALUES ('\(a)', 'x' || char(0) || 'y'), ('\(b)', CAST(x'66ff' AS TEXT));
            DELETE FROM Note;
            """
        let result = try await runSQLiteShell(on: store.path, script)
        #expect(result.status == 0, "\(result.stderr)")
        let history = try await Subprocess.run(Products.path("logsync"), ["history", "--store", store.path, "--schema", schemaFile])
        #expect(history.status == 0, "\(history.stderr)")
        #expect(history.stdout.contains("title: CAST(X'780079' AS TEXT)"), "\(history.stdout)")
        #expect(history.stdout.contains("title: CAST(X'66ff' AS TEXT)"), "\(history.stdout)")
        let tombstones = try store.history().last?.changes.compactMap { $0.tombstone?["title"] }
        #expect(Set(tombstones ?? []) == [.text("x\u{0}y"), .nonUTF8Text([0x66, 0xFF])])
    }
}
