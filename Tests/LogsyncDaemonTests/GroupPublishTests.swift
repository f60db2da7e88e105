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
        for (i, id) in ids.enumerated() {
            try store.write(author: "burst") { try $0.insert("Note", ["id": id, "title": .text("n\(i)"), "rank": .integer(Int64(i))]) }
        }
        try await eventually(within: .seconds(60), every: .milliseconds(20), "b has every note:\n\(a.log)\n\(b.log)") {
            try b.openStore().read("SELECT count(*) FROM Note") == [[.integer(Int64(count))]]
        }
        let segments = try Self.segments(of: a, in: cluster)
        #expect(segments.count <= 10, "far fewer segments than commits: \(segments)")
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
        let committed = ContinuousClock.now
        let elapsed = try await eventually(within: .seconds(20), "never published:\n\(a.log)") { () -> Duration? in
            try Self.segments(of: a, in: cluster).isEmpty ? nil : ContinuousClock.now - committed
        }
        // Nothing waits for company: well under a second even on a loaded machine (a few ms when idle).
        #expect(elapsed < .seconds(1), "published after \(elapsed)")
        #expect(try Self.segments(of: a, in: cluster).map { [$0.first, $0.last] } == [[1, 1]])
        try await eventually(within: .seconds(20), every: .milliseconds(5), "the lone note reaches b:\n\(b.log)") {
            try !b.openStore().read("SELECT title FROM Note WHERE id = ?", [.text(id)]).isEmpty
        }
        try await a.stop()
        try await b.stop()
    }
}
