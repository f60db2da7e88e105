import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// A relay whose history went backwards — its database restored from an older backup, or replaced by a
/// new one — with real `syncd` processes that keep running through it: they notice (a new identity or
/// epoch in the pull answers), pull again from the start, push again what the relay lost, converge, and
/// say so in `syncctl status` and, once, in the journal.
@Suite(.serialized) struct RelayRestoreTests {
    /// A relay with the account `test`, and started nodes syncing through it, each with its own token.
    static func start(_ label: String, nodes names: [String]) async throws -> (RelayProcess, SyncdCluster, [SyncdNode]) {
        let relay = try RelayProcess()
        try await relay.createAccount("test")
        try await relay.start()
        let cluster = try SyncdCluster(label, schema: relayTestSchema)
        for name in names { try await join(cluster, name, relay) }
        return (relay, cluster, cluster.nodes)
    }

    /// Adds a node to `cluster`, syncing through `relay` with a token of its own, and starts it.
    @discardableResult
    static func join(_ cluster: SyncdCluster, _ name: String, _ relay: RelayProcess) async throws -> SyncdNode {
        let node = try cluster.addNode(name, rescanIntervalMilliseconds: 60_000, extra: try await RelaySyncTests.relayLines(relay, account: "test", node: name))
        try await node.start()
        return node
    }

    static func write(_ node: SyncdNode, _ title: String) throws {
        try node.openStore().write(author: node.name) { tx in try tx.insert("Note", note(title)) }
    }

    /// Every node has applied each other node's transactions exactly once, and quarantined nothing.
    static func expectAppliedOnce(_ nodes: [SyncdNode], transactions: [String: Int], sourceLocation: SourceLocation = #_sourceLocation) throws {
        for node in nodes {
            let store = try node.openStore()
            #expect(try store.sync.quarantined().isEmpty, "\(node.name) quarantined nothing", sourceLocation: sourceLocation)
            for other in nodes where other.name != node.name {
                let applied = try store.history(filter: HistoryFilter(origins: [.remote(other.nodeID!)])).count
                #expect(applied == transactions[other.name], "\(node.name) applied each of \(other.name)'s transactions once", sourceLocation: sourceLocation)
            }
        }
    }

    /// What a node's `syncctl status --json` says of its relay, once it reports a reset.
    static func reportedReset(_ node: SyncdNode) async throws -> [String: Any] {
        try await eventually(within: .seconds(60), "\(node.name)'s status reports that the relay lost history:\n\(node.log)") { () -> [String: Any]? in
            let relay = try await node.status()["relay"] as? [String: Any]
            return relay?["last_reset"] is String ? relay : nil
        }
    }

    @Test func restoredBackupIsNoticedAndRefilledWithoutRestartingSyncd() async throws {
        let (relay, cluster, nodes) = try await Self.start("relayrestore", nodes: ["a", "b", "c"])
        defer { for node in cluster.nodes { node.process?.process.terminate() } }
        let (a, b, c) = (nodes[0], nodes[1], nodes[2])
        for node in nodes { try Self.write(node, "\(node.name) first") }
        _ = try await cluster.awaitConvergence(timeout: .seconds(60))
        let before = try await relay.identity()

        // A consistent copy while the relay serves; then more writes, which only the relay's live
        // database holds, and which every node applies.
        let backup = relay.directory.file("backup.sqlite")
        try await relay.backUp(to: backup)
        try Self.write(a, "a after the backup")
        try Self.write(b, "b after the backup")
        _ = try await cluster.awaitConvergence(timeout: .seconds(60))

        // The operator restores the backup: the relay has lost a's and b's last writes, and its arrival
        // numbers are behind every node's cursor.
        #expect(try await relay.stop() == 0)
        try relay.restore(from: backup)
        try await relay.start()
        let after = try await relay.identity()
        #expect(after.split(separator: "/").first == before.split(separator: "/").first, "a restore keeps the database's id: \(before) -> \(after)")
        #expect(after != before, "a restore changes the epoch: \(before) -> \(after)")
        try await relay.awaitLog("epoch")

        // New writes travel again, with no syncd restarted.
        try Self.write(c, "c after the restore")
        try Self.write(a, "a after the restore")
        let tables = try await cluster.awaitConvergence(timeout: .seconds(90))
        #expect(tables["Note"]?.count == 7, "nothing lost")
        for node in nodes {
            let status = try await Self.reportedReset(node)
            #expect(status["identity"] as? String == after, "\(node.name)'s status names the relay's new epoch: \(status)")
            let text = try await node.syncctl(["status"])
            #expect(text.stdout.contains("reset      "), "\(text.stdout)")
            #expect(node.log.components(separatedBy: "syncd ready").count == 2, "\(node.name)'s syncd was never restarted")
        }
        // The journal says it once, when it is noticed (not every round).
        try Self.write(b, "b later")
        _ = try await cluster.awaitConvergence(timeout: .seconds(60))
        for node in nodes {
            #expect(node.log.components(separatedBy: "the relay lost history").count == 2, "\(node.name) logs the reset once:\n\(node.log)")
        }
        try Self.expectAppliedOnce(nodes, transactions: ["a": 3, "b": 3, "c": 2])

        // The relay holds again what the restore lost: a node that joins now gets every write from it.
        try await Self.join(cluster, "d", relay)
        let joined = try await cluster.awaitConvergence(timeout: .seconds(60))
        #expect(joined["Note"]?.count == 8)
        try Self.expectAppliedOnce(cluster.nodes, transactions: ["a": 3, "b": 3, "c": 2, "d": 0])
        for node in cluster.nodes { #expect(try await node.stop() == 0) }
        #expect(try await relay.stop() == 0)
    }

    @Test func newRelayDatabaseIsNoticedAndRefilledWithoutRestartingSyncd() async throws {
        let (relay, cluster, nodes) = try await Self.start("relaynewdb", nodes: ["a", "b"])
        defer { for node in cluster.nodes { node.process?.process.terminate() } }
        let (a, b) = (nodes[0], nodes[1])
        for node in nodes {
            for i in 0..<2 { try Self.write(node, "\(node.name) \(i)") }
        }
        _ = try await cluster.awaitConvergence(timeout: .seconds(60))
        let before = try await relay.identity()

        // The relay loses its database; the operator starts it on a new one, with the account and new
        // tokens written where the nodes read theirs, and reloads them.
        #expect(try await relay.stop() == 0)
        try relay.discardDatabase()
        try await relay.createAccount("test")
        for node in nodes { _ = try await relay.tokenFile("test", name: "\(node.name).token") }
        try await relay.start()
        let after = try await relay.identity()
        #expect(after.split(separator: "/").first != before.split(separator: "/").first, "a new database has a new id: \(before) -> \(after)")
        for node in nodes {
            let reloaded = try await node.syncctl(["reload"])
            #expect(reloaded.status == 0, "\(reloaded)")
        }

        try Self.write(a, "a on the new database")
        try Self.write(b, "b on the new database")
        let tables = try await cluster.awaitConvergence(timeout: .seconds(90))
        #expect(tables["Note"]?.count == 6)
        for node in nodes {
            let status = try await Self.reportedReset(node)
            #expect(status["identity"] as? String == after, "\(status)")
            #expect(node.log.components(separatedBy: "syncd ready").count == 2, "\(node.name)'s syncd was never restarted")
        }
        try Self.expectAppliedOnce(nodes, transactions: ["a": 3, "b": 3])

        // Everything was pushed again: a new node gets all of it from the new database.
        try await Self.join(cluster, "c", relay)
        let joined = try await cluster.awaitConvergence(timeout: .seconds(60))
        #expect(joined["Note"]?.count == 6)
        try Self.expectAppliedOnce(cluster.nodes, transactions: ["a": 3, "b": 3, "c": 0])
        for node in cluster.nodes { #expect(try await node.stop() == 0) }
        #expect(try await relay.stop() == 0)
    }
}
