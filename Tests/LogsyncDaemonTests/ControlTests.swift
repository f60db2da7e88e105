import Foundation
import LogsyncControl
import LogsyncCore
import LogsyncDaemon
import LogsyncPlatform
import LogsyncTestKit
import Testing

/// A control socket that answers each request with what `answer` says (nil: never answers, and keeps
/// the connection open), from a thread of its own: stands in for a syncd that fails in a given way.
final class FakeSyncd: Sendable {
    let path: String
    private let socket: UnixSocket

    init(path: String, answer: @escaping @Sendable (_ id: Int, _ command: String) -> String?) throws {
        self.path = path
        socket = try UnixSocket.listen(at: path)
        let socket = self.socket
        Thread.detachNewThread {
            var silent: [UnixSocket] = []
            while let client = socket.accept() {
                var reader = LineReader(client)
                guard let line = try? reader.next(),
                    let request = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
                else { continue }
                let id = request["id"] as? Int ?? 0
                guard let text = answer(id, request["command"] as? String ?? "") else {
                    silent.append(client)
                    continue
                }
                try? client.write(Array(text.utf8) + [10])
            }
            _ = silent
        }
    }

    func stop() { socket.shutdown() }

    /// An `ok: false` answer with `code`.
    static func failure(_ id: Int, _ code: String) -> String {
        #"{"v": 1, "id": \#(id), "ok": false, "error": {"code": "\#(code)", "message": "fake syncd says \#(code)"}}"#
    }
}

@Suite("syncctl exit codes and the control server's bounds")
struct ControlTests {
    /// Every way syncd can answer, and the exit code syncctl gives for it (docs/control-protocol.md).
    @Test("syncctl's exit code on every error path", arguments: [
        (["status"], "internal", ExitStatus.daemonError),
        (["peers"], "internal", ExitStatus.daemonError),
        (["history"], "internal", ExitStatus.daemonError),
        (["watch"], "shutting_down", ExitStatus.daemonError),
        (["status"], "too_many_clients", ExitStatus.daemonError),
        (["status"], "bad_request", ExitStatus.daemonError),
        (["status"], "unsupported_version", ExitStatus.protocolError),
        (["peers"], "unsupported_version", ExitStatus.protocolError),
        (["trigger"], "sync_failed", ExitStatus.failed),
        (["trigger"], "timeout", ExitStatus.temporaryFailure),
        (["trigger"], "shutting_down", ExitStatus.daemonError),
        (["reload"], "reload_failed", ExitStatus.configuration),
        (["check"], "damaged", ExitStatus.dataError),
        (["check"], "timeout", ExitStatus.temporaryFailure),
        (["account", "switch", "x"], "bad_request", ExitStatus.daemonError),
        (["account", "switch", "x"], "timeout", ExitStatus.temporaryFailure),
        (["account", "logout"], "internal", ExitStatus.daemonError),
        (["account", "status"], "internal", ExitStatus.daemonError),
        (["account", "list"], "unsupported_version", ExitStatus.protocolError),
    ])
    func failuresBecomeExitCodes(arguments: [String], code: String, expected: Int32) async throws {
        let directory = try TemporaryDirectory("ctl")
        let fake = try FakeSyncd(path: directory.file("s.sock")) { id, _ in FakeSyncd.failure(id, code) }
        defer { fake.stop() }
        let result = try await Subprocess.run(Products.path("syncctl"), arguments + ["--socket", fake.path], timeout: .seconds(30))
        #expect(result.status == expected, "syncctl \(arguments) answered \(code): \(result)")
        #expect(result.stderr.contains("fake syncd says \(code)"), "the daemon's message is shown: \(result.stderr)")
    }

    @Test("answers that are not syncd's: a missing field, another request's id, another version, silence", arguments: [
        ("status", #"{"v": 1, "id": ID, "ok": true}"#, ExitStatus.protocolError),
        ("peers", #"{"v": 1, "id": ID, "ok": true}"#, ExitStatus.protocolError),
        ("history", #"{"v": 1, "id": ID, "ok": true}"#, ExitStatus.protocolError),
        ("status", #"{"v": 1, "id": 999, "ok": true, "peers": []}"#, ExitStatus.protocolError),
        ("status", #"{"v": 2, "id": ID, "ok": true}"#, ExitStatus.protocolError),
        ("trigger", "", ExitStatus.temporaryFailure),
    ])
    func strangeAnswers(command: String, answer: String, expected: Int32) async throws {
        let directory = try TemporaryDirectory("ctl")
        let fake = try FakeSyncd(path: directory.file("s.sock")) { id, _ in
            answer.isEmpty ? nil : answer.replacingOccurrences(of: "ID", with: String(id))
        }
        defer { fake.stop() }
        let extra = command == "trigger" ? ["--timeout", "0.5"] : []
        let result = try await Subprocess.run(Products.path("syncctl"), [command, "--socket", fake.path] + extra, timeout: .seconds(30))
        #expect(result.status == expected, "\(command) answered \(answer.isEmpty ? "nothing" : answer): \(result)")
    }

    @Test("a bad command line exits 64, a bad configuration 78")
    func usageAndConfiguration() async throws {
        let directory = try TemporaryDirectory("ctl")
        #expect(try await Subprocess.run(Products.path("syncctl"), ["frobnicate"]).status == ExitStatus.usage)
        #expect(try await Subprocess.run(Products.path("syncctl"), ["status", "--bogus"]).status == ExitStatus.usage)
        let file = try directory.write("syncd.toml", "[sync]\naccount = 42\n")
        let result = try await Subprocess.run(Products.path("syncctl"), ["status", "--config", file])
        #expect(result.status == ExitStatus.configuration)
        #expect(result.stderr.contains("\(file):2:"), "\(result.stderr)")
    }

    @Test("syncctl watch prints events, and exits 0 with the 'stopping' event when syncd stops")
    func watchEndsWithTheDaemon() async throws {
        let cluster = try cluster("watch")
        let a = try cluster.addNode("a")
        try await a.start()
        let watch = try Subprocess(Products.path("syncctl"), ["watch", "--json", "--socket", a.socketPath])
        defer { watch.process.terminate() }
        // Rounds until the watch has seen one (it subscribes once connected, which takes a moment).
        try await eventually(within: .seconds(20), every: .zero, "a sync_finished event in the watch:\n\(watch.stdout) \(watch.stderr)") { () async throws -> Bool in
            if watch.stdout.contains("\"sync_finished\"") { return true }
            #expect(try await a.syncctl(["trigger"]).status == 0)
            return false
        }
        #expect(try await a.stop() == 0)
        let status = try await watch.waitForExit(timeout: .seconds(30))
        #expect(status == 0, "\(watch.stdout) \(watch.stderr)")
        #expect(watch.stdout.contains("\"stopping\""), "\(watch.stdout)")
    }

    @Test("an unknown command or version is answered with the request's id, naming what was asked")
    func unknownCommand() async throws {
        let cluster = try cluster("cmd")
        let a = try cluster.addNode("a")
        try await a.start()
        let client = try UnixSocket.connect(to: a.socketPath)
        client.setReceiveTimeout(milliseconds: 5_000)
        var reader = LineReader(client)
        func ask(_ line: String) throws -> ControlResponse {
            try client.write(Array(line.utf8) + [10])
            let answer = try #require(try reader.next())
            return try JSONDecoder().decode(ControlResponse.self, from: Data(answer))
        }
        let unknown = try ask(#"{"v": 1, "id": 42, "command": "frobnicate"}"#)
        #expect(unknown.id == 42 && !unknown.ok && unknown.error?.code == .badRequest)
        #expect(unknown.error?.message.contains("unknown command 'frobnicate'") == true, "\(String(describing: unknown.error))")
        #expect(unknown.error?.message.contains("status, trigger") == true)
        let version = try ask(#"{"v": 2, "id": 43, "command": "status"}"#)
        #expect(version.id == 43 && version.error?.code == .unsupportedVersion)
        let malformed = try ask(#"{"v": 1, "id": 44, "command": "history", "limit": "many"}"#)
        #expect(malformed.id == 44 && malformed.error?.code == .badRequest && malformed.error?.message.contains("history") == true)
        let badAccount = try ask(#"{"v": 1, "id": 46, "command": "account_switch", "account": "../etc"}"#)
        #expect(badAccount.id == 46 && badAccount.error?.code == .badRequest && badAccount.error?.message.contains("account name") == true)
        let noAccount = try ask(#"{"v": 1, "id": 47, "command": "account_switch"}"#)
        #expect(noAccount.error?.code == .badRequest && noAccount.error?.message.contains("needs 'account'") == true)
        let badLogout = try ask(#"{"v": 1, "id": 48, "command": "account_logout", "logout": "shred"}"#)
        #expect(badLogout.error?.code == .badRequest)
        // The connection still serves well-formed requests.
        #expect(try ask(#"{"v": 1, "id": 45, "command": "status"}"#).status != nil)
        try await a.stop()
    }

    @Test("at most 32 control clients at once; one more is told so; idle clients are let go after 10 s")
    func boundedClients() async throws {
        let cluster = try cluster("many")
        let a = try cluster.addNode("a")
        try await a.start()
        // 32 clients that connect and say nothing.
        var idle = try (0..<32).map { _ in try UnixSocket.connect(to: a.socketPath) }
        let connectedAt = ContinuousClock.now
        // The server admits them one at a time: wait until the 33rd is refused.
        let refusal = try await eventually(within: .seconds(30), every: .zero, "the 33rd client to be refused") { () -> ControlResponse? in
            let extra = try UnixSocket.connect(to: a.socketPath)
            extra.setReceiveTimeout(milliseconds: 200)
            var reader = LineReader(extra)
            return (try? reader.next()).flatMap { $0 }.flatMap { try? JSONDecoder().decode(ControlResponse.self, from: Data($0)) }
        }
        #expect(refusal.error?.code == .tooManyClients, "\(refusal)")
        let busy = try await a.syncctl(["status"])
        #expect(busy.status == ExitStatus.daemonError && busy.stderr.contains("already serves 32 control clients"), "\(busy)")
        try await a.awaitLog("refused")

        // Ten leave: their slots free up at once.
        idle.removeLast(10)
        try await eventually(within: .seconds(30), every: .milliseconds(20), "a freed slot for syncctl status") {
            try await a.syncctl(["status"]).status == 0
        }

        // The rest never send a request: the server closes them after its 10 s request deadline. The
        // upper bound only tells "closed" from "kept": a loaded machine admits and closes late.
        let last = idle[0]
        last.setReceiveTimeout(milliseconds: 150_000)
        let closed = try last.read()
        let waited = ContinuousClock.now - connectedAt
        #expect(closed.isEmpty, "the server closed the idle connection")
        #expect(waited >= .seconds(9) && waited < .seconds(120), "after the 10 s request deadline: \(waited)")
        try await a.stop()
    }

    @Test("SIGHUP and syncctl reload at once: every reload completes, and the shared folder is still watched")
    func concurrentReloads() async throws {
        let cluster = try cluster("hup")
        let a = try cluster.addNode("a", rescanIntervalMilliseconds: 600_000)
        let b = try cluster.addNode("b", rescanIntervalMilliseconds: 600_000)
        try await a.start()
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        let original = try String(contentsOfFile: b.configPath, encoding: .utf8)
        let pid = try #require(b.process?.process.processIdentifier)
        try await withThrowingTaskGroup(of: Int32.self) { group in
            for round in 0..<12 {
                // Each reload changes the rescan interval, so each one replaces the folder's watcher.
                try original.replacingOccurrences(of: "rescan_interval_ms = 600000", with: "rescan_interval_ms = \(600_000 + round)")
                    .write(toFile: b.configPath, atomically: true, encoding: .utf8)
                group.addTask { try await b.syncctl(["reload"]).status }
                kill(pid, SIGHUP)
            }
            for try await status in group { #expect(status == 0) }
        }
        #expect(b.process?.process.isRunning == true)
        // Still exactly one live watcher of the shared folder: a's publish wakes b at once.
        let id = UUID().uuidString.lowercased()
        try a.openStore().write(author: "a") { try $0.insert("Note", ["id": .text(id), "title": "after reloads"]) }
        try await eventually(within: .seconds(30), every: .milliseconds(10), "b to notice the arrival:\n\(b.log)") {
            try !b.openStore().read("SELECT 1 FROM Note WHERE id = ?", [.text(id)]).isEmpty
        }
        try await a.stop()
        try await b.stop()
    }

    /// The baselines this cluster's nodes have published, anywhere in the shared folder.
    private func baselines(in cluster: SyncdCluster) -> [String] {
        (FileManager.default.enumerator(atPath: cluster.shared)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lsbase") }
    }

    @Test("a reload applies [retention] to the loop's rounds and to prune, and reports a [relay] it cannot apply as needing a restart")
    func reloadRetentionAndRelay() async throws {
        let cluster = try cluster("reload-retention")
        let a = try cluster.addNode("a", tables: ["retention": ["baseline_after_transactions = 10000"]])
        try await a.start()
        defer { a.process?.process.terminate() }
        let before = try await a.syncctl(["prune", "--dry-run"])
        #expect(before.status == 0, "\(before)")
        #expect(before.stdout.contains("after 10000 transactions"), "\(before.stdout)")
        try add("one", to: a)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        #expect(baselines(in: cluster).isEmpty, "one transaction is short of 10,000")

        let original = try String(contentsOfFile: a.configPath, encoding: .utf8)
        let token = try cluster.directory.write("a/relay.token", "reload-test-token\n")
        try (original.replacingOccurrences(of: "baseline_after_transactions = 10000", with: "baseline_after_transactions = 1")
            + "\n[relay]\nurl = \"http://127.0.0.1:9\"\ntoken_file = \"\(token)\"\n")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        let reloaded = try await a.syncctl(["reload"])
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(reloaded.stdout.contains("restart syncd to apply relay"), "\(reloaded.stdout)")
        // The next round (the loop may run one by itself first) writes the baseline the new threshold asks for.
        #expect(try await a.syncctl(["trigger"]).status == 0)
        #expect(baselines(in: cluster).count == 1, "the round after the reload writes a baseline:\n\(a.log)")

        try original.replacingOccurrences(of: "baseline_after_transactions = 10000", with: "enabled = false")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        let off = try await a.syncctl(["reload"])
        #expect(off.status == 0, "\(off)")
        #expect(!off.stdout.contains("restart"), "the relay table is gone again: nothing needs a restart: \(off.stdout)")
        let refused = try await a.syncctl(["prune", "--dry-run"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("retention is off"), "prune sees the reloaded settings: \(refused)")
        try await a.stop()
    }

    @Test("a reload reads the schema file again: a new schema in place is reported as needing a restart, a broken one fails the reload")
    func reloadReadsTheSchemaFile() async throws {
        let cluster = try cluster("reload-schema")
        let a = try cluster.addNode("a")
        try await a.start()
        defer { a.process?.process.terminate() }
        let unchanged = try await a.syncctl(["reload"])
        #expect(unchanged.status == 0 && !unchanged.stdout.contains("restart"), "the same schema: \(unchanged)")

        var next = cluster.schema
        next.version += 1
        next.entities.append(Entity("Tag", attributes: [Attribute("label", .text)]))
        try Data(next.json.utf8).write(to: URL(fileURLWithPath: cluster.schemaFile))
        let changed = try await a.syncctl(["reload"])
        #expect(changed.status == 0, "\(changed)")
        #expect(changed.stdout.contains("restart syncd to apply store.schema"), "\(changed.stdout)")

        try Data("{ not a schema".utf8).write(to: URL(fileURLWithPath: cluster.schemaFile))
        let broken = try await a.syncctl(["reload"])
        #expect(broken.status == ExitStatus.configuration, "\(broken)")
        #expect(broken.stderr.contains(cluster.schemaFile), "\(broken.stderr)")
        // The daemon runs on the schema it started with.
        try add("after a broken schema file", to: a)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        try await a.stop()
    }

    @Test("a reload hands a Syncthing API key rotated in its file to syncd's scan requests")
    func reloadRotatesSyncthingKey() async throws {
        let cluster = try cluster("reload-syncthing")
        let shared = cluster.shared
        let syncthing = try StubHTTPServer { request in
            request.path.hasPrefix("/rest/config/folders") ? (200, #"[{"id": "logsync", "path": "\#(shared)"}]"#) : (200, "")
        }
        defer { syncthing.stop() }
        let keyFile = try cluster.directory.write("syncthing.key", "first-key\n")
        let a = try cluster.addNode(
            "a", tables: ["syncthing": ["url = \"http://127.0.0.1:\(syncthing.port)\"", "api_key_file = \"\(keyFile)\""]])
        try await a.start()
        defer { a.process?.process.terminate() }
        func scanKeys() -> [String?] { syncthing.received.filter { $0.path.hasPrefix("/rest/db/scan") }.map { $0.headers["x-api-key"] } }
        try add("one", to: a)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        try await eventually(within: .seconds(20), "syncd asks Syncthing to scan, with the first key:\n\(a.log)") { !scanKeys().isEmpty }
        #expect(scanKeys().allSatisfy { $0 == "first-key" }, "\(scanKeys())")

        try Data("second-key\n".utf8).write(to: URL(fileURLWithPath: keyFile))
        let reloaded = try await a.syncctl(["reload"])
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(reloaded.stdout.contains("Syncthing API key read again from \(keyFile)"), "\(reloaded.stdout)")
        let before = scanKeys().count
        try add("two", to: a)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        try await eventually(within: .seconds(20), "the next scan request carries the second key:\n\(a.log)") { scanKeys().count > before }
        #expect(scanKeys().dropFirst(before).allSatisfy { $0 == "second-key" }, "\(scanKeys())")
        try await a.stop()
    }

    @Test("a reload while an account switch mounts the new store reaches the rounds on that store, not only prune")
    func reloadDuringSwitch() async throws {
        let cluster = try cluster("reload-switch")
        let a = try cluster.addNode("a", account: "x", tables: ["retention": ["baseline_after_transactions = 1"]])
        // The switch holds between making the new account's mount and handing it to the loop until the
        // gate file exists: the test acts there, then opens the gate.
        let gate = cluster.directory.file("gate")
        try await a.start(environment: ["LOGSYNC_FAULT": "switch.mounting", "LOGSYNC_FAULT_GATE": gate])
        defer { a.process?.process.terminate() }
        let stateFile = a.storePath + ".accounts/state.json"
        let switching = Task { try await a.syncctl(["account", "switch", "y"]) }
        try await a.awaitLog("fault injection: switch.mounting waits for", timeout: .seconds(60))
        #expect((try? String(contentsOfFile: stateFile, encoding: .utf8))?.contains("\"did_change\"") == true)
        let original = try String(contentsOfFile: a.configPath, encoding: .utf8)
        try original.replacingOccurrences(of: "baseline_after_transactions = 1", with: "enabled = false")
            .write(toFile: a.configPath, atomically: true, encoding: .utf8)
        #expect(try await a.syncctl(["reload"]).status == 0)
        try "".write(toFile: gate, atomically: true, encoding: .utf8)
        let switched = try await switching.value
        #expect(switched.status == 0, "\(switched)\n\(a.log)")

        // Retention is off for prune and for the loop: a transaction and a round write no baseline.
        let refused = try await a.syncctl(["prune", "--dry-run"])
        #expect(refused.stderr.contains("retention is off"), "\(refused)")
        try add("in y", to: a)
        #expect(try await a.syncctl(["trigger"]).status == 0)
        #expect(baselines(in: cluster).isEmpty, "the loop runs with retention off:\n\(a.log)")
        try await a.stop()
    }
}
