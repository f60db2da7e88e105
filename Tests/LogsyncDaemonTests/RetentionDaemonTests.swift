import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import LogsyncTransport
import Testing

/// Bounded growth with real daemons (docs/retention.md): the engine-level tests in `RetentionTests`
/// move a simulated clock; here the retention is a couple of seconds of wall time and every step is
/// syncd's own doing (progress records, baselines, pruning, bootstrap), seen from outside.
@Suite("retention with real syncd processes", .serialized)
struct RetentionDaemonTests {
    /// `[retention]` short enough for a test: a node is silent after 2 s without a progress record, a
    /// baseline every 4 transactions, progress and pruning several times a second.
    static let fastRetention = [
        "silent_node_after_s = 2", "baseline_after_transactions = 4", "progress_interval_ms = 200", "prune_interval_ms = 200",
    ]

    @Test("a node stopped past the retention comes back from a baseline, with its offline change, after the others pruned; a new node joins from a baseline")
    func stoppedNodeAndNewNodeBootstrap() async throws {
        let begin = ContinuousClock.now
        let cluster = try cluster("retain")
        let tables = ["retention": Self.fastRetention]
        let nodes = try ["a", "b", "c"].map { try cluster.addNode($0, tables: tables) }
        let (a, b, c) = (nodes[0], nodes[1], nodes[2])
        for node in nodes { try await node.start() }
        defer { for node in cluster.nodes { node.process?.process.terminate() } }
        for node in nodes {
            try node.openStore().write(author: node.name) { tx in
                for i in 0..<3 { try tx.insert("Note", note("\(node.name) \(i)")) }
            }
        }
        _ = try await cluster.awaitConvergence()
        let nodeA = NodeID(try #require(a.nodeID)), nodeC = try #require(c.nodeID)

        // c stops; while it is down, a change is written into its store that no syncd has exported.
        #expect(try await c.stop() == 0, "clean exit on SIGTERM:\n\(c.log)")
        let storeC = try c.openStore()
        let appliedByC = try storeC.sync.appliedSequence(from: nodeA)
        let offline = UUID().uuidString.lowercased()
        try storeC.write(author: "c") { try $0.insert("Folder", ["id": .text(offline), "name": "written while c was stopped"]) }

        // a and b go on writing. Once c's progress record is older than the retention, c no longer holds
        // pruning back, and a deletes segments c never applied.
        let stopped = ContinuousClock.now
        var round = 0
        let prunedThrough = try await eventually(
            within: .seconds(20), every: .milliseconds(150), "a lists c as silent and prunes past what c applied (\(appliedByC)):\n\(a.log)"
        ) { () -> Int? in
            round += 1
            for node in [a, b] { try node.openStore().write(author: node.name) { try $0.insert("Note", note("\(node.name) while c is away \(round)")) } }
            let retention = try await Self.retention(of: a)
            let silent = (retention["silent"] as? [[String: Any]] ?? []).contains { $0["node"] as? String == nodeC }
            let through = retention["pruned_through"] as? Int ?? 0
            return silent && through > Int(appliedByC) ? through : nil
        }
        let waited = ContinuousClock.now - stopped
        // What c would need from a is really gone from the shared folder: only a baseline can bring it.
        let remaining = try Self.segments(in: cluster, of: nodeA)
        #expect(remaining.allSatisfy { $0.firstSequence > UInt64(prunedThrough) }, "a's segments left: \(remaining)")
        // a writes on after what it pruned: its writes so far may all be pruned already, once b applied
        // them and a baseline covered them, and c must have segments of a to apply after its baseline.
        try a.openStore().write(author: a.name) { try $0.insert("Note", note("a after pruning")) }
        _ = try await eventually(within: .seconds(30), every: .milliseconds(50), "a exports its write after pruning:\n\(a.log)") {
            try a.openStore().sync.exportedSequence() > UInt64(prunedThrough) ? true : nil
        }
        #expect(try a.openStore().sync.exportedSequence() > UInt64(prunedThrough), "a wrote on after what it pruned")

        // c returns: it loads a baseline that covers what a deleted, and keeps its offline change.
        try await c.start()
        let returned = try await cluster.awaitConvergence()
        #expect(returned["Folder"]?.contains { $0.first == .text(offline) } == true, "c's offline change reached everyone")
        try await Self.awaitBootstrap(of: c, covering: nodeA, through: prunedThrough)

        // A brand-new node joins: a's history starts after what was pruned, so it can only start from a baseline.
        let d = try cluster.addNode("d", tables: tables)
        try await d.start()
        let joined = try await cluster.awaitConvergence()
        #expect(joined == returned)
        try await Self.awaitBootstrap(of: d, covering: nodeA, through: prunedThrough)

        for node in cluster.nodes { #expect(try await node.stop() == 0, "clean exit on SIGTERM:\n\(node.log)") }
        print("retention with syncd: c silent and pruned past after \(waited), \(round) writes on a and b; whole test \(ContinuousClock.now - begin)")
    }

    /// Waits until `node` shows it loaded a baseline that includes `origin`'s history through `sequence`:
    /// its store's cursor for `origin` was moved there by a baseline (`covered:<origin>` in `_ls_meta`,
    /// which applying segments one by one never sets), and its syncd logged the load.
    static func awaitBootstrap(of node: SyncdNode, covering origin: NodeID, through sequence: Int) async throws {
        try await eventually(within: .seconds(30), every: .milliseconds(20), "\(node.name) loaded a baseline through \(origin) \(sequence):\n\(node.log)") {
            try node.openStore().sync.coveredByBaseline(origin) >= UInt64(sequence) && node.log.contains(", loaded baseline ")
        }
    }

    /// `retention` of `syncctl status --json`.
    static func retention(of node: SyncdNode) async throws -> [String: Any] {
        let status = try await node.status()
        return try #require(status["retention"] as? [String: Any], "\(status)")
    }

    /// The segments of `node` in the cluster's shared folder.
    static func segments(in cluster: SyncdCluster, of node: NodeID) throws -> [SegmentName] {
        try FileManager.default.contentsOfDirectory(atPath: cluster.shared + "/test/" + node.rawValue)
            .compactMap { SegmentName.parse(fileName: $0, node: node) }.sorted()
    }
}
