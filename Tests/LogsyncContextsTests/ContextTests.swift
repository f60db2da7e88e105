import Foundation
import LogsyncContexts
import LogsyncTestKit
import Synchronization
import Testing

@Suite("contexts in one process")
struct ContextTests {
    @Test("save writes one history transaction with the context's name and author; fetch sees it")
    func saveAndFetch() throws {
        let store = try NotesStore()
        let container = store.container
        let context = container.newBackgroundContext(name: "importer")
        let folder = Folder(name: "Home")
        try context.insert(folder)
        try context.insert(Note(title: "b", pinned: true, folder: Reference(folder)))
        try context.insert(Note(title: "a"))
        #expect(context.hasChanges)
        let token = try #require(try context.save(author: "alice"))
        #expect(!context.hasChanges)

        let history = try container.store.history()
        #expect(history.count == 1)
        #expect(history[0].token == token)
        #expect(history[0].author == "alice")
        #expect(history[0].contextName == "importer")
        #expect(history[0].changes.count == 3)

        let notes = try container.viewContext.fetch(FetchRequest<Note>(orderedBy: [.ascending("title")]))
        #expect(notes.map(\.title) == ["a", "b"])
        #expect(try container.viewContext.object(notes[1].folder)?.name == "Home")
        let inFolder = try container.viewContext.fetch(FetchRequest<Note>(where: Column("folder") == folder.id))
        #expect(inFolder.map(\.title) == ["b"])
        #expect(try context.save() == nil, "nothing left to save")
    }

    @Test("fetch lays unsaved inserts, edits and deletes over the store, then filters, sorts and limits")
    func fetchOverlay() throws {
        let store = try NotesStore()
        let container = store.container
        let context = container.viewContext
        let notes = (0..<6).map { Note(title: "note \($0)", body: $0.isMultiple(of: 2) ? "even" : "odd") }
        for note in notes { try context.insert(note) }
        try context.save()

        var edited = notes[1]
        edited.body = "even now"
        try context.update(edited)
        try context.delete(notes[2])
        try context.insert(Note(title: "note 9", body: "even"))
        let even = FetchRequest<Note>(where: Column("body").contains("EVEN", caseInsensitive: true), orderedBy: [.descending("title")])
        #expect(try context.fetch(even).map(\.title) == ["note 9", "note 4", "note 1", "note 0"])
        var limited = even
        limited.limit = 2
        limited.offset = 1
        #expect(try context.fetch(limited).map(\.title) == ["note 4", "note 1"])
        #expect(try context.count(even) == 4)

        // Another context sees only what is saved.
        let other = container.newBackgroundContext()
        #expect(try other.fetch(even).map(\.title) == ["note 4", "note 2", "note 0"])

        var batches: [[String?]] = []
        try context.forEachBatch(FetchRequest<Note>(orderedBy: [.ascending("title")]), size: 3) { batch in
            batches.append(batch.map(\.title))
        }
        #expect(batches == [["note 0", "note 1", "note 3"], ["note 4", "note 5", "note 9"]])

        context.rollback()
        #expect(!context.hasChanges)
        #expect(try context.fetch(even).map(\.title) == ["note 4", "note 2", "note 0"])
    }

    @Test("update records only the properties the app changed, even from a stale copy")
    func updateFromStaleCopy() async throws {
        let store = try NotesStore()
        let container = store.container
        let context = container.viewContext
        let note = Note(title: "title", body: "body")
        try context.insert(note)
        try context.save()
        var copy = try #require(try context.object(Note.self, id: note.id))

        // Another writer changes the body; the app's copy still has the old one.
        let other = try store.another()
        defer { other.close() }
        var theirs = try #require(try other.viewContext.object(Note.self, id: note.id))
        theirs.body = "their body"
        try other.viewContext.update(theirs)
        try other.viewContext.save(author: "bob")

        copy.title = "my title"
        try context.update(copy)
        try context.save(author: "alice")
        let saved = try #require(try other.viewContext.object(Note.self, id: note.id))
        #expect(saved.title == "my title")
        #expect(saved.body == "their body")
        #expect(context.conflicts.isEmpty)
    }

    @Test("conflicting edits resolve by policy, property by property, and are always reported", arguments: [
        MergePolicy.mineWins, MergePolicy.storeWins, MergePolicy(preferring: .mine, overrides: ["Note.title": .store]),
    ])
    func conflictPolicies(policy: MergePolicy) async throws {
        let store = try NotesStore()
        let container = store.container
        let context = container.viewContext
        context.mergePolicy = policy
        let note = Note(title: "title", body: "body")
        try context.insert(note)
        try context.save()

        var mine = try #require(try context.object(Note.self, id: note.id))
        mine.title = "my title"
        mine.body = "my body"
        try context.update(mine)

        let events = Collected(context.events())
        let other = try store.another()
        defer { other.close() }
        try other.editNote(note.id, author: "bob") { theirs in
            theirs.title = "their title"
            theirs.body = "their body"
            theirs.pinned = true
        }

        let merged = try await events.first { $0.cause == .merge && !$0.conflicts.isEmpty }
        let conflict = try #require(merged.conflicts.first)
        #expect(conflict.objectID == note.objectID)
        #expect(conflict.kind == .properties(["body", "title"]))
        #expect(conflict.mine["title"] == "my title")
        #expect(conflict.store["title"] == "their title")
        #expect(context.conflicts.count == 1)

        try context.save(author: "alice")
        let saved = try #require(try other.viewContext.object(Note.self, id: note.id))
        #expect(saved.pinned, "a property only the store changed is kept whatever the policy")
        #expect(saved.title == (policy.winner(entity: "Note", column: "title") == .mine ? "my title" : "their title"))
        #expect(saved.body == (policy.winner(entity: "Note", column: "body") == .mine ? "my body" : "their body"))
        switch policy.preferred {
        case .mine where policy.overrides.isEmpty: #expect(conflict.resolution == .keptMine)
        case .mine: #expect(conflict.resolution == .mixed(keptMine: ["body"]))
        case .store: #expect(conflict.resolution == .tookStore)
        }
    }

    @Test("an object deleted elsewhere while edited here surfaces as a conflict, kept or dropped by policy", arguments: [
        MergePolicy.mineWins, MergePolicy.storeWins,
    ])
    func deleteWhileEditing(policy: MergePolicy) async throws {
        let store = try NotesStore()
        let container = store.container
        let context = container.viewContext
        context.mergePolicy = policy
        var note = Note(title: "title")
        try context.insert(note)
        try context.save()
        note.title = "edited"
        try context.update(note)

        let events = Collected(context.events())
        let other = try store.another()
        defer { other.close() }
        try other.viewContext.delete(Note.self, id: note.id)
        try other.viewContext.save(author: "bob")

        let merged = try await events.first { $0.cause == .merge }
        #expect(merged.deleted == [note.objectID])
        #expect(merged.conflicts.map(\.kind) == [.deletedWhileEdited])
        #expect(merged.conflicts.first?.mine["title"] == "edited")
        try context.save()
        let after = try other.viewContext.object(Note.self, id: note.id)
        if policy.preferred == .mine {
            #expect(after?.title == "edited", "mine wins: the edited note comes back")
        } else {
            #expect(after == nil)
        }
    }

    @Test("batch insert and batch delete are history transactions and merge like saves")
    func batchOperations() async throws {
        let store = try NotesStore()
        let container = store.container
        let view = container.viewContext
        let results = Collected(view.observe(FetchRequest<Note>(orderedBy: [.ascending("title")])))
        #expect(try await results.first().records.isEmpty)

        let writer = try store.another()
        defer { writer.close() }
        let batch = writer.newBackgroundContext(name: "import")
        let notes = (0..<50).map { Note(title: String(format: "n%02d", $0), pinned: $0 < 10) }
        let token = try #require(try batch.batchInsert(notes, author: "bulk"))
        let inserted = try await results.first { $0.records.count == 50 }
        #expect(inserted.diff.inserted == Array(0..<50))

        #expect(try batch.batchDelete(Note.self, where: Column("pinned") == true, author: "bulk") == 10)
        let afterDelete = try await results.first { $0.records.count == 40 }
        #expect(afterDelete.diff.removed == Array(0..<10))

        let history = try container.store.history(after: token.rawValue > 0 ? HistoryToken(token.rawValue - 1) : .zero)
        #expect(history.map(\.contextName) == ["import", "import"])
        #expect(history.map(\.author) == ["bulk", "bulk"])
        #expect(history.map(\.changes.count) == [50, 10])
    }

    @Test("a pinned context reads the state it pinned until it advances")
    func pinnedReads() throws {
        let store = try NotesStore()
        let container = store.container
        let reader = container.newBackgroundContext(name: "reader")
        let writer = container.newBackgroundContext(name: "writer")
        try writer.insert(Note(title: "first"))
        try writer.save()
        try reader.pin()
        let pinned = try #require(reader.pinnedToken)
        try writer.insert(Note(title: "second"))
        let second = try #require(try writer.save())
        #expect(try reader.fetch(Note.self).map(\.title) == ["first"])
        #expect(reader.pinnedToken == pinned)
        try reader.advance()
        #expect(reader.pinnedToken == second)
        #expect(try reader.fetch(FetchRequest<Note>(orderedBy: [.ascending("title")])).map(\.title) == ["first", "second"])
        try reader.unpin()
        #expect(!reader.isPinned)
    }

    @Test("the change stream reports each transaction with its origin and object ids per entity")
    func changeStream() async throws {
        let store = try NotesStore()
        let container = store.container
        let changes = Collected(container.changes())
        let other = try store.another()
        defer { other.close() }
        let folder = Folder(name: "Work")
        let note = Note(title: "t", folder: Reference(folder))
        try other.viewContext.insert(folder)
        try other.viewContext.insert(note)
        let token = try other.viewContext.save(author: "bob")
        let change = try await changes.first()
        #expect(change.token == token)
        #expect(change.origin == .local)
        #expect(change.author == "bob")
        #expect(change.contextName == "view")
        #expect(change.objectIDs(.insert, entity: "Note") == [note.objectID])
        #expect(change.objectIDs(.insert, entity: "Folder") == [folder.objectID])
    }

    @Test("errors say what failed and keep the unsaved changes")
    func errors() throws {
        let store = try NotesStore()
        let container = store.container
        let context = container.viewContext
        #expect(throws: ContextError.self) { try context.insert(Unknown()) }
        let note = Note(title: "x")
        #expect { try context.update(note) } throws: { ($0 as? ContextError)?.code == .objectNotFound }
        try context.insert(note)
        #expect { try context.insert(note) } throws: { ($0 as? ContextError)?.code == .duplicateObject }
        container.close()
        #expect { try context.save() } throws: { ($0 as? ContextError)?.code == .closed }
        #expect(context.hasChanges)
    }

    /// A note as an app declares it once release 2 deprecates `body`.
    struct ReleaseTwoNote: Record, Equatable {
        static let entityName = "Note"
        var id = UUID()
        var title: String?
        var pinned = false
    }

    @Test("a deprecated attribute: records neither read nor write it, saves keep its value, and a record that still has it is told so")
    func deprecatedAttribute() throws {
        let directory = try TemporaryDirectory("deprecated")
        let path = directory.file("store.sqlite")
        let id = UUID()
        let first = try Container(path: path, schema: .notes)
        try first.viewContext.insert(Note(id: id, title: "t", body: "kept"))
        try first.viewContext.save()
        first.close()
        var release2 = Schema.notes
        release2.version = 2
        release2.entities[1].attributes[1].deprecated = true
        let container = try Container(path: path, schema: release2)
        defer { container.close() }
        var note = try #require(try container.viewContext.object(ReleaseTwoNote.self, id: id))
        note.title = "edited"
        try container.viewContext.update(note)
        try container.viewContext.save()
        try container.viewContext.insert(ReleaseTwoNote(title: "new"))
        try container.viewContext.save()
        #expect(try container.store.read("SELECT title, body FROM Note ORDER BY title") == [[.text("edited"), .text("kept")], [.text("new"), .null]])
        // A record type that still has the property reads it as absent, and cannot write it.
        #expect(try container.viewContext.object(Note.self, id: id)?.body == nil)
        #expect { try container.viewContext.insert(Note(title: "x", body: "y")) } throws: { error in
            (error as? ContextError)?.message.contains("deprecates") == true
        }
        // A fetched object is deleted with no conflict: the hidden column's value is no change the context missed.
        let other = container.newBackgroundContext()
        other.mergePolicy = .storeWins
        let fetched = try #require(try other.object(ReleaseTwoNote.self, id: id))
        try other.delete(fetched)
        try other.save()
        #expect(other.conflicts.isEmpty, "\(other.conflicts)")
        #expect(try container.store.read("SELECT count(*) FROM Note WHERE id = ?", [.text(id.uuidString.lowercased())]) == [[.integer(0)]])
    }
}
