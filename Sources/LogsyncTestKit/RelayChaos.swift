import Foundation
import Synchronization

/// Several relays on one PostgreSQL database under faults, on loopback, bounded in pushes and time:
/// pushers spread over the relays (each push to a relay picked at random, sent again elsewhere when it
/// was not acknowledged), long-polling tailers that follow the account with their own cursors through
/// random relays, relays killed with SIGKILL and restarted, every relay's LISTEN session terminated by
/// the server on a period, and PostgreSQL restarted once. What it counts: per cursor, arrivals skipped
/// and arrivals seen twice; acknowledged pushes missing at the end; long-polls that answered more than
/// ``Plan/wakeBound`` after an arrival they waited for was acknowledged.
public enum RelayChaos {
    public struct Plan: Sendable {
        public var relays = 3
        public var pushers = 8
        /// Acknowledged pushes to reach, in all.
        public var pushes = 2_000
        public var tailers = 4
        /// A relay is killed (SIGKILL) and restarted this often.
        public var killEvery: Duration = .seconds(4)
        /// Every relay's LISTEN session is terminated (`pg_terminate_backend`) this often.
        public var terminateListenEvery: Duration = .seconds(10)
        /// PostgreSQL is restarted once, when this share of the pushes is acknowledged.
        public var restartDatabaseAt = 0.5
        /// A long-poll answer later than this after an arrival it waited for counts as late.
        public var wakeBound: Duration = .seconds(5)
        /// The whole run stops here, finished or not.
        public var timeLimit: Duration = .seconds(600)
        public var recheckMilliseconds = 1_000

        public init() {}
    }

    public struct Report: Sendable, Codable {
        public var acknowledged = 0
        public var cursors = 0
        public var skipped = 0
        public var duplicated = 0
        public var lost = 0
        public var polls = 0
        public var lateWakes = 0
        public var longestWakeMilliseconds = 0.0
        public var relayKills = 0
        public var listenTerminations = 0
        public var databaseRestarts = 0
        public var refusedOrFailedRequests = 0
        /// Pushes of the same bytes answered 409: a relay that lost track of what it stored.
        public var conflicts = 0
        public var lostExamples: [String] = []
        public var storedSegments = 0
        public var seconds = 0.0
        public var finished = false
    }

    /// What every worker shares: acknowledgements by arrival, tallies, and whether to stop.
    private final class Shared: Sendable {
        struct State {
            var acknowledgedAt: [UInt64: ContinuousClock.Instant] = [:]
            var acknowledged: [String: UInt64] = [:]
            var report = Report()
            var stopPushing = false
            var stopTailing = false
        }

        let state = Mutex(State())
        let ports: Mutex<[Int]>

        init(ports: [Int]) { self.ports = Mutex(ports) }

        func randomPort() -> Int { ports.withLock { $0.randomElement()! } }
    }

    public static func run(_ plan: Plan, log: @escaping @Sendable (String) -> Void = { _ in }) async throws -> Report {
        let started = ContinuousClock.now
        let server = try await PostgresServer.start("pgchaos", settings: ["checkpoint_timeout": "30s"])
        let database = try await server.createDatabase("chaos")
        let relays = try (0..<plan.relays).map { try RelayProcess("chaos\($0)", store: .postgres(server, database: database)) }
        for relay in relays {
            try relay.configure("[postgres]\nrecheck_ms = \(plan.recheckMilliseconds)\noperation_timeout_s = 3\n[limits]\nmax_wait_s = 30\n")
        }
        try await relays[0].createAccount("chaos")
        let token = try await relays[0].issueToken("chaos")
        for relay in relays { try await relay.start() }
        defer {
            for relay in relays { relay.process?.process.terminate() }
        }
        let shared = Shared(ports: relays.map(\.port))
        let deadline = started + plan.timeLimit

        let pushers = (0..<plan.pushers).map { index in
            worker { pushLoop(index: index, plan: plan, token: token, shared: shared, deadline: deadline) }
        }
        let tailers = (0..<plan.tailers).map { _ in worker { tailLoop(plan: plan, token: token, shared: shared, deadline: deadline) } }

        // Faults until the pushes are done.
        var nextKill = ContinuousClock.now + plan.killEvery
        var nextTermination = ContinuousClock.now + plan.terminateListenEvery
        var restarted = false
        var victim = 0
        while ContinuousClock.now < deadline {
            let (acknowledged, done) = shared.state.withLock { ($0.report.acknowledged, $0.stopPushing) }
            if done || acknowledged >= plan.pushes { break }
            if ContinuousClock.now >= nextKill {
                let relay = relays[victim % relays.count]
                victim += 1
                try await relay.kill9()
                shared.state.withLock { $0.report.relayKills += 1 }
                try? await Task.sleep(for: .milliseconds(200))
                try await startAgain(relay)
                nextKill = ContinuousClock.now + plan.killEvery
            }
            if ContinuousClock.now >= nextTermination {
                let count = (try? await server.sql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sync-relay listen' AND datname = '\(database)'"))
                    .flatMap { Int($0) } ?? 0
                shared.state.withLock { $0.report.listenTerminations += count }
                nextTermination = ContinuousClock.now + plan.terminateListenEvery
            }
            if !restarted, Double(acknowledged) >= Double(plan.pushes) * plan.restartDatabaseAt {
                restarted = true
                log("chaos: restarting PostgreSQL at \(acknowledged) acknowledged pushes")
                try await server.restart()
                shared.state.withLock { $0.report.databaseRestarts += 1 }
            }
            log("chaos: \(acknowledged) of \(plan.pushes) pushes acknowledged")
            try await Task.sleep(for: .milliseconds(500))
        }
        shared.state.withLock { $0.stopPushing = true }
        for pusher in pushers { await pusher.value }

        // The tailers catch up with the last arrival, then stop.
        let last = shared.state.withLock { $0.acknowledged.values.max() ?? 0 }
        let catchUp = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < catchUp, !shared.state.withLock({ $0.stopTailing }) {
            if TailCursors.shared.minimum(count: plan.tailers) >= last { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        shared.state.withLock { $0.stopTailing = true }
        for tailer in tailers { await tailer.value }

        // Every acknowledged push is there, at the arrival it was given.
        let stored = try await storedArrivals(port: relays[0].port, token: token)
        var report = shared.state.withLock { $0.report }
        let acknowledged = shared.state.withLock { $0.acknowledged }
        let lost = acknowledged.filter { stored[$0.key] != $0.value }
        report.lost = lost.count
        report.lostExamples = lost.prefix(10).map { "\($0.key) acknowledged at \($0.value), stored \(stored[$0.key].map { "at \($0)" } ?? "nowhere")" }
        report.storedSegments = stored.count
        for (key, arrival) in lost.prefix(5) {
            let parts = key.split(separator: "/")
            let found = (try? await server.sql(
                "SELECT coalesce(string_agg(arrival::text, ','), 'none') FROM segments WHERE account = 'chaos' AND node = '\(parts[0])' AND first = \(parts[1])",
                database: database)) ?? "?"
            let at = (try? await server.sql(
                "SELECT coalesce(string_agg(node || '/' || first, ','), 'none') FROM segments WHERE account = 'chaos' AND arrival = \(arrival)", database: database)) ?? "?"
            report.lostExamples.append("database: \(key) at \(found); arrival \(arrival) holds \(at)")
        }
        report.cursors = plan.tailers
        report.seconds = (ContinuousClock.now - started).seconds
        report.finished = report.acknowledged >= plan.pushes
        for relay in relays { _ = try? await relay.stop() }
        try? await server.stop()
        TailCursors.shared.reset()
        return report
    }

    /// Starts a killed relay again; a failed spawn is tried again (a busy test process can hand
    /// posix_spawn a descriptor another thread just closed).
    private static func startAgain(_ relay: RelayProcess) async throws {
        for attempt in 1...5 {
            do {
                return try await relay.start()
            } catch where attempt < 5 {
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    private static func worker(_ body: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        Task {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    body()
                    continuation.resume()
                }
            }
        }
    }

    /// One node pushing its segments 1, 2, 3, … each until a relay acknowledges it.
    private static func pushLoop(index: Int, plan: Plan, token: String, shared: Shared, deadline: ContinuousClock.Instant) {
        let node = String(format: "%08x-0000-4000-8000-%012x", index, index)
        var sequence: UInt64 = 1
        // A segment's bytes are made once and sent again as they are until acknowledged, as syncd does: a
        // push stored but not acknowledged (its relay killed meanwhile) is then answered 200.
        var bytes: [UInt8] = []
        while ContinuousClock.now < deadline, !shared.state.withLock({ $0.stopPushing || $0.report.acknowledged >= plan.pushes }) {
            if bytes.isEmpty {
                guard let made = try? SegmentFixtures.segment(account: "chaos", node: node, first: sequence, last: sequence) else { return }
                bytes = made
            }
            let answer = try? rawRequestBlocking(
                port: shared.randomPort(), method: "PUT", path: "/v1/accounts/chaos/nodes/\(node)/segments/\(sequence)-\(sequence)", token: token,
                body: bytes)
            guard let answer, answer.status == 200 || answer.status == 201,
                let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any], let arrival = object["arrival"] as? Int
            else {
                shared.state.withLock { state in
                    state.report.refusedOrFailedRequests += 1
                    if answer?.status == 409 { state.report.conflicts += 1 }
                }
                Thread.sleep(forTimeInterval: 0.05)
                continue
            }
            bytes = []
            let now = ContinuousClock.now
            shared.state.withLock { state in
                if state.acknowledged["\(node)/\(sequence)"] == nil { state.report.acknowledged += 1 }
                state.acknowledged["\(node)/\(sequence)"] = UInt64(arrival)
                state.acknowledgedAt[UInt64(arrival)] = min(state.acknowledgedAt[UInt64(arrival)] ?? now, now)
            }
            sequence += 1
        }
    }

    /// A cursor following the account through random relays with long-polls.
    private static func tailLoop(plan: Plan, token: String, shared: Shared, deadline: ContinuousClock.Instant) {
        let id = TailCursors.shared.register()
        var cursor: UInt64 = 0
        while ContinuousClock.now < deadline + .seconds(60), !shared.state.withLock({ $0.stopTailing }) {
            let asked = ContinuousClock.now
            guard
                let answer = try? rawRequestBlocking(
                    port: shared.randomPort(), method: "GET", path: "/v1/accounts/chaos/segments?after=\(cursor)&wait=8&limit=1000", token: token),
                answer.status == 200, let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
                let segments = object["segments"] as? [[String: Any]], let next = object["cursor"] as? Int
            else {
                shared.state.withLock { $0.report.refusedOrFailedRequests += 1 }
                Thread.sleep(forTimeInterval: 0.05)
                continue
            }
            let answered = ContinuousClock.now
            let arrivals = segments.compactMap { $0["arrival"] as? Int }.map(UInt64.init)
            shared.state.withLock { state in
                state.report.polls += 1
                var expected = cursor + 1
                for arrival in arrivals {
                    if arrival < expected { state.report.duplicated += 1 } else {
                        state.report.skipped += Int(arrival - expected)
                        expected = arrival + 1
                    }
                }
                // How long after the first arrival it waited for was acknowledged did it answer?
                if let acknowledged = state.acknowledgedAt[cursor + 1] {
                    let late = answered - max(asked, acknowledged)
                    state.report.longestWakeMilliseconds = max(state.report.longestWakeMilliseconds, late.seconds * 1000)
                    if late > plan.wakeBound { state.report.lateWakes += 1 }
                }
            }
            cursor = UInt64(next)
            TailCursors.shared.set(id, cursor)
        }
    }

    /// Every segment the account holds now: arrival by `node/sequence`.
    private static func storedArrivals(port: Int, token: String) async throws -> [String: UInt64] {
        var stored: [String: UInt64] = [:]
        var cursor = 0
        while true {
            let answer = try await rawRequest(port: port, method: "GET", path: "/v1/accounts/chaos/segments?after=\(cursor)&limit=1000", token: token)
            guard let object = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
                let segments = object["segments"] as? [[String: Any]], let next = object["cursor"] as? Int
            else { throw PostgresServerError("the final pull failed: \(answer.status) \(answer.text)") }
            for segment in segments {
                if let node = segment["node"] as? String, let first = segment["first"] as? Int, let arrival = segment["arrival"] as? Int {
                    stored["\(node)/\(first)"] = UInt64(arrival)
                }
            }
            if segments.isEmpty { return stored }
            cursor = next
        }
    }
}

/// The tailers' cursors, to know when all of them caught up.
private final class TailCursors: Sendable {
    static let shared = TailCursors()
    private let cursors = Mutex<[UInt64]>([])

    func register() -> Int {
        cursors.withLock {
            $0.append(0)
            return $0.count - 1
        }
    }

    func set(_ id: Int, _ cursor: UInt64) { cursors.withLock { $0[id] = cursor } }

    func minimum(count: Int) -> UInt64 { cursors.withLock { $0.count < count ? 0 : ($0.min() ?? 0) } }

    func reset() { cursors.withLock { $0 = [] } }
}

extension Duration {
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
