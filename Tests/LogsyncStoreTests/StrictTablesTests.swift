import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing
import LogsyncSQLite
import LogsyncControl

/// Synced tables keep their declared types for every writer (`docs/history.md`, "Declared types hold
/// for every writer"): the sqlite3 shell, a real process that is not logsync, cannot store what the
/// merge would refuse, in a new store or in one made before the tables were STRICT.
@Suite("Declared types hold for every writer")
struct StrictTablesTests {
    static func uuid() -> String { UUID().uuidString.lowercased() }

    /// Each statement must fail in the sqlite3 shell with the text given; the table keeps only good rows.
    static func expectRefused(_ path: String) async throws {
        let folder = uuid()
        let good = try await runSQLiteShell(on: path, "INSERT INTO Folder(id, name) VALUES ('\(folder)', 'f');")
        #expect(good.status == 0, "\(good)")
        let refused: [(String, String)] = [
            ("INSERT INTO Note(id, title) VALUES ('\(uuid())', X'0102')", "cannot store BLOB value in TEXT column"),
            ("INSERT INTO Note(id, title, pinned) VALUES ('\(uuid())', 't', 'yes')", "cannot store TEXT value in INTEGER column"),
            ("INSERT INTO Note(id, title, pinned) VALUES ('\(uuid())', 't', 2)", "CHECK constraint failed"),
            ("INSERT INTO Note(id, title, folder) VALUES ('\(uuid())', 't', 7)", "CHECK constraint failed"),
            ("INSERT INTO Note(id, title, folder) VALUES ('\(uuid())', 't', X'00')", "cannot store BLOB value in TEXT column"),
            ("INSERT INTO Note(id, title) VALUES ('\(String(repeating: "z", count: 36))', 't')", "CHECK constraint failed"),
            ("INSERT INTO Note(id, title) VALUES (7, 't')", "CHECK constraint failed"),
            ("UPDATE Note SET body = X'FF'", "cannot store BLOB value in TEXT column"),
        ]
        for (sql, says) in refused {
            let result = try await runSQLiteShell(on: path, sql + ";")
            #expect(result.status != 0 && result.stderr.contains(says), "\(sql): \(result)")
        }
        // What converts without loss is taken, converted: '1' into a bool, an upper-case UUID reference.
        let converted = try await runSQLiteShell(
            on: path, "INSERT INTO Note(id, title, pinned, folder) VALUES ('\(uuid())', 'ok', '1', '\(folder.uppercased())');")
        #expect(converted.status == 0, "\(converted)")
        let types = try await runSQLiteShell(on: path, "SELECT typeof(title), typeof(pinned), pinned FROM Note WHERE title = 'ok';")
        #expect(types.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "text|integer|1", "\(types)")
    }

    @Test("a new store: the sqlite3 shell cannot insert a blob title, pinned = 'yes', a number for a folder, a key that is not a UUID")
    func newStore() async throws {
        let directory = try TemporaryDirectory("strict")
        let path = directory.file("s.sqlite")
        let store = try Store(path: path, schema: .notes)
        try store.write { try $0.insert("Note", ["id": .text(Self.uuid()), "title": "kept", "pinned": 1]) }
        #expect(try store.read("SELECT strict FROM pragma_table_list WHERE name IN ('Note', 'Folder')") == [[.integer(1)], [.integer(1)]])
        try await Self.expectRefused(path)
        #expect(try store.read("SELECT count(*) FROM Note WHERE typeof(title) <> 'text' OR pinned NOT IN (0, 1)") == [[.integer(0)]])
    }

    /// The notes tables as format 5 made them: not STRICT, keys checked by length only; with an app's
    /// own index on Note.
    static func downgradeToFormat5(_ path: String) throws {
        let connection = try Connection(path: path)
        try connection.execute(
            """
            PRAGMA legacy_alter_table = ON;
            CREATE TABLE Folder_old ("id" TEXT PRIMARY KEY NOT NULL CHECK (typeof("id") = 'text' AND length("id") = 36), "name" TEXT NOT NULL DEFAULT '');
            INSERT INTO Folder_old(rowid, id, name) SELECT rowid, id, name FROM Folder;
            DROP TABLE Folder;
            ALTER TABLE Folder_old RENAME TO Folder;
            CREATE TABLE Note_old (
              "id" TEXT PRIMARY KEY NOT NULL CHECK (typeof("id") = 'text' AND length("id") = 36),
              "title" TEXT, "body" TEXT, "pinned" INTEGER NOT NULL DEFAULT 0, "folder" TEXT);
            INSERT INTO Note_old(rowid, id, title, body, pinned, folder) SELECT rowid, id, title, body, pinned, folder FROM Note;
            DROP TABLE Note;
            ALTER TABLE Note_old RENAME TO Note;
            CREATE INDEX app_note_title ON Note(title);
            UPDATE _ls_meta SET value = 5 WHERE key = 'format';
            """)
    }

    @Test("an existing (format 5) store is rebuilt STRICT once on open: rows, rowids, row states and the app's index kept; the shell is refused after")
    func existingStore() async throws {
        let directory = try TemporaryDirectory("strict")
        let path = directory.file("s.sqlite")
        let origin = NodeID(Self.uuid())
        let remote = DatabaseValue.text(Self.uuid())
        let before: [[DatabaseValue]]
        do {
            let store = try Store(path: path, schema: .notes)
            try store.write { try $0.insert("Note", ["id": .text(Self.uuid()), "title": "local", "pinned": 0]) }
            _ = try store.sync.importSegment(
                header: SegmentHeader(
                    schemaVersion: 1, account: "a", node: origin, firstSequence: 1, lastSequence: 1, minTimestamp: HLCTimestamp(rawValue: 1 << 16),
                    maxTimestamp: HLCTimestamp(rawValue: 1 << 16), transactionCount: 1),
                transactions: [
                    LogTransaction(
                        sequence: 1, timestamp: HLCTimestamp(rawValue: 1 << 16), author: nil, contextName: nil,
                        changes: [LogChange(entity: "Note", primaryKey: remote, kind: .insert, causalLength: 1, values: ["title": "remote", "pinned": 1])])
                ],
                checksum: 1, account: "a")
            _ = try store.sync.exportToOutbox(account: "a")
            before = try store.read("SELECT rowid, * FROM Note ORDER BY rowid")
        }
        try Self.downgradeToFormat5(path)
        let store = try Store(path: path, schema: .notes)
        #expect(try store.read("SELECT value FROM _ls_meta WHERE key = 'format'") == [[.integer(SchemaSQL.formatVersion)]])
        #expect(try store.read("SELECT strict FROM pragma_table_list WHERE name IN ('Note', 'Folder') ORDER BY name") == [[.integer(1)], [.integer(1)]])
        #expect(try store.read("SELECT rowid, * FROM Note ORDER BY rowid") == before)
        #expect(try store.read("SELECT count(*) FROM sqlite_master WHERE name = 'app_note_title'") == [[.integer(1)]])
        // The merge still finds the imported row's state (kept by rowid): an older write loses to it.
        _ = try store.sync.importSegment(
            header: SegmentHeader(
                schemaVersion: 1, account: "a", node: origin, firstSequence: 2, lastSequence: 2, minTimestamp: HLCTimestamp(rawValue: 1),
                maxTimestamp: HLCTimestamp(rawValue: 1), transactionCount: 1),
            transactions: [
                LogTransaction(
                    sequence: 2, timestamp: HLCTimestamp(rawValue: 1), author: nil, contextName: nil,
                    changes: [LogChange(entity: "Note", primaryKey: remote, kind: .update, causalLength: 1, values: ["title": "older"])])
            ],
            checksum: 2, account: "a")
        #expect(try store.read("SELECT title FROM Note WHERE id = ?", [remote]) == [[.text("remote")]])
        // Capture still works, and nothing was captured by the rebuild itself.
        #expect(try store.sync.exportToOutbox(account: "a") == 0)
        try await Self.expectRefused(path)
        #expect(try store.sync.exportToOutbox(account: "a") == 1, "the shell's good writes are captured")
    }

    @Test("an existing store holding a value its type does not allow is not opened, says where and what to do, and is left as it was")
    func existingStoreWithABadRow() async throws {
        let directory = try TemporaryDirectory("strict")
        let path = directory.file("s.sqlite")
        do { _ = try Store(path: path, schema: .notes) }
        try Self.downgradeToFormat5(path)
        let bad = try await runSQLiteShell(on: path, "INSERT INTO Note(id, title) VALUES ('\(Self.uuid())', X'0102');")
        #expect(bad.status == 0, "the old table took a blob title: \(bad)")
        #expect {
            try Store(path: path, schema: .notes)
        } throws: { error in
            let message = (error as? StoreError)?.message ?? ""
            return message.contains("\"Note\"") && message.contains("cannot store BLOB value in TEXT column") && message.contains("nothing was changed")
        }
        #expect(try Connection(path: path).int64("SELECT value FROM _ls_meta WHERE key = 'format'") == 5)
        let fixed = try await runSQLiteShell(on: path, "UPDATE Note SET title = CAST(title AS TEXT) WHERE typeof(title) = 'blob';")
        #expect(fixed.status == 0)
        #expect(try Store(path: path, schema: .notes).read("SELECT typeof(title) FROM Note") == [[.text("text")]])
    }
}
