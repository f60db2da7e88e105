import Foundation
import LogsyncCore
import LogsyncControl
import LogsyncDaemon
import LogsyncPlatform
import LogsyncStore
import LogsyncTestKit
import Testing

/// Folders and their notes, as the daemon tests write them.
let daemonTestSchema = Schema(version: 1, entities: [
    Entity("Folder", attributes: [Attribute("name", .text)]),
    Entity(
        "Note", attributes: [Attribute("title", .text), Attribute("rank", .integer)],
        relationships: [Relationship("folder", to: "Folder", deleteRule: .cascade)]),
])

func cluster(_ label: String) throws -> SyncdCluster {
    try SyncdCluster(label, schema: daemonTestSchema)
}

func note(_ title: String) -> [String: DatabaseValue] {
    ["id": .text(UUID().uuidString.lowercased()), "title": .text(title), "rank": 1]
}

@Suite("syncd with real processes", .serialized)
struct DaemonTests {
    @Test("three daemons converge, with each transaction imported once")
    func threeNodesConverge() async throws {
        let cluster = try cluster("three")
        let nodes = try ["a", "b", "c"].map { try cluster.addNode($0) }
        for node in nodes { try await node.start() }
        defer { for node in nodes { node.process?.process.terminate() } }
        for (index, node) in nodes.enumerated() {
            try node.openStore().write(author: node.name) { tx in
                for i in 0..<5 { try tx.insert("Note", note("\(node.name)\(i)")) }
                _ = index
            }
        }
        for node in nodes { #expect(try await node.syncctl(["trigger"]).status == 0) }
        let tables = try await cluster.awaitConvergence()
        #expect(tables["Note"]?.count == 15)
        let a = try nodes[0].openStore()
        for other in nodes.dropFirst() {
            #expect(try a.history(filter: HistoryFilter(origins: [.remote(other.nodeID!)])).count == 1)
        }
        for node in nodes { #expect(try await node.stop() == 0, "clean exit on SIGTERM:\n\(node.log)") }
    }

    @Test("a node stopped for a while catches up after restart")
    func stoppedNodeCatchesUp() async throws {
        let cluster = try cluster("restart")
        let a = try cluster.addNode("a"), b = try cluster.addNode("b")
        try await a.start()
        try await b.start()
        #expect(try await b.stop() == 0)
        for i in 0..<4 { try a.openStore().write(author: "a") { try $0.insert("Note", note("while b was down \(i)")) } }
        #expect(try await a.syncctl(["trigger"]).status == 0)
        try await b.start()
        let tables = try await cluster.awaitConvergence()
        #expect(tables["Note"]?.count == 4)
        try await a.stop()
        try await b.stop()
    }

    @Test("trigger returns after the sync completed: published on one side, applied on the other")
    func triggerWaitsForCompletion() async throws {
        let cluster = try cluster("trigger")
        let a = try cluster.addNode("a"), b = try cluster.addNode("b")
        try await a.start()
        try await b.start()
        let id = UUID().uuidString.lowercased()
        try a.openStore().write(author: "a") { try $0.insert("Note", ["id": .text(id), "title": "now"]) }
        let published = try await a.syncctl(["trigger"])
        #expect(published.status == 0, "\(published)")
        let folder = cluster.shared + "/test/" + a.nodeID!
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).contains { $0.hasSuffix(".lseg") })
        let applied = try await b.syncctl(["trigger", "--json"])
        #expect(applied.status == 0)
        #expect(try b.openStore().read("SELECT title FROM Note WHERE id = ?", [.text(id)]) == [[.text("now")]])

        // b's history shows the import with a's node as origin, at a wall-clock time a person can read.
        let history = try await b.syncctl(["history", "--limit", "1"])
        #expect(history.status == 0)
        let line = history.stdout.split(separator: "\n").last.map(String.init) ?? ""
        let days = Set([Date(timeIntervalSinceNow: -60), Date()].map { String(ISO8601DateFormatter().string(from: $0).prefix(10)) })
        #expect(days.contains { line.contains(" at \($0)T") } && line.contains("Z origin=\(a.nodeID!) author=a"), "\(history.stdout)")
        let json = try await b.syncctl(["history", "--limit", "1", "--json"])
        let entries = try JSONDecoder().decode([HistoryEntry].self, from: Data(json.stdout.utf8))
        #expect(entries.count == 1 && entries[0].timestamp.contains("."), "\(json.stdout)")
        #expect(days.contains { entries.first?.time?.hasPrefix($0) == true }, "\(json.stdout)")
        try await a.stop()
        try await b.stop()
    }

    @Test("a failing sync makes trigger exit non-zero with the reason, and status reports it")
    func triggerReportsFailure() async throws {
        let cluster = try cluster("fail")
        let a = try cluster.addNode("a")
        try await a.start()
        // The shared folder disappears (an unmounted share): publishing must fail, loudly.
        try FileManager.default.moveItem(atPath: cluster.shared, toPath: cluster.shared + ".gone")
        try a.openStore().write(author: "a") { try $0.insert("Note", note("stuck")) }
        let result = try await a.syncctl(["trigger", "--timeout", "10"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("sync failed") || result.stderr.contains("cannot"), "\(result)")
        let status = try await a.status()
        #expect((status["last_error"] as? String)?.isEmpty == false)
        #expect(status["pending_segments"] as? Int == 1, "the exported segment waits in the outbox")
        try FileManager.default.moveItem(atPath: cluster.shared + ".gone", toPath: cluster.shared)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        #expect(try await a.status()["pending_segments"] as? Int == 0)
        try await a.stop()
    }

    @Test("status --json reports peer lag, what is awaited, and quarantined segments truthfully")
    func statusIsTruthful() async throws {
        let cluster = try cluster("status")
        let a = try cluster.addNode("a"), b = try cluster.addNode("b")
        try await a.start()
        try await b.start()
        for i in 0..<3 {
            try a.openStore().write(author: "a") { try $0.insert("Note", note("n\(i)")) }
            #expect(try await a.syncctl(["trigger"]).status == 0)
        }
        #expect(try await b.syncctl(["trigger"]).status == 0)
        let synced = try await b.status()
        let peers = try #require(synced["peers"] as? [[String: Any]])
        let peerA = try #require(peers.first { $0["node"] as? String == a.nodeID })
        #expect(peerA["applied_seq"] as? Int == 3)
        #expect(peerA["available_seq"] as? Int == 3)
        #expect(peerA["lag"] as? Int == 0)

        // A node whose first segment is missing: b sees it, waits, and says why. Nothing follows on from
        // what was applied, so nothing counts as available and there is no lag: a name beyond a gap is
        // not evidence of anything until the gap fills (a stray file could claim any sequence).
        let ghost = UUID().uuidString.lowercased()
        let ghostFolder = cluster.shared + "/test/" + ghost
        try FileManager.default.createDirectory(atPath: ghostFolder, withIntermediateDirectories: true)
        let segments = try FileManager.default.contentsOfDirectory(atPath: cluster.shared + "/test/" + a.nodeID!).sorted()
        let aFolder = cluster.shared + "/test/" + a.nodeID!
        // Corrupt copy under the ghost's name for sequences 2–2: ignored as rejected later; the gap is what counts.
        try FileManager.default.copyItem(atPath: aFolder + "/" + segments[1], toPath: ghostFolder + "/" + segments[1])
        #expect(try await b.syncctl(["trigger"]).status == 0)
        let waiting = try await b.status()
        let ghostPeer = try #require((waiting["peers"] as? [[String: Any]])?.first { $0["node"] as? String == ghost })
        #expect(ghostPeer["applied_seq"] as? Int == 0)
        #expect(ghostPeer["available_seq"] as? Int == 0)
        #expect(ghostPeer["lag"] as? Int == 0)
        #expect(ghostPeer["waiting_for"] as? Int == 1)
        let reason = ghostPeer["waiting_reason"] as? String ?? ""
        #expect(reason.contains("sequence 1 is missing") && reason.contains("from sequence 2 on wait for it"), "\(reason)")

        // a's first segment rewritten with other content after b applied it: quarantined, reported.
        let original = try Data(contentsOf: URL(fileURLWithPath: aFolder + "/" + segments[0]))
        try FileManager.default.removeItem(atPath: aFolder + "/" + segments[0])
        try Data(contentsOf: URL(fileURLWithPath: aFolder + "/" + segments[2])).write(to: URL(fileURLWithPath: aFolder + "/" + segments[0]))
        try await b.stop()
        try await b.start()
        #expect(try await b.syncctl(["trigger"]).status == 0)
        let quarantined = try #require(try await b.status()["quarantined"] as? [[String: Any]])
        #expect(quarantined.count == 1)
        #expect(quarantined.first?["node"] as? String == a.nodeID)
        #expect(quarantined.first?["first_seq"] as? Int == 1)
        _ = original
        try await a.stop()
        try await b.stop()
    }

    @Test("kill -9 of syncd during export and during import, then restart: nothing lost, nothing applied twice",
          arguments: ["export.after-outbox", "import.mid-batch"])
    func killedDaemonRecovers(fault: String) async throws {
        let cluster = try cluster("kill")
        let a = try cluster.addNode("a", extra: ["segment_changes = 4", "batch_changes = 2"])
        let b = try cluster.addNode("b", extra: ["batch_changes = 2"])
        let exporting = fault.hasPrefix("export")
        try await a.start(environment: exporting ? ["LOGSYNC_FAULT": fault] : [:])
        try await b.start(environment: exporting ? [:] : ["LOGSYNC_FAULT": fault])
        for i in 0..<4 {
            try a.openStore().write(author: "a") { tx in
                try tx.insert("Note", note("n\(i)a"))
                try tx.insert("Note", note("n\(i)b"))
            }
        }
        let victim = exporting ? a : b
        if !exporting { _ = try await a.syncctl(["trigger"]) }
        _ = try? await victim.syncctl(["trigger", "--timeout", "5"])
        let status = try await victim.waitForExit()
        #expect(status == 9, "the fault point must have killed syncd \(victim.name):\n\(victim.log)")
        try await victim.start()
        _ = try await a.syncctl(["trigger"])
        _ = try await b.syncctl(["trigger"])
        let tables = try await cluster.awaitConvergence()
        #expect(tables["Note"]?.count == 8)
        #expect(try b.openStore().history(filter: HistoryFilter(origins: [.remote(a.nodeID!)])).count == 4, "each of a's transactions once")
        #expect(try b.openStore().sync.quarantined().isEmpty)
        try await a.stop()
        try await b.stop()
    }

    @Test("a SIGTERM while syncd starts is kept until its handler is in place: a clean stop, not death by signal")
    func sigtermDuringStart() async throws {
        let cluster = try cluster("early-term")
        let a = try cluster.addNode("a")
        var environment = ProcessInfo.processInfo.environment
        environment["LOGSYNC_FAULT"] = "syncd.starting"  // 1.5 s at the top of main
        let early = try Subprocess(Products.path("syncd"), ["--config", a.configPath], environment: environment)
        // Signalled once its first line has run (the kernel shows the signals blocked), inside the fault's
        // pause: a signal before `main` gets the default action, which no program can change.
        try await ProcessSignals.awaitBlocked([SIGTERM], pid: early.process.processIdentifier)
        early.process.terminate(SIGTERM)
        let status = try await early.waitForExit(timeout: .seconds(20))
        #expect(status == 0 && !early.process.endedBySignal, "exit \(status):\n\(early.stderr)")
        #expect(early.stderr.contains("syncd ready") && early.stderr.contains("syncd stopped"), "\(early.stderr)")

        // Every thread of a running syncd blocks the signals it handles (they wait for their Dispatch source).
        try await a.start()
        let pid = try #require(a.process).process.processIdentifier
        let handled = ProcessSignals.mask([SIGTERM, SIGINT, SIGHUP])
        for task in try ProcessSignals.threads(of: pid) {
            // A thread that ended between the listing and the look has nothing to say.
            guard let blocked = ProcessSignals.blocked(pid: pid, thread: task) else { continue }
            #expect(blocked & handled == handled, "thread \(task) of syncd: SigBlk \(String(blocked, radix: 16))")
        }
        #expect(try await a.stop() == 0)
    }
}

@Suite("syncd refuses what it cannot do, clearly")
struct DaemonRefusalTests {
    @Test("a second syncd on the same store is refused")
    func secondDaemonRefused() async throws {
        let cluster = try cluster("twice")
        let a = try cluster.addNode("a")
        try await a.start()
        let second = try await Subprocess.run(Products.path("syncd"), ["--config", a.configPath])
        #expect(second.status == ExitStatus.temporaryFailure)
        #expect(second.stderr.contains("already running on \(a.storePath)"), "\(second.stderr)")
        #expect(try await a.syncctl(["status"]).status == 0, "the first one is unharmed")
        try await a.stop()
    }

    @Test("a store that is not SQLite at all (its header overwritten, or a text file in its place) is bad data: every program exits 65", arguments: ["header", "text"])
    func notSQLite(_ damage: String) async throws {
        let cluster = try cluster("notdb-\(damage)")
        let a = try cluster.addNode("a")
        try await a.start()
        #expect(try await a.stop() == 0)
        // Without [store] schema, syncd reads the schema registered in the store first: the step where it
        // met such a file and exited 71 (a system error) instead of 65.
        let config = try String(contentsOfFile: a.configPath, encoding: .utf8)
        try config.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("schema = ") }.joined(separator: "\n")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: a.storePath + suffix) }
        if damage == "header" {
            let handle = try #require(FileHandle(forWritingAtPath: a.storePath))
            try handle.write(contentsOf: Data(repeating: 0x41, count: 100))
            try handle.close()
        } else {
            try "not a database\n".write(toFile: a.storePath, atomically: false, encoding: .utf8)
        }
        let syncd = try await Subprocess.run(Products.path("syncd"), ["--config", a.configPath])
        #expect(syncd.status == ExitStatus.dataError, "\(syncd)")
        #expect(syncd.stderr.contains("is not a usable SQLite database") || syncd.stderr.contains("is not a SQLite database"), "\(syncd.stderr)")
        let logsync = try await Subprocess.run(Products.path("logsync"), ["history", "--store", a.storePath])
        #expect(logsync.status == ExitStatus.dataError, "\(logsync)")
        let notes = try await Subprocess.run(Products.path("notes"), ["list", "--config", a.configPath])
        #expect(notes.status == ExitStatus.dataError, "\(notes)")
    }

    @Test("a control socket path held by another program is a clear error")
    func socketInUse() async throws {
        let cluster = try cluster("sock")
        let a = try cluster.addNode("a")
        let squatter = try UnixSocket.listen(at: a.socketPath)
        let result = try await Subprocess.run(Products.path("syncd"), ["--config", a.configPath])
        #expect(result.status == ExitStatus.systemError)
        #expect(result.stderr.contains("control socket \(a.socketPath) is in use"), "\(result.stderr)")
        // syncctl aimed at something that is not syncd says so, with its own exit code.
        // The squatter answers every connection (syncd's probe is still in its backlog) with something else,
        // from its own thread: a blocking accept on the cooperative pool can be starved by other tests.
        let answered = DispatchSemaphore(value: 0)
        Thread {
            while let client = squatter.accept() { try? client.write(Array("HTTP/1.0 400 nope\n".utf8)) }
            answered.signal()
        }.start()
        let confused = try await a.syncctl(["status"])
        #expect(confused.status == ExitStatus.protocolError, "\(confused)")
        #expect(confused.stderr.contains("not a syncd control socket"))
        squatter.shutdown()
        answered.wait()
    }

    @Test("syncctl says when syncd is not running, with its own exit code")
    func notRunning() async throws {
        let directory = try TemporaryDirectory("none")
        let result = try await Subprocess.run(Products.path("syncctl"), ["status", "--socket", directory.file("absent.sock")])
        #expect(result.status == ExitStatus.unavailable)
        #expect(result.stderr.contains("syncd is not running"))
    }
}
