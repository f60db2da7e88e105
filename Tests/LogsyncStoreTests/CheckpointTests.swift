import Foundation
import LogsyncCore
@testable import LogsyncStore
import LogsyncTestKit
import Testing
import LogsyncSQLite

/// The store replaces SQLite's automatic checkpoint with its own (`Store/Checkpoints.swift`): passive
/// checkpoints after the writer lock is released, on the committing thread or on a checkpoint thread
/// during imports, and a pass under the writer lock once the WAL is past `Store.restartFrames`. If that
/// machinery stops working, nothing fails at once: the WAL just grows (to `writerCheckpointFrames`, where
/// the writer's fallback takes over) and readers slow down. These tests make that visible.
@Suite("Background checkpoints")
struct CheckpointTests {
    static let schema = Fixtures.docSchema

    /// 16,000 characters: a row and its state take about four pages each (overflow pages), so a few
    /// thousand imported changes write more WAL frames than `Store.restartFrames`.
    static let body = String(repeating: "b", count: 16_000)

    /// Imports `segments` segments from one remote node, each of `transactions` transactions of
    /// `changes` inserts, in batches of `batchChanges` changes (each batch a sync transaction).
    static func importInserts(
        into store: Store, segments: Int, transactions: Int, changes: Int, batchChanges: Int
    ) throws {
        for segment in Fixtures.docSegments(count: segments, transactions: transactions, changes: changes, body: body) {
            let outcome = try store.sync.importSegment(
                header: segment.header, transactions: segment.transactions, checksum: segment.checksum, account: "default",
                batching: ImportBatching(maximumChanges: batchChanges))
            #expect(outcome == .applied(transactions: transactions))
        }
    }

    /// Size in bytes of the file at `path`, 0 when it does not exist.
    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// File descriptors of this process open on `path` or its `-wal`, `-shm` and `-journal` files.
    static func openDescriptors(on path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { descriptor in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"),
                target == path || target.hasPrefix(path + "-")
            else { return nil }
            return target
        }
    }

    @Test("after imports past restartFrames and their checkpoints, new writes reuse the WAL instead of growing it")
    func walStartsOver() throws {
        let directory = try TemporaryDirectory("ckpt")
        let path = directory.file("store.sqlite")
        let store = try Store(path: path, schema: Self.schema)
        // 2,000 changes of about 8 pages each: some 16,000 pages, more than restartFrames.
        try Self.importInserts(into: store, segments: 20, transactions: 10, changes: 10, batchChanges: 50)
        let connection = try Connection(path: path)
        let pages = try #require(try connection.int64("PRAGMA page_count"))
        #expect(Int(pages) > Store.restartFrames, "the import must write more pages than restartFrames")

        // How far the WAL grew during the import depends on how far the checkpoints lagged behind it (on a
        // busy machine, past restartFrames). Once they have run, everything in it has been copied, or
        // what is left is less than a checkpoint waits for: the next writes start the WAL over, or add a
        // few frames to a short one, within the file as it is.
        store.waitForBackgroundCheckpoints()
        let grown = Self.fileSize(path + "-wal")
        try store.write { tx in
            for _ in 0..<60 { try tx.insert("Doc", ["id": Fixtures.id(), "body": .text(Self.body)]) }
        }
        #expect(Self.fileSize(path + "-wal") == grown, "the WAL grew from \(grown) bytes after the checkpoints")
        let result = try connection.rows("PRAGMA wal_checkpoint(PASSIVE)")
        guard case .integer(let frames)? = result.first?[1] else {
            Issue.record("PRAGMA wal_checkpoint returned \(result)")
            return
        }
        #expect(Int(frames) < 2 * Store.checkpointFrames, "WAL frames after the import's checkpoints and one write: \(frames)")
    }

    @Test("closing the store closes every file it opened, the checkpoint thread's included")
    func closingLeavesNoDescriptors() throws {
        let directory = try TemporaryDirectory("ckpt")
        let path = directory.file("store.sqlite")
        var store: Store? = try Store(path: path, schema: Self.schema)
        // About 1,600 pages, past checkpointFrames: the import hands a checkpoint to the checkpoint thread,
        // which opens its own connection.
        try Self.importInserts(into: try #require(store), segments: 2, transactions: 10, changes: 10, batchChanges: 100)
        store?.waitForBackgroundCheckpoints()
        let databaseDescriptors = try Self.openDescriptors(on: path).filter { $0 == path }
        #expect(databaseDescriptors.count == 3, "writer, reader and checkpoint connections: \(databaseDescriptors)")

        store = nil
        #expect(try Self.openDescriptors(on: path) == [])
    }
}
