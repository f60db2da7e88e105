import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

@Suite("Schema versions and arrival notifications")
struct SchemaAndArrivalTests {
    /// Version 2 adds a column to Folder, additively.
    static let version2: Schema = {
        var schema = SyncCluster.schema
        schema.version = 2
        schema.entities[0].attributes.append(Attribute("color", .text))
        return schema
    }()

    @Test("a segment from a newer schema is applied in what this store declares; its new column is merged once the schema catches up")
    func newerSchemaKept() throws {
        let cluster = try SyncCluster("schema")
        let newer = try Store(path: cluster.storePath("new"), schema: Self.version2)
        let folder = SyncCluster.id()
        try newer.write { try $0.insert("Folder", ["id": folder, "name": "Work", "color": "blue"]) }
        _ = try cluster.engine(newer).sync()

        do {
            let older = try cluster.store("old")
            let report = try cluster.engine(older).sync()
            #expect(report.applied.map(\.firstSequence) == [1])
            #expect(report.keptForSchema.map(\.firstSequence) == [1])
            #expect(try older.sync.appliedSequence(from: NodeID(newer.nodeID)) == 1)
            #expect(try older.read("SELECT name FROM Folder") == [[.text("Work")]])
        }
        // The app upgrades: the same store opens with version 2 and the kept column merges.
        let upgraded = try Store(path: cluster.storePath("old"), schema: Self.version2)
        let report = try cluster.engine(upgraded).sync()
        #expect(report.applied.isEmpty && report.appliedKept == 1, "\(report)")
        #expect(try upgraded.read("SELECT name, color FROM Folder") == [[.text("Work"), .text("blue")]])
    }

    @Test("another node's publish wakes the reader at once through inotify")
    func arrivalsAreImmediate() async throws {
        let cluster = try SyncCluster("arrive")
        let a = try cluster.store("a"), b = try cluster.store("b")
        let reader = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(b.nodeID))
        let writer = try cluster.engine(a)
        // The first publish creates a's folder; the reader notices new node folders and watches them too.
        try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "first"]) }
        _ = try writer.sync()

        // An hour between rescans: whatever the reader learns within the test, inotify told it.
        let arrivals = reader.arrivals(rescanInterval: .seconds(3_600))
        var iterator = arrivals.makeAsyncIterator()
        _ = await iterator.next()  // the initial wake-up: a's folder is watched from here on
        _ = try reader.refresh(excluding: NodeID(b.nodeID))  // the first refresh lists everything
        for i in 0..<3 {
            try a.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": .text("n\(i)")]) }
            let published = try writer.sync().published
            // The watcher thread records the new name as the rename lands; a refresh then finds exactly that
            // segment without listing any folder. (Timed by the watcher's thread, not by when this task next
            // runs: on two busy cores the cooperative threads can be held for seconds.)
            let listings = reader.counters.folderListings
            let appeared = try await eventually(within: .seconds(60), "the watcher reports \(published)") { () -> [SegmentName]? in
                let view = try reader.refresh(excluding: NodeID(b.nodeID))
                return view.appeared.isEmpty ? nil : view.appeared
            }
            #expect(appeared == published, "\(appeared) vs \(published)")
            #expect(reader.counters.folderListings == listings, "no folder was listed to find it")
        }
        withExtendedLifetime(iterator) {}
        let report = try cluster.engine(b).sync()
        #expect(report.appliedTransactions == 4)
    }

    @Test("a large backlog of local history exports in bounded segments and applies in order")
    func largeBacklogExportsInBoundedSegments() throws {
        let cluster = try SyncCluster("backlog")
        let a = try cluster.store("a"), b = try cluster.store("b")
        for batch in 0..<10 {
            try a.write { tx in
                for i in 0..<500 { try tx.insert("Note", ["id": SyncCluster.id(), "title": .text("n\(batch).\(i)"), "rank": .integer(Int64(i))]) }
            }
        }
        let report = try cluster.engine(a, maximumChanges: 1_000).sync()
        #expect(report.published.count == 5, "two 500-change transactions per segment")
        #expect(report.published.map(\.firstSequence) == [1, 3, 5, 7, 9])
        let applied = try cluster.engine(b).sync()
        #expect(applied.appliedTransactions == 10)
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(5_000)]])
    }
}

@Suite("Batched imports")
struct BatchedImportTests {
    @Test("a half-applied segment resumes only with the same bytes; other bytes are divergence")
    func resumeNeedsSameBytes() throws {
        let cluster = try SyncCluster("batch")
        let b = try cluster.store("b")
        let origin = NodeID(UUID().uuidString.lowercased())
        let transactions = (1...2).map { sequence in
            LogTransaction(sequence: UInt64(sequence), timestamp: HLCTimestamp(rawValue: UInt64(sequence) << 20), author: "a", contextName: nil,
                           changes: [LogChange(entity: "Note", primaryKey: SyncCluster.id(), kind: .insert, causalLength: 1, values: ["title": .text("t\(sequence)")])])
        }
        let header = SegmentHeader.covering(transactions, from: origin)
        // Only the first transaction arrives in this call: the segment is left half applied.
        #expect(try b.sync.importSegment(header: header, transactions: [transactions[0]], checksum: 42, account: "default") == .applied(transactions: 1))
        #expect(try b.sync.appliedSequence(from: origin) == 1)
        #expect(try b.sync.importSegment(header: header, transactions: transactions, checksum: 43, account: "default") == .divergent)
        #expect(try b.sync.appliedSequence(from: origin) == 1)
        #expect(try b.sync.importSegment(header: header, transactions: transactions, checksum: 42, account: "default") == .applied(transactions: 1))
        #expect(try b.sync.appliedSequence(from: origin) == 2)
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(2)]])
    }
}

@Suite("Purge and sync")
struct PurgeAndSyncTests {
    @Test("purging history keeps what has not been exported yet, and it still ships")
    func purgeKeepsUnexportedHistory() throws {
        let cluster = try SyncCluster("purge")
        let a = try cluster.store("a"), b = try cluster.store("b")
        try a.write(author: "early") { try $0.insert("Note", ["id": SyncCluster.id(), "title": "shipped"]) }
        _ = try cluster.engine(a).sync()
        for i in 0..<3 { try a.write(author: "late") { try $0.insert("Note", ["id": SyncCluster.id(), "title": .text("pending \(i)")]) } }
        let newest = try a.currentToken()
        #expect(try a.purgeHistory(before: HistoryToken(newest.rawValue + 100)) == 1, "only the exported transaction goes")
        #expect(try a.history().map(\.author) == ["late", "late", "late"])
        _ = try cluster.engine(a).sync()
        _ = try cluster.engine(b).sync()
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(4)]])
    }
}

@Suite("Clock skew")
struct ClockSkewTests {
    @Test("a segment stamped far in the future is held and reported, not applied")
    func futureSegmentHeld() throws {
        let cluster = try SyncCluster("skew")
        let b = try cluster.store("b")
        let origin = NodeID(UUID().uuidString.lowercased())
        let yearAhead = UInt64(Date().timeIntervalSince1970 * 1000) + 365 * 24 * 3_600_000
        let note = SyncCluster.id()
        let bytes = try SegmentEncoder.encode(
            schemaVersion: 1, account: "default", node: origin,
            transactions: [LogTransaction(sequence: 1, timestamp: HLCTimestamp(physicalMilliseconds: yearAhead, logical: 0), author: "skewed", contextName: nil,
                                          changes: [LogChange(entity: "Note", primaryKey: note, kind: .insert, causalLength: 1, values: ["title": "from the future"])])])
        let transport = try DirectoryTransport(root: cluster.shared, account: "default", node: origin)
        try transport.publish(SegmentName(node: origin, firstSequence: 1, lastSequence: 1), bytes: bytes)
        let report = try cluster.engine(b).sync()
        #expect(report.heldForClockSkew.map(\.firstSequence) == [1])
        #expect(report.applied.isEmpty)
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(0)]])
        // Local writes are not dragged into the future either.
        try b.write { try $0.insert("Note", ["id": SyncCluster.id(), "title": "now"]) }
        let stamp = try #require(try b.history().last?.timestamp)
        #expect(stamp.physicalMilliseconds < yearAhead - 300 * 24 * 3_600_000)
    }
}
