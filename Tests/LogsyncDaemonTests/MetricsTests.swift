import Foundation
import LogsyncControl
import LogsyncCore
import LogsyncPlatform
import LogsyncTestKit
import LogsyncTransport
import Testing

/// syncd's `/metrics` (`[metrics] listen`), scraped from a running daemon and read with Prometheus's own
/// parser: the facts `syncctl status --json` gives, and counters since start.
@Suite("syncd metrics for Prometheus", .serialized)
struct MetricsTests {
    /// The parser must be there in CI: a missing one is a broken setup, not a test to skip.
    static var parserAvailable: Bool { PrometheusParser.python != nil || ProcessInfo.processInfo.environment["CI"] != nil }

    /// Starts `node` with metrics on an ephemeral loopback port and returns that port, from the journal.
    static func startWithMetrics(_ node: SyncdNode) async throws -> Int {
        try await node.start()
        let line = try await eventually(within: .seconds(30), "the metrics line in the log:\n\(node.log)") {
            node.log.split(separator: "\n").first { $0.contains("metrics at http://127.0.0.1:") }
        }
        let port = line.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) }
        return try #require(port, "\(line)")
    }

    @Test("a running syncd's /metrics parses as Prometheus text: rounds, peers, lag, held segments, errors, switches, retention", .enabled(if: parserAvailable, "prometheus_client is not installed (scripts/test.sh puts it in .build/test-venv)"))
    func scrapeParses() async throws {
        let cluster = try cluster("metrics")
        let a = try cluster.addNode("a", extra: [], tables: ["metrics": [#"listen = "127.0.0.1:0""#]])
        let b = try cluster.addNode("b")
        let port = try await Self.startWithMetrics(a)
        try await b.start()
        defer { for node in [a, b] { node.process?.process.terminate() } }
        try b.openStore().write(author: "b") { try $0.insert("Note", note("from b")) }
        try a.openStore().write(author: "a") { try $0.insert("Note", note("from a")) }
        try await eventually(within: .seconds(30), every: .milliseconds(20), "a applies b's note:\n\(a.log)") {
            try a.openStore().read("SELECT count(*) FROM Note") == [[.integer(2)]]
        }
        #expect(try await a.syncctl(["trigger"]).status == 0)

        let answer = try await rawRequest(port: port, method: "GET", path: "/metrics")
        #expect(answer.status == 200 && answer.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true, "\(answer.headers)")
        let (types, samples) = try await PrometheusParser.parse(answer.text)
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            samples.first { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }?.value
        }
        #expect(types["logsync_sync_rounds"] == "counter" && types["logsync_peer_lag_transactions"] == "gauge", "\(types)")
        #expect(types["logsync_sync_round_duration_seconds"] == "summary")
        #expect((value("logsync_sync_rounds_total", ["outcome": "ok"]) ?? 0) >= 1, "\(answer.text)")
        #expect(value("logsync_info", ["node": a.nodeID!, "account": "test"]) == 1, "\(answer.text)")
        #expect(value("logsync_state", ["state": "idle"]) == 1 || value("logsync_state", ["state": "syncing"]) == 1)
        #expect(value("logsync_peer_applied_sequence", ["peer": b.nodeID!]) == 1, "b's one transaction applied: \(answer.text)")
        #expect(value("logsync_peer_lag_transactions", ["peer": b.nodeID!]) == 0)
        #expect((value("logsync_published_segments_total") ?? 0) >= 1 && (value("logsync_published_bytes_total") ?? 0) > 0, "\(answer.text)")
        #expect((value("logsync_applied_transactions_total") ?? 0) >= 1 && (value("logsync_applied_bytes_total") ?? 0) > 0, "\(answer.text)")
        #expect(value("logsync_errors_total", ["kind": "round_failed"]) == 0)
        #expect(value("logsync_account_switches_total") == 0 && value("logsync_account_switching") == 0)
        #expect(value("logsync_retention_kept_segments") != nil, "retention is on by default: \(answer.text)")

        // What status says, the metrics say: the same peers, the same pending counts.
        let status = try await a.status()
        #expect(value("logsync_pending_transactions") == (status["pending_transactions"] as? NSNumber)?.doubleValue)
        let peers = (status["peers"] as? [[String: Any]] ?? []).compactMap { $0["node"] as? String }
        #expect(Set(samples.filter { $0.name == "logsync_peer_lag_transactions" }.compactMap { $0.labels["peer"] }) == Set(peers))

        // A held segment shows with its reason: a new node's sequence 2, whose 1 is not there.
        _ = try HeldSegments.publish(in: cluster.shared + "/test/", sequence: 2, at: WallClock.milliseconds())
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let held = try await PrometheusParser.parse(try await rawRequest(port: port, method: "GET", path: "/metrics").text).samples
        #expect(held.first { $0.name == "logsync_held_segments" && $0.labels["reason"] == "missing" }?.value == 1, "\(held.filter { $0.name.hasPrefix("logsync_held") })")

        // A refused segment shows with the kind of its reason: an entity this schema does not declare.
        let forger = UUID().uuidString.lowercased()
        let forged = LogTransaction(
            sequence: 1, timestamp: HLCTimestamp(physicalMilliseconds: WallClock.milliseconds(), logical: 0), author: "forger", contextName: nil,
            changes: [LogChange(entity: "Nope", primaryKey: .text(UUID().uuidString.lowercased()), kind: .insert, causalLength: 1, values: ["x": 1])])
        let bytes = try SegmentEncoder.encode(schemaVersion: cluster.schema.version, account: "test", node: NodeID(forger), transactions: [forged])
        try FileManager.default.createDirectory(atPath: cluster.shared + "/test/" + forger, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: cluster.shared + "/test/" + forger + "/" + SegmentName(node: NodeID(forger), firstSequence: 1, lastSequence: 1).fileName))
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let refused = try await PrometheusParser.parse(try await rawRequest(port: port, method: "GET", path: "/metrics").text).samples
            .filter { $0.name == "logsync_refused_segments" }
        #expect(refused.count == 1 && refused.first?.value == 1 && refused.first?.labels["reason"]?.contains("schema") == true, "\(refused)")

        // The same change from a node on a newer schema is kept, not refused, and the versions show.
        let newer = UUID().uuidString.lowercased()
        let kept = try SegmentEncoder.encode(schemaVersion: cluster.schema.version + 1, account: "test", node: NodeID(newer), transactions: [forged])
        try FileManager.default.createDirectory(atPath: cluster.shared + "/test/" + newer, withIntermediateDirectories: true)
        try Data(kept).write(to: URL(fileURLWithPath: cluster.shared + "/test/" + newer + "/" + SegmentName(node: NodeID(newer), firstSequence: 1, lastSequence: 1).fileName))
        #expect(try await a.syncctl(["trigger"]).status == 0)
        let versions = try await PrometheusParser.parse(try await rawRequest(port: port, method: "GET", path: "/metrics").text).samples
        func sample(_ name: String) -> Double? { versions.first { $0.name == name }?.value }
        #expect(sample("logsync_schema_version") == Double(cluster.schema.version), "\(versions.filter { $0.name.contains("schema") })")
        #expect(sample("logsync_newest_peer_schema_version") == Double(cluster.schema.version + 1))
        #expect(sample("logsync_kept_transactions") == 1)
    }

    @Test("only GET /metrics is served; a client that sends nothing is let go after its deadline and holds no scrape up")
    func boundedAndNarrow() async throws {
        let cluster = try cluster("metrics-bounds")
        let a = try cluster.addNode("a", extra: [], tables: ["metrics": [#"listen = "127.0.0.1:0""#]])
        let port = try await Self.startWithMetrics(a)
        defer { a.process?.process.terminate() }
        #expect(try await rawRequest(port: port, method: "GET", path: "/other").status == 404)
        #expect(try await rawRequest(port: port, method: "POST", path: "/metrics", body: []).status == 405)
        // A client that connects and says nothing: the next scrape is answered once its deadline passes.
        let silent = try RawConnection(port: port)
        let scraped = try await rawRequest(port: port, method: "GET", path: "/metrics")
        #expect(scraped.status == 200 && scraped.text.contains("logsync_sync_rounds_total"))
        withExtendedLifetime(silent) {}
        #expect(try await a.stop() == 0)
    }

    @Test("metrics.listen takes a loopback address only, and a taken port is a clear error at start")
    func configuration() async throws {
        let directory = try TemporaryDirectory("metrics-config")
        for (value, message) in [
            ("0.0.0.0:9469", "is not a loopback address"), ("192.168.1.2:9469", "is not a loopback address"),
            ("127.0.0.1", "is not HOST:PORT"), ("127.0.0.1:99999", "is not a port"), ("localhost:9469", "is not a loopback address"),
        ] {
            let file = try directory.write("bad.toml", "[metrics]\nlisten = \"\(value)\"\n")
            let error = #expect(throws: ConfigError.self) { try DaemonConfiguration.load(file: file) }
            #expect(error?.description.contains(message) == true && error?.description.contains("bad.toml:2") == true, "\(String(describing: error))")
        }
        for value in ["127.0.0.1:9469", "[::1]:9469", "127.0.0.5:0"] {
            let file = try directory.write("good.toml", "[metrics]\nlisten = \"\(value)\"\n")
            #expect(try DaemonConfiguration.load(file: file).metricsListen != nil, "\(value)")
        }
        // A port another program holds: syncd says so and exits 71, before it says it is ready.
        let cluster = try cluster("metrics-taken")
        let first = try cluster.addNode("a", extra: [], tables: ["metrics": [#"listen = "127.0.0.1:0""#]])
        let port = try await Self.startWithMetrics(first)
        defer { first.process?.process.terminate() }
        let second = try cluster.addNode("b", extra: [], tables: ["metrics": ["listen = \"127.0.0.1:\(port)\""]])
        let refused = try await Subprocess.run(Products.path("syncd"), ["--config", second.configPath])
        #expect(refused.status == ExitStatus.systemError && refused.stderr.contains("cannot serve metrics at 127.0.0.1:\(port)"), "\(refused)")
    }
}
