import Foundation
import LogsyncContexts
import LogsyncPlatform
import LogsyncTestKit
import Testing

/// A context in this process and the `notes` app in another, on one store file.
@Suite("contexts across two processes")
struct TwoProcessTests {
    let notes = Products.path("notes")

    /// The watcher's commit monitor looks without an event only after a minute (`LOGSYNC_COMMIT_FALLBACK_MS`),
    /// so a save that inotify did not bring fails the 30 s deadline of each line, on any machine. How fast
    /// it arrives is `logsync-bench latency`'s `context_p50_ms`.
    @Test("a save in one process reaches the other's observers with the right object ids, through inotify")
    func saveReachesAnotherProcess() async throws {
        let store = try NotesStore()
        let (path, container) = (store.path, store.container)
        var environment = ProcessInfo.processInfo.environment
        environment["LOGSYNC_COMMIT_FALLBACK_MS"] = "60000"
        let watcher = try Subprocess(notes, ["watch", "--store", path, "--timestamps", "--seconds", "300"], environment: environment)
        defer { watcher.process.terminate() }
        _ = try await watcher.line(startingWith: "@", timeout: .seconds(20))

        var delays: [Double] = []
        for round in 0..<5 {
            let note = Note(title: "round \(round)")
            try container.viewContext.insert(note)
            let before = WallClock.nanoseconds()
            try container.viewContext.save(author: "test")
            let id = note.id.uuidString.lowercased()
            let line = try await watcher.line(containing: "+ \(id)", timeout: .seconds(30))
            let seen = try #require(UInt64(line.dropFirst().prefix { $0 != " " }))
            delays.append(Double(seen - before) / 1e6)
        }
        print("save → observer in another process, ms: \(delays.map { String(format: "%.2f", $0) })")
    }

    @Test("another process's observers fire with the ids of what this process saved, updated and deleted")
    func observersSeeEveryKind() async throws {
        let store = try NotesStore()
        let (path, container) = (store.path, store.container)
        let context = container.viewContext
        var note = Note(title: "b")
        try context.insert(note)
        try context.save()
        let watcher = try Subprocess(notes, ["watch", "--store", path, "--seconds", "300"])
        defer { watcher.process.terminate() }
        _ = try await watcher.line(startingWith: "1 note(s)", timeout: .seconds(20))
        let id = note.id.uuidString.lowercased()

        note.title = "a"
        try context.update(note)
        let token = try #require(try context.save())
        _ = try await watcher.line(containing: "~ \(id)   a")
        _ = try await watcher.line(containing: "merged token \(token) from local")
        try context.delete(note)
        try context.save()
        _ = try await watcher.line(containing: "- \(id)")
    }

    @Test("an edit in another process merges here: same property by policy, other properties kept", arguments: [
        MergePolicy.mineWins, MergePolicy.storeWins,
    ])
    func remoteEditMerges(policy: MergePolicy) async throws {
        let store = try NotesStore()
        let (path, container) = (store.path, store.container)
        let context = container.viewContext
        context.mergePolicy = policy
        let events = Collected(context.events())
        var note = Note(title: "title", body: "body")
        try context.insert(note)
        try context.save()
        note.title = "my title"
        try context.update(note)

        let id = note.id.uuidString.lowercased()
        let edit = try await Subprocess.run(notes, ["edit", "--store", path, id, "--title", "their title", "--body", "their body"])
        #expect(edit.status == 0, "\(edit.stderr)")
        let merged = try await events.first { $0.cause == .merge && !$0.conflicts.isEmpty }
        #expect(merged.conflicts.map(\.kind) == [.properties(["title"])])
        #expect(merged.origins == [.local])

        let view = try #require(try context.object(Note.self, id: note.id))
        #expect(view.body == "their body", "the property only the other process changed is merged")
        #expect(view.title == (policy.preferred == .mine ? "my title" : "their title"))
        try context.save(author: "test")
        let list = try await Subprocess.run(notes, ["list", "--store", path])
        #expect(list.stdout.contains(policy.preferred == .mine ? "my title" : "their title"))
    }

    @Test("a note deleted by another process while edited here is an event, not a crash or a silent loss")
    func remoteDeleteWhileEditing() async throws {
        let store = try NotesStore()
        let (path, container) = (store.path, store.container)
        let context = container.viewContext
        context.mergePolicy = .storeWins
        let events = Collected(context.events())
        var note = Note(title: "title")
        try context.insert(note)
        try context.save()
        note.title = "edited"
        try context.update(note)

        let delete = try await Subprocess.run(notes, ["delete", "--store", path, note.id.uuidString.lowercased()])
        #expect(delete.status == 0, "\(delete.stderr)")
        let merged = try await events.first { $0.cause == .merge && $0.deleted.contains(note.objectID) }
        let conflict = try #require(merged.conflicts.first)
        #expect(conflict.kind == .deletedWhileEdited)
        #expect(conflict.resolution == .tookStore)
        #expect(conflict.mine["title"] == "edited", "the lost edit is handed to the app")
        #expect(context.conflicts.count == 1)
        #expect(!context.hasChanges)
        #expect(try context.object(Note.self, id: note.id) == nil)
    }
}
