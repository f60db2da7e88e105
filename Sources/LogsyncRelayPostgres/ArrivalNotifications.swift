import Foundation
import Logging
import LogsyncRelay
import PostgresNIO
import Synchronization

/// Wake-ups across relays (docs/relay-protocol.md, "Several relays on one database"). A notification is
/// only a hint: it is sent after the pushes it tells of committed (never inside their transaction, where
/// NOTIFY would take PostgreSQL's global notify lock at every commit), coalesced, and may be lost — a
/// listener that reconnects misses what was sent meanwhile. What makes a wake-up certain is the re-check:
/// after every (re)LISTEN and every ``PostgresConnectionSettings/recheckMilliseconds``, each account with
/// waiting long-polls is read from the database and its latest arrival announced.
///
/// The channel is `logsync`; each payload is lines: `a MICROS` (when it was sent, for the wake lag),
/// then `ACCOUNT ARRIVAL` per account, `d` (a segment was deleted) and `c` (a token was revoked or an
/// account deleted: forget the tokens found valid).
enum ArrivalChannel {
    static let name = "logsync"
    /// PostgreSQL's limit on a payload is 8,000 bytes.
    static let payloadBytes = 7_900

    static func microseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000_000) }

    /// The payloads that tell of `arrivals` (and a deletion), each under the size limit.
    static func payloads(arrivals: [String: UInt64], deleted: Bool) -> [String] {
        let header = "a \(microseconds())\n"
        var payloads: [String] = []
        var current = header + (deleted ? "d\n" : "")
        for (account, arrival) in arrivals.sorted(by: { $0.key < $1.key }) {
            let line = "\(account) \(arrival)\n"
            if current.utf8.count + line.utf8.count > payloadBytes {
                payloads.append(current)
                current = header
            }
            current += line
        }
        if current != header || payloads.isEmpty { payloads.append(current) }
        return payloads
    }

    struct Parsed: Equatable {
        var sentMicroseconds: Int64?
        var arrivals: [(account: String, arrival: UInt64)] = []
        var deleted = false
        var credentials = false

        static func == (lhs: Parsed, rhs: Parsed) -> Bool {
            lhs.sentMicroseconds == rhs.sentMicroseconds && lhs.deleted == rhs.deleted && lhs.credentials == rhs.credentials
                && lhs.arrivals.map(\.account) == rhs.arrivals.map(\.account) && lhs.arrivals.map(\.arrival) == rhs.arrivals.map(\.arrival)
        }
    }

    /// What a payload says; lines it does not know are skipped (a newer relay's).
    static func parse(_ payload: String) -> Parsed {
        var parsed = Parsed()
        for line in payload.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, fields[0] == "a", let micros = Int64(fields[1]) {
                parsed.sentMicroseconds = micros
            } else if fields.count == 1, fields[0] == "d" {
                parsed.deleted = true
            } else if fields.count == 1, fields[0] == "c" {
                parsed.credentials = true
            } else if fields.count == 2, let arrival = UInt64(fields[1]), RelayNames.accountProblem(String(fields[0])) == nil {
                parsed.arrivals.append((String(fields[0]), arrival))
            }
        }
        return parsed
    }
}

/// What this relay stored and has not yet told the others, sent by ``run(client:logger:)`` at once after
/// a quiet spell, and under load at most once per ``tick``: each NOTIFY is a transaction that takes
/// PostgreSQL's notify lock, and every relay hears every one.
final class ArrivalHints: Sendable {
    static let tick = Duration.milliseconds(5)

    private struct State {
        var arrivals: [String: UInt64] = [:]
        var deleted = false
        var sender: CheckedContinuation<Void, Never>?
        var sent = 0
        var failures = 0
    }

    private let state = Mutex(State())

    var sentNotifications: Int { state.withLock { $0.sent } }

    func arrived(account: String, arrival: UInt64) {
        let sender = state.withLock { state in
            state.arrivals[account] = max(state.arrivals[account] ?? 0, arrival)
            defer { state.sender = nil }
            return state.sender
        }
        sender?.resume()
    }

    func deleted() {
        let sender = state.withLock { state in
            state.deleted = true
            defer { state.sender = nil }
            return state.sender
        }
        sender?.resume()
    }

    /// Sends until cancelled. A failed send keeps its hints for the next attempt (the re-check on the
    /// other relays covers the time in between).
    func run(client: PostgresClient, logger: Logger) async {
        while !Task.isCancelled {
            let pending: (arrivals: [String: UInt64], deleted: Bool)? = state.withLock { state in
                guard !state.arrivals.isEmpty || state.deleted else { return nil }
                defer { (state.arrivals, state.deleted) = ([:], false) }
                return (state.arrivals, state.deleted)
            }
            guard let pending else {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let now: Bool = state.withLock { state in
                            if !state.arrivals.isEmpty || state.deleted { return true }
                            state.sender = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    let sender = state.withLock { state in
                        defer { state.sender = nil }
                        return state.sender
                    }
                    sender?.resume()
                }
                continue
            }
            let payloads = ArrivalChannel.payloads(arrivals: pending.arrivals, deleted: pending.deleted)
            do {
                try await PostgresFailures.withDeadline(seconds: 5) {
                    try await client.query("SELECT pg_notify(\(ArrivalChannel.name), p) FROM unnest(\(payloads)::text[]) AS p", logger: logger)
                }
                state.withLock { $0.sent += payloads.count }
            } catch {
                let failures = state.withLock { state in
                    for (account, arrival) in pending.arrivals { state.arrivals[account] = max(state.arrivals[account] ?? 0, arrival) }
                    state.deleted = state.deleted || pending.deleted
                    state.failures += 1
                    return state.failures
                }
                if failures == 1 || failures % 100 == 0 {
                    logger.warning("could not notify the other relays of new arrivals (\(failures) times): \(PostgresFailures.relayError(error, "notifying"))")
                }
                try? await Task.sleep(for: .milliseconds(200))
            }
            try? await Task.sleep(for: Self.tick)
        }
    }
}

/// How late notifications arrive (sent → heard), and how many wake-ups the re-check found.
final class WakeStatistics: Sendable {
    private struct State {
        var count = 0
        var sum = 0.0
        var maximum = 0.0
        var rechecks = 0
        var recheckAnnouncements = 0
        var listens = 0
        var listening = false
    }

    private let state = Mutex(State())

    func heard(sentMicroseconds: Int64) {
        let lag = max(0, Double(ArrivalChannel.microseconds() - sentMicroseconds) / 1e6)
        state.withLock { state in
            state.count += 1
            state.sum += lag
            state.maximum = max(state.maximum, lag)
        }
    }

    func listening(_ on: Bool) {
        state.withLock { state in
            if on { state.listens += 1 }
            state.listening = on
        }
    }

    func rechecked(announced: Int) {
        state.withLock { state in
            state.rechecks += 1
            state.recheckAnnouncements += announced
        }
    }

    var gauges: [(name: String, help: String, value: Double)] {
        let state = state.withLock { $0 }
        return [
            ("relay_wake_lag_seconds_sum", "Time from another relay's notification to this relay hearing it, summed.", state.sum),
            ("relay_wake_lag_seconds_count", "Notifications heard from the relays on the same database.", Double(state.count)),
            ("relay_wake_lag_seconds_max", "The longest such time since start.", state.maximum),
            ("relay_listening", "1 while this relay's LISTEN session is up.", state.listening ? 1 : 0),
            ("relay_listen_sessions_total", "LISTEN sessions started (the first and every reconnection).", Double(state.listens)),
            ("relay_rechecks_total", "Re-checks of every waiting account against the database.", Double(state.rechecks)),
            ("relay_recheck_announcements_total", "Accounts announced by those re-checks.", Double(state.recheckAnnouncements)),
        ]
    }
}
