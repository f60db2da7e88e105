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
