import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Ordinary SQL from a program that is not logsync, on one node of two: each idiom here once left the
/// nodes with different data while both reported a clean sync (`docs/history.md`).
@Suite("SQL from other programs never makes nodes differ silently")
struct ForeignSQLTests {
    /// Two stores on one shared folder; `a` is written by a plain SQLite connection.
    struct Pair {
        let cluster: SyncCluster
        let a: Store
        let b: Store
        let foreign: ForeignConnection

        init(_ label: String, recursiveTriggers: Bool = false) throws {
            cluster = try SyncCluster(label)
            a = try cluster.store("a")
            b = try cluster.store("b")
            foreign = try ForeignConnection(path: a.path)
            try foreign.script("PRAGMA recursive_triggers = \(recursiveTriggers ? "ON" : "OFF")")
        }

        /// Both ways, twice, so that what one applies and re-projects reaches the other.
        func sync() throws {
            for _ in 0..<2 {
                _ = try cluster.engine(a).sync()
                _ = try cluster.engine(b).sync()
            }
        }

        /// The synced tables with every value's storage class and bytes, as SQLite holds them.
        func exact(_ store: Store) throws -> [[DatabaseValue]] {
            var rows: [[DatabaseValue]] = []
            for entity in store.schema.entities {
                let columns = ["id"] + entity.columnNames
                let selected = columns.map { "'\($0)', typeof(\"\($0)\"), hex(\"\($0)\")" }.joined(separator: ", ")
                rows += try store.read("SELECT '\(entity.name)', \(selected) FROM \"\(entity.name)\" ORDER BY id")
            }
            return rows
        }

        /// Every node equals the writer's own tables, byte for byte.
        func expectConverged(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
            try sync()
            #expect(try exact(b) == (try exact(a)), comment, sourceLocation: sourceLocation)
            #expect(try b.syncedTables() == (try a.syncedTables()), comment, sourceLocation: sourceLocation)
        }
    }

    // MARK: 1. REPLACE that removes another row

    /// A label and a note that refers to it (nullify), in a folder (cascade), synced to both nodes.
    private func seed(_ pair: Pair) throws -> (label: DatabaseValue, note: DatabaseValue, folder: DatabaseValue) {
        let label = SyncCluster.id(), note = SyncCluster.id(), folder = SyncCluster.id()
        try pair.a.write {
            try $0.insert("Label", ["id": label, "name": "urgent"])
            try $0.insert("Folder", ["id": folder, "name": "Inbox"])
            try $0.insert("Note", ["id": note, "title": "call", "label": label, "folder": folder])
        }
        try pair.sync()
        return (label, note, folder)
    }

    @Test(
        "INSERT OR REPLACE, REPLACE INTO and UPDATE OR REPLACE that collide with another row on a unique key delete it on every node",
        arguments: [false, true])
    func replaceOnUniqueKey(recursiveTriggers: Bool) throws {
        let statements = [
            "INSERT OR REPLACE INTO Label(id, name) VALUES (?, 'urgent')",
            "REPLACE INTO Label(id, name) VALUES (?, 'urgent')",
            "UPDATE OR REPLACE Label SET name = 'urgent' WHERE id = ?",
        ]
        for (index, sql) in statements.enumerated() {
            let pair = try Pair("repl\(index)", recursiveTriggers: recursiveTriggers)
            let (label, note, _) = try seed(pair)
            let replacement = SyncCluster.id()
            if sql.hasPrefix("UPDATE") {
                try pair.foreign.execute("INSERT INTO Label(id, name) VALUES (?, 'later')", [replacement])
            }
            try pair.foreign.execute(sql, [replacement])
            #expect(try pair.a.read("SELECT id FROM Label") == [[replacement]], "\(sql)")
            #expect(try pair.a.read("SELECT label FROM Note WHERE id = ?", [note]) == [[.null]], "nullify applied on the writer: \(sql)")
            let deletes = try pair.a.history().flatMap(\.changes).filter { $0.kind == .delete && $0.primaryKey == label }
            #expect(deletes.count == 1, "the replaced label's delete is recorded once: \(sql)")
            try pair.expectConverged("\(sql), recursive_triggers \(recursiveTriggers)")
            #expect(try pair.b.read("SELECT id, name FROM Label") == [[replacement, "urgent"]], "\(sql)")

            // Deleting the survivor later must not bring the replaced row back anywhere.
            try pair.foreign.execute("DELETE FROM Label WHERE id = ?", [replacement])
            try pair.expectConverged("after deleting the survivor: \(sql)")
            #expect(try pair.b.read("SELECT count(*) FROM Label") == [[.integer(0)]], "\(sql)")
        }
    }

    @Test("a REPLACE through logsync's own connection records the rows it deletes, once")
    func replaceThroughLogsync() throws {
        let pair = try Pair("own")
        let (label, note, _) = try seed(pair)
        let replacement = SyncCluster.id()
        try pair.a.write(author: "app") { try $0.execute("INSERT OR REPLACE INTO Label(id, name) VALUES (?, 'urgent')", [replacement]) }
        #expect(try pair.a.read("SELECT id FROM Label") == [[replacement]])
        #expect(try pair.a.read("SELECT label FROM Note WHERE id = ?", [note]) == [[.null]])
        let deletes = try pair.a.history().flatMap(\.changes).filter { $0.kind == .delete && $0.primaryKey == label }
        #expect(deletes.count == 1)
        try pair.expectConverged()
    }

    @Test("a REPLACE that removes a parent cascades to its notes and nullifies references, on both nodes", arguments: [false, true])
    func replaceRemovesParent(recursiveTriggers: Bool) throws {
        // Folder has no unique key: a REPLACE on its primary key deletes the old row, then inserts the new one.
        let pair = try Pair("parent", recursiveTriggers: recursiveTriggers)
        let (_, note, folder) = try seed(pair)
        try pair.foreign.execute("INSERT OR REPLACE INTO Folder(id, name) VALUES (?, 'Renamed')", [folder])
        #expect(try pair.a.read("SELECT count(*) FROM Note WHERE id = ?", [note]) == [[.integer(0)]], "cascade applied on the writer")
        #expect(try pair.a.read("SELECT name FROM Folder") == [["Renamed"]])
        // The notes go with the replaced folder, and the folder's delete precedes its new insert, whichever
        // connection setting the writer had (the rules and the delete are recorded as for an explicit delete).
        let last = try #require(try pair.a.history().last)
        #expect(last.changes.map { "\($0.kind) \($0.entity)" } == ["delete Note", "delete Folder", "insert Folder"])
        try pair.expectConverged("recursive_triggers \(recursiveTriggers)")
        #expect(try pair.b.read("SELECT count(*) FROM Note") == [[.integer(0)]])
    }

    @Test("a REPLACE of a row that a deny rule protects is refused like its delete")
    func replaceRespectsDeny() throws {
        let cluster = try SyncCluster("deny")
        let store = try Store(path: cluster.storePath("deny"), schema: Self.denySchema)
        let owner = SyncCluster.id()
        try store.write {
            try $0.insert("Owner", ["id": owner, "name": "ann"])
            try $0.insert("Pad", ["id": SyncCluster.id(), "owner": owner])
        }
        let foreign = try ForeignConnection(path: store.path)
        #expect(throws: ForeignConnection.Failure.self) {
            try foreign.execute("INSERT OR REPLACE INTO Owner(id, name) VALUES (?, 'bob')", [owner])
        }
        #expect(try store.read("SELECT name FROM Owner") == [["ann"]])
    }

    static let denySchema = Schema(version: 1, entities: [
        Entity("Owner", attributes: [Attribute("name", .text)]),
        Entity("Pad", attributes: [], relationships: [Relationship("owner", to: "Owner", deleteRule: .deny)]),
    ])

    @Test("upserts, OR IGNORE and failed statements that collide delete nothing", arguments: [false, true])
    func collisionsThatDoNotReplace(recursiveTriggers: Bool) throws {
        let pair = try Pair("keep", recursiveTriggers: recursiveTriggers)
        let (label, note, folder) = try seed(pair)
        let other = SyncCluster.id()
        try pair.foreign.execute("INSERT OR IGNORE INTO Label(id, name) VALUES (?, 'urgent')", [other])
        try pair.foreign.execute("INSERT INTO Label(id, name) VALUES (?, 'urgent') ON CONFLICT(name) DO UPDATE SET name = 'urgent'", [other])
        try pair.foreign.execute("INSERT INTO Label(id, name) VALUES (?, 'urgent') ON CONFLICT DO NOTHING", [other])
        try pair.foreign.execute("INSERT INTO Folder(id, name) VALUES (?, 'x') ON CONFLICT(id) DO UPDATE SET name = 'Upserted'", [folder])
        #expect(throws: ForeignConnection.Failure.self) {
            try pair.foreign.execute("INSERT OR FAIL INTO Label(id, name) VALUES (?, 'urgent')", [other])
        }
        #expect(throws: ForeignConnection.Failure.self) {
            try pair.foreign.execute("INSERT INTO Label(id, name) VALUES (?, 'urgent')", [other])
        }
        // A later insert of the same key, colliding with nothing, must not be taken for a replacement.
        try pair.foreign.execute("UPDATE Label SET name = 'renamed' WHERE id = ?", [label])
        try pair.foreign.execute("INSERT INTO Label(id, name) VALUES (?, 'urgent')", [other])
        #expect(try pair.a.history().flatMap(\.changes).filter { $0.kind == .delete }.isEmpty)
        #expect(try pair.a.read("SELECT label FROM Note WHERE id = ?", [note]) == [[label]])
        #expect(try pair.a.read("SELECT name FROM Folder") == [["Upserted"]])
        try pair.expectConverged("recursive_triggers \(recursiveTriggers)")
    }

    @Test("a REPLACE that takes another row's rowid deletes that row on every node")
    func replaceOnRowid() throws {
        let pair = try Pair("rowid")
        let (label, _, _) = try seed(pair)
        let rowid = try #require(try pair.a.read("SELECT rowid FROM Label WHERE id = ?", [label]).first?.first)
        let replacement = SyncCluster.id()
        try pair.foreign.execute("INSERT OR REPLACE INTO Label(rowid, id, name) VALUES (?, ?, 'other')", [rowid, replacement])
        #expect(try pair.a.read("SELECT id FROM Label") == [[replacement]])
        try pair.expectConverged()
        // And an update that moves a row onto another's rowid.
        let third = SyncCluster.id()
        try pair.foreign.execute("INSERT INTO Label(id, name) VALUES (?, 'third')", [third])
        try pair.foreign.execute("UPDATE OR REPLACE Label SET rowid = ? WHERE id = ?", [rowid, third])
        #expect(try pair.a.read("SELECT id FROM Label") == [[third]])
        try pair.expectConverged()
    }

    @Test("a row another program moved to a new rowid is still deleted when its delete arrives")
    func renumberedRowStillDeleted() throws {
        // (Found by the property test below.) An imported row's state is found by its rowid; a program that
        // sets the rowid must not leave the state behind, or the import takes the key for a new one.
        let pair = try Pair("renumber")
        let folder = SyncCluster.id()
        try pair.b.write { try $0.insert("Folder", ["id": folder, "name": "f"]) }
        try pair.sync()
        try pair.foreign.execute("UPDATE Folder SET rowid = rowid + 50 WHERE id = ?", [folder])
        try pair.b.write { try $0.delete("Folder", key: folder) }
        try pair.sync()
        #expect(try pair.a.read("SELECT count(*) FROM Folder") == [[.integer(0)]])
        try pair.expectConverged()
    }

    static let twoKeys = Schema(version: 1, entities: [
        Entity("Label", attributes: [Attribute("name", .text), Attribute("tone", .integer)], uniqueKeys: [["name"], ["tone"]])
    ])

    @Test("with two unique keys, a row hidden by the second still wins the first: every node hides the newcomer")
    func hiddenLoserStillWinsEarlierKey() throws {
        // (Found by the property test below.) L2 loses to L1 on tone and is hidden; L3 has L2's name, and
        // L2's lower key wins the name before tones are compared, so L3 is hidden too, everywhere.
        let cluster = try SyncCluster("keys", schema: Self.twoKeys)
        let a = try cluster.store("a"), b = try cluster.store("b")
        let (l1, l2, l3) = (DatabaseValue.text("10000000-0000-4000-8000-000000000000"),
                            DatabaseValue.text("20000000-0000-4000-8000-000000000000"),
                            DatabaseValue.text("30000000-0000-4000-8000-000000000000"))
        try a.write { try $0.insert("Label", ["id": l1, "name": "a", "tone": 1]) }
        try b.write { try $0.insert("Label", ["id": l2, "name": "b", "tone": 1]) }
        for store in [a, b, a] { _ = try cluster.engine(store).sync() }
        #expect(try b.read("SELECT id FROM Label") == [[l1]])
        try ForeignConnection(path: b.path).execute("INSERT INTO Label(id, name, tone) VALUES (?, 'b', NULL)", [l3])
        for store in [b, a, b] { _ = try cluster.engine(store).sync() }
        #expect(try a.read("SELECT id FROM Label") == [[l1]])
        #expect(try b.read("SELECT id FROM Label") == [[l1]])
    }

    // MARK: 2 and 3. Values that are not plain UTF-8 text

    @Test("text with NUL characters arrives whole, from a foreign writer and through logsync's own connection")
    func nulInText() throws {
        let pair = try Pair("nul")
        let ids = (0..<3).map { _ in SyncCluster.id() }
        try pair.foreign.execute("INSERT INTO Note(id, title) VALUES (?, 'é ñ ' || char(0) || ' after')", [ids[0]])
        try pair.foreign.execute("INSERT INTO Note(id, title) VALUES (?, char(0))", [ids[1]])
        try pair.a.write { try $0.execute("INSERT INTO Note(id, title) VALUES (?, 'lib' || char(0) || 'rary')", [ids[2]]) }
        try pair.expectConverged()
        #expect(try pair.b.read("SELECT title FROM Note WHERE id = ?", [ids[0]]) == [[.text("é ñ \u{0} after")]])
        #expect(try pair.b.read("SELECT title FROM Note WHERE id = ?", [ids[1]]) == [[.text("\u{0}")]])
        #expect(try pair.b.read("SELECT title FROM Note WHERE id = ?", [ids[2]]) == [[.text("lib\u{0}rary")]])
        // Values bound by the library carry their NULs too.
        try pair.b.write { try $0.update("Note", key: ids[1], ["title": .text("x\u{0}y")]) }
        try pair.expectConverged()
        #expect(try pair.a.read("SELECT hex(title) FROM Note WHERE id = ?", [ids[1]]) == [["780079"]])
    }

    @Test("text that is not valid UTF-8 is carried byte for byte, never repaired")
    func nonUTF8Text() throws {
        let pair = try Pair("utf8")
        let ids = (0..<2).map { _ in SyncCluster.id() }
        try pair.foreign.execute("INSERT INTO Note(id, title) VALUES (?, CAST(x'66ff00fe41' AS TEXT))", [ids[0]])
        try pair.foreign.execute("INSERT INTO Folder(id, name) VALUES (?, CAST(x'c3' AS TEXT))", [ids[1]])
        try pair.expectConverged()
        #expect(try pair.b.read("SELECT typeof(title), hex(title) FROM Note") == [["text", "66FF00FE41"]])
        #expect(try pair.b.read("SELECT title FROM Note") == [[.nonUTF8Text([0x66, 0xFF, 0x00, 0xFE, 0x41])]])
        // And back: b changes it, a receives the new bytes.
        try pair.b.write { try $0.update("Note", key: ids[0], ["title": .nonUTF8Text([0xFE, 0xFF])]) }
        try pair.expectConverged()
        #expect(try pair.a.read("SELECT hex(title) FROM Note") == [["FEFF"]])
    }

    // MARK: 4 and 5. Schema changes made outside logsync

    @Test("a column renamed by another program stops syncing with a message that says how to undo it; undone, sync resumes")
    func renamedColumn() throws {
        let pair = try Pair("rename")
        let note = SyncCluster.id()
        try pair.a.write { try $0.insert("Note", ["id": note, "title": "before"]) }
        try pair.sync()
        try pair.foreign.script("ALTER TABLE Note RENAME COLUMN title TO t_renamed")
        try pair.foreign.execute("UPDATE Note SET t_renamed = 'after', rank = 5 WHERE id = ?", [note])

        let error = try #require(throws: StoreError.self) { try pair.cluster.engine(pair.a).sync() }
        #expect(error.code == .schemaDrift)
        #expect(error.message.contains(#""Note"."title" is missing"#), "\(error)")
        #expect(error.message.contains(#"RENAME COLUMN "t_renamed" TO "title""#), "\(error)")
        // Nothing was exported meanwhile: b still has the old row, and never the column name as a value.
        _ = try pair.cluster.engine(pair.b).sync()
        #expect(try pair.b.read("SELECT title, rank FROM Note") == [["before", .integer(0)]])
        // Opening the store refuses it too, with the same message.
        let reopened = try #require(throws: StoreError.self) { try Store(path: pair.a.path, schema: pair.a.schema) }
        #expect(reopened.code == .schemaDrift)

        try pair.foreign.script("ALTER TABLE Note RENAME COLUMN t_renamed TO title")
        try pair.expectConverged()
        #expect(try pair.b.read("SELECT title, rank FROM Note") == [["after", .integer(5)]])
    }

    @Test("a column added by another program is refused before anything is exported")
    func addedColumn() throws {
        let pair = try Pair("added")
        try pair.foreign.script("ALTER TABLE Note ADD COLUMN mood TEXT")
        try pair.foreign.execute("INSERT INTO Note(id, title, mood) VALUES (?, 't', 'happy')", [SyncCluster.id()])
        let error = try #require(throws: StoreError.self) { try pair.cluster.engine(pair.a).sync() }
        #expect(error.code == .schemaDrift)
        #expect(error.message.contains(#""Note"."mood" was added by another program"#), "\(error)")
        #expect(try pair.cluster.engine(pair.b).sync().applied.isEmpty)
        try pair.foreign.script("ALTER TABLE Note DROP COLUMN mood")
        try pair.expectConverged()
    }

    @Test("a unique index created, a capture trigger dropped, or a column retyped by another program are each refused")
    func otherDrift() throws {
        let cases: [(sql: String, says: String, undo: String)] = [
            ("CREATE UNIQUE INDEX mine ON Note(title)", "unique index \"mine\" on \"Note\" was created by another program", "DROP INDEX mine"),
            ("DROP TRIGGER _ls_t3_insert", "trigger \"_ls_t3_insert\" was dropped", ""),
            (
                // SQLite's recipe for changing a column's type: rebuild the table (with legacy renames, as
                // other tables' triggers name it).
                "PRAGMA legacy_alter_table = ON; BEGIN;"
                    + "CREATE TABLE n2(id TEXT PRIMARY KEY NOT NULL, title BLOB, rank INTEGER NOT NULL DEFAULT 0, folder TEXT, label TEXT);"
                    + "INSERT INTO n2 SELECT * FROM Note; DROP TABLE Note; ALTER TABLE n2 RENAME TO Note; COMMIT",
                "\"Note\".\"title\" is declared TEXT by the schema but BLOB", ""
            ),
        ]
        for (sql, says, undo) in cases {
            let pair = try Pair("drift")
            try pair.a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "x"]) }
            try pair.foreign.script(sql)
            let error = try #require(throws: StoreError.self, "\(sql)") { try pair.cluster.engine(pair.a).sync() }
            #expect(error.code == .schemaDrift, "\(sql)")
            #expect(error.message.contains(says), "\(error)")
            if !undo.isEmpty {
                try pair.foreign.script(undo)
                try pair.expectConverged()
            }
        }
    }

    @Test("reopening an untouched store rewrites nothing: the schema cookie stays the same")
    func reopeningKeepsTriggers() throws {
        let cluster = try SyncCluster("reopen")
        let path = cluster.storePath("a")
        _ = try cluster.store("a")
        let before = try ForeignConnection(path: path).execute("PRAGMA schema_version")
        _ = try cluster.store("a")
        #expect(try ForeignConnection(path: path).execute("PRAGMA schema_version") == before)
    }

    @Test("generated SQL never reads an unknown identifier as a string: double-quoted literals are off")
    func doubleQuotedLiteralsOff() throws {
        let cluster = try SyncCluster("dqs")
        let store = try cluster.store("a")
        #expect(throws: StoreError.self) { try store.read(#"SELECT "no_such_column" FROM Note"#) }
        #expect(throws: StoreError.self) { try store.write { try $0.execute(#"UPDATE Note SET title = "no_such_column""#) } }
    }
}
