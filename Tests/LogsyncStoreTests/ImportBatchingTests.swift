import Foundation
import LogsyncCore
import LogsyncPlatform
@testable import LogsyncStore
import LogsyncTestKit
import Synchronization
import Testing
import LogsyncSQLite

/// Imports group remote transactions into as few SQLite transactions as no writer waits for
/// (`ImportBatching`, `Sync/SegmentImport.swift`). Each test watches where batches end by reading, through
/// the store's reader connection, the cursor that is *committed* whenever the import asks for its next
/// segment: inside an open batch that is still the cursor from before the batch.
@Suite("Import batching")
struct ImportBatchingTests {
    static let schema = Fixtures.docSchema
    /// Batching without its time bound (a minute): on a loaded machine 100 ms pass between two segments,
    /// and only ``timeBound()`` is about that bound.
    static let untimed = ImportBatching(maximumMilliseconds: 60_000)

    /// What an import of `segments` did: the committed cursor each time it asked for a segment, and the
    /// outcome of every segment.
    struct Observed {
        var committedWhenAsked: [UInt64] = []
        var outcomes: [ImportOutcome] = []
    }

    static func importObserving(_ segments: [SegmentImport], into store: Store, batching: ImportBatching) throws -> Observed {
        let origin = segments[0].header.node
        var pending = segments[...]
        var observed = Observed()
        try store.sync.importSegments(
            from: origin, account: "default", batching: batching,
            next: { _ in
                guard let segment = pending.popFirst() else { return nil }
                observed.committedWhenAsked.append(try store.sync.appliedSequence(from: origin))
                return segment
            },
            outcome: { _, outcome in observed.outcomes.append(outcome) })
        return observed
    }

    @Test("with no writer waiting, all segments are applied in one SQLite transaction")
    func oneBatch() throws {
        let directory = try TemporaryDirectory("batch")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let segments = Fixtures.docSegments(count: 5, transactions: 4, changes: 5)
        let observed = try Self.importObserving(segments, into: store, batching: Self.untimed)
        #expect(observed.committedWhenAsked == [0, 0, 0, 0, 0])
        #expect(observed.outcomes == Array(repeating: .applied(transactions: 4), count: 5))
        #expect(try store.sync.appliedSequence(from: segments[0].header.node) == 20)
        #expect(try store.read("SELECT count(*) FROM Doc") == [[.integer(100)]])
    }

    @Test("an import that is handed no segment begins no write transaction")
    func nothingToImport() throws {
        let directory = try TemporaryDirectory("batch")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let segments = Fixtures.docSegments(count: 2, transactions: 2, changes: 5)
        _ = try Self.importObserving(segments, into: store, batching: Self.untimed)
        // `PRAGMA data_version` of another connection changes when anyone else commits. The sync engine
        // hands over nothing when every segment it sees is applied or after a gap.
        let watcher = try Connection(path: store.path)
        let before = try watcher.int64("PRAGMA data_version")
        var asked: [UInt64] = []
        try store.sync.importSegments(
            from: segments[0].header.node, account: "default", next: { asked.append($0); return nil }, outcome: { _, _ in })
        #expect(asked == [4], "asked once, with the committed cursor")
        #expect(try watcher.int64("PRAGMA data_version") == before)
    }

    @Test("a batch ends before the remote transaction that would take it past maximumChanges")
    func sizeBound() throws {
        let directory = try TemporaryDirectory("batch")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let segments = Fixtures.docSegments(count: 3, transactions: 4, changes: 5)
        // Two transactions (10 changes) per batch: [1 2] [3 4 | 5 6] … the second segment is asked for
        // inside the batch that started after transaction 2, the third inside the one after 6.
        let observed = try Self.importObserving(segments, into: store, batching: ImportBatching(maximumChanges: 12, maximumMilliseconds: 60_000))
        #expect(observed.committedWhenAsked == [0, 2, 6])
        #expect(observed.outcomes == Array(repeating: .applied(transactions: 4), count: 3))
        #expect(try store.read("SELECT count(*) FROM Doc") == [[.integer(60)]])
    }

    @Test("a writer announcing itself from another process ends the batch at the next whole transaction")
    func announcedWriter() throws {
        let directory = try TemporaryDirectory("batch")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        // What a `Store` in another process holds while it waits for the write lock and writes.
        let writer = try AnnouncementLock(path: WriterIntent.path(of: store.path))
        try writer.announce()
        let segments = Fixtures.docSegments(count: 3, transactions: 2, changes: 5)
        let observed = try Self.importObserving(segments, into: store, batching: Self.untimed)
        // One transaction per batch: segment 2 is asked for in the batch after transaction 1, 3 after 3.
        #expect(observed.committedWhenAsked == [0, 1, 3])
        #expect(observed.outcomes == Array(repeating: .applied(transactions: 2), count: 3))

        writer.withdraw()
        let more = Fixtures.docSegments(count: 3, transactions: 2, changes: 5)
        #expect(try Self.importObserving(more, into: store, batching: Self.untimed).committedWhenAsked == [0, 0, 0])
    }

    @Test("a batch ends after maximumMilliseconds, for writers that cannot announce themselves")
    func timeBound() throws {
        let directory = try TemporaryDirectory("batch")
        let store = try Store(path: directory.file("s.sqlite"), schema: Self.schema)
        let segments = Fixtures.docSegments(count: 3, transactions: 2, changes: 5)
        let observed = try Self.importObserving(segments, into: store, batching: ImportBatching(maximumMilliseconds: 0))
        #expect(observed.committedWhenAsked == [0, 1, 3])
        #expect(try store.read("SELECT count(*) FROM Doc") == [[.integer(30)]])
    }

    @Test("a write that finds the write lock held announces itself to any descriptor or process until it has committed; one that finds it free, to none")
    func writesAnnounce() throws {
        let directory = try TemporaryDirectory("batch")
        let path = directory.file("s.sqlite")
        let store = try Store(path: path, schema: Self.schema)
        // A busy timeout far longer than the test: the waiting write must still be waiting when it is looked at.
        let other = try Store(path: path, schema: Self.schema, options: StoreOptions(busyTimeoutMilliseconds: 600_000))
        let probe = try AnnouncementLock(path: WriterIntent.path(of: path))
        #expect(!probe.isAnnounced)
        #expect(!store.intent.writerWaits)
        // Uncontended: the writer's own process knows, no other needs to.
        try other.write { tx in
            #expect(!probe.isAnnounced)
            #expect(other.intent.writersOfThisProcess)
            try tx.execute("INSERT INTO Doc(id, body) VALUES (?, 'x')", [Fixtures.id()])
        }
        #expect(!other.intent.writersOfThisProcess)

        // Another connection holds SQLite's write lock, as an import in another process would. Waits here
        // poll on this thread, not the cooperative pool, which other tests may hold for many seconds.
        let holder = try Connection(path: path)
        try holder.execute("BEGIN IMMEDIATE")
        let outcome = Mutex<Result<Void, any Error>?>(nil)
        let writer = Thread {
            let result = Result { try other.write { tx in try tx.execute("INSERT INTO Doc(id, body) VALUES (?, 'y')", [Fixtures.id()]) } }
            outcome.withLock { $0 = result }
        }
        writer.start()
        func awaitCondition(_ condition: () -> Bool) -> Bool {
            let deadline = ContinuousClock.now + .seconds(120)
            while !condition(), ContinuousClock.now < deadline { Pause.microseconds(1_000) }
            return condition()
        }
        #expect(awaitCondition { probe.isAnnounced }, "a waiting writer announces itself")
        #expect(store.intent.writerWaits, "the importing store sees the other store's writer")
        #expect(outcome.withLock { $0 == nil }, "the write waits for the lock")
        try holder.execute("COMMIT")
        #expect(awaitCondition { outcome.withLock { $0 != nil } }, "the waiting write commits once the lock is free")
        #expect(throws: Never.self) { try outcome.withLock { $0 }?.get() }
        #expect(!probe.isAnnounced)
        #expect(!store.intent.writerWaits)
        #expect(try store.read("SELECT count(*) FROM Doc") == [[.integer(2)]])
    }

    @Test("an announcement ends when its lock is closed (as when a writer process dies)")
    func announcementEndsWithDescriptor() throws {
        let directory = try TemporaryDirectory("batch")
        let path = directory.file("writers")
        let probe = try AnnouncementLock(path: path)
        do {
            let writer = try AnnouncementLock(path: path)
            try writer.announce()
            try writer.announce()
            #expect(probe.isAnnounced)
            writer.withdraw()
            #expect(!probe.isAnnounced)
            try writer.announce()
            #expect(probe.isAnnounced)
        }
        #expect(!probe.isAnnounced)
    }
}
