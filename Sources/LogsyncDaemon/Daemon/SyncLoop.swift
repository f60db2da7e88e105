import Foundation
import LogsyncPlatform
import LogsyncSync

/// Runs sync rounds on its own thread, one at a time: whenever woken (a local commit, an arrival in the
/// shared folder, a trigger), and again after failures with exponential backoff.
///
/// A trigger waits for a round that *starts after* it was asked for, so it never returns on a round that
/// began before the data it cares about existed.
final class SyncLoop: @unchecked Sendable {
    enum Outcome {
        case completed(SyncReport, SyncSummary)
        case failed(any Error, SyncSummary)
    }

    private let condition = NSCondition()
    private var pending = true
    private var stopping = false
    private var started = 0
    private var finished = 0
    private var outcomes: [Int: Outcome] = [:]
    private var backoffUntil: Date?
    private var failures = 0
    private(set) var running = false

    private var engine: SyncEngine
    private var maximumBackoff: TimeInterval
    private let onRound: @Sendable (Outcome) -> Void
    private let onStart: @Sendable (Int) -> Void
    /// Called from the loop's own thread at least every `heartbeatInterval`: if the loop hangs, the
    /// heartbeats (systemd's watchdog pings) stop.
    private let heartbeat: @Sendable () -> Void
    private let heartbeatInterval: TimeInterval
    private var thread: Thread?

    init(
        engine: SyncEngine, maximumBackoffMilliseconds: Int, heartbeatInterval: TimeInterval = 3_600,
        heartbeat: @escaping @Sendable () -> Void = {}, onStart: @escaping @Sendable (Int) -> Void,
        onRound: @escaping @Sendable (Outcome) -> Void
    ) {
        self.engine = engine
        self.maximumBackoff = Double(maximumBackoffMilliseconds) / 1000
        self.heartbeat = heartbeat
        self.heartbeatInterval = heartbeatInterval
        self.onStart = onStart
        self.onRound = onRound
    }

    /// New settings from a reload; the round in progress finishes with the old ones.
    func reconfigure(engine: SyncEngine, maximumBackoffMilliseconds: Int) {
        condition.withLock {
            self.engine = engine
            self.maximumBackoff = Double(maximumBackoffMilliseconds) / 1000
        }
    }

    func start() {
        let thread = Thread { [self] in loop() }
        thread.name = "syncd.sync-loop"
        self.thread = thread
        thread.start()
    }

    /// Asks for a round soon (coalesced with other requests). Ignored while backing off after a failure.
    func wake() {
        condition.withLock {
            pending = true
            condition.broadcast()
        }
    }

    /// Runs a round now (also during backoff) and waits for it; nil on timeout.
    func trigger(timeout: TimeInterval) -> Outcome? {
        condition.lock()
        defer { condition.unlock() }
        let wanted = started + 1
        pending = true
        backoffUntil = nil
        condition.broadcast()
        let deadline = Date().addingTimeInterval(timeout)
        while finished < wanted, !stopping {
            guard condition.wait(until: deadline) else { return nil }
        }
        return outcomes[wanted] ?? outcomes[finished]
    }

    /// Milliseconds until the next retry, while backing off.
    var retryIn: Int? {
        condition.withLock { backoffUntil.map { max(0, Int($0.timeIntervalSinceNow * 1000)) } }
    }

    /// Lets the round in progress finish, then ends the loop; returns when it has ended.
    func stop() {
        condition.withLock {
            stopping = true
            condition.broadcast()
        }
        while condition.withLock({ running }) { usleep(1_000) }
    }

    private func loop() {
        condition.withLock { running = true }
        defer { condition.withLock { running = false; condition.broadcast() } }
        while true {
            heartbeat()
            condition.lock()
            var nextBeat = Date().addingTimeInterval(heartbeatInterval)
            while !stopping, !pending || (backoffUntil.map { $0 > Date() } ?? false) {
                // Sleep until the next heartbeat, or the end of the backoff when a round is waiting for it.
                let wakeAt = pending ? min(backoffUntil ?? nextBeat, nextBeat) : nextBeat
                _ = condition.wait(until: wakeAt)
                if Date() >= nextBeat {
                    condition.unlock()
                    heartbeat()
                    condition.lock()
                    nextBeat = Date().addingTimeInterval(heartbeatInterval)
                }
            }
            if stopping {
                condition.unlock()
                return
            }
            pending = false
            started += 1
            let round = started
            let engine = self.engine
            condition.unlock()
            if round > 1 { FaultInjection.hang("loop.hang") }

            onStart(round)
            let begin = Int64(WallClock.milliseconds())
            let outcome: Outcome
            do {
                let report = try engine.sync()
                outcome = .completed(report, SyncSummary(
                    round: round, startedAt: begin, finishedAt: Int64(WallClock.milliseconds()), ok: true,
                    published: report.published.count, appliedSegments: report.applied.count,
                    appliedTransactions: report.appliedTransactions, error: nil))
            } catch {
                outcome = .failed(error, SyncSummary(
                    round: round, startedAt: begin, finishedAt: Int64(WallClock.milliseconds()), ok: false,
                    published: 0, appliedSegments: 0, appliedTransactions: 0, error: String(describing: error)))
            }
            condition.withLock {
                finished = round
                outcomes[round] = outcome
                outcomes = outcomes.filter { $0.key > round - 16 }
                switch outcome {
                case .completed:
                    failures = 0
                    backoffUntil = nil
                case .failed:
                    failures += 1
                    let delay = min(maximumBackoff, 0.5 * pow(2, Double(min(failures - 1, 16))))
                    backoffUntil = Date().addingTimeInterval(delay)
                    pending = true
                }
                condition.broadcast()
            }
            onRound(outcome)
        }
    }
}
