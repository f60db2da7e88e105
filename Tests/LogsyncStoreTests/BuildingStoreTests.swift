import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// A store being built (an account switch's `….building` file) is written with a rollback journal and
/// switched to WAL once built (`StoreOptions.rebuilding`, `Store.finishBuilding()`).
@Suite("Building a store")
struct BuildingStoreTests {
    /// What the database file says (its header's read and write versions: 2 for WAL, 1 for a rollback
    /// journal); `PRAGMA journal_mode` on an open connection reports that connection's own setting.
    private static func journalMode(_ store: Store) throws -> [[DatabaseValue]] {
        let header = try #require(FileHandle(forReadingAtPath: store.path)).readData(ofLength: 20)
        switch (header[18], header[19]) {
        case (2, 2): return [[.text("wal")]]
        case (1, 1): return [[.text("truncate")]]
        default: return [[.text("unknown \(header[18]) \(header[19])")]]
        }
    }

    @Test("a store being built has a rollback journal until it is built, then WAL, and stays in WAL when opened for building again")
    func journalModes() throws {
        let directory = try TemporaryDirectory("building")
        let path = directory.file("store.sqlite.building")
        do {
            let store = try Store(path: path, schema: Fixtures.schema, options: .rebuilding)
            #expect(try Self.journalMode(store) == [[.text("truncate")]])
            // Every commit is synced while the store has a rollback journal (2 = FULL).
            #expect(try store.read("PRAGMA synchronous") == [[.integer(2)]])
            // A page cache the key index of 1M rows fits in (64 MiB, in KiB as SQLite reports it), on the
            // writer's connection, which fills it.
            try store.write { tx in
                #expect(try tx.rows("PRAGMA cache_size") == [[.integer(-65_536)]])
                try tx.insert("Note", ["id": Fixtures.id(), "title": "built"])
            }
            try store.finishBuilding()
            #expect(try Self.journalMode(store) == [[.text("wal")]])
            // A connection the store opens after the build (its checkpoint thread's, say) must not turn
            // the journal back.
            try store.write { tx in try tx.insert("Note", ["id": Fixtures.id(), "title": "after"]) }
            #expect(try Self.journalMode(store) == [[.text("wal")]])
            #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(2)]])
        }
        // Resuming a build that had finished (a crash between building and swapping) keeps WAL.
        let reopened = try Store(path: path, schema: Fixtures.schema, options: .rebuilding)
        #expect(try Self.journalMode(reopened) == [[.text("wal")]])
        #expect(try reopened.read("SELECT count(*) FROM Note") == [[.integer(2)]])
        #expect(!FileManager.default.fileExists(atPath: path + "-journal"))
    }

    /// SQLite's own recovery, on a file in the building store's journal mode, then opened as a build is
    /// resumed.
    @Test("a building store whose writer is killed with pages of its transaction already in the file opens as it was at the last commit")
    func killedMidTransaction() async throws {
        let directory = try TemporaryDirectory("building")
        let path = directory.file("store.sqlite.building")
        do {
            let store = try Store(path: path, schema: Fixtures.schema, options: .rebuilding)
            try store.write { tx in
                for i in 0..<100 { try tx.insert("Note", ["id": Fixtures.id(), "title": .text("committed \(i)")]) }
            }
        }
        let sizeBefore = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        // A one-page cache makes SQLite write the transaction's pages into the database file as it goes,
        // which only the journal can undo.
        let shell = try Subprocess(sqliteShell, [path])
        try shell.send("PRAGMA journal_mode = truncate; PRAGMA cache_size = 1; BEGIN;\n")
        let body = String(repeating: "x", count: 500)
        for _ in 0..<2_000 { try shell.send("INSERT INTO Note(id, title, body) VALUES ('\(Fixtures.idText())', 'lost', '\(body)');\n") }
        try shell.send("SELECT 'inside';\n")
        _ = try await shell.line(startingWith: "inside")
        let sizeInside = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(sizeInside > sizeBefore, "the uncommitted transaction reached the database file")
        #expect(FileManager.default.fileExists(atPath: path + "-journal"))
        try await shell.kill9()

        let store = try Store(path: path, schema: Fixtures.schema, options: .rebuilding)
        #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(100)]])
        #expect(try store.read("SELECT count(*) FROM Note WHERE title = 'lost'") == [[.integer(0)]])
        #expect(try store.read("PRAGMA integrity_check") == [[.text("ok")]])
        try store.finishBuilding()
        #expect(try Self.journalMode(store) == [[.text("wal")]])
    }
}
