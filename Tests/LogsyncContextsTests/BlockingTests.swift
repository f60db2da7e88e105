import Foundation
import LogsyncContexts
import LogsyncPlatform
import LogsyncTestKit
import Synchronization
import Testing

/// Waits that must not spread: a container's merge must not need Swift's cooperative pool, and a save
/// waiting for another process's lock must not hold up the context's other work.
@Suite("Waits that do not spread", .serialized)
struct BlockingTests {
    @Test("the container merges on a thread of its own: a cooperative pool with every thread blocked does not hold it up")
    func mergesOffThePool() async throws {
        let store = try NotesStore()
        let writer = try store.another()
        defer { writer.close() }
        let context = store.container.viewContext
        let before = context.mergedToken

        // Every thread of the cooperative pool but the one this test runs on, blocked until released.
        // Other tests may hold pool threads for a while (CPU-bound work in synchronous tests): the test
        // waits for the blockers without holding a thread, then goes on synchronously on the last one.
        let release = Blockers()
        let width = ProcessInfo.processInfo.activeProcessorCount
        for _ in 0..<(width - 1) { Task.detached { release.block() } }
        do {
            try await eventually(within: .seconds(120), "the pool's other threads to come free") { release.blocked >= width - 1 }
        } catch {
            release.open()
            throw error
        }
        // This test's own thread is blocked too from here on: it waits without yielding.
        try writer.viewContext.insert(Note(title: "while the pool is busy"))
        let saved = try #require(try writer.viewContext.save(author: "other"))
        let deadline = ContinuousClock.now + .seconds(30)
        while context.mergedToken < saved, ContinuousClock.now < deadline { usleep(1_000) }
        let merged = context.mergedToken
        release.open()
        #expect(merged >= saved, "merged while no pool thread was free (from \(before) to \(merged), saved \(saved))")
        #expect(try context.fetch(Note.self).map(\.title) == ["while the pool is busy"])
    }

    @Test("a save waiting for another process's write lock does not hold up fetches, edits or merges of its context")
    func saveDoesNotHoldTheContext() async throws {
        let store = try NotesStore()
        let context = store.container.newBackgroundContext(name: "slow")
        var note = Note(title: "first")
        try context.insert(note)
        // Another process holds the write lock until told to let go (within the store's 5 s busy timeout).
        let holder = try Subprocess("/usr/bin/python3", ["-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            sys.stdin.readline()
            db.execute("COMMIT")
            """, store.path])
        defer { holder.process.terminate() }
        _ = try await holder.line(startingWith: "locked", timeout: .seconds(20))

        let saved = Mutex<Result<HistoryToken?, any Error>?>(nil)
        Thread.detachNewThread {
            let result = Result { try context.save(author: "slow") }
            saved.withLock { $0 = result }
        }
        // The save announces itself (the store's -writers file) before it waits for SQLite's lock.
        let announcement = try AnnouncementLock(path: store.path + "-writers")
        try await eventually(within: .seconds(30), every: .milliseconds(1), "the save to wait for the lock") { announcement.isAnnounced }

        // The holder lets go only when told, after these: were they to wait for the save, they would wait
        // until its busy timeout failed it, and the save would not be waiting any more.
        #expect(context.hasChanges)
        #expect(try context.fetch(Note.self).map(\.title) == ["first"])
        note.title = "edited while saving"
        try context.update(note)
        #expect(saved.withLock { $0 } == nil, "reads and edits went on while the save was still waiting")
        try holder.send("commit\n")

        let token = try await eventually(within: .seconds(20), every: .milliseconds(5), "the save to finish") { saved.withLock { $0 } }.get()
        #expect(try store.container.store.history().last?.token == token)
        // The edit made meanwhile is still unsaved, over the saved row, and the next save writes it.
        #expect(context.changedObjects == [note.objectID])
        try context.save(author: "slow")
        #expect(!context.hasChanges)
        let reader = try store.another()
        defer { reader.close() }
        #expect(try reader.viewContext.fetch(Note.self).map(\.title) == ["edited while saving"])
    }
}

/// Blocks cooperative-pool threads until opened.
final class Blockers: Sendable {
    private let state = Mutex((blocked: 0, open: false))

    func block() {
        state.withLock { $0.blocked += 1 }
        while !state.withLock({ $0.open }) { usleep(500) }
    }

    /// How many are blocked now.
    var blocked: Int { state.withLock { $0.blocked } }

    func open() { state.withLock { $0.open = true } }
}
