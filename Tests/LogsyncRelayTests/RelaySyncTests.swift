import Foundation
import LogsyncCore
import LogsyncStore
import LogsyncTestKit
import Testing

/// Folders and notes, as the multi-node relay tests write them.
let relayTestSchema = Schema(version: 1, entities: [
    Entity("Folder", attributes: [Attribute("name", .text)]),
    Entity("Note", attributes: [Attribute("title", .text), Attribute("rank", .integer)]),
])

func note(_ title: String) -> [String: DatabaseValue] {
    ["id": .text(UUID().uuidString.lowercased()), "title": .text(title), "rank": 1]
}

/// Real `syncd` processes syncing through a real `sync-relay` on 127.0.0.1 (the cluster's shared folder
/// is configured but unused: `[relay]` replaces it).
@Suite(.serialized) struct RelaySyncTests {
    /// The `[relay]` lines for a node with its own token file.
    static func relayLines(_ relay: RelayProcess, account: String, node: String) async throws -> [String] {
        let tokenFile = try await relay.tokenFile(account, name: "\(node).token")
        return ["", "[relay]", "url = \"\(relay.url)\"", "token_file = \"\(tokenFile)\"", "long_poll_s = 5"]
    }

    @Test func threeNodesConvergeThroughTheRelay() async throws {
        let relay = try RelayProcess()
        try await relay.createAccount("test")
        try await relay.start()
        let cluster = try SyncdCluster("relay3", schema: relayTestSchema)
        var nodes: [SyncdNode] = []
        for name in ["a", "b", "c"] {
            nodes.append(try cluster.addNode(name, rescanIntervalMilliseconds: 60_000, extra: try await Self.relayLines(relay, account: "test", node: name)))
        }
        for node in nodes { try await node.start() }
        defer { for node in nodes { node.process?.process.terminate() } }
        for node in nodes {
            try node.openStore().write(author: node.name) { tx in
                for i in 0..<5 { try tx.insert("Note", note("\(node.name)\(i)")) }
            }
        }
        // No trigger: the commit wakes the writer's daemon, the relay's long-poll wakes the others.
        let tables = try await cluster.awaitConvergence(timeout: .seconds(30))
        #expect(tables["Note"]?.count == 15)
        let a = try nodes[0].openStore()
        for other in nodes.dropFirst() {
            #expect(try a.history(filter: HistoryFilter(origins: [.remote(other.nodeID!)])).count == 1, "each transaction imported once")
        }
        let status = try await nodes[1].status()
        let contact = try #require(status["relay"] as? [String: Any], "syncctl status names the relay")
        #expect(contact["url"] as? String == relay.url)
        // 200, or 204 for a long-poll that ended with nothing new: the relay answered, without error.
        #expect((contact["last_answer"] as? String).map { $0.hasPrefix("200") || $0.hasPrefix("204") } == true, "\(contact)")
        let text = try await nodes[1].syncctl(["status"])
        #expect(text.stdout.contains("relay      \(relay.url)"))
        for node in nodes { #expect(try await node.stop() == 0, "clean exit on SIGTERM:\n\(node.log)") }
        #expect(try await relay.stop() == 0)
    }

    @Test(arguments: Backend.allCases) func relayKilledMidPushThenRestarted(backend: Backend) async throws {
        let relay = try await backend.relay()
        try await relay.createAccount("test")
        // The relay kills itself with SIGKILL inside the first commit: a push in flight, never acknowledged.
        try await relay.start(environment: ["LOGSYNC_RELAY_FAULT": "before-commit"])
        let cluster = try SyncdCluster("relaykill", schema: relayTestSchema)
        var nodes: [SyncdNode] = []
        for name in ["a", "b", "c"] {
            nodes.append(try cluster.addNode(name, rescanIntervalMilliseconds: 60_000, extra: try await Self.relayLines(relay, account: "test", node: name)))
        }
        for node in nodes { try await node.start() }
        defer { for node in nodes { node.process?.process.terminate() } }
        for i in 0..<3 {
            try nodes[0].openStore().write(author: "a") { tx in
                try tx.insert("Note", note("a\(i)x"))
                try tx.insert("Note", note("a\(i)y"))
            }
        }
        let process = try #require(relay.process)
        let status = try await process.waitForExit(timeout: .seconds(30))
        #expect(status == 9, "the fault point killed the relay mid-push:\n\(relay.log)")
        try await relay.kill9()
        // Writes while the relay is down are kept and pushed once it is back.
        try nodes[1].openStore().write(author: "b") { tx in try tx.insert("Note", note("b while down")) }
        try await relay.start()
        let tables = try await cluster.awaitConvergence(timeout: .seconds(60))
        #expect(tables["Note"]?.count == 7, "nothing lost")
        for node in nodes.dropFirst() {
            #expect(try node.openStore().history(filter: HistoryFilter(origins: [.remote(nodes[0].nodeID!)])).count == 3, "each of a's transactions applied once on \(node.name)")
            #expect(try node.openStore().sync.quarantined().isEmpty)
        }
        for node in nodes { #expect(try await node.stop() == 0) }
        try await relay.stop()
    }

    @Test func refusedTokenIsReportedAndNotRetriedBlindly() async throws {
        let relay = try RelayProcess()
        try await relay.createAccount("test")
        try await relay.start()
        let cluster = try SyncdCluster("relayrefuse", schema: relayTestSchema)
        let tokenFile = try relay.directory.write("bad.token", "lsr1_000000000000_" + String(repeating: "A", count: 43) + "\n")
        let a = try cluster.addNode(
            "a", rescanIntervalMilliseconds: 60_000, extra: ["", "[relay]", "url = \"\(relay.url)\"", "token_file = \"\(tokenFile)\""])
        try await a.start()
        defer { a.process?.process.terminate() }
        try a.openStore().write(author: "a") { tx in try tx.insert("Note", note("refused")) }
        let contact = try await eventually(within: .seconds(20), "status shows the refusal") { () -> [String: Any]? in
            let relay = try await a.status()["relay"] as? [String: Any]
            return (relay?["last_refusal"] as? String)?.contains("401") == true ? relay : nil
        }
        #expect((contact["last_refusal"] as? String)?.contains("unauthorized") == true, "\(contact)")
        let pulled = try await relay.admin(["account", "list", "--json"])
        #expect(pulled.stdout.contains("\"segments\" : 0"), "nothing stored: \(pulled.stdout)")
        try await a.stop()
        try await relay.stop()
    }

    @Test func tokenRotatedInItsFileIsUsedAfterAReload() async throws {
        let relay = try RelayProcess()
        try await relay.createAccount("test")
        try await relay.start()
        let cluster = try SyncdCluster("relayrotate", schema: relayTestSchema)
        let a = try cluster.addNode("a", rescanIntervalMilliseconds: 60_000, extra: try await Self.relayLines(relay, account: "test", node: "a"))
        let b = try cluster.addNode("b", rescanIntervalMilliseconds: 60_000, extra: try await Self.relayLines(relay, account: "test", node: "b"))
        for node in [a, b] { try await node.start() }
        defer { for node in [a, b] { node.process?.process.terminate() } }
        try a.openStore().write(author: "a") { tx in try tx.insert("Note", note("before")) }
        try await eventually(within: .seconds(20), "b receives a's note") { try Self.titles(b) == ["before"] }

        // The operator revokes a's token: a's pushes are refused.
        let tokenFile = relay.directory.file("a.token")
        let oldToken = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let revoked = try await relay.admin(["token", "revoke", String(oldToken.split(separator: "_")[1])])
        #expect(revoked.status == 0, "\(revoked)")
        try a.openStore().write(author: "a") { tx in try tx.insert("Note", note("while revoked")) }
        try await eventually(within: .seconds(20), "a's status shows the refusal") {
            ((try await a.status()["relay"] as? [String: Any])?["last_refusal"] as? String)?.contains("401") == true
        }

        // ... and writes a new one over the old file: a reload reads it, and the held note goes out.
        let newToken = try await relay.issueToken("test")
        let handle = try #require(FileHandle(forWritingAtPath: tokenFile))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data((newToken + "\n").utf8))
        try handle.close()
        let reloaded = try await a.syncctl(["reload"])
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(reloaded.stdout.contains("relay token read again from \(tokenFile)"), "\(reloaded.stdout)")
        #expect(!reloaded.stdout.contains(newToken) && !a.log.contains(newToken), "the token is in no message")
        #expect(try await a.syncctl(["trigger"]).status == 0, "a pushes with the new token:\n\(a.log)")
        try await eventually(within: .seconds(20), "b receives the note held while the token was revoked") {
            try Self.titles(b) == ["before", "while revoked"]
        }

        // Through a relay, the shared folder is unused: changing it needs no restart. The token is the same.
        let config = try String(contentsOfFile: a.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "shared_folder = \"", with: "shared_folder = \"/nonexistent")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        let again = try await a.syncctl(["reload"])
        #expect(again.status == 0, "\(again)\n\(a.log)")
        #expect(!again.stdout.contains("restart") && !again.stdout.contains("token"), "\(again.stdout)")
        for node in [a, b] { #expect(try await node.stop() == 0) }
        try await relay.stop()
    }

    @Test func tokenRotatedWhileASwitchMountsIsUsed() async throws {
        let relay = try RelayProcess()
        for account in ["x", "y"] { try await relay.createAccount(account) }
        try await relay.start()
        let cluster = try SyncdCluster("relayswitchrotate", schema: relayTestSchema)
        for account in ["x", "y"] { _ = try await relay.tokenFile(account, name: "a-\(account).token") }
        let a = try cluster.addNode(
            "a", account: "x", rescanIntervalMilliseconds: 60_000,
            extra: ["", "[relay]", "url = \"\(relay.url)\"", "token_file = \"\(relay.directory.file("a-{account}.token"))\"", "long_poll_s = 5"])
        let c = try cluster.addNode("c", account: "y", rescanIntervalMilliseconds: 60_000, extra: try await Self.relayLines(relay, account: "y", node: "c"))
        // The switch holds between making the new account's mount and handing it to the loop until the
        // gate file exists: the test acts there, then opens the gate.
        let gate = cluster.directory.file("gate")
        try await a.start(environment: ["LOGSYNC_FAULT": "switch.mounting", "LOGSYNC_FAULT_GATE": gate])
        try await c.start()
        defer { for node in [a, c] { node.process?.process.terminate() } }
        let stateFile = a.storePath + ".accounts/state.json"
        let switching = Task { try await a.syncctl(["account", "switch", "y"]) }
        try await a.awaitLog("fault injection: switch.mounting waits for", timeout: .seconds(60))
        #expect((try? String(contentsOfFile: stateFile, encoding: .utf8))?.contains("\"did_change\"") == true)
        // Meanwhile the operator rotates y's token: the one read for the new transport is revoked.
        let tokenFile = relay.directory.file("a-y.token")
        let oldToken = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await relay.admin(["token", "revoke", String(oldToken.split(separator: "_")[1])]).status == 0)
        try Data((try await relay.issueToken("y") + "\n").utf8).write(to: URL(fileURLWithPath: tokenFile))
        #expect(try await a.syncctl(["reload"]).status == 0)
        try "".write(toFile: gate, atomically: true, encoding: .utf8)
        let switched = try await switching.value
        #expect(switched.status == 0, "\(switched)\n\(a.log)")

        try a.withActiveStore { try $0.write(author: "a") { tx in try tx.insert("Note", note("y from a")) } }
        try await eventually(within: .seconds(20), "c receives a's note: a pushes with the new token:\n\(a.log)") { try Self.titles(c) == ["y from a"] }
        for node in [a, c] { #expect(try await node.stop() == 0) }
        try await relay.stop()
    }

    /// The notes' titles in the store a node has active now.
    static func titles(_ node: SyncdNode) throws -> Set<String> {
        Set(try node.withActiveStore { try $0.read("SELECT title FROM Note") }.compactMap { row -> String? in
            if case .text(let title) = row[0] { return title }
            return nil
        })
    }

    @Test func accountSwitchUsesEachAccountsToken() async throws {
        let relay = try RelayProcess()
        for account in ["x", "y"] { try await relay.createAccount(account) }
        try await relay.start()
        let cluster = try SyncdCluster("relayacct", schema: relayTestSchema)
        // a keeps a token file per account; b is on x, c on y.
        _ = try await relay.tokenFile("x", name: "a-x.token")
        let template = relay.directory.file("a-{account}.token")
        let a = try cluster.addNode(
            "a", account: "x", rescanIntervalMilliseconds: 60_000,
            extra: ["", "[relay]", "url = \"\(relay.url)\"", "token_file = \"\(template)\"", "long_poll_s = 5"])
        let b = try cluster.addNode("b", account: "x", rescanIntervalMilliseconds: 60_000, extra: try await Self.relayLines(relay, account: "x", node: "b"))
        let c = try cluster.addNode("c", account: "y", rescanIntervalMilliseconds: 60_000, extra: try await Self.relayLines(relay, account: "y", node: "c"))
        for node in [a, b, c] { try await node.start() }
        defer { for node in [a, b, c] { node.process?.process.terminate() } }
        try a.withActiveStore { try $0.write(author: "a") { tx in try tx.insert("Note", note("x from a")) } }
        try c.withActiveStore { try $0.write(author: "c") { tx in try tx.insert("Note", note("y from c")) } }
        try await eventually(within: .seconds(20), "b receives a's note through the relay with x's token") { try Self.titles(b) == ["x from a"] }

        // y's token file is missing: the switch waits at building and says why, then goes on once it is there.
        let switching = try await a.syncctl(["account", "switch", "y", "--timeout", "3"])
        #expect(switching.status != 0, "the switch cannot finish without y's token: \(switching)")
        let waiting = try await eventually(within: .seconds(30), "the switch says it waits for y's token file") { () -> String? in
            let result = try await a.syncctl(["account", "status", "--json"])
            let status = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            let reason = (status?["switching"] as? [String: Any])?["waiting"] as? String
            return reason?.contains("a-y.token") == true ? reason : nil
        }
        #expect(waiting.contains("relay token"), "\(waiting)")
        _ = try await relay.tokenFile("y", name: "a-y.token")
        let switched = try await a.syncctl(["account", "switch", "y"])
        #expect(switched.status == 0, "\(switched.stderr)\n\(a.log)")
        #expect(try Self.titles(a) == ["y from c"], "a holds exactly y's notes, read with y's token")
        try a.withActiveStore { try $0.write(author: "a") { tx in try tx.insert("Note", note("y from a")) } }
        try await eventually(within: .seconds(20), "c receives a's note in y") { try Self.titles(c) == ["y from c", "y from a"] }
        #expect(try Self.titles(b) == ["x from a"], "nothing of y reaches x")
        try await relay.stop()
    }
}
