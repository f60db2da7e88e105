import Dispatch
import Synchronization

/// The one way a thread of ours waits for another to tell it something — new work, a round finished, a
/// stop — always with a deadline. A wake-up means "look again": signals that come while nobody waits are
/// kept as one, so a waiter that looks at its state after each wake-up never misses a change made before
/// a signal, and never sleeps through one.
public final class Wakeup: Sendable {
    private let pending = Atomic<Bool>(false)
    private let semaphore = DispatchSemaphore(value: 0)

    public init() {}

    /// Wakes the waiter, or the next wait if nobody waits now.
    public func signal() {
        if !pending.exchange(true, ordering: .acquiringAndReleasing) { semaphore.signal() }
    }

    /// Waits until signalled or until `timeout` has passed; whether it was signalled.
    @discardableResult
    public func wait(timeout: Duration) -> Bool {
        let nanoseconds = max(0, timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
        guard semaphore.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds))) == .success else { return false }
        pending.store(false, ordering: .releasing)
        return true
    }

    /// Waits until signalled or until `deadline`; whether it was signalled.
    @discardableResult
    public func wait(until deadline: ContinuousClock.Instant) -> Bool {
        wait(timeout: deadline - ContinuousClock.now)
    }

    /// Waits until `condition` holds, looking again after each signal; false when `timeout` passes first.
    public func wait(timeout: Duration, until condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            wait(until: deadline)
        }
        return true
    }
}

/// Waiting on what no signal announces — another process letting go of a file, a descriptor closing —
/// by looking every `interval` until a deadline. The one polling loop of the package.
public enum Poll {
    /// Whether `condition` held before `timeout` passed, looking every `interval`.
    public static func until(timeout: Duration, every interval: Duration, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { return false }
            let micros = interval.components.seconds * 1_000_000 + interval.components.attoseconds / 1_000_000_000_000
            Pause.microseconds(UInt32(clamping: max(micros, 100)))
        }
        return true
    }

    /// Runs `body` again while it throws an error `retry` accepts, every `interval`, until `timeout`; then
    /// its last error.
    public static func retrying<T>(timeout: Duration, every interval: Duration, while retry: (any Error) -> Bool, _ body: () throws -> T) throws -> T {
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                return try body()
            } catch where retry(error) && ContinuousClock.now < deadline {
                let micros = interval.components.seconds * 1_000_000 + interval.components.attoseconds / 1_000_000_000_000
                Pause.microseconds(UInt32(clamping: max(micros, 100)))
            }
        }
    }
}
