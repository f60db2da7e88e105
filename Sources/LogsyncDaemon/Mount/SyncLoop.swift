import Foundation
import LogsyncControl
import LogsyncPlatform
import LogsyncStore
import LogsyncSync
import Synchronization

/// Runs sync rounds on its own thread, one at a time: whenever woken (a local commit, an arrival in the
/// shared folder, a trigger), and again after failures with exponential backoff.
///
/// A trigger waits for a round that *starts after* it was asked for, so it never returns on a round that
/// began before the data it cares about existed. Every wait has a deadline, and ``stop(within:)`` asks
/// the round in progress to end at its next safe point (between import batches).
///
/// A round that finds the store damaged (SQLite reports corruption) halts the loop: no more rounds, so
/// that nothing read from a damaged store is exported to other nodes. ``halt(_:)`` does the same when
/// `syncctl check` finds damage.
final class SyncLoop: Sendable {
    enum Outcome: Sendable {
        case completed(SyncReport, SyncSummary)
        case failed(String, SyncSummary)
    }

    private struct State {
        var pending = true
        var stopping = false
        var started = 0
        var finished = 0
        var outcomes: [Int: Outcome] = [:]
        var backoffUntil: ContinuousClock.Instant?
        var failures = 0
        var running = false
        /// Why the loop no longer syncs (a damaged store), when it does not.
        var halted: String?
        /// Asks the round in progress to stop; cancelled by a halt or a stop, replaced when another store
        /// is attached after a halt.
        var cancellation = Cancellation()
        /// nil while no store is mounted (an account switch, or the local store): no rounds run.
        var engine: SyncEngine?
        /// A round is running (with the engine it was given).
        var inRound = false
        var maximumBackoff: Duration
        /// Callers waiting for a round to end, a stop, or the loop's thread to end.
        var waiters: [Int: Wakeup] = [:]
        var nextWaiter = 0

        /// Wakes every waiting caller (they check what they wait for themselves).
        func wakeWaiters() {
            for waiter in waiters.values { waiter.signal() }
        }
    }

    private let state: Mutex<State>
    /// Signalled whenever there may be something for the loop's thread to do.
    private let wakeup = Wakeup()
    /// Called from the loop's own thread at least every `heartbeatInterval`: if the loop hangs, the
    /// heartbeats (systemd's watchdog pings) stop.
    private let heartbeat: @Sendable () -> Void
    private let heartbeatInterval: Duration

    init(engine: SyncEngine?, maximumBackoffMilliseconds: Int, heartbeatInterval: Duration = .seconds(3_600), heartbeat: @escaping @Sendable () -> Void = {}) {
        state = Mutex(State(engine: engine, maximumBackoff: .milliseconds(maximumBackoffMilliseconds)))
        self.heartbeat = heartbeat
        self.heartbeatInterval = heartbeatInterval
    }

    /// New settings from a reload; the round in progress finishes with the old ones.
    func reconfigure(engine: SyncEngine?, maximumBackoffMilliseconds: Int) {
        state.withLock { state in
            if state.engine != nil { state.engine = engine }
            state.maximumBackoff = .milliseconds(maximumBackoffMilliseconds)
        }
    }

    /// Stops running rounds on the current engine (an account switch lets go of its store): no round
    /// starts after this, and it waits up to `timeout` for the one in progress to end. Returns whether
    /// no round runs any more.
    func detach(within timeout: Duration) -> Bool {
        state.withLock { $0.engine = nil }
        return waitFor(timeout: timeout) { !$0.inRound } ?? false
    }

    /// Waits until `condition` holds of the loop's state, looking again whenever a round ends, the loop
    /// stops or halts; true when it held, nil when `timeout` passed first.
    private func waitFor(timeout: Duration, _ condition: @escaping (State) -> Bool) -> Bool? {
        let waiter = Wakeup()
        let id = state.withLock { state in
            state.nextWaiter += 1
            state.waiters[state.nextWaiter] = waiter
            return state.nextWaiter
        }
        defer { _ = state.withLock { $0.waiters.removeValue(forKey: id) } }
        return waiter.wait(timeout: timeout) { state.withLock { condition($0) } } ? true : nil
    }

    /// Runs rounds on `engine` from now on, starting with one at once. An account switch attaches
    /// another store, so a halt (which was about the store let go of) ends here.
    func attach(_ engine: SyncEngine) {
        state.withLock { state in
            state.engine = engine
            if state.halted != nil, !state.stopping {
                state.halted = nil
                state.cancellation = Cancellation()
            }
            state.pending = true
            state.failures = 0
            state.backoffUntil = nil
        }
        wakeup.signal()
    }

    /// Starts the loop's thread; `onStart` and `onRound` are called on it before and after each round.
    func start(onStart: @escaping @Sendable (Int) -> Void, onRound: @escaping @Sendable (Outcome) -> Void) {
        state.withLock { $0.running = true }
        let thread = Thread { [self] in
            loop(onStart: onStart, onRound: onRound)
            state.withLock { state in
                state.running = false
                state.wakeWaiters()
            }
        }
        thread.name = "syncd.sync-loop"
        thread.start()
    }

    /// Asks for a round soon (coalesced with other requests). Ignored while backing off after a failure.
    func wake() {
        state.withLock { $0.pending = true }
        wakeup.signal()
    }

    /// Runs a round now (also during backoff) and waits up to `timeout` for it; nil on timeout or when
    /// the loop stops first. A halted loop answers at once with why.
    func trigger(timeout: Duration) -> Outcome? {
        let (wanted, halted) = state.withLock { state in
            state.pending = true
            state.backoffUntil = nil
            return (state.started + 1, state.halted)
        }
        if let halted {
            let now = Int64(WallClock.milliseconds())
            return .failed(halted, SyncSummary(round: 0, startedAt: now, finishedAt: now, ok: false, published: 0, appliedSegments: 0, appliedTransactions: 0, error: halted))
        }
        wakeup.signal()
        guard waitFor(timeout: timeout, { $0.finished >= wanted || $0.stopping || !$0.running }) != nil else { return nil }
        return state.withLock { state in state.finished >= wanted ? state.outcomes[wanted] ?? state.outcomes[state.finished] : nil }
    }

    /// Milliseconds until the next retry, while backing off.
    var retryIn: Int? {
        state.withLock { state in
            state.backoffUntil.map { until in
                let left = until - ContinuousClock.now
                return left > .zero ? Int(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000) : 0
            }
        }
    }

    /// Why the loop no longer syncs, when it was halted.
    var halted: String? { state.withLock { $0.halted } }

    /// Stops syncing on this store (until syncd restarts, or an account switch attaches another store): a
    /// damaged store must not spread. The round in progress is asked to stop.
    func halt(_ reason: String) {
        let cancellation = state.withLock { state in
            if state.halted == nil { state.halted = reason }
            state.wakeWaiters()
            return state.cancellation
        }
        cancellation.cancel()
        wakeup.signal()
    }

    /// Asks the round in progress to stop at its next safe point and ends the loop; returns whether it
    /// ended within `seconds`. Stopping between batches loses nothing: each batch is committed with its
    /// cursor.
    @discardableResult
    func stop(within timeout: Duration) -> Bool {
        let cancellation = state.withLock { state in
            state.stopping = true
            state.wakeWaiters()
            return state.cancellation
        }
        cancellation.cancel()
        wakeup.signal()
        return waitFor(timeout: timeout) { !$0.running } ?? false
    }

    private enum Next {
        case stop
        case run(round: Int, engine: SyncEngine, cancellation: Cancellation)
        case sleep(until: ContinuousClock.Instant)
    }

    private func loop(onStart: @Sendable (Int) -> Void, onRound: @Sendable (Outcome) -> Void) {
        var nextBeat = ContinuousClock.now
        while true {
            let now = ContinuousClock.now
            if now >= nextBeat {
                heartbeat()
                nextBeat = now + heartbeatInterval
            }
            let next: Next = state.withLock { state in
                if state.stopping { return .stop }
                let backingOff = state.backoffUntil.map { $0 > now } ?? false
                guard state.halted == nil, state.pending, !backingOff, let engine = state.engine else {
                    // Sleep until the next heartbeat, or the end of the backoff when a round waits for it.
                    let until = state.pending && state.halted == nil && state.engine != nil ? min(state.backoffUntil ?? nextBeat, nextBeat) : nextBeat
                    return .sleep(until: until)
                }
                state.pending = false
                state.started += 1
                state.inRound = true
                return .run(round: state.started, engine: engine, cancellation: state.cancellation)
            }
            switch next {
            case .stop:
                return
            case .sleep(let until):
                wakeup.wait(until: until)
                continue
            case .run(let round, let engine, let cancellation):
                heartbeat()
                nextBeat = ContinuousClock.now + heartbeatInterval
                if round > 1 { FaultInjection.hang("loop.hang") }
                onStart(round)
                let outcome = run(round, engine, cancellation)
                state.withLock { state in
                    state.inRound = false
                    state.finished = round
                    state.outcomes[round] = outcome
                    state.outcomes = state.outcomes.filter { $0.key > round - 16 }
                    switch outcome {
                    case .completed:
                        state.failures = 0
                        state.backoffUntil = nil
                    case .failed:
                        state.failures += 1
                        let delay = min(state.maximumBackoff, .milliseconds(500) * (1 << min(state.failures - 1, 16)))
                        state.backoffUntil = ContinuousClock.now + delay
                        state.pending = true
                    }
                    state.wakeWaiters()
                }
                onRound(outcome)
            }
        }
    }

    /// Called (on another thread) when a round found the store restored from an older backup: the store
    /// took a new node id, and the engine of the old one is detached.
    private let restoredHandler = Mutex<(@Sendable (StoreRestored) -> Void)?>(nil)

    func onStoreRestored(_ handler: @escaping @Sendable (StoreRestored) -> Void) {
        restoredHandler.withLock { $0 = handler }
    }

    private func run(_ round: Int, _ engine: SyncEngine, _ cancellation: Cancellation) -> Outcome {
        let begin = Int64(WallClock.milliseconds())
        do {
            let report = try engine.sync(cancellation: cancellation)
            return .completed(report, SyncSummary(
                round: round, startedAt: begin, finishedAt: Int64(WallClock.milliseconds()), ok: true,
                published: report.published.count, appliedSegments: report.applied.count,
                appliedTransactions: report.appliedTransactions, error: nil))
        } catch {
            let message = String(describing: error)
            if let restored = error as? StoreRestored {
                state.withLock { state in if state.engine === engine { state.engine = nil } }
                if let handler = restoredHandler.withLock({ $0 }) { Thread.detachNewThread { handler(restored) } }
            }
            if Self.isCorruption(error) {
                halt("the store is damaged, so syncing stopped (nothing more is exported from it or applied to it): \(message). "
                     + "Run 'syncctl check' for details; restore the store from a backup, or move it aside and let syncd rebuild it from the shared folder")
            }
            return .failed(message, SyncSummary(
                round: round, startedAt: begin, finishedAt: Int64(WallClock.milliseconds()), ok: false,
                published: 0, appliedSegments: 0, appliedTransactions: 0, error: message))
        }
    }

    /// Whether SQLite said the store file is damaged (`SQLITE_CORRUPT`, `SQLITE_NOTADB`).
    static func isCorruption(_ error: any Error) -> Bool {
        switch error {
        case let error as StoreError: return error.code == .notADatabase || error.cause.map(isCorruption) == true
        case let error as SQLiteError: return error.isNotADatabase
        default: return false
        }
    }
}
