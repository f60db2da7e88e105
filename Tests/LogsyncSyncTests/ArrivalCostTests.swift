import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncSync
import LogsyncTestKit
import LogsyncTransport
import Testing

/// What one arrival costs must not grow with the folder: these tests count the transport's work
/// (listings, names looked at, files read) with thousands of segments in the folder.
@Suite("Cost per arrival")
struct ArrivalCostTests {
    static let historySegments = 2_000

    /// `count` one-row segments of a node that is not a store, numbered 1...count, written into the folder.
    static func writeHistory(_ count: Int, of node: NodeID, into transport: DirectoryTransport, from first: UInt64 = 1) throws {
        for sequence in first..<(first + UInt64(count)) {
            let bytes = try SegmentEncoder.encode(
                schemaVersion: 1, account: "default", node: node,
                transactions: [LogTransaction(
                    sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_000, logical: UInt16(truncatingIfNeeded: sequence)),
                    author: "history", contextName: nil,
                    changes: [LogChange(entity: "Note", primaryKey: SyncCluster.id(), kind: .insert, causalLength: 1, values: ["title": .text("h\(sequence)")])])])
            try transport.publish(SegmentName(node: node, firstSequence: sequence, lastSequence: sequence), bytes: bytes)
        }
    }

    @Test("with the watcher running, an arrival lists no folder and reads only the new segment, however many the folder holds")
    func arrivalLooksOnlyAtWhatArrived() async throws {
        let cluster = try SyncCluster("cost")
        let b = try cluster.store("b")
        let history = NodeID(UUID().uuidString.lowercased())
        let writer = try DirectoryTransport(root: cluster.shared, account: "default", node: history)
        try Self.writeHistory(Self.historySegments, of: history, into: writer)

        let transport = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(b.nodeID))
        let engine = SyncEngine(store: b, transport: transport)
        let arrivals = transport.arrivals(rescanInterval: .seconds(3_600))
        var wakeups = arrivals.makeAsyncIterator()
        _ = await wakeups.next()
        // The first round lists everything once and applies the history.
        let first = try engine.sync()
        #expect(first.appliedTransactions == Self.historySegments)
        #expect(transport.counters.listedEntries >= Self.historySegments)

        for round in 0..<5 {
            let sequence = UInt64(Self.historySegments + 1 + round)
            let before = transport.counters
            try Self.writeHistory(1, of: history, into: writer, from: sequence)
            // Rounds until it is applied (the watcher's report may come a moment after the file).
            var applied: [SegmentName] = []
            let deadline = ContinuousClock.now + .seconds(20)
            while applied.isEmpty, ContinuousClock.now < deadline {
                _ = await wakeups.next()
                applied += try engine.sync().applied
            }
            let after = transport.counters
            #expect(applied.map(\.firstSequence) == [sequence])
            #expect(after.folderListings == before.folderListings, "round \(round): no node folder listed (\(before) → \(after))")
            #expect(after.listedEntries == before.listedEntries)
            #expect(after.filesRead - before.filesRead == 1, "round \(round): only the new segment read (\(before) → \(after))")
            // The new name and the writer's temporary file, perhaps reported twice over several wake-ups.
            #expect(after.namesLookedAt - before.namesLookedAt <= 6, "round \(round): \(before) → \(after)")
        }
        #expect(try b.sync.appliedSequence(from: history) == UInt64(Self.historySegments + 5))
        // A round with nothing new lists nothing and reads nothing; it may look at a name the watcher
        // reported late for the last write (its temporary file going away, say), and no more.
        let idle = transport.counters
        #expect(try engine.sync().applied.isEmpty)
        let afterIdle = transport.counters
        #expect(afterIdle.accountListings == idle.accountListings && afterIdle.folderListings == idle.folderListings, "\(idle) → \(afterIdle)")
        #expect(afterIdle.listedEntries == idle.listedEntries && afterIdle.filesRead == idle.filesRead, "\(idle) → \(afterIdle)")
        #expect(afterIdle.namesLookedAt - idle.namesLookedAt <= 2, "\(idle) → \(afterIdle)")
    }

    @Test("without a watcher, a round lists only folders whose status changed since they were listed")
    func rescanListsOnlyChangedFolders() throws {
        let cluster = try SyncCluster("rescan")
        let b = try cluster.store("b")
        let quiet = NodeID(UUID().uuidString.lowercased()), busy = NodeID(UUID().uuidString.lowercased())
        for node in [quiet, busy] {
            try Self.writeHistory(300, of: node, into: try DirectoryTransport(root: cluster.shared, account: "default", node: node))
        }
        // Both folders last changed an hour ago: a listing then is not too close to a change to trust.
        let hourAgo = Date(timeIntervalSinceNow: -3_600)
        for node in [quiet, busy] {
            try FileManager.default.setAttributes([.modificationDate: hourAgo], ofItemAtPath: cluster.shared + "/default/" + node.rawValue)
        }
        let transport = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(b.nodeID))
        let engine = SyncEngine(store: b, transport: transport)
        #expect(try engine.sync().appliedTransactions == 600)
        #expect(transport.counters.folderListings == 2)

        let before = transport.counters
        #expect(try engine.sync().applied.isEmpty)
        #expect(transport.counters.folderListings == before.folderListings, "unchanged folders are not listed again")
        #expect(transport.counters.filesRead == before.filesRead)

        try Self.writeHistory(1, of: busy, into: try DirectoryTransport(root: cluster.shared, account: "default", node: busy), from: 301)
        let report = try engine.sync()
        #expect(report.applied.map(\.node) == [busy])
        #expect(transport.counters.folderListings == before.folderListings + 1, "only the folder that changed is listed")
    }

    @Test("after a restart, applied segments are read again a bounded number per round, and a changed one is still quarantined")
    func restartChecksInBoundedRounds() throws {
        let cluster = try SyncCluster("recheck")
        let b = try cluster.store("b")
        let history = NodeID(UUID().uuidString.lowercased())
        let writer = try DirectoryTransport(root: cluster.shared, account: "default", node: history)
        let count = SyncEngine.checksPerRound * 2 + 10
        try Self.writeHistory(count, of: history, into: writer)
        #expect(try cluster.engine(b).sync().appliedTransactions == count)

        // Another machine claiming the node's id writes the last segment again, differently.
        let last = SegmentName(node: history, firstSequence: UInt64(count), lastSequence: UInt64(count))
        let forged = try SegmentEncoder.encode(
            schemaVersion: 1, account: "default", node: history,
            transactions: [LogTransaction(sequence: UInt64(count), timestamp: HLCTimestamp(physicalMilliseconds: 1_700_000_000_001, logical: 0), author: "mallory",
                                          contextName: nil, changes: [])])
        try Data(forged).write(to: URL(fileURLWithPath: writer.path(of: last)))

        // A restart: a new transport and engine know nothing of what was checked.
        let transport = try DirectoryTransport(root: cluster.shared, account: "default", node: NodeID(b.nodeID))
        let engine = SyncEngine(store: b, transport: transport)
        var rounds = 0
        var quarantined: [SegmentName] = []
        var reads: [Int] = []
        repeat {
            let before = transport.counters.filesRead
            let report = try engine.sync()
            reads.append(transport.counters.filesRead - before)
            quarantined += report.quarantined
            rounds += 1
            if report.unchecked == 0 { break }
        } while rounds < 100
        #expect(reads.allSatisfy { $0 <= SyncEngine.checksPerRound }, "\(reads)")
        #expect(rounds >= 3, "the check is spread over rounds: \(reads)")
        #expect(reads.reduce(0, +) == count, "every applied segment was read once: \(reads)")
        #expect(quarantined == [last])
        #expect(try b.read("SELECT count(*) FROM Note") == [[.integer(Int64(count))]])
    }
}
