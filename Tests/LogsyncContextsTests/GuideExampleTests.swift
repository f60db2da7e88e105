import Foundation
import LogsyncContexts
import LogsyncTestKit
import Synchronization
import Testing
import LogsyncControl

/// The example of `docs/contexts.md`, run as the guide writes it. Each block between `// guide:` markers
/// is the guide's code verbatim; `print` is captured so its lines can be checked, and the checks between
/// blocks say what the guide's comments claim. The records are the guide's `Folder` and `Note`, declared
/// in Support/Fixtures.swift. Keep the guide and this test in step.
@Suite("docs/contexts.md")
struct GuideExampleTests {
    @Test("the guide's example compiles, runs and shows what the guide says")
    func guideExample() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("notes.sqlite")
        let printed = PrintedLines()
        @Sendable func print(_ items: Any...) { printed.append(items.map { "\($0)" }.joined(separator: " ")) }

        // guide: open, insert, update, delete, save
        let container = try Container(path: path, schema: .notes)
        defer { container.close() }
        let context = container.viewContext

        let trips = Folder(name: "Trips")
        var lisbon = Note(title: "Lisbon", body: "pastéis", folder: Reference(trips))
        let porto = Note(title: "Porto", pinned: true, folder: Reference(trips))
        let draft = Note(title: "draft")
        try context.insert(trips)
        try context.insert(lisbon)
        try context.insert(porto)
        try context.insert(draft)
        try context.save(author: "alice")     // one history transaction: author "alice", context "view"

        lisbon.body = "pastéis de nata"
        try context.update(lisbon)            // records the properties that differ from what the context handed out
        try context.delete(draft)
        let token = try context.save(author: "alice")   // its history token; nil when there was nothing to save
        // end

        #expect(try context.save(author: "alice") == nil)
        let history = try container.store.history()
        #expect(history.count == 2)
        #expect(history.last?.token == token)
        #expect(history.map(\.author) == ["alice", "alice"])
        #expect(history.map(\.contextName) == ["view", "view"])
        #expect(Set(history[1].changes.map(\.kind)) == [.update, .delete])

        // guide: fetch
        let inTrips = FetchRequest<Note>(
            where: Column("folder") == trips.id && !Column("title").isNull,
            orderedBy: [.descending("pinned"), .ascending("title")],
            limit: 10)
        print(try context.fetch(inTrips).compactMap(\.title))   // ["Porto", "Lisbon"]
        print(try context.count(FetchRequest<Note>(where: Column("title").contains("LIS", caseInsensitive: true))))  // 1

        try context.forEachBatch(FetchRequest<Note>(orderedBy: [.ascending("title")]), size: 500) { batch in
            for note in batch { print(note.title ?? "") }       // 500 records in memory at a time, at most
        }
        // end
        #expect(printed.lines == [#"["Porto", "Lisbon"]"#, "1", "Lisbon", "Porto"])

        // guide: relationships
        let note = try context.fetch(inTrips)[0]
        let folder = try context.object(note.folder)             // Folder "Trips"; nil for none or a deleted one
        let notesOfFolder = try context.fetch(FetchRequest<Note>(where: Column("folder") == Reference(trips)))
        // end
        #expect(folder?.name == "Trips")
        #expect(notesOfFolder.count == 2)

        // guide: observe a fetch, watch the store
        let results = context.observe(FetchRequest<Note>(orderedBy: [.ascending("title")]))
        Task {
            for await update in results {                        // the records now, then again after every change
                for index in update.diff.inserted { print("+", update.records[index].title ?? "") }
                for index in update.diff.updated { print("~", update.records[index].title ?? "") }
                for move in update.diff.moved { print("moved", move.from, "->", move.to) }
                print("removed at", update.diff.removed)
            }
        }

        Task {
            for await change in container.changes() {            // every history transaction, by anyone
                print(change.token, change.origin, change.author ?? "-", change.objectIDs(.update, entity: "Note"))
            }
        }
        // end
        try await printed.waitFor("+ Porto")
        #expect(printed.lines.contains("+ Lisbon"))

        // guide: merge policies, events and conflicts
        context.mergePolicy = MergePolicy(preferring: .mine, overrides: ["Note.title": .store])
        let events = context.events()
        Task {
            for await event in events {
                for conflict in event.conflicts { print("conflict:", conflict) }
            }
        }

        var mine = try context.object(Note.self, id: lisbon.id)!
        mine.title = "Lisboa"
        mine.body = "custard tarts"
        try context.update(mine)
        // end

        // Another device changes the same note: a second container on the same file, as another process.
        let other = try Container(path: path, schema: .notes)
        defer { other.close() }
        let bobs = try #require(try other.editNote(lisbon.id, author: "bob") { theirs in
            theirs.title = "Lisbon, 2026"
            theirs.body = "tram 28"
            theirs.pinned = true
        })
        let conflictLine = "conflict: \(lisbon.objectID): properties([\"body\", \"title\"]) -> mixed(keptMine: [\"body\"])"
        try await printed.waitFor(conflictLine)
        try await printed.waitFor("\(bobs) local bob [\(lisbon.objectID)]")
        #expect(context.conflicts.count == 1)
        #expect(context.conflicts.first?.mine["title"] == "Lisboa")
        #expect(context.conflicts.first?.store["title"] == "Lisbon, 2026")

        // guide: merge policies, events and conflicts (continued)
        try context.save(author: "alice")
        // end
        let saved = try #require(try other.viewContext.object(Note.self, id: lisbon.id))
        #expect(saved.title == "Lisbon, 2026", "the override: the store's title wins")
        #expect(saved.body == "custard tarts", "mine wins the rest")
        #expect(saved.pinned, "changed on one side only: never in conflict")
        try await printed.waitFor("~ Lisbon, 2026")

        // guide: pinned reads
        let report = container.newBackgroundContext(name: "report")
        try report.pin()                  // reads now see the store as of this moment
        // end
        try other.viewContext.insert(Note(title: "Madrid"))
        try other.viewContext.save(author: "bob")
        printed.clear()
        // guide: pinned reads (continued)
        print(try report.count(FetchRequest<Note>()))   // still the pinned count
        try report.advance()              // move to the latest state and merge what happened in between
        try report.unpin()                // back to reading the latest state
        // end
        #expect(printed.lines.contains("2"), "the pinned count")
        #expect(try report.count(FetchRequest<Note>()) == 3)
        #expect(!report.isPinned)

        // guide: batch insert and delete
        let importer = container.newBackgroundContext(name: "import")
        try importer.batchInsert((1...1000).map { Note(title: "imported \($0)") }, author: "importer")
        let removed = try importer.batchDelete(Note.self, where: Column("title").contains("imported"), author: "importer")
        print(removed)                    // 1000
        // end
        #expect(printed.lines.contains("1000"))
        #expect(try context.fetch(FetchRequest<Note>(orderedBy: [.ascending("title")])).compactMap(\.title)
            == ["Lisbon, 2026", "Madrid", "Porto"])
    }
}

/// What the guide's code printed, line by line.
final class PrintedLines: Sendable {
    private let storage = Mutex<[String]>([])

    func append(_ line: String) { storage.withLock { $0.append(line) } }
    func clear() { storage.withLock { $0 = [] } }
    var lines: [String] { storage.withLock { $0 } }

    /// Waits until `line` has been printed, for at most `timeout`.
    func waitFor(_ line: String, within timeout: Duration = .seconds(30)) async throws {
        try await eventually(within: timeout, every: .milliseconds(1), "'\(line)' among \(lines.count) printed lines") { lines.contains(line) }
    }
}
