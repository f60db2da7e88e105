import Synchronization

/// What tells a relay of arrivals it did not store itself: other relays on the same database
/// (``ArrivalSource``). It wakes the long-polls that wait for them.
public protocol ArrivalSink: Sendable {
    /// `account` has arrivals up to `arrival`: wakes its long-polls waiting after a lower cursor.
    func announce(account: String, arrival: UInt64)
    /// A segment was deleted somewhere: pull answers encoded before are not reused.
    func noteDeletion()
    /// The accounts that have long-polls waiting now, to check their latest arrivals.
    var waitingAccounts: [String] { get }
}

/// A storage that other relays write to as well: `deliverArrivals(to:)` runs as long as the relay serves
/// and announces what the others stored (docs/relay-protocol.md, "Several relays on one database").
public protocol ArrivalSource: Sendable {
    func deliverArrivals(to sink: any ArrivalSink) async
}

/// Where long-polls wait for pushes: a pull with `wait` that finds nothing registers here, and the push
/// that stores the next segment of its account wakes it. Bounded: past ``maximumWaiters`` a long-poll is
/// refused (503) rather than queued. A waiter is woken only by an arrival after its cursor, so that
/// announcing an account's latest arrival again (a periodic re-check) wakes nobody who has it.
///
/// Timeouts are kept by one sweeping task while anyone waits, every ``sweepInterval``, not by a task
/// per waiter: an idle long-poll holds its connection's task and nothing more (`docs/BENCHMARKS.md`,
/// memory per idle long-poll). A long-poll ends at most one interval after its timeout.
final class ArrivalBoard: ArrivalSink, Sendable {
    let maximumWaiters: Int
    private let state = Mutex(State())
    static let sweepInterval = Duration.milliseconds(100)

    private struct Entry {
        var cursor: UInt64
        var waiter: Waiter
        var deadline: ContinuousClock.Instant
    }

    private struct State {
        /// The latest arrival announced per account since start-up.
        var latest: [String: UInt64] = [:]
        var waiters: [String: [Int: Entry]] = [:]
        var count = 0
        var nextID = 0
        /// Segments deleted so far, here or (told by an ``ArrivalSource``) on other relays.
        var deletions = 0
        /// Whether the sweeping task runs.
        var sweeping = false
    }

    private enum Waiter {
        /// Registered, its task not yet suspended.
        case registered
        case suspended(CheckedContinuation<Bool, Never>)
        /// Woken (true: something arrived) before its task suspended.
        case woken(Bool)
    }

    init(maximumWaiters: Int) {
        self.maximumWaiters = maximumWaiters
    }

    var waiting: Int { state.withLock { $0.count } }

    var waitingAccounts: [String] { state.withLock { Array($0.waiters.keys) } }

    var deletions: Int { state.withLock { $0.deletions } }

    /// Whether the sweeping task runs (it stops once nobody waits).
    var isSweeping: Bool { state.withLock { $0.sweeping } }

    func noteDeletion() { state.withLock { $0.deletions += 1 } }

    /// The latest arrival announced for `account` since start-up, if any.
    func latest(account: String) -> UInt64? { state.withLock { $0.latest[account] } }

    /// Records that `account` now has arrivals up to `arrival`, and wakes its long-polls waiting after a
    /// lower cursor.
    func announce(account: String, arrival: UInt64) {
        let woken: [CheckedContinuation<Bool, Never>] = state.withLock { state in
            state.latest[account] = max(state.latest[account] ?? 0, arrival)
            guard var waiters = state.waiters[account] else { return [] }
            var continuations: [CheckedContinuation<Bool, Never>] = []
            for (id, entry) in waiters where entry.cursor < arrival {
                switch entry.waiter {
                case .suspended(let continuation):
                    continuations.append(continuation)
                    waiters[id] = nil
                    state.count -= 1
                case .registered:
                    waiters[id]?.waiter = .woken(true)
                case .woken:
                    break
                }
            }
            state.waiters[account] = waiters.isEmpty ? nil : waiters
            return continuations
        }
        for continuation in woken { continuation.resume(returning: true) }
    }

    /// Waits until an arrival after `cursor` is announced for `account` (true), or `timeout` passes or the
    /// task is cancelled (false). Throws ``RelayError/Code/busy`` when too many long-polls wait already.
    func wait(account: String, after cursor: UInt64, timeout: Duration) async throws(RelayError) -> Bool {
        let id: Int? = try state.withLock { state throws(RelayError) -> Int? in
            if let latest = state.latest[account], latest > cursor { return nil }
            guard state.count < maximumWaiters else {
                throw RelayError(.busy, "\(maximumWaiters) long-polls are waiting already (max_waiting_polls): retry shortly", retryAfter: 1)
            }
            state.nextID += 1
            state.count += 1
            state.waiters[account, default: [:]][state.nextID] = Entry(cursor: cursor, waiter: .registered, deadline: .now + timeout)
            return state.nextID
        }
        guard let id else { return true }
        startSweeping()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let resumeNow: Bool? = state.withLock { state in
                    switch state.waiters[account]?[id]?.waiter {
                    case .registered?:
                        state.waiters[account]?[id]?.waiter = .suspended(continuation)
                        return nil
                    case .woken(let arrived)?:
                        state.waiters[account]?[id] = nil
                        if state.waiters[account]?.isEmpty == true { state.waiters[account] = nil }
                        state.count -= 1
                        return arrived
                    case .suspended?, nil:
                        return false
                    }
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            finish(account: account, id: id, arrived: false)
        }
    }

    /// Starts the sweeping task unless it runs: it ends the waits whose deadline passed, and stops once
    /// nobody waits.
    private func startSweeping() {
        guard state.withLock({ state in
            defer { state.sweeping = true }
            return !state.sweeping
        }) else { return }
        Task { [weak self] in
            while let board = self, board.sweep() {
                try? await Task.sleep(for: Self.sweepInterval)
            }
        }
    }

    /// Ends the waits whose deadline passed; false (and the sweeping stops) once nobody waits.
    private func sweep() -> Bool {
        let now = ContinuousClock.now
        let expired: [(String, Int)] = state.withLock { state in
            var expired: [(String, Int)] = []
            for (account, waiters) in state.waiters {
                for (id, entry) in waiters where entry.deadline <= now { expired.append((account, id)) }
            }
            return expired
        }
        for (account, id) in expired { finish(account: account, id: id, arrived: false) }
        return state.withLock { state in
            if state.count == 0 { state.sweeping = false }
            return state.sweeping
        }
    }

    private func finish(account: String, id: Int, arrived: Bool) {
        let continuation: CheckedContinuation<Bool, Never>? = state.withLock { state in
            switch state.waiters[account]?[id]?.waiter {
            case .suspended(let continuation)?:
                state.waiters[account]?[id] = nil
                if state.waiters[account]?.isEmpty == true { state.waiters[account] = nil }
                state.count -= 1
                return continuation
            case .registered?:
                state.waiters[account]?[id]?.waiter = .woken(arrived)
                return nil
            case .woken?, nil:
                return nil
            }
        }
        continuation?.resume(returning: arrived)
    }
}
