import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

@Suite("History capture of library writes")
struct HistoryCaptureTests {
    @Test("an insert records author, context, every column, and a local origin")
    func insertRecordsAuthorAndContext() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let note = Fixtures.id()
        try store.write(author: "alice", context: "editor") { tx in
            try tx.insert("Note", ["id": note, "title": "Hello", "body": "world"])
        }
        let history = try store.history()
        #expect(history.count == 1)
        let transaction = try #require(history.first)
        #expect(transaction.author == "alice")
        #expect(transaction.contextName == "editor")
        #expect(transaction.origin == .local)
        #expect(transaction.token == (try store.currentToken()))
        #expect(transaction.changes == [
            HistoryChange(entity: "Note", primaryKey: note, kind: .insert, changedColumns: ["title", "body", "rank", "data", "folder", "label"])
        ])
    }

    @Test("an update records only the columns whose value changed; a no-op update records nothing")
    func updateRecordsChangedColumnsOnly() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let note = Fixtures.id()
        try store.write(author: "a") { tx in try tx.insert("Note", ["id": note, "title": "t", "body": "b", "rank": 1]) }
        let before = try store.currentToken()
        try store.write(author: "b", context: "rename") { tx in
            try tx.update("Note", key: note, ["title": "t2", "body": "b", "rank": 1])
        }
        let updates = try store.history(after: before)
        #expect(updates.map(\.changes) == [[HistoryChange(entity: "Note", primaryKey: note, kind: .update, changedColumns: ["title"])]])

        let afterUpdate = try store.currentToken()
        try store.write(author: "c") { tx in try tx.update("Note", key: note, ["title": "t2"]) }
        #expect(try store.history(after: afterUpdate).isEmpty)
        #expect(try store.currentToken() == afterUpdate)
    }

    @Test("a delete records a tombstone with the preserved attributes, blobs included")
    func deleteRecordsTombstone() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let note = Fixtures.id()
        try store.write { tx in
            try tx.insert("Note", ["id": note, "title": "Secret", "body": "not kept", "data": .blob([0, 1, 254, 255])])
        }
        let before = try store.currentToken()
        let deleted = try store.write(author: "bob") { tx in try tx.delete("Note", key: note) }
        #expect(deleted)
        let change = try #require(try store.history(after: before).first?.changes.first)
        #expect(change.kind == .delete)
        #expect(change.primaryKey == note)
        #expect(change.changedColumns.isEmpty)
        #expect(change.tombstone == ["title": "Secret", "data": .blob([0, 1, 254, 255])])
    }

    @Test("one write transaction with several statements is one history transaction, in statement order")
    func severalStatementsOneTransaction() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let (a, b) = (Fixtures.id(), Fixtures.id())
        try store.write(author: "x") { tx in
            try tx.insert("Note", ["id": a, "title": "a"])
            try tx.insert("Note", ["id": b, "title": "b"])
            try tx.update("Note", key: a, ["body": "changed"])
            try tx.delete("Note", key: b)
        }
        let history = try store.history()
        #expect(history.count == 1)
        #expect(history[0].changes.map(\.kind) == [.insert, .insert, .update, .delete])
        #expect(history[0].changes.map(\.primaryKey) == [a, b, a, b])
    }

    @Test("a write that throws leaves neither rows nor history")
    func failedWriteLeavesNothing() throws {
        struct Abort: Error {}
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        #expect(throws: Abort.self) {
            try store.write(author: "x") { tx in
                try tx.insert("Note", ["id": Fixtures.id(), "title": "never"])
                throw Abort()
            }
        }
        #expect(try store.history().isEmpty)
        #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(0)]])
    }

    @Test("cascade deletes referencing rows and records each delete in the same transaction")
    func cascadeRuleRecorded() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let folder = Fixtures.id()
        let notes = [Fixtures.id(), Fixtures.id()]
        try store.write { tx in
            try tx.insert("Folder", ["id": folder, "name": "Work"])
            for note in notes { try tx.insert("Note", ["id": note, "title": "n", "folder": folder]) }
        }
        let before = try store.currentToken()
        try store.write(author: "cleaner") { tx in try tx.delete("Folder", key: folder) }
        let transactions = try store.history(after: before)
        #expect(transactions.count == 1)
        let deletes = transactions[0].changes
        #expect(Set(deletes.map(\.primaryKey)) == Set(notes + [folder]))
        #expect(deletes.allSatisfy { $0.kind == .delete })
        #expect(deletes.first { $0.entity == "Folder" }?.tombstone == ["name": "Work"])
        #expect(try store.read("SELECT count(*) FROM Note") == [[.integer(0)]])
    }

    @Test("nullify clears the references and records them as updates of that column")
    func nullifyRuleRecorded() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let label = Fixtures.id()
        let note = Fixtures.id()
        try store.write { tx in
            try tx.insert("Label", ["id": label, "name": "urgent"])
            try tx.insert("Note", ["id": note, "title": "n", "label": label])
        }
        let before = try store.currentToken()
        try store.write { tx in try tx.delete("Label", key: label) }
        let changes = try #require(try store.history(after: before).first).changes
        #expect(changes.contains(HistoryChange(entity: "Note", primaryKey: note, kind: .update, changedColumns: ["label"])))
        #expect(changes.contains { $0.entity == "Label" && $0.kind == .delete })
        #expect(try store.read("SELECT label FROM Note") == [[.null]])
    }

    @Test("deny refuses the delete with a clear error and records nothing")
    func denyRuleRefuses() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let owner = Fixtures.id()
        try store.write { tx in
            try tx.insert("Owner", ["id": owner, "name": "ann"])
            try tx.insert("Folder", ["id": Fixtures.id(), "name": "f", "owner": owner])
        }
        let before = try store.currentToken()
        let error = try #require(throws: StoreError.self) {
            try store.write { tx in try tx.delete("Owner", key: owner) }
        }
        #expect(error.code == .constraint)
        #expect(error.description.contains("Folder.owner still references it"))
        #expect(try store.currentToken() == before)
        #expect(try store.read("SELECT count(*) FROM Owner") == [[.integer(1)]])
    }

    @Test("unique keys, key shape and key changes are enforced with errors that say why")
    func constraintsEnforced() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        let note = Fixtures.id()
        try store.write { tx in
            try tx.insert("Label", ["id": Fixtures.id(), "name": "dup"])
            try tx.insert("Note", ["id": note, "title": "n"])
        }
        let unique = try #require(throws: StoreError.self) {
            try store.write { tx in try tx.insert("Label", ["id": Fixtures.id(), "name": "dup"]) }
        }
        #expect(unique.code == .constraint)
        #expect(unique.description.contains("UNIQUE"))

        let integerKey = try #require(throws: StoreError.self) {
            try store.write { tx in try tx.execute("INSERT INTO Note(id, title) VALUES (42, 'x')") }
        }
        #expect(integerKey.code == .constraint)

        let keyChange = try #require(throws: StoreError.self) {
            try store.write { tx in try tx.update("Note", key: note, ["id": Fixtures.id()]) }
        }
        #expect(keyChange.code == .unknownColumn || keyChange.code == .constraint)
        let rawKeyChange = try #require(throws: StoreError.self) {
            try store.write { tx in try tx.execute("UPDATE Note SET id = ? WHERE id = ?", [Fixtures.id(), note]) }
        }
        #expect(rawKeyChange.description.contains("primary key of Note cannot change"))

        let unknown = try #require(throws: StoreError.self) {
            try store.write { tx in try tx.insert("Nope", ["id": Fixtures.id()]) }
        }
        #expect(unknown.code == .unknownEntity)
        #expect(try store.history().count == 1)
    }

    @Test("history filters by author, origin and entity")
    func historyFilters() throws {
        let directory = try TemporaryDirectory("cap")
        let (store, _) = try Fixtures.store(in: directory)
        try store.write(author: "alice") { tx in try tx.insert("Note", ["id": Fixtures.id(), "title": "a"]) }
        try store.write(author: "bob") { tx in
            try tx.insert("Label", ["id": Fixtures.id(), "name": "b"])
            try tx.insert("Note", ["id": Fixtures.id(), "title": "b"])
        }
        #expect(try store.history(filter: HistoryFilter(authors: ["bob"])).map(\.author) == ["bob"])
        #expect(try store.history(filter: HistoryFilter(origins: [.local])).count == 2)
        #expect(try store.history(filter: HistoryFilter(origins: [.remote("elsewhere")])).isEmpty)
        let labels = try store.history(filter: HistoryFilter(entities: ["Label"]))
        #expect(labels.count == 1)
        #expect(labels[0].changes.map(\.entity) == ["Label"])
        #expect(try store.history(limit: 1).count == 1)
    }
}
