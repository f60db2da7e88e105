import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import LogsyncTransport
import Testing

/// A forged segment in the shared folder (a member node gone wrong, anyone who can write into a
/// Syncthing folder) must hold its own node's stream only: syncd stays up, the other nodes keep
/// syncing, the refusal is reported with its reason, and the operator can drop it (`docs/operations.md`,
/// "Refused segments").
@Suite("Refused segments with real processes", .serialized)
struct RefusedSegmentTests {
    @Test("a causal length of 2^63+5 and an unknown entity: syncd lives, A and B sync, status and peers say why, quarantine drop lets C go on")
    func forgedSegmentsHoldOnlyTheirNode() async throws {
        let cluster = try cluster("refused")
        let a = try cluster.addNode("a")
        let b = try cluster.addNode("b")
        try await a.start()
        try await b.start()
        defer {
            a.process?.process.terminate()
            b.process?.process.terminate()
        }
        // `watch` gets the refusal as an event.
        let watch = try Subprocess(Products.path("syncctl"), ["watch", "--json", "--socket", a.socketPath])
        defer { watch.process.terminate() }
        try await eventually(within: .seconds(10), "syncctl watch is subscribed") {
            try await a.syncctl(["trigger"]).status == 0 && watch.stdout.contains("sync_finished")
        }
        let account = cluster.shared + "/test/"
        let now = UInt64(Date().timeIntervalSince1970 * 1000) - 1_000
        let c = UUID().uuidString.lowercased()
        let d = UUID().uuidString.lowercased()
        let laterNote = UUID().uuidString.lowercased()
        // C: a row state with a causal length past what SQLite's integers hold, then a good segment after it.
        try ForgedSegments.publish(
            in: account, node: c, sequence: 1, at: now,
            change: LogChange(entity: "Note", primaryKey: .text(UUID().uuidString.lowercased()), kind: .insert, causalLength: (1 << 63) + 5, values: ["title": "forged"]))
        try ForgedSegments.publish(
            in: account, node: c, sequence: 2, at: now + 1,
            change: LogChange(entity: "Note", primaryKey: .text(laterNote), kind: .insert, causalLength: 1, values: ["title": "after the drop", "rank": 2]))
        // D: a transaction on an entity the schema does not declare.
        try ForgedSegments.publish(
            in: account, node: d, sequence: 1, at: now,
            change: LogChange(entity: "Secret", primaryKey: .text(UUID().uuidString.lowercased()), kind: .insert, causalLength: 1, values: ["x": 1]))

        // A and B keep syncing each other, in both directions, over many rounds.
        for round in 0..<3 {
            try a.openStore().write { try $0.insert("Note", note("from a \(round)")) }
            try b.openStore().write { try $0.insert("Note", note("from b \(round)")) }
            _ = try await cluster.awaitConvergence(timeout: .seconds(60))
        }
        for node in [a, b] {
            let trigger = try await node.syncctl(["trigger", "--json"])
            #expect(trigger.status == 0, "a round with refused segments still completes: \(trigger)")
            #expect(node.process?.process.isRunning == true, "syncd \(node.name) is alive:\n\(node.log)")
            let status = try await node.status()
            #expect(["idle", "syncing"].contains(status["state"] as? String), "no backoff: \(status)")
            #expect((status["last_sync"] as? [String: Any])?["ok"] as? Bool == true, "\(status)")
            let refused = status["refused"] as? [[String: Any]] ?? []
            let byNode = Dictionary(refused.map { ($0["node"] as? String ?? "", $0["reason"] as? String ?? "") }, uniquingKeysWith: { x, _ in x })
            #expect(byNode[c]?.contains("causal length 9223372036854775813") == true, "status --json refused: \(refused)")
            #expect(byNode[d]?.contains("entity 'Secret' is not declared") == true, "status --json refused: \(refused)")
            let rejected = status["rejected"] as? [String] ?? []
            #expect(rejected.contains { $0.contains(c) } && rejected.contains { $0.contains(d) }, "\(rejected)")
            let peers = try await node.peers()
            for held in [c, d] {
                let peer = peers.first { $0["node"] as? String == held }
                #expect(peer?["waiting_for"] as? Int == 1, "\(String(describing: peer))")
                #expect((peer?["waiting_reason"] as? String)?.contains("was rejected") == true, "\(String(describing: peer))")
            }
            // The journal says each once, when it appears.
            try await node.awaitLog("rejected \(c)/")
            try await node.awaitLog("rejected \(d)/")
            #expect(node.log.components(separatedBy: "rejected \(c)/").count == 2, "said once:\n\(node.log)")
            #expect(node.log.components(separatedBy: "rejected \(d)/").count == 2, "said once:\n\(node.log)")
        }

        let event = try await watch.line(containing: "\"refused\"")
        #expect(event.contains(c) || event.contains(d), "\(event)")
        let list = try await a.syncctl(["quarantine", "list"])
        #expect(list.status == 0 && list.stdout.contains("\(c)/1-1") && list.stdout.contains("\(d)/1-1"), "\(list)")
        let drop = try await a.syncctl(["quarantine", "drop", "\(c)/1-1"])
        #expect(drop.status == 0, "\(drop)")
        try await a.awaitLog("DROPPED \(c)/1-1")
        _ = try await watch.line(containing: "\"dropped\"")
        try await eventually(within: .seconds(30), "C's later segment applied on a after the drop:\n\(a.log)") {
            try a.openStore().read("SELECT title FROM Note WHERE id = ?", [.text(laterNote)]).first?.first == .text("after the drop")
        }
        let after = try await a.syncctl(["quarantine", "list", "--json"])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any])
        let quarantine = try #require(report["quarantine"] as? [String: Any])
        #expect((quarantine["dropped"] as? [[String: Any]])?.first?["node"] as? String == c, "\(quarantine)")
        #expect((quarantine["refused"] as? [[String: Any]])?.map { $0["node"] as? String } == [d], "D still refused: \(quarantine)")
        // Dropping is only for what is refused; B, which did not drop, still holds C.
        let again = try await a.syncctl(["quarantine", "drop", "\(c)/1-1"])
        #expect(again.status == 1, "\(again)")
        let malformed = try await a.syncctl(["quarantine", "release", "\(c)/one"])
        #expect(malformed.status == 64, "\(malformed)")
        let bPeers = try await b.peers()
        #expect(bPeers.first { $0["node"] as? String == c }?["waiting_for"] as? Int == 1)
        #expect(try b.openStore().read("SELECT 1 FROM Note WHERE id = ?", [.text(laterNote)]).isEmpty)
        let stopped = (try await a.stop(), try await b.stop())
        #expect(stopped == (0, 0))
    }
}

/// Segments a test forges by hand: one change, any content, checksums valid.
enum ForgedSegments {
    static func publish(in account: String, node: String, sequence: UInt64, at milliseconds: UInt64, change: LogChange) throws {
        let transaction = LogTransaction(
            sequence: sequence, timestamp: HLCTimestamp(physicalMilliseconds: milliseconds, logical: 0), author: "forger", contextName: nil,
            changes: [change])
        let bytes = try SegmentEncoder.encode(schemaVersion: 1, account: "test", node: NodeID(node), transactions: [transaction])
        try FileManager.default.createDirectory(atPath: account + node, withIntermediateDirectories: true)
        let name = SegmentName(node: NodeID(node), firstSequence: sequence, lastSequence: sequence)
        // Atomically, as a carrier delivers a file: a reader never sees it half written.
        try Data(bytes).write(to: URL(fileURLWithPath: account + node + "/" + name.fileName), options: .atomic)
    }
}
