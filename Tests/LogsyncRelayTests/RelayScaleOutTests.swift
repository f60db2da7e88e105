import Foundation
import Logging
import LogsyncCore
import LogsyncRelay
import LogsyncRelayPostgres
import LogsyncStore
import LogsyncTestKit
import Synchronization
import Testing

/// Several relays on one PostgreSQL database (docs/relay-protocol.md, "Several relays on one
/// database"): arrival order valid on every relay, wake-ups across relays that faults delay but never
/// lose, a node switching relay on every request, a SQLite relay moved over.
@Suite(.serialized) struct RelayScaleOutTests {
    static var logger: Logger {
        var logger = Logger(label: "test.relay.postgres")
        logger.logLevel = .error
        return logger
    }

    static func settings(_ server: PostgresServer, _ database: String) -> PostgresConnectionSettings {
        var settings = PostgresConnectionSettings()
        settings.socketDirectory = server.socketDirectory
        settings.port = server.port
        settings.user = "postgres"
        settings.database = database
        settings.operationTimeoutSeconds = 30
        return settings
    }

    /// Two relays' storages on one database, four pushers spread over both into one account, and a
    /// puller that tails the account through both, one page at a time with the cursor it was given: every
    /// acknowledged push has its own arrival, the arrivals are 1…N without a hole, and the tail saw each
    /// exactly once, in order. (A cursor taken from a sequence, allocated before commit, skips here.)
    @Test func concurrentRelaysNeverSkipACursor() async throws {
        let server = try await PostgresServer.shared()
        let database = try await server.createDatabase("arrivals")
        let relays = [
            try await PostgresRelayStorage.open(settings: Self.settings(server, database), serving: true, logger: Self.logger),
            try await PostgresRelayStorage.open(settings: Self.settings(server, database), serving: true, logger: Self.logger),
        ]
        try await relays[0].createAccount("acct", quotaBytes: nil)
        let perPusher = 300
        let pushers = 4
        let done = Finished()
        let tail = Task { () throws -> [UInt64] in
            var seen: [UInt64] = []
            var cursor: UInt64 = 0
            var turn = 0
            while true {
                let finished = done.count.load(ordering: .acquiring) == pushers
                turn += 1
                let page = try await relays[turn % 2].pull(account: "acct", after: cursor, limit: 7, maximumBytes: 1 << 20)
                seen += page.segments.map(\.arrival)
                cursor = page.cursor
                if finished && page.segments.isEmpty { return seen }
            }
        }
        let acknowledged = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for pusher in 0..<pushers {
                group.addTask {
                    defer { done.count.add(1, ordering: .releasing) }
                    var arrivals: [UInt64] = []
                    let node = NodeID(String(format: "%016x", 0xA000 + pusher))
                    for sequence in 1...UInt64(perPusher) {
                        let push = SegmentPush(
                            account: "acct", node: node, firstSequence: sequence, lastSequence: sequence, bytes: Array("\(pusher)/\(sequence)".utf8),
                            defaultQuotaBytes: 1 << 30)
                        guard case .stored(let arrival) = try await relays[Int(sequence) % 2].push(push) else {
                            Issue.record("push \(pusher)/\(sequence) was not stored new")
                            continue
                        }
                        arrivals.append(arrival)
                    }
                    return arrivals
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let seen = try await tail.value
        let total = UInt64(perPusher * pushers)
        #expect(acknowledged.sorted() == Array(1...total), "every acknowledged push has its own arrival, without a hole")
        #expect(seen == Array(1...total), "the tail saw every arrival once, in order: skipped \(Set(1...total).subtracting(seen).count), duplicated \(seen.count - Set(seen).count)")
        #expect(try await relays[1].latestArrival(account: "acct") == total)
        for relay in relays { await relay.close() }
    }

    /// Two relay processes on one database: a long-poll on B hears a push on A through B's LISTEN
    /// session (B counts the notification), then again after B's session is terminated by the server.
    @Test func pushOnOneRelayWakesLongPollsOnAnother() async throws {
        let server = try await PostgresServer.shared()
        let database = try await server.createDatabase("wake")
        let (a, b) = (try RelayProcess("ra", store: .postgres(server, database: database)), try RelayProcess("rb", store: .postgres(server, database: database)))
        try await a.createAccount("acct")
        let token = try await a.issueToken("acct")
        try await a.start()
        try await b.start()
        defer { for relay in [a, b] { relay.process?.process.terminate() } }
        let node = SegmentFixtures.nodeID()
        try await Self.expectWake(from: a, on: b, token: token, node: node, sequence: 1)
        #expect(try await Self.metric(b, "relay_wake_lag_seconds_count") >= 1, "B heard A's notification")

        // The server ends B's LISTEN session: B listens again, and hears the next push.
        let terminated = try await server.sql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sync-relay listen' AND datname = '\(database)'")
        #expect(Int(terminated) ?? 0 >= 2, "each relay had a LISTEN session: \(terminated)")
        try await eventually(within: .seconds(30), "B listens again") { try await Self.metric(b, "relay_listen_sessions_total") >= 2 }
        try await Self.expectWake(from: a, on: b, token: token, node: node, sequence: 2)
        #expect(try await a.stop() == 0)
        #expect(try await b.stop() == 0)
    }

    /// A relay that hears no notification at all (it never listens): its long-polls are still woken by
    /// the re-check, which reads every waiting account from the database.
    @Test func lostNotificationsDelayWakeUpsButNeverLoseThem() async throws {
        let server = try await PostgresServer.shared()
        let database = try await server.createDatabase("lost")
        let a = try RelayProcess("ra", store: .postgres(server, database: database))
        let b = try RelayProcess("rb", store: .postgres(server, database: database))
        try b.configure("[postgres]\nrecheck_ms = 300\n")
        try await a.createAccount("acct")
        let token = try await a.issueToken("acct")
        try await a.start()
        try await b.start(environment: ["LOGSYNC_RELAY_FAULT": "no-listen"])
        defer { for relay in [a, b] { relay.process?.process.terminate() } }
        try await Self.expectWake(from: a, on: b, token: token, node: SegmentFixtures.nodeID(), sequence: 1)
        #expect(try await Self.metric(b, "relay_listening") == 0)
        #expect(try await Self.metric(b, "relay_wake_lag_seconds_count") == 0, "B heard no notification")
        #expect(try await Self.metric(b, "relay_recheck_announcements_total") >= 1, "the re-check woke it")
    }

    /// Long-polls on `waiter` after the account's latest arrival, then pushes `node`'s segment `sequence`
    /// to `pusher`: the long-poll answers with it, well before its 30 s deadline.
    static func expectWake(
        from pusher: RelayProcess, on waiter: RelayProcess, token: String, node: String, sequence: UInt64, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let latest = try await rawRequest(port: waiter.port, method: "GET", path: "/v1/accounts/acct/nodes", token: token)
        let cursor = (try JSONSerialization.jsonObject(with: Data(latest.body)) as? [String: Any])?["cursor"] as? Int ?? 0
        let (port, path) = (waiter.port, "/v1/accounts/acct/segments?after=\(cursor)&wait=30")
        let started = ContinuousClock.now
        let waiting = Task.detached { try await rawRequest(port: port, method: "GET", path: path, token: token) }
        try await eventually(within: .seconds(30), "the long-poll waits on the other relay") { try await metric(waiter, "relay_waiting_polls") == 1 }
        let bytes = try SegmentFixtures.segment(account: "acct", node: node, first: sequence, last: sequence)
        let pushed = try await rawRequest(
            port: pusher.port, method: "PUT", path: "/v1/accounts/acct/nodes/\(node)/segments/\(sequence)-\(sequence)", token: token, body: bytes)
        #expect(pushed.status == 201, "\(pushed.text)", sourceLocation: sourceLocation)
        let answer = try await waiting.value
        #expect(answer.status == 200 && answer.text.contains("\"first\":\(sequence)"), "\(answer.text)", sourceLocation: sourceLocation)
        #expect(ContinuousClock.now - started < .seconds(25), "woken by the push, not by its 30 s deadline", sourceLocation: sourceLocation)
    }

    /// A value of the relay's `/metrics`.
    static func metric(_ relay: RelayProcess, _ name: String) async throws -> Double {
        let text = try await rawRequest(port: relay.port, method: "GET", path: "/metrics").text
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? -1
    }
}

/// How many pushers have finished.
final class Finished: Sendable {
    let count = Atomic<Int>(0)
}

/// Real `syncd` nodes and several relays on one database.
@Suite(.serialized) struct RelayScaleOutSyncTests {
    /// A round-robin proxy (scripts/relay-round-robin.py) in front of `relays`: each request goes to the
    /// next relay, whatever connection the client keeps. Stops when this test process ends.
    static func roundRobin(_ relays: [RelayProcess], in directory: TemporaryDirectory) async throws -> (Subprocess, Int) {
        let portFile = directory.file("proxy.port")
        let proxy = try Subprocess("/usr/bin/python3", [Products.packageRoot + "/scripts/relay-round-robin.py", portFile] + relays.map { String($0.port) })
        let port = try await eventually(within: .seconds(30), "the proxy listens") { () -> Int? in
            (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) }
        }
        return (proxy, port)
    }

    /// Three relays started at once on a new database (their migrations meet under the advisory lock),
    /// three nodes behind a proxy that sends every request to the next relay: they converge, each
    /// transaction applied once, and every relay served pushes and pulls.
    @Test func nodesSwitchingRelayOnEveryRequestConverge() async throws {
        let server = try await PostgresServer.shared()
        let database = try await server.createDatabase("three")
        let relays = try (0..<3).map { try RelayProcess("r\($0)", store: .postgres(server, database: database)) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for relay in relays { group.addTask { try await relay.start() } }
            try await group.waitForAll()
        }
        defer { for relay in relays { relay.process?.process.terminate() } }
        let identities = Set(try await relays.asyncMap { try await $0.identity() })
        #expect(identities.count == 1, "one database, one identity: \(identities)")
        try await relays[0].createAccount("test")
        let (proxy, port) = try await Self.roundRobin(relays, in: relays[0].directory)
        defer { proxy.process.terminate() }

        let cluster = try SyncdCluster("scaleout", schema: relayTestSchema)
        var nodes: [SyncdNode] = []
        for name in ["a", "b", "c"] {
            let token = try await relays[1].tokenFile("test", name: "\(name).token")
            nodes.append(
                try cluster.addNode(
                    name, rescanIntervalMilliseconds: 60_000,
                    extra: ["", "[relay]", "url = \"http://127.0.0.1:\(port)\"", "token_file = \"\(token)\"", "long_poll_s = 5"]))
        }
        for node in nodes { try await node.start() }
        defer { for node in nodes { node.process?.process.terminate() } }
        for round in 0..<3 {
            for node in nodes {
                try node.openStore().write(author: node.name) { tx in try tx.insert("Note", note("\(node.name) \(round)")) }
            }
        }
        let tables = try await cluster.awaitConvergence(timeout: .seconds(60))
        #expect(tables["Note"]?.count == 9)
        for node in nodes {
            let store = try node.openStore()
            #expect(try store.sync.quarantined().isEmpty)
            for other in nodes where other.name != node.name {
                #expect(try store.history(filter: HistoryFilter(origins: [.remote(other.nodeID!)])).count == 3, "\(node.name) applied \(other.name)'s 3 transactions once")
            }
        }
        var stored = 0.0
        for relay in relays {
            let metrics = try await rawRequest(port: relay.port, method: "GET", path: "/metrics").text
            #expect(metrics.contains("route=\"/v1/accounts/{account}/segments\",status=\"200\""), "relay \(relay.port) answered pulls:\n\(metrics)")
            stored += max(0, try await RelayScaleOutTests.metric(relay, "relay_pushes_total{outcome=\"stored\"}"))
        }
        #expect(stored >= 3, "the relays stored the nodes' pushes between them: \(stored)")
        for node in nodes { #expect(try await node.stop() == 0) }
        for relay in relays { #expect(try await relay.stop() == 0) }
    }

    /// The database goes away under a serving relay: pushes are answered 503 with Retry-After, nothing is
    /// acknowledged, readiness says so; once it is back the relay serves again by itself, and what it
    /// acknowledged before is there.
    @Test func relayThatLosesItsDatabaseAnswers503AndRecovers() async throws {
        let server = try await PostgresServer.start("pgdown")
        let database = try await server.createDatabase("down")
        let relay = try RelayProcess("rdown", store: .postgres(server, database: database))
        try relay.configure("[postgres]\noperation_timeout_s = 2\n")
        try await relay.createAccount("acct")
        let token = try await relay.issueToken("acct")
        try await relay.start()
        defer { relay.process?.process.terminate() }
        let node = SegmentFixtures.nodeID()
        func push(_ sequence: UInt64) async throws -> RawResponse {
            try await rawRequest(
                port: relay.port, method: "PUT", path: "/v1/accounts/acct/nodes/\(node)/segments/\(sequence)-\(sequence)", token: token,
                body: try SegmentFixtures.segment(account: "acct", node: node, first: sequence, last: sequence))
        }
        #expect(try await push(1).status == 201)
        try await server.stop()
        let refused = try await push(2)
        #expect(refused.status == 503 && refused.headers["retry-after"] != nil, "\(refused.status) \(refused.headers) \(refused.text)")
        #expect(refused.errorCode == "unavailable" && refused.text.contains("PostgreSQL"), "\(refused.text)")
        #expect(try await rawRequest(port: relay.port, method: "GET", path: "/v1/ready").status == 503)
        try await server.restart()
        try await eventually(within: .seconds(60), "the relay is ready again") {
            try await rawRequest(port: relay.port, method: "GET", path: "/v1/ready").status == 200
        }
        let again = try await eventually(within: .seconds(60), "the push is taken again") { () -> RawResponse? in
            let answer = try await push(2)
            return answer.status == 503 ? nil : answer
        }
        #expect(again.status == 201, "\(again.text)")
        let pulled = try await rawRequest(port: relay.port, method: "GET", path: "/v1/accounts/acct/segments?after=0", token: token)
        #expect(pulled.text.contains("\"arrival\":1") && pulled.text.contains("\"arrival\":2"), "\(pulled.text)")
        #expect(try await relay.stop() == 0)
        try await server.stop()
    }

    /// A SQLite relay moved to PostgreSQL with `sync-relay migrate`: the same identity and epoch, the same
    /// arrival numbers, tokens, progress records and baselines; a node's cursor stays valid.
    @Test func migrateCopiesASQLiteRelayWithItsCursors() async throws {
        let old = try RelayProcess("rold")
        try await old.createAccount("acct")
        try await old.createAccount("gone")
        let token = try await old.issueToken("acct")
        try await old.start()
        let node = SegmentFixtures.nodeID()
        for sequence in UInt64(1)...5 {
            let answer = try await rawRequest(
                port: old.port, method: "PUT", path: "/v1/accounts/acct/nodes/\(node)/segments/\(sequence)-\(sequence)", token: token,
                body: try SegmentFixtures.segment(account: "acct", node: node, first: sequence, last: sequence))
            #expect(answer.status == 201)
        }
        let record = RelayRetentionTests.record(account: "acct", node: node, applied: [node: 5])
        #expect(try await rawRequest(port: old.port, method: "PUT", path: "/v1/accounts/acct/nodes/\(node)/progress", token: token, body: record).status == 204)
        let baseline = RelayRetentionTests.bytes(300_000)
        let name = RelayRetentionTests.baselineName(node, 5).fileName
        #expect(try await rawRequest(port: old.port, method: "PUT", path: "/v1/accounts/acct/nodes/\(node)/baselines/\(name)", token: token, body: baseline).status == 201)
        let deleted = try await rawRequest(port: old.port, method: "DELETE", path: "/v1/accounts/acct/nodes/\(node)/segments/2-2", token: token)
        #expect(deleted.status == 204)
        let before = try await rawRequest(port: old.port, method: "GET", path: "/v1/accounts/acct/segments?after=0", token: token).text
        let identity = try await old.identity()
        #expect(try await old.stop() == 0)

        let server = try await PostgresServer.shared()
        let database = try await server.createDatabase("moved")
        let new = try RelayProcess("rnew", store: .postgres(server, database: database))
        let copy = try await Subprocess.run(
            Products.path("sync-relay"), ["migrate", "--from", old.database, "--config", new.directory.file("sync-relay.toml"), "--json"])
        #expect(copy.status == 0, "\(copy.stderr)")
        #expect(copy.stdout.contains("\"segments\" : 4") && copy.stdout.contains("\"baselines\" : 1"), "\(copy.stdout)")
        let twice = try await Subprocess.run(Products.path("sync-relay"), ["migrate", "--from", old.database, "--config", new.directory.file("sync-relay.toml")])
        #expect(twice.status != 0 && twice.stderr.contains("holds 2 accounts already"), "a second copy is refused: \(twice.stderr)")
        try await new.start()
        defer { new.process?.process.terminate() }
        #expect(try await new.identity() == identity, "nodes see the same relay identity and epoch")
        let after = try await rawRequest(port: new.port, method: "GET", path: "/v1/accounts/acct/segments?after=0", token: token).text
        #expect(after == before, "the same segments at the same arrivals, read with the old token")
        let next = try await rawRequest(
            port: new.port, method: "PUT", path: "/v1/accounts/acct/nodes/\(node)/segments/6-6", token: token,
            body: try SegmentFixtures.segment(account: "acct", node: node, first: 6, last: 6))
        #expect(next.text == #"{"arrival":6,"stored":true}"#, "arrivals go on where they were (5 pushed, one deleted): \(next.text)")
        let downloaded = try await rawRequest(port: new.port, method: "GET", path: "/v1/accounts/acct/nodes/\(node)/baselines/\(name)", token: token)
        #expect(downloaded.body == baseline)
        let progress = try await rawRequest(port: new.port, method: "GET", path: "/v1/accounts/acct/progress", token: token)
        #expect(progress.status == 200 && progress.text.contains(node), "\(progress.text)")
        #expect(try await new.stop() == 0)
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

/// The chaos run (RelayChaos): relays killed and restarted, LISTEN sessions terminated, PostgreSQL
/// restarted once. CI runs a short one; `LOGSYNC_RELAY_CHAOS_PUSHES=100000` runs the long one by hand
/// (docs/BENCHMARKS.md records it).
@Suite(.serialized) struct RelayChaosTests {
    @Test func cursorsNeitherSkipNorRepeatUnderFaults() async throws {
        var plan = RelayChaos.Plan()
        let long = ProcessInfo.processInfo.environment["LOGSYNC_RELAY_CHAOS_PUSHES"].flatMap(Int.init)
        plan.pushes = long ?? 1_500
        plan.pushers = long == nil ? 8 : 64
        plan.killEvery = long == nil ? .seconds(3) : .seconds(5)
        plan.terminateListenEvery = long == nil ? .seconds(4) : .seconds(10)
        plan.timeLimit = long == nil ? .seconds(240) : .seconds(3_600)
        let report = try await RelayChaos.run(plan) { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        print("relay chaos: " + String(decoding: try encoder.encode(report), as: UTF8.self))
        #expect(report.finished, "\(plan.pushes) pushes acknowledged within the time limit: \(report)")
        #expect(report.skipped == 0 && report.duplicated == 0, "no cursor skipped or repeated an arrival: \(report)")
        #expect(report.lost == 0, "every acknowledged push is stored at its arrival: \(report)")
        #expect(report.conflicts == 0, "a push sent again with its bytes is never refused as a conflict: \(report)")
        #expect(report.relayKills >= 2 && report.listenTerminations >= 1 && report.databaseRestarts == 1, "the faults happened: \(report)")
        #expect(report.polls > 0)
    }
}
