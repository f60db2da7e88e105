import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// Commits that come faster than a publish completes share a segment; a lone commit is not held back.
@Suite("Group publish, with real syncd processes", .serialized)
struct GroupPublishTests {
    /// The segment files of `node` in the shared folder, by first sequence.
    static func segments(of node: SyncdNode, in cluster: SyncdCluster) throws -> [(first: UInt64, last: UInt64)] {
        let folder = cluster.shared + "/test/" + node.nodeID!
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { !$0.hasPrefix(".") && $0.hasSuffix(".lseg") }.sorted().map { name in
            let parts = name.dropLast(5).split(separator: "-")
            return (UInt64(parts[0])!, UInt64(parts[1])!)
        }
    }

    @Test("a burst of 100 one-row commits while each publish takes 300 ms becomes a few segments, every transaction applied once and in order")
    func burstIsGrouped() async throws {
        let cluster = try cluster("group")
        let a = try cluster.addNode("a", rescanIntervalMilliseconds: 60_000), b = try cluster.addNode("b", rescanIntervalMilliseconds: 60_000)
        try await a.start(environment: ["LOGSYNC_FAULT": "export.slow-publish"])
        try await b.start()
        let store = try a.openStore()
        let count = 100
        let ids = (0..<count).map { _ in DatabaseValue.text(UUID().uuidString.lowercased()) }
        let started = ContinuousClock.now
        for (i, id) in ids.enumerated() {
            try store.write(author: "burst") { try $0.insert("Note", ["id": id, "title": .text("n\(i)"), "rank": .integer(Int64(i))]) }
        }
        let writing = ContinuousClock.now - started
        try await eventually(within: .seconds(60), every: .milliseconds(20), "b has every note:\n\(a.log)\n\(b.log)") {
            try b.openStore().read("SELECT count(*) FROM Note") == [[.integer(Int64(count))]]
        }
        let segments = try Self.segments(of: a, in: cluster)
        // A publish takes 300 ms, and every commit made meanwhile goes into the next segment: at most one
        // segment per 300 ms of writing, and a few more at the ends (a loaded machine writes more slowly,
        // and so may make more segments). One segment per commit would be 100.
        let bound = max(10, Int(writing / .milliseconds(300)) + 3)
        #expect(segments.count <= bound, "far fewer segments than commits (\(writing) of writing): \(segments)")
        // The segments tile sequences 1...100 without gaps or overlaps.
        #expect(segments.first?.first == 1 && segments.last?.last == UInt64(count), "\(segments)")
        #expect(zip(segments, segments.dropFirst()).allSatisfy { $0.last + 1 == $1.first }, "\(segments)")
        // Each transaction imported once, in commit order.
        let imported = try b.openStore().history(filter: HistoryFilter(origins: [.remote(a.nodeID!)]))
        #expect(imported.count == count)
        #expect(imported.map { $0.changes.map(\.primaryKey) } == ids.map { [$0] })
        try await a.stop()
        try await b.stop()
    }

    @Test("a lone commit is published at once, in a segment of its own")
    func loneCommitIsPublishedAtOnce() async throws {
        let cluster = try cluster("lone")
        let a = try cluster.addNode("a", rescanIntervalMilliseconds: 60_000), b = try cluster.addNode("b", rescanIntervalMilliseconds: 60_000)
        try await a.start()
        try await b.start()
        let id = UUID().uuidString.lowercased()
        try a.openStore().write(author: "lone") { try $0.insert("Note", ["id": .text(id), "title": "alone"]) }
        // Nothing waits for company: a commit that the daemon's commit watcher did not publish at once would
        // wait for the next rescan, a minute away, and miss this deadline.
        try await eventually(within: .seconds(30), "never published:\n\(a.log)") { try !Self.segments(of: a, in: cluster).isEmpty }
        #expect(try Self.segments(of: a, in: cluster).map { [$0.first, $0.last] } == [[1, 1]])
        try await eventually(within: .seconds(20), every: .milliseconds(5), "the lone note reaches b:\n\(b.log)") {
            try !b.openStore().read("SELECT title FROM Note WHERE id = ?", [.text(id)]).isEmpty
        }
        try await a.stop()
        try await b.stop()
    }
}
